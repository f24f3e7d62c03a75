//! The Deployment `spec.adopt` names (`crate::planner::adoption`): read it, the HPAs that
//! target it, and, when the planner needs it ([`adoption::count_due`]), count the running
//! workflows still unversioned on the Current version's workflow task queues. Read-only.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::api::{LABEL_BUILD_ID, TemporalWorkerDeployment};
use crate::caches::Caches;
use crate::planner::adoption::{self, Observed, PlainDeployment};
use crate::planner::model::PlanInput;
use crate::temporal::TemporalClient;

/// Fills `input.adopted` when `spec.adopt` is set. A Deployment that cannot be read is
/// reported as such (nothing is decided about workers the controller cannot see); a failed
/// HPA list or count is only logged: the count stays unknown, which never scales anything down.
pub async fn observe(
    kube: &kube::Client,
    caches: Option<&Caches>,
    temporal: &TemporalClient,
    twd: &TemporalWorkerDeployment,
    input: &mut PlanInput,
) {
    let Some(adopt) = input.desired.adopt.clone() else {
        return;
    };
    let ns = twd.namespace().unwrap_or_default();
    let mut observed = Observed {
        recorded: twd
            .status
            .as_ref()
            .and_then(|s| s.adoption.as_ref())
            .map(|a| a.phase),
        ..Default::default()
    };
    let api: Api<Deployment> = Api::namespaced(kube.clone(), &ns);
    match api.get_opt(&adopt.deployment_name).await {
        Ok(Some(d)) => {
            let hpas = autoscalers(kube, caches, &ns, &adopt.deployment_name).await;
            observed.deployment = Some(plain(&d, hpas));
        }
        Ok(None) => {}
        Err(e) => observed.unreadable = Some(e.to_string()),
    }
    input.adopted = Some(observed);
    if adoption::count_due(crate::planner::adoption_facts(input)) {
        count(temporal, &twd.temporal_deployment_name(), input).await;
    }
}

fn plain(d: &Deployment, autoscalers: Vec<String>) -> PlainDeployment {
    PlainDeployment {
        replicas: d.spec.replicas,
        status_replicas: d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0),
        ours: d.labels().contains_key(LABEL_BUILD_ID),
        deleting: d.metadata.deletion_timestamp.is_some(),
        autoscalers,
    }
}

/// The HPAs whose target is the Deployment (empty when they cannot be listed: only the
/// status message names them).
async fn autoscalers(
    kube: &kube::Client,
    caches: Option<&Caches>,
    ns: &str,
    name: &str,
) -> Vec<String> {
    let hpas = match caches {
        Some(c) => c.autoscalers_in(ns),
        None => match Api::<HorizontalPodAutoscaler>::namespaced(kube.clone(), ns)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(error = %e, "listing HorizontalPodAutoscalers for the adopted Deployment");
                Vec::new()
            }
        },
    };
    hpas.iter()
        .filter(|h| super::autoscalers::deployment_target(h).as_deref() == Some(name))
        .map(|h| h.name_any())
        .collect()
}

/// The Current version's workflow task queues, and the running workflows on them still
/// unversioned. Any failure leaves the count unknown.
async fn count(client: &TemporalClient, deployment: &str, input: &mut PlanInput) {
    let Some(current) = input.temporal.routing.current_build_id.clone() else {
        return;
    };
    let queues = match client.describe_version(deployment, &current).await {
        Ok(Some(detail)) => detail.workflow_task_queues,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(build_id = %current, error = %e, "reading the Current version's task queues for the adoption");
            return;
        }
    };
    let counted = client.count_open_unversioned(&queues).await;
    let Some(observed) = input.adopted.as_mut() else {
        return;
    };
    match counted {
        Ok(n) => observed.open_unversioned = Some(n),
        Err(e) => {
            tracing::warn!(error = %e, "counting unversioned workflows for the adoption; Deployment kept");
        }
    }
    observed.queues = queues;
}
