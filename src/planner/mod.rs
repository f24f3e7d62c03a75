//! The pure rollout planner: (desired, observed Kubernetes, observed Temporal, now) → plan.

pub mod model;
