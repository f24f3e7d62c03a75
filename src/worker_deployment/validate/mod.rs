//! The validate stage: spec validation and conversion into the planner's [`Desired`].
//!
//! The CRD schema and its CEL rules catch most mistakes at admission, but they can be
//! bypassed (older CRD installed, schema-less clients, CRD edited by hand), so the
//! controller checks everything again before acting. Every problem is reported at once,
//! each prefixed with its field path, so a user can fix the spec in one go.

mod control;
mod problems;
mod rollout;
mod template;

use std::time::Duration;

use crate::api::duration;
use crate::api::twd::{MAX_NAME_LEN, TemporalWorkerDeployment};
use crate::build_id;
use crate::planner::model::{Desired, Gate};

pub use control::parse_skip_step;
pub use problems::InvalidSpec;
pub use rollout::{MAX_STEPS, MIN_PAUSE};
pub use template::mutable_images;

use control::{check_control, control};
use problems::{Problems, optional, parse};
use rollout::{analysis, check_analysis, check_rollout, strategy};
use template::check_template;

/// Controller-wide settings that shape the planner's decisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSettings {
    /// Create no new Deployment while this many versions are not yet eligible for deletion.
    pub max_versions_ineligible_for_deletion: usize,
    /// A target that was Current within this window is promoted at once (rollback).
    pub rollback_window: Duration,
    /// The progress deadline of a WorkerDeployment without `spec.progressDeadlineSeconds`.
    pub default_progress_deadline: Duration,
}

impl Default for ControllerSettings {
    /// The Go controller's defaults.
    fn default() -> Self {
        Self {
            max_versions_ineligible_for_deletion: 75,
            rollback_window: Duration::from_secs(3600),
            default_progress_deadline: DEFAULT_PROGRESS_DEADLINE,
        }
    }
}

/// The progress deadline when neither the spec nor the controller's flag sets one: the
/// Kubernetes Deployment default.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

/// Checks everything the controller relies on; see the module docs.
/// Why `spec.replicas: 0` is refused, and what to do instead (also the CEL rule's message).
pub const REPLICAS_ZERO: &str = "spec.replicas must be at least 1: with 0 the Current version has no workers while \
    Temporal keeps routing new workflows to it, so they would wait forever. To stop these workers, delete the \
    TemporalWorkerDeployment (routing goes back to unversioned workers first); to let an autoscaler own replicas, \
    leave spec.replicas unset";

pub fn validate(twd: &TemporalWorkerDeployment) -> Result<(), InvalidSpec> {
    let mut p = Problems::default();
    check(twd, &mut p);
    p.into_result()
}

/// The validate stage: checks `twd` once, then converts it into the planner's view.
pub fn desired(
    twd: &TemporalWorkerDeployment,
    settings: &ControllerSettings,
) -> Result<Desired, InvalidSpec> {
    validate(twd)?;
    let spec = &twd.spec;
    // Refused at admission too (CEL on spec.replicas); an object stored before that rule
    // keeps its 0 through CEL ratcheting, and must never scale the Current version to zero.
    if spec.replicas == Some(0) {
        return Err(InvalidSpec {
            message: REPLICAS_ZERO.to_string(),
        });
    }
    let custom = spec.worker_options.build_id_pin();
    let build_id = build_id::compute(&spec.template, custom).map_err(|e| InvalidSpec {
        message: e.to_string(),
    })?;
    Ok(Desired {
        build_id,
        replicas: spec.replicas,
        strategy: strategy(spec)?,
        gate: spec.rollout.gate.as_ref().map(|g| Gate {
            workflow_type: g.workflow_type.clone(),
        }),
        scaledown_delay: parse("spec.sunset.scaledownDelay", &spec.sunset.scaledown_delay)?,
        delete_delay: parse("spec.sunset.deleteDelay", &spec.sunset.delete_delay)?,
        pod_template_hash: build_id::pod_template_hash(&spec.template),
        custom_build_id: custom.is_some(),
        deployment_settings: crate::render::settings::record(spec),
        mutable_images: mutable_images(&spec.template),
        max_versions_ineligible_for_deletion: settings.max_versions_ineligible_for_deletion,
        rollback_window: settings.rollback_window,
        cancel_pinned_after: optional(&spec.sunset.cancel_pinned_after)?,
        terminate_pinned_after: optional(&spec.sunset.terminate_pinned_after)?,
        upgrade_signal: spec.sunset.upgrade_signal.clone(),
        control: control(twd),
        progress_deadline: spec
            .progress_deadline()
            .and_then(|s| u64::try_from(s).ok())
            .filter(|s| *s > 0)
            .map_or(settings.default_progress_deadline, Duration::from_secs),
        abort_on_failure: spec.rollout.on_failure == crate::api::twd::OnFailure::Abort,
        generation: twd.metadata.generation.unwrap_or_default(),
        adopt: twd
            .spec
            .adopt
            .as_ref()
            .map(|a| crate::planner::adoption::Adopt {
                deployment_name: a.deployment_name.clone(),
                delete: a.after_adoption == crate::api::adopt::AfterAdoption::Delete,
            }),
        step_gates: spec
            .rollout
            .steps
            .iter()
            .map(|s| {
                s.gate.as_ref().map(|g| Gate {
                    workflow_type: g.workflow_type.clone(),
                })
            })
            .collect(),
        analysis: spec.rollout.analysis.as_ref().map(analysis).transpose()?,
    })
}

