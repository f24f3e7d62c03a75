//! The rollout-state families, computed from the reflector store at each scrape so a deleted
//! `TemporalWorkerDeployment` leaves no stale series behind.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{
    InfoLabels, ObjBuildLabels, ObjLabels, ObjStateLabels, ObjStatusLabels, PhaseLabels,
};
use crate::summary::{self as view, Phase, RolloutSummary};
use kube::ResourceExt;

/// A gauge of a fractional value.
type GaugeF = Gauge<f64, AtomicU64>;

/// The per-rollout families of one scrape.
#[derive(Default)]
struct RolloutFamilies {
    info: Family<InfoLabels, Gauge>,
    by_phase: Family<PhaseLabels, Gauge>,
    ramp: Family<ObjLabels, GaugeF>,
    versions: Family<ObjStatusLabels, Gauge>,
    step: Family<ObjLabels, Gauge>,
    steps: Family<ObjLabels, Gauge>,
    next_step: Family<ObjLabels, GaugeF>,
    transition: Family<ObjLabels, GaugeF>,
    in_phase: Family<ObjLabels, GaugeF>,
    ready: Family<ObjLabels, Gauge>,
    stalled: Family<ObjLabels, Gauge>,
    pollers: Family<ObjStateLabels, Gauge>,
    lag: Family<ObjLabels, Gauge>,
    pinned: Family<ObjBuildLabels, Gauge>,
    draining_since: Family<ObjBuildLabels, GaugeF>,
}

fn unix_seconds(t: jiff::Timestamp) -> f64 {
    t.as_millisecond() as f64 / 1000.0
}

impl RolloutFamilies {
    /// Adds one rollout's series.
    fn record(&self, s: &RolloutSummary, now_s: f64) {
        let obj = ObjLabels {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
        };
        self.info
            .get_or_create(&InfoLabels {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                kind: s.kind.clone(),
                strategy: view::strategy_str(s.strategy),
                phase: s.phase.as_str(),
                reason: s.reason.clone().unwrap_or_default(),
                target_build_id: s.target_build_id.clone().unwrap_or_default(),
                current_build_id: s.current_build_id.clone().unwrap_or_default(),
            })
            .set(1);
        self.by_phase
            .get_or_create(&PhaseLabels {
                phase: s.phase.as_str(),
            })
            .inc();
        self.ramp.get_or_create(&obj).set(s.target_traffic_ratio);
        // Only statuses present: six always-on series per object would dominate the scrape.
        for v in &s.versions {
            let labels = ObjStatusLabels {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                status: view::version_status_str(v.status),
            };
            self.versions.get_or_create(&labels).set(v.count as i64);
        }
        if let Some(i) = s.step {
            self.step.get_or_create(&obj).set(i64::from(i));
        }
        if s.steps > 0 {
            self.steps.get_or_create(&obj).set(s.steps as i64);
        }
        if let Some(t) = s.next_step_at {
            self.next_step.get_or_create(&obj).set(unix_seconds(t));
        }
        if let Some(t) = s.phase_since {
            let t = unix_seconds(t);
            self.transition.get_or_create(&obj).set(t);
            self.in_phase.get_or_create(&obj).set((now_s - t).max(0.0));
        }
        self.ready.get_or_create(&obj).set(i64::from(s.ready));
        self.stalled.get_or_create(&obj).set(i64::from(s.stalled));
        if let Some(state) = s.poller_health() {
            self.pollers
                .get_or_create(&ObjStateLabels {
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    state,
                })
                .set(1);
        }
        self.lag.get_or_create(&obj).set(s.generation_lag());
        self.record_draining(s);
    }

    /// The old versions' series, one per build ID.
    fn record_draining(&self, s: &RolloutSummary) {
        for d in &s.draining {
            let labels = ObjBuildLabels {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                build_id: d.build_id.clone(),
            };
            if let Some(n) = d.open_pinned_workflows {
                self.pinned.get_or_create(&labels).set(n);
            }
            if let Some(t) = d.draining_since {
                self.draining_since
                    .get_or_create(&labels)
                    .set(unix_seconds(t));
            }
        }
    }
}

