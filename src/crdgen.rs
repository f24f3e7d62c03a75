//! CRD YAML generation (`temporal-worker-controller crds`). The checked-in `crds/*.yaml` must
//! equal this output; a test fails when they drift.

use kube::CustomResourceExt;

use crate::api::connection::TemporalConnectionCrd;
use crate::api::kinds::{KindSet, Model, crd_for};
use crate::api::twd::TemporalWorkerDeploymentCrd;
use crate::api::twor::TemporalWorkerOwnedResourceCrd;

/// `(file name, YAML)` for every CRD we serve (both kind sets), in a stable order.
pub fn files() -> Vec<(String, String)> {
    let seeds = [
        (Model::Worker, TemporalWorkerDeploymentCrd::crd()),
        (Model::Connection, TemporalConnectionCrd::crd()),
        (Model::Template, TemporalWorkerOwnedResourceCrd::crd()),
    ];
    let crds: Vec<_> = KindSet::ALL
        .into_iter()
        .flat_map(|set| {
            seeds
                .iter()
                .map(move |(model, seed)| crd_for(seed, set, *model))
        })
        .collect();
    crds.into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            // serde_yaml on a generated CRD cannot fail; fall back to an empty doc defensively.
            let yaml = serde_yaml::to_string(&crd).unwrap_or_default();
            (format!("{name}.yaml"), yaml)
        })
        .collect()
}

/// All CRDs as one multi-document YAML stream.
pub fn all_yaml() -> String {
    files()
        .into_iter()
        .map(|(_, y)| format!("---\n{y}"))
        .collect()
}