fn check(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let name = twd.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        p.add("metadata.name", "must be set");
    }
    if name.contains('.') {
        p.add(
            "metadata.name",
            format!(
                "{name:?} must not contain '.': Temporal rejects '.' in worker deployment names \
                 (<namespace>/<name>)"
            ),
        );
    }
    if name.len() > MAX_NAME_LEN {
        p.add(
            "metadata.name",
            format!(
                "must be at most {MAX_NAME_LEN} characters, got {}",
                name.len()
            ),
        );
    }

    let spec = &twd.spec;
    if let Some(r) = spec.replicas
        && r < 0
    {
        p.add("spec.replicas", format!("must not be negative, got {r}"));
    }
    if let Some(s) = spec.min_ready()
        && s < 0
    {
        p.add(
            "spec.minReadySeconds",
            format!("must not be negative, got {s}"),
        );
    }
    check_template(twd, p);
    for (path, message) in crate::render::settings::problems(spec) {
        p.add(path, message);
    }
    check_rollout(twd, p);
    check_control(twd, p);
    check_analysis(twd, p);
    check_sunset(twd, p);

    let opts = &spec.worker_options;
    if opts.connection_ref.name.is_empty() {
        p.add(
            "spec.workerOptions.connectionRef.name",
            "must name a Connection",
        );
    }
    if opts.temporal_namespace.trim().is_empty() {
        p.add("spec.workerOptions.temporalNamespace", "must not be empty");
    }
    if opts.custom_build_id.is_some() && opts.unsafe_custom_build_id.is_some() {
        p.add(
            "spec.workerOptions.unsafeCustomBuildID",
            "is an alias of customBuildID: set one of them",
        );
    }
    if let Some(custom) = opts.build_id_pin()
        && let Err(e) = build_id::compute(&spec.template, Some(custom))
    {
        // The error text already carries the field path.
        p.add_whole(e);
    }
}

