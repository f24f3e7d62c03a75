//! `spec.deployment`: the versioned Deployments' settings beyond the Go controller's fields
//! (labels, annotations, rolling update), the rules they must pass, and how they land on a
//! Deployment. Pure.
//!
//! What the user set is recorded on each Deployment (annotation [`ANNOTATION_SETTINGS`]), so
//! that a change is seen as drift and updated in place, and a removed label or annotation is
//! removed again (only keys the record names: others' keys are left alone). A Deployment with
//! no record and a spec without settings is never touched (a Deployment taken over from the Go
//! controller keeps its generation).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::twd::{DeploymentSettings, RollingUpdateSettings, TemporalWorkerDeploymentSpec};

/// Deployment annotation: the `spec.deployment` last applied (compact JSON).
pub const ANNOTATION_SETTINGS: &str = "temporal.io/deployment-settings";

/// Key prefixes of labels and annotations that belong to the controllers: ours select and
/// record versions (`temporal.io/build-id`, `temporal.io/deployment-name`, sunset and take-over
/// records), Kubernetes' Deployment controller writes `deployment.kubernetes.io/revision`.
pub const RESERVED_PREFIXES: [&str; 2] = ["temporal.io/", "deployment.kubernetes.io/"];

/// Default surge of a roll in place: one extra Pod at a time.
const DEFAULT_SURGE: i32 = 1;
/// Default unavailability: never remove an old Pod before its replacement is Ready.
const DEFAULT_UNAVAILABLE: i32 = 0;
/// Replica counts an autoscaler-owned version is checked at (percentages round per count;
/// the small counts are the ones that can round to no available Pod).
const AUTOSCALED_COUNTS: std::ops::RangeInclusive<i32> = 1..=100;

/// Every problem with `spec.deployment`, as `(path, message)`.
pub fn problems(spec: &TemporalWorkerDeploymentSpec) -> Vec<(String, String)> {
    let Some(s) = &spec.deployment else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (field, map) in [("labels", &s.labels), ("annotations", &s.annotations)] {
        for key in map.keys().filter(|k| reserved(k)) {
            out.push((
                format!("spec.deployment.{field}[{key}]"),
                format!(
                    "{key} is reserved: keys under {} belong to the controllers (they select \
                     and record versions), so they cannot be set here",
                    RESERVED_PREFIXES.join(" and ")
                ),
            ));
        }
    }
    if let Some(r) = &s.rolling_update
        && let Err(why) = keeps_one_available(r, spec.replicas)
    {
        out.push(("spec.deployment.rollingUpdate".to_string(), why));
    }
    out
}

fn reserved(key: &str) -> bool {
    RESERVED_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// A roll in place must leave every version at least one available Pod: a version without
/// ready pollers stops its pinned workflows (and the Current version's new ones). Kubernetes
/// resolves a percentage per replica count (surge rounded up, unavailability down) and, when
/// both resolve to 0, makes one Pod unavailable; so the rule is checked at the version's
/// replica count, or at every count from 1 when an autoscaler owns replicas.
pub fn keeps_one_available(r: &RollingUpdateSettings, replicas: Option<i32>) -> Result<(), String> {
    let surge = r
        .max_surge
        .clone()
        .unwrap_or(IntOrString::Int(DEFAULT_SURGE));
    let unavailable = r
        .max_unavailable
        .clone()
        .unwrap_or(IntOrString::Int(DEFAULT_UNAVAILABLE));
    let (Some(_), Some(_)) = (resolve(&surge, 1, true), resolve(&unavailable, 1, false)) else {
        return Err(
            "maxSurge and maxUnavailable must each be a non-negative number or a percentage \
             like 25%"
                .to_string(),
        );
    };
    let counts = match replicas {
        Some(n) => n..=n,
        None => AUTOSCALED_COUNTS,
    };
    for n in counts.filter(|n| *n >= 1) {
        let s = resolve(&surge, n, true).unwrap_or(0);
        let mut u = resolve(&unavailable, n, false).unwrap_or(0);
        if s == 0 && u == 0 {
            u = 1;
        }
        if u >= n {
            let at = match replicas {
                Some(_) => format!("spec.replicas {n}"),
                None => format!("{n} replica(s) (an autoscaler owns replicas)"),
            };
            return Err(format!(
                "maxSurge {} with maxUnavailable {} lets a roll in place take every Pod of a \
                 version down at {at}, and a version without ready pollers stops its pinned \
                 workflows; keep maxUnavailable below the replicas (a percentage below 100% \
                 when an autoscaler owns them), and maxSurge above 0 unless spec.replicas is at \
                 least 2",
                show(&surge),
                show(&unavailable)
            ));
        }
    }
    Ok(())
}

/// `value` resolved against `n` replicas, as Kubernetes does; `None` when malformed.
fn resolve(value: &IntOrString, n: i32, round_up: bool) -> Option<i32> {
    match value {
        IntOrString::Int(i) if *i >= 0 => Some(*i),
        IntOrString::Int(_) => None,
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok().filter(|p| *p >= 0)?;
            let scaled = i64::from(n) * pct;
            let v = if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            };
            i32::try_from(v).ok()
        }
    }
}

