//! What reconciles read of Kubernetes, from watches rather than the API server: one reflector
//! store per kind, shared by every reconcile, so that an idle fleet costs the API server
//! nothing but the watches (issue 30: one GET and three LISTs per reconcile had made 300 idle
//! worker deployments cost 1,277 reads a minute).
//!
//! - versioned Deployments (label-selected, without `managedFields`);
//! - HorizontalPodAutoscalers (only `spec.scaleTargetRef` is kept);
//! - Connections and owned-resource templates: the stores of their own controllers;
//! - Secrets are **not** watched (the chart grants no list or watch of anybody's Secrets): a
//!   Secret's body is read by name and reused for [`SECRET_REUSE`], or until the credentials
//!   it made are invalid or refused ([`Caches::forget_secret`]): a user's fix is seen on the
//!   next retry, a rotation within the reuse period.
//!
//! A store is read only once it has listed ([`Caches::ready`]): an unfilled cache read as empty
//! would look like "no Deployments" to the planner. A name missing from a ready cache is asked
//! of the API server once more before it counts as absent (the watch may not have delivered an
//! object created a moment ago), which costs reads only while something is missing.

pub(crate) mod reflect;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{
    ANNOTATION_CONNECTION_HASH, ANNOTATION_CONNECTION_REF, ANNOTATION_POD_TEMPLATE_HASH,
    ANNOTATION_RESTART, ANNOTATION_REVISION, ClusterConnection, KindSet, LABEL_DEPLOYMENT_NAME,
    TemporalConnection, TemporalWorkerOwnedResource,
};
use crate::planner::sunset::ANNOTATION_SCALED_DOWN_AT;
use crate::render::settings::ANNOTATION_SETTINGS;

/// How long a Secret read by name stands in for another read. A rotated certificate or API key
/// is picked up within this, at once when Temporal refuses the old one.
pub const SECRET_REUSE: Duration = Duration::from_secs(300);

/// The shared caches (built with the controllers that feed them).
#[derive(Clone)]
pub struct Caches {
    pub deployments: Store<Deployment>,
    pub autoscalers: Store<HorizontalPodAutoscaler>,
    pub connections: Vec<(KindSet, Store<TemporalConnection>)>,
    pub templates: Vec<(KindSet, Store<TemporalWorkerOwnedResource>)>,
    /// The ClusterConnections (cluster installs only; a namespaced install reads none).
    pub cluster_connections: Option<Store<ClusterConnection>>,
    /// The Deployment watch is a shard's (label-selected): a Deployment missing from it may
    /// still exist, labelled for another shard.
    pub sharded: bool,
    /// One per store above: whether it has listed.
    listed: Vec<Listed>,
    secrets: Arc<SecretBodies>,
}

/// Whether a store has listed, readable by any number of waiters at once.
///
/// kube's `Store::wait_until_ready` wakes only the last of several concurrent waiters (it
/// waits on a oneshot channel, which keeps one waker), so a reconcile waiting beside the
/// controller's own start-up wait could sleep forever; the store's writer sets this instead.
#[derive(Clone, Debug)]
pub struct Listed(watch::Receiver<bool>);

/// The watch feeding a cache ended before it had listed (the controller is stopping).
#[derive(Debug, thiserror::Error)]
#[error("the watch feeding a cache stopped before it listed")]
pub struct CacheStopped;

impl Listed {
    /// A flag and its setter, not yet listed.
    pub fn pending() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(rx))
    }

    /// The flag a store's writer sets.
    pub fn of(rx: watch::Receiver<bool>) -> Self {
        Self(rx)
    }

    /// Already listed (a fixed set of objects).
    pub fn done() -> Self {
        Self(watch::channel(true).1)
    }

    pub async fn wait(&self) -> Result<(), CacheStopped> {
        let mut rx = self.0.clone();
        rx.wait_for(|listed| *listed)
            .await
            .map(|_| ())
            .map_err(|_| CacheStopped)
    }

    pub fn is_done(&self) -> bool {
        *self.0.borrow()
    }
}