fn check_sunset(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let sunset = &twd.spec.sunset;
    for (path, value) in [
        ("spec.sunset.scaledownDelay", Some(&sunset.scaledown_delay)),
        ("spec.sunset.deleteDelay", Some(&sunset.delete_delay)),
        (
            "spec.sunset.cancelPinnedAfter",
            sunset.cancel_pinned_after.as_ref(),
        ),
        (
            "spec.sunset.terminatePinnedAfter",
            sunset.terminate_pinned_after.as_ref(),
        ),
    ] {
        if let Some(Err(e)) = value.map(|v| duration::parse(v)) {
            p.add(path, format!("{e} (examples: 30m, 1h, 24h)"));
        }
    }
    if sunset
        .upgrade_signal
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        p.add(
            "spec.sunset.upgradeSignal",
            "must name a signal (or be left out)",
        );
    }
    let parsed = |v: &Option<String>| v.as_deref().and_then(|v| duration::parse(v).ok());
    if let (Some(cancel), Some(terminate)) = (
        parsed(&sunset.cancel_pinned_after),
        parsed(&sunset.terminate_pinned_after),
    ) && terminate <= cancel
    {
        p.add(
            "spec.sunset.terminatePinnedAfter",
            format!(
                "must be longer than cancelPinnedAfter ({}), so that cancelled workflows get time to clean up",
                sunset.cancel_pinned_after.as_deref().unwrap_or_default()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ENV_ADDRESS;
    use crate::api::twd::RolloutStrategy;
    use crate::api::twd::{GateInputSource, KeyRef, RolloutStep};
    use crate::api::{RESERVED_ENV, TLS_VOLUME};
    use crate::planner::model::{Gate, Step, Strategy};
    use k8s_openapi::api::core::v1::Container;
    use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};
    use std::time::Duration;

    fn step(pct: i32, pause: &str) -> RolloutStep {
        RolloutStep {
            ramp_percentage: pct,
            pause_duration: pause.into(),
            gate: None,
        }
    }

    /// The shared fixture, Progressive in three steps with a `Smoke` gate: every optional
    /// part of the spec set and valid.
    fn valid() -> TemporalWorkerDeployment {
        TemporalWorkerDeployment::test()
            .progressive(&[(10, "30s"), (50, "1m"), (90, "1h30m")])
            .gated("Smoke", serde_json::json!({"x": 1}))
    }

    /// The full message, for exact assertions.
    fn error_of(twd: &TemporalWorkerDeployment) -> String {
        match validate(twd) {
            Err(e) => e.message,
            Ok(()) => panic!("expected the spec to be rejected"),
        }
    }

    fn assert_rejected(twd: &TemporalWorkerDeployment, fragment: &str) {
        let message = error_of(twd);
        assert!(
            message.contains(fragment),
            "{message:?} does not contain {fragment:?}"
        );
        // `desired` must refuse exactly the same specs.
        assert_eq!(
            desired(twd, &ControllerSettings::default()).map(|_| ()),
            Err(InvalidSpec { message })
        );
    }

    #[test]
    fn a_valid_spec_passes() {
        assert_eq!(validate(&valid()), Ok(()));
        for strategy in [RolloutStrategy::Manual, RolloutStrategy::AllAtOnce] {
            let mut t = valid();
            t.spec.rollout.strategy = strategy;
            t.spec.rollout.steps.clear();
            t.spec.rollout.gate = None;
            assert_eq!(validate(&t), Ok(()));
        }
    }

    #[test]
    fn name_rules() {
        let mut t = valid();
        t.metadata.name = Some("orders.v2".into());
        assert_rejected(&t, "metadata.name: \"orders.v2\" must not contain '.'");
        t.metadata.name = Some("a".repeat(64));
        assert_rejected(&t, "metadata.name: must be at most 63 characters, got 64");
        t.metadata.name = Some("a".repeat(63));
        assert_eq!(validate(&t), Ok(()));
        t.metadata.name = None;
        assert_rejected(&t, "metadata.name: must be set");
    }

    #[test]
    fn steps_must_strictly_increase() {
        let mut t = valid();
        t.spec.rollout.steps = vec![step(25, "1m"), step(10, "1m")];
        assert_eq!(
            error_of(&t),
            "spec.rollout.steps[1].rampPercentage: must be greater than the previous step (25), got 10"
        );
        t.spec.rollout.steps = vec![step(25, "1m"), step(25, "1m")];
        assert_rejected(
            &t,
            "steps[1].rampPercentage: must be greater than the previous step (25), got 25",
        );
    }

    #[test]
    fn step_percentages_in_range() {
        let mut t = valid();
        t.spec.rollout.steps = vec![step(0, "1m")];
        assert_rejected(
            &t,
            "spec.rollout.steps[0].rampPercentage: must be between 1 and 99, got 0",
        );
        t.spec.rollout.steps = vec![step(50, "1m"), step(100, "1m")];
        assert_rejected(
            &t,
            "spec.rollout.steps[1].rampPercentage: must be between 1 and 99, got 100",
        );
        t.spec.rollout.steps = vec![step(1, "1m"), step(99, "1m")];
        assert_eq!(validate(&t), Ok(()));
    }

    #[test]
    fn pause_durations() {
        let mut t = valid();
        t.spec.rollout.steps = vec![step(10, "500ms")];
        assert_rejected(
            &t,
            "spec.rollout.steps[0].pauseDuration: must be at least 1s, got \"500ms\"",
        );
        t.spec.rollout.steps = vec![step(10, "5 minutes")];
        assert_rejected(
            &t,
            "spec.rollout.steps[0].pauseDuration: invalid duration \"5 minutes\"",
        );
        t.spec.rollout.steps = vec![step(10, "30")];
        assert_rejected(&t, "missing unit");
        t.spec.rollout.steps = vec![step(10, "1s")];
        assert_eq!(validate(&t), Ok(()));
    }

    #[test]
    fn step_count_limits() {
        let mut t = valid();
        t.spec.rollout.steps.clear();
        assert_rejected(
            &t,
            "spec.rollout.steps: a Progressive rollout needs at least one step",
        );
        t.spec.rollout.steps = (1..=21).map(|i| step(i, "1s")).collect();
        assert_rejected(
            &t,
            "spec.rollout.steps: at most 20 steps are allowed, got 21",
        );
        t.spec.rollout.steps.pop();
        assert_eq!(validate(&t), Ok(()));
    }

    #[test]
    fn gate_rules() {
        let mut t = valid();
        if let Some(g) = t.spec.rollout.gate.as_mut() {
            g.workflow_type = " ".into();
        }
        assert_rejected(&t, "spec.rollout.gate.workflowType: must not be empty");

        let key = KeyRef {
            name: "cm".into(),
            key: "input.json".into(),
        };
        let mut t = valid();
        if let Some(g) = t.spec.rollout.gate.as_mut() {
            g.input_from = Some(GateInputSource {
                config_map_key_ref: Some(key.clone()),
                secret_key_ref: None,
            });
        }
        assert_rejected(
            &t,
            "spec.rollout.gate: only one of input or inputFrom may be set",
        );

        if let Some(g) = t.spec.rollout.gate.as_mut() {
            g.input = None;
        }
        assert_eq!(validate(&t), Ok(()));

        for (cm, secret, got) in [(None, None, 0), (Some(key.clone()), Some(key.clone()), 2)] {
            if let Some(g) = t.spec.rollout.gate.as_mut() {
                g.input_from = Some(GateInputSource {
                    config_map_key_ref: cm,
                    secret_key_ref: secret,
                });
            }
            assert_rejected(
                &t,
                &format!(
                    "spec.rollout.gate.inputFrom: exactly one of configMapKeyRef or secretKeyRef must be set, got {got}"
                ),
            );
        }

        if let Some(g) = t.spec.rollout.gate.as_mut() {
            g.input_from = Some(GateInputSource {
                config_map_key_ref: None,
                secret_key_ref: Some(KeyRef {
                    name: String::new(),
                    key: "k".into(),
                }),
            });
        }
        assert_rejected(
            &t,
            "spec.rollout.gate.inputFrom.secretKeyRef.name: must not be empty",
        );
    }

    #[test]
    fn sunset_durations_parse() {
        let mut t = valid();
        t.spec.sunset.scaledown_delay = "1 hour".into();
        t.spec.sunset.delete_delay = "-5m".into();
        let message = error_of(&t);
        assert!(
            message.contains("spec.sunset.scaledownDelay: invalid duration \"1 hour\""),
            "{message}"
        );
        assert!(
            message.contains("spec.sunset.deleteDelay: invalid duration \"-5m\""),
            "{message}"
        );
    }

    #[test]
    fn pinned_workflow_timeouts_parse_and_terminate_comes_after_cancel() {
        let mut t = valid();
        t.spec.sunset.cancel_pinned_after = Some("soon".into());
        let message = error_of(&t);
        assert!(
            message.contains("spec.sunset.cancelPinnedAfter: invalid duration \"soon\""),
            "{message}"
        );
        t.spec.sunset.cancel_pinned_after = Some("2h".into());
        t.spec.sunset.terminate_pinned_after = Some("90m".into());
        let message = error_of(&t);
        assert!(
            message.contains(
                "spec.sunset.terminatePinnedAfter: must be longer than cancelPinnedAfter (2h)"
            ),
            "{message}"
        );
        t.spec.sunset.terminate_pinned_after = Some("3h".into());
        let d = desired(&t, &ControllerSettings::default()).expect("valid");
        assert_eq!(d.cancel_pinned_after, Some(Duration::from_secs(7200)));
        assert_eq!(d.terminate_pinned_after, Some(Duration::from_secs(10800)));
        t.spec.sunset.upgrade_signal = Some(" ".into());
        assert!(error_of(&t).contains("spec.sunset.upgradeSignal: must name a signal"));
        t.spec.sunset.upgrade_signal = Some("upgrade".into());
        let d = desired(&t, &ControllerSettings::default()).expect("valid");
        assert_eq!(d.upgrade_signal.as_deref(), Some("upgrade"));
        // Either alone is fine; neither is the default.
        t.spec.sunset.cancel_pinned_after = None;
        assert!(desired(&t, &ControllerSettings::default()).is_ok());
        let d = desired(&valid(), &ControllerSettings::default()).expect("valid");
        assert_eq!(
            (d.cancel_pinned_after, d.terminate_pinned_after),
            (None, None)
        );
    }

    #[test]
    fn containers_required() {
        let mut t = valid();
        if let Some(s) = t.spec.template.spec.as_mut() {
            s.containers.clear();
        }
        assert_rejected(
            &t,
            "spec.template.spec.containers: at least one container is required",
        );
        t.spec.template.spec = None;
        assert_rejected(
            &t,
            "spec.template.spec.containers: at least one container is required",
        );
    }

    #[test]
    fn every_reserved_env_is_refused_with_container_and_name() {
        for reserved in RESERVED_ENV {
            let mut t = valid();
            if let Some(s) = t.spec.template.spec.as_mut() {
                s.containers.push(Container {
                    name: "sidecar".into(),
                    env: Some(vec![EnvVar {
                        name: reserved.to_string(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                });
            }
            assert_rejected(
                &t,
                &format!(
                    "spec.template.spec.containers[1].env[0]: container \"sidecar\" sets {reserved},"
                ),
            );
        }
        // Init containers receive no injection, so they may use these names freely.
        let mut t = valid();
        if let Some(s) = t.spec.template.spec.as_mut() {
            s.init_containers = Some(vec![Container {
                name: "wait-for-temporal".into(),
                env: Some(vec![EnvVar {
                    name: ENV_ADDRESS.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }]);
        }
        assert_eq!(validate(&t), Ok(()));
    }

    #[test]
    fn reserved_volume_and_mount_path() {
        let mut t = valid();
        if let Some(s) = t.spec.template.spec.as_mut() {
            s.volumes = Some(vec![Volume {
                name: TLS_VOLUME.into(),
                ..Default::default()
            }]);
            s.containers[0].volume_mounts = Some(vec![VolumeMount {
                name: "mine".into(),
                mount_path: "/etc/temporal/tls/".into(),
                ..Default::default()
            }]);
        }
        let message = error_of(&t);
        assert!(
            message.contains("spec.template.spec.volumes[0].name: \"temporal-tls\" is reserved"),
            "{message}"
        );
        assert!(
            message.contains("spec.template.spec.containers[0].volumeMounts[0].mountPath: container \"worker\" mounts /etc/temporal/tls"),
            "{message}"
        );
        // The server CA's volume and path too; a container's own server CA variable is not
        // reserved (a CA wired by hand keeps working).
        let mut t = valid();
        if let Some(s) = t.spec.template.spec.as_mut() {
            s.volumes = Some(vec![Volume {
                name: "temporal-tls-ca".into(),
                ..Default::default()
            }]);
            s.containers[0].volume_mounts = Some(vec![VolumeMount {
                name: "mine".into(),
                mount_path: "/etc/temporal/tls-ca".into(),
                ..Default::default()
            }]);
        }
        let message = error_of(&t);
        assert!(
            message.contains("volumes[0].name: \"temporal-tls-ca\" is reserved"),
            "{message}"
        );
        assert!(
            message.contains("mounts /etc/temporal/tls-ca,"),
            "{message}"
        );
        let mut t = valid();
        if let Some(s) = t.spec.template.spec.as_mut() {
            s.containers[0].env = Some(vec![EnvVar {
                name: "TEMPORAL_TLS_SERVER_CA_CERT_PATH".into(),
                value: Some("/certs/ca.pem".into()),
                ..Default::default()
            }]);
        }
        assert_eq!(validate(&t), Ok(()));
    }

    #[test]
    fn negative_counts() {
        let mut t = valid();
        t.spec.replicas = Some(-1);
        t.spec.min_ready_seconds = Some(-5);
        let message = error_of(&t);
        assert!(
            message.contains("spec.replicas: must not be negative, got -1"),
            "{message}"
        );
        assert!(
            message.contains("spec.minReadySeconds: must not be negative, got -5"),
            "{message}"
        );
        t.spec.replicas = Some(0);
        t.spec.min_ready_seconds = Some(0);
        assert_eq!(validate(&t), Ok(()));
    }

    #[test]
    fn worker_options() {
        let mut t = valid();
        t.spec.worker_options.custom_build_id = Some("!!!".into());
        assert_rejected(
            &t,
            "spec.workerOptions.customBuildID: \"!!!\" has no letters or digits left",
        );
        t.spec.worker_options.custom_build_id = Some("ok 1".into());
        assert_eq!(validate(&t), Ok(()));
        t.spec.worker_options.temporal_namespace = String::new();
        t.spec.worker_options.connection_ref.name = String::new();
        let message = error_of(&t);
        assert!(message.contains("spec.workerOptions.temporalNamespace: must not be empty"));
        assert!(message.contains("spec.workerOptions.connectionRef.name: must name a Connection"));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let mut t = valid();
        t.metadata.name = Some("a.b".into());
        t.spec.rollout.steps = vec![step(50, "1m"), step(20, "0s")];
        t.spec.sunset.delete_delay = "soon".into();
        let message = error_of(&t);
        assert_eq!(message.split("; ").count(), 4, "{message}");
        assert!(message.starts_with("metadata.name:"), "{message}");
    }

    #[test]
    fn desired_converts_everything() {
        let t = valid();
        let settings = ControllerSettings {
            max_versions_ineligible_for_deletion: 5,
            rollback_window: Duration::from_secs(60),
            default_progress_deadline: Duration::from_secs(90),
        };
        let d = desired(&t, &settings).unwrap();
        assert_eq!(d.progress_deadline, Duration::from_secs(90), "the default");
        let mut with_own = t.clone();
        with_own.spec.progress_deadline_seconds = Some(15);
        with_own.spec.rollout.on_failure = crate::api::twd::OnFailure::Abort;
        let own = desired(&with_own, &settings).unwrap();
        assert_eq!(own.progress_deadline, Duration::from_secs(15), "the spec's");
        assert!(own.abort_on_failure && !d.abort_on_failure);
        assert_eq!(
            d.build_id,
            build_id::compute(&t.spec.template, None).unwrap()
        );
        assert!(d.build_id.starts_with("v1-"));
        assert_eq!(d.replicas, Some(2));
        assert_eq!(
            d.strategy,
            Strategy::Progressive(vec![
                Step {
                    ramp_percentage: 10.0,
                    pause: Duration::from_secs(30)
                },
                Step {
                    ramp_percentage: 50.0,
                    pause: Duration::from_secs(60)
                },
                Step {
                    ramp_percentage: 90.0,
                    pause: Duration::from_secs(5400)
                },
            ])
        );
        assert_eq!(
            d.gate,
            Some(Gate {
                workflow_type: "Smoke".into()
            })
        );
        assert_eq!(d.scaledown_delay, Duration::from_secs(3600));
        assert_eq!(d.delete_delay, Duration::from_secs(86400));
        assert_eq!(
            d.pod_template_hash,
            build_id::pod_template_hash(&t.spec.template)
        );
        assert!(!d.custom_build_id);
        assert_eq!(d.max_versions_ineligible_for_deletion, 5);
        assert_eq!(d.rollback_window, Duration::from_secs(60));
    }

    #[test]
    fn desired_with_custom_build_id_and_other_strategies() {
        let mut t = valid();
        t.spec.worker_options.custom_build_id = Some(" release 7 ".into());
        t.spec.rollout.strategy = RolloutStrategy::AllAtOnce;
        t.spec.rollout.gate = None;
        t.spec.replicas = None;
        let d = desired(&t, &ControllerSettings::default()).unwrap();
        assert_eq!(d.build_id, "release-7");
        assert!(d.custom_build_id);
        assert_eq!(d.strategy, Strategy::AllAtOnce);
        assert_eq!(d.gate, None);
        assert_eq!(d.replicas, None);
        t.spec.rollout.strategy = RolloutStrategy::Manual;
        assert_eq!(
            desired(&t, &ControllerSettings::default())
                .unwrap()
                .strategy,
            Strategy::Manual
        );
    }

    #[test]
    fn default_settings_match_go() {
        let s = ControllerSettings::default();
        assert_eq!(s.max_versions_ineligible_for_deletion, 75);
        assert_eq!(s.rollback_window, Duration::from_secs(3600));
    }
}
