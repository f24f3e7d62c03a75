//! docs/quickstart.md, run as written: its `bash` blocks, in order, read from the document.
//!
//! The rig stands in for the reader's machine: a real control plane is the cluster, the Temporal
//! dev server the Temporal, and the loopback registry plays `ghcr.io`. The release the page
//! installs is made first by the release command (`tools/release/release.sh --artifacts
//! --push-registry`, on a scratch clone, with the binary of this test build), so both charts and
//! the controller image are pulled from that registry, and the CLI comes from the release's
//! tarball. What the test changes in the page's commands, each asserted to be there:
//!
//! - the block marked as creating a kind cluster is skipped (it must say `kind create cluster`);
//! - the settings block's variables get the rig's values (the same names, and the page's
//!   `TWC_VERSION` must be this build's version and its `CHARTS` the published location);
//! - `cargo build --release -p hello-worker` is not run: the test build built the example already
//!   (a `cargo build` inside `cargo test` would wait on the lock of the build running it), so
//!   `target/release/hello-worker` is that binary;
//! - the controller chart's `helm install` gets `--plain-http` (the rig's registry speaks HTTP)
//!   and the rig's values: one replica on free loopback ports, the webhook by loopback URL (the
//!   kubelet stand-in runs the controller on the host's network, where nothing routes ClusterIPs),
//!   as in tests/upgrade.rs; the CRD chart's gets `--plain-http`.
//!
//! The commands check themselves (`kubectl temporal-workers wait --for current` fails the script
//! on a stalled or late rollout); the test then checks both workflow runs and the controller Pod.
//! The worker Pods run the sample worker's image from the registry (the kubelet stand-in runs a
//! Pod whose image is in the rig's registry from that image), so the workflows run on the real
//! example, not on the stand-in's in-process test worker.

#[path = "common/scratch.rs"]
mod scratch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use scratch::{Scratch, expect_ok, run_ok};
use serde_json::json;
use test_harness::control_plane::ControlPlane;
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::registry::Registry;
use test_harness::{repo_root, temporal_server};

const DOC: &str = "docs/quickstart.md";
const KIND_MARKER: &str = "<!-- quickstart: creates a kind cluster";
const SETTINGS_MARKER: &str = "<!-- quickstart: settings -->";
/// Where the page installs from: the registry and namespace the README names.
const PUBLISHED: &str = "ghcr.io/temporalio";
/// The whole page: two rollouts, the second Progressive with two 10-s steps.
const DEADLINE: Duration = Duration::from_secs(600);
const WORKER_BUILD: &str = "cargo build --release --locked -p hello-worker";

/// A fenced `bash` block and the `<!-- quickstart: … -->` marker right above it, if any.
#[derive(Debug)]
struct Block {
    marker: Option<String>,
    text: String,
}

fn bash_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut last_line = "";
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") {
            let bash = line.trim() == "```bash";
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim_start().starts_with("```"))
                .collect();
            if bash {
                blocks.push(Block {
                    marker: last_line
                        .starts_with("<!-- quickstart:")
                        .then(|| last_line.to_string()),
                    text: body.join("\n"),
                });
            }
            last_line = "";
        } else if !line.trim().is_empty() {
            last_line = line.trim();
        }
    }
    blocks
}

/// The `export NAME=VALUE` lines of the settings block.
fn settings(block: &str) -> Result<BTreeMap<String, String>> {
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, value) = l
                .strip_prefix("export ")
                .and_then(|l| l.split_once('='))
                .with_context(|| format!("settings: {l:?} is not `export NAME=VALUE`"))?;
            Ok((name.to_string(), value.to_string()))
        })
        .collect()
}

/// `text` with `from` replaced, which must occur.
fn replace(text: &str, from: &str, to: &str) -> Result<String> {
    ensure!(text.contains(from), "{DOC} no longer says {from:?}");
    Ok(text.replace(from, to))
}

