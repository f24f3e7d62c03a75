//! Two kind sets, one model.
//!
//! The controller serves every model under two kinds: the Go temporal-worker-controller's
//! current names (`WorkerDeployment`, `Connection`, `WorkerResourceTemplate`: the canonical set,
//! so its users' YAML applies unchanged) and the seed names (`TemporalWorkerDeployment`,
//! `TemporalConnection`, `TemporalWorkerOwnedResource`). Both kinds of a model share one Rust
//! type, one schema and one reconcile path; the kind is data, the `kube::Resource` dynamic type
//! [`KindSet`], carried by each object (its `kind` field) and by every `ObjectRef`, so that a
//! `WorkerDeployment` and a `TemporalWorkerDeployment` of the same name never share a key.
//! References resolve within a set: a `WorkerDeployment` names a `Connection`, a
//! `TemporalWorkerDeployment` a `TemporalConnection`.

use std::borrow::Cow;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::{GROUP, VERSION};

/// Which set of kind names an object is served under.
//
// Deliberately no `Default`: every API call and every `ObjectRef` must say which kind it
// addresses (kube's `Api::namespaced` and `ObjectRef::new` need a default and do not compile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KindSet {
    /// The Go controller's current kinds (canonical in our docs).
    Canonical,
    /// The seed kinds `Temporal*`.
    Seed,
}

/// The three models, each served under one kind per [`KindSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Model {
    Worker,
    Connection,
    Template,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Worker, Model::Connection, Model::Template];
}

impl KindSet {
    pub const ALL: [KindSet; 2] = [KindSet::Canonical, KindSet::Seed];

    /// The kind name of `model` in this set.
    pub fn kind(self, model: Model) -> &'static str {
        match (self, model) {
            (KindSet::Canonical, Model::Worker) => "WorkerDeployment",
            (KindSet::Canonical, Model::Connection) => "Connection",
            (KindSet::Canonical, Model::Template) => "WorkerResourceTemplate",
            (KindSet::Seed, Model::Worker) => "TemporalWorkerDeployment",
            (KindSet::Seed, Model::Connection) => "TemporalConnection",
            (KindSet::Seed, Model::Template) => "TemporalWorkerOwnedResource",
        }
    }

    /// The resource (plural) name of `model` in this set.
    pub fn plural(self, model: Model) -> &'static str {
        match (self, model) {
            (KindSet::Canonical, Model::Worker) => "workerdeployments",
            (KindSet::Canonical, Model::Connection) => "connections",
            (KindSet::Canonical, Model::Template) => "workerresourcetemplates",
            (KindSet::Seed, Model::Worker) => "temporalworkerdeployments",
            (KindSet::Seed, Model::Connection) => "temporalconnections",
            (KindSet::Seed, Model::Template) => "temporalworkerownedresources",
        }
    }

    fn short_names(self, model: Model) -> &'static [&'static str] {
        match (self, model) {
            (KindSet::Canonical, Model::Worker) => &["wd", "wdeployment"],
            (KindSet::Canonical, Model::Connection) => &[],
            (KindSet::Canonical, Model::Template) => &["wrt"],
            // The Go controller's deprecated TemporalWorkerDeployment also had the longer two.
            (KindSet::Seed, Model::Worker) => &["twd", "twdeployment", "tworkerdeployment"],
            (KindSet::Seed, Model::Connection) => &["tconn"],
            (KindSet::Seed, Model::Template) => &["twor"],
        }
    }

    /// The set and model a kind name belongs to.
    pub fn of_kind(kind: &str) -> Option<(KindSet, Model)> {
        KindSet::ALL.into_iter().find_map(|set| {
            Model::ALL
                .into_iter()
                .find(|m| set.kind(*m) == kind)
                .map(|m| (set, m))
        })
    }

    /// The set an object's `kind` field names; an object without one (built in code) is Seed.
    pub fn of_object(kind: &str, model: Model) -> KindSet {
        match KindSet::of_kind(kind) {
            Some((set, m)) if m == model => set,
            _ => KindSet::Seed,
        }
    }

    /// The status subresource of the worker model, as metrics label it.
    pub fn worker_status_resource(self) -> &'static str {
        match self {
            KindSet::Canonical => "workerdeployments/status",
            KindSet::Seed => "temporalworkerdeployments/status",
        }
    }
}

