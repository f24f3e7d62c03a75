//! Observe: Temporal's view of the worker deployment — described or remembered, the install
//! that made the last routing change, the target's task queues and gates, and the open
//! workflows pinned to versions the sunset rules are about to retire.

use jiff::Timestamp;

use crate::api::{TemporalConnection, TemporalWorkerDeployment};
use crate::planner;
use crate::planner::model::{Desired, ObservedDeployment, PlanInput, Strategy};
use crate::planner::polling::{self, Remembered};
use crate::planner::takeover::Succession;
use crate::temporal::state::{
    GateObservation, RoutingInstall, TemporalVersionStatus, WorkerDeploymentState,
};
use crate::temporal::{ConnectionKey, TemporalClient, TemporalError};
use crate::worker_deployment::context::Context;
use crate::worker_deployment::outcome::Failure;
use kube::ResourceExt;

/// Temporal's view of the worker deployment: remembered from the last reconcile while nothing
/// there can have changed (`polling::may_reuse`), else described afresh and remembered. With
/// a remembered view, the target's task queues if the rollout waits for its gate.
pub async fn state(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    client: &TemporalClient,
    (key, connection): (&ConnectionKey, &TemporalConnection),
    desired: &Desired,
    deployments: &[ObservedDeployment],
) -> Result<(WorkerDeploymentState, Option<Vec<String>>), Failure> {
    let object = twd.key();
    let generation = twd.metadata.generation.unwrap_or_default();
    let now = Timestamp::now();
    let remembered = ctx.remembered.get(&object);
    if let Some(r) = &remembered
        && polling::may_reuse(
            r,
            generation,
            &desired.build_id,
            deployments,
            now,
            planner::rest::reuse_limit(ctx.settings.rest_interval),
        )
    {
        tracing::debug!("nothing to see in Temporal: its view remembered, not described");
        return Ok((r.state.clone(), r.gate_queues.clone()));
    }
    if let Some(left) = ctx.remembered.settle_left(&object) {
        // Right after our own write the describe would stall or be refused (BusyWorkflow).
        tokio::time::sleep(left).await;
    }
    let name = twd.temporal_deployment_name();
    let mut state = client
        .describe_deployment(&name)
        .await
        .map_err(|e| describe_failed(ctx, twd, (key, connection), &name, e))?;
    // The install recorded by the last routing change only changes with routing, and routing
    // changes move the conflict token: read it again only then. Nothing found (or a failed
    // read) is asked again, so a transient error cannot hide another install for long.
    state.last_routing_install = match remembered {
        Some(r)
            if r.state.conflict_token == state.conflict_token
                && state.exists
                && r.state.last_routing_install.is_some() =>
        {
            r.state.last_routing_install
        }
        _ => routing_install(client, &name, &state, &ctx.settings.succession).await,
    };
    ctx.remembered.put(
        object,
        Remembered {
            generation,
            at: now,
            state: state.clone(),
            gate_queues: None,
        },
    );
    Ok((state, None))
}

/// A failed describe as a [`Failure`]; an authentication error also drops the pooled client
/// and the cached Secret, since credentials may have rotated (the next reconcile connects
/// afresh).
fn describe_failed(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    (key, connection): (&ConnectionKey, &TemporalConnection),
    name: &str,
    e: TemporalError,
) -> Failure {
    if e.is_auth() {
        ctx.services
            .pool
            .evict(key, &twd.spec.worker_options.temporal_namespace);
        if let (Some(caches), Some(secret)) =
            (ctx.services.caches(), connection.spec.auth_mode().secret())
        {
            caches.forget_secret(&twd.namespace().unwrap_or_default(), secret);
        }
    }
    if e.is_resource_exhausted() {
        Failure::StateFetchThrottled {
            name: name.to_string(),
            source: e,
        }
    } else {
        Failure::StateFetchFailed {
            what: format!("describing worker deployment {name:?}"),
            source: e,
        }
    }
}

/// Counts the open workflows pinned to each version the sunset rules are about to scale down
/// or delete ([`planner::sunset::pinned_check_candidates`]), and records the counts in the
/// plan input. Only those versions are counted, so visibility sees a few calls at sunset
/// deadlines rather than one per version per reconcile. A Drained version counts only Pinned
/// workflows (an idle AutoUpgrade workflow moves on with its next task); an Inactive one counts
/// every running workflow on it (gate workflows and overrides put them there). A failed count
/// leaves the version uncounted, which the planner never retires: it looks again later.
pub async fn open_pinned_workflows(
    client: &TemporalClient,
    deployment: &str,
    input: &mut PlanInput,
) {
    for build in planner::sunset::pinned_check_candidates(input) {
        let Some(status) = input.temporal.version(&build).map(|v| v.status) else {
            continue;
        };
        let pinned_only = status == TemporalVersionStatus::Drained;
        match client
            .count_open_workflows(deployment, &build, pinned_only)
            .await
        {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(build_id = %build, open = n, "version kept: workflows are pinned to it");
                }
                if let Some(v) = input
                    .temporal
                    .versions
                    .iter_mut()
                    .find(|v| v.build_id == build)
                {
                    v.open_pinned_workflows = Some(n);
                }
            }
            // Only logged: an uncounted version is never retired, so the failure only delays a
            // sunset until the next count.
            Err(e) => {
                tracing::warn!(build_id = %build, error = %e, "counting open pinned workflows failed; version kept");
            }
        }
    }
}

