//! Applies a [`Plan`] in a fixed, safe order — take-over records → create → update → scale → restart → gates → manager
//! claim → routing → end pinned workflows of old versions → delete → the adopted Deployment — and stops at the first failure. Together with
//! [`super::finalizers`] this is every Kubernetes and Temporal write a reconcile makes, so
//! metrics wrap each one once.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

pub use super::done::{Done, Executed};
use super::failures::{fail, render_write_fail, temporal_fail};
use crate::api::{TemporalConnectionSpec, TemporalWorkerDeployment};
use crate::metrics::Metrics;
use crate::planner::model::{
    CreateDeployment, Plan, Restart, RoutingChange, ScaleDeployment, UpdateDeployment, UpdateReason,
};
use crate::planner::sunset::ANNOTATION_SCALED_DOWN_AT;
use crate::planner::takeover::{
    Adoption, LABEL_ADOPTED_CONNECTION_HASH, LABEL_ADOPTED_POD_TEMPLATE_HASH,
};
use crate::render::{self, VersionedDeploymentInput};
use crate::temporal::TemporalClient;
use crate::temporal::client::VersionDeletion;
use crate::worker_deployment::outcome::{Failure, WriteError};
use crate::worker_deployment::step::WriteStep;

/// Everything an execution needs besides the plan.
pub struct ExecContext<'a> {
    pub kube: &'a kube::Client,
    pub temporal: &'a TemporalClient,
    pub twd: &'a TemporalWorkerDeployment,
    pub connection: &'a TemporalConnectionSpec,
    /// The other Connections old versions keep, by record (`UpdateDeployment::connection`).
    pub recorded_connections: &'a std::collections::BTreeMap<String, TemporalConnectionSpec>,
    /// Temporal worker deployment name (`<ns>/<name>`).
    pub deployment_name: &'a str,
    pub conflict_token: Vec<u8>,
    /// Resolved gate input (may come from a Secret: never log it).
    pub gate_input: Option<&'a serde_json::Value>,
    pub gate_workflow_type: Option<&'a str>,
    /// The step gate in effect: workflow type and resolved input (never log it).
    pub step_gate: Option<(&'a str, Option<&'a serde_json::Value>)>,
    pub target_build_id: &'a str,
    pub controller_version: &'a str,
    pub metrics: &'a Metrics,
}

const FIELD_MANAGER: &str = "temporal-worker-controller";

/// Sets `spec.replicas`. A sunset scale-down records when it happened on the Deployment in
/// the same write (a replace, so both land or neither), since deletion counts from it; other
/// scalings go through the scale subresource.
async fn scale_deployment(
    ctx: &ExecContext<'_>,
    deployments: &Api<Deployment>,
    scale: &ScaleDeployment,
) -> Result<(), Failure> {
    let Some(at) = scale.record_scaled_down_at else {
        let patch = json!({ "spec": { "replicas": scale.replicas } });
        let res = deployments
            .patch_scale(&scale.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        ctx.metrics
            .kube_write("patch", "deployments/scale", res.is_ok());
        return res
            .map(|_| ())
            .map_err(|e| fail(WriteStep::ScaleDeployment, e));
    };
    let mut existing = deployments
        .get(&scale.name)
        .await
        .map_err(|e| fail(WriteStep::GetDeployment, e))?;
    existing
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_SCALED_DOWN_AT.to_string(), at.to_string());
    existing.spec.replicas = Some(scale.replicas);
    // A 409 (someone wrote in between) fails this pass; the next one plans it again.
    let res = deployments
        .replace(
            &scale.name,
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &existing,
        )
        .await;
    ctx.metrics.kube_write("update", "deployments", res.is_ok());
    res.map(|_| ())
        .map_err(|e| fail(WriteStep::ScaleDeployment, e))
}

pub async fn execute(ctx: &ExecContext<'_>, plan: &Plan) -> Executed {
    let mut out = Executed::default();
    if let Err(f) = run(ctx, plan, &mut out).await {
        out.failure = Some(f);
    }
    out
}

