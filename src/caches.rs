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
//!   it made are refused ([`Caches::forget_secret`]).
//!
//! A store is read only once it has listed ([`Caches::ready`]): an unfilled cache read as empty
//! would look like "no Deployments" to the planner. A name missing from a ready cache is asked
//! of the API server once more before it counts as absent (the watch may not have delivered an
//! object created a moment ago), which costs reads only while something is missing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{KindSet, LABEL_DEPLOYMENT_NAME, TemporalConnection, TemporalWorkerOwnedResource};

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
    secrets: Arc<SecretBodies>,
}

impl Caches {
    pub fn new(
        deployments: Store<Deployment>,
        autoscalers: Store<HorizontalPodAutoscaler>,
        connections: Vec<(KindSet, Store<TemporalConnection>)>,
        templates: Vec<(KindSet, Store<TemporalWorkerOwnedResource>)>,
    ) -> Self {
        Self {
            deployments,
            autoscalers,
            connections,
            templates,
            secrets: Arc::default(),
        }
    }

    /// Resolves once every store has listed (at once afterwards).
    pub async fn ready(&self) -> Result<(), WriterDropped> {
        self.deployments.wait_until_ready().await?;
        self.autoscalers.wait_until_ready().await?;
        for (_, s) in &self.connections {
            s.wait_until_ready().await?;
        }
        for (_, s) in &self.templates {
            s.wait_until_ready().await?;
        }
        Ok(())
    }

    /// The versioned Deployments in `ns` labelled for the worker `label_value` (the rendered
    /// label value of its name).
    pub fn deployments_of(&self, ns: &str, label_value: &str) -> Vec<Deployment> {
        self.deployments
            .state()
            .iter()
            .filter(|d| {
                d.namespace().as_deref() == Some(ns)
                    && d.labels().get(LABEL_DEPLOYMENT_NAME).map(String::as_str)
                        == Some(label_value)
            })
            .map(|d| (**d).clone())
            .collect()
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
/// ever here, so the map is as large as the number of such Secrets.
#[derive(Default)]
struct SecretBodies(Mutex<HashMap<SecretKey, (Instant, Option<Secret>)>>);

/// `(namespace, name)`.
type SecretKey = (String, String);

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
        // A missing Secret is not remembered: the user is about to create it.
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &read {
            Some(_) => m.insert(key, (now, read.clone())),
            None => m.remove(&key),
        };
        Ok(read)
    }

    fn fresh(&self, key: &(String, String), now: Instant) -> Option<Option<Secret>> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (at, body) = m.get(key)?;
        (now.saturating_duration_since(*at) < SECRET_REUSE).then(|| body.clone())
    }

    fn forget(&self, ns: &str, name: &str) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(&(ns.to_string(), name.to_string()));
    }
}

/// What the Deployment cache keeps of a Deployment: everything but `managedFields` (the bulk of
/// a Deployment's size, read by nobody here).
pub fn slim_deployment(d: &mut Deployment) {
    d.metadata.managed_fields = None;
}

/// What the autoscaler cache keeps of an HPA: its target (all `autoscalers.rs` reads).
pub fn slim_autoscaler(h: &mut HorizontalPodAutoscaler) {
    h.metadata.managed_fields = None;
    h.metadata.annotations = None;
    h.metadata.labels = None;
    h.status = None;
    if let Some(spec) = &mut h.spec {
        spec.metrics = None;
        spec.behavior = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn deployment(ns: &str, name: &str, worker: &str) -> Deployment {
        serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name,
            "labels": {LABEL_DEPLOYMENT_NAME: worker},
            "managedFields": [{"manager": "kubectl", "operation": "Update"}]}}))
        .expect("deployment")
    }

    fn filled<K>(objs: Vec<K>, dyntype: K::DynamicType) -> Store<K>
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
        w.as_reader()
    }

    #[test]
    fn a_workers_deployments_are_found_by_namespace_and_label_only() {
        let mut d = deployment("shop", "orders-v1", "orders");
        slim_deployment(&mut d);
        assert!(d.metadata.managed_fields.is_none());
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
        assert!(caches.autoscalers_in("shop").is_empty());
        assert!(caches.connection(KindSet::Seed, "shop", "c").is_none());
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
}
