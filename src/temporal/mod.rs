//! Temporal access: the calls we make and the observed-state types.
//!
//! `state` holds plain observed data (the shared contract), `convert` turns protos into it,
//! `auth` reads credentials from Secrets, `pool` owns connections and `client` makes the calls (`visibility` the list queries about
//! old versions' workflows).

pub mod auth;
pub mod client;
pub mod convert;
pub mod error;
pub mod pool;
pub mod state;
pub mod visibility;

pub use auth::{AuthError, AuthMaterial, auth_from_secret};
pub use client::TemporalClient;
pub use error::TemporalError;
pub use pool::{ClientPool, ConnectionKey, RpcObserver};
