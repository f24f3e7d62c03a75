//! The real `kubectl` against a kubeconfig, as a user at a terminal would run it.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result};

/// What one `kubectl` run returned.
#[derive(Clone, Debug)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    /// stdout then stderr, as a terminal shows them.
    pub text: String,
}

/// Runs `kubectl args…` with `KUBECONFIG=kubeconfig`, feeding `stdin` if given.
pub fn run(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<Output> {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl (is it on PATH?)")?;
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .context("kubectl stdin")?
            .write_all(input.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    Ok(Output {
        success: out.status.success(),
        stdout,
        text,
    })
}

/// `(success, stdout + stderr)` of `kubectl args…`.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<(bool, String)> {
    let out = run(kubeconfig, args, None)?;
    Ok((out.success, out.text))
}
