//! The text of `temporal-worker-controller status` (and the tables `status --watch` redraws):
//! pure functions of what was fetched and the time, so the layout is unit-tested.

use std::fmt::Write as _;

use crate::api::twd::{TemporalWorkerDeploymentStatus, VersionInfo, VersionStatus};
use crate::summary::{self as view, RolloutSummary, RolloutView};

/// What to print.
#[derive(Clone, Debug, PartialEq)]
pub enum StatusView {
    List(Vec<RolloutSummary>),
    One(Box<RolloutView>),
}

/// The text `status` prints. `now` makes relative times (ETA, ages) testable.
pub fn render(view: &StatusView, now: jiff::Timestamp) -> String {
    match view {
        StatusView::List(items) if items.is_empty() => {
            "No TemporalWorkerDeployments found.\n".to_string()
        }
        StatusView::List(items) => render_list(items, now),
        StatusView::One(one) => render_one(one, now),
    }
}

fn render_list(items: &[RolloutSummary], now: jiff::Timestamp) -> String {
    let many_ns = items.iter().any(|s| s.namespace != items[0].namespace);
    let mut header = vec![
        "NAME", "STRATEGY", "PHASE", "TARGET", "CURRENT", "RAMP", "STEP", "READY", "ETA",
    ];
    if many_ns {
        header.insert(0, "NAMESPACE");
    }
    let rows = items
        .iter()
        .map(|s| {
            let mut row = vec![
                s.name.clone(),
                view::strategy_str(s.strategy).to_string(),
                s.phase.as_str().to_string(),
                opt(&s.target_build_id),
                opt(&s.current_build_id),
                ramp(s),
                step(s),
                if s.ready { "True" } else { "False" }.to_string(),
                eta(s.next_step_at, now),
            ];
            if many_ns {
                row.insert(0, s.namespace.clone());
            }
            row
        })
        .collect::<Vec<_>>();
    table(&header, &rows)
}

fn render_one(v: &RolloutView, now: jiff::Timestamp) -> String {
    let mut out = String::new();
    summary_lines(&mut out, v, now);

    if let Some(status) = &v.status {
        section(
            &mut out,
            "Versions",
            &[
                "BUILD ID",
                "ROLE",
                "STATUS",
                "REPLICAS",
                "DRAINED SINCE",
                "SCALE DOWN AT",
                "DELETE AT",
            ],
            &version_rows(status, now),
        );
        section(
            &mut out,
            "Old versions (what keeps them)",
            &[
                "BUILD ID",
                "STATUS",
                "DRAINING SINCE",
                "PINNED",
                "ETA",
                "OLDEST PINNED",
                "WAITING FOR",
            ],
            &old_version_rows(status, now),
        );
        section(
            &mut out,
            "Conditions",
            &["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"],
            &condition_rows(status, now),
        );
    }
    section(
        &mut out,
        "Recent milestones",
        &["WHEN", "TYPE", "REASON", "MESSAGE"],
        &milestone_rows(v, now),
    );
    out
}

fn condition_rows(
    status: &TemporalWorkerDeploymentStatus,
    now: jiff::Timestamp,
) -> Vec<Vec<String>> {
    status
        .conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                rel(c.last_transition_time.0, now),
                c.message.clone(),
            ]
        })
        .collect()
}

fn milestone_rows(v: &RolloutView, now: jiff::Timestamp) -> Vec<Vec<String>> {
    v.milestones
        .iter()
        .map(|m| {
            vec![
                rel(m.time, now),
                format!("{:?}", m.kind),
                m.reason.clone(),
                m.message.clone(),
            ]
        })
        .collect()
}

/// The one-line facts at the top of one rollout's view.
fn summary_lines(out: &mut String, v: &RolloutView, now: jiff::Timestamp) {
    let s = &v.summary;
    let _ = writeln!(out, "Name:       {}/{}", v.namespace, v.name);
    let _ = writeln!(out, "Strategy:   {}", view::strategy_str(s.strategy));
    let phase = match (&s.reason, &s.message) {
        (Some(r), Some(m)) => format!("{} ({r}: {m})", s.phase.as_str()),
        (Some(r), None) => format!("{} ({r})", s.phase.as_str()),
        _ => s.phase.as_str().to_string(),
    };
    let _ = writeln!(
        out,
        "Phase:      {phase}{}",
        s.phase_since
            .map(|t| format!(", since {}", rel(t, now)))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "Ready:      {}",
        if s.ready { "True" } else { "False" }
    );
    let _ = writeln!(out, "Target:     {}", opt(&s.target_build_id));
    let _ = writeln!(out, "Current:    {}", opt(&s.current_build_id));
    let _ = writeln!(out, "Ramp:       {}", ramp(s));
    let _ = writeln!(out, "Step:       {}", step(s));
    let _ = writeln!(out, "Next step:  {}", eta(s.next_step_at, now));
    let generation = match (s.observed_generation, s.generation) {
        (Some(o), Some(g)) => format!("{o}/{g}"),
        (None, Some(g)) => format!("-/{g}"),
        _ => "-".into(),
    };
    let _ = writeln!(out, "Observed:   generation {generation}");
}

