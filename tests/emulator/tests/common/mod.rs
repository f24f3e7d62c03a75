//! Shared test setup: one emulator per mode per test binary, living on its own runtime so it
//! outlives each `#[tokio::test]` runtime.

#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube_emulator::{DeploymentMode, Emulator, EmulatorOptions};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("emulator runtime")
});
static AUTO: OnceCell<Arc<Emulator>> = OnceCell::const_new();
static MANUAL: OnceCell<Arc<Emulator>> = OnceCell::const_new();

pub fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

async fn start(mode: DeploymentMode) -> Arc<Emulator> {
    let opts = EmulatorOptions {
        crd_dir: Some(crd_dir()),
        deployment_mode: mode,
    };
    let emu = RT
        .spawn(Emulator::start(opts))
        .await
        .expect("emulator task")
        .expect("emulator start");
    Arc::new(emu)
}

pub async fn auto() -> Arc<Emulator> {
    AUTO.get_or_init(|| start(DeploymentMode::AutoReady))
        .await
        .clone()
}

pub async fn manual() -> Arc<Emulator> {
    MANUAL
        .get_or_init(|| start(DeploymentMode::Manual))
        .await
        .clone()
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id() % 10000,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A fresh namespace for one test case.
pub async fn namespace(client: &kube::Client, prefix: &str) -> Result<String> {
    let name = unique(prefix);
    let api: Api<Namespace> = Api::all(client.clone());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}}))?,
    )
    .await?;
    Ok(name)
}

/// Polls `f` until it yields `Some`, failing after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_err = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what} (last error: {last_err:?})");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub fn twd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("temporal.io", "v1alpha1", "TemporalWorkerDeployment"),
        "temporalworkerdeployments",
    )
}

pub fn twds(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &twd_resource())
}

/// A valid TemporalWorkerDeployment body.
pub fn twd(name: &str) -> Value {
    json!({
        "apiVersion": "temporal.io/v1alpha1",
        "kind": "TemporalWorkerDeployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "rollout": {"strategy": "Progressive", "steps": [{"rampPercentage": 10, "pauseDuration": "30s"}]},
            "workerOptions": {"connectionRef": {"name": "temporal"}, "temporalNamespace": "default"},
            "template": {"spec": {"containers": [{"name": "worker", "image": "worker:v1"}]}}
        }
    })
}

pub fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    })
}

/// The `kube::Error::Api` status of a failed call.
pub fn api_error<T: std::fmt::Debug>(r: kube::Result<T>) -> Result<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => Ok(*s),
        other => bail!("expected an API error, got {other:?}"),
    }
}

/// Sends one raw HTTP/1.1 request and returns (status code, body as JSON, or null).
pub async fn raw(
    base: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> Result<(u16, Value)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let code: u16 = text.split_whitespace().nth(1).unwrap_or_default().parse()?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    Ok((code, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// Runs the real kubectl against `kubeconfig`.
pub fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> Result<std::process::Output> {
    use anyhow::Context as _;
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .context("running kubectl")
}

/// Runs kubectl and returns its stdout; fails with its output if it fails.
pub fn kubectl_ok(kubeconfig: &std::path::Path, args: &[&str]) -> Result<String> {
    let out = kubectl(kubeconfig, args)?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
