//! The Go controller's status shape, written beside ours so that its readers keep working:
//! a script, dashboard or health check written for the Go temporal-worker-controller reads the
//! same values from our status. Pure: the report stage calls [`fill`] on the status it
//! computed, with what only it knows (the object's namespace, the Deployments' UIDs).
//!
//! | Go field | Written as the Go controller writes it |
//! |---|---|
//! | `<version>.deployment` | a reference to the versioned Deployment (`apiVersion`, `kind`, `namespace`, `name`, `uid`) on the target, current and deprecated versions; ours is `deploymentName` |
//! | `targetVersion.taskQueues[].name` | the target's workflow task queues while it is not Current (the Go controller fills them only then) |
//! | `targetVersion.testWorkflows[]` | the gate workflows of `spec.rollout.gate`, the same list as our `gateWorkflows` |
//! | `versionConflictToken` | Temporal's conflict token, base64: the one read this reconcile, or the one our routing change returned |
//! | `observedConnectionRef` | the `connectionRef` this status was computed with |
//! | `managedBy` | accepted by the schema, never written (nor by the Go controller) |

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::api::twd::{
    ConnectionRef, DeploymentReference, TaskQueueName, TemporalWorkerDeploymentStatus, VersionInfo,
    VersionStatus,
};

/// What [`fill`] needs from the reconcile.
pub struct GoFacts<'a> {
    /// The worker deployment's namespace (the versioned Deployments live there).
    pub namespace: &'a str,
    /// Versioned Deployment name → UID, as the cache knows them.
    pub uids: &'a BTreeMap<String, String>,
    /// Temporal's conflict token (after this reconcile's routing change, if any).
    pub conflict_token: &'a [u8],
    /// The target's workflow task queues, as observed.
    pub target_task_queues: &'a [String],
    pub connection_ref: &'a ConnectionRef,
}

/// Adds the Go-shaped fields to a status computed from a plan.
pub fn fill(status: &mut TemporalWorkerDeploymentStatus, facts: &GoFacts<'_>) {
    if let Some(target) = &mut status.target_version {
        reference(&mut target.version, facts);
        target.version.task_queues = if target.version.status == VersionStatus::Current {
            Vec::new()
        } else {
            facts
                .target_task_queues
                .iter()
                .map(|name| TaskQueueName { name: name.clone() })
                .collect()
        };
        target.test_workflows = target.gate_workflows.clone();
    }
    if let Some(current) = &mut status.current_version {
        reference(current, facts);
    }
    for old in &mut status.deprecated_versions {
        reference(&mut old.version, facts);
    }
    status.version_conflict_token = (!facts.conflict_token.is_empty())
        .then(|| base64::engine::general_purpose::STANDARD.encode(facts.conflict_token));
    status.observed_connection_ref = Some(facts.connection_ref.clone());
}

fn reference(v: &mut VersionInfo, facts: &GoFacts<'_>) {
    v.deployment = v.deployment_name.as_ref().map(|name| DeploymentReference {
        api_version: Some("apps/v1".into()),
        kind: Some("Deployment".into()),
        namespace: Some(facts.namespace.to_string()),
        name: Some(name.clone()),
        uid: facts.uids.get(name).cloned(),
        ..Default::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{DeprecatedVersion, GateWorkflow, GateWorkflowStatus, TargetVersion};

    fn version(build: &str, status: VersionStatus, deployment: Option<&str>) -> VersionInfo {
        VersionInfo {
            build_id: build.into(),
            status,
            deployment_name: deployment.map(str::to_string),
            deployment: None,
            task_queues: Vec::new(),
            managed_by: None,
            healthy_since: None,
            replicas: None,
            ready_replicas: None,
        }
    }

    fn status(target: VersionStatus) -> TemporalWorkerDeploymentStatus {
        let gate = GateWorkflow {
            workflow_id: "gate-q1".into(),
            run_id: "r".into(),
            task_queue: "q1".into(),
            status: GateWorkflowStatus::Completed,
        };
        let value = serde_json::json!({});
        let mut s: TemporalWorkerDeploymentStatus = serde_json::from_value(value).expect("empty");
        s.target_version = Some(TargetVersion {
            version: version("v2", target, Some("orders-v2")),
            ramp_percentage: None,
            ramping_since: None,
            ramp_last_modified_at: None,
            current_step: None,
            step_started_at: None,
            next_step_at: None,
            gate_workflows: vec![gate],
            test_workflows: Vec::new(),
        });
        s.current_version = Some(version("v1", VersionStatus::Current, Some("orders-v1")));
        s.deprecated_versions = vec![DeprecatedVersion {
            version: version("v0", VersionStatus::Drained, None),
            ..serde_json::from_value(serde_json::json!({"buildID": "v0", "status": "Drained"}))
                .expect("deprecated")
        }];
        s
    }

    fn facts<'a>(uids: &'a BTreeMap<String, String>, r: &'a ConnectionRef) -> GoFacts<'a> {
        GoFacts {
            namespace: "shop",
            uids,
            conflict_token: &[1, 2, 3, 255],
            target_task_queues: &[],
            connection_ref: r,
        }
    }

    #[test]
    fn go_readers_find_every_field_where_the_go_controller_writes_it() {
        let uids = BTreeMap::from([("orders-v2".to_string(), "u-2".to_string())]);
        let r = ConnectionRef::named("prod");
        let queues = ["q1".to_string()];
        let mut s = status(VersionStatus::Ramping);
        fill(
            &mut s,
            &GoFacts {
                target_task_queues: &queues,
                ..facts(&uids, &r)
            },
        );
        let json = serde_json::to_value(&s).expect("json");
        let target = &json["targetVersion"];
        assert_eq!(target["deployment"]["name"], "orders-v2");
        assert_eq!(target["deployment"]["namespace"], "shop");
        assert_eq!(target["deployment"]["kind"], "Deployment");
        assert_eq!(target["deployment"]["apiVersion"], "apps/v1");
        assert_eq!(target["deployment"]["uid"], "u-2");
        assert_eq!(target["deploymentName"], "orders-v2");
        assert_eq!(target["taskQueues"], serde_json::json!([{"name": "q1"}]));
        assert_eq!(target["testWorkflows"][0]["workflowID"], "gate-q1");
        assert_eq!(target["testWorkflows"], target["gateWorkflows"]);
        assert_eq!(json["currentVersion"]["deployment"]["name"], "orders-v1");
        // No uid known: none written (never a made-up one).
        assert!(json["currentVersion"]["deployment"].get("uid").is_none());
        assert!(json["deprecatedVersions"][0].get("deployment").is_none());
        assert_eq!(json["versionConflictToken"], "AQID/w==");
        assert_eq!(
            json["observedConnectionRef"],
            serde_json::json!({"name": "prod"})
        );
        assert!(target.get("managedBy").is_none());
    }

    #[test]
    fn a_current_target_lists_no_task_queues_as_in_the_go_controller() {
        let uids = BTreeMap::new();
        let r = ConnectionRef::named("prod");
        let queues = ["q1".to_string()];
        let mut s = status(VersionStatus::Current);
        fill(
            &mut s,
            &GoFacts {
                target_task_queues: &queues,
                conflict_token: &[],
                ..facts(&uids, &r)
            },
        );
        let t = s.target_version.expect("target");
        assert!(t.version.task_queues.is_empty());
        assert_eq!(s.version_conflict_token, None);
    }
}
