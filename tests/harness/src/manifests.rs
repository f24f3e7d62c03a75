//! The manifests of the controller's kinds (TemporalWorkerDeployment, TemporalConnection,
//! TemporalWorkerOwnedResource) as JSON, for every test. JSON rather than the controller's
//! types because this crate does not depend on the controller (its tests also send objects the
//! types would refuse); a test that needs a typed object deserializes the result.

use serde_json::{Value, json};

/// The API version of every kind of the controller.
pub const API_VERSION: &str = "temporal.io/v1alpha1";

/// The image of a worker at `tag`, as the kubelet stand-in runs it.
pub fn worker_image(tag: &str) -> String {
    format!("registry.example/worker:{tag}")
}

/// A TemporalWorkerDeployment under construction; [`Twd::build`] gives the manifest.
///
/// Starts as the smallest valid one: a single `worker` container running
/// [`worker_image`]`("v1")`, polling through Connection `temporal` in Temporal namespace
/// `default`, with no `replicas`, `rollout` or `sunset` (the CRD defaults apply).
#[derive(Clone, Debug)]
#[must_use]
pub struct Twd {
    kinds: Kinds,
    metadata: Value,
    spec: Value,
    status: Option<Value>,
}

/// The two names the controller serves each kind under: the seed's (`TemporalWorkerDeployment`,
/// `TemporalConnection`, `TemporalWorkerOwnedResource`) and the Go controller's canonical ones
/// (`WorkerDeployment`, `Connection`, `WorkerResourceTemplate`). Every builder here writes the
/// seed's unless told the set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kinds {
    #[default]
    Seed,
    Canonical,
}

/// The three models of the controller's kinds, by (seed, canonical) name.
const MODELS: [(&str, &str); 3] = [
    ("TemporalWorkerDeployment", "WorkerDeployment"),
    ("TemporalConnection", "Connection"),
    ("TemporalWorkerOwnedResource", "WorkerResourceTemplate"),
];

impl Kinds {
    pub const ALL: [Kinds; 2] = [Kinds::Seed, Kinds::Canonical];

    fn pick(self, (seed, canonical): (&'static str, &'static str)) -> &'static str {
        match self {
            Kinds::Seed => seed,
            Kinds::Canonical => canonical,
        }
    }

    pub fn worker(self) -> &'static str {
        self.pick(MODELS[0])
    }

    pub fn connection(self) -> &'static str {
        self.pick(MODELS[1])
    }

    pub fn template(self) -> &'static str {
        self.pick(MODELS[2])
    }

    /// The set `kind` (one of the controller's kinds) belongs to.
    pub fn of(kind: &str) -> Option<Kinds> {
        MODELS.iter().find_map(|(seed, canonical)| {
            (kind == *seed)
                .then_some(Kinds::Seed)
                .or((kind == *canonical).then_some(Kinds::Canonical))
        })
    }

    /// This set's name of `kind`, any name of one of the controller's models; `None` for any
    /// other kind.
    pub fn name_of(self, kind: &str) -> Option<&'static str> {
        MODELS
            .iter()
            .find(|(seed, canonical)| kind == *seed || kind == *canonical)
            .map(|m| self.pick(*m))
    }
}

/// `manifest` as an object of kind set `kinds`: a kind of the controller renamed to the set's
/// name of its model (every engine must read both names of a model alike); any other kind
/// is left as it is.
pub fn in_kinds(mut manifest: Value, kinds: Kinds) -> Value {
    if let Some(kind) = manifest["kind"].as_str().and_then(|k| kinds.name_of(k)) {
        manifest["kind"] = json!(kind);
    }
    manifest
}

