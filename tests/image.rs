//! The controller image (docs/image.md), packaged from the binary this test build made by the
//! release's own `tools/image/package.sh` (buildah, no daemon):
//!
//! - `packaging_one_binary_twice_gives_one_digest`: two packagings of one binary with one
//!   `--timestamp` are byte-identical images (one manifest digest) in byte-identical archives
//!   (the release's `SHA256SUMS` lists the archive).
//! - `the_image_holds_no_shell_and_runs_the_binary_as_nonroot`: the config says user
//!   65532:65532, the binary as entrypoint, `run` as command, the OCI labels; the layers hold
//!   the base (glibc, libgcc, the CA bundle, time zone data, the nonroot passwd entry) and no
//!   shell (`sh`, `bash`, `dash`, `busybox` anywhere) and no package manager.
//! - `the_dockerfile_describes_the_same_image`: the Dockerfile's final stage says the same user,
//!   entrypoint, command and labels (it cannot be built here).
//! - `an_image_without_libgcc_fails_its_pod` (the mutation, as a test): the same binary on a
//!   base without `libgcc-s1` (`--omit-package`), pushed to the rig's registry and run by the
//!   kubelet stand-in from its own root file system, ends its Pod `Failed` with the dynamic
//!   loader's message; the complete image's Pod, with the same `args`, ends `Succeeded`.
//!   This is what proves that the stand-in runs the image's root and not the host's: the host
//!   has libgcc.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use test_harness::control_plane::ControlPlane;
use test_harness::kubelet::{Kubelet, KubeletOptions};
use test_harness::registry::{self, PackageOptions, Registry};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_temporal-worker-controller"))
}

fn scratch(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("twc-image-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[test]
fn packaging_one_binary_twice_gives_one_digest() -> Result<()> {
    let dir = scratch("twice")?;
    let options = PackageOptions {
        timestamp: 1_700_000_000,
        ..PackageOptions::working_tree()
    };
    let begin = Instant::now();
    let first = registry::run_package(&binary(), &options, &dir.join("first.oci.tar"))?;
    let second = registry::run_package(&binary(), &options, &dir.join("second.oci.tar"))?;
    println!("two packagings in {:?}: {first}", begin.elapsed());
    ensure!(
        first == second,
        "one binary packaged twice: {first} and {second}"
    );
    let bytes = |name: &str| std::fs::read(dir.join(name));
    ensure!(
        bytes("first.oci.tar")? == bytes("second.oci.tar")?,
        "one image ({first}) in two archives that differ byte for byte"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn skopeo(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("skopeo").args(args).output()?;
    ensure!(
        out.status.success(),
        "skopeo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every path in the image's layers (`./` stripped).
fn layer_paths(archive: &Path, dir: &Path) -> Result<Vec<String>> {
    let layout = dir.join("layout");
    let source = format!("oci-archive:{}", archive.display());
    skopeo(&[
        "copy",
        "--quiet",
        &source,
        &format!("oci:{}:x", layout.display()),
    ])?;
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
    let manifest_digest = index["manifests"][0]["digest"].as_str().context("index")?;
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let manifest: Value = serde_json::from_slice(&std::fs::read(blob(manifest_digest))?)?;
    let mut paths = Vec::new();
    for layer in manifest["layers"].as_array().context("layers")? {
        let out = std::process::Command::new("tar")
            .arg("-tvf")
            .arg(blob(layer["digest"].as_str().context("digest")?))
            .output()?;
        ensure!(out.status.success(), "tar -t of a layer failed");
        paths.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string),
        );
    }
    Ok(paths)
}

/// User 65532, the binary as entrypoint, `run` as command, the OCI labels.
fn assert_config(c: &Value) -> Result<()> {
    ensure!(c["User"] == "65532:65532", "user: {}", c["User"]);
    ensure!(
        c["Entrypoint"] == json!(["/usr/local/bin/temporal-worker-controller"]),
        "entrypoint: {}",
        c["Entrypoint"]
    );
    ensure!(c["Cmd"] == json!(["run"]), "cmd: {}", c["Cmd"]);
    let label = |k: &str| c["Labels"][format!("org.opencontainers.image.{k}")].clone();
    ensure!(
        label("version") == env!("CARGO_PKG_VERSION"),
        "labels: {}",
        c["Labels"]
    );
    ensure!(label("licenses") == "Apache-2.0", "labels: {}", c["Labels"]);
    ensure!(
        label("source")
            .as_str()
            .is_some_and(|s| s.starts_with("https://github.com/")),
        "labels: {}",
        c["Labels"]
    );
    ensure!(
        label("revision").as_str().is_some_and(|r| !r.is_empty()),
        "labels: {}",
        c["Labels"]
    );

    Ok(())
}

#[test]
fn the_image_holds_no_shell_and_runs_the_binary_as_nonroot() -> Result<()> {
    let image = registry::package(&binary(), &PackageOptions::working_tree())?;
    let config: Value = serde_json::from_str(&skopeo(&[
        "inspect",
        "--config",
        &format!("oci-archive:{}", image.archive.display()),
    ])?)?;
    assert_config(&config["config"])?;
    let dir = scratch("contents")?;
    let listing = layer_paths(&image.archive, &dir)?;
    let names: Vec<&str> = listing
        .iter()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| p.trim_start_matches("./").trim_end_matches('/'))
        .collect();
    let forbidden = ["sh", "bash", "dash", "busybox", "dpkg", "apt", "apt-get"];
    let found: Vec<&&str> = names
        .iter()
        .filter(|p| forbidden.contains(&p.rsplit('/').next().unwrap_or(p)))
        .collect();
    ensure!(
        found.is_empty(),
        "the image holds a shell or package manager: {found:?}"
    );
    for needed in [
        "usr/local/bin/temporal-worker-controller",
        "etc/ssl/certs/ca-certificates.crt",
        "usr/share/zoneinfo/UTC",
        "etc/passwd",
        "home/nonroot",
    ] {
        ensure!(names.contains(&needed), "the image lacks /{needed}");
    }
    ensure!(
        names.iter().any(|p| p.ends_with("/libc.so.6"))
            && names.iter().any(|p| p.ends_with("/libgcc_s.so.1")),
        "the image lacks glibc or libgcc"
    );
    let home = listing
        .iter()
        .find(|l| l.trim_end_matches('/').ends_with(" home/nonroot"))
        .context("home/nonroot")?;
    ensure!(
        home.contains("65532/65532"),
        "/home/nonroot is not nonroot's: {home}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The Dockerfile (for Docker users; it cannot be built here) describes the same image: its
/// final stage's `USER`, `ENTRYPOINT`, `CMD` and OCI label keys are those of the packaged
/// image's config. What stays unchecked: that its base still exists and holds what the binary
/// links (docs/image.md).
#[test]
fn the_dockerfile_describes_the_same_image() -> Result<()> {
    let image = registry::package(&binary(), &PackageOptions::working_tree())?;
    let config: Value = serde_json::from_str(&skopeo(&[
        "inspect",
        "--config",
        &format!("oci-archive:{}", image.archive.display()),
    ])?)?;
    let c = &config["config"];
    let text = std::fs::read_to_string(test_harness::repo_root().join("Dockerfile"))?;
    let last_stage = text.rsplit("\nFROM ").next().context("no FROM")?;
    let instruction = |name: &str| -> Option<String> {
        last_stage
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .map(|v| v.trim().to_string())
    };
    let user = c["User"].as_str().unwrap_or_default();
    ensure!(
        instruction("USER").as_deref() == Some(user),
        "USER differs from {user}"
    );
    for (name, key) in [("ENTRYPOINT", "Entrypoint"), ("CMD", "Cmd")] {
        let docker: Value = serde_json::from_str(&instruction(name).unwrap_or_default())
            .with_context(|| format!("{name} is not in exec form"))?;
        ensure!(
            docker == c[key],
            "{name} {docker} differs from the image's {}",
            c[key]
        );
    }
    for key in c["Labels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        ensure!(
            key.starts_with("io.buildah") || last_stage.contains(&format!("{key}=")),
            "the Dockerfile lacks the label {key}"
        );
    }
    Ok(())
}

/// A Pod running `image` with `args` once (`restartPolicy: Never`).
fn one_shot_pod(name: &str, image: &str, args: &[&str]) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{"name": "main", "image": image, "args": args,
                "securityContext": {"readOnlyRootFilesystem": true, "runAsNonRoot": true}}],
        },
    }))?)
}

