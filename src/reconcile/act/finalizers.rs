//! Writes outside the plan: finalizers on TWDs and Connections, and the deletion-time
//! cleanup (versioned Deployments, Temporal's worker deployment).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{
    ClusterConnection, FINALIZER, Model, TemporalConnection, TemporalWorkerDeployment,
};
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
    let plural = connection_plural(conn);
    let mut current = conn.clone();
    for _ in 0..ATTEMPTS {
        if current.meta().deletion_timestamp.is_some() || has_ours(&current) {
            return;
        }
        let res = set_connection_finalizers(&ctx.client, &current, with_finalizer(&current)).await;
        ctx.metrics.kube_write("patch", plural, res.is_ok());
        match res {
            Ok(_) => return,
            Err(e) if is_status(&e, 409) => match get_connection(&ctx.client, &current).await {
                Ok(Some(fresh)) => current = fresh,
                Ok(None) => return,
                Err(e) => return not_protected(&e),
            },
            Err(e) => return not_protected(&e),
        }
    }
}

/// The resource name of a Connection or ClusterConnection, as metrics label writes.
fn connection_plural(conn: &TemporalConnection) -> &'static str {
    if conn.is_cluster() {
        crate::api::connection::CLUSTER_CONNECTIONS
    } else {
        conn.kind_set().plural(Model::Connection)
    }
}

/// Reads a Connection or ClusterConnection afresh (as the Connection model reads both).
async fn get_connection(
    client: &kube::Client,
    conn: &TemporalConnection,
) -> kube::Result<Option<TemporalConnection>> {
    if conn.is_cluster() {
        let api = Api::<ClusterConnection>::all(client.clone());
        return Ok(api
            .get_opt(&conn.name_any())
            .await?
            .map(|c| c.as_connection()));
    }
    conn.own_api(client.clone()).get_opt(&conn.name_any()).await
}

/// [`set_finalizers`] on a Connection or a ClusterConnection.
async fn set_connection_finalizers(
    client: &kube::Client,
    conn: &TemporalConnection,
    finalizers: Vec<String>,
) -> kube::Result<()> {
    if conn.is_cluster() {
        let api = Api::<ClusterConnection>::all(client.clone());
        let mut cluster = ClusterConnection::new(&conn.name_any(), conn.spec.clone());
        cluster.metadata = conn.metadata.clone();
        return set_finalizers(&api, &cluster, finalizers).await.map(|_| ());
    }
    set_finalizers(&conn.own_api(client.clone()), conn, finalizers)
        .await
        .map(|_| ())
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
    let still_used = if conn.is_cluster() {
        // Its users live in every namespace and both kind sets: read from the worker cache
        // rather than listed cluster-wide on every deletion. Without a listed cache it stays:
        // the ClusterConnection's own reconciler releases it once it is being deleted and
        // unused.
        match ctx.workers.get() {
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
    let res = set_connection_finalizers(&ctx.client, conn, without_finalizer(conn)).await;
    ctx.metrics
        .kube_write("patch", connection_plural(conn), res.is_ok());
    match res {
        Err(e) if !is_status(&e, 404) => Err(e),
        _ => Ok(()),
    }
}

/// A TWD needs its Connection while it lives and, being deleted, until its own cleanup of
/// Temporal is done (our finalizer still on it): when a namespace is deleted, every TWD is
/// deleted at once, and the first to finish must not take the Connection from the others.
pub fn needs_connection(t: &TemporalWorkerDeployment, conn: &TemporalConnection) -> bool {
    uses(t, conn) && (t.meta().deletion_timestamp.is_none() || has_ours(t))
}

/// `t` names `conn`: a Connection of its kind set in its namespace, or the ClusterConnection
/// (names are scoped by kind: a Connection and a ClusterConnection may share one).
pub fn uses(t: &TemporalWorkerDeployment, conn: &TemporalConnection) -> bool {
    let r = &t.spec.worker_options.connection_ref;
    if r.name != conn.name_any() || r.is_cluster() != conn.is_cluster() {
        return false;
    }
    conn.is_cluster() || (t.kind_set() == conn.kind_set() && t.namespace() == conn.namespace())
}

/// The connection janitor's write: drops our finalizer from a Connection being deleted.
pub async fn release_unused_connection(
    client: &kube::Client,
    conn: &TemporalConnection,
) -> Result<(), kube::Error> {
    set_connection_finalizers(client, conn, without_finalizer(conn)).await
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
        let mut c =
            TemporalConnection::new("temporal", serde_json::from_value(spec).expect("spec"));
        c.metadata.namespace = Some("shop".into());
        c
    }

    fn cluster_conn() -> TemporalConnection {
        let spec = serde_json::json!({"hostPort": "temporal:7233"});
        crate::api::ClusterConnection::new("temporal", serde_json::from_value(spec).expect("spec"))
            .as_connection()
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

    #[test]
    fn names_are_scoped_by_kind_and_a_cluster_connection_is_used_from_every_namespace() {
        let mut user = twd(false, false);
        assert!(uses(&user, &conn()) && !uses(&user, &cluster_conn()));
        user.spec.worker_options.connection_ref.kind =
            Some(crate::api::twd::ConnectionRefKind::ClusterConnection);
        assert!(uses(&user, &cluster_conn()) && !uses(&user, &conn()));
        user.metadata.namespace = Some("elsewhere".into());
        assert!(uses(&user, &cluster_conn()), "any namespace");
        let mut canonical = twd(false, false).stamped(crate::api::KindSet::Canonical);
        assert!(
            !uses(&canonical, &conn()),
            "a Connection is used within its kind set"
        );
        canonical.spec.worker_options.connection_ref.kind =
            Some(crate::api::twd::ConnectionRefKind::ClusterConnection);
        assert!(uses(&canonical, &cluster_conn()), "both kind sets");
    }
}
