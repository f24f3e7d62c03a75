//! Report stage of the owned-resource reconciler: the one status write of a pass (only when
//! it changed, from [`status::compute`]), the failure count, and when to look again.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use crate::api::TemporalWorkerOwnedResource;
use crate::owned::context::OwnedContext;
use crate::owned::outcome::{OwnedFailure, verdict};
use crate::owned::status::{self, Pass};
use crate::owned::{apply, plan};
use crate::reconciler::{ControllerKind, ReconcileOutcome, count_failure};

/// What the stages before produced: the pass to report and the next scale-down, or why the
/// pass could not finish.
pub type Attempt = Result<Option<(Pass, Option<Duration>)>, OwnedFailure>;

pub async fn report(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    attempt: Attempt,
) -> (Action, ReconcileOutcome) {
    let key = twor.key();
    let written = match attempt {
        Ok(None) => Ok((Action::await_change(), None)),
        Ok(Some((pass, next_scaledown))) => {
            let again = plan::requeue(&pass, next_scaledown);
            let blocked = pass.failure_reason();
            write(ctx, twor, pass)
                .await
                .map(|()| (Action::requeue(again), blocked))
        }
        Err(failure) => Err(failure),
    };
    match written {
        Ok((action, None)) => {
            ctx.streaks.succeeded(&key);
            (action, ReconcileOutcome::Success)
        }
        Ok((action, Some(reason))) => {
            // Reported in status (Ready=False) and counted by that reason; the pass itself
            // went through, so it is looked at again on the plan's schedule, without backoff.
            ctx.streaks.succeeded(&key);
            ctx.services
                .metrics
                .reconcile_error(ControllerKind::OwnedResource, reason);
            (action, ReconcileOutcome::Error)
        }
        Err(failure) => {
            let streak = ctx.streaks.failed(&key);
            count_failure(
                &ctx.services.metrics,
                ControllerKind::OwnedResource,
                &failure,
                streak,
            );
            (
                Action::requeue(verdict(&failure, streak).retry),
                ReconcileOutcome::Error,
            )
        }
    }
}

/// Writes the status `pass` gives, only when it changed and only while this replica leads.
async fn write(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    pass: Pass,
) -> Result<(), OwnedFailure> {
    let generation = twor.metadata.generation.unwrap_or_default();
    let new = status::compute(twor.status.as_ref(), generation, pass, Timestamp::now());
    if twor.status.as_ref() == Some(&new) || !ctx.services.leads() {
        return Ok(());
    }
    write_status(&ctx.services.client, twor, &new)
        .await
        .map_err(OwnedFailure::StatusWriteFailed)
}

/// The one status write of a pass.
async fn write_status(
    client: &kube::Client,
    twor: &TemporalWorkerOwnedResource,
    status: &crate::api::TemporalWorkerOwnedResourceStatus,
) -> Result<(), kube::Error> {
    let mut body = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    // A merge patch keeps a field it does not name: an emptied list must be sent as null.
    if body.get("versions").is_none() {
        body["versions"] = serde_json::Value::Null;
    }
    let patch = json!({ "status": body });
    apply::api_of(client, twor)
        .patch_status(
            &twor.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}