/// Which install made the last routing change, from the metadata each routing write records
/// on the version it routed to. Read only when this install knows its own ID and the change
/// was made with this controller's identity (duplicate installs), or by a routing manager this
/// controller would take over from (`planner::takeover::manager_role`: a record there means
/// another install of this controller, not a predecessor). A failed read detects nothing this
/// time.
pub async fn routing_install(
    client: &TemporalClient,
    deployment: &str,
    state: &WorkerDeploymentState,
    succession: &Succession,
) -> Option<RoutingInstall> {
    let modifier = state.last_modifier_identity.as_str();
    let ours = modifier == client.identity();
    let successor_of = modifier == state.manager_identity && succession.may_succeed(modifier);
    if client.install_id().is_empty() || !(ours || successor_of) {
        return None;
    }
    let build = state.last_routed_build()?;
    match client.describe_version(deployment, build).await {
        Ok(detail) => detail?.install_id.map(|install_id| RoutingInstall {
            build_id: build.to_string(),
            install_id,
        }),
        // Only logged: duplicate-install detection misses one look, and the next describe
        // asks again (nothing found is never remembered).
        Err(e) => {
            tracing::warn!(build_id = %build, error = %e, "reading the install recorded on the last routed version failed");
            None
        }
    }
}

/// Temporal facts about the target beyond the deployment summary.
#[derive(Debug, Default)]
pub struct TargetFacts {
    pub task_queues: Vec<String>,
    pub gates: Vec<GateObservation>,
    pub unversioned_pollers_on_all_queues: bool,
}

/// Fetched only while the target is registered but not yet Current: task queues (for gates),
/// gate outcomes, and whether unversioned workers poll every queue (migration ramp).
/// `known_queues`: the target's task queues, remembered while it waits for its gate, so that
/// only the gate workflows are asked.
pub async fn target_facts(
    client: &TemporalClient,
    deployment: &str,
    desired: &Desired,
    state: &WorkerDeploymentState,
    known_queues: Option<Vec<String>>,
) -> Result<TargetFacts, TemporalError> {
    let build = &desired.build_id;
    let is_current = state.routing.current_build_id.as_deref() == Some(build.as_str());
    if is_current || state.version(build).is_none() {
        return Ok(TargetFacts::default());
    }
    let needs_migration_check = matches!(desired.strategy, Strategy::Progressive(_))
        && state.routing.current_build_id.is_none();
    let step_gates = desired.step_gates.iter().any(Option::is_some);
    if desired.gate.is_none() && !step_gates && !needs_migration_check {
        return Ok(TargetFacts::default());
    }
    if let Some(task_queues) = known_queues.filter(|_| !needs_migration_check) {
        let gates = match &desired.gate {
            Some(_) => {
                client
                    .describe_gates(deployment, build, &task_queues)
                    .await?
            }
            None => Vec::new(),
        };
        return Ok(TargetFacts {
            task_queues,
            gates,
            ..Default::default()
        });
    }
    let Some(detail) = client.describe_version(deployment, build).await? else {
        return Ok(TargetFacts::default());
    };
    let mut facts = TargetFacts {
        task_queues: detail.workflow_task_queues.clone(),
        ..Default::default()
    };
    if needs_migration_check {
        // A failed check reads as "no unversioned pollers": the first version is then promoted
        // rather than ramped, the behaviour without a migration; the next reconcile asks again.
        facts.unversioned_pollers_on_all_queues = client
            .unversioned_pollers_on_all_queues(&detail)
            .await
            .unwrap_or(false);
    }
    if desired.gate.is_some() && !facts.task_queues.is_empty() {
        facts.gates = client
            .describe_gates(deployment, build, &facts.task_queues)
            .await?;
    }
    Ok(facts)
}

/// The Current version's workflow task queues (and the target's, when not read yet), only while
/// a registered, Available target waits to be routed (`planner::deadline::wants_queues`): a
/// target that does not poll one of them is not routable, and the message says which.
pub async fn current_queues(client: &TemporalClient, deployment: &str, input: &mut PlanInput) {
    if !planner::deadline::wants_queues(input) {
        return;
    }
    let Some(current) = input.temporal.routing.current_build_id.clone() else {
        return;
    };
    let mut builds = vec![(current, true)];
    if input.target_task_queues.is_empty() {
        builds.push((input.desired.build_id.clone(), false));
    }
    for (build, is_current) in builds {
        match client.describe_version(deployment, &build).await {
            Ok(Some(detail)) if is_current => {
                input.current_task_queues = detail.workflow_task_queues
            }
            Ok(Some(detail)) => input.target_task_queues = detail.workflow_task_queues,
            Ok(None) => {}
            // Only logged: unknown queues hold nothing back (the routing write itself checks),
            // and the next reconcile asks again.
            Err(e) => {
                tracing::warn!(build_id = %build, error = %e, "reading a version's task queues failed");
                return;
            }
        }
    }
}
