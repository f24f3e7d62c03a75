//! Report stage of the owned-resource reconciler: the one status write of a pass (only when
//! it changed, from [`status::compute`]), the failure count, and when to look again.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::api::TemporalWorkerOwnedResource;
use crate::owned::outcome::{OwnedFailure, verdict};
use crate::owned::status::{self, Pass};
use crate::owned::{OwnedContext, apply, plan};
use crate::reconciler::{Controller, Ended, count_failure};

/// What the stages before produced: the pass to report and the next scale-down, or why the
/// pass could not finish.
pub type Attempt = Result<Option<(Pass, Option<Duration>)>, OwnedFailure>;

pub async fn report(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    attempt: Attempt,
) -> (Action, Ended) {
    let key = ObjectRef::from_obj(twor);
    let written = match attempt {
        Ok(None) => Ok(Action::await_change()),
        Ok(Some((pass, next_scaledown))) => {
            let again = plan::requeue(&pass, next_scaledown);
            write(ctx, twor, pass)
                .await
                .map(|()| Action::requeue(again))
        }
        Err(failure) => Err(failure),
    };
    match written {
        Ok(action) => {
            ctx.streaks.succeeded(&key);
            (action, Ended::Success)
        }
        Err(failure) => {
            let streak = ctx.streaks.failed(&key);
            count_failure(&ctx.metrics, Controller::OwnedResource, &failure, streak);
            (
                Action::requeue(verdict(&failure, streak).retry),
                Ended::Error,
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
    if twor.status.as_ref() == Some(&new) || !ctx.leads() {
        return Ok(());
    }
    write_status(&ctx.client, twor, &new)
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
