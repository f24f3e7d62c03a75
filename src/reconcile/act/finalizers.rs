//! Writes outside the plan: finalizers on TWDs and Connections, and the deletion-time
//! cleanup (versioned Deployments, Temporal's worker deployment).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{FINALIZER, Model, TemporalConnection, TemporalWorkerDeployment};
use crate::planner::model::ObservedDeployment;
use crate::reconcile::act::Done;
use crate::reconcile::{Context, Failure, Outcome};
use crate::temporal::{TemporalClient, TemporalError};

fn has_ours<K: Resource>(obj: &K) -> bool {
    obj.finalizers().iter().any(|f| f == FINALIZER)
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Our finalizer on the TWD before anything is created, so deletion can clean up.
pub async fn ensure(
    ctx: &Context,
    twd: &Arc<TemporalWorkerDeployment>,
) -> Result<Arc<TemporalWorkerDeployment>, Outcome> {
    if has_ours(&**twd) {
        return Ok(twd.clone());
    }
    let api = twd_api(ctx, twd);
    let res = set_finalizers(&api, &**twd, with_finalizer(&**twd)).await;
    ctx.metrics
        .kube_write("patch", twd.kind_set().plural(Model::Worker), res.is_ok());
    match res {
        Ok(updated) => Ok(Arc::new(updated.stamped(twd.kind_set()))),
        // Our cached copy is older than the object: look again with the fresh one.
        Err(e) if is_status(&e, 409) => Err(Outcome::Stale),
        Err(e) => Err(Outcome::Failed(Failure::FinalizerFailed(e))),
    }
}

/// Drops our finalizer from the TWD: the last write of a deletion.
pub async fn remove(ctx: &Context, twd: &TemporalWorkerDeployment) -> Result<(), kube::Error> {
    let res = set_finalizers(&twd_api(ctx, twd), twd, without_finalizer(twd)).await;
    ctx.metrics
        .kube_write("patch", twd.kind_set().plural(Model::Worker), res.is_ok());
    match res {
        Err(e) if !is_status(&e, 404) => Err(e),
        _ => Ok(()),
    }
}

/// The Connection carries our finalizer while any TWD uses it, so cleanup can still reach
/// Temporal. A conflict (the cached copy is behind, e.g. its status was just written) is retried
/// on a fresh read: a namespace deleted right after its objects were created would otherwise
/// take the Connection before the TWDs' cleanup, leaving them stuck on `ConnectionNotFound`
/// (found by the chaos suite). Any other failure is retried by the next reconcile.
pub async fn protect_connection(ctx: &Context, conn: &TemporalConnection) {
    const ATTEMPTS: usize = 3;
    let api = conn.own_api(ctx.client.clone());
    let plural = conn.kind_set().plural(Model::Connection);
    let mut current = conn.clone();
    for _ in 0..ATTEMPTS {
        if current.meta().deletion_timestamp.is_some() || has_ours(&current) {
            return;
        }
        let res = set_finalizers(&api, &current, with_finalizer(&current)).await;
        ctx.metrics.kube_write("patch", plural, res.is_ok());
        match res {
            Ok(_) => return,
            Err(e) if is_status(&e, 409) => match api.get_opt(&current.name_any()).await {
                Ok(Some(fresh)) => current = fresh,
                Ok(None) => return,
                Err(e) => return not_protected(&e),
            },
            Err(e) => return not_protected(&e),
        }
    }
}

fn not_protected(e: &kube::Error) {
    tracing::debug!(error = %e, "could not add finalizer to TemporalConnection; will retry next reconcile");
}

/// Releases the Connection once no other TWD needs it.
pub async fn release_connection(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    conn: &TemporalConnection,
) -> Result<(), kube::Error> {
    let twds = twd_api(ctx, twd).list(&ListParams::default()).await?;
    let still_used = twds
        .items
        .iter()
        .any(|t| t.uid() != twd.uid() && needs_connection(t, conn));
    if still_used || !has_ours(conn) {
        return Ok(());
    }
    let api = conn.own_api(ctx.client.clone());
    let res = set_finalizers(&api, conn, without_finalizer(conn)).await;
    ctx.metrics.kube_write(
        "patch",
        conn.kind_set().plural(Model::Connection),
        res.is_ok(),
    );
    match res {
        Err(e) if !is_status(&e, 404) => Err(e),
        _ => Ok(()),
    }
}

/// A TWD needs its Connection while it lives and, being deleted, until its own cleanup of
/// Temporal is done (our finalizer still on it): when a namespace is deleted, every TWD is
/// deleted at once, and the first to finish must not take the Connection from the others.
fn needs_connection(t: &TemporalWorkerDeployment, conn: &TemporalConnection) -> bool {
    t.spec.worker_options.connection_ref.name == conn.name_any()
        && (t.meta().deletion_timestamp.is_none() || has_ours(t))
}

/// The connection janitor's write: drops our finalizer from a Connection being deleted.
pub async fn release_unused_connection(
    client: &kube::Client,
    conn: &TemporalConnection,
) -> Result<(), kube::Error> {
    let api = conn.own_api(client.clone());
    set_finalizers(&api, conn, without_finalizer(conn))
        .await
        .map(|_| ())
}

/// Stops the workers of a TWD being deleted: Temporal refuses to delete versions that still
/// have pollers, and garbage collection would only remove the Deployments after our
/// finalizer is gone. Each deletion made is added to `done`.
pub async fn delete_owned_deployments(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    deployments: &[ObservedDeployment],
    done: &mut Vec<Done>,
) -> Result<(), kube::Error> {
    let api: Api<Deployment> =
        Api::namespaced(ctx.client.clone(), &twd.namespace().unwrap_or_default());
    for d in deployments.iter().filter(|d| !d.deleting) {
        let res = api.delete(&d.name, &DeleteParams::background()).await;
        ctx.metrics.kube_write("delete", "deployments", res.is_ok());
        match res {
            Ok(_) => done.push(Done::Stopped {
                name: d.name.clone(),
                build_id: d.build_id.clone(),
            }),
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes the worker deployment (and its versions) in Temporal.
pub async fn cleanup_temporal(
    client: &TemporalClient,
    twd: &TemporalWorkerDeployment,
) -> Result<(), TemporalError> {
    client
        .cleanup_deployment(&twd.temporal_deployment_name())
        .await
}

fn twd_api(ctx: &Context, twd: &TemporalWorkerDeployment) -> Api<TemporalWorkerDeployment> {
    twd.own_api(ctx.client.clone())
}

/// The object's finalizers plus ours.
fn with_finalizer<K: Resource>(obj: &K) -> Vec<String> {
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(FINALIZER.to_string());
    finalizers
}

/// The object's finalizers without ours.
fn without_finalizer<K: Resource>(obj: &K) -> Vec<String> {
    obj.finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect()
}

/// Writes `metadata.finalizers` with the object's resourceVersion, a compare-and-swap: a
/// concurrent writer's finalizers are never clobbered (409 instead).
async fn set_finalizers<K>(api: &Api<K>, obj: &K, finalizers: Vec<String>) -> kube::Result<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({ "metadata": { "finalizers": finalizers, "resourceVersion": obj.resource_version() } });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::fixtures::{NOW, ts};

    fn conn() -> TemporalConnection {
        let spec = serde_json::json!({"hostPort": "temporal:7233"});
        TemporalConnection::new("temporal", serde_json::from_value(spec).expect("spec"))
    }

    fn twd(deleting: bool, ours: bool) -> TemporalWorkerDeployment {
        let mut t = TemporalWorkerDeployment::test();
        t.spec.worker_options.connection_ref.name = "temporal".into();
        if deleting {
            t.metadata.deletion_timestamp = Some(Time(ts(NOW)));
        }
        t.metadata.finalizers = ours.then(|| vec![FINALIZER.to_string()]);
        t
    }

    #[test]
    fn a_twd_being_deleted_needs_its_connection_until_its_own_cleanup_is_done() {
        assert!(needs_connection(&twd(false, false), &conn()), "alive");
        assert!(needs_connection(&twd(true, true), &conn()), "cleaning up");
        assert!(!needs_connection(&twd(true, false), &conn()), "done");
        let mut other = twd(false, true);
        other.spec.worker_options.connection_ref.name = "other".into();
        assert!(!needs_connection(&other, &conn()), "another Connection");
    }
}
