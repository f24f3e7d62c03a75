//! Temporal version records (`src/planner/records.rs`), through `plan()`: the ledger of the
//! versions this controller ran, and the record GC that deletes only those.

use std::time::Duration;

use super::plan;
use super::sunset::pinned_check_candidates;
use crate::fixtures::ago;
use crate::planner::model::*;
use crate::planner::test_fixtures::*;
use crate::temporal::state::{TemporalVersionStatus as T, VersionState};

/// v2 is Current (its Deployment exists); Temporal also lists these old versions, none of
/// which has a Deployment any more. Visibility counted nothing open on any of them.
fn settled_with_records(old: Vec<VersionState>) -> PlanInput {
    let mut i = settled();
    i.temporal.versions.extend(old.into_iter().map(|mut v| {
        v.open_pinned_workflows = Some(0);
        v
    }));
    i
}

/// The same, with every old version in the ledger (they ran here).
fn ours(old: Vec<VersionState>) -> PlanInput {
    let mut i = settled_with_records(old);
    i.retired = i.temporal.versions[1..]
        .iter()
        .map(|v| v.build_id.clone())
        .collect();
    i
}

#[test]
fn records_of_our_drained_or_inactive_versions_without_a_deployment_are_deleted() {
    let p = plan(&ours(vec![
        VersionState::drained("v0", ago(3600)),
        VersionState::test("vi", T::Inactive),
        VersionState::test("vd", T::Draining),
    ]));
    assert_eq!(p.forget_versions, ["v0", "vi"], "never a Draining one");
    assert!(p.requeue_after.is_some(), "looks again if Temporal refuses");

    // A version whose Deployment is still there (even at 0 or being deleted) keeps its record.
    let mut i = ours(vec![VersionState::drained("v0", ago(60))]);
    i.deployments.push(ObservedDeployment::test("v0", 0));
    i.deployments[1].deleting = true;
    assert!(plan(&i).forget_versions.is_empty());

    // Nothing Current, Ramping or the target, whatever Temporal's per-version status says.
    let mut i = settled();
    i.retired = vec!["v2".into()];
    i.deployments.clear();
    assert!(plan(&i).forget_versions.is_empty(), "the target");
}

/// The mutation the e2e `version_records` guards against: before the ledger, every Inactive
/// or Drained record without a Deployment was deleted, including versions registered by
/// workers outside Kubernetes under the same worker deployment name.
#[test]
fn a_version_that_never_ran_here_keeps_its_record() {
    let mut i = settled_with_records(vec![
        VersionState::test("outside", T::Inactive),
        VersionState::drained("outside-drained", ago(3600)),
    ]);
    let p = plan(&i);
    assert!(p.forget_versions.is_empty(), "{:?}", p.forget_versions);
    assert!(p.retired.is_empty(), "never added to the ledger");
    for v in &mut i.temporal.versions {
        v.open_pinned_workflows = None;
    }
    assert!(
        pinned_check_candidates(&i).is_empty(),
        "not even counted: nothing will be done with it"
    );
}

#[test]
fn a_ledger_version_is_deleted_only_after_visibility_counts_nothing_open_on_it() {
    let mut i = ours(vec![VersionState::test("vi", T::Inactive)]);
    i.temporal.versions[1].open_pinned_workflows = None;
    assert_eq!(pinned_check_candidates(&i), ["vi"], "counted first");
    assert!(plan(&i).forget_versions.is_empty(), "uncounted: kept");

    // A workflow pinned by an override (or a batch move) after the Deployment went.
    i.temporal.versions[1].open_pinned_workflows = Some(1);
    let p = plan(&i);
    assert!(p.forget_versions.is_empty(), "a workflow is open on it");
    assert!(p.requeue_after.is_some(), "counted again later");
    assert_eq!(p.retired, ["vi"], "still ours");

    i.temporal.versions[1].open_pinned_workflows = Some(0);
    assert_eq!(plan(&i).forget_versions, ["vi"]);
}

#[test]
fn the_ledger_records_old_versions_while_their_deployment_is_there() {
    // v1 is Drained and still has its Deployment: it ran here, so it is recorded before sunset
    // deletes the Deployment. The Current version is not recorded (it is not old).
    let i = with_old(VersionState::drained("v1", ago(60)), 1);
    assert_eq!(plan(&i).retired, ["v1"]);

    // A Deployment of a version Temporal does not know registered nothing: not recorded.
    let mut i = settled();
    i.deployments.push(ObservedDeployment::test("never", 1));
    assert!(plan(&i).retired.is_empty());

    // An entry stays while Temporal lists the version, and goes once it does not.
    let mut i = ours(vec![VersionState::drained("v0", ago(60))]);
    i.retired.push("deleted-already".into());
    assert_eq!(plan(&i).retired, ["v0"]);

    // A failed or empty read drops nothing.
    i.temporal.versions.clear();
    assert_eq!(plan(&i).retired, ["v0", "deleted-already"]);
    i.temporal.exists = false;
    assert_eq!(plan(&i).retired, ["v0", "deleted-already"]);
}

#[test]
fn version_records_are_deleted_a_few_per_reconcile() {
    let old = (0..10)
        .map(|k| VersionState::drained(&format!("old{k}"), ago(3600)))
        .collect();
    let p = plan(&ours(old));
    assert_eq!(
        p.forget_versions.len(),
        crate::planner::records::MAX_FORGET_PER_RECONCILE
    );
    let mut i = ours(vec![VersionState::drained("v0", ago(60))]);
    i.temporal.exists = false;
    assert!(plan(&i).forget_versions.is_empty(), "Temporal unknown");
}

#[test]
fn a_version_current_within_the_rollback_window_keeps_its_record() {
    let mut v0 = VersionState::drained("v0", ago(60));
    v0.last_current_at = Some(ago(120));
    let mut i = ours(vec![v0]);
    i.desired.rollback_window = Duration::from_secs(3600);
    assert!(plan(&i).forget_versions.is_empty(), "a rollback target");
    i.desired.rollback_window = Duration::from_secs(60);
    assert_eq!(plan(&i).forget_versions, ["v0"]);
}
