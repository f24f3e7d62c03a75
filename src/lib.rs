//! temporal-worker-controller: runs Temporal workers as rainbow deployments using Temporal
//! Worker Versioning. `main.rs` only calls [`cli::command::main`]; everything lives behind this library.
//!
//! Where to find things (`docs/architecture.md` walks one reconcile):
//! - the model: `api` (CRD types, the condition vocabulary), `build_id`, `render` (versioned
//!   Deployments);
//! - the three reconcilers on one floor (`reconciler`: the skeleton, and the `Services` each
//!   reconciler's context carries): `worker_deployment` (validate → observe → plan → act →
//!   report), `owned` (per-version owned resources), `connection` (Connections), each with its
//!   own settings; `planner` holds every rollout rule, pure;
//! - the services: `temporal` (gRPC calls), `caches`, `workers`, `shard`, `events`, `error`;
//! - process wiring: `controller` (kube-runtime), `run` (the `run` command), `webhook` (the
//!   admission webhook and its certificates);
//! - observability: `summary`, `http` (status API), `metrics`, `milestones`, `backlog`
//!   (per-version backlog for autoscaling);
//! - the CLI: `cli` (`cli::command` parses the subcommands; one module per verb family);
//! - generators: `generate` (CRDs, Argo CD Lua copies).

pub mod api;
pub mod backlog;
pub mod build_id;
pub mod caches;
pub mod cli;
pub mod connection;
pub mod controller;
#[cfg(test)]
mod doc_claims_tests;
pub mod error;
pub mod events;
#[cfg(test)]
mod fixtures;
pub mod generate;
pub mod http;
pub mod lane;
pub mod metrics;
pub mod milestones;
pub mod owned;
pub mod planner;
pub mod reconciler;
pub mod render;
pub mod run;
pub mod shard;
pub mod summary;
pub mod temporal;
pub mod webhook;
pub mod worker_deployment;
pub mod workers;

#[cfg(test)]
mod structure_tests;
