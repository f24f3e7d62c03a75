//! The deletion path's decisions, pure: what a worker deployment being deleted still has to
//! do (stop its workers, clean Temporal, release its Connection, drop our finalizer), and when
//! a cleanup Temporal keeps refusing is given up. The deletion driver
//! (`src/worker_deployment/finalize.rs`) observes, asks here, and acts.

use std::time::Duration;

use jiff::Timestamp;

use crate::planner::model::ObservedDeployment;

/// After this long in deletion, the finalizer is released even if Temporal cleanup failed
/// (twice Temporal's default PollerHistoryTTL plus slack).
pub const CLEANUP_GIVE_UP_AFTER: Duration = Duration::from_secs(15 * 60);

/// What the deletion driver saw.
#[derive(Clone, Debug, Default)]
pub struct DeletionInput {
    /// Our finalizer is on the object.
    pub ours: bool,
    /// A WorkerDeployment of the same name owns Temporal and the workers (see
    /// `src/worker_deployment/superseded.rs`).
    pub superseded: bool,
    /// The versioned Deployments, listed afresh.
    pub deployments: Vec<ObservedDeployment>,
    /// The Connection it names exists (`None`: not read yet, the Deployments come first).
    pub connection_found: Option<bool>,
}

/// The next writes of a deletion, in order; each ends the pass if it fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeletionStep {
    /// Nothing left: our finalizer is gone already.
    Done,
    /// Drop our finalizer and nothing else (a superseded object's Temporal state and workers
    /// are its successor's).
    ReleaseOnly,
    /// Stop these Deployments' workers first (name, build ID): Temporal refuses to delete a
    /// version with pollers, and garbage collection would wait for our finalizer.
    Stop(Vec<(String, String)>),
    /// Read the Connection (then decide again).
    ReadConnection,
    /// Without a Connection Temporal cannot be reached: keep the finalizer and say so.
    NeedsConnection,
    /// Delete the worker deployment in Temporal, release the Connection, drop our finalizer.
    CleanAndRelease,
}

/// The next step of the deletion of an object in the state `input` describes.
pub fn next_step(input: &DeletionInput) -> DeletionStep {
    if !input.ours {
        return DeletionStep::Done;
    }
    if input.superseded {
        return DeletionStep::ReleaseOnly;
    }
    let running: Vec<(String, String)> = input
        .deployments
        .iter()
        .filter(|d| !d.deleting)
        .map(|d| (d.name.clone(), d.build_id.clone()))
        .collect();
    if !running.is_empty() {
        return DeletionStep::Stop(running);
    }
    match input.connection_found {
        None => DeletionStep::ReadConnection,
        Some(false) => DeletionStep::NeedsConnection,
        Some(true) => DeletionStep::CleanAndRelease,
    }
}

/// After a failed Temporal cleanup: retry while young, give up (loudly, leaving Temporal state
/// behind) once the object has been deleting for [`CLEANUP_GIVE_UP_AFTER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanupFailed {
    Retry,
    GiveUp { deleting_for: Duration },
}

/// See [`CleanupFailed`]; `deleting_since` is the deletion timestamp (`None` reads as now).
pub fn on_cleanup_failure(deleting_since: Option<Timestamp>, now: Timestamp) -> CleanupFailed {
    let deleting_for = deleting_since
        .map(|t| now.duration_since(t).unsigned_abs())
        .unwrap_or_default();
    if deleting_for < CLEANUP_GIVE_UP_AFTER {
        CleanupFailed::Retry
    } else {
        CleanupFailed::GiveUp { deleting_for }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{NOW, ts};

    fn deployment(build: &str, deleting: bool) -> ObservedDeployment {
        ObservedDeployment {
            deleting,
            ..ObservedDeployment::test(build, 1)
        }
    }

    fn input(deployments: Vec<ObservedDeployment>, connection: Option<bool>) -> DeletionInput {
        DeletionInput {
            ours: true,
            superseded: false,
            deployments,
            connection_found: connection,
        }
    }

    #[test]
    fn without_our_finalizer_there_is_nothing_to_do() {
        let mut i = input(vec![deployment("a", false)], Some(true));
        i.ours = false;
        assert_eq!(next_step(&i), DeletionStep::Done);
    }

    #[test]
    fn a_superseded_object_only_drops_its_finalizer() {
        let mut i = input(vec![deployment("a", false)], Some(true));
        i.superseded = true;
        assert_eq!(next_step(&i), DeletionStep::ReleaseOnly);
    }

    #[test]
    fn workers_stop_before_temporal_is_cleaned_and_deleting_ones_are_left_alone() {
        let i = input(
            vec![deployment("a", false), deployment("b", true)],
            Some(true),
        );
        assert_eq!(
            next_step(&i),
            DeletionStep::Stop(vec![("w-a".into(), "a".into())])
        );
        let stopped = input(vec![deployment("b", true)], None);
        assert_eq!(next_step(&stopped), DeletionStep::ReadConnection);
    }

    #[test]
    fn temporal_is_cleaned_only_through_an_existing_connection() {
        assert_eq!(
            next_step(&input(vec![], Some(false))),
            DeletionStep::NeedsConnection
        );
        assert_eq!(
            next_step(&input(vec![], Some(true))),
            DeletionStep::CleanAndRelease
        );
    }

    #[test]
    fn a_failed_cleanup_is_retried_for_fifteen_minutes_then_given_up() {
        let now = ts(NOW);
        let since = |secs: i64| Some(now - jiff::SignedDuration::from_secs(secs));
        assert_eq!(on_cleanup_failure(since(60), now), CleanupFailed::Retry);
        assert_eq!(on_cleanup_failure(since(899), now), CleanupFailed::Retry);
        assert_eq!(
            on_cleanup_failure(since(900), now),
            CleanupFailed::GiveUp {
                deleting_for: Duration::from_secs(900)
            }
        );
        assert_eq!(on_cleanup_failure(None, now), CleanupFailed::Retry);
    }
}
