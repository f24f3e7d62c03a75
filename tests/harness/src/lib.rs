//! Test-only fixtures for end-to-end tests: a real Temporal dev server, real versioned Temporal
//! workers built from the env the controller injects, a kubelet stand-in that runs those workers
//! for the versioned Deployments it finds in a Kubernetes API (usually `kube-emulator`), and a
//! TLS proxy that puts mTLS or API-key auth in front of the plaintext dev server.

pub mod control_plane;
pub mod kubelet;
pub mod observe;
pub mod supervise;
pub mod temporal_server;
pub mod tls_proxy;
pub mod worker;
