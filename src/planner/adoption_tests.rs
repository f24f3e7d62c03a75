//! `spec.adopt` ([`super::adoption`]): when the unversioned workers' Deployment is kept,
//! scaled to zero or deleted.

use std::time::Duration;

use crate::api::adopt::{AdoptionPhase, AdoptionStatus};
use crate::planner::adoption::{Action, Adopt, Decision, Observed, PlainDeployment, status};
use crate::planner::model::PlanInput;
use crate::planner::{adoption_facts, plan};

fn count_due(i: &PlanInput) -> bool {
    crate::planner::adoption::count_due(adoption_facts(i))
}

/// v1 Current (PlanInput::test), adopting `legacy` (3 replicas), `delete` as asked.
fn adopting(delete: bool) -> PlanInput {
    let mut i = PlanInput::test();
    i.desired.adopt = Some(Adopt {
        deployment_name: "legacy".into(),
        delete,
    });
    i.adopted = Some(Observed {
        deployment: Some(PlainDeployment {
            replicas: Some(3),
            status_replicas: 3,
            ..Default::default()
        }),
        queues: vec!["q1".into()],
        ..Default::default()
    });
    i
}

fn observed(i: &mut PlanInput) -> &mut Observed {
    i.adopted.as_mut().expect("observed")
}

fn counted(mut i: PlanInput, n: u64) -> PlanInput {
    observed(&mut i).open_unversioned = Some(n);
    i
}

fn at_zero(mut i: PlanInput, pods: i32) -> PlanInput {
    let d = i
        .adopted
        .as_mut()
        .and_then(|o| o.deployment.as_mut())
        .expect("observed");
    d.replicas = Some(0);
    d.status_replicas = pods;
    i
}

fn decided(i: &PlanInput) -> Decision {
    plan(i).adoption.expect("a decision with spec.adopt")
}

#[test]
fn without_spec_adopt_nothing_is_decided_or_counted() {
    let i = PlanInput::test();
    assert_eq!(plan(&i).adoption, None);
    assert!(!count_due(&i));
}

#[test]
fn nothing_current_keeps_the_workers_and_counts_nothing() {
    let mut i = adopting(false);
    i.temporal.routing.current_build_id = None;
    assert!(!count_due(&i), "no count before a version is Current");
    let d = decided(&counted(i, 0));
    assert_eq!((d.phase, d.action), (AdoptionPhase::Waiting, None));
    assert!(
        d.message.contains("the first one ramps from them"),
        "{}",
        d.message
    );
}

#[test]
fn a_routing_change_still_propagating_waits_and_looks_again_soon() {
    let mut i = adopting(false);
    i.temporal.routing.update_in_progress = true;
    assert!(!count_due(&i));
    let p = plan(&counted(i.clone(), 0));
    let d = p.adoption.expect("decided");
    assert_eq!((d.phase, d.action), (AdoptionPhase::Waiting, None));
    assert!(p.requeue_after.is_some_and(|w| w <= i.fast_poll));
}

#[test]
fn current_but_uncounted_or_with_unversioned_workflows_keeps_the_deployment() {
    let i = adopting(false);
    assert!(count_due(&i));
    let p = plan(&i);
    let d = p.adoption.expect("decided");
    assert_eq!((d.phase, d.action), (AdoptionPhase::Draining, None));
    assert!(
        p.requeue_after
            .is_some_and(|w| w <= Duration::from_secs(30))
    );
    let d = decided(&counted(i, 4));
    assert_eq!(
        (d.phase, d.action, d.open_unversioned),
        (AdoptionPhase::Draining, None, Some(4))
    );
    assert!(
        d.message.contains("4 workflows") && d.message.contains("[q1]"),
        "{}",
        d.message
    );
}

#[test]
fn a_zero_count_scales_to_zero_and_leaves_the_rollout_alone() {
    let i = counted(adopting(false), 0);
    let d = decided(&i);
    assert_eq!(
        (d.phase, d.action, d.deployment_name.as_str()),
        (
            AdoptionPhase::ScaledToZero,
            Some(Action::ScaleToZero),
            "legacy"
        )
    );
    let (mut without, with) = (plan(&PlanInput::test()), plan(&i));
    without.adoption = with.adoption.clone();
    assert_eq!(with, without, "only the adoption differs");
}

