//! The worker-deployment reconciler's settings, typed once from the command line in
//! `run::RunOptions`. What every reconciler shares (identity, watched namespaces, shard) is in
//! `crate::reconciler::services`; the other reconcilers' settings are in their own folders.

use std::time::Duration;

use crate::worker_deployment::validate::ControllerSettings;

/// The worker-deployment reconciler's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Identities whose routing this controller takes over: its own earlier identity and
    /// predecessor controllers (`planner::takeover`).
    pub succession: crate::planner::takeover::Succession,
    pub controller_version: String,
    /// Re-check interval for resources with nothing pending.
    pub idle_interval: Duration,
    /// Re-check interval at rest ([`crate::planner::rest`]).
    pub rest_interval: Duration,
    /// Poll interval while waiting for Temporal-side facts (pollers, gates); also the
    /// planner's (`PlanInput::fast_poll`).
    pub fast_poll: Duration,
    pub planner: ControllerSettings,
    /// Reconciles running at once (0: unbounded); kube-runtime queues the rest.
    pub max_concurrent_reconciles: u16,
    /// Budget waits in one reconcile at least this long are reported in the status.
    pub budget_delay_report: Duration,
    /// Whose per-version backlog the backlog poller reads (`crate::backlog::consumed`).
    pub backlog_scope: crate::backlog::Scope,
    /// Poller health of the live versions: threshold and interval.
    pub pollers: crate::planner::poller_health::PollerSettings,
}

impl Settings {
    /// The looks-again bounds of the planner's rest cadence.
    pub fn cadence(&self) -> crate::planner::rest::Cadence {
        crate::planner::rest::Cadence {
            idle: self.idle_interval,
            rest: self.rest_interval,
        }
    }
}
