//! The observe stage: reads the facts one reconcile needs — a Temporal client through the
//! Connection ([`crate::reconciler::connect`]), gate input, the versioned Deployments and
//! Temporal's view of the worker deployment, then the facts single rules need (autoscalers,
//! step gates, pinned workflows, drain visibility, analysis samples, the Current version's task
//! queues and the target's Pods while the target waits), one file each.
//! Read-only; all writes live in `act`. Only the reconcile drivers (`worker_deployment/mod.rs`,
//! `finalize.rs`) call into it.

mod adopted;
mod analysis;
mod autoscalers;
mod deployments;
mod drain_visibility;
mod gate_input;
mod observed;
mod pollers;
mod recorded;
mod step_gates;
mod target_pods;
mod temporal;

pub use deployments::{observed, owned_deployments};
pub use observed::{Observed, before_temporal};

use jiff::Timestamp;
use kube::ResourceExt;

use crate::api::TemporalWorkerDeployment;
use crate::planner::model::{Desired, ObservedDeployment, PlanInput};
use crate::worker_deployment::context::Context;
use crate::worker_deployment::outcome::Failure;

/// The observe stage: Kubernetes and Temporal state, in the order a user fixes things
/// (Connection, credentials, Temporal reachability, gate input, Deployments, Temporal's
/// state), then the facts single rules need. Publishes the live versions to the backlog
/// poller.
pub async fn everything(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    mut desired: Desired,
) -> Result<(Observed, PlanInput), Failure> {
    let mut observed = kubernetes_and_temporal(ctx, twd, &mut desired).await?;
    let mut input = observed.plan_input(desired, ctx, Timestamp::now());
    // The record GC's ledger, kept in status (`planner::records`).
    input.retired = twd
        .status
        .as_ref()
        .map(|s| s.retired_versions.clone())
        .unwrap_or_default();
    autoscalers::mark(
        &ctx.services.client,
        ctx.services.ready_caches().await,
        twd,
        &mut input.deployments,
    )
    .await;
    step_gates::observe(ctx, twd, &mut observed, &mut input).await?;
    let deployment = twd.temporal_deployment_name();
    let client = &observed.client;
    temporal::open_pinned_workflows(client, &deployment, &mut input).await;
    let prior = twd.status.as_ref();
    drain_visibility::observe(client, &ctx.pinned, &deployment, prior, &mut input).await;
    analysis::observe(client, &deployment, &mut input).await;
    pollers::observe(&ctx.pollers, &ctx.settings.pollers, client, twd, &mut input).await;
    temporal::current_queues(client, &deployment, &mut input).await;
    target_pods::observe(&ctx.services.client, twd, &mut input).await;
    let caches = ctx.services.ready_caches().await;
    adopted::observe(&ctx.services.client, caches, client, twd, &mut input).await;
    let consumed = crate::backlog::consumed(
        ctx.settings.backlog_scope,
        twd.annotations()
            .get(crate::api::ANNOTATION_BACKLOG_METRICS)
            .map(String::as_str),
        twd.spec.replicas.is_none(),
        &input,
    );
    ctx.backlog.publish(
        (twd.namespace().unwrap_or_default(), twd.name_any()),
        crate::backlog::Target {
            client: client.clone(),
            deployment,
            // An empty list forgets the worker: nothing consumes its backlog.
            build_ids: if consumed {
                crate::backlog::live_builds(&input)
            } else {
                Vec::new()
            },
        },
    );
    Ok((observed, input))
}

/// The target's build ID from its second source (the first is `crate::build_id::compute`):
/// the version a predecessor controller made for this pod template, if any
/// (`planner::takeover::adopted_target`). Set before Temporal is asked about the target.
fn target_build_id(desired: &mut Desired, deployments: &[ObservedDeployment]) {
    if let Some(adopted) = crate::planner::takeover::adopted_target(desired, deployments) {
        desired.build_id = adopted;
    }
}

async fn kubernetes_and_temporal(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    desired: &mut Desired,
) -> Result<Observed, Failure> {
    let ns = twd.namespace().unwrap_or_default();
    let connected = ctx.services.connector().connect(twd).await?;
    let client = connected.client;
    let deployments =
        owned_deployments(&ctx.services.client, ctx.services.ready_caches().await, twd)
            .await
            .map_err(Failure::DeploymentsUnreadable)?;
    target_build_id(desired, &deployments);
    let connection_ref = crate::render::connection_record(twd);
    let recorded_connections = recorded::connections(ctx, twd, &connection_ref, &deployments).await;
    let desired = &*desired;
    let name = twd.temporal_deployment_name();
    let (temporal, gate_queues) = temporal::state(
        ctx,
        twd,
        &client,
        (&connected.key, &connected.connection),
        desired,
        &deployments,
    )
    .await?;
    // The gate's input matters only until the target is Current: a rollout at rest reads no
    // ConfigMap or Secret for it.
    let gate_input = if temporal.routing.current_build_id.as_deref() == Some(&desired.build_id) {
        None
    } else {
        gate_input::gate_input(&ctx.services.client, &ns, twd)
            .await
            .map_err(Failure::GateInputUnavailable)?
    };
    let facts = temporal::target_facts(&client, &name, desired, &temporal, gate_queues)
        .await
        .map_err(|source| Failure::StateFetchFailed {
            what: "describing target version".into(),
            source,
        })?;
    Ok(Observed {
        connection: connected.connection,
        connection_ref,
        recorded_connections,
        client,
        gate_input,
        step_gate_input: None,
        deployments,
        temporal,
        facts,
    })
}