fn version_rows(status: &TemporalWorkerDeploymentStatus, now: jiff::Timestamp) -> Vec<Vec<String>> {
    let replicas = |v: &VersionInfo| match (v.ready_replicas, v.replicas) {
        (r, Some(d)) => format!("{}/{d}", r.unwrap_or(0)),
        _ => "-".into(),
    };
    let status_str = |s: VersionStatus| view::version_status_str(s).to_string();
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map(|t| rel(t.0, now)).unwrap_or_else(|| "-".into())
    };
    let mut rows = Vec::new();
    let target_id = status
        .target_version
        .as_ref()
        .map(|t| t.version.build_id.as_str());
    if let Some(t) = &status.target_version {
        let role = if status
            .current_version
            .as_ref()
            .is_some_and(|c| c.build_id == t.version.build_id)
        {
            "target, current"
        } else {
            "target"
        };
        rows.push(vec![
            t.version.build_id.clone(),
            role.into(),
            status_str(t.version.status),
            replicas(&t.version),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    if let Some(c) = status
        .current_version
        .as_ref()
        .filter(|c| Some(c.build_id.as_str()) != target_id)
    {
        rows.push(vec![
            c.build_id.clone(),
            "current".into(),
            status_str(c.status),
            replicas(c),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    for d in &status.deprecated_versions {
        rows.push(vec![
            d.version.build_id.clone(),
            "deprecated".into(),
            status_str(d.version.status),
            replicas(&d.version),
            time(d.drained_since.as_ref()),
            time(d.scaledown_at.as_ref()),
            time(d.delete_at.as_ref()),
        ]);
    }
    rows
}

/// A titled table, left out when it has no rows.
fn section(out: &mut String, title: &str, header: &[&str], rows: &[Vec<String>]) {
    if !rows.is_empty() {
        out.push('\n');
        out.push_str(title);
        out.push_str(":\n");
        out.push_str(&table(header, rows));
    }
}

/// Old versions that still wait for something (drain visibility).
fn old_version_rows(
    status: &TemporalWorkerDeploymentStatus,
    now: jiff::Timestamp,
) -> Vec<Vec<String>> {
    status
        .deprecated_versions
        .iter()
        .filter(|d| d.waiting_for.is_some() || d.open_pinned_workflows.is_some())
        .map(|d| {
            let oldest = d
                .oldest_pinned_workflows
                .first()
                .map(|w| {
                    let started = w.start_time.as_ref().map(|t| rel(t.0, now));
                    format!(
                        "{}/{} (started {})",
                        w.workflow_type,
                        w.workflow_id,
                        started.as_deref().unwrap_or("-")
                    )
                })
                .unwrap_or_else(|| "-".into());
            vec![
                d.version.build_id.clone(),
                view::version_status_str(d.version.status).to_string(),
                d.draining_since
                    .as_ref()
                    .map(|t| rel(t.0, now))
                    .unwrap_or_else(|| "-".into()),
                d.open_pinned_workflows
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                old_version_eta(d, now),
                oldest,
                d.waiting_for.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

/// When an old version goes away, where that is knowable: a Draining version's pinned workflows
/// end at `spec.sunset`'s terminate (or cancel) deadline, then Temporal's drainage check
/// follows; a Drained one has its scale-down and deletion times. A Draining version without a
/// deadline has no ETA: its workflows run as long as they run (the PINNED column counts them).
pub(crate) fn old_version_eta(
    d: &crate::api::twd::DeprecatedVersion,
    now: jiff::Timestamp,
) -> String {
    let future =
        |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| Some(t.0).filter(|t| *t > now);
    match d.version.status {
        VersionStatus::Draining => match (&d.pinned_workflows_end_at, d.open_pinned_workflows) {
            (Some(t), _) if t.0 > now => format!("pinned end {}", rel(t.0, now)),
            (Some(_), _) => "Temporal's drainage check".into(),
            (None, Some(n)) if n > 0 => format!("unknown ({n} pinned)"),
            (None, _) => "Temporal's drainage check".into(),
        },
        VersionStatus::Drained => match (
            d.scaledown_at.as_ref().and_then(future),
            d.delete_at.as_ref().and_then(future),
        ) {
            (Some(t), _) => format!("scale-down {}", rel(t, now)),
            (None, Some(t)) => format!("deletion {}", rel(t, now)),
            (None, None) => "-".into(),
        },
        _ => "-".into(),
    }
}

pub(crate) fn opt(s: &Option<String>) -> String {
    s.clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "-".into())
}

pub(crate) fn ramp(s: &RolloutSummary) -> String {
    match s.target_status {
        Some(VersionStatus::Current) | Some(VersionStatus::Ramping) => {
            let pct = s.target_traffic_ratio * 100.0;
            if (pct - pct.round()).abs() < 0.05 {
                format!("{pct:.0}%")
            } else {
                format!("{pct:.1}%")
            }
        }
        _ => "-".into(),
    }
}

/// "2/4": step 2 of 4 (steps are numbered from 1 everywhere).
pub(crate) fn step(s: &RolloutSummary) -> String {
    match (s.step, s.steps) {
        (Some(i), n) if n > 0 => format!("{i}/{n}"),
        (Some(i), _) => format!("{i}"),
        _ => "-".into(),
    }
}

pub(crate) fn eta(at: Option<jiff::Timestamp>, now: jiff::Timestamp) -> String {
    match at {
        None => "-".into(),
        Some(t) if t <= now => "due".into(),
        Some(t) => format!("in {}", short_duration(t.as_second() - now.as_second())),
    }
}

pub(crate) fn rel(t: jiff::Timestamp, now: jiff::Timestamp) -> String {
    let secs = t.as_second() - now.as_second();
    match secs {
        0 => "now".into(),
        s if s > 0 => format!("in {}", short_duration(s)),
        s => format!("{} ago", short_duration(-s)),
    }
}

/// Two most significant units: `2d3h`, `1h5m`, `4m30s`, `12s`.
pub(crate) fn short_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (d, h, m, s) = (
        secs / 86_400,
        (secs % 86_400) / 3600,
        (secs % 3600) / 60,
        secs % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) if s == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) if m == 0 => format!("{h}h"),
        (0, _, _) => format!("{h}h{m}m"),
        _ if h == 0 => format!("{d}d"),
        _ => format!("{d}d{h}h"),
    }
}

/// Left-aligned columns separated by three spaces, like kubectl.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                text.push_str("   ");
            }
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(cell.chars().count());
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TemporalWorkerDeployment;
    use crate::fixtures::ts;
    use crate::milestones::{Milestone, MilestoneKind};

    /// The shared fixture (image `orders:v2`, generation 4, three 5-minute steps) mid-ramp:
    /// step 2 of 3 at 25 %, one Drained deprecated version.
    fn progressive() -> TemporalWorkerDeployment {
        let mut twd = TemporalWorkerDeployment::test()
            .image("orders:v2")
            .generation(4)
            .progressive(&[(10, "5m"), (25, "5m"), (50, "5m")]);
        twd.status = Some(
            serde_json::from_value(serde_json::json!({
                "observedGeneration": 4, "versionCount": 3,
                "targetVersion": {"buildID": "v2-abc", "status": "Ramping", "rampPercentage": 25.0,
                                  "currentStep": 2, "nextStepAt": "2024-05-01T12:04:30Z",
                                  "replicas": 3, "readyReplicas": 2},
                "currentVersion": {"buildID": "v1-def", "status": "Current", "replicas": 3, "readyReplicas": 3},
                "deprecatedVersions": [{"buildID": "v0-xyz", "status": "Drained",
                                        "drainedSince": "2024-05-01T11:00:00Z",
                                        "scaledownAt": "2024-05-01T13:00:00Z",
                                        "deleteAt": "2024-05-02T13:00:00Z",
                                        "eligibleForDeletion": true}],
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "Ramping", "message": "ramping to 25%",
                     "lastTransitionTime": "2024-05-01T11:50:00Z"},
                    {"type": "Progressing", "status": "True", "reason": "Ramping", "message": "ramping to 25%",
                     "lastTransitionTime": "2024-05-01T11:50:00Z"}]
            }))
            .unwrap(),
        );
        twd
    }

    #[test]
    fn list_table() {
        let now = ts("2024-05-01T12:00:00Z");
        let mut other = progressive();
        other.metadata.namespace = Some("billing".into());
        other.metadata.name = Some("invoices".into());
        other.spec.rollout.strategy = crate::api::twd::RolloutStrategy::AllAtOnce;
        let st = other.status.as_mut().unwrap();
        st.target_version.as_mut().unwrap().version.status = VersionStatus::Current;
        st.target_version.as_mut().unwrap().next_step_at = None;
        st.conditions[0].status = "True".into();
        st.conditions[0].reason = "RolloutComplete".into();
        let items = vec![
            RolloutSummary::from_twd(&other),
            RolloutSummary::from_twd(&progressive()),
        ];
        let text = render(&StatusView::List(items), now);
        let want = "\
NAMESPACE   NAME       STRATEGY      PHASE         TARGET   CURRENT   RAMP   STEP   READY   ETA
billing     invoices   AllAtOnce     Completed     v2-abc   v1-def    100%   2/3    True    -
shop        orders     Progressive   Progressing   v2-abc   v1-def    25%    2/3    False   in 4m30s
";
        assert_eq!(text, want);
    }

    #[test]
    fn single_namespace_list_has_no_namespace_column() {
        let text = render(
            &StatusView::List(vec![RolloutSummary::from_twd(&progressive())]),
            ts("2024-05-01T12:10:00Z"),
        );
        assert!(text.starts_with("NAME "), "{text}");
        assert!(text.contains(" due\n"), "overdue ETA: {text}");
        assert_eq!(
            render(&StatusView::List(vec![]), ts("2024-05-01T12:00:00Z")),
            "No TemporalWorkerDeployments found.\n"
        );
    }

    #[test]
    fn one_rollout_details() {
        let now = ts("2024-05-01T12:00:00Z");
        let milestones = vec![Milestone {
            time: ts("2024-05-01T11:59:00Z"),
            kind: MilestoneKind::Normal,
            reason: "RampStepStarted".into(),
            message: "step 2: 25%".into(),
        }];
        let view = RolloutView::from_twd(&progressive(), milestones);
        let text = render(&StatusView::One(Box::new(view)), now);
        let want = "\
Name:       shop/orders
Strategy:   Progressive
Phase:      Progressing (Ramping: ramping to 25%), since 10m ago
Ready:      False
Target:     v2-abc
Current:    v1-def
Ramp:       25%
Step:       2/3
Next step:  in 4m30s
Observed:   generation 4/4

Versions:
BUILD ID   ROLE         STATUS    REPLICAS   DRAINED SINCE   SCALE DOWN AT   DELETE AT
v2-abc     target       Ramping   2/3        -               -               -
v1-def     current      Current   3/3        -               -               -
v0-xyz     deprecated   Drained   -          1h ago          in 1h           in 1d1h

Conditions:
TYPE          STATUS   REASON    SINCE     MESSAGE
Ready         False    Ramping   10m ago   ramping to 25%
Progressing   True     Ramping   10m ago   ramping to 25%

Recent milestones:
WHEN     TYPE     REASON            MESSAGE
1m ago   Normal   RampStepStarted   step 2: 25%
";
        assert_eq!(text, want);
    }

    #[test]
    fn old_versions_say_what_keeps_them() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let now = ts("2024-05-01T12:00:00Z");
        let mut twd = progressive();
        let status = twd.status.as_mut().expect("status");
        let d = &mut status.deprecated_versions[0];
        d.version.status = VersionStatus::Draining;
        d.drained_since = None;
        d.draining_since = Some(Time(ts("2024-05-01T11:30:00Z")));
        d.open_pinned_workflows = Some(1);
        d.oldest_pinned_workflows = vec![crate::api::twd::PinnedWorkflow {
            workflow_type: "wait".into(),
            workflow_id: "order-7".into(),
            start_time: Some(Time(ts("2024-05-01T10:00:00Z"))),
        }];
        d.waiting_for = Some("1 open workflow pinned to it to finish".into());
        let text = render(
            &StatusView::One(Box::new(RolloutView::from_twd(&twd, Vec::new()))),
            now,
        );
        let want = "\
Old versions (what keeps them):
BUILD ID   STATUS     DRAINING SINCE   PINNED   ETA                  OLDEST PINNED                   WAITING FOR
v0-xyz     Draining   30m ago          1        unknown (1 pinned)   wait/order-7 (started 2h ago)   1 open workflow pinned to it to finish
";
        assert!(text.contains(want), "{text}");

        // A terminate deadline makes the end knowable.
        let d = &mut twd.status.as_mut().expect("status").deprecated_versions[0];
        d.pinned_workflows_end_at = Some(Time(ts("2024-05-01T15:00:00Z")));
        let text = render(
            &StatusView::One(Box::new(RolloutView::from_twd(&twd, Vec::new()))),
            now,
        );
        assert!(
            text.contains("   1        pinned end in 3h   wait/"),
            "{text}"
        );
        let d = &mut twd.status.as_mut().expect("status").deprecated_versions[0];
        d.pinned_workflows_end_at = Some(Time(ts("2024-05-01T11:00:00Z")));
        d.open_pinned_workflows = Some(0);
        let text = render(
            &StatusView::One(Box::new(RolloutView::from_twd(&twd, Vec::new()))),
            now,
        );
        assert!(
            text.contains("   0        Temporal's drainage check   "),
            "{text}"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(short_duration(5), "5s");
        assert_eq!(short_duration(60), "1m");
        assert_eq!(short_duration(3_900), "1h5m");
        assert_eq!(short_duration(7_200), "2h");
        assert_eq!(short_duration(86_400 * 2 + 3_600 * 3 + 5), "2d3h");
        assert_eq!(short_duration(-3), "0s");
    }
}
