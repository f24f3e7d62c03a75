//! The process the kubelet stand-in runs for a process Pod, seen from the test machine through
//! `/proc/<pid>`: its environment, its user and group, whether its root file system is its
//! image's and read-only, and its log (its stdout, the Pod's `container.log`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail, ensure};

/// One container process.
#[derive(Clone, Debug)]
pub struct ContainerProcess {
    pub pid: u32,
    pub env: BTreeMap<String, String>,
}

impl ContainerProcess {
    /// The process whose `HOSTNAME` is `pod` and whose argv holds `arg` (e.g. `run`).
    pub fn of_pod(pod: &str, arg: &str) -> Result<ContainerProcess> {
        for entry in std::fs::read_dir("/proc")? {
            let dir = entry?.path();
            let Some(pid) = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
            else {
                continue;
            };
            let Ok(raw) = std::fs::read(dir.join("environ")) else {
                continue;
            };
            let env: BTreeMap<String, String> = raw
                .split(|b| *b == 0)
                .filter_map(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.to_string()))
                })
                .collect();
            let matches = std::fs::read(dir.join("cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()));
            if env.get("HOSTNAME").map(String::as_str) == Some(pod) && matches {
                return Ok(ContainerProcess { pid, env });
            }
        }
        bail!("no process runs Pod {pod}")
    }

    /// Its root as its own mount namespace sees it.
    pub fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.pid))
    }

    /// Real uid and gid.
    pub fn ids(&self) -> Result<(u32, u32)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let field = |name: &str| -> Result<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("{name} in /proc/{}/status", self.pid))
        };
        Ok((field("Uid:")?, field("Gid:")?))
    }

    /// Whether its `/` is mounted read-only (`/proc/<pid>/mountinfo`).
    pub fn root_read_only(&self) -> Result<bool> {
        let info = std::fs::read_to_string(format!("/proc/{}/mountinfo", self.pid))?;
        // The last mount at `/` is the one the process sees.
        let root = info
            .lines()
            .rev()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.get(4) == Some(&"/"))
            .context("no / in mountinfo")?;
        Ok(root.get(5).is_some_and(|o| o.split(',').any(|o| o == "ro")))
    }

    /// What it wrote to stdout so far (its stdout is the Pod's log file).
    pub fn log(&self) -> Result<String> {
        let file = std::fs::read_link(format!("/proc/{}/fd/1", self.pid))?;
        Ok(String::from_utf8_lossy(&std::fs::read(&file)?).into_owned())
    }

    /// The controller's `system_trust_roots` from its start log line (text or JSON, with or
    /// without ANSI colours).
    pub fn logged_trust_roots(&self) -> Result<usize> {
        let log = strip_ansi(&self.log()?);
        let at = log
            .find("system_trust_roots")
            .context("the controller logged no system_trust_roots")?;
        let digits: String = log[at + "system_trust_roots".len()..]
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .parse()
            .context("system_trust_roots without a number")
    }

    /// How many certificates a PEM bundle inside its root holds.
    pub fn certificates_in(&self, path: &str) -> Result<usize> {
        let file = self.root().join(path.trim_start_matches('/'));
        let pem = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
        Ok(pem.matches("-----BEGIN CERTIFICATE-----").count())
    }

    /// The checks of a controller Pod run from its image: uid and gid 65532, a read-only root
    /// that holds the binary and no shell, and as many system trust roots loaded as the bundle
    /// `bundle` (inside its root) holds.
    pub fn assert_runs_from_image(&self, bundle: &str) -> Result<()> {
        ensure!(self.ids()? == (65532, 65532), "uid/gid {:?}", self.ids()?);
        ensure!(self.root_read_only()?, "the root file system is writable");
        let root = self.root();
        ensure!(
            root.join("usr/local/bin/temporal-worker-controller")
                .is_file()
                && !root.join("bin/sh").exists(),
            "the process's root is not the image's"
        );
        let (logged, bundled) = (self.logged_trust_roots()?, self.certificates_in(bundle)?);
        ensure!(
            bundled > 0 && logged == bundled,
            "the controller loaded {logged} system trust roots; {bundle} holds {bundled}"
        );
        Ok(())
    }
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn colours_are_stripped() {
        let line = "\u{1b}[3msystem_trust_roots\u{1b}[0m\u{1b}[2m=\u{1b}[0m148";
        assert_eq!(super::strip_ansi(line), "system_trust_roots=148");
    }
}
