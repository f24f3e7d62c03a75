//! The observe stage: reads the facts one reconcile needs — the Connection and its auth Secret,
//! gate input, owned Deployments, and Temporal's view of the worker deployment. Read-only; all
//! writes live in `act`.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::api::TemporalConnection;
use crate::api::connection::AuthMode;
use crate::api::{
    ANNOTATION_CONNECTION_HASH, ANNOTATION_POD_TEMPLATE_HASH, LABEL_BUILD_ID,
    LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment,
};
use crate::build_id;
use crate::planner;
use crate::planner::model::{Desired, ObservedDeployment, PlanInput, Strategy};
use crate::planner::polling::{self, Remembered};
use crate::reconcile::{Context, Failure, Settings};
use crate::temporal::state::{
    GateObservation, RoutingInstall, TemporalVersionStatus, WorkerDeploymentState,
};
use crate::temporal::{self, ConnectionKey, TemporalClient, TemporalError};

/// Everything observed for one reconcile.
pub struct Observed {
    pub connection: TemporalConnection,
    /// Connected to the TWD's Temporal namespace.
    pub client: TemporalClient,
    /// Resolved gate input (may come from a Secret: never log it).
    pub gate_input: Option<serde_json::Value>,
    /// Resolved input of the step gate in effect (`src/reconcile/step_gates.rs`).
    pub step_gate_input: Option<serde_json::Value>,
    pub deployments: Vec<ObservedDeployment>,
    pub temporal: WorkerDeploymentState,
    pub facts: TargetFacts,
}

impl Observed {
    /// The planner's input: the validated spec plus what was observed.
    pub fn plan_input(&self, desired: Desired, settings: &Settings, now: Timestamp) -> PlanInput {
        PlanInput {
            desired,
            deployments: self.deployments.clone(),
            temporal: self.temporal.clone(),
            gates: self.facts.gates.clone(),
            target_task_queues: self.facts.task_queues.clone(),
            unversioned_pollers_on_all_queues: self.facts.unversioned_pollers_on_all_queues,
            connection_hash: build_id::connection_hash(&self.connection.spec),
            analysis: None,
            step_gates: vec![],
            controller_identity: settings.identity.clone(),
            install_id: self.client.install_id().to_string(),
            fast_poll: settings.fast_poll,
            now,
            delayed_by_budget: None,
        }
    }
}

/// Observes everything, in the order a user fixes things: Connection, credentials, Temporal
/// reachability, gate input, Deployments, then Temporal's state.
pub async fn all(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    desired: &Desired,
) -> Result<Observed, Failure> {
    let ns = twd.namespace().unwrap_or_default();
    let connection = connection(&ctx.client, &ns, twd).await?;
    let (client, key) = temporal_client(ctx, &ns, &connection, twd).await?;
    let gate_input = gate_input(&ctx.client, &ns, twd)
        .await
        .map_err(Failure::GateInputUnavailable)?;
    let deployments = owned_deployments(&ctx.client, twd).await.map_err(|e| {
        Failure::DeploymentsUnreadable(format!("listing versioned Deployments: {e}"))
    })?;
    let name = twd.temporal_deployment_name();
    let (temporal, gate_queues) =
        temporal_state(ctx, twd, &client, &key, desired, &deployments).await?;
    let facts = target_facts(&client, &name, desired, &temporal, gate_queues)
        .await
        .map_err(|e| Failure::StateFetchFailed(format!("describing target version: {e}")))?;
    Ok(Observed {
        connection,
        client,
        gate_input,
        step_gate_input: None,
        deployments,
        temporal,
        facts,
    })
}

