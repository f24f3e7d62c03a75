//! The release command's artifacts and the workflow that publishes them.
//!
//! `tools/release/release.sh --artifacts` runs on a scratch clone of this repository (the
//! scripts from this working tree, the content from its last commit), packaging the binary this
//! test build made (`--binary`: no second, release-profile build in CI). Every artifact must be
//! there, hold what it says, and match `SHA256SUMS`. `.github/workflows/release.yml` cannot run
//! here (`.ci/test` lints it with actionlint); it is checked to build nothing except through that
//! same command, with only the flags this test passes.
//!
//! Needs Helm (tools/helm/build.sh), cargo-sbom (tools/sbom/build.sh) and the image packaging's
//! tools (tools/image/package.sh): `.ci/setup-tests` installs all of them.

#[path = "common/scratch.rs"]
mod scratch;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, ensure};
use scratch::{DEFAULT_IMAGE, Scratch, expect_ok, expect_refused, next_minor, run_ok, text};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use test_harness::registry::Registry;

const WORKFLOW: &str = ".github/workflows/release.yml";
const RELEASE_COMMAND: &str = "tools/release/release.sh --artifacts";
/// The release command's flags the artifacts test passes; the workflow may use no other.
const TESTED_FLAGS: [&str; 5] = [
    "--binary",
    "--arch",
    "--image-tag",
    "--push-registry",
    "--plain-http",
];
/// The registry namespace the test pushes to, as the workflow pushes to ghcr.io/temporalio.
const NAMESPACE: &str = "releases";
const IMAGE_TAG: &str = "pushed-by-the-test";
/// What only the release command may do: a workflow step that says one of these builds or
/// packages something itself.
const BUILDING: [&str; 11] = [
    "cargo",
    "helm package",
    "helm push",
    "tools/image",
    "buildah",
    "skopeo copy",
    "docker build ",
    "buildx build",
    "tar ",
    "gzip",
    "sbom",
];

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_temporal-worker-controller"))
}

fn sha256_hex(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(bytes)))
}

/// `SHA256SUMS` names every other file of `out`, each with its digest.
fn assert_checksums(out: &Path) -> Result<BTreeSet<String>> {
    let sums = std::fs::read_to_string(out.join("SHA256SUMS"))?;
    let mut listed = BTreeSet::new();
    for line in sums.lines() {
        let (digest, name) = line.split_once("  ").context("not `<digest>  <name>`")?;
        ensure!(
            sha256_hex(&out.join(name))? == digest,
            "{name}: digest differs"
        );
        listed.insert(name.to_string());
    }
    let files: BTreeSet<String> = std::fs::read_dir(out)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    let expected: BTreeSet<String> = files.into_iter().filter(|f| f != "SHA256SUMS").collect();
    ensure!(
        listed == expected,
        "SHA256SUMS lists {listed:?}, the directory holds {expected:?}"
    );
    Ok(listed)
}

/// The CLI tarball: the binary as given, the kubectl plugin name linked to it, LICENSE, README.
fn assert_cli_tarball(tarball: &Path, top: &str) -> Result<()> {
    let listing = run_ok(Command::new("tar").arg("-tvzf").arg(tarball))?;
    let listing = String::from_utf8(listing.stdout)?;
    for want in [
        "-rwxr-xr-x 0/0".to_string(),
        format!("{top}/temporal-worker-controller"),
        format!("{top}/kubectl-temporal_workers -> temporal-worker-controller"),
        format!("{top}/LICENSE"),
        format!("{top}/README.md"),
    ] {
        ensure!(listing.contains(&want), "{want:?} not in:\n{listing}");
    }
    let inside = run_ok(
        Command::new("tar")
            .arg("-xOzf")
            .arg(tarball)
            .arg(format!("{top}/temporal-worker-controller")),
    )?;
    ensure!(
        inside.stdout == std::fs::read(binary())?,
        "the tarball's binary is not the one given"
    );
    Ok(())
}

