//! Test fixtures shared by every unit test: builders on the CRD and on the planner's types,
//! so each test states only what differs from a typical rollout.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use jiff::Timestamp;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};

use crate::api::twd::{
    ConnectionRef, GateSpec, GateWorkflowStatus, RolloutSpec, RolloutStep, RolloutStrategy,
    SunsetSpec, TemporalWorkerDeploymentSpec, TemporalWorkerDeploymentStatus, WorkerOptions,
};
use crate::api::{LABEL_BUILD_ID, TemporalWorkerDeployment};
use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::milestones::Milestones;
use crate::planner::model::{Desired, ObservedDeployment, PlanInput, Strategy};
use crate::reconciler::services::Services;
use crate::temporal::ClientPool;
use crate::temporal::state::{
    GateObservation, RoutingState, TemporalVersionStatus, VersionState, WorkerDeploymentState,
};
use crate::worker_deployment::validate::ControllerSettings;
use crate::worker_deployment::{Context, Settings};

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
                    paused: false,
                    abort: false,
                    analysis: None,
                    on_failure: Default::default(),
                },
                sunset: SunsetSpec::default(),
                worker_options: WorkerOptions {
                    connection_ref: ConnectionRef::named("prod"),
                    temporal_namespace: "orders-ns".into(),
                    custom_build_id: None,
                    unsafe_custom_build_id: None,
                },
                progress_deadline_seconds: None,
                deployment: None,
                deployment_metadata: None,
                adopt: None,
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
                gate: None,
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
            connection_ref: Some("Connection/temporal".into()),
            template_record: None,
            connection_record: None,
            rolled_in_place: false,
            progress_deadline_exceeded: false,
            deleting: false,
            autoscaled: false,
            autoscaler_present: false,
            created_at: Some(ago(86_400)),
            scaled_down_at: None,
            settings: None,
            restarted: None,
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
            pinned: None,
            pinned_asked: Default::default(),
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
            started_at: None,
        }
    }
}

impl crate::planner::model::Analysis {
    /// Every 30 s; fail above 20 % or 5 points above current; 10 workflows at least; hold an
    /// inconclusive step 5 min, then pass.
    pub fn test() -> Self {
        crate::planner::model::Analysis {
            interval: Duration::from_secs(30),
            max_failure_rate: Some(20.0),
            max_failure_rate_increase: Some(5.0),
            min_sample_size: 10,
            workflow_types: vec![],
            max_inconclusive: Duration::from_secs(300),
            inconclusive_passes: true,
            dry_run: false,
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
                deployment_settings: None,
                mutable_images: vec![],
                max_versions_ineligible_for_deletion: 75,
                rollback_window: hours(1),
                cancel_pinned_after: None,
                terminate_pinned_after: None,
                upgrade_signal: None,
                control: crate::planner::model::Control::default(),
                analysis: None,
                step_gates: vec![],
                progress_deadline: std::time::Duration::from_secs(600),
                abort_on_failure: false,
                generation: 1,
                adopt: None,
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
            predecessor_connection_hash: "go-conn".into(),
            connection_ref: "Connection/temporal".into(),
            recorded_connections: Default::default(),
            succession: Default::default(),
            analysis: None,
            step_gates: vec![],
            controller_identity: ME.into(),
            install_id: INSTALL.into(),
            fast_poll: Duration::from_secs(1),
            delayed_by_budget: None,
            pollers: Default::default(),
            current_task_queues: vec![],
            target_pods: None,
            retired: vec![],
            adopted: None,
            now: ts(NOW),
        }
    }

    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.desired.strategy = strategy;
        self
    }
}

/// A Kubernetes client pointing at a closed port: any I/O fails.
pub fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
    kube::Client::try_from(config).expect("client")
}

/// Services whose Kubernetes client points at a closed port (any I/O fails), acting as [`ME`]
/// with install ID [`INSTALL`], and the sender of their leadership.
pub fn offline_services(leads: bool) -> (Services, watch::Sender<bool>) {
    let client = offline_client();
    let metrics = Arc::new(Metrics::new());
    let events = EventSink::new(
        client.clone(),
        None,
        Arc::new(Milestones::default()),
        metrics.clone(),
    );
    let (leader_tx, leader) = watch::channel(leads);
    let mut services = Services::new(
        client,
        leader,
        metrics,
        events,
        Arc::new(ClientPool::new()),
        ME.into(),
    );
    services.install_id = INSTALL.into();
    (services, leader_tx)
}

/// A context whose Kubernetes client points at a closed port: any I/O would fail, and a
/// failed reconcile would ask to be retried rather than to wait for a change.
pub fn offline_context(leads: bool) -> (Arc<Context>, watch::Sender<bool>) {
    let (services, leader_tx) = offline_services(leads);
    let settings = Settings {
        succession: Default::default(),
        controller_version: "test".into(),
        idle_interval: std::time::Duration::from_secs(300),
        rest_interval: std::time::Duration::from_secs(300),
        fast_poll: std::time::Duration::from_secs(2),
        planner: ControllerSettings::default(),
        max_concurrent_reconciles: 0,
        budget_delay_report: std::time::Duration::from_secs(5),
        backlog_scope: crate::backlog::Scope::Consumed,
        pollers: Default::default(),
    };
    let ctx = Context::new(Arc::new(services), settings, broadcast::channel(4).0);
    (Arc::new(ctx), leader_tx)
}

impl crate::api::twd::VersionInfo {
    /// A version in status with nothing but its build ID and status.
    pub fn test(build: &str, status: crate::api::twd::VersionStatus) -> Self {
        crate::api::twd::VersionInfo {
            build_id: build.into(),
            status,
            deployment: None,
            deployment_name: None,
            task_queues: Vec::new(),
            managed_by: None,
            healthy_since: None,
            replicas: None,
            ready_replicas: None,
        }
    }
}

impl crate::api::twd::TargetVersion {
    /// A target in status with nothing but its build ID and status (no ramp, no step).
    pub fn test(build: &str, status: crate::api::twd::VersionStatus) -> Self {
        crate::api::twd::TargetVersion {
            version: crate::api::twd::VersionInfo::test(build, status),
            ramp_percentage: None,
            ramping_since: None,
            ramp_last_modified_at: None,
            current_step: None,
            step_started_at: None,
            next_step_at: None,
            gate_workflows: vec![],
            test_workflows: vec![],
        }
    }
}

impl crate::api::twd::DeprecatedVersion {
    /// An old version in status with nothing but its build ID and status.
    pub fn test(build: &str, status: crate::api::twd::VersionStatus) -> Self {
        crate::api::twd::DeprecatedVersion {
            version: crate::api::twd::VersionInfo::test(build, status),
            drained_since: None,
            scaledown_at: None,
            delete_at: None,
            eligible_for_deletion: false,
            draining_since: None,
            open_pinned_workflows: None,
            oldest_pinned_workflows: Vec::new(),
            upgrade_signalled_at: None,
            pinned_cancel_requested_at: None,
            pinned_terminate_requested_at: None,
            pinned_workflows_end_at: None,
            waiting_for: None,
        }
    }
}
