//! Observe: the versioned Deployments a TWD controls, as the planner sees them.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};

use crate::api::{
    ANNOTATION_CONNECTION_HASH, ANNOTATION_CONNECTION_REF, ANNOTATION_POD_TEMPLATE_HASH,
    ANNOTATION_RESTART, LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment,
};
use crate::caches::Caches;
use crate::planner::model::ObservedDeployment;
use crate::planner::sunset::ANNOTATION_SCALED_DOWN_AT;
use crate::planner::takeover;

/// Versioned Deployments controlled by this TWD, oldest first: from the cache when there is
/// one, else listed. A shard's cache holds only Deployments labelled for it: one its status
/// names but the cache lacks (the worker deployment just moved here from another shard, whose
/// labels its Deployments still carry) sends the shard to the API server, so that it sees
/// every version, and relabels them, before it acts.
pub async fn owned_deployments(
    client: &kube::Client,
    caches: Option<&Caches>,
    twd: &TemporalWorkerDeployment,
) -> Result<Vec<ObservedDeployment>, kube::Error> {
    let ns = twd.namespace().unwrap_or_default();
    let label = crate::render::label_value(&twd.name_any());
    let cached = caches
        .map(|c| c.deployments_of(&ns, &label))
        .filter(|items| caches.is_none_or(|c| !c.sharded) || names_every_version(twd, items));
    let items = match cached {
        Some(items) => items,
        None => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
            let selector = format!("{LABEL_DEPLOYMENT_NAME}={label}");
            api.list(&ListParams::default().labels(&selector))
                .await?
                .items
        }
    };
    let uid = twd.uid();
    let mut out: Vec<ObservedDeployment> = items
        .iter()
        .filter(|d| {
            d.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
        })
        .filter_map(observed)
        .collect();
    out.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(out)
}

/// Whether `items` holds every Deployment `twd`'s status names.
fn names_every_version(twd: &TemporalWorkerDeployment, items: &[Deployment]) -> bool {
    let Some(status) = &twd.status else {
        return true;
    };
    let versions = status
        .target_version
        .iter()
        .map(|t| &t.version)
        .chain(status.current_version.iter())
        .chain(status.deprecated_versions.iter().map(|d| &d.version));
    versions
        .filter_map(|v| {
            v.deployment_name
                .as_ref()
                .or(v.deployment.as_ref().and_then(|d| d.name.as_ref()))
        })
        .all(|name| items.iter().any(|d| d.metadata.name.as_ref() == Some(name)))
}

use crate::api::ANNOTATION_REVISION;
/// The `Progressing` reason kube-controller-manager sets once a rollout has made no progress
/// for `spec.progressDeadlineSeconds`.
const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// Whether kube-controller-manager reports the Deployment past its own progress deadline, for
/// the spec it last saw: right after our update the condition still describes the previous
/// template until it catches up, so only a status of the current generation counts.
fn deadline_exceeded(d: &Deployment, status: &DeploymentStatus) -> bool {
    let current = match (d.meta().generation, status.observed_generation) {
        (Some(generation), Some(observed)) => observed >= generation,
        (_, None) => false,
        (None, Some(_)) => true,
    };
    current
        && condition(status, "Progressing", "False")
            .is_some_and(|c| c.reason.as_deref() == Some(PROGRESS_DEADLINE_EXCEEDED))
}

/// The Deployment's condition `type_` when its status is `value` (Kubernetes 1.37's API leaves
/// both fields optional).
fn condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
    value: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some(type_) && c.status.as_deref() == Some(value))
}

/// Converts a Deployment to the planner's view; `None` for Deployments without a build ID.
pub fn observed(d: &Deployment) -> Option<ObservedDeployment> {
    let build_id = d.labels().get(LABEL_BUILD_ID)?.clone();
    let status = d.status.clone().unwrap_or_default();
    let healthy_since = condition(&status, "Available", "True").map(|c| {
        c.last_transition_time
            .as_ref()
            .map(|t| t.0)
            .unwrap_or_else(Timestamp::now)
    });
    let progress_deadline_exceeded = deadline_exceeded(d, &status);
    let rolled_in_place = d
        .annotations()
        .get(ANNOTATION_REVISION)
        .and_then(|r| r.parse::<u64>().ok())
        .is_some_and(|r| r > 1);
    let pod_annotations = d
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let pod_template_hash = pod_annotations.get(ANNOTATION_POD_TEMPLATE_HASH).cloned();
    let connection_hash = pod_annotations.get(ANNOTATION_CONNECTION_HASH).cloned();
    let connection_ref = pod_annotations.get(ANNOTATION_CONNECTION_REF).cloned();
    let restarted = pod_annotations.get(ANNOTATION_RESTART).cloned();
    let [template_record, connection_record] =
        takeover_records(d, [&pod_template_hash, &connection_hash]);
    Some(ObservedDeployment {
        name: d.name_any(),
        build_id,
        replicas: d.spec.replicas,
        status_replicas: status.replicas.unwrap_or(0),
        ready_replicas: status.ready_replicas.unwrap_or(0),
        healthy_since,
        pod_template_hash,
        connection_hash,
        connection_ref,
        template_record,
        connection_record,
        rolled_in_place,
        progress_deadline_exceeded,
        deleting: d.meta().deletion_timestamp.is_some(),
        // Filled by `autoscalers::mark` after observation.
        autoscaled: false,
        autoscaler_present: false,
        created_at: d.meta().creation_timestamp.as_ref().map(|t| t.0),
        // Unreadable counts as absent: deletion then falls back to the deadline.
        scaled_down_at: d
            .annotations()
            .get(ANNOTATION_SCALED_DOWN_AT)
            .and_then(|t| t.parse::<Timestamp>().ok()),
        settings: d
            .annotations()
            .get(crate::render::settings::ANNOTATION_SETTINGS)
            .cloned(),
        restarted,
    })
}

