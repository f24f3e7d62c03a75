//! Finalizer cleanup: everything a deployment has in Temporal removed.

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DeleteWorkerDeploymentRequest, DeleteWorkerDeploymentVersionRequest,
};

use super::{TemporalClient, legacy_version, version};
use crate::temporal::error::TemporalError;

/// How a [`TemporalClient::delete_version`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionDeletion {
    Deleted,
    /// Someone (or an earlier pass) deleted it already.
    AlreadyGone,
    /// Temporal still remembers pollers for it: try again later.
    HasPollers,
}

impl TemporalClient {
    /// Deletes one version's record (its Kubernetes Deployment is gone), waiting for drainage:
    /// Temporal refuses a version that is not drained or still has pollers.
    pub async fn delete_version(
        &self,
        deployment: &str,
        build_id: &str,
    ) -> Result<VersionDeletion, TemporalError> {
        match self
            .delete_version_record(deployment, build_id, false)
            .await
        {
            Ok(()) => Ok(VersionDeletion::Deleted),
            Err(e) if e.is_not_found() => Ok(VersionDeletion::AlreadyGone),
            Err(e) if e.has_active_pollers() => Ok(VersionDeletion::HasPollers),
            Err(e) => Err(e),
        }
    }

    /// One `DeleteWorkerDeploymentVersion`, waiting for drainage unless `skip_drainage`.
    async fn delete_version_record(
        &self,
        deployment: &str,
        build_id: &str,
        skip_drainage: bool,
    ) -> Result<(), TemporalError> {
        #[allow(deprecated)]
        let req = DeleteWorkerDeploymentVersionRequest {
            namespace: self.namespace.clone(),
            version: legacy_version(deployment, build_id),
            deployment_version: version(deployment, build_id),
            skip_drainage,
            identity: self.identity.clone(),
        };
        self.write(
            Some(deployment),
            "DeleteWorkerDeploymentVersion",
            |mut c| async move { c.delete_worker_deployment_version(Request::new(req)).await },
        )
        .await
        .map(|_| ())
    }

    /// Removes everything the deployment has in Temporal (finalizer cleanup): clear the ramp,
    /// hand new workflows back to unversioned workers, delete every version without waiting
    /// for drainage, then the deployment. Idempotent: NotFound at any step counts as done.
    ///
    /// Temporal refuses to delete a version while it remembers pollers for it
    /// ([`TemporalError::has_active_pollers`]): the version's workers must be stopped first,
    /// and stopped pollers are remembered for `matching.PollerHistoryTTL` (5 min by default).
    pub async fn cleanup_deployment(&self, deployment: &str) -> Result<(), TemporalError> {
        let state = self.describe_deployment(deployment).await?;
        if !state.exists {
            return Ok(());
        }
        // NotFound here means someone else already removed the deployment or version.
        let ok_if_gone = |r: Result<Vec<u8>, TemporalError>, previous: &[u8]| match r {
            Ok(t) => Ok(t),
            Err(e) if e.is_not_found() => Ok(previous.to_vec()),
            Err(e) => Err(e),
        };
        let mut token = state.conflict_token.clone();
        if state.routing.ramping_build_id.is_some() {
            token = ok_if_gone(
                self.set_ramping_inner(deployment, "", 0.0, &token).await,
                &token,
            )?;
        }
        if state.routing.current_build_id.is_some() {
            // Unversioned: the server must not insist that every queue of a version be polled.
            ok_if_gone(
                self.set_current_inner(deployment, "", &token, true).await,
                &token,
            )?;
        }
        // Try every version even if one is refused (typically: pollers still remembered), so
        // each retry has less left to do; the deployment itself can only go once all are gone.
        let mut refused = None;
        for v in &state.versions {
            match self
                .delete_version_record(deployment, &v.build_id, true)
                .await
            {
                Err(e) if e.has_active_pollers() => {
                    refused.get_or_insert(e);
                }
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
        if let Some(e) = refused {
            return Err(e);
        }
        let req = DeleteWorkerDeploymentRequest {
            namespace: self.namespace.clone(),
            deployment_name: deployment.to_string(),
            identity: self.identity.clone(),
        };
        match self
            .write(
                Some(deployment),
                "DeleteWorkerDeployment",
                |mut c| async move { c.delete_worker_deployment(Request::new(req)).await },
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}
