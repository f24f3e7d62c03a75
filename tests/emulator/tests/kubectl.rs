//! The real `kubectl` against the emulator: server-side apply of our CRD kind, get (table and
//! YAML), `wait --for=condition=Ready`, and `delete` blocked by a finalizer.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

fn spawn_kubectl(kubeconfig: &Path, args: &[&str]) -> Result<Child> {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning kubectl")
}

/// Checks for `window` that the child keeps running (it is blocked on a watch).
async fn assert_still_running(child: &mut Child, window: Duration) -> Result<()> {
    let until = Instant::now() + window;
    while Instant::now() < until {
        if let Some(status) = child.try_wait()? {
            bail!("kubectl exited early with {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn wait_exit(child: Child, timeout: Duration) -> Result<Output> {
    let handle = tokio::task::spawn_blocking(move || child.wait_with_output());
    let out = tokio::time::timeout(timeout, handle)
        .await
        .context("kubectl did not exit in time")???;
    Ok(out)
}

fn manifest(ns: &str, name: &str, finalizer: bool) -> String {
    let mut v = common::twd(name);
    v["metadata"]["namespace"] = json!(ns);
    if finalizer {
        v["metadata"]["finalizers"] = json!(["example.com/hold"]);
    }
    serde_yaml::to_string(&v).unwrap_or_default()
}

#[tokio::test]
async fn kubectl_apply_get_wait_delete() -> Result<()> {
    let emu = common::auto().await;
    let kc = emu.kubeconfig_path().to_path_buf();
    let client = emu.client().await?;
    let ns = common::namespace(&client, "kubectl").await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("twd.yaml");
    std::fs::write(&file, manifest(&ns, "orders", true))?;
    let file_s = file.to_string_lossy().to_string();

    // Server-side apply creates the object, and applying again is a no-op.
    let out = common::kubectl_ok(&kc, &["apply", "--server-side", "-f", &file_s])?;
    assert!(
        out.contains("temporalworkerdeployment.temporal.io/orders serverside-applied"),
        "{out}"
    );
    common::kubectl_ok(&kc, &["apply", "--server-side", "-f", &file_s])?;

    // Table output uses the CRD's printer columns (short name works through discovery).
    let table = common::kubectl_ok(&kc, &["get", "twd", "-n", &ns])?;
    let header = table.lines().next().unwrap_or_default().to_string();
    for col in [
        "NAME", "TARGET", "CURRENT", "RAMP %", "STEP", "READY", "AGE",
    ] {
        assert!(header.contains(col), "missing column {col} in {table}");
    }
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("orders")),
        "{table}"
    );

    // YAML shows server-side defaults and system metadata.
    let yaml = common::kubectl_ok(&kc, &["get", "twd", "orders", "-n", &ns, "-o", "yaml"])?;
    let obj: Value = serde_yaml::from_str(&yaml)?;
    assert_eq!(
        obj.pointer("/spec/sunset/scaledownDelay"),
        Some(&json!("1h"))
    );
    assert_eq!(obj.pointer("/metadata/generation"), Some(&json!(1)));
    assert!(
        obj.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .is_some_and(|u| !u.is_empty())
    );

    // kubectl wait blocks until Ready=True is written through /status.
    let twds = common::twds(&client, &ns);
    let cond = |status: &str| {
        json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": "Test", "message": "",
            "lastTransitionTime": "2025-01-01T00:00:00Z"}]}})
    };
    twds.patch_status(
        "orders",
        &PatchParams::default(),
        &Patch::Merge(cond("False")),
    )
    .await?;
    let mut wait = spawn_kubectl(
        &kc,
        &[
            "wait",
            "--for=condition=Ready",
            "--timeout=30s",
            "twd/orders",
            "-n",
            &ns,
        ],
    )?;
    assert_still_running(&mut wait, Duration::from_millis(1500)).await?;
    twds.patch_status(
        "orders",
        &PatchParams::default(),
        &Patch::Merge(cond("True")),
    )
    .await?;
    let out = wait_exit(wait, Duration::from_secs(20)).await?;
    assert!(
        out.status.success(),
        "kubectl wait failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));

    // The printer column now shows readiness.
    let table = common::kubectl_ok(&kc, &["get", "twd", "orders", "-n", &ns])?;
    assert!(
        table.lines().nth(1).is_some_and(|l| l.contains("True")),
        "{table}"
    );

    // kubectl delete waits while the finalizer holds the object.
    let mut del = spawn_kubectl(
        &kc,
        &["delete", "twd", "orders", "-n", &ns, "--timeout=30s"],
    )?;
    common::eventually(Duration::from_secs(10), "deletionTimestamp", || async {
        let o = twds.get("orders").await?;
        Ok(o.metadata.deletion_timestamp.map(|_| ()))
    })
    .await?;
    assert_still_running(&mut del, Duration::from_millis(1000)).await?;

    // A new finalizer cannot be added while the object is being deleted.
    let err = common::api_error(
        twds.patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/other"]}}),
            ),
        )
        .await,
    )?;
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("no new finalizers can be added"),
        "{}",
        err.message
    );

    twds.patch(
        "orders",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    let out = wait_exit(del, Duration::from_secs(20)).await?;
    assert!(
        out.status.success(),
        "kubectl delete failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gone = common::api_error(twds.get("orders").await)?;
    assert_eq!(gone.code, 404);
    Ok(())
}

#[tokio::test]
async fn kubectl_reports_invalid_objects_and_crds_apply() -> Result<()> {
    let emu = common::auto().await;
    let kc = emu.kubeconfig_path().to_path_buf();
    let client = emu.client().await?;
    let ns = common::namespace(&client, "kubectl-bad").await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("bad.yaml");
    let bad = manifest(&ns, "has.dot", false).replace("replicas: 2", "replicas: -1");
    std::fs::write(&file, bad)?;
    let out = common::kubectl(
        &kc,
        &["apply", "--server-side", "-f", &file.to_string_lossy()],
    )?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec.replicas: Invalid value: -1"), "{err}");
    assert!(err.contains("name must not contain '.'"), "{err}");

    // Re-applying the real CRDs through the API works (as `kubectl apply -f crds/` would).
    let crds = common::crd_dir();
    let out = common::kubectl_ok(
        &kc,
        &["apply", "--server-side", "-f", &crds.to_string_lossy()],
    )?;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/temporalworkerdeployments.temporal.io"
        ),
        "{out}"
    );
    common::kubectl_ok(
        &kc,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=10s",
            "crd/temporalworkerdeployments.temporal.io",
        ],
    )?;
    let names = common::kubectl_ok(&kc, &["get", "namespaces", "-o", "name"])?;
    assert!(names.contains(&format!("namespace/{ns}")), "{names}");
    Ok(())
}

