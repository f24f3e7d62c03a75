//! Poller health of the live versions (the rules: `src/planner/poller_health.rs`): when a check
//! is due, asks Temporal which pollers each task queue of the Current and Ramping versions has,
//! and remembers the check per object until the next one. In memory only: a restarted
//! controller checks each rolled-out object once on its first reconcile.
//!
//! Cost per check: one `DescribeTaskQueue` per task queue name of the live versions (a queue
//! both versions poll is asked once), plus one `DescribeWorkerDeploymentVersion` per live
//! version whose queue list is older than `QUEUES_MAX_AGE`; all through the Temporal budget.
//! Stops at the first failed call: after a refusal or a timeout, more calls only add load.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

use crate::api::TemporalWorkerDeployment;
use crate::planner::clock;
use crate::planner::model::PlanInput;
use crate::planner::poller_health::{self, Check, PollerSettings, QUEUES_MAX_AGE, QueueLook};
use crate::temporal::TemporalClient;
use crate::temporal::client::QueueKind;
use crate::temporal::error::TemporalError;
use crate::worker_deployment::remembered::pollers::{PollerChecks, Queues};

/// Checks the live versions when due and tells the planner what the last check found.
pub async fn observe(
    checks: &PollerChecks,
    settings: &PollerSettings,
    client: &TemporalClient,
    twd: &TemporalWorkerDeployment,
    input: &mut PlanInput,
) {
    let key = twd.key();
    let deployment = twd.temporal_deployment_name();
    let (live, later) = poller_health::judged_builds(
        &input.temporal,
        &input.deployments,
        settings.live_within,
        input.now,
    );
    let mut memo = checks.get(&key);
    if poller_health::is_due(memo.check.as_ref(), &live, settings, input.now) {
        let check = look(client, &deployment, &live, &mut memo.queues, input.now).await;
        if let Some(why) = &check.failed {
            tracing::info!(deployment, why, "poller check could not ask Temporal");
        }
        memo.queues.retain(|build, _| live.contains(build));
        memo.check = Some(check);
        checks.map().insert(key, memo.clone());
    }
    input.pollers = poller_health::view(memo.check.as_ref(), &live, later, &deployment, settings);
}

/// One check of `live`, reusing queue lists younger than `QUEUES_MAX_AGE`.
async fn look(
    client: &TemporalClient,
    deployment: &str,
    live: &[String],
    known: &mut HashMap<String, Queues>,
    now: Timestamp,
) -> Check {
    let mut check = Check {
        at: now,
        builds: live.to_vec(),
        looks: Vec::new(),
        failed: None,
    };
    // (queue, kind) → the builds that poll it: one call per queue serves every live version.
    let mut wanted: BTreeMap<(String, QueueKind), Vec<String>> = BTreeMap::new();
    for build in live {
        let queues = match queues_of(client, deployment, build, known, now).await {
            Ok(q) => q,
            Err(e) => {
                check.failed = Some(e.to_string());
                return check;
            }
        };
        for (queue, kind) in queues {
            wanted.entry((queue, kind)).or_default().push(build.clone());
        }
    }
    for ((queue, kind), builds) in wanted {
        match client.task_queue_pollers(deployment, &queue, kind).await {
            Ok(pollers) => check
                .looks
                .extend(builds.into_iter().map(|build_id| QueueLook {
                    build_id,
                    task_queue: queue.clone(),
                    pollers: pollers.clone(),
                })),
            Err(e) => {
                check.failed = Some(e.to_string());
                break;
            }
        }
    }
    check
}

/// The version's queues, each asked with its workflow type when it has one (see the planner
/// module for why), read from Temporal when not known or too old.
async fn queues_of(
    client: &TemporalClient,
    deployment: &str,
    build: &str,
    known: &mut HashMap<String, Queues>,
    now: Timestamp,
) -> Result<Vec<(String, QueueKind)>, TemporalError> {
    let fresh = known
        .get(build)
        .filter(|q| clock::add(q.at, QUEUES_MAX_AGE).is_some_and(|until| until > now));
    if let Some(q) = fresh {
        return Ok(q.queues.clone());
    }
    let detail = client.describe_version(deployment, build).await?;
    let detail = detail.unwrap_or_default();
    let mut queues: Vec<(String, QueueKind)> = detail
        .workflow_task_queues
        .iter()
        .map(|q| (q.clone(), QueueKind::Workflow))
        .collect();
    for q in &detail.activity_task_queues {
        if !queues.iter().any(|(name, _)| name == q) {
            queues.push((q.clone(), QueueKind::Activity));
        }
    }
    known.insert(
        build.to_string(),
        Queues {
            at: now,
            queues: queues.clone(),
        },
    );
    Ok(queues)
}