async fn run(ctx: &ExecContext<'_>, plan: &Plan, out: &mut Executed) -> Result<(), Failure> {
    let ns = ctx.twd.metadata.namespace.clone().unwrap_or_default();
    let deployments: Api<Deployment> = Api::namespaced(ctx.kube.clone(), &ns);

    for adoption in &plan.adopt {
        adopt(ctx.kube, &ns, adoption, ctx.metrics).await?;
        out.done.push(Done::Adopted {
            name: adoption.name.clone(),
            build_id: adoption.build_id.clone(),
        });
    }

    if let Some(create) = &plan.create {
        create_target(ctx, &deployments, create, out).await?;
    }

    for update in &plan.update {
        update_deployment(ctx, &deployments, update).await?;
        out.done.push(Done::Updated {
            name: update.name.clone(),
            build_id: update.build_id.clone(),
        });
    }

    for scale in &plan.scale {
        scale_deployment(ctx, &deployments, scale).await?;
        out.done.push(Done::Scaled {
            name: scale.name.clone(),
            build_id: scale.build_id.clone(),
            replicas: scale.replicas,
        });
    }

    if let Some(Restart::Roll(restart)) = &plan.restart {
        let res = super::restart::restart_deployment(&deployments, restart, FIELD_MANAGER).await;
        ctx.metrics.kube_write("patch", "deployments", res.is_ok());
        res.map_err(|e| fail(WriteStep::RestartDeployment, e))?;
        out.done.push(Done::Restarted {
            name: restart.name.clone(),
            build_id: restart.build_id.clone(),
            value: restart.value.clone(),
        });
    }

    temporal_writes(ctx, plan, out).await?;

    for delete in &plan.delete {
        delete_deployment(ctx, &deployments, &delete.name).await?;
        out.done.push(Done::Deleted {
            name: delete.name.clone(),
            build_id: delete.build_id.clone(),
        });
    }
    if let Some(d) = &plan.adoption
        && let Some(action) = super::adoption::act(ctx.metrics, &deployments, d).await?
    {
        let (name, message) = (d.deployment_name.clone(), d.message.clone());
        out.done.push(Done::Unversioned {
            name,
            action,
            message,
        });
    }
    forget_versions(ctx, plan, out).await;
    Ok(())
}

/// Re-renders a versioned Deployment from its recorded settings or the current template and
/// replaces it (with its resourceVersion: a concurrent change answers 409).
async fn update_deployment(
    ctx: &ExecContext<'_>,
    deployments: &Api<Deployment>,
    update: &UpdateDeployment,
) -> Result<(), Failure> {
    let existing = deployments
        .get(&update.name)
        .await
        .map_err(|e| fail(WriteStep::GetDeployment, e))?;
    // An old version on another Connection is re-rendered with that one; gone since the plan
    // was made: left as it is this pass.
    let connection = match &update.connection {
        None => ctx.connection,
        Some(record) => match ctx.recorded_connections.get(record) {
            Some(spec) => spec,
            None => return Ok(()),
        },
    };
    let input = VersionedDeploymentInput {
        connection_ref: update.connection.as_deref(),
        twd: ctx.twd,
        connection,
        build_id: &update.build_id,
        replicas: None,
    };
    let refreshed = match update.reason {
        UpdateReason::SettingsDrift => render::refresh_settings(&existing, &input),
        UpdateReason::PodTemplateDrift | UpdateReason::ConnectionDrift => {
            render::refresh_template(&existing, &input)
        }
    }
    .map_err(|e| fail(WriteStep::RenderDeployment, WriteError::Render(e)))?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let res = deployments.replace(&update.name, &params, &refreshed).await;
    ctx.metrics.kube_write("update", "deployments", res.is_ok());
    res.map_err(|e| render_write_fail(WriteStep::UpdateDeployment, e))?;
    Ok(())
}

/// Deletes a versioned Deployment (its Pods in the background); already gone is done.
async fn delete_deployment(
    ctx: &ExecContext<'_>,
    deployments: &Api<Deployment>,
    name: &str,
) -> Result<(), Failure> {
    match deployments.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            ctx.metrics.kube_write("delete", "deployments", false);
            return Err(fail(WriteStep::DeleteDeployment, e));
        }
    }
    ctx.metrics.kube_write("delete", "deployments", true);
    Ok(())
}