#[tokio::test]
async fn kubeconfig_works_for_kube_rs() -> Result<()> {
    let emu = common::auto().await;
    let kc = kube::config::Kubeconfig::read_from(emu.kubeconfig_path())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    assert_eq!(config.default_namespace, "default");
    let client = kube::Client::try_from(config)?;
    let nss: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let names: Vec<String> = nss
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(
        names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()),
        "{names:?}"
    );
    Ok(())
}

#[tokio::test]
async fn standalone_binary_serves_kubectl() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("kc");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-emulator"))
        .args([
            "--crd-dir",
            &common::crd_dir().to_string_lossy(),
            "--kubeconfig-out",
            &kc.to_string_lossy(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().context("child stdout")?;
    // The binary prints the kubeconfig path once it is serving.
    let line = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut l).map(|_| l)
    });
    let line = tokio::time::timeout(Duration::from_secs(30), line)
        .await
        .context("no output from binary")???;
    let result = (|| -> Result<()> {
        assert_eq!(line.trim(), kc.to_string_lossy());
        let out = common::kubectl_ok(&kc, &["get", "crd", "-o", "name"])?;
        assert!(
            out.contains("temporalworkerdeployments.temporal.io"),
            "{out}"
        );
        Ok(())
    })();
    child.kill()?;
    child.wait()?;
    result
}