/// The page's script for the rig: the kind block left out, the settings checked (and set by the
/// caller's environment instead), the commands changed as the module docs list.
fn script(doc: &str, worker_binary: &Path, rig_values: &Path) -> Result<String> {
    let mut parts = Vec::new();
    let mut skipped = 0;
    for block in bash_blocks(doc) {
        match block.marker.as_deref() {
            Some(m) if m.starts_with(KIND_MARKER) => {
                ensure!(
                    block.text.contains("kind create cluster"),
                    "a skipped block creates no kind cluster:\n{}",
                    block.text
                );
                skipped += 1;
            }
            Some(SETTINGS_MARKER) => {
                let page = settings(&block.text)?;
                let names: BTreeSet<&str> = page.keys().map(String::as_str).collect();
                ensure!(
                    names == BTreeSet::from(["TWC_VERSION", "CHARTS", "WORKER_IMAGE"]),
                    "the settings are {names:?}"
                );
                ensure!(page["TWC_VERSION"] == env!("CARGO_PKG_VERSION"));
                ensure!(page["CHARTS"] == format!("oci://{PUBLISHED}/charts"));
            }
            Some(other) => bail!("unknown marker {other}"),
            None => parts.push(block.text),
        }
    }
    ensure!(skipped == 1, "{skipped} kind blocks");
    let mut text = parts.join("\n");
    text = replace(&text, &format!("{WORKER_BUILD}\n"), "")?;
    text = replace(
        &text,
        "target/release/hello-worker",
        &worker_binary.to_string_lossy(),
    )?;
    let values = rig_values.to_string_lossy();
    text = replace(
        &text,
        "\"$CHARTS/temporal-worker-controller\" ",
        &format!("\"$CHARTS/temporal-worker-controller\" --plain-http --values {values} "),
    )?;
    replace(
        &text,
        "\"$CHARTS/temporal-worker-controller-crds\" ",
        "\"$CHARTS/temporal-worker-controller-crds\" --plain-http ",
    )
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The controller's values on the rig (tests/upgrade.rs explains each).
fn rig_values(path: &Path) -> Result<()> {
    let (http, webhook) = (free_port()?, free_port()?);
    let values = json!({
        "replicas": 1,
        "http": {"port": http},
        "service": {"port": http},
        "webhook": {"port": webhook, "url": format!("https://127.0.0.1:{webhook}")},
        "readinessProbe": {"initialDelaySeconds": 1, "periodSeconds": 2, "failureThreshold": 3},
    });
    Ok(std::fs::write(path, serde_json::to_string(&values)?)?)
}

/// The example worker of the test build: `<target>/debug/hello-worker`.
fn worker_binary() -> Result<PathBuf> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .context("target dir")?;
    let bin = target.join("debug/hello-worker");
    // The workspace's test build compiles the worker only as a unit-test binary; its own
    // binary is one `cargo build` away (a no-op once built), with this build's settings.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = std::process::Command::new(cargo)
        .args(["build", "--quiet", "-p", "hello-worker"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .context("cargo build -p hello-worker")?;
    ensure!(
        built.success() && bin.is_file(),
        "{} is missing after `cargo build -p hello-worker` ({built})",
        bin.display()
    );
    Ok(bin)
}

/// Publishes this build as the page's release to the registry (under `<host>/temporalio`), the
/// way the release workflow publishes to ghcr.io. Returns the release's CLI directory.
fn publish(s: &Scratch, registry: &str, out: &Path) -> Result<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    if !s
        .read("CHANGELOG.md")?
        .contains(&format!("## [{version}] - "))
    {
        expect_ok(&s.release(&[version])?, "cutting the first release")?;
    }
    let bin = env!("CARGO_BIN_EXE_temporal-worker-controller");
    let out_arg = out.to_string_lossy();
    let push = format!("{registry}/temporalio");
    let args = ["--artifacts", &out_arg, "--binary", bin];
    let args = [&args[..], &["--push-registry", &push, "--plain-http"]].concat();
    expect_ok(&s.release(&args)?, "publishing the release")?;
    let tarball = out.join(format!(
        "temporal-worker-controller-{version}-linux-amd64.tar.gz"
    ));
    run_ok(
        std::process::Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(out),
    )?;
    Ok(out.join(format!("temporal-worker-controller-{version}-linux-amd64")))
}

/// `PATH` with the release's CLI (the kubectl plugin) and the pinned Helm first.
fn path_with(cli: &Path) -> Result<String> {
    let helm = test_harness::helm::binary();
    let helm_dir = helm.parent().context("helm dir")?;
    Ok(format!(
        "{}:{}:{}",
        cli.display(),
        helm_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    ))
}

/// Runs the page's script in `dir` with `env`; its output (stdout, then stderr) once it has
/// succeeded.
async fn run_page(script: &str, dir: &Path, env: &[(&str, String)], work: &Path) -> Result<String> {
    let (out, err) = (work.join("quickstart.log"), work.join("quickstart.err"));
    let mut child = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!("set -euxo pipefail\n{script}"))
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out)?)
        .stderr(std::fs::File::create(&err)?)
        .kill_on_drop(true)
        .spawn()?;
    let status = tokio::time::timeout(DEADLINE, child.wait()).await;
    let output = format!(
        "{}{}",
        std::fs::read_to_string(&out)?,
        std::fs::read_to_string(&err)?
    );
    match status {
        Err(_) => bail!("the quickstart did not finish within {DEADLINE:?}:\n{output}"),
        Ok(status) => ensure!(status?.success(), "the quickstart failed:\n{output}"),
    }
    Ok(output)
}