/// The Pod's phase once it is `Succeeded` or `Failed`, with its container's termination message.
async fn finished(pods: &Api<Pod>, name: &str) -> Result<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pod = pods.get(name).await?;
        let status = pod.status.unwrap_or_default();
        let phase = status.phase.unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            let message = status
                .container_statuses
                .into_iter()
                .flatten()
                .filter_map(|c| c.state?.terminated?.message)
                .collect::<String>();
            return Ok((phase, message));
        }
        if Instant::now() > deadline {
            bail!(
                "Pod {name} did not finish: phase {phase:?}, {:?}",
                status.container_statuses
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_without_libgcc_fails_its_pod() -> Result<()> {
    let (complete, mutant) = tokio::task::spawn_blocking(|| -> Result<_> {
        let registry = Registry::shared()?;
        let complete = registry.push_controller(&binary(), "complete")?;
        let without = PackageOptions {
            omit_package: Some("libgcc-s1".into()),
            ..PackageOptions::working_tree()
        };
        let mutant = registry::package(&binary(), &without)?;
        let mutant = registry.push_image(&mutant, registry::IMAGE_REPOSITORY, "no-libgcc")?;
        Ok((complete, mutant))
    })
    .await??;
    let plane = ControlPlane::start().await?;
    let client = plane.client().await?;

    let _kubelet = Kubelet::start_with(
        client.clone(),
        KubeletOptions {
            api_server: Some(plane.host_port()?),
            registry: Some(Registry::shared()?.host().to_string()),
            ..Default::default()
        },
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    pods.create(&pp, &one_shot_pod("complete", &complete, &["--version"])?)
        .await?;
    pods.create(&pp, &one_shot_pod("no-libgcc", &mutant, &["--version"])?)
        .await?;
    let (phase, message) = finished(&pods, "complete").await?;
    ensure!(
        phase == "Succeeded",
        "the complete image's Pod: {phase}: {message}"
    );
    let (phase, message) = finished(&pods, "no-libgcc").await?;
    ensure!(
        phase == "Failed" && message.contains("libgcc_s.so.1"),
        "the image without libgcc: {phase}: {message}"
    );
    Ok(())
}
