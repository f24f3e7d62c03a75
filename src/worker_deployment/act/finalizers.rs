//! Writes outside the plan: our finalizer on the TWD and on its Connection (with the shared
//! helpers of `crate::reconciler::finalizers`), and the deletion-time cleanup (versioned
//! Deployments, Temporal's worker deployment).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Resource, ResourceExt};

use crate::api::{Model, TemporalConnection, TemporalWorkerDeployment};
use crate::reconciler::finalizers::{
    connection_plural, get_connection, has_ours, is_status, needs_connection,
    set_connection_finalizers, set_finalizers, with_finalizer, without_finalizer,
};
use crate::temporal::{TemporalClient, TemporalError};
use crate::worker_deployment::act::execute::Done;
use crate::worker_deployment::context::Context;
use crate::worker_deployment::outcome::{Failure, Outcome};

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
    ctx.services
        .metrics
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
    ctx.services
        .metrics
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
    let plural = connection_plural(conn);
    let mut current = conn.clone();
    for _ in 0..ATTEMPTS {
        if current.meta().deletion_timestamp.is_some() || has_ours(&current) {
            return;
        }
        let res =
            set_connection_finalizers(&ctx.services.client, &current, with_finalizer(&current))
                .await;
        ctx.services
            .metrics
            .kube_write("patch", plural, res.is_ok());
        match res {
            Ok(_) => return,
            Err(e) if is_status(&e, 409) => {
                match get_connection(&ctx.services.client, &current).await {
                    Ok(Some(fresh)) => current = fresh,
                    Ok(None) => return,
                    Err(e) => return not_protected(&e),
                }
            }
            Err(e) => return not_protected(&e),
        }
    }
}

/// Releases the Connection once no other TWD needs it.
pub async fn release_connection(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    conn: &TemporalConnection,
) -> Result<(), kube::Error> {
    let still_used = if conn.is_cluster() {
        // Its users live in every namespace and both kind sets: read from the worker cache
        // rather than listed cluster-wide on every deletion. Without a listed cache it stays:
        // the ClusterConnection's own reconciler releases it once it is being deleted and
        // unused.
        match ctx.services.workers() {
            Some(workers) if workers.is_listed() => workers
                .state()
                .iter()
                .any(|t| t.uid() != twd.uid() && needs_connection(t, conn)),
            _ => true,
        }
    } else {
        let twds = twd_api(ctx, twd).list(&ListParams::default()).await?;
        twds.items
            .iter()
            .any(|t| t.uid() != twd.uid() && needs_connection(t, conn))
    };
    if still_used || !has_ours(conn) {
        return Ok(());
    }
    let res = set_connection_finalizers(&ctx.services.client, conn, without_finalizer(conn)).await;
    ctx.services
        .metrics
        .kube_write("patch", connection_plural(conn), res.is_ok());
    match res {
        Err(e) if !is_status(&e, 404) => Err(e),
        _ => Ok(()),
    }
}

/// Stops the workers of a TWD being deleted (the planner's `DeletionStep::Stop`): deletes
/// the given versioned Deployments (name, build ID). Each deletion made is added to `done`.
pub async fn stop_workers(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    running: &[(String, String)],
    done: &mut Vec<Done>,
) -> Result<(), kube::Error> {
    let api: Api<Deployment> = Api::namespaced(
        ctx.services.client.clone(),
        &twd.namespace().unwrap_or_default(),
    );
    for (name, build_id) in running {
        let res = api.delete(name, &DeleteParams::background()).await;
        ctx.services
            .metrics
            .kube_write("delete", "deployments", res.is_ok());
        match res {
            Ok(_) => done.push(Done::Stopped {
                name: name.clone(),
                build_id: build_id.clone(),
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
    twd.own_api(ctx.services.client.clone())
}

fn not_protected(e: &kube::Error) {
    tracing::debug!(error = %e, "could not add finalizer to TemporalConnection; will retry next reconcile");
}
