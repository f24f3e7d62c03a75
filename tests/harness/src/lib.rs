//! Test-only fixtures for end-to-end tests: a real Kubernetes control plane (etcd,
//! kube-apiserver, kube-controller-manager built from pinned Go modules), a real Temporal dev
//! server, real versioned Temporal workers built from the env the controller injects, a
//! pod-level kubelet stand-in that runs one such worker per Pod, and a TLS proxy that puts mTLS
//! or API-key auth in front of the plaintext dev server.

pub mod certs;
pub mod control_plane;
pub mod kubectl;
pub mod kubelet;
pub mod names;
pub mod observe;
pub mod supervise;
pub mod temporal_server;
pub mod tls_proxy;
pub mod wait;
pub mod worker;
