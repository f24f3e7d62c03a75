//! `temporal-worker-controller pause|resume|promote|skip|abort NAME`: steer a rollout with the
//! user's own kubeconfig credentials, by patching the TWD's spec (pause, resume, abort) or
//! setting a one-shot annotation (promote, skip). See `docs/rollout-control.md`.
//!
//! [`decide`] is pure (what to patch and what to tell the user), so every action is
//! unit-tested; [`run`] only reads the object and sends the patch.

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::api::twd::{RolloutStrategy, VersionStatus};
use crate::api::{ANNOTATION_PROMOTE, ANNOTATION_SKIP_STEP, TemporalWorkerDeployment};

/// Field manager of the CLI's patches (visible in `managedFields`).
pub const FIELD_MANAGER: &str = "temporal-worker-controller-cli";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Pause,
    Resume,
    Promote,
    Skip,
    Abort,
    /// `abort --clear`.
    ClearAbort,
}

/// What the CLI will do: a JSON merge patch and what to tell the user.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub patch: Value,
    pub explanation: String,
    /// A spec patch, which a GitOps tool with self-heal reverts.
    pub spec_patch: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    KubeClient(#[from] crate::cli::kubeconfig::KubeClientError),
    #[error("TemporalWorkerDeployment {0} not found")]
    NotFound(String),
    #[error("{0}")]
    NotApplicable(String),
}

/// Warning printed for spec patches.
pub const GITOPS_WARNING: &str = "warning: this patches the TemporalWorkerDeployment's spec. \
    A GitOps tool with self-heal (Argo CD selfHeal, Flux) puts the spec back as Git has it and \
    undoes this; commit the change to Git instead, or use the annotation actions (promote, skip), \
    which GitOps tools leave alone";

/// The patch and explanation for `action` on `twd` as it is now.
pub fn decide(action: Action, twd: &TemporalWorkerDeployment) -> Result<Change, ControlError> {
    let name = twd.metadata.name.clone().unwrap_or_default();
    let manual = twd.spec.rollout.strategy == RolloutStrategy::Manual;
    let not = |why: String| Err(ControlError::NotApplicable(why));
    let spec = |rollout: Value, explanation: String| {
        Ok(Change {
            patch: json!({"spec": {"rollout": rollout}}),
            explanation,
            spec_patch: true,
        })
    };
    if manual && matches!(action, Action::Pause | Action::Abort) {
        return not(format!(
            "{name} uses the Manual strategy: the controller makes no routing change to pause or \
             abort; change routing in Temporal"
        ));
    }
    match action {
        Action::Pause => spec(
            json!({"paused": true}),
            format!(
                "Pausing {name}: the step in effect holds (no further step, no promotion) and the \
                 time it has left is kept in status.rolloutControl; `resume` continues it"
            ),
        ),
        Action::Resume => spec(
            json!({"paused": null}),
            format!("Resuming {name}: the held step continues with the time it had left"),
        ),
        Action::Abort => spec(
            json!({"abort": true}),
            format!(
                "Aborting {name}: the target's ramp goes back to 0% and the current version stays \
                 Current (Stalled=True/RolloutAborted) until `abort --clear`"
            ),
        ),
        Action::ClearAbort => spec(
            json!({"abort": null}),
            format!("Clearing the abort of {name}: the rollout starts again from its first step"),
        ),
        Action::Promote | Action::Skip => one_shot(action, twd, &name),
    }
}

/// The one-shot annotations (`promote`, `skip`): they name the target build (and its step),
/// so they act on that rollout only.
fn one_shot(
    action: Action,
    twd: &TemporalWorkerDeployment,
    name: &str,
) -> Result<Change, ControlError> {
    let target = twd.status.as_ref().and_then(|s| s.target_version.as_ref());
    let target_build = target.map(|t| t.version.build_id.clone());
    let not = |why: String| Err(ControlError::NotApplicable(why));
    let annotation = |key: &str, value: String, explanation: String| {
        Ok(Change {
            patch: json!({"metadata": {"annotations": {key: value}}}),
            explanation,
            spec_patch: false,
        })
    };
    if action == Action::Promote {
        let Some(build) = target_build.filter(|_| !target_is_current(twd)) else {
            return not(format!(
                "{name} has no target version waiting to be promoted"
            ));
        };
        return annotation(
            ANNOTATION_PROMOTE,
            build.clone(),
            format!(
                "Promoting build ID {build} of {name} now, skipping its remaining steps and \
                 gates (once it has ready pollers); sets {ANNOTATION_PROMOTE}={build}"
            ),
        );
    }
    let step = target.and_then(|t| t.current_step);
    let (Some(build), Some(step)) = (target_build, step) else {
        return not(format!("{name} is not ramping through a step"));
    };
    let value = format!("{build}/{step}");
    annotation(
        ANNOTATION_SKIP_STEP,
        value.clone(),
        format!(
            "Ending step {step} of build ID {build} of {name} now (the next step, or promotion \
             after the last); sets {ANNOTATION_SKIP_STEP}={value}"
        ),
    )
}

