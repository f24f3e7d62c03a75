//! One reflector store per kind fed by one watch per watched namespace (or one cluster-wide
//! watch): a namespaced install needs only the Roles the chart renders in its namespaces.
//! The controllers' watches and the shared caches are all built on it.

use futures::{Stream, StreamExt, stream};
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::api::KindSet;
use crate::caches::{Listed, Listing};

/// The store and listed flag of a watch (for the caches that read it).
pub(crate) fn listing<K: Resource + Clone + 'static>(watched: &Watched<K>) -> Listing<K>
where
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    (watched.0.clone(), watched.1.clone())
}

/// Where the controller watches: the whole cluster (`None`) when no namespace is named, else
/// each named namespace once.
pub(crate) fn scopes(watch_namespaces: &[String]) -> Vec<Option<String>> {
    if watch_namespaces.is_empty() {
        return vec![None];
    }
    let mut out: Vec<Option<String>> = Vec::new();
    for ns in watch_namespaces {
        if !out.iter().any(|s| s.as_deref() == Some(ns.as_str())) {
            out.push(Some(ns.clone()));
        }
    }
    out
}

pub(crate) fn api_in<K>(client: &kube::Client, scope: &Option<String>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// `K`'s API in `scope` under `set`'s kind name.
pub(crate) fn api_in_set<K>(client: &kube::Client, scope: &Option<String>, set: KindSet) -> Api<K>
where
    K: Resource<Scope = kube::core::DynamicResourceScope, DynamicType = KindSet>,
{
    match scope {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &set),
        None => Api::all_with(client.clone(), &set),
    }
}

/// Watches `K` in every scope into one reflector store. Returns the store and the stream of
/// applied objects (the controller's trigger).
pub(crate) fn reflect_scopes<K>(
    client: &kube::Client,
    scopes: &[Option<String>],
    set: KindSet,
    config: watcher::Config,
) -> Watched<K>
where
    K: Resource<Scope = kube::core::DynamicResourceScope, DynamicType = KindSet>
        + crate::api::kinds::Stamped
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let apis = scopes
        .iter()
        .map(|s| api_in_set::<K>(client, s, set))
        .collect();
    // Every object carries its kind set from here on, whatever the answer carried; nobody
    // reads `managedFields` or the last-applied copy, often most of an object (status writes
    // are PUTs to the status subresource, which leave metadata as it is on the server).
    let prepare = move |o: &mut K| {
        o.stamp(set);
        crate::caches::slim_own(o);
    };
    let (store, listed, applied) = reflect_apis(scopes, apis, set, config, prepare, false);
    (store, listed, applied.boxed())
}

/// [`reflect_scopes`] for a built-in kind, each object trimmed by `slim` before it is stored.
pub(crate) fn reflect_builtin<K>(
    client: &kube::Client,
    scopes: &[Option<String>],
    config: watcher::Config,
    slim: fn(&mut K),
) -> (
    Store<K>,
    Listed,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let apis = scopes.iter().map(|s| api_in::<K>(client, s)).collect();
    // Deletions too: a deleted versioned Deployment is a reason to look again.
    reflect_apis(scopes, apis, (), config, slim, true)
}

/// One watch per API (one per scope) into one [`ScopedWriter`] store.
pub(crate) fn reflect_apis<K>(
    scopes: &[Option<String>],
    apis: Vec<Api<K>>,
    dyntype: K::DynamicType,
    config: watcher::Config,
    prepare: impl Fn(&mut K) + Clone + Send + 'static,
    with_deletes: bool,
) -> (
    Store<K>,
    Listed,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    let mut writer = ScopedWriter::new(scopes.to_vec(), dyntype);
    let reader = writer.reader();
    let listed = writer.listed();
    let events = stream::select_all(apis.into_iter().enumerate().map(|(i, api)| {
        let prepare = prepare.clone();
        watcher(api, config.clone())
            // A watch that keeps failing (RBAC, API server down) retries with backoff rather
            // than in a tight loop.
            .default_backoff()
            .map(move |event| (i, event.map(|e| e.modify(|o| prepare(o)))))
            .boxed()
    }));
    let applied = events.filter_map(move |(i, event)| {
        let out = match event {
            Ok(event) => {
                writer.apply(i, &event);
                match event {
                    watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => Some(Ok(obj)),
                    watcher::Event::Delete(obj) if with_deletes => Some(Ok(obj)),
                    _ => None,
                }
            }
            Err(e) => Some(Err(e)),
        };
        std::future::ready(out)
    });
    (reader, listed, applied)
}

/// One reflector store fed by one watch per scope. A watch's (re)list only replaces the
/// objects of its own scope (a plain `Writer` would replace the whole store), and the store
/// reads as ready once every scope has listed.
struct ScopedWriter<K: Resource + Clone + 'static>
where
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    writer: Writer<K>,
    dyntype: K::DynamicType,
    scopes: Vec<Option<String>>,
    /// The objects of a (re)list in progress, per scope.
    buffers: Vec<Option<Vec<K>>>,
    listed: Vec<bool>,
    ready: bool,
    /// Set once every scope has listed (see [`Listed`] for why not the store's own flag).
    ready_flag: watch::Sender<bool>,
}

