//! `temporal.io/restart`: rolling one version's Pods in place, without a new build.
//!
//! Rules:
//! 1. **The request.** The value is `<buildID>` or `<buildID>/<anything>` (the form of
//!    `temporal.io/retry`): the part before the first `/` names the build, the whole value is
//!    the request. It is acted on once (`status.rolloutControl.restarted`); another value
//!    (`<buildID>/2`, `<buildID>/3`, ...) restarts again.
//! 2. **Any live version.** The live (not deleting) Deployment of that build is restarted,
//!    whatever its role (target, Current, Ramping, Draining): a stuck connection pool or a
//!    rotated mounted Secret is a problem of running workers. Routing is not touched and the
//!    build ID stays; the Deployment rolls by its own strategy (`spec.deployment.strategy`).
//! 3. **Done is what the Deployment says.** The restart writes the value on the pod template
//!    (the same annotation key), which is what rolls the Pods. Once the Deployment carries
//!    it, the request is recorded; until then it is planned again, and a repeated write of
//!    the same value (a reconcile against a cache that has not seen the first) rolls nothing.
//! 4. **No Deployment of that build:** nothing to restart. The request is recorded as acted
//!    on, so an old request never restarts a later Deployment of that build, and reported
//!    with a Warning event.
//! 5. **Independent of rollout control:** acted on while paused, aborted, or while the build
//!    is held after a missed progress deadline (a restart may be what mends it).

use crate::planner::model::{Restart, RestartDeployment};
use crate::planner::view::View;

/// The build a request names.
pub fn build_of(value: &str) -> &str {
    value.split_once('/').map_or(value, |(b, _)| b)
}

/// The restart to act on this reconcile, and the value to keep in
/// `status.rolloutControl.restarted`.
pub fn decide(view: &View) -> (Option<Restart>, Option<String>) {
    let c = &view.input.desired.control;
    let recorded = c.record.restarted.clone();
    let Some(value) = c.restart.as_ref().filter(|v| recorded.as_ref() != Some(*v)) else {
        return (None, recorded);
    };
    let build = build_of(value);
    let live = view
        .input
        .deployments
        .iter()
        .find(|d| !d.deleting && d.build_id == build);
    match live {
        // Rule 3: the restart is on the Deployment, so it is done.
        Some(d) if d.restarted.as_ref() == Some(value) => (None, Some(value.clone())),
        Some(d) => (
            Some(Restart::Roll(RestartDeployment {
                name: d.name.clone(),
                build_id: d.build_id.clone(),
                value: value.clone(),
                at: view.input.now,
            })),
            recorded,
        ),
        None => (
            Some(Restart::NoDeployment {
                build_id: build.to_string(),
                value: value.clone(),
            }),
            Some(value.clone()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::model::{ObservedDeployment, Phase, PlanInput};
    use crate::planner::plan;

    fn asking(value: &str) -> PlanInput {
        let mut i = PlanInput::test();
        i.desired.control.restart = Some(value.into());
        i
    }

    fn rolled(i: &PlanInput) -> Option<RestartDeployment> {
        match plan(i).restart {
            Some(Restart::Roll(r)) => Some(r),
            _ => None,
        }
    }

    #[test]
    fn a_request_rolls_the_named_version_and_leaves_routing_alone() {
        let before = plan(&PlanInput::test());
        let i = asking("v1");
        let p = plan(&i);
        let r = rolled(&i).expect("restarted");
        assert_eq!(
            (r.name.as_str(), r.build_id.as_str(), r.value.as_str()),
            ("w-v1", "v1", "v1")
        );
        assert_eq!(r.at, i.now);
        assert_eq!(p.routing, before.routing, "routing untouched");
        assert_eq!(p.progress, before.progress);
        assert!(p.update.is_empty() && p.create.is_none(), "no new build");
        assert_eq!(
            p.control.restarted, None,
            "recorded once the Deployment shows it"
        );
    }

    #[test]
    fn once_the_deployment_carries_it_the_request_is_recorded_and_never_repeated() {
        let mut i = asking("v2/2");
        i.deployments[1].restarted = Some("v2/2".into());
        let p = plan(&i);
        assert_eq!(p.restart, None);
        assert_eq!(p.control.restarted.as_deref(), Some("v2/2"));
        // Recorded: even a Deployment that lost the annotation is not restarted again.
        i.desired.control.record.restarted = Some("v2/2".into());
        i.deployments[1].restarted = None;
        let p = plan(&i);
        assert_eq!(p.restart, None);
        assert_eq!(p.control.restarted.as_deref(), Some("v2/2"), "kept");
        // A new value restarts again.
        i.desired.control.restart = Some("v2/3".into());
        assert_eq!(rolled(&i).map(|r| r.value), Some("v2/3".to_string()));
    }

    #[test]
    fn the_build_is_the_part_before_the_first_slash() {
        assert_eq!(build_of("v2"), "v2");
        assert_eq!(build_of("v2/2"), "v2");
        assert_eq!(build_of("v2/a/b"), "v2");
        let i = asking("v2/2026-12-02T08:00:00Z");
        assert_eq!(rolled(&i).map(|r| r.name), Some("w-v2".to_string()));
    }

    #[test]
    fn a_build_without_a_live_deployment_is_recorded_and_reported_not_rolled() {
        let mut i = asking("v9");
        let p = plan(&i);
        assert_eq!(
            p.restart,
            Some(Restart::NoDeployment {
                build_id: "v9".into(),
                value: "v9".into()
            })
        );
        assert_eq!(p.control.restarted.as_deref(), Some("v9"));
        // A Deployment being deleted is not live.
        i.desired.control.restart = Some("v1".into());
        i.deployments[0].deleting = true;
        assert!(matches!(
            plan(&i).restart,
            Some(Restart::NoDeployment { .. })
        ));
    }

    #[test]
    fn rollout_control_does_not_hold_a_restart() {
        let mut i = asking("v2");
        i.desired.control.paused = true;
        assert!(rolled(&i).is_some(), "paused");
        i.desired.control.paused = false;
        i.desired.control.abort = true;
        let p = plan(&i);
        assert_eq!(p.progress.phase, Phase::Aborted);
        assert!(p.restart.is_some(), "aborted");
    }

    #[test]
    fn no_request_keeps_the_record() {
        let mut i = PlanInput::test();
        i.desired.control.record.restarted = Some("v1".into());
        let p = plan(&i);
        assert_eq!((p.restart, p.control.restarted), (None, Some("v1".into())));
        let d = ObservedDeployment::test("v3", 1);
        assert_eq!(d.restarted, None);
    }
}
