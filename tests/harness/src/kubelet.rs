//! A kubelet stand-in: for every versioned Deployment (label `temporal.io/build-id`) in a
//! Kubernetes API it keeps `spec.replicas` real Temporal workers running, configured only from
//! the first container's env, and reports them through the Deployment's `/status` the way the
//! Deployment controller would (observedGeneration, replica counts, `Available`).
//!
//! Behaviour worth knowing when writing tests:
//! - A worker counts as ready once the SDK worker is constructed and running.
//! - Env changes in the template roll the workers: one new worker is started and running before
//!   one old worker is stopped (maxSurge 1, maxUnavailable 0).
//! - A worker whose thread ends (bad address, crash) is dropped and replaced on the next tick.
//! - `set_paused(.., true)` hands the Deployment to the test: no worker is started and no status
//!   is written, while scale-down and deletion still stop workers (stopping never hurts).
//! - Env values from `valueFrom.secretKeyRef` / `configMapKeyRef` are resolved through the API;
//!   other `valueFrom` sources are skipped.
//! - `secret` volumes mounted into the first container become files for the worker (each key
//!   of the Secret at `<mountPath>/<key>`, or as `items` says; `subPath` mounts one file), so
//!   `TEMPORAL_TLS_CLIENT_CERT_PATH` / `..._KEY_PATH` resolve the way they do in a real pod.
//! - A Secret, ConfigMap or key that is referenced (and not `optional`) but missing keeps new
//!   pods from starting, like a real kubelet's `CreateContainerConfigError` /
//!   `ContainerCreating`; they start on a later tick once it exists.
//! - [`KubeletOptions::trusted_ca_pem`] stands for the CA bundle baked into the worker image:
//!   it goes into every [`WorkerConfig`] as [`WorkerConfig::trusted_ca_pem`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition};
use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, PodSpec, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::worker::{self, WorkerConfig, WorkerHandle};

/// The label the controller puts on every versioned Deployment.
pub const BUILD_ID_LABEL: &str = "temporal.io/build-id";

/// Re-check interval: replaces dead workers and retries failed starts.
const TICK: Duration = Duration::from_millis(500);
/// A worker that died is not replaced sooner than this (a crash loop with a short back-off).
const RESTART_BACKOFF: Duration = Duration::from_secs(1);

type Key = (String, String);

/// The running kubelet stand-in. Dropping it aborts everything (workers are asked to stop);
/// [`Kubelet::shutdown`] also waits for the workers to stop.
pub struct Kubelet {
    inner: Arc<Inner>,
    watcher: Option<JoinHandle<()>>,
}

/// What the kubelet stand-in knows beyond the Kubernetes API.
#[derive(Clone, Debug, Default)]
pub struct KubeletOptions {
    /// PEM CA bundle standing for the worker image's trust store (e.g. a [`TestPki`] CA, so
    /// workers trust a TLS proxy). It does not come from the pod: real images bake it in.
    ///
    /// [`TestPki`]: crate::tls_proxy::TestPki
    pub trusted_ca_pem: Option<Vec<u8>>,
}

struct Inner {
    client: kube::Client,
    options: Arc<KubeletOptions>,
    // Actors are spawned here, not on whatever runtime a test happens to call from.
    runtime: tokio::runtime::Handle,
    actors: Mutex<HashMap<Key, Actor>>,
}

struct Actor {
    desired: watch::Sender<Option<Arc<Deployment>>>,
    paused: watch::Sender<bool>,
    shared: Arc<ActorShared>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct ActorShared {
    running: AtomicUsize,
    configs: Mutex<Vec<WorkerConfig>>,
}

impl Kubelet {
    /// Starts watching versioned Deployments in all namespaces. Fails fast if the API does not
    /// answer a list call.
    pub async fn start(client: kube::Client) -> Result<Kubelet> {
        Kubelet::start_with(client, KubeletOptions::default()).await
    }

