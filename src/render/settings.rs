//! `spec.deployment` and `spec.deploymentMetadata`: the versioned Deployments' settings beyond
//! the pod template (labels, annotations, rolling update, revision history), the rules they
//! must pass, and how they land on a Deployment. Pure.
//!
//! Both shapes are read: `spec.deployment` at `DeploymentSpec` positions with
//! `spec.deploymentMetadata`, and the earlier `spec.deployment.{labels, annotations,
//! rollingUpdate}` (deprecated aliases, [`deprecated_aliases`]). [`applied`] is what either
//! means. It is recorded on each Deployment (annotation [`ANNOTATION_SETTINGS`], in the field
//! names of the earlier shape, so a record an earlier release wrote reads the same), so that a
//! change is seen as drift and updated in place, and a removed label or annotation is removed
//! again (only keys the record names: others' keys are left alone). A Deployment with no record
//! and a spec without settings is never touched (a Deployment taken over from the Go controller
//! keeps its generation).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

use crate::api::twd::{RollingUpdateSettings, TemporalWorkerDeploymentSpec};

/// Deployment annotation: the settings last applied (compact JSON of [`Applied`]).
pub const ANNOTATION_SETTINGS: &str = "temporal.io/deployment-settings";

/// Key prefixes of labels and annotations that belong to the controllers: ours select and
/// record versions (`temporal.io/build-id`, `temporal.io/deployment-name`, sunset and take-over
/// records), Kubernetes' Deployment controller writes `deployment.kubernetes.io/revision`.
pub const RESERVED_PREFIXES: [&str; 2] = ["temporal.io/", "deployment.kubernetes.io/"];

/// The only Deployment strategy taken.
const ROLLING_UPDATE: &str = "RollingUpdate";
/// Default surge of a roll in place: one extra Pod at a time.
const DEFAULT_SURGE: i32 = 1;
/// Default unavailability: never remove an old Pod before its replacement is Ready.
const DEFAULT_UNAVAILABLE: i32 = 0;
/// Replica counts an autoscaler-owned version is checked at (percentages round per count;
/// the small counts are the ones that can round to no available Pod).
const AUTOSCALED_COUNTS: std::ops::RangeInclusive<i32> = 1..=100;

/// What the settings put on each versioned Deployment, whichever shape they were written in.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
}

/// What `spec` puts on each versioned Deployment. Where both shapes set something (the CRD
/// refuses that), the current shape wins.
pub fn applied(spec: &TemporalWorkerDeploymentSpec) -> Applied {
    let d = spec.deployment.clone().unwrap_or_default();
    let m = spec.deployment_metadata.clone().unwrap_or_default();
    let mut labels = d.labels;
    labels.extend(m.labels);
    let mut annotations = d.annotations;
    annotations.extend(m.annotations);
    Applied {
        labels,
        annotations,
        rolling_update: d
            .strategy
            .and_then(|s| s.rolling_update)
            .or(d.rolling_update),
        revision_history_limit: d.revision_history_limit,
    }
}

/// The deprecated aliases `spec` uses, each with the field that replaces it.
pub fn deprecated_aliases(
    spec: &TemporalWorkerDeploymentSpec,
) -> Vec<(&'static str, &'static str)> {
    let Some(d) = &spec.deployment else {
        return Vec::new();
    };
    [
        (
            !d.labels.is_empty(),
            "spec.deployment.labels",
            "spec.deploymentMetadata.labels",
        ),
        (
            !d.annotations.is_empty(),
            "spec.deployment.annotations",
            "spec.deploymentMetadata.annotations",
        ),
        (
            d.rolling_update.is_some(),
            "spec.deployment.rollingUpdate",
            "spec.deployment.strategy.rollingUpdate",
        ),
    ]
    .into_iter()
    .filter(|(used, _, _)| *used)
    .map(|(_, old, new)| (old, new))
    .collect()
}

/// The Warning note for the deprecated aliases `spec` uses; `None` when it uses none.
pub fn deprecation_note(spec: &TemporalWorkerDeploymentSpec) -> Option<String> {
    let aliases = deprecated_aliases(spec);
    if aliases.is_empty() {
        return None;
    }
    let moves: Vec<String> = aliases
        .iter()
        .map(|(old, new)| format!("{old} to {new}"))
        .collect();
    Some(format!(
        "deprecated fields still read: move {} (the same meaning at DeploymentSpec positions, \
         so a Go spec.deployment reads the same YAML the same way)",
        moves.join(", ")
    ))
}

/// Every problem with `spec.deployment` and `spec.deploymentMetadata`, as `(path, message)`.
pub fn problems(spec: &TemporalWorkerDeploymentSpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let d = spec.deployment.clone().unwrap_or_default();
    let m = spec.deployment_metadata.clone().unwrap_or_default();
    for (path, map) in [
        ("spec.deploymentMetadata.labels", &m.labels),
        ("spec.deploymentMetadata.annotations", &m.annotations),
        ("spec.deployment.labels", &d.labels),
        ("spec.deployment.annotations", &d.annotations),
    ] {
        for key in map.keys().filter(|k| reserved(k)) {
            out.push((
                format!("{path}[{key}]"),
                format!(
                    "{key} is reserved: keys under {} belong to the controllers (they select \
                     and record versions), so they cannot be set here",
                    RESERVED_PREFIXES.join(" and ")
                ),
            ));
        }
    }
    if spec.deployment_metadata.is_some() && !(d.labels.is_empty() && d.annotations.is_empty()) {
        out.push((
            "spec.deployment.labels".to_string(),
            "spec.deployment.labels and annotations are deprecated aliases of \
             spec.deploymentMetadata: set one shape, not both"
                .to_string(),
        ));
    }
    out.extend(strategy_problems(spec));
    out.extend(agreement_problems(spec));
    if let Some(n) = d.revision_history_limit.filter(|n| *n < 0) {
        out.push((
            "spec.deployment.revisionHistoryLimit".to_string(),
            format!("must not be negative, got {n}"),
        ));
    }
    out
}