/// Deletes the Temporal records of old versions whose Deployments are gone. Never fails the
/// reconcile: a refusal (pollers still remembered) or an error leaves the record for the next
/// pass, and only a deletion made now is announced.
async fn forget_versions(ctx: &ExecContext<'_>, plan: &Plan, out: &mut Executed) {
    for build_id in &plan.forget_versions {
        let res = ctx
            .temporal
            .delete_version(ctx.deployment_name, build_id)
            .await;
        let outcome = match &res {
            Ok(VersionDeletion::Deleted) => "deleted",
            Ok(VersionDeletion::AlreadyGone) => "already_gone",
            Ok(VersionDeletion::HasPollers) => "has_pollers",
            Err(_) => "error",
        };
        ctx.metrics.version_record_deletion(outcome);
        match res {
            Ok(VersionDeletion::Deleted) => out.done.push(Done::VersionForgotten {
                build_id: build_id.clone(),
            }),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, build_id, "deleting a version record in Temporal"),
        }
    }
}

/// Writes a take-over record ([`Adoption`]) on a versioned Deployment: labels in its metadata
/// only, so its generation and Pods stay as they are (an annotation would bump the generation:
/// a Deployment's annotations are copied to its ReplicaSets). Read and replaced as untyped
/// JSON, so that no field this client's Deployment type does not know is dropped (which could
/// change the pod template), with `get` and `update`, the verbs the chart already grants; a
/// 409 (changed since the read) is retried by the next reconcile.
pub async fn adopt(
    kube: &kube::Client,
    namespace: &str,
    adoption: &Adoption,
    metrics: &Metrics,
) -> Result<(), Failure> {
    let resource = ApiResource::erase::<Deployment>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(kube.clone(), namespace, &resource);
    let mut obj = api
        .get(&adoption.name)
        .await
        .map_err(|e| fail(WriteStep::GetDeployment, e))?;
    let labels = obj.metadata.labels.get_or_insert_with(Default::default);
    for (key, record) in [
        (LABEL_ADOPTED_POD_TEMPLATE_HASH, &adoption.template),
        (LABEL_ADOPTED_CONNECTION_HASH, &adoption.connection),
    ] {
        if let Some(record) = record {
            labels.insert(key.to_string(), record.label_value());
        }
    }
    obj.metadata.managed_fields = None;
    let res = api
        .replace(
            &adoption.name,
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &obj,
        )
        .await;
    metrics.kube_write("update", "deployments", res.is_ok());
    res.map_err(|e| fail(WriteStep::RecordTakeover, e))?;
    tracing::info!(
        deployment = %adoption.name,
        build_id = %adoption.build_id,
        template = adoption.template.is_some(),
        connection = adoption.connection.is_some(),
        "took over a versioned Deployment: recorded our hashes beside the predecessor's"
    );
    Ok(())
}

/// Creates the target's Deployment; a 409 means an earlier reconcile already did.
async fn create_target(
    ctx: &ExecContext<'_>,
    deployments: &Api<Deployment>,
    create: &CreateDeployment,
    out: &mut Executed,
) -> Result<(), Failure> {
    let input = VersionedDeploymentInput {
        connection_ref: None,
        twd: ctx.twd,
        connection: ctx.connection,
        build_id: &create.build_id,
        replicas: create.replicas,
    };
    let rendered = render::versioned_deployment(&input)
        .map_err(|e| fail(WriteStep::RenderDeployment, WriteError::Render(e)))?;
    let name = rendered.metadata.name.clone().unwrap_or_default();
    let res = deployments
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &rendered,
        )
        .await;
    let created = match res {
        Ok(_) => true,
        // A previous reconcile created it moments ago (stale cache): nothing was done
        // now, so nothing to announce.
        Err(kube::Error::Api(s)) if s.code == 409 => false,
        Err(e) => {
            ctx.metrics.kube_write("create", "deployments", false);
            return Err(render_write_fail(WriteStep::CreateDeployment, e));
        }
    };
    if created {
        ctx.metrics.kube_write("create", "deployments", true);
        out.done.push(Done::Created {
            name,
            build_id: create.build_id.clone(),
        });
    }
    Ok(())
}