/// A Connection manifest (of either kind set) as the cluster-scoped `ClusterConnection` with the
/// same spec and status: a third kind of the Connection model (Go v1.10), outside the two kind
/// sets, so it has no namespace.
pub fn as_cluster_connection(mut manifest: Value) -> Value {
    manifest["kind"] = json!("ClusterConnection");
    if let Some(meta) = manifest["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    manifest
}

/// A [`Twd`] named `name`.
pub fn twd(name: &str) -> Twd {
    Twd {
        kinds: Kinds::Seed,
        metadata: json!({"name": name}),
        spec: json!({
            "template": {"spec": {"containers": [
                {"name": "worker", "image": worker_image("v1")}
            ]}},
            "workerOptions": {"connectionRef": {"name": "temporal"}, "temporalNamespace": "default"},
        }),
        status: None,
    }
}

impl Twd {
    /// The kind set the manifest is of (`Kinds::Seed` unless set).
    pub fn kinds(mut self, kinds: Kinds) -> Twd {
        self.kinds = kinds;
        self
    }

    pub fn namespace(mut self, ns: &str) -> Twd {
        self.metadata["namespace"] = json!(ns);
        self
    }

    /// Merges `extra` into `metadata` (labels, annotations, generation, …).
    pub fn metadata(mut self, extra: Value) -> Twd {
        merge(&mut self.metadata, extra);
        self
    }

    pub fn replicas(mut self, replicas: i64) -> Twd {
        self.spec["replicas"] = json!(replicas);
        self
    }

    /// The worker container runs [`worker_image`]`(tag)`.
    pub fn tag(self, tag: &str) -> Twd {
        self.image(&worker_image(tag))
    }

    pub fn image(mut self, image: &str) -> Twd {
        self.spec["template"]["spec"]["containers"][0]["image"] = json!(image);
        self
    }

    /// The workers poll `queue` (the kubelet stand-in reads `TEMPORAL_TASK_QUEUE`).
    pub fn task_queue(mut self, queue: &str) -> Twd {
        self.spec["template"]["spec"]["containers"][0]["env"] =
            json!([{"name": "TEMPORAL_TASK_QUEUE", "value": queue}]);
        self
    }

    /// Replaces the pod template's only container.
    pub fn container(mut self, container: Value) -> Twd {
        self.spec["template"]["spec"]["containers"] = json!([container]);
        self
    }

    pub fn pod_labels(mut self, labels: Value) -> Twd {
        self.spec["template"]["metadata"]["labels"] = labels;
        self
    }

    pub fn rollout(mut self, rollout: Value) -> Twd {
        self.spec["rollout"] = rollout;
        self
    }

    pub fn sunset(mut self, scaledown_delay: &str, delete_delay: &str) -> Twd {
        self.spec["sunset"] =
            json!({"scaledownDelay": scaledown_delay, "deleteDelay": delete_delay});
        self
    }

    /// The workers connect through TemporalConnection `name`.
    pub fn connection(mut self, name: &str) -> Twd {
        self.spec["workerOptions"]["connectionRef"]["name"] = json!(name);
        self
    }

    pub fn temporal_namespace(mut self, ns: &str) -> Twd {
        self.spec["workerOptions"]["temporalNamespace"] = json!(ns);
        self
    }

    /// Merges `extra` into `spec`: objects key by key, anything else replaced.
    pub fn spec(mut self, extra: Value) -> Twd {
        merge(&mut self.spec, extra);
        self
    }

    pub fn status(mut self, status: Value) -> Twd {
        self.status = Some(status);
        self
    }

    pub fn build(self) -> Value {
        let mut twd = json!({
            "apiVersion": API_VERSION,
            "kind": self.kinds.worker(),
            "metadata": self.metadata,
            "spec": self.spec,
        });
        if let Some(status) = self.status {
            twd["status"] = status;
        }
        twd
    }
}

/// A TemporalConnection `name` to the Temporal frontend at `host_port`, without TLS.
pub fn connection(name: &str, host_port: &str) -> Value {
    connection_in(Kinds::Seed, name, host_port)
}

/// [`connection`] of kind set `kinds` (`Connection` for the canonical set).
pub fn connection_in(kinds: Kinds, name: &str, host_port: &str) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": kinds.connection(),
        "metadata": {"name": name},
        "spec": {"hostPort": host_port},
    })
}

/// A TemporalWorkerOwnedResource `name` attaching `object` to every version of TWD `worker`.
pub fn owned_resource(name: &str, worker: &str, object: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "TemporalWorkerOwnedResource",
        "metadata": {"name": name},
        "spec": {"workerRef": {"name": worker}, "object": object},
    })
}

/// Sets `metadata.namespace` of `manifest`.
pub fn in_namespace(mut manifest: Value, ns: &str) -> Value {
    manifest["metadata"]["namespace"] = json!(ns);
    manifest
}

/// Merges `patch` into `base`: objects key by key (recursively), anything else replaced.
pub fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_write_the_kind_set_asked_for_and_renaming_keeps_other_kinds() {
        let wd = twd("orders").kinds(Kinds::Canonical).build();
        assert_eq!(wd["kind"], "WorkerDeployment");
        assert_eq!(
            connection_in(Kinds::Canonical, "t", "h:1")["kind"],
            "Connection"
        );
        assert_eq!(connection("t", "h:1")["kind"], "TemporalConnection");
        let seed = in_kinds(wd, Kinds::Seed);
        assert_eq!(seed["kind"], "TemporalWorkerDeployment");
        assert_eq!(seed["metadata"]["name"], "orders");
        let hpa = json!({"kind": "HorizontalPodAutoscaler"});
        assert_eq!(in_kinds(hpa.clone(), Kinds::Canonical), hpa);
        assert_eq!(Kinds::of("WorkerResourceTemplate"), Some(Kinds::Canonical));
        assert_eq!(Kinds::of("TemporalConnection"), Some(Kinds::Seed));
        assert_eq!(Kinds::of("Deployment"), None);
    }

    #[test]
    fn a_twd_has_the_fields_asked_for_and_nothing_else() {
        let twd = twd("orders")
            .namespace("shop")
            .replicas(2)
            .tag("v2")
            .task_queue("q")
            .rollout(json!({"strategy": "AllAtOnce"}))
            .spec(json!({"workerOptions": {"temporalNamespace": "orders"}}))
            .build();
        assert_eq!(
            twd,
            json!({
                "apiVersion": "temporal.io/v1alpha1",
                "kind": "TemporalWorkerDeployment",
                "metadata": {"name": "orders", "namespace": "shop"},
                "spec": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{
                        "name": "worker",
                        "image": "registry.example/worker:v2",
                        "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": "q"}],
                    }]}},
                    "rollout": {"strategy": "AllAtOnce"},
                    "workerOptions": {"connectionRef": {"name": "temporal"}, "temporalNamespace": "orders"},
                },
            })
        );
    }

    #[test]
    fn merge_replaces_non_objects_and_keeps_other_keys() {
        let mut base = json!({"a": {"b": 1, "c": [1]}, "d": 1});
        merge(&mut base, json!({"a": {"c": [2]}, "e": null}));
        assert_eq!(base, json!({"a": {"b": 1, "c": [2]}, "d": 1, "e": null}));
    }
}
