//! What the act stage did: one [`Done`] per write that succeeded, and the [`Executed`] record
//! of a plan's execution (its writes, then its failure if one stopped it). The report stage
//! turns it into events and the status.

use crate::planner::model::{PinnedBatch, RoutingChange};
use crate::worker_deployment::outcome::Failure;

/// One write that succeeded; drives events and in-memory status updates.
#[derive(Clone, Debug, PartialEq)]
pub enum Done {
    Created {
        name: String,
        build_id: String,
    },
    Updated {
        name: String,
        build_id: String,
    },
    /// A version's Pods were restarted in place (`temporal.io/restart`).
    Restarted {
        name: String,
        build_id: String,
        value: String,
    },
    Scaled {
        name: String,
        build_id: String,
        replicas: i32,
    },
    GateStarted {
        task_queue: String,
        workflow_id: String,
    },
    ManagerClaimed,
    Routed(RoutingChange),
    /// Temporal's new conflict token, returned by a manager claim or a routing change.
    ConflictToken(Vec<u8>),
    /// Temporal was asked to cancel or terminate the workflows pinned to an old version.
    PinnedBatch(PinnedBatch),
    Deleted {
        name: String,
        build_id: String,
    },
    /// The Temporal record of an old version whose Deployment is gone was deleted.
    VersionForgotten {
        build_id: String,
    },
    /// A take-over record was written on a versioned Deployment (`planner::takeover`).
    Adopted {
        name: String,
        build_id: String,
    },
    /// Deletion of the TWD: a versioned Deployment was deleted to stop its workers.
    Stopped {
        name: String,
        build_id: String,
    },
    /// `spec.adopt`: the unversioned workers' Deployment was scaled to zero or deleted.
    Unversioned {
        name: String,
        action: crate::planner::adoption::Action,
        message: String,
    },
    /// Deletion of the TWD: Temporal cleanup was given up (its state is left behind).
    CleanupAbandoned {
        message: String,
    },
}

impl Done {
    /// True for writes to the worker deployment in Temporal (routing, the manager): they
    /// change what it reports and keep its system workflow busy for a moment.
    pub fn wrote_temporal_deployment(&self) -> bool {
        matches!(
            self,
            Done::ManagerClaimed | Done::Routed(_) | Done::VersionForgotten { .. }
        )
    }
}

#[derive(Debug, Default)]
pub struct Executed {
    pub done: Vec<Done>,
    pub failure: Option<Failure>,
}

impl Executed {
    pub fn routed(&self) -> Option<&RoutingChange> {
        self.done.iter().find_map(|d| match d {
            Done::Routed(r) => Some(r),
            _ => None,
        })
    }
}
