//! The validate stage: spec validation and conversion into the planner's [`Desired`].
//!
//! The CRD schema and its CEL rules catch most mistakes at admission, but they can be
//! bypassed (older CRD installed, schema-less clients, CRD edited by hand), so the
//! controller checks everything again before acting. Every problem is reported at once,
//! each prefixed with its field path, so a user can fix the spec in one go.

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use crate::api::twd::{
    AnalysisSpec, DefaultVerdict, GateSpec, MAX_NAME_LEN, RolloutStrategy,
    TemporalWorkerDeployment, TemporalWorkerDeploymentSpec,
};
use crate::api::{
    ANNOTATION_PROMOTE, ANNOTATION_SKIP_STEP, RESERVED_ENV, TLS_MOUNT_PATH, TLS_VOLUME, duration,
};
use crate::build_id;
use crate::planner::model::{
    Analysis, Control, Desired, Gate, MutableImage, SkipStep, Step, Strategy,
};

/// Most steps a Progressive rollout may have.
pub const MAX_STEPS: usize = 20;
/// Shortest pause a step may have.
pub const MIN_PAUSE: Duration = Duration::from_secs(1);

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

/// The spec cannot be acted on; `message` lists every problem, `; `-separated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSpec {
    pub message: String,
}

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

/// A duration of the spec. Validation guarantees every one parses; the error path stays for
/// safety.
fn parse(path: &str, value: &str) -> Result<Duration, InvalidSpec> {
    duration::parse(value).map_err(|e| InvalidSpec {
        message: format!("{path}: {e}"),
    })
}

/// `spec.rollout.strategy` with its steps' pauses parsed.
fn strategy(spec: &TemporalWorkerDeploymentSpec) -> Result<Strategy, InvalidSpec> {
    Ok(match spec.rollout.strategy {
        RolloutStrategy::Manual => Strategy::Manual,
        RolloutStrategy::AllAtOnce => Strategy::AllAtOnce,
        RolloutStrategy::Progressive => {
            let mut steps = Vec::with_capacity(spec.rollout.steps.len());
            for (i, s) in spec.rollout.steps.iter().enumerate() {
                steps.push(Step {
                    ramp_percentage: s.ramp_percentage as f32,
                    pause: parse(
                        &format!("spec.rollout.steps[{i}].pauseDuration"),
                        &s.pause_duration,
                    )?,
                });
            }
            Strategy::Progressive(steps)
        }
    })
}

/// `spec.rollout.analysis` with its durations parsed.
fn analysis(a: &AnalysisSpec) -> Result<Analysis, InvalidSpec> {
    Ok(Analysis {
        interval: parse("spec.rollout.analysis.interval", &a.interval)?,
        max_failure_rate: a.max_failure_rate,
        max_failure_rate_increase: a.max_failure_rate_increase,
        min_sample_size: u64::try_from(a.min_sample_size.max(1)).unwrap_or(1),
        workflow_types: a.workflow_types.clone(),
        max_inconclusive: parse("spec.rollout.analysis.maxInconclusive", &a.max_inconclusive)?,
        inconclusive_passes: a.inconclusive_verdict == DefaultVerdict::Pass,
        dry_run: a.dry_run,
    })
}

