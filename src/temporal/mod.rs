//! Temporal access: the calls we make and the observed-state types.

pub mod state;
