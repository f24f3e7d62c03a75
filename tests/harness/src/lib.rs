//! Test-only fixtures for end-to-end tests: a real Kubernetes control plane (etcd,
//! kube-apiserver, kube-controller-manager built from pinned Go modules), a real Temporal dev
//! server, real versioned Temporal workers built from the env the controller injects, a
//! pod-level kubelet stand-in that runs one such worker per Pod, and a TLS proxy that puts mTLS
//! or API-key auth in front of the plaintext dev server. Also the support every integration
//! test shares: the manifests of the controller's kinds ([`manifests`]), the environment
//! bootstrap ([`world`]), the background runtime ([`runtime`]), and readers of the chart,
//! dashboards and GitOps health checks.

pub mod argocd_actions;
pub mod certs;
pub mod chart;
pub mod container;
pub mod control_plane;
pub mod dashboards;
pub mod fault_webhook;
pub mod gitops;
pub mod go_controller;
pub mod helm;
pub mod invariants;
pub mod kubectl;
pub mod kubelet;
pub mod loopback_http;
pub mod manifests;
pub mod metrics_adapter;
pub mod names;
pub mod observe;
pub mod prometheus;
pub mod registry;
pub mod runtime;
pub mod supervise;
pub mod temporal_server;
pub mod tls_proxy;
pub mod toxiproxy;
pub mod wait;
pub mod worker;
pub mod worker_host;
pub mod world;

/// The repository root (this crate lives in `tests/harness`), where the chart, CRDs,
/// dashboards and GitOps files are.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `tools/<tool>/build.sh`: each builds into a cache outside the repository once (then
/// answers at once) and prints the path of what it built on its last line.
pub fn cached_build(tool: &str) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context as _;
    let script = repo_root().join("tools").join(tool).join("build.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{} failed ({}):\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(std::path::PathBuf::from)
        .with_context(|| format!("{} printed no path", script.display()))
}