/// The containers (init containers too) whose image reference is mutable
/// ([`build_id::mutable_reference`]): reported as a warning, never refused.
pub fn mutable_images(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<MutableImage> {
    let Some(pod) = &template.spec else {
        return Vec::new();
    };
    pod.init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .filter_map(|c| {
            let image = c.image.as_deref()?;
            build_id::mutable_reference(image).map(|why| MutableImage {
                container: c.name.clone(),
                image: image.trim().to_string(),
                why,
            })
        })
        .collect()
}

/// An optional sunset duration, already validated by [`check_sunset`].
fn optional(value: &Option<String>) -> Result<Option<std::time::Duration>, InvalidSpec> {
    value
        .as_deref()
        .map(duration::parse)
        .transpose()
        .map_err(|e| InvalidSpec {
            message: e.to_string(),
        })
}

fn check_analysis(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let Some(a) = &twd.spec.rollout.analysis else {
        return;
    };
    let path = "spec.rollout.analysis";
    if a.max_failure_rate.is_none() && a.max_failure_rate_increase.is_none() {
        p.add(
            path,
            "set maxFailureRate, maxFailureRateIncrease or both: without a threshold no analysis can fail",
        );
    }
    for (field, v) in [
        ("maxFailureRate", a.max_failure_rate),
        ("maxFailureRateIncrease", a.max_failure_rate_increase),
    ] {
        if let Some(v) = v
            && !(0.0..=100.0).contains(&v)
        {
            p.add(
                format!("{path}.{field}"),
                format!("must be between 0 and 100, got {v}"),
            );
        }
    }
    if a.min_sample_size < 1 {
        p.add(format!("{path}.minSampleSize"), "must be at least 1");
    }
    match duration::parse(&a.interval) {
        Ok(d) if d < MIN_PAUSE => p.add(format!("{path}.interval"), "must be at least 1s"),
        Ok(_) => {}
        Err(e) => p.add(format!("{path}.interval"), e),
    }
    if let Err(e) = duration::parse(&a.max_inconclusive) {
        p.add(format!("{path}.maxInconclusive"), e);
    }
    for (i, t) in a.workflow_types.iter().enumerate() {
        if t.is_empty() || t.contains(['\'', '"', '\\']) {
            p.add(
                format!("{path}.workflowTypes[{i}]"),
                "must be a workflow type name without quotes or backslashes",
            );
        }
    }
}

/// Rollout control as the planner sees it (annotations already checked by [`validate`]).
fn control(twd: &TemporalWorkerDeployment) -> Control {
    let annotation = |key: &str| {
        twd.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Control {
        paused: twd.spec.rollout.paused,
        abort: twd.spec.rollout.abort,
        promote: annotation(ANNOTATION_PROMOTE),
        skip_step: annotation(ANNOTATION_SKIP_STEP).and_then(|v| parse_skip_step(&v).ok()),
        retry: annotation(crate::api::ANNOTATION_RETRY),
        record: twd
            .status
            .as_ref()
            .and_then(|s| s.rollout_control.clone())
            .unwrap_or_default(),
    }
}

/// `<buildID>/<step>`; build IDs never contain `/` (they are label values).
pub fn parse_skip_step(value: &str) -> Result<SkipStep, String> {
    let problem = || {
        format!(
            "{value:?} must be <buildID>/<step>, the build ID of the target and the number of \
             the step to end, from 1 (as in status.targetVersion.currentStep), e.g. v2-abc123/1"
        )
    };
    let (build, step) = value.rsplit_once('/').ok_or_else(problem)?;
    let step: i32 = step.parse().map_err(|_| problem())?;
    let step = crate::api::twd::step_index(step).ok_or_else(problem)?;
    if build.is_empty() {
        return Err(problem());
    }
    Ok(SkipStep {
        build_id: build.to_string(),
        step,
        value: value.to_string(),
    })
}

fn check_control(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let rollout = &twd.spec.rollout;
    if rollout.strategy == RolloutStrategy::Manual && (rollout.paused || rollout.abort) {
        p.add(
            "spec.rollout",
            "paused and abort steer the controller's own routing changes, and with the Manual \
             strategy it makes none: promote or ramp in Temporal instead",
        );
    }
    let skip = twd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SKIP_STEP))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty());
    if let Some(value) = skip
        && let Err(e) = parse_skip_step(value)
    {
        p.add(format!("metadata.annotations[{ANNOTATION_SKIP_STEP}]"), e);
    }
}

#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, path: impl std::fmt::Display, message: impl std::fmt::Display) {
        self.0.push(format!("{path}: {message}"));
    }

    fn into_result(self) -> Result<(), InvalidSpec> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(InvalidSpec {
                message: self.0.join("; "),
            })
        }
    }
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
        p.0.push(e.to_string());
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

fn check_template(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let Some(pod) = twd.spec.template.spec.as_ref() else {
        p.add(
            "spec.template.spec.containers",
            "at least one container is required",
        );
        return;
    };
    if pod.containers.is_empty() {
        p.add(
            "spec.template.spec.containers",
            "at least one container is required",
        );
    }
    for (i, c) in pod.containers.iter().enumerate() {
        check_container(i, c, p);
    }
    for (i, v) in pod.volumes.iter().flatten().enumerate() {
        if v.name == TLS_VOLUME {
            p.add(
                format!("spec.template.spec.volumes[{i}].name"),
                format!(
                    "{TLS_VOLUME:?} is reserved for the client certificate the controller mounts; \
                     use another name"
                ),
            );
        }
    }
}

