//! CRD YAML generation (`temporal-worker-controller crds`), the single source of every CRD file
//! in the repository: `crds/*.yaml` (for `kubectl apply --server-side`) and the templates of the
//! CRD chart `charts/temporal-worker-controller-crds/` (for `helm install`/`upgrade`). Every
//! checked-in copy must equal this output; `tests/crds.rs` fails when one drifts and rewrites
//! them all with `UPDATE_CRDS=1`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::api::connection::{TemporalConnectionCrd, cluster_connection_crd};
use crate::api::kinds::{KindSet, Model, crd_for};
use crate::api::twd::TemporalWorkerDeploymentCrd;
use crate::api::twor::TemporalWorkerOwnedResourceCrd;

/// The directory of the plain CRD files, relative to the repository root.
pub const CRDS_DIR: &str = "crds";
/// The CRD chart's template directory, relative to the repository root.
pub const CHART_TEMPLATES_DIR: &str = "charts/temporal-worker-controller-crds/templates";

/// Keeps a CRD (and so every custom resource of its kind) when its Helm release is uninstalled:
/// Helm reads this from the release's stored manifest, so it must be in the template itself.
const KEEP: (&str, &str) = ("helm.sh/resource-policy", "keep");

fn all_crds() -> Vec<CustomResourceDefinition> {
    let seeds = [
        (Model::Worker, TemporalWorkerDeploymentCrd::crd()),
        (Model::Connection, TemporalConnectionCrd::crd()),
        (Model::Template, TemporalWorkerOwnedResourceCrd::crd()),
    ];
    let mut crds: Vec<CustomResourceDefinition> = KindSet::ALL
        .into_iter()
        .flat_map(|set| {
            seeds
                .iter()
                .map(move |(model, seed)| crd_for(seed, set, *model))
        })
        .collect();
    let connection = crd_for(
        &TemporalConnectionCrd::crd(),
        KindSet::Canonical,
        Model::Connection,
    );
    crds.push(cluster_connection_crd(&connection));
    crds
}

fn file_of(crd: &CustomResourceDefinition) -> (String, String) {
    let name = crd.metadata.name.clone().unwrap_or_default();
    // serde_yaml on a generated CRD cannot fail; fall back to an empty doc defensively.
    let yaml = serde_yaml::to_string(crd).unwrap_or_default();
    (format!("{name}.yaml"), yaml)
}

/// `(file name, YAML)` for every CRD we serve (both kind sets), in a stable order: the files
/// of `crds/`.
pub fn files() -> Vec<(String, String)> {
    all_crds().iter().map(file_of).collect()
}

/// `(path relative to the repository root, content)` of every generated CRD file: `crds/` and
/// the CRD chart's templates (the same CRDs plus the `keep` resource policy). Helm renders the
/// templates with Go templates, so a generated CRD must never contain `{{`; `tests/crds.rs`
/// checks that.
pub fn outputs() -> Vec<(String, String)> {
    let crds = all_crds();
    let plain = crds
        .iter()
        .map(file_of)
        .map(|(f, y)| (format!("{CRDS_DIR}/{f}"), y));
    let charted = crds.iter().map(|crd| {
        let mut crd = crd.clone();
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(KEEP.0.to_string(), KEEP.1.to_string());
        let (f, y) = file_of(&crd);
        (format!("{CHART_TEMPLATES_DIR}/{f}"), y)
    });
    plain.chain(charted).collect()
}

/// All CRDs as one multi-document YAML stream.
pub fn all_yaml() -> String {
    files()
        .into_iter()
        .map(|(_, y)| format!("---\n{y}"))
        .collect()
}
