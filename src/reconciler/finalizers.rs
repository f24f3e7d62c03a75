//! Our finalizer (`temporal.io/delete-protection`) on any object, and on Connections and
//! ClusterConnections: the finalizer writes every reconciler shares (worker deployments
//! protect their Connection with it; the Connection reconciler releases an unused one).

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{
    ClusterConnection, FINALIZER, Model, TemporalConnection, TemporalWorkerDeployment,
};

pub(crate) fn has_ours<K: Resource>(obj: &K) -> bool {
    obj.finalizers().iter().any(|f| f == FINALIZER)
}

pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The resource name of a Connection or ClusterConnection, as metrics label writes.
pub(crate) fn connection_plural(conn: &TemporalConnection) -> &'static str {
    if conn.is_cluster() {
        crate::api::connection::CLUSTER_CONNECTIONS
    } else {
        conn.kind_set().plural(Model::Connection)
    }
}

/// Reads a Connection or ClusterConnection afresh (as the Connection model reads both).
pub(crate) async fn get_connection(
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
pub(crate) async fn set_connection_finalizers(
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

/// The object's finalizers plus ours.
pub(crate) fn with_finalizer<K: Resource>(obj: &K) -> Vec<String> {
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(FINALIZER.to_string());
    finalizers
}

/// The object's finalizers without ours.
pub(crate) fn without_finalizer<K: Resource>(obj: &K) -> Vec<String> {
    obj.finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect()
}

/// Writes `metadata.finalizers` with the object's resourceVersion, a compare-and-swap: a
/// concurrent writer's finalizers are never clobbered (409 instead).
pub(crate) async fn set_finalizers<K>(
    api: &Api<K>,
    obj: &K,
    finalizers: Vec<String>,
) -> kube::Result<K>
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