fn check_container(i: usize, c: &Container, p: &mut Problems) {
    for (j, env) in c.env.iter().flatten().enumerate() {
        if RESERVED_ENV.contains(&env.name.as_str()) {
            p.add(
                format!("spec.template.spec.containers[{i}].env[{j}]"),
                format!(
                    "container {:?} sets {}, which the controller injects from the \
                     TemporalConnection and workerOptions; remove it",
                    c.name, env.name
                ),
            );
        }
    }
    for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
        if m.mount_path.trim_end_matches('/') == TLS_MOUNT_PATH {
            p.add(
                format!("spec.template.spec.containers[{i}].volumeMounts[{j}].mountPath"),
                format!(
                    "container {:?} mounts {TLS_MOUNT_PATH}, which is reserved for the client \
                     certificate the controller mounts",
                    c.name
                ),
            );
        }
    }
}

fn check_rollout(twd: &TemporalWorkerDeployment, p: &mut Problems) {
    let rollout = &twd.spec.rollout;
    if rollout.strategy == RolloutStrategy::Progressive && rollout.steps.is_empty() {
        p.add(
            "spec.rollout.steps",
            "a Progressive rollout needs at least one step",
        );
    }
    if rollout.steps.len() > MAX_STEPS {
        p.add(
            "spec.rollout.steps",
            format!(
                "at most {MAX_STEPS} steps are allowed, got {}",
                rollout.steps.len()
            ),
        );
    }
    let mut previous: Option<i32> = None;
    for (i, step) in rollout.steps.iter().enumerate() {
        let pct = step.ramp_percentage;
        let path = format!("spec.rollout.steps[{i}].rampPercentage");
        if !(1..=99).contains(&pct) {
            p.add(&path, format!("must be between 1 and 99, got {pct}"));
        }
        if let Some(prev) = previous
            && pct <= prev
        {
            p.add(
                &path,
                format!("must be greater than the previous step ({prev}), got {pct}"),
            );
        }
        previous = Some(pct);
        let path = format!("spec.rollout.steps[{i}].pauseDuration");
        match duration::parse(&step.pause_duration) {
            Ok(d) if d < MIN_PAUSE => p.add(
                &path,
                format!("must be at least 1s, got {:?}", step.pause_duration),
            ),
            Ok(_) => {}
            Err(e) => p.add(&path, format!("{e} (examples: 30s, 5m, 1h30m)")),
        }
    }

    if let Some(gate) = &rollout.gate {
        check_gate("spec.rollout.gate", gate, p);
    }
    for (i, step) in rollout.steps.iter().enumerate() {
        if let Some(gate) = &step.gate {
            check_gate(&format!("spec.rollout.steps[{i}].gate"), gate, p);
        }
    }
}

fn check_gate(path: &str, gate: &GateSpec, p: &mut Problems) {
    if gate.workflow_type.trim().is_empty() {
        p.add(format!("{path}.workflowType"), "must not be empty");
    }
    if gate.input.is_some() && gate.input_from.is_some() {
        p.add(path, "only one of input or inputFrom may be set");
    }
    if let Some(from) = &gate.input_from {
        let refs = [
            ("configMapKeyRef", from.config_map_key_ref.as_ref()),
            ("secretKeyRef", from.secret_key_ref.as_ref()),
        ];
        let set = refs.iter().filter(|(_, r)| r.is_some()).count();
        if set != 1 {
            p.add(
                format!("{path}.inputFrom"),
                format!("exactly one of configMapKeyRef or secretKeyRef must be set, got {set}"),
            );
        }
        for (field, r) in refs {
            let Some(r) = r else { continue };
            if r.name.is_empty() {
                p.add(
                    format!("{path}.inputFrom.{field}.name"),
                    "must not be empty",
                );
            }
            if r.key.is_empty() {
                p.add(format!("{path}.inputFrom.{field}.key"), "must not be empty");
            }
        }
    }
}

#[cfg(test)]
mod control_tests {
    use super::*;