/// The models served under both kind sets; watch streams stamp each object with its set.
pub trait Stamped {
    fn stamp(&mut self, set: KindSet);
}

pub(crate) fn default_api_version() -> String {
    api_version().into_owned()
}
pub(crate) fn default_worker_kind() -> String {
    KindSet::Seed.kind(Model::Worker).to_string()
}
pub(crate) fn default_connection_kind() -> String {
    KindSet::Seed.kind(Model::Connection).to_string()
}
pub(crate) fn default_template_kind() -> String {
    KindSet::Seed.kind(Model::Template).to_string()
}

pub(crate) fn api_version() -> Cow<'static, str> {
    Cow::Owned(format!("{GROUP}/{VERSION}"))
}

/// Implements `kube::Resource` for a model type whose kind is its [`KindSet`], plus the
/// constructors and the accessor of the set an object belongs to.
macro_rules! served_model {
    ($root:ident, $spec:ty, $status:ty, $model:expr) => {
        impl $root {
            /// A new object of this model in `set` (as the API server would return it, minus
            /// the metadata it fills in).
            pub fn new_in(set: $crate::api::kinds::KindSet, name: &str, spec: $spec) -> Self {
                Self {
                    api_version: $crate::api::kinds::api_version().into_owned(),
                    kind: set.kind($model).to_string(),
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }

            /// A new object of the seed kind.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self::new_in($crate::api::kinds::KindSet::Seed, name, spec)
            }

            /// The kind set this object was read as.
            pub fn kind_set(&self) -> $crate::api::kinds::KindSet {
                $crate::api::kinds::KindSet::of_object(&self.kind, $model)
            }

            /// Marks the object as read from `set`'s kind (watch streams stamp every object,
            /// so the set never depends on a list answer carrying `kind`).
            pub fn stamp(&mut self, set: $crate::api::kinds::KindSet) {
                self.api_version = $crate::api::kinds::api_version().into_owned();
                self.kind = set.kind($model).to_string();
            }

            /// [`Self::stamp`], by value.
            pub fn stamped(mut self, set: $crate::api::kinds::KindSet) -> Self {
                self.stamp(set);
                self
            }

            /// This object's kind name.
            pub fn kind_name(&self) -> &'static str {
                self.kind_set().kind($model)
            }

            /// The API of this model's kind in `set`, in `namespace`.
            pub fn api(
                client: kube::Client,
                namespace: &str,
                set: $crate::api::kinds::KindSet,
            ) -> kube::Api<Self> {
                kube::Api::namespaced_with(client, namespace, &set)
            }

            /// The API of this object's own kind and namespace.
            pub fn own_api(&self, client: kube::Client) -> kube::Api<Self> {
                let ns = self.metadata.namespace.as_deref().unwrap_or_default();
                Self::api(client, ns, self.kind_set())
            }

            /// This object's key (kind, namespace, name) in stores and queues.
            pub fn key(&self) -> kube::runtime::reflector::ObjectRef<Self> {
                kube::runtime::reflector::ObjectRef::from_obj_with(self, self.kind_set())
            }

            /// The object reference events and owner references use.
            pub fn reference(&self) -> k8s_openapi::api::core::v1::ObjectReference {
                kube::Resource::object_ref(self, &self.kind_set())
            }
        }

        impl $crate::api::kinds::Stamped for $root {
            fn stamp(&mut self, set: $crate::api::kinds::KindSet) {
                $root::stamp(self, set)
            }
        }

        impl kube::Resource for $root {
            type DynamicType = $crate::api::kinds::KindSet;
            // Dynamic: kube offers `Api::namespaced_with` only for dynamic-scope types.
            type Scope = kube::core::DynamicResourceScope;

            fn kind(set: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(set.kind($model))
            }
            fn group(_: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($crate::api::GROUP)
            }
            fn version(_: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($crate::api::VERSION)
            }
            fn plural(set: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(set.plural($model))
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use served_model;

/// The CRD of `model` under `set`'s names, made from the seed CRD the derive generates: the
/// schema is the same by construction, only the names (and the prose naming the kinds) change.
pub fn crd_for(
    seed: &CustomResourceDefinition,
    set: KindSet,
    model: Model,
) -> CustomResourceDefinition {
    if set == KindSet::Seed {
        let mut crd = seed.clone();
        crd.spec.names.short_names = Some(short_names(set, model));
        return crd;
    }
    // Prose (descriptions, CEL messages, the status placeholder) names the seed kinds; the
    // canonical CRD names its own. Serialising a generated CRD cannot fail.
    let mut text = serde_json::to_string(seed).unwrap_or_default();
    for m in Model::ALL {
        text = text.replace(KindSet::Seed.kind(m), KindSet::Canonical.kind(m));
    }
    let Ok(mut crd) = serde_json::from_str::<CustomResourceDefinition>(&text) else {
        return seed.clone();
    };
    let plural = set.plural(model);
    crd.metadata.name = Some(format!("{plural}.{GROUP}"));
    let names = &mut crd.spec.names;
    names.kind = set.kind(model).to_string();
    names.list_kind = Some(format!("{}List", set.kind(model)));
    names.plural = plural.to_string();
    names.singular = Some(set.kind(model).to_lowercase());
    names.short_names = Some(short_names(set, model));
    if model == Model::Template {
        // The Go controller's columns read its field names.
        for version in &mut crd.spec.versions {
            for column in version.additional_printer_columns.iter_mut().flatten() {
                column.json_path = column
                    .json_path
                    .replace(".spec.workerRef.", ".spec.workerDeploymentRef.")
                    .replace(".spec.object.", ".spec.template.");
            }
        }
    }
    crd
}

fn short_names(set: KindSet, model: Model) -> Vec<String> {
    set.short_names(model)
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_name_maps_back_to_its_set_and_model() {
        for set in KindSet::ALL {
            for m in Model::ALL {
                assert_eq!(KindSet::of_kind(set.kind(m)), Some((set, m)));
                assert_eq!(KindSet::of_object(set.kind(m), m), set);
            }
        }
        assert_eq!(KindSet::of_kind("Deployment"), None);
        // A kind of another model, or none at all, reads as the seed set.
        assert_eq!(
            KindSet::of_object("WorkerDeployment", Model::Connection),
            KindSet::Seed
        );
        assert_eq!(KindSet::of_object("", Model::Worker), KindSet::Seed);
    }

    #[test]
    fn an_object_read_without_kind_is_of_the_seed_kind_and_says_so_when_written() {
        let twd: crate::api::TemporalWorkerDeployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w"},
            "spec": {"template": {}, "rollout": {"strategy": "AllAtOnce"},
                "workerOptions": {"connectionRef": {"name": "c"}, "temporalNamespace": "n"}}
        }))
        .expect("parse");
        assert_eq!(twd.kind_set(), KindSet::Seed);
        let written = serde_json::to_value(&twd).expect("write");
        assert_eq!(written["kind"], "TemporalWorkerDeployment");
        assert_eq!(written["apiVersion"], "temporal.io/v1alpha1");
    }

    #[test]
    fn plurals_and_short_names_are_unique_across_both_sets() {
        let mut seen = std::collections::HashSet::new();
        for set in KindSet::ALL {
            for m in Model::ALL {
                assert!(seen.insert(set.plural(m)), "{}", set.plural(m));
                for s in set.short_names(m) {
                    assert!(seen.insert(s), "{s}");
                }
            }
        }
    }
}