/// A store with its listed flag.
pub type Listing<K> = (Store<K>, Listed);

impl Caches {
    pub fn new(
        (deployments, deployments_listed): Listing<Deployment>,
        (autoscalers, autoscalers_listed): Listing<HorizontalPodAutoscaler>,
        connections: Vec<(KindSet, Listing<TemporalConnection>)>,
        templates: Vec<(KindSet, Listing<TemporalWorkerOwnedResource>)>,
    ) -> Self {
        let mut listed = vec![deployments_listed, autoscalers_listed];
        listed.extend(connections.iter().map(|(_, (_, l))| l.clone()));
        listed.extend(templates.iter().map(|(_, (_, l))| l.clone()));
        Self {
            deployments,
            autoscalers,
            connections: connections.into_iter().map(|(k, (s, _))| (k, s)).collect(),
            templates: templates.into_iter().map(|(k, (s, _))| (k, s)).collect(),
            cluster_connections: None,
            sharded: false,
            listed,
            secrets: Arc::default(),
        }
    }

    /// Adds the ClusterConnections' store (a cluster install's).
    pub fn with_cluster_connections(mut self, (store, listed): Listing<ClusterConnection>) -> Self {
        self.cluster_connections = Some(store);
        self.listed.push(listed);
        self
    }

    /// The ClusterConnection `name`, if cached, as the Connection model reads it.
    pub fn cluster_connection(&self, name: &str) -> Option<TemporalConnection> {
        let store = self.cluster_connections.as_ref()?;
        store.get(&ObjectRef::new(name)).map(|c| c.as_connection())
    }

    /// Resolves once every store has listed (at once afterwards).
    pub async fn ready(&self) -> Result<(), CacheStopped> {
        for l in &self.listed {
            l.wait().await?;
        }
        Ok(())
    }

    /// The versioned Deployments in `ns` labelled for the worker `label_value` (the rendered
    /// label value of its name).
    pub fn deployments_of(&self, ns: &str, label_value: &str) -> Vec<Deployment> {
        self.labelled(ns, label_value)
            .map(|d| (*d).clone())
            .collect()
    }

    /// Name → UID of the same Deployments, without copying them.
    pub fn deployment_uids_of(&self, ns: &str, label_value: &str) -> BTreeMap<String, String> {
        self.labelled(ns, label_value)
            .filter_map(|d| Some((d.metadata.name.clone()?, d.metadata.uid.clone()?)))
            .collect()
    }

