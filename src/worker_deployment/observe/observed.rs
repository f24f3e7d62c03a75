//! What one reconcile observed, and the planner's input made from it.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::api::{TemporalConnection, TemporalConnectionSpec};
use crate::build_id;
use crate::planner::model::{Desired, ObservedDeployment, PlanInput};
use crate::temporal::TemporalClient;
use crate::temporal::state::WorkerDeploymentState;
use crate::worker_deployment::context::Context;
use crate::worker_deployment::observe::temporal::TargetFacts;

/// Everything observed for one reconcile.
pub struct Observed {
    pub connection: TemporalConnection,
    /// The spec's `connectionRef` as Deployments record it (`render::connection_record`).
    pub connection_ref: String,
    /// The settings of the other Connections old versions' Deployments record, by record
    /// (`recorded::connections`); one that could not be read is absent.
    pub recorded_connections: BTreeMap<String, TemporalConnectionSpec>,
    /// Connected to the TWD's Temporal namespace.
    pub client: TemporalClient,
    /// Resolved gate input (may come from a Secret: never log it).
    pub gate_input: Option<serde_json::Value>,
    /// Resolved input of the step gate in effect (`step_gates.rs`).
    pub step_gate_input: Option<serde_json::Value>,
    pub deployments: Vec<ObservedDeployment>,
    pub temporal: WorkerDeploymentState,
    pub facts: TargetFacts,
}

/// The planner's input before Temporal was asked (a first look, `crate::planner::first_look`):
/// the validated spec and the versioned Deployments, Temporal's view unknown (empty).
pub fn before_temporal(
    desired: Desired,
    deployments: Vec<ObservedDeployment>,
    ctx: &Context,
    now: Timestamp,
) -> PlanInput {
    let settings = &ctx.settings;
    PlanInput {
        desired,
        deployments,
        temporal: WorkerDeploymentState::default(),
        gates: Vec::new(),
        target_task_queues: Vec::new(),
        unversioned_pollers_on_all_queues: false,
        connection_hash: String::new(),
        predecessor_connection_hash: String::new(),
        connection_ref: String::new(),
        recorded_connections: Default::default(),
        succession: settings.succession.clone(),
        analysis: None,
        step_gates: vec![],
        controller_identity: ctx.services.identity.clone(),
        install_id: ctx.services.install_id.clone(),
        fast_poll: settings.fast_poll,
        now,
        delayed_by_budget: None,
        pollers: Default::default(),
        current_task_queues: Vec::new(),
        target_pods: None,
        retired: Vec::new(),
        adopted: None,
    }
}

impl Observed {
    /// The planner's input: the validated spec plus what was observed.
    pub fn plan_input(&self, desired: Desired, ctx: &Context, now: Timestamp) -> PlanInput {
        PlanInput {
            temporal: self.temporal.clone(),
            gates: self.facts.gates.clone(),
            target_task_queues: self.facts.task_queues.clone(),
            unversioned_pollers_on_all_queues: self.facts.unversioned_pollers_on_all_queues,
            connection_hash: build_id::connection_hash(&self.connection.spec),
            predecessor_connection_hash: build_id::go_connection_hash(&self.connection.spec),
            connection_ref: self.connection_ref.clone(),
            recorded_connections: self
                .recorded_connections
                .iter()
                .map(|(r, c)| (r.clone(), build_id::connection_hash(c)))
                .collect(),
            install_id: self.client.install_id().to_string(),
            ..before_temporal(desired, self.deployments.clone(), ctx, now)
        }
    }
}
