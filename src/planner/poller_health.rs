//! Poller health of the live versions: are the workers of the Current and Ramping versions
//! polling Temporal, or only Ready in Kubernetes? A worker can crash-loop inside its process,
//! lose its credentials or poll the wrong task queue while its Pod stays Ready, and routing
//! keeps sending it work.
//!
//! - **What counts as live.** Temporal's `DescribeTaskQueue` lists every poller it saw in the
//!   last 5 minutes (the server's `matching.PollerHistoryTTL`), a stopped one included, with
//!   its `last_access_time`: the start or end of its latest long poll. A live idle poller
//!   refreshes it at least once per long-poll interval (1 minute on a default server), so a
//!   poller of the version counts only when its last access is within `live_within`
//!   (`--poller-live-threshold`, default [`DEFAULT_LIVE_WITHIN`]: two long polls, so one slow
//!   re-poll is no outage).
//! - **Which versions.** The live ones whose Pods have been Available for at least
//!   `live_within` (their workers had that long to poll): the failure this catches is Pods
//!   Ready without pollers. A version with no Ready Pods (scaled to zero by an autoscaler, or
//!   not run by this controller) is not judged: no pollers is what it should show.
//! - **Which queues.** Every task queue the version lists (`DescribeWorkerDeploymentVersion`),
//!   each asked once with its workflow type when it has one: workflow tasks are short, so a
//!   live worker's workflow pollers keep polling, where activity pollers of a worker whose
//!   slots are all busy with long activities stop polling until a slot frees.
//! - **When.** Right after the set of live versions changes (a rollout completed, a ramp
//!   started or ended), then every `--poller-check-interval` (default [`DEFAULT_INTERVAL`]),
//!   sooner ([`RETRY_AFTER`]) after a check that could not ask Temporal. A vanished poller is
//!   therefore reported at most `live_within + interval` (plus one reconcile) after its last
//!   poll.
//! - **What it says.** Any live version's queue without a live poller of that version:
//!   `NoActivePollers` (a known problem outweighs an unknown elsewhere); else a check that could
//!   not ask Temporal: `PollerStatusUnknown` (not unhealthy); else healthy, which reads
//!   `PollersHealthy` once it follows one of those. While pollers are missing, no routing change
//!   sends more work to that version ([`hold`]).
//!
//! Pure; the checks are made by `src/worker_deployment/observe/pollers.rs`.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;

use crate::api::conditions as reason;
use crate::planner::clock::{self, Wake};
pub use crate::planner::model::{Health, Missing, PollerView};
use crate::planner::model::{ObservedDeployment, RoutingChange};
use crate::temporal::state::{RoutingState, SeenPoller, WorkerDeploymentState};

/// Default `--poller-live-threshold`.
pub const DEFAULT_LIVE_WITHIN: Duration = Duration::from_secs(120);
/// Default `--poller-check-interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// How soon a check that could not ask Temporal is tried again (at most the interval).
pub const RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long a version's list of task queues is reused before it is read again: a version's
/// queues change only when its workers start polling a new one.
pub const QUEUES_MAX_AGE: Duration = Duration::from_secs(3600);

/// The flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollerSettings {
    /// A poller counts as live when Temporal saw it within this.
    pub live_within: Duration,
    /// How often the live versions are checked; `None` turns the check off.
    pub interval: Option<Duration>,
}

impl Default for PollerSettings {
    fn default() -> Self {
        Self {
            live_within: DEFAULT_LIVE_WITHIN,
            interval: Some(DEFAULT_INTERVAL),
        }
    }
}

/// The pollers one task queue of one live version showed.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueLook {
    pub build_id: String,
    pub task_queue: String,
    /// Every poller Temporal listed on the queue, of any version.
    pub pollers: Vec<SeenPoller>,
}

/// One check of the live versions.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub at: Timestamp,
    /// The live build IDs it looked at, sorted.
    pub builds: Vec<String>,
    pub looks: Vec<QueueLook>,
    /// Why part of it could not be asked (a version's queues or a queue's pollers).
    pub failed: Option<String>,
}

