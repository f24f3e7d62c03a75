//! temporal-worker-controller: runs Temporal workers as rainbow deployments using Temporal
//! Worker Versioning. `main.rs` only calls [`command::main`]; everything lives behind this library.
//!
//! Where to find things (`docs/architecture.md` walks one reconcile):
//! - the model: `api` (CRD types, the condition vocabulary), `build_id`, `render` (versioned
//!   Deployments);
//! - the three reconcilers on one floor (`reconciler`): `reconcile` (worker deployments: validate
//!   → observe → plan → act → report), `owned` (per-version owned resources), `connection`
//!   (Connections); `planner` holds every rollout rule, pure;
//! - the services: `temporal` (gRPC calls), `caches`, `workers`, `shard`, `events`, `error`;
//! - process wiring: `controller` (kube-runtime), `run` (the `run` command), `webhook` (the
//!   admission webhook and its certificates);
//! - observability: `summary`, `http` (status API), `metrics`, `milestones`, `backlog`
//!   (per-version backlog for autoscaling);
//! - the CLI: `command` (subcommands) and the `cli_*` modules;
//! - generators: `generate` (CRDs, Argo CD Lua copies).

pub mod api;
pub mod backlog;
pub mod build_id;
pub mod caches;
pub mod cli_complete;
pub mod cli_control;
pub mod cli_follow;
pub mod cli_kube;
pub mod cli_lint;
pub mod cli_lint_cel;
pub mod cli_lint_schema;
pub mod cli_probe;
pub mod cli_render;
pub mod cli_request;
pub mod cli_status;
pub mod cli_template;
pub mod cli_undo;
pub mod cli_wait;
pub mod cli_watch;
pub mod command;
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
pub mod metrics;
pub mod milestones;
pub mod owned;
pub mod planner;
pub mod reconcile;
pub mod reconciler;
pub mod render;
pub mod run;
pub mod shard;
pub mod summary;
pub mod temporal;
pub mod webhook;
pub mod workers;

#[cfg(test)]
mod structure_tests;
