//! Per-version autoscaling signals: the task-queue backlog of every live version, polled from
//! Temporal at a modest pace and exported as metrics with build-ID labels.
//!
//! Only versions whose backlog something consumes are polled ([`consumed`]): each poll is a
//! Temporal request, and an idle fleet must cost Temporal almost nothing
//! (`docs/temporal-budget.md`).
//!
//! Reconciles publish what to watch ([`Targets`]: each TWD's client, worker deployment and live
//! build IDs); one loop ([`run`]) asks Temporal once per version per interval (one
//! `DescribeWorkerDeploymentVersion` covers all task queues of the version) and replaces the
//! [`Stats`] snapshot that `/metrics` renders. Only the Lease holder polls, so adding replicas
//! does not multiply the load on Temporal.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::planner::model::PlanInput;
use crate::temporal::TemporalClient;
use crate::temporal::task_queue_stats::QueueStats;

/// One TWD's versions to watch.
#[derive(Clone, Debug)]
pub struct Target {
    pub client: TemporalClient,
    /// Temporal worker deployment name (`<ns>/<name>`).
    pub deployment: String,
    pub build_ids: Vec<String>,
}

/// `(namespace, name)` of a TWD.
pub type Key = (String, String);

/// What reconciles published, by TWD.
#[derive(Debug, Default)]
pub struct Targets(Mutex<BTreeMap<Key, Target>>);

impl Targets {
    /// Replaces what to watch for one TWD (an empty list forgets it).
    pub fn publish(&self, key: Key, target: Target) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if target.build_ids.is_empty() {
            m.remove(&key);
        } else {
            m.insert(key, target);
        }
    }

    /// The TWD is gone.
    pub fn forget(&self, key: &Key) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(key);
    }

    /// Keeps only the TWDs `keep` says are still this replica's (a sharded install: one that
    /// moved to another shard is that shard's to read).
    pub fn retain(&self, keep: impl Fn(&Key) -> bool) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|k, _| keep(k));
    }

    fn snapshot(&self) -> Vec<(Key, Target)> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().map(|(k, t)| (k.clone(), t.clone())).collect()
    }
}

