//! temporal-worker-controller: runs Temporal workers as rainbow deployments using Temporal
//! Worker Versioning. `main.rs` only calls [`command::main`]; everything lives behind this library.
//!
//! Where to find things (`docs/architecture.md` has the whole map): `api` (CRD types, the
//! condition vocabulary), `build_id`, `render` (versioned Deployments), `reconcile` (one
//! reconcile as stages: validate → observe → plan → act → report), `planner` (every rollout
//! rule, pure), `status` (conditions), `temporal` (gRPC calls), `controller` (kube-runtime
//! wiring), `run` (process wiring), `summary` + `http` + `metrics` + `milestones`
//! (observability), `backlog` (per-version task-queue backlog for autoscaling), `webhook` (the optional
//! validating admission webhook and its certificates).

pub mod api;
pub mod backlog;
pub mod build_id;
pub mod caches;
pub mod cli_control;
pub mod cli_follow;
pub mod cli_kube;
pub mod cli_probe;
pub mod cli_render;
pub mod cli_request;
pub mod cli_status;
pub mod cli_wait;
pub mod cli_watch;
pub mod command;
pub mod connection;
pub mod controller;
pub mod crdgen;
#[cfg(test)]
mod doc_claims_tests;
pub mod error;
pub mod events;
#[cfg(test)]
mod fixtures;
pub mod go_status;
pub mod http;
pub mod luagen;
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
