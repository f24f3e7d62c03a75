//! temporal-worker-controller: runs Temporal workers as rainbow deployments using Temporal
//! Worker Versioning. `main.rs` only parses flags; everything lives behind this library.

pub mod api;
pub mod build_id;
pub mod planner;
pub mod render;
pub mod temporal;
