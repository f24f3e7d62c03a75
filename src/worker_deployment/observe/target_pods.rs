//! Why the target's Pods are not Ready, as Kubernetes reports it: the cause a progress-deadline
//! message names (`planner::deadline`). Pods are not watched: one label-selected list of the
//! target's Pods, only while the target waits for them (`deadline::wants_pods`), so a rollout
//! at rest reads none.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::api::{LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment};
use crate::planner::deadline;
use crate::planner::model::{PlanInput, PodCause, PodTrouble};

/// Lists the target's Pods when the planner wants them and records the first trouble found.
pub async fn observe(client: &kube::Client, twd: &TemporalWorkerDeployment, input: &mut PlanInput) {
    if !deadline::wants_pods(input) {
        return;
    }
    let ns = twd.namespace().unwrap_or_default();
    let selector = format!(
        "{LABEL_DEPLOYMENT_NAME}={},{LABEL_BUILD_ID}={}",
        crate::render::label_value(&twd.name_any()),
        input.desired.build_id
    );
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => input.target_pods = trouble(&list.items),
        // Only logged: without the Pods the message names no Pod-level cause this time; the
        // deadline itself does not depend on them.
        Err(e) => tracing::warn!(error = %e, "listing the target's Pods failed"),
    }
}

/// The first trouble of the Pods (by name, so the message does not flip between Pods).
pub fn trouble(pods: &[Pod]) -> Option<PodTrouble> {
    let mut pods: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    // The most certain causes first: a Pod that cannot be scheduled or pulled never starts.
    for pick in [unschedulable, image_pull, crash_loop, waiting] {
        if let Some(t) = pods.iter().find_map(|p| {
            pick(p).map(|cause| PodTrouble {
                pod: p.name_any(),
                cause,
            })
        }) {
            return Some(t);
        }
    }
    None
}

fn statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

fn unschedulable(pod: &Pod) -> Option<PodCause> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
    Some(PodCause::Unschedulable {
        reason: c.reason.clone().unwrap_or_else(|| "Unschedulable".into()),
        message: c.message.clone().unwrap_or_default(),
    })
}

const PULL_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

fn image_pull(pod: &Pod) -> Option<PodCause> {
    statuses(pod).iter().find_map(|s| {
        let w = s.state.as_ref()?.waiting.as_ref()?;
        let reason = w.reason.as_deref()?;
        PULL_REASONS.contains(&reason).then(|| PodCause::ImagePull {
            container: s.name.clone(),
            image: s.image.clone(),
            reason: reason.to_string(),
            message: w.message.clone().unwrap_or_default(),
        })
    })
}

fn crash_loop(pod: &Pod) -> Option<PodCause> {
    statuses(pod).iter().find_map(|s| {
        let waiting = s
            .state
            .as_ref()
            .and_then(|st| st.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        let looping = waiting == Some("CrashLoopBackOff") || (s.restart_count > 0 && !s.ready);
        if !looping {
            return None;
        }
        let last = s.last_state.as_ref().and_then(|l| l.terminated.as_ref());
        Some(PodCause::CrashLoop {
            container: s.name.clone(),
            restarts: s.restart_count,
            exit_code: last.map(|t| t.exit_code),
            reason: last.and_then(|t| t.reason.clone()),
            message: last.and_then(|t| t.message.clone()),
        })
    })
}

fn waiting(pod: &Pod) -> Option<PodCause> {
    statuses(pod).iter().find_map(|s| {
        let w = s.state.as_ref()?.waiting.as_ref()?;
        let reason = w.reason.as_deref()?;
        // Starting up is not trouble.
        (reason != "ContainerCreating" && reason != "PodInitializing").then(|| PodCause::Waiting {
            container: s.name.clone(),
            reason: reason.to_string(),
            message: w.message.clone().unwrap_or_default(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "worker", "image": "w:1"}]},
            "status": status,
        }))
        .unwrap()
    }

    fn container(
        state: serde_json::Value,
        restarts: i32,
        last: serde_json::Value,
    ) -> serde_json::Value {
        json!({"containerStatuses": [{
            "name": "worker", "image": "registry.invalid/w:1", "imageID": "", "ready": false,
            "restartCount": restarts, "state": state, "lastState": last,
        }]})
    }

    #[test]
    fn an_image_pull_failure_names_image_reason_and_pod() {
        let p = pod(
            "w-1",
            container(
                json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}),
                0,
                json!({}),
            ),
        );
        let t = trouble(&[p]).unwrap();
        assert_eq!(t.pod, "w-1");
        let words = deadline::pod_words(&t);
        assert!(words.contains("registry.invalid/w:1"), "{words}");
        assert!(words.contains("ImagePullBackOff"), "{words}");
        assert!(words.contains("Pod w-1"), "{words}");
    }

    #[test]
    fn a_crash_loop_names_restarts_and_last_exit() {
        let p = pod(
            "w-2",
            container(
                json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                4,
                json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "no such namespace"}}),
            ),
        );
        let words = deadline::pod_words(&trouble(&[p]).unwrap());
        assert!(words.contains("4 restarts"), "{words}");
        assert!(words.contains("exit code 1 (Error)"), "{words}");
        assert!(words.contains("no such namespace"), "{words}");
    }

    #[test]
    fn an_unschedulable_pod_wins_and_pods_are_read_in_name_order() {
        let pulling = pod(
            "a",
            container(json!({"waiting": {"reason": "ErrImagePull"}}), 0, json!({})),
        );
        let pending = pod(
            "b",
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}]}),
        );
        let t = trouble(&[pulling.clone(), pending]).unwrap();
        assert_eq!(t.pod, "b");
        assert!(matches!(t.cause, PodCause::Unschedulable { .. }));
        assert!(deadline::pod_words(&t).contains("node affinity/selector"));
        // Starting up is no trouble; a healthy Pod none either.
        let creating = pod(
            "c",
            container(
                json!({"waiting": {"reason": "ContainerCreating"}}),
                0,
                json!({}),
            ),
        );
        assert_eq!(trouble(&[creating]), None);
        assert_eq!(trouble(&[]), None);
        assert_eq!(trouble(&[pulling]).unwrap().pod, "a");
    }
}