    /// Every reconcile scans the whole store (no index), so the test allocates nothing per
    /// Deployment: the label first, then the namespace, both compared in place.
    fn labelled<'a>(
        &self,
        ns: &'a str,
        label_value: &'a str,
    ) -> impl Iterator<Item = Arc<Deployment>> + 'a {
        self.deployments.state().into_iter().filter(move |d| {
            let m = &d.metadata;
            m.labels
                .as_ref()
                .and_then(|l| l.get(LABEL_DEPLOYMENT_NAME))
                .is_some_and(|v| v == label_value)
                && m.namespace.as_deref() == Some(ns)
        })
    }

    /// The autoscalers in `ns`.
    pub fn autoscalers_in(&self, ns: &str) -> Vec<HorizontalPodAutoscaler> {
        self.autoscalers
            .state()
            .iter()
            .filter(|h| h.namespace().as_deref() == Some(ns))
            .map(|h| (**h).clone())
            .collect()
    }

    /// The owned-resource templates of `set` in `ns`.
    pub fn templates_in(&self, set: KindSet, ns: &str) -> Vec<TemporalWorkerOwnedResource> {
        self.templates
            .iter()
            .filter(|(s, _)| *s == set)
            .flat_map(|(_, store)| store.state())
            .filter(|t| t.namespace().as_deref() == Some(ns))
            .map(|t| (*t).clone())
            .collect()
    }

    /// The Connection `twd` names, if cached: a ClusterConnection by name, else the Connection
    /// of its kind set in its namespace.
    pub fn connection_of(
        &self,
        twd: &crate::api::TemporalWorkerDeployment,
    ) -> Option<TemporalConnection> {
        let reference = &twd.spec.worker_options.connection_ref;
        if reference.is_cluster() {
            self.cluster_connection(&reference.name)
        } else {
            let ns = twd.namespace().unwrap_or_default();
            self.connection(twd.kind_set(), &ns, &reference.name)
        }
    }

    /// The Connection of `set` named `ns/name`, if cached.
    pub fn connection(&self, set: KindSet, ns: &str, name: &str) -> Option<TemporalConnection> {
        let key = ObjectRef::new_with(name, set).within(ns);
        self.connections
            .iter()
            .filter(|(s, _)| *s == set)
            .find_map(|(_, store)| store.get(&key))
            .map(|c| (*c).clone())
    }

    /// The Secret `ns/name`, read by name at most once per [`SECRET_REUSE`].
    pub async fn secret(
        &self,
        client: &kube::Client,
        ns: &str,
        name: &str,
    ) -> Result<Option<Secret>, kube::Error> {
        self.secrets.get(client, ns, name, Instant::now()).await
    }

    /// Forgets the Secret `ns/name`: the next read asks the API server (credentials refused).
    pub fn forget_secret(&self, ns: &str, name: &str) {
        self.secrets.forget(ns, name);
    }
}

/// Secret bodies read by name, with when they were read. Only Secrets a Connection names are
/// ever here, and only those read within [`SECRET_REUSE`] stay (expired ones are evicted at
/// each lookup and insertion), so the map is no larger than the Secrets in use.
#[derive(Default)]
struct SecretBodies(Mutex<HashMap<SecretKey, (Instant, Option<Secret>)>>);

/// `(namespace, name)`.
type SecretKey = (String, String);

/// Whether a body read at `at` may stand in for a read at `now`.
fn fresh_at(at: Instant, now: Instant) -> bool {
    now.saturating_duration_since(at) < SECRET_REUSE
}

impl SecretBodies {
    async fn get(
        &self,
        client: &kube::Client,
        ns: &str,
        name: &str,
        now: Instant,
    ) -> Result<Option<Secret>, kube::Error> {
        let key = (ns.to_string(), name.to_string());
        if let Some(hit) = self.fresh(&key, now) {
            return Ok(hit);
        }
        let read = Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await?;
        self.remember(key, now, read.clone());
        Ok(read)
    }

    /// Keeps `read` (a missing Secret is not remembered: the user is about to create it), and
    /// drops every entry too old to be reused: a Secret no Connection names any more (the
    /// Connection was deleted or points elsewhere) is never read again, so nothing else would
    /// ever remove it, and its credentials would stay in memory for the process's life.
    fn remember(&self, key: SecretKey, now: Instant, read: Option<Secret>) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, (at, _)| fresh_at(*at, now));
        match read {
            Some(_) => m.insert(key, (now, read)),
            None => m.remove(&key),
        };
    }

    /// The body of `key` if it was read less than [`SECRET_REUSE`] ago; an older one is
    /// dropped.
    fn fresh(&self, key: &SecretKey, now: Instant) -> Option<Option<Secret>> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (at, body) = m.get(key)?;
        if fresh_at(*at, now) {
            return Some(body.clone());
        }
        m.remove(key);
        None
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn forget(&self, ns: &str, name: &str) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(&(ns.to_string(), name.to_string()));
    }
}

