//! Every label set of our families, in one place so the vocabulary reads at a glance:
//! `controller`, `outcome`, `reason`, `build_id` (or `target_build_id` / `current_build_id`
//! when a family needs two), `namespace` and `name` of the object. The `metrics` module doc
//! states the rules.

use prometheus_client::encoding::EncodeLabelSet;

// Operational label sets (static strings: bounded sets chosen in code).

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReconcileLabels {
    pub controller: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReconcileErrorLabels {
    pub controller: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RpcLabels {
    pub method: &'static str,
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct MethodLabels {
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct KubeWriteLabels {
    pub verb: &'static str,
    pub resource: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ActionLabels {
    pub action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ClassLabels {
    pub class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct VersionLabels {
    pub version: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct KindLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct WebhookLabels {
    pub kind: &'static str,
    pub verdict: &'static str,
    pub code: &'static str,
}

// Scrape-time label sets (owned strings: they come from the store or the backlog poll).

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ObjLabels {
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct KindObjLabels {
    pub namespace: String,
    pub name: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct InfoLabels {
    pub namespace: String,
    pub name: String,
    pub kind: String,
    pub strategy: &'static str,
    pub phase: &'static str,
    pub reason: String,
    pub target_build_id: String,
    pub current_build_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ObjBuildLabels {
    pub namespace: String,
    pub name: String,
    pub build_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ObjStatusLabels {
    pub namespace: String,
    pub name: String,
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ObjStateLabels {
    pub namespace: String,
    pub name: String,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PhaseLabels {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct QueueLabels {
    pub namespace: String,
    pub name: String,
    pub build_id: String,
    pub task_queue: String,
    pub task_queue_type: &'static str,
    // The version labels a TemporalWorkerOwnedResource injects into an HPA's external-metric
    // selector (the owned-resource rules' `METRIC_LABEL_*`; tests/metrics.rs checks they agree),
    // so such an HPA selects its own version's series. Named as the Go controller names them
    // (an external contract), hence outside our own vocabulary.
    pub temporal_worker_deployment_name: String,
    pub temporal_worker_build_id: String,
    pub temporal_namespace: String,
}