    #[test]
    fn skip_step_annotation_must_name_a_build_and_a_step() {
        assert_eq!(
            parse_skip_step("v2-abc/1"),
            Ok(SkipStep {
                build_id: "v2-abc".into(),
                step: 0,
                value: "v2-abc/1".into()
            }),
            "steps are numbered from 1: step 1 is steps[0]"
        );
        for bad in ["v2", "v2/", "/1", "v2/one", "v2/-1", "v2/0"] {
            assert!(parse_skip_step(bad).is_err(), "{bad}");
        }
        let mut twd = TemporalWorkerDeployment::test();
        twd.metadata.annotations =
            Some([(ANNOTATION_SKIP_STEP.to_string(), "v2".to_string())].into());
        let e = validate(&twd).expect_err("refused");
        assert!(
            e.message
                .contains("metadata.annotations[temporal.io/skip-step]"),
            "{e}"
        );
    }

    #[test]
    fn control_comes_from_spec_annotations_and_the_status_record() {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.paused = true;
        twd.metadata.annotations = Some(
            [
                (ANNOTATION_PROMOTE.to_string(), " v9 ".to_string()),
                (ANNOTATION_SKIP_STEP.to_string(), "v9/1".to_string()),
            ]
            .into(),
        );
        twd.status = Some(crate::api::TemporalWorkerDeploymentStatus {
            rollout_control: Some(crate::api::twd::RolloutControl {
                promoted: Some("v8".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let c = desired(&twd, &ControllerSettings::default())
            .expect("valid")
            .control;
        assert!(c.paused && !c.abort);
        assert_eq!(c.promote.as_deref(), Some("v9"));
        assert_eq!(c.skip_step.map(|s| s.step), Some(0));
        assert_eq!(c.record.promoted.as_deref(), Some("v8"));
    }

    #[test]
    fn analysis_and_step_gates_are_checked() {
        use crate::api::twd::{AnalysisSpec, GateSpec};
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.analysis = Some(AnalysisSpec {
            interval: "500ms".into(),
            max_failure_rate: None,
            max_failure_rate_increase: None,
            min_sample_size: 0,
            workflow_types: vec!["it's".into()],
            max_inconclusive: "soon".into(),
            inconclusive_verdict: DefaultVerdict::Fail,
            dry_run: false,
        });
        let e = validate(&twd).expect_err("refused").message;
        for want in [
            "spec.rollout.analysis: set maxFailureRate",
            "spec.rollout.analysis.interval: must be at least 1s",
            "spec.rollout.analysis.minSampleSize",
            "spec.rollout.analysis.workflowTypes[0]",
            "spec.rollout.analysis.maxInconclusive",
        ] {
            assert!(e.contains(want), "{want} missing from {e}");
        }
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.strategy = RolloutStrategy::Progressive;
        twd.spec.rollout.steps = vec![crate::api::twd::RolloutStep {
            ramp_percentage: 10,
            pause_duration: "1m".into(),
            gate: Some(GateSpec {
                workflow_type: " ".into(),
                input: None,
                input_from: None,
            }),
        }];
        let e = validate(&twd).expect_err("refused").message;
        assert!(e.contains("spec.rollout.steps[0].gate.workflowType"), "{e}");
        // Valid settings convert.
        twd.spec.rollout.steps[0].gate = Some(GateSpec {
            workflow_type: "Smoke".into(),
            input: None,
            input_from: None,
        });
        twd.spec.rollout.analysis = Some(AnalysisSpec {
            interval: "10s".into(),
            max_failure_rate: Some(5.0),
            max_failure_rate_increase: None,
            min_sample_size: 20,
            workflow_types: vec![],
            max_inconclusive: "1m".into(),
            inconclusive_verdict: DefaultVerdict::Fail,
            dry_run: true,
        });
        let d = desired(&twd, &ControllerSettings::default()).expect("valid");
        let a = d.analysis.expect("analysis");
        assert_eq!(
            (
                a.interval,
                a.min_sample_size,
                a.inconclusive_passes,
                a.dry_run
            ),
            (Duration::from_secs(10), 20, false, true)
        );
        assert_eq!(
            d.step_gates,
            vec![Some(Gate {
                workflow_type: "Smoke".into()
            })]
        );
    }

    #[test]
    fn manual_cannot_be_paused_or_aborted() {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.strategy = RolloutStrategy::Manual;
        twd.spec.rollout.abort = true;
        let e = validate(&twd).expect_err("refused");
        assert!(e.message.contains("Manual"), "{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ENV_ADDRESS;
    use crate::api::twd::{GateInputSource, KeyRef, RolloutStep};
    use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};

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
