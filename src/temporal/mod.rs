//! Temporal access: the calls we make and the observed-state types.
//!
//! `state` holds plain observed data (the shared contract), `convert` turns protos into it,
//! `auth` reads credentials from Secrets, `tls` says which servers they trust, `pool` owns connections (the map it shares with
//! each client is `connections`) and `client` makes the calls through `budget`, the
//! client-side rate limits shared per Temporal namespace
//! (`old_versions` those about the workflows that keep old versions alive,
//! `task_queue_stats` the per-version backlog).

pub mod auth;
pub mod budget;
pub mod client;
mod connections;
pub mod convert;
pub mod error;
pub mod old_versions;
pub mod pool;
pub mod state;
pub mod task_queue_stats;
pub mod tls;

pub use auth::{AuthError, AuthMaterial, auth_from_secret, ca_from_secret};
pub use budget::{BudgetConfig, Budgets};
pub use client::TemporalClient;
pub use connections::RpcObserver;
pub use error::TemporalError;
pub use pool::{ClientPool, ConnectionKey};