/// The live versions: Temporal's Current and Ramping build IDs, sorted.
pub fn live_builds(state: &WorkerDeploymentState) -> Vec<String> {
    let r = &state.routing;
    [&r.current_build_id, &r.ramping_build_id]
        .into_iter()
        .flatten()
        .filter(|b| !b.is_empty())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The live builds to judge now (sorted), and when the next one of the others becomes
/// judgeable: a version is judged once a Deployment of it has had Ready Pods, Available, for
/// `live_within`.
pub fn judged_builds(
    state: &WorkerDeploymentState,
    deployments: &[ObservedDeployment],
    live_within: Duration,
    now: Timestamp,
) -> (Vec<String>, Option<Timestamp>) {
    let mut judged = Vec::new();
    let mut later: Option<Timestamp> = None;
    for build in live_builds(state) {
        let since = deployments
            .iter()
            .filter(|d| d.build_id == build && !d.deleting && d.ready_replicas > 0)
            .filter_map(|d| d.healthy_since)
            .min();
        match since.and_then(|t| clock::add(t, live_within)) {
            Some(from) if from <= now => judged.push(build),
            Some(from) => later = Some(later.map_or(from, |l| l.min(from))),
            None => {}
        }
    }
    (judged, later)
}

/// Pollers of `build_id` on the queue that Temporal saw within `live_within` of the check.
pub fn live_pollers(
    look: &QueueLook,
    deployment: &str,
    at: Timestamp,
    live_within: Duration,
) -> usize {
    let since = jiff::SignedDuration::try_from(live_within)
        .ok()
        .and_then(|d| at.checked_sub(d).ok())
        .unwrap_or(Timestamp::MIN);
    look.pollers
        .iter()
        .filter(|p| p.build_id.as_deref() == Some(look.build_id.as_str()))
        .filter(|p| p.deployment_name.as_deref() == Some(deployment))
        .filter(|p| p.last_access.is_some_and(|t| t >= since))
        .count()
}

/// The verdict of one check.
pub fn judge(check: &Check, deployment: &str, live_within: Duration) -> Health {
    let mut missing: Vec<Missing> = check
        .looks
        .iter()
        .filter(|l| live_pollers(l, deployment, check.at, live_within) == 0)
        .map(|l| Missing {
            build_id: l.build_id.clone(),
            task_queue: l.task_queue.clone(),
        })
        .collect();
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Health::NoActivePollers {
            missing,
            live_within,
        };
    }
    match &check.failed {
        Some(why) => Health::Unknown { why: why.clone() },
        None => Health::Healthy,
    }
}

/// When the next check is due: at once for a new set of live versions, then on the interval
/// (sooner after a failed check); `None` when off or nothing is live.
pub fn due_at(
    last: Option<&Check>,
    live: &[String],
    settings: &PollerSettings,
) -> Option<Timestamp> {
    let interval = settings.interval.filter(|d| !d.is_zero())?;
    if live.is_empty() {
        return None;
    }
    let Some(last) = last.filter(|l| l.builds == live) else {
        return Some(Timestamp::MIN);
    };
    let wait = if last.failed.is_some() {
        RETRY_AFTER.min(interval)
    } else {
        interval
    };
    clock::add(last.at, wait)
}

/// True when a check should be made now.
pub fn is_due(
    last: Option<&Check>,
    live: &[String],
    settings: &PollerSettings,
    now: Timestamp,
) -> bool {
    due_at(last, live, settings).is_some_and(|t| t <= now)
}