/// Records every TWD of `store` that acts into `f`.
fn fill(f: &RolloutFamilies, store: &crate::workers::Workers, now: jiff::Timestamp) {
    let now_s = unix_seconds(now);
    let all = store.state();
    // A seed object standing down for a WorkerDeployment of its name would repeat that
    // WorkerDeployment's series (same namespace and name): only the one that acts is exported.
    let canonical: std::collections::HashSet<(Option<String>, String)> = all
        .iter()
        .filter(|t| t.kind_set() == crate::api::KindSet::Canonical)
        .map(|t| (t.metadata.namespace.clone(), t.name_any()))
        .collect();
    for twd in all.iter().filter(|t| {
        t.kind_set() == crate::api::KindSet::Canonical
            || !canonical.contains(&(t.metadata.namespace.clone(), t.name_any()))
    }) {
        f.record(&RolloutSummary::from_twd(twd), now_s);
    }
}

/// Registers the rollout families of every TWD in `store` into `reg` (already prefixed).
pub(super) fn register(reg: &mut Registry, store: &crate::workers::Workers, now: jiff::Timestamp) {
    let f = RolloutFamilies::default();
    for phase in Phase::ALL {
        let _ = f.by_phase.get_or_create(&PhaseLabels {
            phase: phase.as_str(),
        });
    }
    fill(&f, store, now);
    reg.register(
        "rollout_info",
        "One series per worker deployment (value 1) carrying its kind, strategy, phase, reason and the target and current build IDs",
        f.info,
    );
    reg.register("rollouts", "Worker deployments by phase", f.by_phase);
    reg.register_with_unit(
        "rollout_ramp",
        "Share of new workflows routed to the target version (1 once it is Current)",
        // Prometheus' base unit for a share is `ratio` (the library's `Ratios` would rename
        // the family `_ratios`).
        Unit::Other("ratio".into()),
        f.ramp,
    );
    reg.register(
        "rollout_versions",
        "Versions listed in status by Temporal version status",
        f.versions,
    );
    reg.register(
        "version_open_pinned_workflows",
        "Open workflows pinned to an old (Draining or Drained) version, from Temporal visibility",
        f.pinned,
    );
    reg.register_with_unit(
        "version_draining_since_timestamp",
        "When Temporal started draining an old version, Unix time",
        Unit::Seconds,
        f.draining_since,
    );
    reg.register(
        "rollout_step",
        "Number of the progressive step in effect, from 1 (spec.rollout.steps[0] is step 1)",
        f.step,
    );
    reg.register(
        "rollout_configured_steps",
        "Number of progressive steps in the spec",
        f.steps,
    );
    register_timing(reg, f.next_step, f.transition, f.in_phase);
    reg.register(
        "rollout_ready",
        "1 when the Ready condition is True",
        f.ready,
    );
    reg.register(
        "rollout_stalled",
        "1 when the Stalled condition is True",
        f.stalled,
    );
    reg.register(
        "rollout_poller_health",
        "1 for the poller health of the live versions: state ok, no_active_pollers or unknown (only rollouts with a Current version)",
        f.pollers,
    );
    reg.register(
        "rollout_observed_generation_lag",
        "metadata.generation minus status.observedGeneration",
        f.lag,
    );
}

/// The three time families of a rollout, all in seconds.
fn register_timing(
    reg: &mut Registry,
    next_step: Family<ObjLabels, GaugeF>,
    transition: Family<ObjLabels, GaugeF>,
    in_phase: Family<ObjLabels, GaugeF>,
) {
    reg.register_with_unit(
        "rollout_next_step_timestamp",
        "When the next progressive step (or promotion) is due, Unix time",
        Unit::Seconds,
        next_step,
    );
    reg.register_with_unit(
        "rollout_phase_transition_timestamp",
        "When the rollout entered its current phase, Unix time",
        Unit::Seconds,
        transition,
    );
    reg.register_with_unit(
        "rollout_time_in_phase",
        "Time since the rollout entered its current phase",
        Unit::Seconds,
        in_phase,
    );
}