/// The pod-template and Connection hashes a take-over record (a Deployment label) stands for,
/// beside those the pod template records.
fn takeover_records(
    d: &Deployment,
    [template, connection]: [&Option<String>; 2],
) -> [Option<String>; 2] {
    let labels = d.labels();
    let adopted = |label: &str| labels.get(label).map(String::as_str);
    [
        takeover::record_for(
            template.as_deref(),
            adopted(takeover::LABEL_ADOPTED_POD_TEMPLATE_HASH),
        ),
        takeover::record_for(
            connection.as_deref(),
            adopted(takeover::LABEL_ADOPTED_CONNECTION_HASH),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        ANNOTATION_CONNECTION_HASH, ANNOTATION_CONNECTION_REF, ANNOTATION_POD_TEMPLATE_HASH,
        LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME,
    };
    use crate::planner::sunset::ANNOTATION_SCALED_DOWN_AT;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// A shard that just took a worker deployment over has none of its Deployments cached
    /// (they carry the old shard's labels): the status names them, so it lists them.
    #[test]
    fn a_deployment_the_status_names_but_the_cache_lacks_sends_the_shard_to_the_api() {
        let named = |name: &str| -> Deployment {
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
        };
        let mut twd = TemporalWorkerDeployment::test();
        assert!(names_every_version(&twd, &[]), "no status names nothing");
        twd.status = Some(
            serde_json::from_value(json!({
                "currentVersion": {"buildID": "v1", "status": "Current", "deploymentName": "w-v1"},
                "targetVersion": {"buildID": "v2", "status": "Ramping",
                    "deployment": {"name": "w-v2"}},
                "deprecatedVersions": [{"buildID": "v0", "status": "Drained"}],
            }))
            .unwrap(),
        );
        assert!(!names_every_version(&twd, &[]));
        assert!(!names_every_version(&twd, &[named("w-v1")]));
        assert!(names_every_version(&twd, &[named("w-v1"), named("w-v2")]));
    }

    #[test]
    fn a_slim_deployment_keeps_what_observe_reads() {
        let mut d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "orders-v1", "namespace": "shop", "generation": 2,
                "labels": {LABEL_DEPLOYMENT_NAME: "orders", LABEL_BUILD_ID: "v1"},
                "annotations": {ANNOTATION_REVISION: "2", ANNOTATION_SCALED_DOWN_AT: "2026-01-01T00:00:00Z",
                    crate::render::settings::ANNOTATION_SETTINGS: "{\"labels\":{\"team\":\"a\"}}",
                    crate::caches::ANNOTATION_LAST_APPLIED: "{}"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}, "annotations": {
                    ANNOTATION_POD_TEMPLATE_HASH: "p", ANNOTATION_CONNECTION_HASH: "c",
                    ANNOTATION_CONNECTION_REF: "Connection/prod", ANNOTATION_RESTART: "v1/2", "x": "y"}},
                "spec": {"containers": [{"name": "worker"}]}}},
            "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability.",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "lastUpdateTime": "2026-01-01T00:00:00Z"}]}
        }))
        .expect("deployment");
        let before = observed(&d);
        assert_eq!(
            before.as_ref().and_then(|o| o.restarted.as_deref()),
            Some("v1/2")
        );
        crate::caches::slim_deployment(&mut d);
        assert_eq!(observed(&d), before);
        assert_eq!(
            d.annotations().len(),
            3,
            "only the annotations observe reads"
        );
        let template = d.spec.template.metadata.as_ref().expect("meta");
        assert!(template.labels.is_none());
        assert_eq!(template.annotations.as_ref().map(BTreeMap::len), Some(4));
        assert_eq!(
            before.as_ref().and_then(|o| o.connection_ref.as_deref()),
            Some("Connection/prod")
        );
        let c = &d
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .expect("conditions")[0];
        assert!(c.message.is_none() && c.last_transition_time.is_some());
    }
}