fn show(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// What to record on the Deployments for `spec.deployment`: `None` when nothing is set (then
/// nothing is recorded, and Deployments without a record are left as they are).
pub fn record(spec: &TemporalWorkerDeploymentSpec) -> Option<String> {
    let s = spec
        .deployment
        .as_ref()
        .filter(|s| **s != DeploymentSettings::default())?;
    serde_json::to_string(s).ok()
}

/// How a versioned Deployment replaces its pods: the user's rolling update, within the rules
/// above, over the defaults (one extra pod at a time, never an old pod removed before its
/// replacement is Ready).
pub fn strategy(spec: &TemporalWorkerDeploymentSpec) -> DeploymentStrategy {
    let r = spec
        .deployment
        .as_ref()
        .and_then(|d| d.rolling_update.clone())
        .unwrap_or_default();
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(r.max_surge.unwrap_or(IntOrString::Int(DEFAULT_SURGE))),
            max_unavailable: Some(
                r.max_unavailable
                    .unwrap_or(IntOrString::Int(DEFAULT_UNAVAILABLE)),
            ),
        }),
    }
}

/// Puts `spec.deployment` on `d`: removes the labels and annotations the previous record
/// named, adds the current ones (never over `ours`, the controller's own labels), sets the
/// strategy and the record.
pub fn apply(
    d: &mut Deployment,
    spec: &TemporalWorkerDeploymentSpec,
    ours: &BTreeMap<String, String>,
) {
    let previous: DeploymentSettings = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SETTINGS))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let current = spec.deployment.clone().unwrap_or_default();
    let mut labels = d.metadata.labels.take().unwrap_or_default();
    replace(&mut labels, &previous.labels, &current.labels);
    labels.extend(ours.clone());
    let mut annotations = d.metadata.annotations.take().unwrap_or_default();
    replace(
        &mut annotations,
        &previous.annotations,
        &current.annotations,
    );
    match record(spec) {
        Some(r) => annotations.insert(ANNOTATION_SETTINGS.to_string(), r),
        None => annotations.remove(ANNOTATION_SETTINGS),
    };
    // An empty map stays absent, so a Deployment without settings renders as before.
    d.metadata.labels = Some(labels).filter(|m| !m.is_empty());
    d.metadata.annotations = Some(annotations).filter(|m| !m.is_empty());
    if let Some(s) = d.spec.as_mut() {
        s.strategy = Some(strategy(spec));
    }
}

/// Drops the keys `previous` set and adds `current`'s; reserved keys never move.
fn replace(
    map: &mut BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
) {
    for key in previous.keys().filter(|k| !reserved(k)) {
        map.remove(key);
    }
    for (k, v) in current.iter().filter(|(k, _)| !reserved(k)) {
        map.insert(k.clone(), v.clone());
    }
}