/// The strategy's type and rolling update, in either shape.
fn strategy_problems(spec: &TemporalWorkerDeploymentSpec) -> Vec<(String, String)> {
    let Some(d) = &spec.deployment else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let strategy = d.strategy.clone().unwrap_or_default();
    if let Some(t) = strategy.type_.as_deref().filter(|t| *t != ROLLING_UPDATE) {
        out.push((
            "spec.deployment.strategy.type".to_string(),
            format!(
                "{t} is not taken, only {ROLLING_UPDATE}: any other strategy takes every Pod of \
                 a version down at once, and a version without ready pollers stops its pinned \
                 workflows"
            ),
        ));
    }
    if strategy.rolling_update.is_some() && d.rolling_update.is_some() {
        out.push((
            "spec.deployment.rollingUpdate".to_string(),
            "set spec.deployment.strategy.rollingUpdate, or its deprecated alias \
             spec.deployment.rollingUpdate, not both"
                .to_string(),
        ));
    }
    let (path, rolling) = match (&strategy.rolling_update, &d.rolling_update) {
        (Some(r), _) => ("spec.deployment.strategy.rollingUpdate", r),
        (None, Some(r)) => ("spec.deployment.rollingUpdate", r),
        (None, None) => return out,
    };
    if let Err(why) = keeps_one_available(rolling, spec.replicas) {
        out.push((path.to_string(), why));
    }
    out
}

/// A field set both at the top level and in `spec.deployment` must say the same.
fn agreement_problems(spec: &TemporalWorkerDeploymentSpec) -> Vec<(String, String)> {
    let Some(d) = &spec.deployment else {
        return Vec::new();
    };
    [
        (
            "progressDeadlineSeconds",
            spec.progress_deadline_seconds,
            d.progress_deadline_seconds,
        ),
        (
            "minReadySeconds",
            spec.min_ready_seconds,
            d.min_ready_seconds,
        ),
    ]
    .into_iter()
    .filter_map(|(field, top, nested)| match (top, nested) {
        (Some(a), Some(b)) if a != b => Some((
            format!("spec.deployment.{field}"),
            format!(
                "{b} differs from spec.{field} {a}: they are the same setting, so when both \
                 are set they must be equal"
            ),
        )),
        _ => None,
    })
    .collect()
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

/// What to record on the Deployments: `None` when nothing is set (then nothing is recorded,
/// and Deployments without a record are left as they are).
pub fn record(spec: &TemporalWorkerDeploymentSpec) -> Option<String> {
    record_of(&applied(spec))
}

fn record_of(a: &Applied) -> Option<String> {
    if *a == Applied::default() {
        return None;
    }
    serde_json::to_string(a).ok()
}

/// How a versioned Deployment replaces its pods: the user's rolling update, within the rules
/// above, over the defaults (one extra pod at a time, never an old pod removed before its
/// replacement is Ready).
fn strategy(a: &Applied) -> DeploymentStrategy {
    let r = a.rolling_update.clone().unwrap_or_default();
    DeploymentStrategy {
        type_: Some(ROLLING_UPDATE.into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(r.max_surge.unwrap_or(IntOrString::Int(DEFAULT_SURGE))),
            max_unavailable: Some(
                r.max_unavailable
                    .unwrap_or(IntOrString::Int(DEFAULT_UNAVAILABLE)),
            ),
        }),
    }
}

/// Puts the settings on `d`: removes the labels and annotations the previous record named,
/// adds the current ones (never over `ours`, the controller's own labels), sets the strategy,
/// the revision history (back to Kubernetes' default when the record had one and the spec no
/// longer does) and the record.
pub fn apply(
    d: &mut Deployment,
    spec: &TemporalWorkerDeploymentSpec,
    ours: &BTreeMap<String, String>,
) {
    let previous: Applied = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SETTINGS))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let current = applied(spec);
    let mut labels = d.metadata.labels.take().unwrap_or_default();
    replace(&mut labels, &previous.labels, &current.labels);
    labels.extend(ours.clone());
    let mut annotations = d.metadata.annotations.take().unwrap_or_default();
    replace(
        &mut annotations,
        &previous.annotations,
        &current.annotations,
    );
    match record_of(&current) {
        Some(r) => annotations.insert(ANNOTATION_SETTINGS.to_string(), r),
        None => annotations.remove(ANNOTATION_SETTINGS),
    };
    // An empty map stays absent, so a Deployment without settings renders as before.
    d.metadata.labels = Some(labels).filter(|m| !m.is_empty());
    d.metadata.annotations = Some(annotations).filter(|m| !m.is_empty());
    let s = &mut d.spec;
    s.strategy = Some(strategy(&current));
    if current.revision_history_limit.is_some() || previous.revision_history_limit.is_some() {
        // None lets the API server default it again.
        s.revision_history_limit = current.revision_history_limit;
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