/// Temporal's view of the worker deployment: remembered from the last reconcile while nothing
/// there can have changed (`polling::may_reuse`), else described afresh and remembered. With
/// a remembered view, the target's task queues if the rollout waits for its gate.
async fn temporal_state(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    client: &TemporalClient,
    key: &ConnectionKey,
    desired: &Desired,
    deployments: &[ObservedDeployment],
) -> Result<(WorkerDeploymentState, Option<Vec<String>>), Failure> {
    let object = ObjectRef::from_obj(twd);
    let generation = twd.metadata.generation.unwrap_or_default();
    let now = Timestamp::now();
    let remembered = ctx.remembered.get(&object);
    if let Some(r) = &remembered
        && polling::may_reuse(r, generation, &desired.build_id, deployments, now)
    {
        tracing::debug!("nothing to see in Temporal: its view remembered, not described");
        return Ok((r.state.clone(), r.gate_queues.clone()));
    }
    if let Some(left) = ctx.remembered.settle_left(&object) {
        // Right after our own write the describe would stall or be refused (BusyWorkflow).
        tokio::time::sleep(left).await;
    }
    let name = twd.temporal_deployment_name();
    let mut state = match client.describe_deployment(&name).await {
        Ok(state) => state,
        Err(e) => {
            if e.is_auth() {
                // Credentials may have rotated: the next reconcile connects afresh.
                ctx.pool
                    .evict(key, &twd.spec.worker_options.temporal_namespace);
            }
            return Err(if e.is_resource_exhausted() {
                Failure::StateFetchThrottled(format!(
                    "rate limited by Temporal describing worker deployment {name:?}: {e}"
                ))
            } else {
                Failure::StateFetchFailed(format!("describing worker deployment {name:?}: {e}"))
            });
        }
    };
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
        _ => routing_install(client, &name, &state).await,
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

/// The TWD's Connection, if it exists.
pub async fn connection_opt(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<Option<TemporalConnection>, kube::Error> {
    let name = &twd.spec.worker_options.connection_ref.name;
    Api::<TemporalConnection>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
}

/// The TWD's Connection.
pub async fn connection(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<TemporalConnection, Failure> {
    let name = &twd.spec.worker_options.connection_ref.name;
    match connection_opt(client, ns, twd).await {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(Failure::ConnectionNotFound(format!(
            "TemporalConnection {name:?} not found in namespace {ns:?}"
        ))),
        Err(e) => Err(Failure::ConnectionNotFound(format!(
            "reading TemporalConnection {name:?}: {e}"
        ))),
    }
}

/// A client for the TWD's Temporal namespace, with the Connection's credentials.
pub async fn temporal_client(
    ctx: &Context,
    ns: &str,
    connection: &TemporalConnection,
    twd: &TemporalWorkerDeployment,
) -> Result<(TemporalClient, ConnectionKey), Failure> {
    let mode = connection.spec.auth_mode();
    let secret = auth_secret(&ctx.client, ns, &mode)
        .await
        .map_err(Failure::AuthSecretInvalid)?;
    let auth = temporal::auth_from_secret(&mode, secret.as_ref())
        .map_err(|e| Failure::AuthSecretInvalid(e.to_string()))?;
    let key = ConnectionKey::new(&connection.spec, auth);
    let client = ctx
        .pool
        .get_or_connect(
            key.clone(),
            &twd.spec.worker_options.temporal_namespace,
            &ctx.settings.identity,
        )
        .await
        .map_err(|e| {
            Failure::ClientCreationFailed(format!(
                "connecting to Temporal at {}: {e}",
                connection.spec.host_port
            ))
        })?
        .with_install_id(&ctx.settings.install_id);
    Ok((client, key))
}

/// Versioned Deployments controlled by this TWD, oldest first.
pub async fn owned_deployments(
    client: &kube::Client,
    twd: &TemporalWorkerDeployment,
) -> Result<Vec<ObservedDeployment>, kube::Error> {
    let ns = twd.namespace().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let selector = format!(
        "{LABEL_DEPLOYMENT_NAME}={}",
        crate::render::label_value(&twd.name_any())
    );
    let list = api.list(&ListParams::default().labels(&selector)).await?;
    let uid = twd.uid();
    let mut out: Vec<ObservedDeployment> = list
        .items
        .iter()
        .filter(|d| {
            d.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
        })
        .filter_map(observed)
        .collect();
    out.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(out)
}

/// Kubernetes' revision of a Deployment's pod template: `1` when created, one more per
/// template change.
const ANNOTATION_REVISION: &str = "deployment.kubernetes.io/revision";
/// The `Progressing` reason kube-controller-manager sets once a rollout has made no progress
/// for `spec.progressDeadlineSeconds`.
const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// Converts a Deployment to the planner's view; `None` for Deployments without a build ID.
pub fn observed(d: &Deployment) -> Option<ObservedDeployment> {
    let build_id = d.labels().get(LABEL_BUILD_ID)?.clone();
    let status = d.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let healthy_since = conditions
        .iter()
        .find(|c| c.type_ == "Available" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map(|t| t.0)
                .unwrap_or_else(Timestamp::now)
        });
    // Judged by kube-controller-manager for the spec it last saw: right after our update the
    // condition still describes the previous template until it catches up.
    let current = match (d.meta().generation, status.observed_generation) {
        (Some(generation), Some(observed)) => observed >= generation,
        (_, None) => false,
        (None, Some(_)) => true,
    };
    let progress_deadline_exceeded = current
        && conditions.iter().any(|c| {
            c.type_ == "Progressing"
                && c.status == "False"
                && c.reason.as_deref() == Some(PROGRESS_DEADLINE_EXCEEDED)
        });
    let rolled_in_place = d
        .annotations()
        .get(ANNOTATION_REVISION)
        .and_then(|r| r.parse::<u64>().ok())
        .is_some_and(|r| r > 1);
    let pod_annotations = d
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    Some(ObservedDeployment {
        name: d.name_any(),
        build_id,
        replicas: d.spec.as_ref().and_then(|s| s.replicas),
        status_replicas: status.replicas.unwrap_or(0),
        ready_replicas: status.ready_replicas.unwrap_or(0),
        healthy_since,
        pod_template_hash: pod_annotations.get(ANNOTATION_POD_TEMPLATE_HASH).cloned(),
        connection_hash: pod_annotations.get(ANNOTATION_CONNECTION_HASH).cloned(),
        rolled_in_place,
        progress_deadline_exceeded,
        deleting: d.meta().deletion_timestamp.is_some(),
        // Filled by `autoscalers::mark` after observation.
        autoscaled: false,
        autoscaler_present: false,
        created_at: d.meta().creation_timestamp.as_ref().map(|t| t.0),
    })
}

/// The Secret named by the Connection's auth mode, if any. Errors are user-facing messages
/// that name the Secret but never its contents.
pub async fn auth_secret(
    client: &kube::Client,
    ns: &str,
    mode: &AuthMode<'_>,
) -> Result<Option<Secret>, String> {
    let name = match mode {
        AuthMode::Plain => return Ok(None),
        AuthMode::MutualTls { secret } | AuthMode::ApiKey { secret, .. } => *secret,
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    match api.get_opt(name).await {
        Ok(Some(s)) => Ok(Some(s)),
        Ok(None) => Err(format!(
            "Secret {name:?} referenced by the TemporalConnection not found in namespace {ns:?}"
        )),
        Err(e) => Err(format!("reading Secret {name:?}: {e}")),
    }
}

/// Resolves the gate workflow input (inline, ConfigMap or Secret key).
pub async fn gate_input(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<Option<serde_json::Value>, String> {
    match &twd.spec.rollout.gate {
        Some(gate) => resolve_gate_input(client, ns, gate).await,
        None => Ok(None),
    }
}

/// Resolves one gate's input (the rollout gate's or a step gate's).
pub async fn resolve_gate_input(
    client: &kube::Client,
    ns: &str,
    gate: &crate::api::twd::GateSpec,
) -> Result<Option<serde_json::Value>, String> {
    if let Some(input) = &gate.input {
        return Ok(Some(input.clone()));
    }
    let Some(from) = &gate.input_from else {
        return Ok(None);
    };
    let raw: Vec<u8> = if let Some(r) = &from.config_map_key_ref {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm = api
            .get_opt(&r.name)
            .await
            .map_err(|e| format!("reading ConfigMap {:?} for gate input: {e}", r.name))?
            .ok_or_else(|| format!("ConfigMap {:?} for gate input not found", r.name))?;
        if let Some(v) = cm.data.as_ref().and_then(|d| d.get(&r.key)) {
            v.clone().into_bytes()
        } else if let Some(v) = cm.binary_data.as_ref().and_then(|d| d.get(&r.key)) {
            v.0.clone()
        } else {
            return Err(format!(
                "key {:?} not found in ConfigMap {:?} for gate input",
                r.key, r.name
            ));
        }
    } else if let Some(r) = &from.secret_key_ref {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let secret = api
            .get_opt(&r.name)
            .await
            .map_err(|e| format!("reading Secret {:?} for gate input: {e}", r.name))?
            .ok_or_else(|| format!("Secret {:?} for gate input not found", r.name))?;
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(&r.key))
            .map(|v| v.0.clone())
            .ok_or_else(|| {
                format!(
                    "key {:?} not found in Secret {:?} for gate input",
                    r.key, r.name
                )
            })?
    } else {
        return Ok(None);
    };
    // Never echo the value: it may be secret. Only say it is not JSON.
    serde_json::from_slice(&raw)
        .map(Some)
        .map_err(|_| "gate input is not valid JSON".to_string())
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
            Err(e) => {
                tracing::warn!(build_id = %build, error = %e, "counting open pinned workflows failed; version kept");
            }
        }
    }
}

/// Which install made the last routing change, read only when that change was made with this
/// controller's identity and this install knows its own ID: from the metadata each routing
/// write records on the version it routed to. A failed read detects nothing this time.
pub async fn routing_install(
    client: &TemporalClient,
    deployment: &str,
    state: &WorkerDeploymentState,
) -> Option<RoutingInstall> {
    if client.install_id().is_empty() || state.last_modifier_identity != client.identity() {
        return None;
    }
    let build = state.last_routed_build()?;
    match client.describe_version(deployment, build).await {
        Ok(detail) => detail?.install_id.map(|install_id| RoutingInstall {
            build_id: build.to_string(),
            install_id,
        }),
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

#[cfg(test)]
mod connection_roll_tests {
    use super::*;
    use crate::planner::model::RoutingChange;
    use crate::status::{self, Report};

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