/// The SBOM: SPDX 2.3, naming the controller and a dependency at the version Cargo.lock pins.
fn assert_sbom(path: &Path, version: &str, lock: &str) -> Result<()> {
    let sbom: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    ensure!(sbom["spdxVersion"] == "SPDX-2.3", "{}", sbom["spdxVersion"]);
    let packages = sbom["packages"].as_array().context("no packages")?;
    let has = |name: &str, v: &str| {
        packages
            .iter()
            .any(|p| p["name"] == name && p["versionInfo"] == v)
    };
    ensure!(has("temporal-worker-controller", version), "no controller");
    let kube = lock
        .split("name = \"kube\"\nversion = \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .context("kube in Cargo.lock")?;
    ensure!(has("kube", kube), "no kube {kube} in the SBOM");
    Ok(())
}

#[test]
fn artifacts_match_their_checksums() -> Result<()> {
    let s = Scratch::new("artifacts")?;
    let out = s.dir.with_extension("out");
    let _ = std::fs::remove_dir_all(&out);
    let out_arg = out.to_string_lossy().into_owned();
    let bin = binary().to_string_lossy().into_owned();
    let version = next_minor(&s.cargo_version()?)?;
    let registry = Registry::start()?;
    let push = format!("{}/{NAMESPACE}", registry.host());
    let args = [
        "--artifacts",
        &out_arg,
        "--binary",
        &bin,
        "--arch",
        "amd64",
        "--push-registry",
        &push,
        "--image-tag",
        IMAGE_TAG,
        "--plain-http",
    ];
    // A version without its CHANGELOG section is not a release: nothing is made.
    s.add_entry("the artifacts' fix")?;
    let version_before = s.cargo_version()?;
    let changelog = s.read("CHANGELOG.md")?;
    if !changelog.contains(&format!("## [{version_before}] - ")) {
        expect_refused(&s.release(&args)?, "cut the release first", "no section")?;
        ensure!(!out.exists(), "a refused build left {}", out.display());
    }
    expect_ok(&s.release(&[&version])?, "cutting the release")?;

    let made = s.release(&args)?;
    expect_ok(&made, "--artifacts")?;
    let listed = assert_checksums(&out)?;
    let image = format!("temporal-worker-controller-rs-{version}-linux-amd64");
    let expected: BTreeSet<String> = [
        "RELEASE_NOTES.md".to_string(),
        format!("temporal-worker-controller-{version}-linux-amd64.tar.gz"),
        format!("temporal-worker-controller-{version}.tgz"),
        format!("temporal-worker-controller-crds-{version}.tgz"),
        format!("temporal-worker-controller-{version}.spdx.json"),
        format!("{image}.oci.tar"),
        format!("{image}.digest"),
    ]
    .into();
    ensure!(
        listed == expected,
        "artifacts {listed:?}, expected {expected:?}"
    );

    let notes = std::fs::read_to_string(out.join("RELEASE_NOTES.md"))?;
    ensure!(
        notes.starts_with("### Fixed\n- the artifacts' fix\n"),
        "notes:\n{notes}"
    );
    assert_cli_tarball(
        &out.join(format!(
            "temporal-worker-controller-{version}-linux-amd64.tar.gz"
        )),
        &format!("temporal-worker-controller-{version}-linux-amd64"),
    )?;
    assert_sbom(
        &out.join(format!("temporal-worker-controller-{version}.spdx.json")),
        &version,
        &s.read("Cargo.lock")?,
    )?;
    let digest = std::fs::read_to_string(out.join(format!("{image}.digest")))?;
    let digest = digest.trim();
    ensure!(
        String::from_utf8_lossy(&made.stdout).lines().last() == Some(digest)
            && digest.starts_with("sha256:"),
        "the digest file says {digest:?}; the command printed:\n{}",
        text(&made)
    );
    // Pushed: the image by the tag asked for, the charts pointing at it.
    let image_ref = format!("{push}/temporal-worker-controller-rs");
    assert_charts(&out, &version, &image_ref)?;
    let inspect = run_ok(Command::new("skopeo").args([
        "inspect",
        "--tls-verify=false",
        "--format",
        "{{.Digest}}",
        &format!("docker://{image_ref}:{IMAGE_TAG}"),
    ]))?;
    ensure!(String::from_utf8(inspect.stdout)?.trim() == digest);
    assert_pushed_charts(&out, &push, &version)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// Both charts pulled back from the registry are the files of the release.
fn assert_pushed_charts(out: &Path, push: &str, version: &str) -> Result<()> {
    let pulled = out.join("pulled");
    std::fs::create_dir_all(&pulled)?;
    for chart in [
        "temporal-worker-controller",
        "temporal-worker-controller-crds",
    ] {
        run_ok(Command::new(helm()?).args([
            "pull",
            &format!("oci://{push}/charts/{chart}"),
            "--version",
            version,
            "--plain-http",
            "--destination",
            &pulled.to_string_lossy(),
        ]))?;
        let name = format!("{chart}-{version}.tgz");
        ensure!(
            sha256_hex(&pulled.join(&name))? == sha256_hex(&out.join(&name))?,
            "{name}: the registry holds other bytes"
        );
    }
    Ok(())
}

/// Both charts at the release's version; the controller chart's default image is `image`.
fn assert_charts(out: &Path, version: &str, image: &str) -> Result<()> {
    let helm = helm()?;
    for chart in [
        "temporal-worker-controller",
        "temporal-worker-controller-crds",
    ] {
        let tgz = out.join(format!("{chart}-{version}.tgz"));
        let shown = run_ok(Command::new(&helm).args(["show", "chart"]).arg(&tgz))?;
        let shown = String::from_utf8(shown.stdout)?;
        ensure!(
            shown.contains(&format!("name: {chart}\n"))
                && shown.contains(&format!("version: {version}\n")),
            "{chart}:\n{shown}"
        );
    }
    let tgz = out.join(format!("temporal-worker-controller-{version}.tgz"));
    let values = run_ok(Command::new(&helm).args(["show", "values"]).arg(&tgz))?;
    let values = String::from_utf8(values.stdout)?;
    ensure!(
        values.contains(&format!("  repository: {image}\n")),
        "the chart's default image is not {image}:\n{values}"
    );
    Ok(())
}

fn helm() -> Result<PathBuf> {
    let out = run_ok(Command::new("bash").arg(scratch::source_root().join("tools/helm/build.sh")))?;
    let path = String::from_utf8(out.stdout)?;
    Ok(PathBuf::from(path.lines().last().context("no helm path")?))
}

/// Every `run:` of the workflow, with its job's name.
fn run_steps(workflow: &serde_yaml::Value) -> Result<Vec<(String, String)>> {
    let jobs = workflow["jobs"].as_mapping().context("no jobs")?;
    let mut runs = Vec::new();
    for (name, job) in jobs {
        let name = name.as_str().context("job name")?.to_string();
        for step in job["steps"].as_sequence().context("job without steps")? {
            if let Some(run) = step["run"].as_str() {
                runs.push((name.clone(), run.to_string()));
            }
        }
    }
    Ok(runs)
}

#[test]
fn the_workflow_builds_only_through_the_release_command() -> Result<()> {
    let text = std::fs::read_to_string(scratch::source_root().join(WORKFLOW))?;
    check_workflow(&text)
}

/// Mutations of the workflow that the check must refuse.
#[test]
fn a_workflow_that_builds_by_itself_is_refused() -> Result<()> {
    let text = std::fs::read_to_string(scratch::source_root().join(WORKFLOW))?;
    let release_step = "        run: tools/release/release.sh --artifacts dist";
    ensure!(
        text.contains(release_step),
        "{WORKFLOW} changed: update the mutations"
    );
    let mutants = [
        // A build step of its own beside the release command.
        text.replace(
            release_step,
            "        run: cargo build --release\n      - run: tools/release/release.sh --artifacts dist",
        ),
        // Packaging a chart in the publish job.
        text.replace(
            "mkdir dist\n",
            "mkdir dist\n          helm package charts/temporal-worker-controller\n",
        ),
        // A flag the test never passes.
        text.replace(release_step, &format!("{release_step} --untested-flag")),
        // Signing dropped.
        text.replace("cosign sign --yes", "echo not signing"),
    ];
    for (i, mutant) in mutants.iter().enumerate() {
        ensure!(*mutant != text, "mutation {i} changed nothing");
        ensure!(check_workflow(mutant).is_err(), "mutation {i} was accepted");
    }
    Ok(())
}

fn check_workflow(text: &str) -> Result<()> {
    let root = scratch::source_root();
    let workflow: serde_yaml::Value = serde_yaml::from_str(text)?;
    ensure!(
        workflow["on"]["push"]["tags"] == serde_yaml::to_value(["v*"])?,
        "not run on a v* tag"
    );
    let arches: BTreeSet<&str> = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_sequence()
        .context("no build matrix")?
        .iter()
        .filter_map(|m| m["arch"].as_str())
        .collect();
    ensure!(arches == BTreeSet::from(["amd64", "arm64"]), "{arches:?}");

    let runs = run_steps(&workflow)?;
    let releases: Vec<&(String, String)> = runs
        .iter()
        .filter(|(_, run)| run.contains(RELEASE_COMMAND))
        .collect();
    ensure!(
        matches!(releases.as_slice(), [(job, _)] if job == "build"),
        "the release command runs once, in the build job: {releases:?}"
    );
    let command = &releases[0].1;
    ensure!(
        command.lines().count() == 1,
        "the release step does more:\n{command}"
    );
    for flag in command.split_whitespace().filter(|w| w.starts_with("--")) {
        ensure!(
            flag == "--artifacts" || TESTED_FLAGS.contains(&flag),
            "the workflow passes {flag}, which tests/release_artifacts.rs does not"
        );
    }
    // Installing the tools the release command runs is set-up, not building.
    let commands = runs
        .iter()
        .filter(|(_, r)| !r.contains(RELEASE_COMMAND))
        .flat_map(|(job, r)| r.lines().map(move |l| (job, l.to_lowercase())))
        .filter(|(_, l)| !l.contains("apt-get install") && !l.contains("apt-get update"));
    for (job, line) in commands {
        for word in BUILDING {
            ensure!(
                !line.contains(word),
                "job {job} builds outside the release command ({word:?}): {line}"
            );
        }
    }
    // Published where the README and the chart say, signed keylessly.
    let registry = workflow["env"]["REGISTRY"]
        .as_str()
        .context("env.REGISTRY")?;
    ensure!(format!("{registry}/temporal-worker-controller-rs") == DEFAULT_IMAGE);
    let readme = std::fs::read_to_string(root.join("README.md"))?;
    ensure!(
        readme.contains(DEFAULT_IMAGE),
        "README.md does not name {DEFAULT_IMAGE}"
    );
    ensure!(
        runs.iter()
            .any(|(job, r)| job == "publish" && r.contains("cosign sign --yes")),
        "no keyless cosign signature"
    );
    ensure!(
        workflow["jobs"]["publish"]["permissions"]["id-token"] == "write",
        "keyless signing needs id-token: write"
    );
    Ok(())
}
