//! The release command (`tools/release/release.sh`) and the CHANGELOG check
//! (`tools/release/changelog-check.sh`) run on scratch clones of this repository: a cut release
//! agrees everywhere (Cargo.toml, Cargo.lock, every chart, CHANGELOG.md, the tag), bad input is
//! refused and changes nothing, and the CHANGELOG check judges branches, main, merges, the
//! `Changelog: none` trailer and a shallow clone. Starts no servers; the scripts are taken from
//! this working tree, the repository content from its last commit.

#[path = "common/scratch.rs"]
mod scratch;

use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Context as _, Result, ensure};
use scratch::{
    DEFAULT_IMAGE, RELEASE_DATE, Scratch, expect_ok, expect_refused, next_minor, run_ok,
    source_root, text,
};

/// The chart and version lines a cut must have set, for every chart.
fn assert_versions(s: &Scratch, charts: &[&str], version: &str) -> Result<()> {
    ensure!(s.cargo_version()? == version, "Cargo.toml not at {version}");
    let lock = s.read("Cargo.lock")?;
    let entry = format!("name = \"temporal-worker-controller\"\nversion = \"{version}\"\n");
    ensure!(lock.contains(&entry), "Cargo.lock not at {version}");
    for chart in charts {
        let yaml = s.read(&format!("charts/{chart}/Chart.yaml"))?;
        ensure!(
            yaml.lines().any(|l| l == format!("version: {version}")),
            "{chart}: version not {version}:\n{yaml}"
        );
        ensure!(
            yaml.lines()
                .any(|l| l == format!("appVersion: \"{version}\"")),
            "{chart}: appVersion not {version}:\n{yaml}"
        );
        // Artifact Hub's `images` annotation names the default image, tagged with appVersion.
        ensure!(
            !yaml.contains("artifacthub.io/images")
                || yaml
                    .lines()
                    .any(|l| l.trim() == format!("image: {DEFAULT_IMAGE}:{version}")),
            "{chart}: the artifacthub.io/images tag is not {version}:\n{yaml}"
        );
    }
    Ok(())
}

#[test]
fn next_minor_skips_a_pre_release() -> Result<()> {
    ensure!(next_minor("0.1.0")? == "0.2.0");
    ensure!(next_minor("1.4.2-rc.1")? == "1.5.0");
    ensure!(next_minor("1.2").is_err());
    Ok(())
}

#[test]
fn a_cut_release_agrees_everywhere() -> Result<()> {
    let s = Scratch::new("cut")?;
    // A second chart (as a CRD chart would be) is bumped with the first.
    let chart = s.read("charts/temporal-worker-controller/Chart.yaml")?;
    s.write(
        "charts/extra-crds/Chart.yaml",
        &chart.replace("name: temporal-worker-controller", "name: extra-crds"),
    )?;
    s.add_entry("the scratch copy's first fix")?;
    expect_ok(&s.release(&["--check"])?, "--check before the cut")?;
    let next = next_minor(&s.cargo_version()?)?;
    let rc = format!("{next}-rc.1");

    expect_ok(&s.release(&[&rc])?, "cutting the release candidate")?;
    assert_versions(&s, &["temporal-worker-controller", "extra-crds"], &rc)?;
    let below_rc = format!("{next}-alpha");
    expect_refused(
        &s.release(&[&below_rc])?,
        "is not greater",
        "alpha after rc",
    )?;

    s.add_entry("the scratch copy's second fix")?;
    let out = s.release(&[&next])?;
    expect_ok(&out, "cutting the release")?;
    // Every chart of the repository and the extra one.
    let charts = std::fs::read_dir(s.dir.join("charts"))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Chart.yaml").is_file())
        .count();
    ensure!(charts >= 2, "charts found: {charts}");
    let bumped = format!("{charts} chart(s)");
    ensure!(text(&out).contains(&bumped), "{}", text(&out));
    assert_versions(&s, &["temporal-worker-controller", "extra-crds"], &next)?;

    let check = s.release(&["--check"])?;
    expect_ok(&check, "--check after the cut")?;
    ensure!(
        text(&check).contains(&format!("tag v{next}")),
        "{}",
        text(&check)
    );

    // Unreleased is empty and heads the file; the new section holds what Unreleased had.
    let changelog = s.read("CHANGELOG.md")?;
    let expected = format!(
        "## [Unreleased]\n\n## [{next}] - {RELEASE_DATE}\n\n### Fixed\n- the scratch copy's second fix\n\n## [{rc}] - {RELEASE_DATE}\n\n### Fixed\n- the scratch copy's first fix\n"
    );
    ensure!(changelog.contains(&expected), "CHANGELOG.md:\n{changelog}");

    let head = s.git(&["rev-parse", "HEAD"])?;
    ensure!(s.git(&["rev-parse", &format!("v{next}^{{commit}}")])? == head);
    ensure!(s.git(&["log", "-1", "--format=%s"])? == format!("Release v{next}"));
    ensure!(
        s.git(&["status", "--porcelain"])?.is_empty(),
        "tree left dirty"
    );
    Ok(())
}

