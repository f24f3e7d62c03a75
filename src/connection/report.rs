//! Report stage of the Connection reconciler: the only status write (only when the plan says
//! it changed) and every event; counts failures and decides when to look again.

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use crate::api::connection::TemporalConnectionStatus;
use crate::api::{ClusterConnection, TemporalConnection};
use crate::connection::context::ConnectionContext;
use crate::connection::outcome::{ConnectionFailure, verdict};
use crate::connection::plan::Plan;
use crate::reconciler::{ControllerKind, ReconcileOutcome, count_failure};

pub async fn report(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    attempt: Result<Plan, ConnectionFailure>,
) -> (Action, ReconcileOutcome) {
    let key = conn.key();
    let written = match attempt {
        Ok(plan) => publish(ctx, conn, plan).await,
        Err(failure) => Err(failure),
    };
    match written {
        Ok(action) => {
            ctx.streaks.succeeded(&key);
            (action, ReconcileOutcome::Success)
        }
        Err(failure) => {
            let streak = ctx.streaks.failed(&key);
            count_failure(
                &ctx.services.metrics,
                ControllerKind::Connection,
                &failure,
                streak,
            );
            (
                Action::requeue(verdict(&failure, streak)),
                ReconcileOutcome::Error,
            )
        }
    }
}

/// The status (if changed), then the Warnings: an event is only sent once the status that
/// records its transition is written, so a failed write repeats neither.
async fn publish(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    plan: Plan,
) -> Result<Action, ConnectionFailure> {
    if !ctx.services.leads() {
        // Leadership was lost during the pass: the new leader looks at everything.
        return Ok(Action::await_change());
    }
    if let Some(status) = &plan.status {
        write_status(ctx, conn, status)
            .await
            .map_err(ConnectionFailure::StatusWriteFailed)?;
    }
    for (reason, note) in plan.warnings {
        ctx.services
            .events
            .warning_about(conn.event_reference(), reason, note)
            .await;
    }
    Ok(plan
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

async fn write_status(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    status: &TemporalConnectionStatus,
) -> Result<(), kube::Error> {
    let mut body = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    // A merge patch keeps a field it does not name: what is gone must be sent as null.
    for field in ["clientCertificate", "workerDeployments"] {
        if body.get(field).is_none() {
            body[field] = serde_json::Value::Null;
        }
    }
    let patch = json!({ "status": body });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let (res, resource) = if conn.is_cluster() {
        let api = kube::Api::<ClusterConnection>::all(ctx.services.client.clone());
        let res = api.patch_status(&conn.name_any(), &params, &patch).await;
        (res.map(|_| ()), "clusterconnections/status")
    } else {
        let api = conn.own_api(ctx.services.client.clone());
        let res = api.patch_status(&conn.name_any(), &params, &patch).await;
        (res.map(|_| ()), "temporalconnections/status")
    };
    ctx.services
        .metrics
        .kube_write("patch", resource, res.is_ok());
    res
}