/// What the planner sees: the verdict of `last` if it looked at the versions judged now, and
/// when to check next (`later`: when another live version becomes judgeable).
pub fn view(
    last: Option<&Check>,
    live: &[String],
    later: Option<Timestamp>,
    deployment: &str,
    settings: &PollerSettings,
) -> PollerView {
    let enabled = settings.interval.is_some_and(|d| !d.is_zero());
    let health = last
        .filter(|l| enabled && !live.is_empty() && l.builds == live)
        .map(|l| judge(l, deployment, settings.live_within));
    let next_check = match (due_at(last, live, settings), later.filter(|_| enabled)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    PollerView { health, next_check }
}

/// Comes back when the next check is due.
pub fn wake(view: &PollerView, now: Timestamp, wake: &mut Wake) {
    if let Some(t) = view.next_check {
        wake.at(now, t);
    }
}

/// No routing change sends more work to a live version without live pollers: promoting it,
/// ramping it up, or clearing a ramp back onto a Current version without them (changes that
/// move work away from it, a ramp down included, go ahead). Returns true when a change was
/// held.
pub fn hold(change: &mut Option<RoutingChange>, view: &PollerView, routing: &RoutingState) -> bool {
    let Some(Health::NoActivePollers { missing, .. }) = &view.health else {
        return false;
    };
    let receives = match change {
        Some(RoutingChange::SetCurrent { build_id }) => Some(build_id.as_str()),
        Some(RoutingChange::SetRamping {
            build_id,
            percentage,
        }) => {
            let same = routing.ramping_build_id.as_deref() == Some(build_id.as_str());
            (!same || *percentage > routing.ramp_percentage).then_some(build_id.as_str())
        }
        Some(RoutingChange::ClearRamp) => routing.current_build_id.as_deref(),
        None => None,
    };
    let held = receives.is_some_and(|b| missing.iter().any(|m| m.build_id == b));
    if held {
        *change = None;
    }
    held
}

/// How poller health changes what `Ready` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// `Ready=False/NoActivePollers`, in progress (`Progressing` and `Reconciling` True: it may
    /// heal); `Stalled=True/ProgressDeadlineExceeded` only once the loss outlasts the progress
    /// deadline (`worker_deployment::status`).
    NoActivePollers(String),
    /// `Ready=Unknown`: `PollerStatusUnknown` (Temporal could not be asked; not unhealthy).
    Unknown(String),
    /// `Ready=True`: `PollersHealthy`, after one of the two above (until the next rollout).
    Recovered(String),
}

/// The reading for `health`, given the reason `Ready` had before.
pub fn reading(health: Option<&Health>, previous_ready_reason: Option<&str>) -> Option<Reading> {
    match health? {
        Health::NoActivePollers {
            missing,
            live_within,
        } => Some(Reading::NoActivePollers(no_pollers_message(
            missing,
            *live_within,
        ))),
        Health::Unknown { why } => Some(Reading::Unknown(format!(
            "Could not ask Temporal whether the live versions' workers poll (this is not a finding that they do not): {why}"
        ))),
        Health::Healthy => {
            let after_trouble = [
                reason::NO_ACTIVE_POLLERS,
                reason::POLLER_STATUS_UNKNOWN,
                reason::POLLERS_HEALTHY,
            ];
            previous_ready_reason
                .filter(|r| after_trouble.contains(r))
                .map(|_| {
                    Reading::Recovered(
                        "every task queue of the live versions has a live poller again".into(),
                    )
                })
        }
    }
}

fn no_pollers_message(missing: &[Missing], live_within: Duration) -> String {
    let pairs: Vec<String> = missing
        .iter()
        .map(|m| format!("build ID {} on task queue {}", m.build_id, m.task_queue))
        .collect();
    format!(
        "No poller seen by Temporal within {} for {}: its Pods may be Ready while its workers do not poll (crashed in-process, lost credentials, wrong task queue)",
        humantime_secs(live_within),
        pairs.join(", ")
    )
}