/// Nothing released yet (no tag, no release in CHANGELOG.md): the current version itself is
/// cut, once; an earlier one still is not, and a tag of any release makes it a later release.
#[test]
fn the_first_release_is_the_current_version() -> Result<()> {
    let s = Scratch::new("first")?;
    s.before_the_first_release()?;
    s.add_entry("the first release's fix")?;
    let current = s.cargo_version()?;

    // A tag of an earlier release means this is not the first.
    s.git(&["tag", "v0.0.1"])?;
    let before = s.state()?;
    expect_refused(
        &s.release(&[&current])?,
        "is not greater than the current version",
        "the current version after a tagged release",
    )?;
    ensure!(s.state()? == before, "a refused cut changed the repository");
    s.git(&["tag", "-d", "v0.0.1"])?;
    expect_refused(
        &s.release(&["0.0.1"])?,
        "is not greater than the current version",
        "a version below the current one",
    )?;

    let out = s.release(&[&current])?;
    expect_ok(&out, "the first release")?;
    ensure!(text(&out).contains("first release"), "{}", text(&out));
    assert_versions(&s, &["temporal-worker-controller"], &current)?;
    let changelog = s.read("CHANGELOG.md")?;
    let section = format!(
        "## [Unreleased]\n\n## [{current}] - {RELEASE_DATE}\n\n### Fixed\n- the first release's fix\n"
    );
    ensure!(changelog.contains(&section), "CHANGELOG.md:\n{changelog}");
    ensure!(s.git(&["tag", "--list"])? == format!("v{current}"));
    expect_ok(&s.release(&["--check"])?, "--check after the first release")?;

    // Once only: the same version again is a second release.
    s.add_entry("a later fix")?;
    expect_refused(
        &s.release(&[&current])?,
        "is not greater than the current version",
        "the first release twice",
    )?;
    Ok(())
}

#[test]
fn bad_input_is_refused_and_changes_nothing() -> Result<()> {
    let s = Scratch::new("refuse")?;
    s.add_entry("a fix")?;
    let current = s.cargo_version()?;
    let next = next_minor(&current)?;
    let before = s.state()?;
    let cases = [
        ("1.2".to_string(), "is not a semantic version"),
        ("01.2.3".to_string(), "is not a semantic version"),
        (format!("v{next}"), "without the leading v"),
        (format!("{next}+build.7"), "build metadata"),
        (
            "0.0.1".to_string(),
            "is not greater than the current version",
        ),
    ];
    for (version, message) in &cases {
        let version = version.as_str();
        expect_refused(&s.release(&[version])?, message, version)?;
        ensure!(s.state()? == before, "{version}: the repository changed");
    }
    expect_refused(
        &s.release(&[])?,
        "usage: tools/release/release.sh",
        "no argument",
    )?;
    expect_refused(
        &s.release(&["--frobnicate"])?,
        "unknown option",
        "an unknown flag",
    )?;

    // A dirty tree.
    let readme = s.read("README.md")?;
    s.write("README.md", &format!("{readme}\nlocal edit\n"))?;
    expect_refused(&s.release(&[&next])?, "uncommitted changes", "a dirty tree")?;
    s.git(&["checkout", "-q", "README.md"])?;

    // An existing tag.
    s.git(&["tag", &format!("v{next}")])?;
    expect_refused(&s.release(&[&next])?, "already exists", "an existing tag")?;
    s.git(&["tag", "-d", &format!("v{next}")])?;

    // Versions that already disagree.
    let chart = "charts/temporal-worker-controller/Chart.yaml";
    let yaml = s.read(chart)?;
    s.write(
        chart,
        &yaml.replace("appVersion:", "appVersion: \"9.9.9\"\n#"),
    )?;
    s.commit_all("chart drifts")?;
    expect_refused(
        &s.release(&[&next])?,
        "appVersion is '9.9.9'",
        "a drifted chart",
    )?;
    s.git(&["reset", "-q", "--hard", "HEAD~1"])?;

    // An empty Unreleased section: the state after a release with nothing added since.
    let changelog = s.read("CHANGELOG.md")?;
    let start = changelog.find("## [Unreleased]\n").context("Unreleased")? + 16;
    let end = changelog[start..]
        .find("\n## [")
        .map_or(changelog.len(), |i| start + i + 1);
    s.write(
        "CHANGELOG.md",
        &format!("{}\n{}", &changelog[..start], &changelog[end..]),
    )?;
    s.commit_all("empty Unreleased")?;
    let before = s.state()?;
    expect_refused(&s.release(&[&next])?, "Unreleased has no entries", "empty")?;
    ensure!(
        s.state()? == before,
        "empty Unreleased: the repository changed"
    );
    Ok(())
}

