//! The first status of a worker deployment nobody has reported on yet (just created, or
//! created while no controller ran), from Kubernetes alone. Temporal is asked within the
//! namespace's request budget (one budget per Temporal namespace per install), so at a cold start with a large fleet the last
//! worker deployment is described seconds after the first; what a user waits for first (the
//! target build, that the rollout has started) needs no Temporal answer, and is written at
//! once. The next pass, queued at once, asks Temporal and plans everything.

use std::time::Duration;

#[cfg(doc)]
use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::planner::model::{Phase, Plan, PlanInput, Progress};

/// Whether this pass may be a first look: never reported on (no status but the schema's
/// placeholder, [`TemporalWorkerDeploymentStatus::reported`]) and nothing built for
/// it yet (a worker deployment with versioned Deployments, such as one a predecessor
/// controller managed, needs Temporal's view before anything is said about it).
pub fn due(reported: bool, input: &PlanInput) -> bool {
    !reported && input.deployments.is_empty()
}

/// The plan of a first look: nothing to do but report that the rollout of the target build
/// waits for its Deployment and pollers, and look again at once. Its message carries the
/// image notes a full plan's does: the report stage emits a note's Warning once, when the last
/// status does not name it, so without them the pass after the first look would emit it again.
pub fn plan(input: &PlanInput) -> Plan {
    let progress = Progress {
        phase: Phase::WaitingForPollers,
        message: format!(
            "Build ID {} has no Deployment yet: the controller is looking up the worker deployment in Temporal before it creates one",
            input.desired.build_id
        ),
        step: None,
        rollback: false,
    };
    Plan {
        progress: super::with_notes(progress, &[], input),
        requeue_after: Some(Duration::ZERO),
        retired: input.retired.clone(),
        ..Plan::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::model::{ObservedDeployment, Phase};

    #[test]
    fn only_an_unreported_worker_deployment_without_deployments_gets_a_first_look() {
        let mut input = PlanInput::test();
        input.deployments.clear();
        assert!(due(false, &input));
        assert!(
            !due(true, &input),
            "already reported: plan with Temporal's view"
        );
        input.deployments = vec![ObservedDeployment::test("v1", 1)];
        assert!(
            !due(false, &input),
            "Deployments exist: plan with Temporal's view"
        );
    }

    #[test]
    fn a_first_look_names_a_mutable_image_as_a_full_plan_does() {
        let mut input = PlanInput::test();
        input.desired.mutable_images = vec![crate::planner::model::MutableImage {
            container: "worker".into(),
            image: "orders:latest".into(),
            why: "the tag latest",
        }];
        let marker = crate::planner::images::marker(&input.desired.mutable_images[0]);
        assert!(plan(&input).progress.message.contains(&marker));
        assert!(
            crate::planner::plan(&input)
                .progress
                .message
                .contains(&marker)
        );
    }

    #[test]
    fn a_first_look_changes_nothing_and_looks_again_at_once() {
        let input = PlanInput::test();
        let plan = plan(&input);
        assert_eq!(plan.progress.phase, Phase::WaitingForPollers);
        assert!(plan.progress.message.contains(&input.desired.build_id));
        assert_eq!(plan.requeue_after, Some(Duration::ZERO));
        let nothing = Plan {
            progress: plan.progress.clone(),
            requeue_after: plan.requeue_after,
            ..Plan::default()
        };
        assert_eq!(plan, nothing, "a first look plans no write");
    }
}
