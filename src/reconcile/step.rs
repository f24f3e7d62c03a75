//! The steps a reconcile can fail at, named in failure messages (`<step>: <cause>`): a write of
//! the act stage ([`WriteStep`]) or a step of the deletion path ([`CleanupStep`]). Enums rather
//! than text so that a message cannot name a step that does not exist.

/// A write (or the read right before it) of the act stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteStep {
    GetDeployment,
    RenderDeployment,
    CreateDeployment,
    UpdateDeployment,
    ScaleDeployment,
    RestartDeployment,
    DeleteDeployment,
    RecordTakeover,
    StartGate,
    StartStepGate,
    ClaimManager,
    EndPinnedWorkflows,
    ChangeRouting,
}

impl std::fmt::Display for WriteStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriteStep::GetDeployment => "get Deployment",
            WriteStep::RenderDeployment => "render",
            WriteStep::CreateDeployment => "create Deployment",
            WriteStep::UpdateDeployment => "update Deployment",
            WriteStep::ScaleDeployment => "scale Deployment",
            WriteStep::RestartDeployment => "restart Deployment",
            WriteStep::DeleteDeployment => "delete Deployment",
            WriteStep::RecordTakeover => "record take-over on Deployment",
            WriteStep::StartGate => "start gate workflow",
            WriteStep::StartStepGate => "start step gate workflow",
            WriteStep::ClaimManager => "claim manager identity",
            WriteStep::EndPinnedWorkflows => "end pinned workflows",
            WriteStep::ChangeRouting => "change routing",
        })
    }
}

/// A Kubernetes step of the deletion path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanupStep {
    ListDeployments,
    DeleteDeployments,
    ReadConnection,
    ReleaseConnection,
    RemoveFinalizer,
}

impl std::fmt::Display for CleanupStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CleanupStep::ListDeployments => "listing versioned Deployments",
            CleanupStep::DeleteDeployments => "deleting versioned Deployments",
            CleanupStep::ReadConnection => "reading the TemporalConnection",
            CleanupStep::ReleaseConnection => "releasing the TemporalConnection",
            CleanupStep::RemoveFinalizer => "removing the finalizer",
        })
    }
}