/// What the Deployment cache keeps of a Deployment: its metadata with only the annotations a
/// reconcile reads, replicas and selector, the pod template's two hash annotations and the
/// restart request its Pods carry, and the
/// status without condition messages. The Pod spec, `managedFields` and the rest are most of
/// its size (issue 30: memory per object). A write starts from a fresh read, never from here.
pub fn slim_deployment(d: &mut Deployment) {
    d.metadata.managed_fields = None;
    keep_only(
        &mut d.metadata.annotations,
        &[
            ANNOTATION_REVISION,
            ANNOTATION_SCALED_DOWN_AT,
            ANNOTATION_SETTINGS,
        ],
    );
    {
        let spec = &mut d.spec;
        spec.template.spec = None;
        if let Some(meta) = &mut spec.template.metadata {
            *meta = ObjectMeta {
                annotations: meta.annotations.take(),
                ..Default::default()
            };
            keep_only(
                &mut meta.annotations,
                &[
                    ANNOTATION_POD_TEMPLATE_HASH,
                    ANNOTATION_CONNECTION_HASH,
                    ANNOTATION_CONNECTION_REF,
                    ANNOTATION_RESTART,
                ],
            );
        }
    }
    let conditions = d.status.as_mut().and_then(|s| s.conditions.as_mut());
    for c in conditions.into_iter().flatten() {
        c.message = None;
        c.last_update_time = None;
    }
}

/// Drops every entry of `map` but `keys` (and the map itself once empty).
fn keep_only(map: &mut Option<BTreeMap<String, String>>, keys: &[&str]) {
    if let Some(m) = map {
        m.retain(|k, _| keys.contains(&k.as_str()));
        if m.is_empty() {
            *map = None;
        }
    }
}

