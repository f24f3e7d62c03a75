//! Which versioned Deployments an autoscaler owns, so the planner never writes their
//! `spec.replicas` (part of observation, read-only). A version counts as autoscaled when an
//! HPA in the namespace targets its Deployment, or when a TemporalWorkerOwnedResource of the
//! worker copies an HPA or a KEDA ScaledObject to every version (even before the copy exists,
//! so the controller never races a copy about to be applied).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::api::{TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use crate::caches::Caches;
use crate::planner::model::ObservedDeployment;

/// Sets `autoscaled` on `deployments`. A list that fails is logged and, for this pass, makes
/// every version count as autoscaled (and its autoscaler as present): one failed read must not
/// stop the rollout, and must never let the planner write `spec.replicas` onto a Deployment an
/// autoscaler may own. The next reconcile looks again. Only logged, no condition: the rollout
/// itself is not blocked by it.
pub async fn mark(
    client: &kube::Client,
    caches: Option<&Caches>,
    twd: &TemporalWorkerDeployment,
    deployments: &mut [ObservedDeployment],
) {
    let ns = twd.namespace().unwrap_or_default();
    let (hpas, templates) = match caches {
        Some(c) => (
            Ok(c.autoscalers_in(&ns)),
            Ok(c.templates_in(twd.kind_set(), &ns)),
        ),
        None => list_both(client, twd, &ns).await,
    };
    let targets: Option<Vec<String>> = match hpas {
        Ok(list) => Some(list.iter().filter_map(deployment_target).collect()),
        Err(e) => {
            tracing::warn!(error = %e, "listing HorizontalPodAutoscalers; every version counts as autoscaled this pass");
            None
        }
    };
    let (every_version, copied) = match templates {
        Ok(list) => {
            let mine: Vec<&TemporalWorkerOwnedResource> = list
                .iter()
                .filter(|t| t.spec.worker_name() == twd.name_any() && t.spec.is_autoscaler())
                .collect();
            (!mine.is_empty(), copied_builds(&mine))
        }
        // Only logged, like the HPA list above.
        Err(e) => {
            tracing::warn!(error = %e, "listing TemporalWorkerOwnedResources");
            // Unknown: assume copies exist, so that sunset waits rather than fights.
            (
                false,
                deployments.iter().map(|d| d.build_id.clone()).collect(),
            )
        }
    };
    apply(deployments, targets.as_deref(), every_version, &copied);
}

type Listed<K> = Result<Vec<K>, kube::Error>;

/// The namespace's HPAs and the worker's kind set's templates, from the API server (no cache).
async fn list_both(
    client: &kube::Client,
    twd: &TemporalWorkerDeployment,
    ns: &str,
) -> (
    Listed<HorizontalPodAutoscaler>,
    Listed<TemporalWorkerOwnedResource>,
) {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), ns);
    let hpas = hpas.list(&ListParams::default()).await.map(|l| l.items);
    // Templates of the worker's own kind set name it.
    let twors = TemporalWorkerOwnedResource::api(client.clone(), ns, twd.kind_set());
    let twors = twors.list(&ListParams::default()).await.map(|l| l.items);
    (hpas, twors)
}

/// Build IDs that have an autoscaler copy in place, by the TWORs' own status.
fn copied_builds(twors: &[&TemporalWorkerOwnedResource]) -> Vec<String> {
    twors
        .iter()
        .filter_map(|t| t.status.as_ref())
        .flat_map(|s| &s.versions)
        .filter(|v| v.applied)
        .map(|v| v.build_id.clone())
        .collect()
}

/// The Deployment an HPA scales, if it scales a Deployment.
pub(super) fn deployment_target(hpa: &HorizontalPodAutoscaler) -> Option<String> {
    let target = &hpa.spec.scale_target_ref;
    (target.kind == "Deployment" && target.api_version.as_deref().is_none_or(|v| v == "apps/v1"))
        .then(|| target.name.clone())
}

/// `targets`: the Deployments HPAs scale, `None` when they could not be listed (then any
/// version may be an HPA's).
fn apply(
    deployments: &mut [ObservedDeployment],
    targets: Option<&[String]>,
    every_version: bool,
    copied: &[String],
) {
    for d in deployments {
        let hpa = targets.is_none_or(|t| t.contains(&d.name));
        d.autoscaled = every_version || hpa;
        d.autoscaler_present = hpa || copied.contains(&d.build_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hpa(kind: &str, api_version: &str, name: &str) -> HorizontalPodAutoscaler {
        serde_json::from_value(json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 3,
            "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": name}}}))
        .expect("hpa")
    }

    #[test]
    fn only_hpas_of_deployments_count_and_only_for_their_target() {
        assert_eq!(
            deployment_target(&hpa("Deployment", "apps/v1", "w-v1")),
            Some("w-v1".into())
        );
        assert_eq!(
            deployment_target(&hpa("StatefulSet", "apps/v1", "w-v1")),
            None
        );
        let mut ds = vec![
            ObservedDeployment::test("v1", 1),
            ObservedDeployment::test("v2", 1),
        ];
        apply(&mut ds, Some(&["w-v2".to_string()]), false, &[]);
        assert_eq!(
            ds.iter().map(|d| d.autoscaled).collect::<Vec<_>>(),
            [false, true]
        );
        assert_eq!(
            ds.iter().map(|d| d.autoscaler_present).collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn an_autoscaler_twor_of_the_worker_covers_every_version() {
        let mut ds = vec![
            ObservedDeployment::test("v1", 1),
            ObservedDeployment::test("v2", 1),
        ];
        apply(&mut ds, Some(&[]), true, &["v1".to_string()]);
        assert!(ds.iter().all(|d| d.autoscaled));
        // Only v1's copy is in place (v2's was removed for its sunset, or not applied yet).
        assert_eq!(
            ds.iter().map(|d| d.autoscaler_present).collect::<Vec<_>>(),
            [true, false]
        );
        apply(&mut ds, Some(&[]), false, &[]);
        assert!(
            ds.iter().all(|d| !d.autoscaled),
            "a gone autoscaler releases replicas"
        );
    }

    #[test]
    fn a_failed_hpa_list_makes_every_version_autoscaled_for_the_pass() {
        // Observed Deployments start unflagged; a failed list must not leave them so, or the
        // planner would write spec.replicas onto a Deployment an HPA owns.
        let mut ds = vec![
            ObservedDeployment::test("v1", 1),
            ObservedDeployment::test("v2", 1),
        ];
        apply(&mut ds, None, false, &[]);
        assert!(ds.iter().all(|d| d.autoscaled), "{ds:?}");
        assert!(ds.iter().all(|d| d.autoscaler_present), "sunset waits");
    }

    #[test]
    fn only_applied_copies_are_present() {
        let twor: TemporalWorkerOwnedResource = serde_json::from_value(json!({
            "apiVersion": "temporal.io/v1alpha1", "kind": "TemporalWorkerOwnedResource",
            "metadata": {"name": "hpa", "namespace": "shop"},
            "spec": {"workerRef": {"name": "orders"}, "object": {
                "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": {}}},
            "status": {"versions": [
                {"buildID": "v1", "resourceName": "a", "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "applied": true, "appliedHash": "h"},
                {"buildID": "v2", "resourceName": "b", "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "applied": false, "appliedHash": ""}
            ]}
        }))
        .expect("twor");
        assert_eq!(copied_builds(&[&twor]), ["v1"]);
    }
}
