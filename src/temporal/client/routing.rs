//! Routing writes: current and ramping version, the manager identity, and the version metadata
//! recording which controller routed.

use std::collections::HashMap;

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::common::v1::Payload;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    SetWorkerDeploymentCurrentVersionRequest, SetWorkerDeploymentManagerRequest,
    SetWorkerDeploymentRampingVersionRequest, UpdateWorkerDeploymentVersionMetadataRequest,
    set_worker_deployment_manager_request,
};

use super::{
    METADATA_CONTROLLER, METADATA_CONTROLLER_VERSION, METADATA_INSTALL_ID, TemporalClient,
    json_payload, legacy_version, version,
};
use crate::temporal::error::TemporalError;

/// The version metadata a routing write records; no install entry while the install is
/// unknown.
fn metadata_entries(
    identity: &str,
    controller_version: &str,
    install_id: &str,
) -> HashMap<String, Payload> {
    let mut entries = HashMap::from([
        (
            METADATA_CONTROLLER.to_string(),
            json_payload(&serde_json::Value::from(identity)),
        ),
        (
            METADATA_CONTROLLER_VERSION.to_string(),
            json_payload(&serde_json::Value::from(controller_version)),
        ),
    ]);
    if !install_id.is_empty() {
        entries.insert(
            METADATA_INSTALL_ID.to_string(),
            json_payload(&serde_json::Value::from(install_id)),
        );
    }
    entries
}

impl TemporalClient {
    pub(super) async fn set_current_inner(
        &self,
        deployment: &str,
        build_id: &str,
        token: &[u8],
        ignore_missing_task_queues: bool,
    ) -> Result<Vec<u8>, TemporalError> {
        #[allow(deprecated)]
        let req = SetWorkerDeploymentCurrentVersionRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            version: legacy_version(deployment, build_id),
            build_id: build_id.to_string(),
            conflict_token: token.to_vec(),
            identity: self.identity.clone(),
            ignore_missing_task_queues,
            // Liveness is judged from pod readiness; a build that never polled must stay refused.
            allow_no_pollers: false,
        };
        let resp = self
            .write(
                Some(deployment),
                "SetWorkerDeploymentCurrentVersion",
                |mut c| async move {
                    c.set_worker_deployment_current_version(Request::new(req))
                        .await
                },
            )
            .await?;
        Ok(resp.conflict_token)
    }

    /// Makes `build_id` current (this also ends any ramp). Returns the new conflict token, which
    /// is what a following Describe would return, so calls can be chained without re-reading.
    pub async fn set_current(
        &self,
        deployment: &str,
        build_id: &str,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: "SetWorkerDeploymentCurrentVersion",
                message: "empty build ID (unversioned is only set during cleanup)".into(),
            });
        }
        self.set_current_inner(deployment, build_id, token, false)
            .await
    }

    pub(super) async fn set_ramping_inner(
        &self,
        deployment: &str,
        build_id: &str,
        percentage: f32,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        #[allow(deprecated)]
        let req = SetWorkerDeploymentRampingVersionRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            version: if build_id.is_empty() {
                String::new()
            } else {
                legacy_version(deployment, build_id)
            },
            build_id: build_id.to_string(),
            percentage,
            conflict_token: token.to_vec(),
            identity: self.identity.clone(),
            ignore_missing_task_queues: false,
            allow_no_pollers: false,
        };
        let resp = self
            .write(
                Some(deployment),
                "SetWorkerDeploymentRampingVersion",
                |mut c| async move {
                    c.set_worker_deployment_ramping_version(Request::new(req))
                        .await
                },
            )
            .await?;
        Ok(resp.conflict_token)
    }

    /// Ramps `percentage` (0–100) of new workflows to `build_id`.
    pub async fn set_ramping(
        &self,
        deployment: &str,
        build_id: &str,
        percentage: f32,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        const METHOD: &str = "SetWorkerDeploymentRampingVersion";
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: "empty build ID (use clear_ramp)".into(),
            });
        }
        if !(0.0..=100.0).contains(&percentage) {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: format!("percentage {percentage} is outside 0–100"),
            });
        }
        self.set_ramping_inner(deployment, build_id, percentage, token)
            .await
    }

    /// Removes the ramping version (empty build ID, 0 %).
    pub async fn clear_ramp(
        &self,
        deployment: &str,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        self.set_ramping_inner(deployment, "", 0.0, token).await
    }

    /// Makes this client's identity the deployment's manager identity (the only one allowed to
    /// change routing). Returns the new conflict token.
    pub async fn claim_manager(
        &self,
        deployment: &str,
        token: &[u8],
    ) -> Result<Vec<u8>, TemporalError> {
        let req = SetWorkerDeploymentManagerRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            conflict_token: token.to_vec(),
            identity: self.identity.clone(),
            new_manager_identity: Some(
                set_worker_deployment_manager_request::NewManagerIdentity::Self_(true),
            ),
        };
        let resp = self
            .write(
                Some(deployment),
                "SetWorkerDeploymentManager",
                |mut c| async move { c.set_worker_deployment_manager(Request::new(req)).await },
            )
            .await?;
        Ok(resp.conflict_token)
    }

    /// Records on the version which controller (identity, release and install) last routed
    /// to it.
    pub async fn update_version_metadata(
        &self,
        deployment: &str,
        build_id: &str,
        controller_version: &str,
    ) -> Result<(), TemporalError> {
        const METHOD: &str = "UpdateWorkerDeploymentVersionMetadata";
        if build_id.is_empty() {
            return Err(TemporalError::InvalidRequest {
                method: METHOD,
                message: "empty build ID".into(),
            });
        }
        #[allow(deprecated)]
        let req = UpdateWorkerDeploymentVersionMetadataRequest {
            namespace: self.namespace.clone(),
            version: legacy_version(deployment, build_id),
            deployment_version: version(deployment, build_id),
            upsert_entries: metadata_entries(&self.identity, controller_version, &self.install_id),
            remove_entries: Vec::new(),
            identity: self.identity.clone(),
        };
        self.write(Some(deployment), METHOD, |mut c| async move {
            c.update_worker_deployment_version_metadata(Request::new(req))
                .await
        })
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_writes_record_the_install_once_known() {
        let known = metadata_entries("ctrl", "1.2.3", "install-a");
        assert_eq!(
            known.get(METADATA_INSTALL_ID).map(|p| p.data.as_slice()),
            Some(&b"\"install-a\""[..])
        );
        assert!(known.contains_key(METADATA_CONTROLLER));
        assert!(!metadata_entries("ctrl", "1.2.3", "").contains_key(METADATA_INSTALL_ID));
    }
}