fn humantime_secs(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temporal::state::RoutingState;

    const DEP: &str = "ns/orders";

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const AT: &str = "2026-03-02T10:00:00Z";

    fn poller(build: &str, last: &str) -> SeenPoller {
        SeenPoller {
            identity: format!("1@{build}"),
            deployment_name: Some(DEP.into()),
            build_id: Some(build.into()),
            last_access: Some(ts(last)),
        }
    }

    fn look(build: &str, queue: &str, pollers: Vec<SeenPoller>) -> QueueLook {
        QueueLook {
            build_id: build.into(),
            task_queue: queue.into(),
            pollers,
        }
    }

    fn check(looks: Vec<QueueLook>) -> Check {
        Check {
            at: ts(AT),
            builds: vec!["v1".into()],
            looks,
            failed: None,
        }
    }

    const TWO_MIN: Duration = Duration::from_secs(120);

    #[test]
    fn a_version_polled_within_the_threshold_is_healthy() {
        let c = check(vec![look(
            "v1",
            "q",
            vec![poller("v1", "2026-03-02T09:59:10Z")],
        )]);
        assert_eq!(judge(&c, DEP, TWO_MIN), Health::Healthy);
    }

    #[test]
    fn a_poller_temporal_still_lists_but_saw_too_long_ago_is_not_live() {
        // Stopped 3 minutes ago: still in Temporal's 5-minute poller history.
        let c = check(vec![look(
            "v1",
            "q",
            vec![poller("v1", "2026-03-02T09:57:00Z")],
        )]);
        assert_eq!(
            judge(&c, DEP, TWO_MIN),
            Health::NoActivePollers {
                missing: vec![Missing {
                    build_id: "v1".into(),
                    task_queue: "q".into()
                }],
                live_within: TWO_MIN,
            }
        );
        // Exactly at the threshold still counts.
        let edge = check(vec![look(
            "v1",
            "q",
            vec![poller("v1", "2026-03-02T09:58:00Z")],
        )]);
        assert_eq!(judge(&edge, DEP, TWO_MIN), Health::Healthy);
    }

    #[test]
    fn only_pollers_of_the_version_itself_count() {
        let mut other_deployment = poller("v1", AT);
        other_deployment.deployment_name = Some("ns/other".into());
        let mut unversioned = poller("v1", AT);
        unversioned.build_id = None;
        let mut no_time = poller("v1", AT);
        no_time.last_access = None;
        let c = check(vec![look(
            "v1",
            "q",
            vec![poller("v2", AT), other_deployment, unversioned, no_time],
        )]);
        assert!(matches!(
            judge(&c, DEP, TWO_MIN),
            Health::NoActivePollers { .. }
        ));
    }

    #[test]
    fn every_queue_of_every_live_version_needs_its_own_poller() {
        let c = Check {
            builds: vec!["v1".into(), "v2".into()],
            ..check(vec![
                look("v1", "q", vec![poller("v1", AT), poller("v2", AT)]),
                look("v2", "q", vec![poller("v1", AT), poller("v2", AT)]),
                look("v2", "b", vec![poller("v1", AT)]),
                look("v1", "a", vec![]),
            ])
        };
        let Health::NoActivePollers { missing, .. } = judge(&c, DEP, TWO_MIN) else {
            panic!("expected NoActivePollers");
        };
        let pairs: Vec<(&str, &str)> = missing
            .iter()
            .map(|m| (m.build_id.as_str(), m.task_queue.as_str()))
            .collect();
        assert_eq!(pairs, vec![("v1", "a"), ("v2", "b")]);
    }

    #[test]
    fn a_known_missing_poller_outweighs_a_failure_elsewhere_and_a_failure_alone_is_unknown() {
        let mut c = check(vec![look("v1", "q", vec![])]);
        c.failed = Some("DescribeTaskQueue: unavailable".into());
        assert!(matches!(
            judge(&c, DEP, TWO_MIN),
            Health::NoActivePollers { .. }
        ));
        c.looks = vec![look("v1", "q", vec![poller("v1", AT)])];
        assert_eq!(
            judge(&c, DEP, TWO_MIN),
            Health::Unknown {
                why: "DescribeTaskQueue: unavailable".into()
            }
        );
    }

    #[test]
    fn the_live_versions_are_the_current_and_the_ramping_build() {
        let mut s = WorkerDeploymentState {
            routing: RoutingState {
                current_build_id: Some("v2".into()),
                ramping_build_id: Some("v1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(live_builds(&s), vec!["v1".to_string(), "v2".to_string()]);
        s.routing.ramping_build_id = Some(String::new());
        assert_eq!(live_builds(&s), vec!["v2".to_string()]);
        s.routing.current_build_id = None;
        assert!(live_builds(&s).is_empty());
    }

    fn deployment(build: &str, ready: i32, healthy_since: Option<&str>) -> ObservedDeployment {
        ObservedDeployment {
            ready_replicas: ready,
            healthy_since: healthy_since.map(ts),
            ..ObservedDeployment::test(build, 1)
        }
    }

    #[test]
    fn only_versions_whose_pods_were_available_for_the_threshold_are_judged() {
        let state = WorkerDeploymentState {
            routing: RoutingState {
                current_build_id: Some("v1".into()),
                ramping_build_id: Some("v2".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let now = ts(AT);
        let long_ago = Some("2026-03-02T09:00:00Z");
        // v1 Available for an hour; v2 for one minute: judged in another minute.
        let ds = vec![
            deployment("v1", 1, long_ago),
            deployment("v2", 1, Some("2026-03-02T09:59:00Z")),
        ];
        assert_eq!(
            judged_builds(&state, &ds, TWO_MIN, now),
            (vec!["v1".to_string()], Some(ts("2026-03-02T10:01:00Z")))
        );
        // Scaled to zero by an autoscaler, or no Deployment of ours: not judged, never due.
        let ds = vec![deployment("v1", 0, None)];
        assert_eq!(judged_builds(&state, &ds, TWO_MIN, now), (vec![], None));
        // A Deployment being deleted does not count.
        let mut deleting = deployment("v1", 1, long_ago);
        deleting.deleting = true;
        assert_eq!(
            judged_builds(&state, &[deleting], TWO_MIN, now),
            (vec![], None)
        );
    }

    fn settings() -> PollerSettings {
        PollerSettings::default()
    }

    #[test]
    fn a_check_is_due_at_once_for_new_live_versions_then_on_the_interval() {
        let live = vec!["v1".to_string()];
        let now = ts(AT);
        assert!(is_due(None, &live, &settings(), now), "never checked");
        let last = check(vec![]);
        assert!(!is_due(Some(&last), &live, &settings(), now));
        assert_eq!(
            due_at(Some(&last), &live, &settings()),
            Some(ts("2026-03-02T10:05:00Z"))
        );
        assert!(is_due(
            Some(&last),
            &live,
            &settings(),
            ts("2026-03-02T10:05:00Z")
        ));
        // A rollout completed or a ramp started: the new set is checked right away.
        let ramping = vec!["v1".to_string(), "v2".to_string()];
        assert!(is_due(Some(&last), &ramping, &settings(), now));
    }

    #[test]
    fn a_failed_check_is_retried_sooner_but_never_beyond_the_interval() {
        let live = vec!["v1".to_string()];
        let mut last = check(vec![]);
        last.failed = Some("timeout".into());
        assert_eq!(
            due_at(Some(&last), &live, &settings()),
            Some(ts("2026-03-02T10:00:30Z"))
        );
        let fast = PollerSettings {
            interval: Some(Duration::from_secs(5)),
            ..settings()
        };
        assert_eq!(
            due_at(Some(&last), &live, &fast),
            Some(ts("2026-03-02T10:00:05Z"))
        );
    }

    #[test]
    fn nothing_live_or_the_check_turned_off_means_no_check_and_no_verdict() {
        let last = check(vec![look("v1", "q", vec![])]);
        assert_eq!(due_at(Some(&last), &[], &settings()), None);
        let off = PollerSettings {
            interval: None,
            ..settings()
        };
        let live = vec!["v1".to_string()];
        assert_eq!(due_at(None, &live, &off), None);
        assert_eq!(
            view(Some(&last), &live, None, DEP, &off),
            PollerView::default()
        );
        let zero = PollerSettings {
            interval: Some(Duration::ZERO),
            ..settings()
        };
        assert_eq!(
            view(Some(&last), &live, None, DEP, &zero),
            PollerView::default()
        );
    }

    #[test]
    fn a_check_of_other_versions_gives_no_verdict_for_the_live_ones() {
        let last = check(vec![look("v1", "q", vec![])]);
        let live = vec!["v2".to_string()];
        let v = view(Some(&last), &live, None, DEP, &settings());
        assert_eq!(v.health, None);
        assert_eq!(v.next_check, Some(Timestamp::MIN), "checked at once");
        let same = view(Some(&last), &["v1".to_string()], None, DEP, &settings());
        assert!(matches!(same.health, Some(Health::NoActivePollers { .. })));
    }

    #[test]
    fn the_reconcile_comes_back_when_the_next_check_is_due() {
        let last = check(vec![]);
        let v = view(Some(&last), &["v1".to_string()], None, DEP, &settings());
        let mut w = Wake::default();
        wake(&v, ts("2026-03-02T10:01:00Z"), &mut w);
        assert_eq!(w.get(), Some(Duration::from_secs(240)));
        // A version becoming judgeable sooner brings the next look forward.
        let soon = Some(ts("2026-03-02T10:02:00Z"));
        let v = view(Some(&last), &["v1".to_string()], soon, DEP, &settings());
        assert_eq!(v.next_check, soon);
    }

    #[test]
    fn no_routing_change_sends_more_work_to_a_version_without_pollers() {
        let gone = PollerView {
            health: Some(Health::NoActivePollers {
                missing: vec![Missing {
                    build_id: "v2".into(),
                    task_queue: "q".into(),
                }],
                live_within: TWO_MIN,
            }),
            next_check: None,
        };
        let ramp = |b: &str, p: f32| {
            Some(RoutingChange::SetRamping {
                build_id: b.into(),
                percentage: p,
            })
        };
        // v1 Current, v2 ramping at 25 %.
        let routing = RoutingState {
            current_build_id: Some("v1".into()),
            ramping_build_id: Some("v2".into()),
            ramp_percentage: 25.0,
            ..Default::default()
        };
        let mut c = ramp("v2", 50.0);
        assert!(hold(&mut c, &gone, &routing));
        assert_eq!(c, None);
        let mut c = Some(RoutingChange::SetCurrent {
            build_id: "v2".into(),
        });
        assert!(hold(&mut c, &gone, &routing));
        // Ramping it down (an abort) moves work away from it: it goes ahead.
        let mut c = ramp("v2", 0.0);
        assert!(!hold(&mut c, &gone, &routing));
        assert_eq!(c, ramp("v2", 0.0));
        // Clearing a ramp back onto a Current version without pollers waits too.
        let v2_current = RoutingState {
            current_build_id: Some("v2".into()),
            ..Default::default()
        };
        let mut c = Some(RoutingChange::ClearRamp);
        assert!(hold(&mut c, &gone, &v2_current));
        // Moving work to a version with pollers goes ahead, as does anything when healthy.
        let mut c = ramp("v3", 10.0);
        assert!(!hold(&mut c, &gone, &v2_current));
        let mut c = Some(RoutingChange::ClearRamp);
        assert!(!hold(&mut c, &gone, &routing));
        let healthy = PollerView {
            health: Some(Health::Healthy),
            next_check: None,
        };
        let mut c = ramp("v2", 50.0);
        assert!(!hold(&mut c, &healthy, &routing));
        assert!(c.is_some());
    }

    #[test]
    fn the_plan_holds_a_promotion_of_a_version_without_pollers() {
        let mut i = crate::planner::model::PlanInput::test();
        assert!(matches!(
            crate::planner::plan(&i).routing,
            Some(RoutingChange::SetCurrent { .. })
        ));
        i.pollers.health = Some(Health::NoActivePollers {
            missing: vec![Missing {
                build_id: "v2".into(),
                task_queue: "q".into(),
            }],
            live_within: TWO_MIN,
        });
        assert_eq!(crate::planner::plan(&i).routing, None);
    }

    #[test]
    fn ready_reads_no_active_pollers_unknown_or_recovered() {
        let none = Health::NoActivePollers {
            missing: vec![Missing {
                build_id: "v1".into(),
                task_queue: "q".into(),
            }],
            live_within: TWO_MIN,
        };
        let Some(Reading::NoActivePollers(m)) = reading(Some(&none), None) else {
            panic!("expected NoActivePollers");
        };
        assert!(
            m.contains("build ID v1 on task queue q") && m.contains("120s"),
            "{m}"
        );
        let unknown = Health::Unknown { why: "x".into() };
        assert!(matches!(
            reading(Some(&unknown), Some(reason::ROLLOUT_COMPLETE)),
            Some(Reading::Unknown(_))
        ));
        // Healthy reads as before, unless it follows trouble: then PollersHealthy, which
        // stays until the next rollout replaces it.
        assert_eq!(reading(Some(&Health::Healthy), None), None);
        assert_eq!(
            reading(Some(&Health::Healthy), Some(reason::ROLLOUT_COMPLETE)),
            None
        );
        for before in [
            reason::NO_ACTIVE_POLLERS,
            reason::POLLER_STATUS_UNKNOWN,
            reason::POLLERS_HEALTHY,
        ] {
            assert!(matches!(
                reading(Some(&Health::Healthy), Some(before)),
                Some(Reading::Recovered(_))
            ));
        }
        assert_eq!(reading(None, Some(reason::NO_ACTIVE_POLLERS)), None);
    }
}