/// A copy of the whole object that client-side `kubectl apply` (and tools built on it, such
/// as Argo CD's default sync) leaves on it: often as large as the object, and never read here.
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What every cache of our own kinds keeps: all but `managedFields` and the last-applied copy.
pub fn slim_own<K: kube::Resource>(o: &mut K) {
    let meta = o.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = &mut meta.annotations {
        a.remove(ANNOTATION_LAST_APPLIED);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

/// What the autoscaler cache keeps of an HPA: its target (all `autoscalers.rs` reads).
pub fn slim_autoscaler(h: &mut HorizontalPodAutoscaler) {
    h.metadata.managed_fields = None;
    h.metadata.annotations = None;
    h.metadata.labels = None;
    h.status = None;
    h.spec.metrics = None;
    h.spec.behavior = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn deployment(ns: &str, name: &str, worker: &str) -> Deployment {
        serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name,
            "labels": {LABEL_DEPLOYMENT_NAME: worker},
            "managedFields": [{"manager": "kubectl", "operation": "Update"}]}}))
        .expect("deployment")
    }

    fn filled<K>(objs: Vec<K>, dyntype: K::DynamicType) -> Listing<K>
    where
        K: kube::Resource + Clone + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash,
    {
        let mut w = Writer::new(dyntype);
        w.apply_watcher_event(&Event::Init);
        for o in objs {
            w.apply_watcher_event(&Event::InitApply(o));
        }
        w.apply_watcher_event(&Event::InitDone);
        (w.as_reader(), Listed::done())
    }

    #[test]
    fn own_kinds_lose_only_managed_fields_and_the_last_applied_copy() {
        let mut c: TemporalConnection = serde_json::from_value(json!({
            "apiVersion": "temporal.io/v1alpha1", "kind": "TemporalConnection",
            "metadata": {"name": "t", "namespace": "shop", "annotations": {
                ANNOTATION_LAST_APPLIED: "{}", "team": "payments"},
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"hostPort": "temporal:7233"}}))
        .expect("connection");
        slim_own(&mut c);
        assert!(c.metadata.managed_fields.is_none());
        assert_eq!(c.annotations().keys().collect::<Vec<_>>(), ["team"]);
    }

    #[test]
    fn a_workers_deployments_are_found_by_namespace_and_label_only() {
        let mut d = deployment("shop", "orders-v1", "orders");
        d.metadata.uid = Some("uid-1".into());
        d.spec = serde_json::from_value(json!({"selector": {}, "template": {
        "metadata": {"annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "worker"}]}}}))
        .expect("spec");
        slim_deployment(&mut d);
        assert!(d.metadata.managed_fields.is_none());
        let template = &d.spec.template;
        assert!(template.spec.is_none(), "the Pod spec is not kept");
        let annotations = template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref());
        assert!(annotations.is_none(), "nor annotations nobody reads");
        let caches = Caches::new(
            filled(
                vec![
                    d,
                    deployment("shop", "billing-v1", "billing"),
                    deployment("other", "orders-v1", "orders"),
                ],
                (),
            ),
            filled(vec![], ()),
            vec![],
            vec![],
        );
        let found: Vec<String> = caches
            .deployments_of("shop", "orders")
            .iter()
            .map(|d| d.name_any())
            .collect();
        assert_eq!(found, ["orders-v1"]);
        let uids = caches.deployment_uids_of("shop", "orders");
        assert_eq!(
            uids.into_iter().collect::<Vec<_>>(),
            [("orders-v1".into(), "uid-1".into())]
        );
        assert!(caches.autoscalers_in("shop").is_empty());
        assert!(caches.ready().now_or_never().is_some_and(|r| r.is_ok()));
        assert!(caches.connection(KindSet::Seed, "shop", "c").is_none());
    }

    #[tokio::test]
    async fn every_waiter_wakes_when_a_store_has_listed() {
        let (tx, listed) = Listed::pending();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let l = listed.clone();
                tokio::spawn(async move { l.wait().await.is_ok() })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(!listed.is_done());
        tx.send_replace(true);
        for w in waiters {
            assert!(w.await.expect("waiter"), "woken and listed");
        }
        drop(tx);
        assert!(listed.wait().await.is_ok(), "listed stays listed");
        let (tx, never) = Listed::pending();
        drop(tx);
        assert!(never.wait().await.is_err(), "stopped before listing");
    }

    #[test]
    fn a_secret_read_is_reused_until_it_is_old_or_forgotten() {
        let bodies = SecretBodies::default();
        let key = ("shop".to_string(), "tls".to_string());
        let t0 = Instant::now();
        assert!(bodies.fresh(&key, t0).is_none(), "never read");
        bodies
            .0
            .lock()
            .expect("lock")
            .insert(key.clone(), (t0, Some(Secret::default())));
        assert!(bodies.fresh(&key, t0 + Duration::from_secs(10)).is_some());
        assert!(bodies.fresh(&key, t0 + SECRET_REUSE).is_none(), "too old");
        bodies.forget("shop", "tls");
        assert!(bodies.fresh(&key, t0).is_none(), "forgotten");
    }

    #[test]
    fn expired_secret_bodies_are_evicted() {
        let bodies = SecretBodies::default();
        let key = |n: &str| ("shop".to_string(), n.to_string());
        let t0 = Instant::now();
        for n in ["a", "b", "c"] {
            bodies.remember(key(n), t0, Some(Secret::default()));
        }
        // A missing Secret is not kept.
        bodies.remember(key("gone"), t0, None);
        assert_eq!(bodies.len(), 3);
        // Looking up an expired body drops it.
        let later = t0 + SECRET_REUSE;
        assert!(bodies.fresh(&key("a"), later).is_none());
        assert_eq!(bodies.len(), 2, "the expired body looked up is evicted");
        // Storing any read drops every expired body: "b" and "c" are never named again.
        bodies.remember(key("d"), later, Some(Secret::default()));
        assert_eq!(bodies.len(), 1, "only the fresh body is left");
        assert!(bodies.fresh(&key("d"), later).is_some());
        // A fresh body survives another's insertion.
        bodies.remember(
            key("e"),
            later + Duration::from_secs(1),
            Some(Secret::default()),
        );
        assert_eq!(bodies.len(), 2);
    }
}
