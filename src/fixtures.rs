//! Test fixtures shared by every unit test: builders on the CRD and on the planner's types,
//! so each test states only what differs from a typical rollout.

use std::time::Duration;

use jiff::Timestamp;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};

use crate::api::twd::{
    GateSpec, GateWorkflowStatus, LocalRef, RolloutSpec, RolloutStep, RolloutStrategy, SunsetSpec,
    TemporalWorkerDeploymentSpec, TemporalWorkerDeploymentStatus, WorkerOptions,
};
use crate::api::{LABEL_BUILD_ID, TemporalWorkerDeployment};
use crate::planner::model::{Desired, ObservedDeployment, PlanInput, Strategy};
use crate::temporal::state::{
    GateObservation, RoutingState, TemporalVersionStatus, VersionState, WorkerDeploymentState,
};

/// The "now" of planner and status fixtures.
pub const NOW: &str = "2026-03-02T12:00:00Z";
/// The controller identity of planner and status fixtures.
pub const ME: &str = "release/ns-uid";
/// The install ID of planner and status fixtures.
pub const INSTALL: &str = "install-a";

pub fn ts(s: &str) -> Timestamp {
    s.parse().expect("fixture timestamp")
}

/// `secs` before [`NOW`].
pub fn ago(secs: i64) -> Timestamp {
    ts(NOW) - jiff::SignedDuration::from_secs(secs)
}

pub fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

/// A container with literal env values (no `env` at all when `env` is empty).
fn container(name: &str, image: &str, env: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        env: (!env.is_empty()).then(|| {
            env.iter()
                .map(|(name, value)| EnvVar {
                    name: name.to_string(),
                    value: Some(value.to_string()),
                    value_from: None,
                })
                .collect()
        }),
        ..Default::default()
    }
}

impl TemporalWorkerDeployment {
    /// `shop/orders`: two replicas of `orders:v1` on Connection `prod`, Temporal namespace
    /// `orders-ns`, AllAtOnce, no gate.
    pub fn test() -> Self {
        let mut twd = TemporalWorkerDeployment::new(
            "orders",
            TemporalWorkerDeploymentSpec {
                replicas: Some(2),
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        containers: vec![container(
                            "worker",
                            "orders:v1",
                            &[("LOG_LEVEL", "info")],
                        )],
                        ..Default::default()
                    }),
                },
                min_ready_seconds: None,
                rollout: RolloutSpec {
                    strategy: RolloutStrategy::AllAtOnce,
                    steps: vec![],
                    gate: None,
                },
                sunset: SunsetSpec::default(),
                worker_options: WorkerOptions {
                    connection_ref: LocalRef {
                        name: "prod".into(),
                    },
                    temporal_namespace: "orders-ns".into(),
                    custom_build_id: None,
                },
            },
        );
        twd.metadata.namespace = Some("shop".into());
        twd.metadata.uid = Some("uid-123".into());
        twd
    }

    /// The `worker` container runs `image`.
    pub fn image(mut self, image: &str) -> Self {
        self.pod_spec().containers[0].image = Some(image.into());
        self
    }

    pub fn min_ready_seconds(mut self, seconds: i32) -> Self {
        self.spec.min_ready_seconds = Some(seconds);
        self
    }

    pub fn custom_build_id(mut self, build_id: &str) -> Self {
        self.spec.worker_options.custom_build_id = Some(build_id.into());
        self
    }

    /// A pod template with everything rendering must keep: user labels (one of them a label
    /// the controller owns) and annotations, a `sidecar` container without env, an `init`
    /// container and a `scratch` volume.
    pub fn full_pod(mut self) -> Self {
        self.spec.template.metadata = Some(ObjectMeta {
            labels: Some(BTreeMap::from([
                ("app".to_string(), "worker".to_string()),
                (
                    LABEL_BUILD_ID.to_string(),
                    "user-tries-to-set-this".to_string(),
                ),
            ])),
            annotations: Some(BTreeMap::from([(
                "team".to_string(),
                "payments".to_string(),
            )])),
            ..Default::default()
        });
        let pod = self.pod_spec();
        pod.containers.push(container("sidecar", "envoy:1", &[]));
        pod.init_containers = Some(vec![container("init", "busybox", &[("INIT", "1")])]);
        pod.volumes = Some(vec![Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        }]);
        self
    }

    fn pod_spec(&mut self) -> &mut PodSpec {
        self.spec.template.spec.as_mut().expect("fixture pod spec")
    }

    /// This strategy, with no steps.
    pub fn strategy(mut self, strategy: RolloutStrategy) -> Self {
        self.spec.rollout.strategy = strategy;
        self.spec.rollout.steps.clear();
        self
    }

    /// Progressive with `(ramp %, pause)` steps.
    pub fn progressive(mut self, steps: &[(i32, &str)]) -> Self {
        self.spec.rollout.strategy = RolloutStrategy::Progressive;
        self.spec.rollout.steps = steps
            .iter()
            .map(|&(ramp_percentage, pause)| RolloutStep {
                ramp_percentage,
                pause_duration: pause.into(),
            })
            .collect();
        self
    }

    /// A gate workflow with inline input.
    pub fn gated(mut self, workflow_type: &str, input: serde_json::Value) -> Self {
        self.spec.rollout.gate = Some(GateSpec {
            workflow_type: workflow_type.into(),
            input: Some(input),
            input_from: None,
        });
        self
    }

    pub fn generation(mut self, generation: i64) -> Self {
        self.metadata.generation = Some(generation);
        self
    }

    /// Deletion requested (the timestamp is the epoch's first second).
    pub fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(1).expect("epoch")));
        self
    }

    /// Status with these `(type, status, reason)` conditions, observed at `observed`.
    pub fn with_conditions(mut self, observed: i64, conditions: &[(&str, &str, &str)]) -> Self {
        let conditions = conditions
            .iter()
            .map(|(type_, status, reason)| Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: "m".into(),
                observed_generation: Some(observed),
                last_transition_time: Time(ts("2024-01-01T00:00:00Z")),
            })
            .collect();
        self.status = Some(TemporalWorkerDeploymentStatus {
            observed_generation: Some(observed),
            conditions,
            ..Default::default()
        });
        self
    }
}

