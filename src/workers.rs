//! The cache of worker deployments of both kinds (`WorkerDeployment` and
//! `TemporalWorkerDeployment`): one reflector store per kind, read as one.
//!
//! kube's stores key objects by kind, so each kind has its own; everything that reads worker
//! deployments (the status API, metrics, the Connection reconciler) reads them through this
//! type and never sees which store an object came from except by its `kind_set()`.

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{KindSet, TemporalWorkerDeployment};
use crate::caches::{CacheStopped, Listed, Listing};

type Twd = TemporalWorkerDeployment;

#[derive(Clone)]
pub struct Workers {
    stores: Vec<(KindSet, Store<Twd>)>,
    /// Whether each store has listed (see [`Listed`] for why not the stores' own flag).
    listed: Vec<Listed>,
}

impl Workers {
    /// One store per kind set (in [`KindSet::ALL`] order, canonical first).
    pub fn new(stores: Vec<(KindSet, Listing<Twd>)>) -> Self {
        let listed = stores.iter().map(|(_, (_, l))| l.clone()).collect();
        let stores = stores.into_iter().map(|(k, (s, _))| (k, s)).collect();
        Self { stores, listed }
    }

    /// Every cached worker deployment of both kinds.
    pub fn state(&self) -> Vec<Arc<Twd>> {
        self.stores.iter().flat_map(|(_, s)| s.state()).collect()
    }

    /// The worker deployment of `set` named `namespace/name`.
    pub fn get(&self, set: KindSet, namespace: &str, name: &str) -> Option<Arc<Twd>> {
        // A keyed lookup, not a scan: the reconcile of every seed object asks this.
        let key = ObjectRef::new_with(name, set).within(namespace);
        self.stores
            .iter()
            .filter(|(s, _)| *s == set)
            .find_map(|(_, store)| store.get(&key))
    }

    /// `namespace/name` of either kind; the canonical kind wins when both exist (a migration
    /// in progress keeps the same name under both).
    pub fn find(&self, namespace: &str, name: &str) -> Option<Arc<Twd>> {
        KindSet::ALL
            .into_iter()
            .find_map(|set| self.get(set, namespace, name))
    }

    /// Resolves once every store has listed.
    pub async fn wait_until_ready(&self) -> Result<(), CacheStopped> {
        for l in &self.listed {
            l.wait().await?;
        }
        Ok(())
    }

    /// True once every store has listed (without waiting).
    pub fn is_listed(&self) -> bool {
        self.listed.iter().all(Listed::is_done)
    }
}

/// `namespace/name` read from the API server, as a `WorkerDeployment` or else as a
/// `TemporalWorkerDeployment` (the CLI's lookup; the canonical kind wins as in [`Workers::find`]).
pub async fn fetch(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Twd>, kube::Error> {
    for set in KindSet::ALL {
        if let Some(twd) = Twd::api(client.clone(), namespace, set)
            .get_opt(name)
            .await?
        {
            return Ok(Some(twd.stamped(set)));
        }
    }
    Ok(None)
}

/// Every worker deployment of both kinds, in `namespace` or in the whole cluster.
pub async fn list(client: &kube::Client, namespace: Option<&str>) -> Result<Vec<Twd>, kube::Error> {
    let mut out = Vec::new();
    for set in KindSet::ALL {
        let api: kube::Api<Twd> = match namespace {
            Some(ns) => Twd::api(client.clone(), ns, set),
            None => kube::Api::all_with(client.clone(), &set),
        };
        let items = api.list(&kube::api::ListParams::default()).await?.items;
        out.extend(items.into_iter().map(|t| t.stamped(set)));
    }
    Ok(out)
}

impl Workers {
    /// Stores filled with `twds` (each in its own kind's store), ready: a fixed set, for
    /// tests and for serving objects read once.
    pub fn of(twds: Vec<Twd>) -> Self {
        use kube::runtime::reflector::store::Writer;
        use kube::runtime::watcher::Event;
        let stores = KindSet::ALL
            .into_iter()
            .map(|set| {
                let mut writer = Writer::<Twd>::new(set);
                writer.apply_watcher_event(&Event::Init);
                for t in twds.iter().filter(|t| t.kind_set() == set) {
                    writer.apply_watcher_event(&Event::InitApply(t.clone()));
                }
                writer.apply_watcher_event(&Event::InitDone);
                // The reader stays valid after the writer is dropped.
                (set, (writer.as_reader(), Listed::done()))
            })
            .collect();
        Self::new(stores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;
    #[test]
    fn both_kinds_of_one_name_are_kept_apart_and_the_canonical_one_is_found_first() {
        let seed = TemporalWorkerDeployment::test();
        let canonical = seed.clone().stamped(KindSet::Canonical);
        let workers = Workers::of(vec![seed, canonical]);
        assert_eq!(workers.state().len(), 2);
        assert!(matches!(
            workers.wait_until_ready().now_or_never(),
            Some(Ok(()))
        ));
        let found = workers.find("shop", "orders").expect("found");
        assert_eq!(found.kind_set(), KindSet::Canonical);
        let seed = workers.get(KindSet::Seed, "shop", "orders").expect("seed");
        assert_eq!(seed.kind_name(), "TemporalWorkerDeployment");
        assert!(workers.find("shop", "other").is_none());
    }
}
