//! temporal-worker-controller: runs Temporal workers as rainbow deployments using Temporal
//! Worker Versioning. `main.rs` only parses flags; everything lives behind this library.
//!
//! Where to find things: `api` (CRD types, reasons), `build_id`, `render` (versioned
//! Deployments), `planner` (every rollout rule, pure), `status` (conditions), `temporal`
//! (gRPC calls), `observe` (reads), `executor` (writes), `controller` (kube-runtime wiring),
//! `run` (process wiring), `http` + `metrics` + `milestones` (observability).

pub mod api;
pub mod build_id;
pub mod cli_status;
pub mod controller;
pub mod crdgen;
pub mod error;
pub mod events;
pub mod executor;
pub mod http;
pub mod metrics;
pub mod milestones;
pub mod observe;
pub mod planner;
pub mod render;
pub mod run;
pub mod status;
pub mod temporal;
