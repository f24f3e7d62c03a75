//! Property tests of the planner's safety rules over random Temporal and Kubernetes states:
//! whatever Temporal and the cluster look like (including Temporal's per-version status
//! disagreeing with its routing, as it does while a routing change propagates), no plan
//!
//! - scales to zero or deletes a version Temporal reports Current, Ramping or Draining, or
//!   that routing names current or ramping;
//! - scales to zero or deletes a version Temporal knows unless visibility counted no open
//!   workflow pinned to it;
//! - routes (SetCurrent, SetRamping) to a version without ready pollers: registered in
//!   Temporal and with an Available Deployment that has ready pods, and whose Connection
//!   roll has not stalled (its new Pods never became Ready).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use proptest::strategy::Strategy as Gen;

use super::plan;
use crate::api::twd::GateWorkflowStatus;
use crate::planner::model::{
    Control, Desired, Gate, ObservedDeployment, PlanInput, RoutingChange, Step, Strategy as Rollout,
};
use crate::temporal::state::{
    GateObservation, RoutingState, TemporalVersionStatus, VersionState, WorkerDeploymentState,
};

const BUILDS: [&str; 5] = ["b0", "b1", "b2", "b3", "b4"];
const NOW: i64 = 1_772_452_800; // 2026-03-02T12:00:00Z