fn target_is_current(twd: &TemporalWorkerDeployment) -> bool {
    twd.status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .is_some_and(|t| t.version.status == VersionStatus::Current)
}

/// Reads `namespace/name` (the kube context's namespace by default), prints what will happen,
/// and patches it.
pub async fn run(
    action: Action,
    name: &str,
    namespace: Option<&str>,
    kube: &crate::cli::kubeconfig::KubeOptions,
) -> Result<(), ControlError> {
    run_with(name, namespace, kube, |twd| decide(action, twd)).await
}

/// [`run`] with any pure decision on the object as it is now (the retry and restart requests too).
pub async fn run_with(
    name: &str,
    namespace: Option<&str>,
    kube: &crate::cli::kubeconfig::KubeOptions,
    decide: impl FnOnce(&TemporalWorkerDeployment) -> Result<Change, ControlError>,
) -> Result<(), ControlError> {
    let client = kube.client().await?;
    let ns = namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string);
    let twd = crate::workers::fetch(&client, &ns, name)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("{ns}/{name}")))?;
    let api = twd.own_api(client);
    let change = decide(&twd)?;
    println!("{}", change.explanation);
    if change.spec_patch {
        eprintln!("{GITOPS_WARNING}");
    }
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Merge(&change.patch),
    )
    .await?;
    println!("patched {ns}/{name}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{TargetVersion, TemporalWorkerDeploymentStatus};

    fn ramping(step: Option<i32>, status: VersionStatus) -> TemporalWorkerDeployment {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.strategy = RolloutStrategy::Progressive;
        twd.status = Some(TemporalWorkerDeploymentStatus {
            target_version: Some(TargetVersion {
                current_step: step,
                ..TargetVersion::test("v2", status)
            }),
            ..Default::default()
        });
        twd
    }

    #[test]
    fn spec_actions_patch_the_rollout_and_warn() {
        let twd = ramping(Some(0), VersionStatus::Ramping);
        for (action, patch) in [
            (Action::Pause, json!({"paused": true})),
            (Action::Resume, json!({"paused": null})),
            (Action::Abort, json!({"abort": true})),
            (Action::ClearAbort, json!({"abort": null})),
        ] {
            let c = decide(action, &twd).expect("applies");
            assert_eq!(c.patch, json!({"spec": {"rollout": patch}}), "{action:?}");
            assert!(c.spec_patch, "{action:?}");
            assert!(c.explanation.contains("orders"), "{}", c.explanation);
        }
    }

    #[test]
    fn annotation_actions_name_the_target_build_and_step() {
        // Step 2 of the rollout: status, annotation and message all say 2.
        let twd = ramping(Some(2), VersionStatus::Ramping);
        let c = decide(Action::Promote, &twd).expect("applies");
        assert_eq!(
            c.patch,
            json!({"metadata": {"annotations": {"temporal.io/promote": "v2"}}})
        );
        assert!(!c.spec_patch);
        let c = decide(Action::Skip, &twd).expect("applies");
        assert_eq!(
            c.patch,
            json!({"metadata": {"annotations": {"temporal.io/skip-step": "v2/2"}}})
        );
        assert!(c.explanation.contains("step 2"), "{}", c.explanation);
    }

    #[test]
    fn actions_that_do_not_apply_say_why() {
        let done = ramping(None, VersionStatus::Current);
        assert!(decide(Action::Promote, &done).is_err());
        assert!(decide(Action::Skip, &done).is_err());
        let mut manual = ramping(Some(0), VersionStatus::Ramping);
        manual.spec.rollout.strategy = RolloutStrategy::Manual;
        let e = decide(Action::Pause, &manual).expect_err("manual");
        assert!(e.to_string().contains("Manual"), "{e}");
        assert!(decide(Action::Abort, &manual).is_err());
    }
}
