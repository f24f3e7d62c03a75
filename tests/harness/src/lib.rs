//! Test-only fixtures for end-to-end tests: a real Temporal dev server, real versioned Temporal
//! workers built from the env the controller injects, and a kubelet stand-in that runs those
//! workers for the versioned Deployments it finds in a Kubernetes API (usually `kube-emulator`).

pub mod kubelet;
pub mod observe;
pub mod temporal_server;
pub mod worker;