/// The step gate of the step in effect, on the task queues the plan names.
async fn start_step_gates(
    ctx: &ExecContext<'_>,
    plan: &Plan,
    out: &mut Executed,
) -> Result<(), Failure> {
    let (Some(start), Some((workflow_type, input))) = (&plan.start_step_gates, ctx.step_gate)
    else {
        return Ok(());
    };
    for tq in &start.task_queues {
        ctx.temporal
            .start_step_gate(
                ctx.deployment_name,
                ctx.target_build_id,
                start.step,
                tq,
                workflow_type,
                input,
            )
            .await
            .map_err(|e| temporal_fail(WriteStep::StartStepGate, e))?;
        out.done.push(Done::GateStarted {
            task_queue: tq.clone(),
            workflow_id: TemporalClient::step_gate_workflow_id(
                ctx.deployment_name,
                ctx.target_build_id,
                start.step,
                tq,
            ),
        });
    }
    Ok(())
}

/// Gates, the manager claim and the routing change, in that order.
async fn temporal_writes(
    ctx: &ExecContext<'_>,
    plan: &Plan,
    out: &mut Executed,
) -> Result<(), Failure> {
    start_gates(ctx, plan, out).await?;
    start_step_gates(ctx, plan, out).await?;

    let mut token = ctx.conflict_token.clone();
    if plan.claim_manager && plan.routing.is_some() {
        token = ctx
            .temporal
            .claim_manager(ctx.deployment_name, &token)
            .await
            .map_err(|e| temporal_fail(WriteStep::ClaimManager, e))?;
        out.done.push(Done::ManagerClaimed);
        out.done.push(Done::ConflictToken(token.clone()));
    }

    if let Some(routing) = &plan.routing {
        change_routing(ctx, routing, &token, out).await?;
    }

    for end in &plan.pinned_batches {
        ctx.temporal
            .pinned_batch(ctx.deployment_name, &end.build_id, &end.action)
            .await
            .map_err(|e| temporal_fail(WriteStep::EndPinnedWorkflows, e))?;
        ctx.metrics.pinned_workflows_ended(end.action.as_str());
        out.done.push(Done::PinnedBatch(end.clone()));
    }
    Ok(())
}

/// The target's gate workflows the plan starts (one per task queue).
async fn start_gates(
    ctx: &ExecContext<'_>,
    plan: &Plan,
    out: &mut Executed,
) -> Result<(), Failure> {
    let Some(workflow_type) = ctx.gate_workflow_type else {
        return Ok(());
    };
    for tq in &plan.start_gates {
        ctx.temporal
            .start_gate(
                ctx.deployment_name,
                ctx.target_build_id,
                tq,
                workflow_type,
                ctx.gate_input,
            )
            .await
            .map_err(|e| temporal_fail(WriteStep::StartGate, e))?;
        out.done.push(Done::GateStarted {
            task_queue: tq.clone(),
            workflow_id: TemporalClient::gate_workflow_id(
                ctx.deployment_name,
                ctx.target_build_id,
                tq,
            ),
        });
    }
    Ok(())
}

/// The routing change, under `token`, and the version metadata after it.
async fn change_routing(
    ctx: &ExecContext<'_>,
    routing: &RoutingChange,
    token: &[u8],
    out: &mut Executed,
) -> Result<(), Failure> {
    let (result, metadata_build) = match routing {
        RoutingChange::SetCurrent { build_id } => (
            ctx.temporal
                .set_current(ctx.deployment_name, build_id, token)
                .await,
            Some(build_id),
        ),
        RoutingChange::SetRamping {
            build_id,
            percentage,
        } => (
            ctx.temporal
                .set_ramping(ctx.deployment_name, build_id, *percentage, token)
                .await,
            Some(build_id),
        ),
        RoutingChange::ClearRamp => (
            ctx.temporal.clear_ramp(ctx.deployment_name, token).await,
            None,
        ),
    };
    let token = result.map_err(|e| temporal_fail(WriteStep::ChangeRouting, e))?;
    out.done.push(Done::Routed(routing.clone()));
    out.done.push(Done::ConflictToken(token));
    if let Some(build_id) = metadata_build {
        // Metadata is informational: a failure here must not undo or mask the routing change.
        if let Err(e) = ctx
            .temporal
            .update_version_metadata(ctx.deployment_name, build_id, ctx.controller_version)
            .await
        {
            tracing::warn!(error = %e, build_id, "failed to update version metadata");
        }
    }
    Ok(())
}
