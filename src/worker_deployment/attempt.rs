//! What one pass through a worker deployment's stages hands the report stage: the
//! [`Attempt`] (the object, the outcome) and, once a plan was made, what it was made from and
//! what of it was done ([`Planned`]). Its own file because the driver, the deletion path, the
//! first look and the report stage all build or read one, and none of them should import
//! another for it.

use std::sync::Arc;

use crate::api::TemporalWorkerDeployment;
use crate::planner::model::{Plan, PlanInput};
use crate::worker_deployment::act::Done;
use crate::worker_deployment::outcome::Outcome;

/// What one pass through the stages produced, for the report stage.
pub struct Attempt {
    /// The object as last seen or written (after the act stage added its finalizer).
    pub twd: Arc<TemporalWorkerDeployment>,
    /// `None` when the reconcile ended before planning.
    pub planned: Option<Planned>,
    /// What the deletion path did (for its events).
    pub finalized: Vec<Done>,
    pub outcome: Outcome,
}

/// The plan, what it was made from, and the writes that succeeded.
pub struct Planned {
    pub input: PlanInput,
    pub plan: Plan,
    pub done: Vec<Done>,
}