/// The images of the controller's Pods.
async fn controller_images(client: kube::Client) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client, "temporal-system");
    Ok(pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=controller"))
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.spec?.containers.first()?.image.clone())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_runs_as_written() -> Result<()> {
    let doc = std::fs::read_to_string(repo_root().join(DOC))?;
    let s = Scratch::new("quickstart")?;
    let work = s.dir.with_extension("work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let values = work.join("rig-values.json");
    rig_values(&values)?;
    let script = script(&doc, &worker_binary()?, &values)?;

    let registry = Registry::start()?;
    let host = registry.host().to_string();
    let cli = publish(&s, &host, &work.join("release"))?;
    let plane = ControlPlane::start().await?;
    let client = plane.client().await?;

    let _kubelet = Kubelet::start_with(
        client.clone(),
        KubeletOptions {
            api_server: Some(plane.host_port()?),
            registry: Some(host.clone()),
            ..Default::default()
        },
    )
    .await?;
    let temporal = temporal_server::shared().await?;

    let env = [
        (
            "KUBECONFIG",
            plane.kubeconfig_path().to_string_lossy().into_owned(),
        ),
        ("TEMPORAL_ADDRESS", temporal.address()),
        ("TWC_VERSION", env!("CARGO_PKG_VERSION").to_string()),
        ("CHARTS", format!("oci://{host}/temporalio/charts")),
        ("WORKER_IMAGE", format!("{host}/quickstart/hello-worker")),
        ("PATH", path_with(&cli)?),
    ];
    let output = run_page(&script, &s.dir, &env, &work).await?;
    println!("{output}"); // shown with --nocapture
    // Both runs of `hello`, on v1 and on v2, by the sample worker from its image: its `hello`
    // asks the `greet` activity, which the stand-in's in-process test worker has not.
    let results = output
        .matches("Result          \"hello quickstart\"")
        .count();
    let activities = output.matches("ActivityTaskCompleted").count();
    ensure!(
        results == 2 && activities == 2,
        "{results} results, {activities} activities:\n{output}"
    );
    for v in ["v1", "v2"] {
        let _ = std::fs::remove_file(format!("/tmp/hello-worker-{v}.oci.tar"));
    }

    // The controller ran from the image the release pushed, by the chart's default reference.
    let images = controller_images(client).await?;
    let expected = format!(
        "{host}/temporalio/temporal-worker-controller-rs:{}",
        env!("CARGO_PKG_VERSION")
    );
    ensure!(
        images == [expected.clone()],
        "controller images {images:?}, expected {expected}"
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

#[test]
fn blocks_and_markers_are_read_as_written() {
    let md = "x\n<!-- quickstart: settings -->\n```bash\nexport A=1\n```\n\n```yaml\nk: v\n```\ntext\n\n```bash\necho hi\n```\n";
    let blocks = bash_blocks(md);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].marker.as_deref(), Some(SETTINGS_MARKER));
    assert_eq!(blocks[0].text, "export A=1");
    assert_eq!(blocks[1].marker, None);
    assert_eq!(blocks[1].text, "echo hi");
    assert_eq!(settings("export A=1\n").expect("settings")["A"], "1");
    assert!(settings("A=1").is_err());
}
