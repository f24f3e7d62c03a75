//! A scratch clone of this repository and the release scripts run in it, shared by
//! tests/release.rs (release.sh, changelog-check.sh) and tests/release_artifacts.rs (the
//! artifacts and the workflow). Included by path (`#[path = "common/scratch.rs"]`).

#![allow(dead_code)] // each test binary uses part of it

use std::path::PathBuf;
use std::process::{Command, Output};

use anyhow::{Context as _, Result, bail, ensure};

/// Fixed so that the expected CHANGELOG heading does not depend on the day the test runs.
pub const RELEASE_DATE: &str = "2030-01-02";
/// Where releases publish the image (README, "Releases"): the chart's default and Artifact Hub's.
pub const DEFAULT_IMAGE: &str = "ghcr.io/temporalio/temporal-worker-controller-rs";

pub fn source_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A throw-away clone of this repository's HEAD, on a local `main` branch.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(case: &str) -> Result<Scratch> {
        let parent = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let dir = parent.join(format!("release-{case}-{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        run_ok(
            Command::new("git")
                .args(["clone", "-q", "--no-tags"])
                .arg(source_root())
                .arg(&dir),
        )?;
        let s = Scratch { dir };
        s.git(&["checkout", "-q", "-B", "main"])?;
        s.git(&["config", "user.name", "Release Test"])?;
        s.git(&["config", "user.email", "release-test@example.invalid"])?;
        Ok(s)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn read(&self, file: &str) -> Result<String> {
        std::fs::read_to_string(self.path(file)).with_context(|| format!("reading {file}"))
    }

    pub fn write(&self, file: &str, text: &str) -> Result<()> {
        let path = self.path(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text).with_context(|| format!("writing {file}"))
    }

    pub fn git(&self, args: &[&str]) -> Result<String> {
        let out = run_ok(Command::new("git").arg("-C").arg(&self.dir).args(args))?;
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    }

    pub fn commit_all(&self, message: &str) -> Result<()> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", message]).map(drop)
    }

    /// Runs a script of `tools/release/` from this working tree in the scratch repository.
    pub fn script(&self, name: &str, args: &[&str]) -> Result<Output> {
        let script = source_root().join("tools/release").join(name);
        Ok(Command::new("bash")
            .arg(script)
            .args(args)
            .current_dir(&self.dir)
            .env("RELEASE_DATE", RELEASE_DATE)
            .env_remove("CHANGELOG_BASE")
            .output()?)
    }

    pub fn release(&self, args: &[&str]) -> Result<Output> {
        self.script("release.sh", args)
    }

    /// A line under Unreleased, committed, as a change would add it.
    pub fn add_entry(&self, line: &str) -> Result<()> {
        let text = self.read("CHANGELOG.md")?;
        let heading = "## [Unreleased]\n";
        ensure!(
            text.contains(heading),
            "CHANGELOG.md has no Unreleased heading"
        );
        let text = text.replacen(heading, &format!("{heading}\n### Fixed\n- {line}\n"), 1);
        self.write("CHANGELOG.md", &text)?;
        self.commit_all(&format!("CHANGELOG: {line}"))
    }

    /// CHANGELOG.md as before the first release: its Unreleased section and nothing after it,
    /// committed. Tags are not cloned.
    pub fn before_the_first_release(&self) -> Result<()> {
        let text = self.read("CHANGELOG.md")?;
        let start = text
            .find("## [Unreleased]\n")
            .context("no Unreleased heading")?;
        let end = text[start + 1..]
            .find("\n## [")
            .map_or(text.len(), |i| start + i + 2);
        if end == text.len() {
            return Ok(()); // nothing released yet
        }
        self.write("CHANGELOG.md", &text[..end])?;
        self.commit_all("CHANGELOG.md before the first release")
    }

    pub fn cargo_version(&self) -> Result<String> {
        let toml = self.read("Cargo.toml")?;
        let package = toml.split("[package]").nth(1).context("no [package]")?;
        field(package, "version = \"", "\"").context("no package version")
    }

    /// Everything that says which release this is, to compare before and after a refusal.
    pub fn state(&self) -> Result<String> {
        Ok(format!(
            "{}\n{}\n{}",
            self.git(&["rev-parse", "HEAD"])?,
            self.git(&["tag", "--list"])?,
            self.git(&["status", "--porcelain"])?
        ))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn run_ok(cmd: &mut Command) -> Result<Output> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", text(&out));
    }
    Ok(out)
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The text between the first `start` and the next `end` after it.
pub fn field(haystack: &str, start: &str, end: &str) -> Option<String> {
    let rest = &haystack[haystack.find(start)? + start.len()..];
    Some(rest[..rest.find(end)?].to_string())
}

/// The next minor version after `version` (MAJOR.MINOR.PATCH, a pre-release part ignored).
pub fn next_minor(version: &str) -> Result<String> {
    let core = version.split_once('-').map_or(version, |(core, _)| core);
    let parts: Vec<u64> = core
        .split('.')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{version} is not MAJOR.MINOR.PATCH"))?;
    ensure!(parts.len() == 3, "{version} is not MAJOR.MINOR.PATCH");
    Ok(format!("{}.{}.0", parts[0], parts[1] + 1))
}

pub fn expect_ok(out: &Output, what: &str) -> Result<()> {
    ensure!(out.status.success(), "{what} failed: {}", text(out));
    Ok(())
}

pub fn expect_refused(out: &Output, message: &str, what: &str) -> Result<()> {
    ensure!(!out.status.success(), "{what} was accepted: {}", text(out));
    ensure!(
        text(out).contains(message),
        "{what}: expected {message:?} in: {}",
        text(out)
    );
    Ok(())
}
