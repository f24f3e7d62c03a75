//! What keeps the target's Pods from being Ready, as observed (the planner's input for
//! reporting a version that cannot become healthy; re-exported by [`super::model`]).

/// The first trouble a Pod of the target reports, with the Pod's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodTrouble {
    pub pod: String,
    pub cause: PodCause,
}

/// What Kubernetes says keeps a Pod from being Ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodCause {
    /// A container waits in `ErrImagePull` / `ImagePullBackOff` / `InvalidImageName`.
    ImagePull {
        container: String,
        image: String,
        reason: String,
        message: String,
    },
    /// A container restarts (`CrashLoopBackOff`, or restarted at least once): its last exit.
    CrashLoop {
        container: String,
        restarts: i32,
        exit_code: Option<i32>,
        reason: Option<String>,
        message: Option<String>,
    },
    /// `PodScheduled=False` with its reason (`Unschedulable`).
    Unschedulable { reason: String, message: String },
    /// A container waits for another reason a kubelet reports (`CreateContainerConfigError`,
    /// `RunContainerError`, ...).
    Waiting {
        container: String,
        reason: String,
        message: String,
    },
}