#[test]
fn check_names_what_disagrees() -> Result<()> {
    let s = Scratch::new("check")?;
    let current = s.cargo_version()?;
    expect_ok(&s.release(&["--check"])?, "--check on HEAD")?;

    let lock = s.read("Cargo.lock")?;
    let entry = format!("name = \"temporal-worker-controller\"\nversion = \"{current}\"");
    ensure!(lock.contains(&entry), "Cargo.lock has no {entry}");
    s.write(
        "Cargo.lock",
        &lock.replace(
            &entry,
            "name = \"temporal-worker-controller\"\nversion = \"7.7.7\"",
        ),
    )?;
    expect_refused(&s.release(&["--check"])?, "Cargo.lock", "a drifted lock")?;
    s.git(&["checkout", "-q", "Cargo.lock"])?;

    let changelog = s.read("CHANGELOG.md")?;
    s.write(
        "CHANGELOG.md",
        &changelog.replacen(
            "## [Unreleased]\n",
            "## [Unreleased]\n\n## [8.0.0] - 2030-01-01\n",
            1,
        ),
    )?;
    expect_refused(
        &s.release(&["--check"])?,
        "newest release is [8.0.0]",
        "a CHANGELOG ahead",
    )?;
    s.git(&["checkout", "-q", "CHANGELOG.md"])?;

    // A tag on HEAD that is not the version: a release cut by hand.
    s.git(&["tag", "v8.0.0"])?;
    expect_refused(
        &s.release(&["--check"])?,
        "HEAD is tagged v8.0.0",
        "a wrong tag",
    )?;
    Ok(())
}

fn changelog_check(s: &Scratch) -> Result<Output> {
    s.script("changelog-check.sh", &[])
}

/// Appends a comment line to a file of the scratch repository.
fn touch(s: &Scratch, file: &str) -> Result<()> {
    let old = s.read(file)?;
    s.write(file, &format!("{old}\n// touched by tests/release.rs\n"))
}

#[test]
fn changelog_check_judges_the_change() -> Result<()> {
    let s = Scratch::new("changelog")?;
    let main = s.git(&["rev-parse", "HEAD"])?;

    // A branch that changes src/ without a CHANGELOG line fails, against the merge base.
    s.git(&["checkout", "-q", "-b", "feature"])?;
    touch(&s, "src/lib.rs")?;
    s.commit_all("feature: code")?;
    let out = changelog_check(&s)?;
    expect_refused(&out, "src/lib.rs", "src change on a branch")?;
    ensure!(
        text(&out).contains("merge base with main"),
        "{}",
        text(&out)
    );
    // Uncommitted and later commits count: the CHANGELOG line may come last.
    s.add_entry("a user-visible fix")?;
    expect_ok(&changelog_check(&s)?, "branch with a CHANGELOG line")?;

    // The trailer is the escape for internal changes.
    s.git(&["checkout", "-q", "-b", "internal", &main])?;
    touch(&s, "charts/temporal-worker-controller/values.yaml")?;
    s.commit_all("refactor the chart\n\nChangelog: none")?;
    expect_ok(&changelog_check(&s)?, "a Changelog: none trailer")?;

    // Only docs: nothing to say.
    s.git(&["checkout", "-q", "-b", "docs", &main])?;
    touch(&s, "docs/architecture.md")?;
    s.commit_all("docs only")?;
    expect_ok(&changelog_check(&s)?, "a docs-only change")?;

    // On main: the previous commit; a merge brings in its branch's CHANGELOG line.
    s.git(&["checkout", "-q", "main"])?;
    s.git(&["merge", "-q", "--no-ff", "-m", "merge feature", "feature"])?;
    expect_ok(
        &changelog_check(&s)?,
        "main after merging a branch with a line",
    )?;
    touch(&s, "crds/workerdeployments.temporal.io.yaml")?;
    s.commit_all("crds on main")?;
    expect_refused(
        &changelog_check(&s)?,
        "crds/workerdeployments.temporal.io.yaml",
        "a crds change on main",
    )?;

    // A single-commit clone cannot tell: it passes, saying so.
    let shallow = s.dir.with_extension("shallow");
    let url = format!("file://{}", s.dir.display());
    run_ok(
        Command::new("git")
            .args(["clone", "-q", "--depth", "1", &url])
            .arg(&shallow),
    )?;
    let out = Command::new("bash")
        .arg(source_root().join("tools/release/changelog-check.sh"))
        .current_dir(&shallow)
        .env_remove("CHANGELOG_BASE")
        .output()?;
    let _ = std::fs::remove_dir_all(&shallow);
    expect_ok(&out, "a shallow clone")?;
    ensure!(text(&out).contains("shallow clone"), "{}", text(&out));
    Ok(())
}

/// The scripts exist where the README says (a moved script would make every case above fail with
/// a less obvious message).
#[test]
fn scripts_are_where_the_readme_says() -> Result<()> {
    let readme = std::fs::read_to_string(source_root().join("README.md"))?;
    for script in [
        "tools/release/release.sh",
        "tools/release/changelog-check.sh",
        "tools/release/artifacts.sh",
    ] {
        ensure!(
            Path::new(&source_root().join(script)).is_file(),
            "{script} missing"
        );
        ensure!(
            readme.contains(script),
            "README.md does not mention {script}"
        );
    }
    Ok(())
}