fn ago(secs: i64) -> Timestamp {
    Timestamp::from_second(NOW - secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn build() -> impl Gen<Value = String> {
    prop::sample::select(&BUILDS[..]).prop_map(str::to_string)
}

fn opt_time() -> impl Gen<Value = Option<Timestamp>> {
    prop::option::of((0i64..30 * 86_400).prop_map(ago))
}

fn status() -> impl Gen<Value = TemporalVersionStatus> {
    prop::sample::select(vec![
        TemporalVersionStatus::Inactive,
        TemporalVersionStatus::Current,
        TemporalVersionStatus::Ramping,
        TemporalVersionStatus::Draining,
        TemporalVersionStatus::Drained,
    ])
}

fn version(build: String) -> impl Gen<Value = VersionState> {
    (
        status(),
        opt_time(),
        opt_time(),
        opt_time(),
        prop::option::of(prop::sample::select(vec![0u64, 0, 1, 7])),
    )
        .prop_map(
            move |(status, drained, last_current, first, pinned)| VersionState {
                build_id: build.clone(),
                status,
                drainage_changed_at: drained,
                last_current_at: last_current,
                first_activation_at: first,
                open_pinned_workflows: pinned,
                pinned: None,
                pinned_asked: Default::default(),
            },
        )
}

fn deployment(build: String) -> impl Gen<Value = ObservedDeployment> {
    (
        prop::option::of(0i32..4),
        0i32..4,
        0i32..4,
        opt_time(),
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            move |(
                replicas,
                status_replicas,
                ready,
                healthy_since,
                tpl,
                conn,
                deleting,
                stalled,
            )| {
                ObservedDeployment {
                    name: format!("w-{build}"),
                    build_id: build.clone(),
                    replicas,
                    status_replicas,
                    ready_replicas: ready.min(status_replicas),
                    healthy_since,
                    pod_template_hash: Some(if tpl { "tpl" } else { "old" }.into()),
                    connection_hash: Some(if conn { "conn" } else { "old" }.into()),
                    connection_ref: Some("Connection/temporal".into()),
                    template_record: None,
                    connection_record: None,
                    rolled_in_place: stalled,
                    progress_deadline_exceeded: stalled,
                    deleting,
                    autoscaled: false,
                    autoscaler_present: false,
                    created_at: Some(ago(86_400)),
                    scaled_down_at: None,
                    settings: None,
                    restarted: None,
                }
            },
        )
}

fn strategy() -> impl Gen<Value = Rollout> {
    prop_oneof![
        Just(Rollout::Manual),
        Just(Rollout::AllAtOnce),
        prop::collection::vec((1u32..100, 0u64..3600), 0..4).prop_map(|steps| {
            Rollout::Progressive(
                steps
                    .into_iter()
                    .map(|(p, s)| Step {
                        ramp_percentage: p as f32,
                        pause: Duration::from_secs(s),
                    })
                    .collect(),
            )
        }),
    ]
}

fn desired() -> impl Gen<Value = Desired> {
    (
        build(),
        // Zero is refused at admission (CEL on spec.replicas).
        prop::option::of(1i32..5),
        strategy(),
        any::<bool>(),
        0u64..7200,
        0u64..7200,
        any::<bool>(),
        0usize..6,
        0u64..7200,
        prop::option::of(0u64..7200),
        prop::option::of(0u64..7200),
    )
        .prop_map(
            |(
                build_id,
                replicas,
                strategy,
                gate,
                scaledown,
                delete,
                custom,
                max,
                rollback,
                cancel,
                terminate,
            )| {
                Desired {
                    build_id,
                    replicas,
                    strategy,
                    gate: gate.then(|| Gate {
                        workflow_type: "Check".into(),
                    }),
                    scaledown_delay: Duration::from_secs(scaledown),
                    delete_delay: Duration::from_secs(delete),
                    pod_template_hash: "tpl".into(),
                    custom_build_id: custom,
                    deployment_settings: None,
                    mutable_images: vec![],
                    max_versions_ineligible_for_deletion: max,
                    rollback_window: Duration::from_secs(rollback),
                    cancel_pinned_after: cancel.map(Duration::from_secs),
                    terminate_pinned_after: terminate.map(Duration::from_secs),
                    upgrade_signal: gate.then(|| "upgrade".into()),
                    control: Control::default(),
                    analysis: None,
                    step_gates: vec![],
                    progress_deadline: std::time::Duration::from_secs(600),
                    abort_on_failure: false,
                    generation: 1,
                    adopt: None,
                }
            },
        )
}

fn routing() -> impl Gen<Value = RoutingState> {
    (
        prop::option::of(build()),
        prop::option::of(build()),
        0u32..101,
        opt_time(),
        opt_time(),
        any::<bool>(),
    )
        .prop_map(
            |(current, ramping, pct, changed, pct_changed, in_progress)| {
                let ramping = ramping.filter(|r| current.as_ref() != Some(r));
                RoutingState {
                    current_changed_at: current.as_ref().and(changed),
                    current_build_id: current,
                    ramp_percentage: if ramping.is_some() { pct as f32 } else { 0.0 },
                    ramping_changed_at: ramping.as_ref().and(changed),
                    ramp_percentage_changed_at: ramping.as_ref().and(pct_changed),
                    ramping_build_id: ramping,
                    update_in_progress: in_progress,
                }
            },
        )
}

/// Each build independently may have a Deployment and may be known to Temporal.
fn per_build() -> impl Gen<Value = (Vec<ObservedDeployment>, Vec<VersionState>)> {
    let one = |b: &'static str| {
        (
            prop::option::of(deployment(b.to_string())),
            prop::option::of(version(b.to_string())),
        )
    };
    (
        one(BUILDS[0]),
        one(BUILDS[1]),
        one(BUILDS[2]),
        one(BUILDS[3]),
        one(BUILDS[4]),
    )
        .prop_map(|(a, b, c, d, e)| {
            let mut deps = Vec::new();
            let mut vers = Vec::new();
            for (dep, ver) in [a, b, c, d, e] {
                deps.extend(dep);
                vers.extend(ver);
            }
            (deps, vers)
        })
}

fn gate_status() -> impl Gen<Value = GateWorkflowStatus> {
    prop::sample::select(vec![
        GateWorkflowStatus::Running,
        GateWorkflowStatus::Completed,
        GateWorkflowStatus::Failed,
    ])
}

prop_compose! {
    fn plan_input()(
        desired in desired(),
        (deployments, versions) in per_build(),
        exists in prop::bool::weighted(0.9),
        routing in routing(),
        manager in prop::sample::select(vec!["", "me", "someone-else"]),
        gates in prop::collection::vec((prop::sample::select(vec!["q1", "q2"]), gate_status()), 0..3),
        queues in prop::sample::select(vec![vec![], vec!["q1"], vec!["q1", "q2"]]),
        unversioned in any::<bool>(),
    ) -> PlanInput {
        let exists = exists || !versions.is_empty();
        PlanInput {
            desired,
            deployments,
            temporal: WorkerDeploymentState {
                exists,
                conflict_token: b"tok".to_vec(),
                manager_identity: manager.into(),
                last_modifier_identity: String::new(),
                last_routing_install: None,
                routing: if exists { routing } else { RoutingState::default() },
                versions: if exists { versions } else { Vec::new() },
            },
            gates: gates
                .into_iter()
                .map(|(q, status)| GateObservation {
                    workflow_id: format!("gate-{q}"),
                    run_id: "run".into(),
                    task_queue: q.into(),
                    status,
                    started_at: None,
                })
                .collect(),
            target_task_queues: queues.into_iter().map(str::to_string).collect(),
            unversioned_pollers_on_all_queues: unversioned,
            connection_hash: "conn".into(),
            predecessor_connection_hash: "go-conn".into(),
            connection_ref: "Connection/temporal".into(),
            recorded_connections: Default::default(),
            succession: Default::default(),
            analysis: None,
            step_gates: vec![],
            controller_identity: "me".into(),
            install_id: String::new(),
            fast_poll: Duration::from_secs(1),
            delayed_by_budget: None,
            pollers: Default::default(),
            current_task_queues: vec![],
            target_pods: None,
            retired: vec![],
            adopted: None,
            now: ago(0),
        }
    }
}

/// Why `build` must keep its workers, if it must.
fn protected(input: &PlanInput, build: &str) -> Option<String> {
    let routing = &input.temporal.routing;
    if routing.current_build_id.as_deref() == Some(build) {
        return Some("routing's current version".into());
    }
    if routing.ramping_build_id.as_deref() == Some(build) {
        return Some("routing's ramping version".into());
    }
    let v = input.temporal.version(build)?;
    match v.status {
        TemporalVersionStatus::Current
        | TemporalVersionStatus::Ramping
        | TemporalVersionStatus::Draining => Some(format!("Temporal reports it {:?}", v.status)),
        _ if v.open_pinned_workflows != Some(0) => Some(format!(
            "open pinned workflows: {:?}",
            v.open_pinned_workflows
        )),
        _ => None,
    }
}

/// Registered in Temporal, with an Available Deployment that has ready pods, and no live
/// Deployment of the build whose roll to the current Connection stalled.
fn has_ready_pollers(input: &PlanInput, build: &str) -> bool {
    let live = || {
        input
            .deployments
            .iter()
            .filter(move |d| d.build_id == build && !d.deleting)
    };
    let stalled = live().any(|d| {
        d.rolled_in_place
            && d.progress_deadline_exceeded
            && d.connection_hash.as_deref() == Some(input.connection_hash.as_str())
    });
    input.temporal.version(build).is_some()
        && live().any(|d| d.ready_replicas > 0 && d.healthy_since.is_some())
        && !stalled
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn no_plan_retires_a_protected_version(input in plan_input()) {
        let p = plan(&input);
        for s in p.scale.iter().filter(|s| s.replicas == 0) {
            if let Some(why) = protected(&input, &s.build_id) {
                prop_assert!(false, "scaled {} to 0 although {why}: {p:?}", s.build_id);
            }
        }
        for d in &p.delete {
            if let Some(why) = protected(&input, &d.build_id) {
                prop_assert!(false, "deleted {} although {why}: {p:?}", d.build_id);
            }
        }
    }

    #[test]
    fn no_plan_ends_workflows_of_a_version_that_is_not_draining(input in plan_input()) {
        let p = plan(&input);
        let routed = match &p.routing {
            Some(RoutingChange::SetCurrent { build_id })
            | Some(RoutingChange::SetRamping { build_id, .. }) => Some(build_id),
            Some(RoutingChange::ClearRamp) | None => None,
        };
        for end in &p.pinned_batches {
            let status = input.temporal.version(&end.build_id).map(|v| v.status);
            prop_assert!(
                status == Some(TemporalVersionStatus::Draining),
                "ends workflows of {} which Temporal reports {status:?}: {p:?}",
                end.build_id
            );
            prop_assert!(end.build_id != input.desired.build_id, "ends the target's workflows: {p:?}");
            prop_assert!(Some(&end.build_id) != routed, "ends workflows of the version it routes to: {p:?}");
        }
    }

    #[test]
    fn no_plan_deletes_a_record_it_did_not_run_or_with_open_workflows(
        input in plan_input(),
        mask in any::<u16>(),
    ) {
        let mut input = input;
        input.retired = input
            .temporal
            .versions
            .iter()
            .enumerate()
            .filter(|(k, _)| mask & (1 << (k % 16)) != 0)
            .map(|(_, v)| v.build_id.clone())
            .collect();
        let p = plan(&input);
        for build in &p.forget_versions {
            prop_assert!(input.retired.contains(build), "forgets {build}, not in the ledger: {p:?}");
            prop_assert!(
                !input.deployments.iter().any(|d| &d.build_id == build),
                "forgets {build}, which has a Deployment: {p:?}"
            );
            prop_assert!(
                input.temporal.version(build).and_then(|v| v.open_pinned_workflows) == Some(0),
                "forgets {build} without a visibility count of 0: {p:?}"
            );
        }
    }

    #[test]
    fn no_plan_routes_to_a_version_without_ready_pollers(input in plan_input()) {
        let p = plan(&input);
        let routed = match &p.routing {
            Some(RoutingChange::SetCurrent { build_id })
            | Some(RoutingChange::SetRamping { build_id, .. }) => Some(build_id),
            Some(RoutingChange::ClearRamp) | None => None,
        };
        if let Some(build) = routed {
            prop_assert!(
                has_ready_pollers(&input, build),
                "routes to {build} without ready pollers: {p:?}"
            );
        }
    }
}

#[test]
fn the_clock_fixture_is_the_shared_now() {
    assert_eq!(ago(0), crate::fixtures::ts(crate::fixtures::NOW));
    assert_eq!(ago(60), ago(0) - SignedDuration::from_secs(60));
}