impl ObservedDeployment {
    /// `w-<build>`: healthy for 10 minutes, `replicas` ready, up-to-date hashes (`tpl`, `conn`).
    pub fn test(build: &str, replicas: i32) -> Self {
        ObservedDeployment {
            name: format!("w-{build}"),
            build_id: build.into(),
            replicas: Some(replicas),
            status_replicas: replicas,
            ready_replicas: replicas,
            healthy_since: (replicas > 0).then(|| ago(600)),
            pod_template_hash: Some("tpl".into()),
            connection_hash: Some("conn".into()),
            rolled_in_place: false,
            progress_deadline_exceeded: false,
            deleting: false,
            autoscaled: false,
            created_at: Some(ago(86_400)),
        }
    }
}

impl VersionState {
    /// First activated a day ago; no drainage or current history; counted: no open pinned workflows.
    pub fn test(build: &str, status: TemporalVersionStatus) -> Self {
        VersionState {
            build_id: build.into(),
            status,
            drainage_changed_at: None,
            last_current_at: None,
            first_activation_at: Some(ago(86_400)),
            open_pinned_workflows: Some(0),
        }
    }
}

impl VersionState {
    /// Drained since `since`; otherwise as [`VersionState::test`].
    pub fn drained(build: &str, since: Timestamp) -> Self {
        VersionState {
            drainage_changed_at: Some(since),
            ..VersionState::test(build, TemporalVersionStatus::Drained)
        }
    }
}

impl GateObservation {
    /// The gate workflow of target `v2` on task queue `queue`.
    pub fn test(queue: &str, status: GateWorkflowStatus) -> Self {
        GateObservation {
            workflow_id: format!("test-ns/w:v2-{queue}"),
            run_id: "run".into(),
            task_queue: queue.into(),
            status,
        }
    }
}

impl PlanInput {
    /// v1 is Current with 3 ready pods; v2 (the target, AllAtOnce) is registered, Inactive and
    /// healthy. Fast poll 1 s.
    pub fn test() -> Self {
        PlanInput {
            desired: Desired {
                build_id: "v2".into(),
                replicas: Some(3),
                strategy: Strategy::AllAtOnce,
                gate: None,
                scaledown_delay: hours(1),
                delete_delay: hours(24),
                pod_template_hash: "tpl".into(),
                custom_build_id: false,
                max_versions_ineligible_for_deletion: 75,
                rollback_window: hours(1),
            },
            deployments: vec![
                ObservedDeployment::test("v1", 3),
                ObservedDeployment::test("v2", 3),
            ],
            temporal: WorkerDeploymentState {
                exists: true,
                conflict_token: b"tok".to_vec(),
                manager_identity: ME.into(),
                last_modifier_identity: ME.into(),
                last_routing_install: None,
                routing: RoutingState {
                    current_build_id: Some("v1".into()),
                    current_changed_at: Some(ago(86_400)),
                    ..Default::default()
                },
                versions: vec![
                    VersionState::test("v1", TemporalVersionStatus::Current),
                    VersionState::test("v2", TemporalVersionStatus::Inactive),
                ],
            },
            gates: vec![],
            target_task_queues: vec!["q1".into()],
            unversioned_pollers_on_all_queues: false,
            connection_hash: "conn".into(),
            controller_identity: ME.into(),
            install_id: INSTALL.into(),
            fast_poll: Duration::from_secs(1),
            now: ts(NOW),
        }
    }

    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.desired.strategy = strategy;
        self
    }
}