#[cfg(test)]
mod connection_roll_tests {
    use super::*;
    use crate::api::{ANNOTATION_CONNECTION_HASH, ANNOTATION_POD_TEMPLATE_HASH, LABEL_BUILD_ID};
    use crate::planner;
    use crate::planner::model::RoutingChange;
    use crate::worker_deployment::status::{self, Report};
    use k8s_openapi::api::apps::v1::Deployment;

    /// The versioned Deployment of `build` as the API server returns it: rolled in place to
    /// Connection hash `conn` (revision 2), 3 replicas, Available with 3 ready old Pods, and
    /// the given `Progressing` condition for `observed` of generation 4.
    fn deployment(build: &str, progressing: (&str, &str), observed: i64) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": format!("w-{build}"),
                "generation": 4,
                "labels": {LABEL_BUILD_ID: build},
                "annotations": {"deployment.kubernetes.io/revision": "2"},
                "creationTimestamp": "2026-03-01T12:00:00Z",
            },
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {LABEL_BUILD_ID: build}},
                "template": {
                    "metadata": {"annotations": {
                        ANNOTATION_CONNECTION_HASH: "conn",
                        ANNOTATION_POD_TEMPLATE_HASH: "tpl",
                    }},
                    "spec": {"containers": [{"name": "worker", "image": "orders:v1"}]},
                },
            },
            "status": {
                "observedGeneration": observed,
                "replicas": 4,
                "readyReplicas": 3,
                "updatedReplicas": 1,
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                     "lastTransitionTime": "2026-03-01T12:05:00Z"},
                    {"type": "Progressing", "status": progressing.0, "reason": progressing.1,
                     "lastTransitionTime": "2026-03-02T11:55:00Z"},
                ],
            },
        }))
        .expect("fixture Deployment")
    }

    fn stalled(build: &str) -> Deployment {
        deployment(build, ("False", "ProgressDeadlineExceeded"), 4)
    }

    /// v1 Current, v2 the healthy registered target (AllAtOnce would promote it now).
    fn input(v1: Deployment, v2: Deployment) -> PlanInput {
        let mut i = PlanInput::test();
        i.deployments = [v1, v2].iter().filter_map(observed).collect();
        i
    }

    fn reasons(i: &PlanInput) -> (Option<RoutingChange>, Vec<(String, String)>) {
        let plan = planner::plan(i);
        let s = status::compute(
            None,
            1,
            &Report::Planned {
                input: i,
                plan: &plan,
                routed: None,
                outcome: Ok(()),
            },
            i.now,
        );
        let conditions = s
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), format!("{}/{}", c.status, c.reason)))
            .collect();
        (plan.routing, conditions)
    }

    #[test]
    fn a_connection_roll_whose_new_pods_never_become_ready_stalls_and_holds_routing() {
        let ok = deployment("v1", ("True", "NewReplicaSetAvailable"), 4);
        let (routing, conditions) = reasons(&input(ok, stalled("v2")));
        assert_eq!(routing, None, "no promotion of a stalled version");
        let want = |s: &str| s.to_string();
        assert_eq!(
            conditions,
            vec![
                (want("Ready"), want("False/ConnectionRolloutStalled")),
                (want("Progressing"), want("False/ConnectionRolloutStalled")),
                (want("Reconciling"), want("False/ConnectionRolloutStalled")),
                (want("Stalled"), want("True/ConnectionRolloutStalled")),
            ]
        );
    }

    #[test]
    fn a_stall_not_yet_judged_for_the_latest_spec_is_no_stall() {
        // Right after the fixed Connection rolled v2 again, kube-controller-manager has not
        // looked at generation 4 yet: the old verdict is about the previous template.
        let ok = deployment("v1", ("True", "NewReplicaSetAvailable"), 4);
        let v2 = deployment("v2", ("False", "ProgressDeadlineExceeded"), 3);
        let (routing, _) = reasons(&input(ok.clone(), v2));
        assert!(matches!(routing, Some(RoutingChange::SetCurrent { .. })));
        // Pods Ready again: Kubernetes flips the condition back and the rollout resumes.
        let recovered = deployment("v2", ("True", "NewReplicaSetAvailable"), 4);
        let (routing, conditions) = reasons(&input(ok, recovered));
        assert!(matches!(routing, Some(RoutingChange::SetCurrent { .. })));
        assert!(
            conditions.iter().all(|(_, c)| !c.contains("Stalled")),
            "{conditions:?}"
        );
    }
}