#[cfg(test)]
mod tests {

    use crate::api::{KindSet, TemporalWorkerDeployment};
    use crate::metrics::Metrics;

    #[test]
    fn one_series_per_name_the_acting_kind_and_its_kind_label() {
        let seed = TemporalWorkerDeployment::test();
        let canonical = seed.clone().stamped(KindSet::Canonical);
        let text = Metrics::new().encode(&crate::workers::Workers::of(vec![seed.clone()]));
        assert!(text.contains("kind=\"TemporalWorkerDeployment\""), "{text}");
        // With a WorkerDeployment of the same name, only it is exported.
        let text = Metrics::new().encode(&crate::workers::Workers::of(vec![seed, canonical]));
        let infos: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("temporal_worker_controller_rollout_info{"))
            .collect();
        assert_eq!(infos.len(), 1, "{infos:?}");
        assert!(infos[0].contains("kind=\"WorkerDeployment\""), "{infos:?}");
    }

    #[test]
    fn the_info_gauge_names_its_two_build_ids_target_build_id_and_current_build_id() {
        let mut twd = TemporalWorkerDeployment::test();
        twd.status = Some(
            serde_json::from_value(serde_json::json!({
                "targetVersion": {"buildID": "v2", "status": "Ramping", "rampPercentage": 10.0},
                "currentVersion": {"buildID": "v1", "status": "Current"},
            }))
            .expect("status"),
        );
        let workers = crate::workers::Workers::of(vec![twd]);
        let text = Metrics::new().encode(&workers);
        let info = text
            .lines()
            .find(|l| l.starts_with("temporal_worker_controller_rollout_info{"))
            .unwrap_or_else(|| panic!("no rollout_info in:\n{text}"));
        assert!(
            info.contains("target_build_id=\"v2\",current_build_id=\"v1\""),
            "{info}"
        );
        assert!(!info.contains("target_build=\""), "{info}");
    }

    #[test]
    fn old_versions_export_their_pinned_workflows_and_drain_start() {
        use crate::api::twd::{DeprecatedVersion, TemporalWorkerDeploymentStatus, VersionStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let old = |build: &str, status, pinned: Option<i64>, since: Option<&str>| {
            let mut d = DeprecatedVersion::test(build, status);
            d.draining_since = since.map(|s| Time(s.parse().expect("ts")));
            d.open_pinned_workflows = pinned;
            d
        };
        let mut twd = TemporalWorkerDeployment::test();
        twd.status = Some(TemporalWorkerDeploymentStatus {
            deprecated_versions: vec![
                old(
                    "v1",
                    VersionStatus::Draining,
                    Some(3),
                    Some("2026-03-02T10:00:00Z"),
                ),
                old("v0", VersionStatus::Drained, Some(0), None),
                old("vi", VersionStatus::Inactive, Some(9), None),
            ],
            ..Default::default()
        });
        let workers = crate::workers::Workers::of(vec![twd]);
        let text = Metrics::new().encode(&workers);
        for line in [
            "temporal_worker_controller_version_open_pinned_workflows{namespace=\"shop\",name=\"orders\",build_id=\"v1\"} 3",
            "temporal_worker_controller_version_open_pinned_workflows{namespace=\"shop\",name=\"orders\",build_id=\"v0\"} 0",
            "temporal_worker_controller_version_draining_since_timestamp_seconds{namespace=\"shop\",name=\"orders\",build_id=\"v1\"} 1772445600",
            "# UNIT temporal_worker_controller_version_draining_since_timestamp_seconds seconds",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        assert!(
            !text.contains("build_id=\"vi\""),
            "an Inactive version is not draining"
        );
    }
}