impl<K: Resource + Clone + 'static> ScopedWriter<K>
where
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    fn new(scopes: Vec<Option<String>>, dyntype: K::DynamicType) -> Self {
        let n = scopes.len();
        Self {
            dyntype: dyntype.clone(),
            writer: Writer::new(dyntype),
            scopes,
            buffers: vec![None; n],
            listed: vec![false; n],
            ready: false,
            ready_flag: watch::channel(false).0,
        }
    }

    fn reader(&self) -> Store<K> {
        self.writer.as_reader()
    }

    fn listed(&self) -> Listed {
        Listed::of(self.ready_flag.subscribe())
    }

    fn key(&self, obj: &K) -> ObjectRef<K> {
        ObjectRef::from_obj_with(obj, self.dyntype.clone())
    }

    fn apply(&mut self, scope: usize, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => {
                self.writer.apply_watcher_event(event);
            }
            watcher::Event::Init => self.buffers[scope] = Some(Vec::new()),
            watcher::Event::InitApply(obj) => self.buffers[scope]
                .get_or_insert_with(Vec::new)
                .push(obj.clone()),
            watcher::Event::InitDone => {
                let fresh = self.buffers[scope].take().unwrap_or_default();
                let keep: std::collections::HashSet<ObjectRef<K>> =
                    fresh.iter().map(|o| self.key(o)).collect();
                let reader = self.writer.as_reader();
                let within = self.scopes[scope].clone();
                let gone: Vec<_> = reader
                    .state()
                    .into_iter()
                    .filter(|o| {
                        within
                            .as_ref()
                            .is_none_or(|ns| o.namespace().as_ref() == Some(ns))
                            && !keep.contains(&self.key(o))
                    })
                    .collect();
                for gone in gone {
                    self.writer
                        .apply_watcher_event(&watcher::Event::Delete((*gone).clone()));
                }
                for obj in fresh {
                    self.writer.apply_watcher_event(&watcher::Event::Apply(obj));
                }
                self.listed[scope] = true;
                if !self.ready && self.listed.iter().all(|l| *l) {
                    // Every scope has listed: mark the store ready (a relist of what it holds).
                    self.writer.apply_watcher_event(&watcher::Event::Init);
                    for obj in reader.state() {
                        self.writer
                            .apply_watcher_event(&watcher::Event::InitApply((*obj).clone()));
                    }
                    self.writer.apply_watcher_event(&watcher::Event::InitDone);
                    self.ready = true;
                    self.ready_flag.send_replace(true);
                }
            }
        }
    }
}

/// A reflector store and the stream of objects its watch applied (a controller's trigger).
pub(crate) type Watched<K> = (
    Store<K>,
    Listed,
    futures::stream::BoxStream<'static, Result<K, watcher::Error>>,
);

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(ns: &str, name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some(ns.into());
        cm.metadata.name = Some(name.into());
        cm
    }

    fn names(store: &Store<ConfigMap>) -> Vec<String> {
        let mut v: Vec<String> = store
            .state()
            .iter()
            .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
            .collect();
        v.sort();
        v
    }

    fn list(w: &mut ScopedWriter<ConfigMap>, scope: usize, objs: &[ConfigMap]) {
        w.apply(scope, &watcher::Event::Init);
        for o in objs {
            w.apply(scope, &watcher::Event::InitApply(o.clone()));
        }
        w.apply(scope, &watcher::Event::InitDone);
    }

    #[test]
    fn one_watch_per_named_namespace_and_one_cluster_wide_watch_otherwise() {
        assert_eq!(scopes(&[]), vec![None]);
        assert_eq!(
            scopes(&["a".into(), "b".into(), "a".into()]),
            vec![Some("a".to_string()), Some("b".to_string())]
        );
    }

    #[test]
    fn a_relist_of_one_namespace_keeps_the_others_and_ready_waits_for_all() {
        let mut w = ScopedWriter::<ConfigMap>::new(vec![Some("a".into()), Some("b".into())], ());
        let store = w.reader();
        list(&mut w, 0, &[cm("a", "x")]);
        assert_eq!(names(&store), ["a/x"]);
        assert!(
            store.wait_until_ready().now_or_never().is_none(),
            "ready before namespace b listed"
        );
        list(&mut w, 1, &[cm("b", "y")]);
        assert!(store.wait_until_ready().now_or_never().is_some());
        assert_eq!(names(&store), ["a/x", "b/y"]);
        w.apply(1, &watcher::Event::Apply(cm("b", "z")));
        // Namespace a relists (e.g. after its watch expired): x is gone, w is new; b is kept.
        list(&mut w, 0, &[cm("a", "w")]);
        assert_eq!(names(&store), ["a/w", "b/y", "b/z"]);
        w.apply(1, &watcher::Event::Delete(cm("b", "y")));
        assert_eq!(names(&store), ["a/w", "b/z"]);
    }
}