    /// [`Kubelet::start`] with options (e.g. the CA bundle workers trust).
    pub async fn start_with(client: kube::Client, options: KubeletOptions) -> Result<Kubelet> {
        let api: Api<Deployment> = Api::all(client.clone());
        api.list(&ListParams::default().labels(BUILD_ID_LABEL).limit(1))
            .await
            .context("listing versioned Deployments")?;
        let inner = Arc::new(Inner {
            client: client.clone(),
            options: Arc::new(options),
            runtime: tokio::runtime::Handle::current(),
            actors: Mutex::new(HashMap::new()),
        });
        let watcher = tokio::spawn(watch_deployments(api, Arc::downgrade(&inner)));
        Ok(Kubelet {
            inner,
            watcher: Some(watcher),
        })
    }

    /// Paused: start no workers and write no status for this Deployment (the test controls its
    /// readiness). Works before the Deployment exists.
    pub fn set_paused(&self, namespace: &str, deployment: &str, paused: bool) {
        self.inner
            .with_actor(&(namespace.to_string(), deployment.to_string()), |a| {
                a.paused.send_replace(paused);
            });
    }

    /// Workers of this Deployment whose SDK worker is constructed and running.
    pub fn running_workers(&self, namespace: &str, deployment: &str) -> usize {
        self.inner
            .shared(namespace, deployment)
            .map(|s| s.running.load(Ordering::SeqCst))
            .unwrap_or(0)
    }

    /// Configs (including per-replica identities) of this Deployment's running workers.
    pub fn worker_configs(&self, namespace: &str, deployment: &str) -> Vec<WorkerConfig> {
        self.inner
            .shared(namespace, deployment)
            .and_then(|s| s.configs.lock().ok().map(|c| c.clone()))
            .unwrap_or_default()
    }

    /// Stops watching, stops every worker and waits for them.
    pub async fn shutdown(mut self) {
        if let Some(w) = self.watcher.take() {
            w.abort();
        }
        let actors: Vec<Actor> = match self.inner.actors.lock() {
            Ok(mut map) => map.drain().map(|(_, a)| a).collect(),
            Err(_) => Vec::new(),
        };
        let mut tasks = Vec::new();
        for actor in actors {
            // Dropping the senders is the actor's signal to stop its workers and exit.
            drop(actor.desired);
            drop(actor.paused);
            tasks.push(actor.task);
        }
        for task in tasks {
            let _ = task.await;
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.take() {
            w.abort();
        }
        if let Ok(mut map) = self.inner.actors.lock() {
            for (_, actor) in map.drain() {
                actor.task.abort();
            }
        }
    }
}

impl Inner {
    fn shared(&self, namespace: &str, deployment: &str) -> Option<Arc<ActorShared>> {
        let map = self.actors.lock().ok()?;
        map.get(&(namespace.to_string(), deployment.to_string()))
            .map(|a| a.shared.clone())
    }

    fn with_actor(&self, key: &Key, f: impl FnOnce(&Actor)) {
        let Ok(mut map) = self.actors.lock() else {
            return;
        };
        let actor = map.entry(key.clone()).or_insert_with(|| {
            let (desired, desired_rx) = watch::channel(None);
            let (paused, paused_rx) = watch::channel(false);
            let shared = Arc::new(ActorShared::default());
            let ctx = ActorCtx {
                client: self.client.clone(),
                options: self.options.clone(),
                key: key.clone(),
                shared: shared.clone(),
                next_seq: 0,
                last_failure: None,
            };
            let task = self.runtime.spawn(run_actor(ctx, desired_rx, paused_rx));
            Actor {
                desired,
                paused,
                shared,
                task,
            }
        });
        f(actor);
    }

    fn set_desired(&self, key: &Key, obj: Option<Arc<Deployment>>) {
        self.with_actor(key, |a| {
            a.desired.send_replace(obj);
        });
    }

