//! Test-only fixtures for end-to-end tests: a real Kubernetes control plane (etcd,
//! kube-apiserver, kube-controller-manager built from pinned Go modules), a real Temporal dev
//! server, real versioned Temporal workers built from the env the controller injects, a
//! pod-level kubelet stand-in that runs one such worker per Pod, and a TLS proxy that puts mTLS
//! or API-key auth in front of the plaintext dev server. Also the support every integration
//! test shares: the manifests of the controller's kinds ([`manifests`]), the environment
//! bootstrap ([`world`]), the background runtime ([`runtime`]), and readers of the chart,
//! dashboards and GitOps health checks.

pub mod certs;
pub mod chart;
pub mod control_plane;
pub mod dashboards;
pub mod gitops;
pub mod go_controller;
pub mod kubectl;
pub mod kubelet;
pub mod loopback_http;
pub mod manifests;
pub mod names;
pub mod observe;
pub mod runtime;
pub mod supervise;
pub mod temporal_server;
pub mod tls_proxy;
pub mod wait;
pub mod worker;
pub mod world;

/// The repository root (this crate lives in `tests/harness`), where the chart, CRDs,
/// dashboards and GitOps files are.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