#[test]
fn at_zero_with_scale_to_zero_it_is_done_and_not_counted_again() {
    let i = at_zero(adopting(false), 0);
    assert!(!count_due(&i));
    let d = decided(&i);
    assert_eq!((d.phase, d.action), (AdoptionPhase::ScaledToZero, None));
}

#[test]
fn delete_waits_for_the_pods_then_deletes_after_a_zero_count() {
    let i = at_zero(adopting(true), 2);
    assert!(count_due(&i), "Delete counts again before deleting");
    let d = decided(&counted(i.clone(), 0));
    assert_eq!((d.phase, d.action), (AdoptionPhase::ScaledToZero, None));
    let d = decided(&counted(at_zero(adopting(true), 0), 0));
    assert_eq!(
        (d.phase, d.action),
        (AdoptionPhase::Deleted, Some(Action::Delete))
    );
    // Uncounted: nothing deleted.
    let d = decided(&at_zero(adopting(true), 0));
    assert_eq!((d.phase, d.action), (AdoptionPhase::Draining, None));
}

#[test]
fn scaled_up_again_after_adoption_is_counted_and_scaled_to_zero_again() {
    let mut i = counted(adopting(false), 0);
    observed(&mut i).recorded = Some(AdoptionPhase::ScaledToZero);
    let d = decided(&i);
    assert_eq!(d.action, Some(Action::ScaleToZero));
    assert!(d.message.contains("Scaled up again"), "{}", d.message);
}

#[test]
fn an_hpa_on_it_is_named_and_not_fought() {
    let mut i = counted(adopting(false), 0);
    let d = i
        .adopted
        .as_mut()
        .and_then(|o| o.deployment.as_mut())
        .expect("observed");
    d.autoscalers = vec!["legacy-hpa".into()];
    let d = decided(&i);
    assert_eq!(d.action, Some(Action::ScaleToZero));
    assert!(
        d.message.contains("HorizontalPodAutoscaler legacy-hpa"),
        "{}",
        d.message
    );
}

#[test]
fn missing_ours_or_unreadable_deployments_are_left_alone() {
    let mut i = counted(adopting(true), 0);
    observed(&mut i).deployment = None;
    assert!(!count_due(&i));
    assert_eq!(decided(&i).phase, AdoptionPhase::NotFound);
    observed(&mut i).recorded = Some(AdoptionPhase::Deleted);
    assert_eq!(
        decided(&i).phase,
        AdoptionPhase::Deleted,
        "deleted by us earlier"
    );

    let mut i = counted(adopting(true), 0);
    let d = i
        .adopted
        .as_mut()
        .and_then(|o| o.deployment.as_mut())
        .expect("observed");
    d.ours = true;
    assert!(!count_due(&i));
    assert_eq!(
        (decided(&i).phase, decided(&i).action),
        (AdoptionPhase::Refused, None)
    );

    let mut i = counted(adopting(false), 0);
    observed(&mut i).unreadable = Some("forbidden".into());
    observed(&mut i).recorded = Some(AdoptionPhase::Draining);
    assert!(!count_due(&i));
    let d = decided(&i);
    assert_eq!((d.phase, d.action), (AdoptionPhase::Draining, None));
    assert!(d.message.contains("forbidden"));
}

#[test]
fn status_reports_a_write_only_once_it_happened() {
    let d = decided(&counted(adopting(false), 0));
    let previous = AdoptionStatus {
        deployment_name: "legacy".into(),
        phase: AdoptionPhase::Draining,
        open_unversioned_workflows: Some(1),
        message: "before".into(),
    };
    assert_eq!(
        status(Some(&d), Some(&previous), false),
        Some(previous.clone())
    );
    let now = status(Some(&d), Some(&previous), true).expect("status");
    assert_eq!(
        (now.phase, now.open_unversioned_workflows),
        (AdoptionPhase::ScaledToZero, Some(0))
    );
    assert_eq!(
        status(None, Some(&previous), true),
        None,
        "spec.adopt removed"
    );
    // Not counted this pass (done, at zero): the last count stays.
    let done = decided(&at_zero(adopting(false), 0));
    let kept = status(Some(&done), Some(&now), true).expect("status");
    assert_eq!(
        (kept.phase, kept.open_unversioned_workflows),
        (AdoptionPhase::ScaledToZero, Some(0))
    );
    let mut other = now.clone();
    other.deployment_name = "another".into();
    assert_eq!(
        status(Some(&done), Some(&other), true).and_then(|s| s.open_unversioned_workflows),
        None
    );
}