    fn known_keys(&self) -> Vec<Key> {
        self.actors
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

fn key_of(d: &Deployment) -> Key {
    (
        d.metadata.namespace.clone().unwrap_or_default(),
        d.metadata.name.clone().unwrap_or_default(),
    )
}

async fn watch_deployments(api: Api<Deployment>, inner: std::sync::Weak<Inner>) {
    let stream =
        watcher::watcher(api, watcher::Config::default().labels(BUILD_ID_LABEL)).default_backoff();
    futures::pin_mut!(stream);
    let mut listed: HashSet<Key> = HashSet::new();
    while let Some(event) = stream.next().await {
        let Some(inner) = inner.upgrade() else { return };
        match event {
            Ok(Event::Apply(d)) | Ok(Event::InitApply(d)) => {
                let key = key_of(&d);
                listed.insert(key.clone());
                // A Deployment being deleted has no pods worth running.
                let obj = if d.metadata.deletion_timestamp.is_some() {
                    None
                } else {
                    Some(Arc::new(d))
                };
                inner.set_desired(&key, obj);
            }
            Ok(Event::Delete(d)) => inner.set_desired(&key_of(&d), None),
            Ok(Event::Init) => listed.clear(),
            Ok(Event::InitDone) => {
                // Whatever vanished while the watch was down is gone now.
                for key in inner.known_keys() {
                    if !listed.contains(&key) {
                        inner.set_desired(&key, None);
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "kubelet watch error (retrying)"),
        }
    }
}

struct ActorCtx {
    client: kube::Client,
    options: Arc<KubeletOptions>,
    key: Key,
    shared: Arc<ActorShared>,
    next_seq: u64,
    last_failure: Option<Instant>,
}

/// A "pod": one worker plus the template hash it was started from.
struct Pod {
    handle: WorkerHandle,
    template: String,
}

async fn run_actor(
    mut ctx: ActorCtx,
    mut desired: watch::Receiver<Option<Arc<Deployment>>>,
    mut paused: watch::Receiver<bool>,
) {
    let mut pods: Vec<Pod> = Vec::new();
    loop {
        let obj = desired.borrow_and_update().clone();
        let is_paused = *paused.borrow_and_update();
        if let Err(e) = ctx.converge(&mut pods, obj.as_deref(), is_paused).await {
            tracing::debug!(deployment = ?ctx.key, error = %format!("{e:#}"), "kubelet reconcile failed (retrying)");
        }
        ctx.publish(&pods);
        // Wake on a spec/pause change, on any worker changing state (so readiness is reported
        // at once), or on the tick that retries failures.
        let mut states: Vec<_> = pods
            .iter()
            .map(|p| {
                let mut rx = p.handle.subscribe();
                rx.mark_unchanged();
                rx
            })
            .collect();
        let any_state = async {
            if states.is_empty() {
                futures::future::pending::<()>().await;
            }
            let _ = futures::future::select_all(states.iter_mut().map(|rx| Box::pin(rx.changed())))
                .await;
        };
        tokio::select! {
            changed = desired.changed() => if changed.is_err() { break },
            changed = paused.changed() => if changed.is_err() { break },
            _ = any_state => {}
            _ = tokio::time::sleep(TICK) => {}
        }
    }
    ctx.stop_all(&mut pods).await;
}

impl ActorCtx {
    fn publish(&self, pods: &[Pod]) {
        let running: Vec<WorkerConfig> = pods
            .iter()
            .filter(|p| p.handle.is_running())
            .map(|p| p.handle.config().clone())
            .collect();
        self.shared.running.store(running.len(), Ordering::SeqCst);
        if let Ok(mut configs) = self.shared.configs.lock() {
            *configs = running;
        }
    }

    async fn stop_all(&self, pods: &mut Vec<Pod>) {
        for pod in pods.drain(..) {
            if let Err(e) = pod.handle.stop().await {
                tracing::debug!(error = %format!("{e:#}"), "stopping test worker");
            }
        }
        self.publish(&[]);
    }

    async fn stop_one(&self, pods: &mut Vec<Pod>, index: usize) {
        let pod = pods.remove(index);
        if let Err(e) = pod.handle.stop().await {
            tracing::debug!(error = %format!("{e:#}"), "stopping test worker");
        }
        self.publish(pods);
    }

    /// One non-blocking step towards the spec, like a Deployment controller with maxSurge 1 and
    /// maxUnavailable 0: start missing workers (they become ready asynchronously), stop workers
    /// that are excess or outdated once enough updated ones are ready, then report.
    async fn converge(
        &mut self,
        pods: &mut Vec<Pod>,
        obj: Option<&Deployment>,
        paused: bool,
    ) -> Result<()> {
        // Workers that ended on their own are crashed pods: forget them; they get replaced.
        let before = pods.len();
        pods.retain(|p| !p.handle.state().is_finished());
        if pods.len() < before {
            self.last_failure = Some(Instant::now());
        }
        let Some(obj) = obj else {
            self.stop_all(pods).await;
            return Ok(());
        };
        let want = usize::try_from(
            obj.spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1)
                .max(0),
        )
        .unwrap_or(0);
        let template = template_hash(obj);
        let target = match self.worker_config(obj).await {
            Ok(cfg) => Some(cfg),
            Err(e) => {
                tracing::debug!(deployment = ?self.key, error = %format!("{e:#}"), "pod template cannot run a worker");
                None
            }
        };

        // Stop what is excess, cheapest loss first.
        while pods.len() > want {
            let ready = pods.iter().filter(|p| p.handle.is_running()).count();
            let outdated = |p: &Pod| p.template != template;
            let victim = pods
                .iter()
                .position(|p| outdated(p) && !p.handle.is_running())
                .or_else(|| pods.iter().position(outdated).filter(|_| ready > want))
                .or_else(|| {
                    let updated = pods.iter().filter(|p| !outdated(p)).count();
                    (updated > want).then(|| {
                        pods.iter()
                            .rposition(|p| !outdated(p) && !p.handle.is_running())
                            .or_else(|| pods.iter().rposition(|p| !outdated(p)))
                    })?
                });
            match victim {
                Some(idx) => self.stop_one(pods, idx).await,
                None => break,
            }
        }

        if paused {
            return Ok(());
        }
        let backing_off = self
            .last_failure
            .is_some_and(|t| t.elapsed() < RESTART_BACKOFF);
        if let Some(cfg) = target.as_ref().filter(|_| !backing_off) {
            let updated = pods.iter().filter(|p| p.template == template).count();
            let mut to_start = want.saturating_sub(updated);
            if pods.iter().any(|p| p.template != template) {
                to_start = to_start.min((want + 1).saturating_sub(pods.len()));
            }
            for _ in 0..to_start {
                self.next_seq += 1;
                let name = self.key.1.as_str();
                let identity = format!("{name}-{}-{}", &template[..10], self.next_seq);
                let handle = worker::spawn(WorkerConfig {
                    identity,
                    ..cfg.clone()
                })?;
                pods.push(Pod {
                    handle,
                    template: template.clone(),
                });
            }
        }
        // Publish before reporting readiness, so a caller that saw the status sees these pods.
        self.publish(pods);
        self.write_status(obj, pods, &template, want).await
    }

    /// The worker config a pod from this template would build from its env and mounted files.
    /// Fails (so no pod starts) while a referenced Secret or ConfigMap is missing.
    async fn worker_config(&self, obj: &Deployment) -> Result<WorkerConfig> {
        let pod = obj
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .context("Deployment has no pod template spec")?;
        let container = pod
            .containers
            .first()
            .context("pod template has no container")?;
        let mut env = BTreeMap::new();
        for var in container.env.iter().flatten() {
            if let Some(value) = self.env_value(var).await? {
                env.insert(var.name.clone(), value);
            }
        }
        let files = self.mounted_files(pod, container).await?;
        let mut cfg = WorkerConfig::from_pod(&env, &files)?;
        cfg.trusted_ca_pem = self.options.trusted_ca_pem.clone();
        Ok(cfg)
    }

    /// `Ok(None)`: no value (an `optional` reference to something missing, or an unsupported
    /// source). `Err`: a required Secret/ConfigMap or key is missing, or the API failed.
    async fn env_value(&self, var: &EnvVar) -> Result<Option<String>> {
        if let Some(v) = &var.value {
            return Ok(Some(v.clone()));
        }
        let Some(from) = var.value_from.as_ref() else {
            return Ok(None);
        };
        let ns = &self.key.0;
        if let Some(sel) = &from.secret_key_ref {
            let optional = sel.optional.unwrap_or(false);
            let secret = Api::<Secret>::namespaced(self.client.clone(), ns)
                .get_opt(&sel.name)
                .await
                .with_context(|| format!("reading Secret {ns}/{}", sel.name))?;
            let bytes = secret_data(secret.as_ref()).remove(&sel.key);
            return match bytes {
                Some(bytes) => String::from_utf8(bytes)
                    .map(Some)
                    .with_context(|| format!("env {}: Secret key is not UTF-8", var.name)),
                None if optional => Ok(None),
                None => anyhow::bail!(
                    "env {}: key {:?} of Secret {ns}/{} not found",
                    var.name,
                    sel.key,
                    sel.name
                ),
            };
        }
        if let Some(sel) = &from.config_map_key_ref {
            let optional = sel.optional.unwrap_or(false);
            let cm = Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                .get_opt(&sel.name)
                .await
                .with_context(|| format!("reading ConfigMap {ns}/{}", sel.name))?;
            let value = cm.and_then(|cm| cm.data?.get(&sel.key).cloned());
            return match value {
                Some(v) => Ok(Some(v)),
                None if optional => Ok(None),
                None => anyhow::bail!(
                    "env {}: key {:?} of ConfigMap {ns}/{} not found",
                    var.name,
                    sel.key,
                    sel.name
                ),
            };
        }
        Ok(None)
    }

    /// Files the container would see from its `secret` volume mounts: absolute path → bytes.
    /// Other volume types are ignored.
    async fn mounted_files(
        &self,
        pod: &PodSpec,
        container: &Container,
    ) -> Result<BTreeMap<String, Vec<u8>>> {
        let ns = &self.key.0;
        let mut files = BTreeMap::new();
        for mount in container.volume_mounts.iter().flatten() {
            let volume = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == mount.name)
                .with_context(|| format!("volumeMount {:?} names no volume", mount.name))?;
            let Some(source) = &volume.secret else {
                continue;
            };
            let optional = source.optional.unwrap_or(false);
            let name = source
                .secret_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .with_context(|| format!("secret volume {:?} has no secretName", volume.name))?;
            let secret = Api::<Secret>::namespaced(self.client.clone(), ns)
                .get_opt(name)
                .await
                .with_context(|| format!("reading Secret {ns}/{name}"))?;
            if secret.is_none() && !optional {
                anyhow::bail!("Secret {ns}/{name} of volume {:?} not found", volume.name);
            }
            let mut data = secret_data(secret.as_ref());
            // Relative path inside the volume → contents.
            let mut projected = BTreeMap::new();
            match source.items.as_ref().filter(|i| !i.is_empty()) {
                Some(items) => {
                    for item in items {
                        match data.remove(&item.key) {
                            Some(bytes) => {
                                projected.insert(item.path.clone(), bytes);
                            }
                            None if optional => {}
                            None => anyhow::bail!(
                                "volume {:?}: key {:?} of Secret {ns}/{name} not found",
                                volume.name,
                                item.key
                            ),
                        }
                    }
                }
                None => projected = data,
            }
            let mount_path = mount.mount_path.trim_end_matches('/');
            match mount.sub_path.as_deref().filter(|p| !p.is_empty()) {
                // A subPath mount shows one entry of the volume at mountPath itself.
                Some(sub) => {
                    let bytes = projected.remove(sub.trim_matches('/')).with_context(|| {
                        format!("volume {:?} has no subPath {sub:?}", volume.name)
                    })?;
                    files.insert(mount_path.to_string(), bytes);
                }
                None => {
                    for (rel, bytes) in projected {
                        files.insert(
                            format!("{mount_path}/{}", rel.trim_start_matches('/')),
                            bytes,
                        );
                    }
                }
            }
        }
        Ok(files)
    }

    /// Writes replica counts and `Available` through `/status`, only when they differ from what
    /// the object already says (our own write comes back as a watch event).
    async fn write_status(
        &self,
        obj: &Deployment,
        pods: &[Pod],
        template: &str,
        want: usize,
    ) -> Result<()> {
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let ready = pods.iter().filter(|p| p.handle.is_running()).count();
        let updated = pods.iter().filter(|p| p.template == template).count();
        let available = ready >= want;
        let unavailable = want.saturating_sub(ready);
        let generation = obj.metadata.generation;

        let current = obj.status.clone().unwrap_or_default();
        let mut conditions = current.conditions.clone().unwrap_or_default();
        let status_str = if available { "True" } else { "False" };
        let old = conditions.iter().position(|c| c.type_ == "Available");
        let unchanged_condition = old.is_some_and(|i| conditions[i].status == status_str);
        // A real API server drops zero counts (omitempty), so absent means 0 here; otherwise
        // every write would look different from what we read back and loop.
        let n = |v: Option<i32>| v.unwrap_or(0);
        let same = current.observed_generation == generation
            && n(current.replicas) == count(pods.len())
            && n(current.updated_replicas) == count(updated)
            && n(current.ready_replicas) == count(ready)
            && n(current.available_replicas) == count(ready)
            && n(current.unavailable_replicas) == count(unavailable)
            && unchanged_condition;
        if same {
            return Ok(());
        }
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now_seconds());
        let (reason, message) = if available {
            (
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        } else {
            (
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        };
        let condition = DeploymentCondition {
            type_: "Available".into(),
            status: status_str.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_update_time: Some(now.clone()),
            // Only a flip moves lastTransitionTime.
            last_transition_time: match old {
                Some(i) if unchanged_condition => conditions[i].last_transition_time.clone(),
                _ => Some(now),
            },
        };
        match old {
            Some(i) => conditions[i] = condition,
            None => conditions.push(condition),
        }
        let patch = json!({"status": {
            "observedGeneration": generation,
            "replicas": count(pods.len()),
            "updatedReplicas": count(updated),
            "readyReplicas": count(ready),
            "availableReplicas": count(ready),
            "unavailableReplicas": if unavailable > 0 { json!(count(unavailable)) } else { json!(null) },
            "conditions": conditions,
        }});
        let (ns, name) = &self.key;
        Api::<Deployment>::namespaced(self.client.clone(), ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("writing status of Deployment {ns}/{name}"))?;
        Ok(())
    }
}

/// A Secret's `data` (plus `stringData`, in case the API server did not fold it), or nothing.
fn secret_data(secret: Option<&Secret>) -> BTreeMap<String, Vec<u8>> {
    let Some(secret) = secret else {
        return BTreeMap::new();
    };
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    // Like the API server: stringData wins over data.
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

/// Like the pod-template-hash of a ReplicaSet: any template change makes existing pods outdated.
fn template_hash(obj: &Deployment) -> String {
    let template = obj
        .spec
        .as_ref()
        .map(|s| serde_json::to_string(&s.template).unwrap_or_default())
        .unwrap_or_default();
    hex::encode(Sha256::digest(template.as_bytes()))
}

fn now_seconds() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}