/// The live versions of a plan input: a Deployment that is not being deleted, of a version
/// Temporal knows (an unregistered one has no task queues to ask about yet).
pub fn live_builds(input: &PlanInput) -> Vec<String> {
    let mut out: Vec<String> = input
        .deployments
        .iter()
        .filter(|d| !d.deleting && input.temporal.version(&d.build_id).is_some())
        .map(|d| d.build_id.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Which worker deployments' backlog is read (`--backlog-metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// Only those whose backlog something consumes ([`consumed`]).
    #[default]
    Consumed,
    /// Every live version of every worker deployment.
    All,
}

/// True when the backlog of this worker deployment is worth a Temporal request per version
/// per poll: `--backlog-metrics=all`, the annotation [`crate::api::ANNOTATION_BACKLOG_METRICS`] `"true"`,
/// or an autoscaler in play (`spec.replicas` left to one, an HPA on one of its Deployments, or
/// an autoscaler template), unless the annotation says `"false"`. What cannot be seen from
/// here (an HPA on the external metric for a worker that sets `spec.replicas`) opts in with
/// the annotation.
pub fn consumed(
    scope: Scope,
    annotation: Option<&str>,
    replicas_left_to_autoscaler: bool,
    input: &PlanInput,
) -> bool {
    match annotation {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    scope == Scope::All
        || replicas_left_to_autoscaler
        || input
            .deployments
            .iter()
            .any(|d| d.autoscaled || d.autoscaler_present)
}

/// The interval of one pass over `versions` versions: at least `configured`, and long enough
/// that the pass never asks Temporal more than [`MAX_RATE`] times a second, so a large fleet
/// of autoscaled workers reads its backlogs less often instead of crowding out rollouts.
pub fn pass_interval(configured: Duration, versions: usize) -> Duration {
    let floor = Duration::from_secs_f64(versions as f64 / MAX_RATE);
    configured.max(floor)
}

/// Backlog reads per second, at most (a small share of the default shared budget, 50/s).
pub const MAX_RATE: f64 = 2.0;

/// One task queue of one live version.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionQueue {
    pub namespace: String,
    pub name: String,
    pub build_id: String,
    /// The Temporal namespace the version's workers poll in.
    pub temporal_namespace: String,
    pub stats: QueueStats,
}

/// The last complete poll, rendered by `/metrics`.
#[derive(Debug, Default)]
pub struct Stats(Mutex<Vec<VersionQueue>>);

impl Stats {
    pub fn get(&self) -> Vec<VersionQueue> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the snapshot (the poller, after each complete poll).
    pub fn replace(&self, v: Vec<VersionQueue>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }
}

/// Polls every `interval` while `leader` is true, until `stop` turns true. A version whose read
/// fails keeps its last numbers until the next poll (a gap would read as an empty backlog).
pub async fn run(
    targets: Arc<Targets>,
    stats: Arc<Stats>,
    interval: Duration,
    leader: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let started = tokio::time::Instant::now();
        let versions: usize = targets
            .snapshot()
            .iter()
            .map(|(_, t)| t.build_ids.len())
            .sum();
        let period = pass_interval(interval, versions);
        if !*leader.borrow() {
            stats.replace(Vec::new());
            wait = period;
            continue;
        }
        let previous = stats.get();
        let mut next = Vec::new();
        for ((namespace, name), target) in targets.snapshot() {
            for build_id in &target.build_ids {
                match target
                    .client
                    .version_queue_stats(&target.deployment, build_id)
                    .await
                {
                    Ok(queues) => next.extend(queues.into_iter().map(|stats| VersionQueue {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        build_id: build_id.clone(),
                        temporal_namespace: target.client.namespace().to_string(),
                        stats,
                    })),
                    Err(e) => {
                        tracing::debug!(%namespace, %name, %build_id, error = %e, "task-queue stats read failed; keeping the last numbers");
                        next.extend(
                            previous
                                .iter()
                                .filter(|q| {
                                    q.namespace == namespace
                                        && q.name == name
                                        && &q.build_id == build_id
                                })
                                .cloned(),
                        );
                    }
                }
            }
        }
        stats.replace(next);
        wait = period.saturating_sub(started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::model::ObservedDeployment;

    #[test]
    fn only_a_consumed_backlog_is_read() {
        let mut input = PlanInput::test();
        assert!(
            !consumed(Scope::Consumed, None, false, &input),
            "nothing reads it"
        );
        assert!(consumed(Scope::All, None, false, &input));
        assert!(consumed(Scope::Consumed, Some("true"), false, &input));
        assert!(
            consumed(Scope::Consumed, None, true, &input),
            "replicas left to an autoscaler"
        );
        input.deployments[1].autoscaled = true;
        assert!(
            consumed(Scope::Consumed, None, false, &input),
            "an HPA scales v2"
        );
        assert!(
            !consumed(Scope::All, Some("false"), true, &input),
            "opted out"
        );
    }

    #[test]
    fn a_large_fleet_is_read_less_often_not_faster() {
        let fifteen = Duration::from_secs(15);
        assert_eq!(pass_interval(fifteen, 10), fifteen);
        assert_eq!(pass_interval(fifteen, 300), Duration::from_secs(150));
    }

    #[test]
    fn live_versions_have_a_deployment_and_are_known_to_temporal() {
        let mut input = PlanInput::test();
        // PlanInput::test: v1 (Current) and v2 (Inactive), both with Deployments.
        assert_eq!(live_builds(&input), ["v1", "v2"]);
        input.deployments.push(ObservedDeployment::test("v9", 1)); // not registered yet
        let mut gone = ObservedDeployment::test("v1", 1);
        gone.deleting = true;
        input.deployments[0] = gone;
        assert_eq!(live_builds(&input), ["v2"]);
    }
}
