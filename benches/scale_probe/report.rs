//! The printed tables (Markdown, so that a run pastes into `docs/performance.md`): one
//! summary table per scenario and N with a column per controller and their ratio, then the
//! raw per-minute counts by verb/resource and by Temporal method.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::ground::Scenario;
use crate::measure::controller_methods;
use crate::measure::{self, KubeTally};
use crate::rig::Which;
use crate::scenarios::Outcome;

/// One summary row: a name and a value per outcome (`None`: not applicable).
struct Row {
    name: &'static str,
    value: fn(&Outcome) -> Option<f64>,
    /// Decimals to print.
    digits: usize,
    /// Issue 27's target for our controller on this row, if any.
    target: Option<Target>,
}

/// A target: its wording, and whether our value meets it (given the Go value, in this
/// scenario; `None`: the target does not apply here).
struct Target {
    text: &'static str,
    met: fn(ours: f64, go: Option<f64>, Scenario) -> Option<bool>,
}

const fn none() -> Option<Target> {
    None
}

fn per_min(o: &Outcome, count: f64) -> f64 {
    count / (o.window.as_secs_f64() / 60.0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (s.len() as f64 - 1.0)).round() as usize;
    s.get(rank).copied()
}

fn controller_temporal(o: &Outcome) -> f64 {
    // `+ 0.0`: an empty sum is -0.0.
    controller_methods(o.steady_temporal.clone())
        .values()
        .sum::<f64>()
        + 0.0
}

const ROWS: &[Row] = &[
    Row {
        name: "controller start → ready (s)",
        value: |o| Some(o.ready_in.as_secs_f64()),
        digits: 2,
        target: none(),
    },
    Row {
        name: "first apply (cold start: spawn) → all N in state (s)",
        value: |o| Some(o.reach.as_secs_f64()),
        digits: 1,
        target: none(),
    },
    Row {
        name: "creation: status writes per object",
        value: |o| Some(o.creation.status_writes as f64 / o.n as f64),
        digits: 2,
        target: none(),
    },
    Row {
        name: "creation: all K8s writes",
        value: |o| Some(o.creation.writes() as f64),
        digits: 0,
        target: none(),
    },
    Row {
        name: "creation: writes answered 409",
        value: |o| Some(o.creation.conflicts as f64),
        digits: 0,
        target: none(),
    },
    Row {
        name: "creation: K8s reads (GET+LIST)",
        value: |o| Some(o.creation.reads() as f64),
        digits: 0,
        target: none(),
    },
    Row {
        name: "creation: Temporal requests",
        value: |o| Some(o.creation_temporal.values().sum::<f64>() + 0.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "creation: ResourceExhausted",
        value: |o| Some(o.creation_exhausted),
        digits: 0,
        target: none(),
    },
    Row {
        name: "steady: K8s writes/min (no Lease)",
        value: |o| Some(per_min(o, o.steady.writes() as f64)),
        digits: 1,
        target: Some(Target {
            text: "idle: 0",
            met: |v, _, s| (s == Scenario::Idle).then_some(v == 0.0),
        }),
    },
    Row {
        name: "steady: K8s reads/min (GET+LIST)",
        value: |o| Some(per_min(o, o.steady.reads() as f64)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "steady: watches ended/min",
        value: |o| Some(per_min(o, o.steady.watches() as f64)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "steady: Lease requests/min",
        value: |o| Some(per_min(o, o.steady.lease as f64)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "steady: Temporal req/min (controller methods)",
        value: |o| Some(per_min(o, controller_temporal(o))),
        digits: 1,
        target: Some(Target {
            text: "idle: ≥ 5× fewer than Go",
            met: |v, go, s| (s == Scenario::Idle).then_some(go? >= 5.0 * v),
        }),
    },
    Row {
        name: "steady: Temporal req/min per object",
        value: |o| Some(per_min(o, controller_temporal(o)) / o.n as f64),
        digits: 3,
        target: none(),
    },
    Row {
        name: "steady: ResourceExhausted/min",
        value: |o| Some(per_min(o, o.steady_exhausted)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "RSS with no object (MiB)",
        value: |o| Some(mib(o.proc_empty.rss_kib)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "RSS at window end (MiB)",
        value: |o| Some(mib(o.proc_after.rss_kib)),
        digits: 1,
        target: Some(Target {
            text: "< 40",
            met: |v, _, s| matches!(s, Scenario::Idle | Scenario::Waiting).then_some(v < 40.0),
        }),
    },
    Row {
        name: "RSS growth per object (KiB)",
        value: |o| Some((o.proc_after.rss_kib as f64 - o.proc_empty.rss_kib as f64) / o.n as f64),
        digits: 1,
        target: none(),
    },
    Row {
        name: "of it: RssAnon (heap, stacks) at window end (MiB)",
        value: |o| Some(mib(o.proc_after.rss_anon_kib)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "of it: RssFile (the executable mapped in) at window end (MiB)",
        value: |o| Some(mib(o.proc_after.rss_file_kib)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "RssAnon growth per object (KiB)",
        value: |o| {
            Some((o.proc_after.rss_anon_kib as f64 - o.proc_empty.rss_anon_kib as f64) / o.n as f64)
        },
        digits: 1,
        target: none(),
    },
    Row {
        name: "peak RSS (MiB)",
        value: |o| Some(mib(o.proc_after.peak_rss_kib)),
        digits: 1,
        target: none(),
    },
    Row {
        name: "CPU s/min in window",
        value: |o| Some(per_min(o, o.proc_after.cpu_secs - o.proc_before.cpu_secs)),
        digits: 3,
        target: none(),
    },
    Row {
        name: "CPU s from start to window end",
        value: |o| Some(o.proc_after.cpu_secs),
        digits: 1,
        target: none(),
    },
    Row {
        name: "version created → Current p50 (ms)",
        value: |o| percentile(&o.promote_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "version created → Current p99 (ms)",
        value: |o| percentile(&o.promote_ms, 99.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "step deadline → next SetRamping p50 (ms)",
        value: |o| percentile(&o.rollout.as_ref()?.step_late_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "step deadline → next SetRamping p99 (ms)",
        value: |o| percentile(&o.rollout.as_ref()?.step_late_ms, 99.0),
        digits: 0,
        target: Some(Target {
            text: "≤ 100",
            met: |v, _, _| Some(v <= 100.0),
        }),
    },
    Row {
        name: "last deadline → SetCurrent p50 (ms)",
        value: |o| percentile(&o.rollout.as_ref()?.promote_late_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "last deadline → SetCurrent p99 (ms)",
        value: |o| percentile(&o.rollout.as_ref()?.promote_late_ms, 99.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "rollout overhead over pauses p50 (s)",
        value: |o| percentile(&o.rollout.as_ref()?.overhead_s, 50.0),
        digits: 2,
        target: none(),
    },
    Row {
        name: "rollout overhead over pauses max (s)",
        value: |o| percentile(&o.rollout.as_ref()?.overhead_s, 100.0),
        digits: 2,
        target: Some(Target {
            text: "≤ 2",
            met: |v, _, _| Some(v <= 2.0),
        }),
    },
    Row {
        name: "cold start: spawn → first status write (ms)",
        value: |o| o.first_write_ms,
        digits: 0,
        target: none(),
    },
    Row {
        name: "pollers ready → SetCurrent p50 (ms)",
        value: |o| percentile(&o.promote.as_ref()?.ready_to_current_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "pollers ready → SetCurrent p99 (ms)",
        value: |o| percentile(&o.promote.as_ref()?.ready_to_current_ms, 99.0),
        digits: 0,
        target: Some(Target {
            text: "≤ 300",
            met: |v, _, _| Some(v <= 300.0),
        }),
    },
    Row {
        name: "floor: pollers ready → Deployment ready (kube-controller-manager) p50 (ms)",
        value: |o| percentile(&o.promote.as_ref()?.ready_to_deployment_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "floor: pollers ready → Deployment ready (kube-controller-manager) p99 (ms)",
        value: |o| percentile(&o.promote.as_ref()?.ready_to_deployment_ms, 99.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "Drained + delay → scaled down p50 (ms)",
        value: |o| percentile(&o.promote.as_ref()?.drained_to_scaled_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "Drained + delay → scaled down p99 (ms)",
        value: |o| percentile(&o.promote.as_ref()?.drained_to_scaled_ms, 99.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "burst: apply → all N v2 Current (s)",
        value: |o| Some(o.burst.as_ref()?.all_current_s),
        digits: 1,
        target: none(),
    },
    Row {
        name: "burst: peak Temporal req/s (controller methods)",
        value: |o| Some(o.burst.as_ref()?.peak_temporal_per_s),
        digits: 1,
        target: none(),
    },
    Row {
        name: "churn: objects created and deleted",
        value: |o| Some(o.churn.as_ref()?.created as f64),
        digits: 0,
        target: none(),
    },
    Row {
        name: "churn: created → Current p50 (ms, 1 s looks)",
        value: |o| percentile(&o.churn.as_ref()?.create_to_current_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "churn: created → Current p99 (ms, 1 s looks)",
        value: |o| percentile(&o.churn.as_ref()?.create_to_current_ms, 99.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "churn: deleted → gone p50 (ms, 1 s looks)",
        value: |o| percentile(&o.churn.as_ref()?.delete_to_gone_ms, 50.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "churn: deleted → gone p99 (ms, 1 s looks)",
        value: |o| percentile(&o.churn.as_ref()?.delete_to_gone_ms, 99.0),
        digits: 0,
        target: none(),
    },
    Row {
        name: "churn: last deletion → nothing left in K8s and Temporal (s)",
        value: |o| o.churn.as_ref()?.cleanup_s,
        digits: 1,
        target: none(),
    },
    Row {
        name: "churn: things left behind",
        value: |o| Some(o.churn.as_ref()?.left_behind.len() as f64),
        digits: 0,
        target: Some(Target {
            text: "0",
            met: |v, _, _| Some(v == 0.0),
        }),
    },
    Row {
        name: "floor: SetWorkerDeploymentRampingVersion RTT mean (ms, ours' own)",
        value: |o| {
            o.ours_rtt_ms
                .get("SetWorkerDeploymentRampingVersion")
                .copied()
        },
        digits: 1,
        target: none(),
    },
    Row {
        name: "floor: SetWorkerDeploymentCurrentVersion RTT mean (ms, ours' own)",
        value: |o| {
            o.ours_rtt_ms
                .get("SetWorkerDeploymentCurrentVersion")
                .copied()
        },
        digits: 1,
        target: none(),
    },
    Row {
        name: "DescribeWorkerDeployment RTT mean in the span (ms, ours' own)",
        value: |o| o.ours_rtt_ms.get("DescribeWorkerDeployment").copied(),
        digits: 1,
        target: none(),
    },
    Row {
        name: "floor: DescribeWorkerDeployment RTT p50 at rest (ms, probe)",
        value: |o| percentile(&o.temporal_rtt_ms, 50.0),
        digits: 1,
        target: none(),
    },
];

/// The summary table of outcomes of one scenario and N (one column each, plus `Go ÷ ours`
/// when both controllers ran).
pub fn summary(outcomes: &[&Outcome]) -> String {
    let Some(first) = outcomes.first() else {
        return String::new();
    };
    let beside = match first.beside {
        0 => String::new(),
        k => format!(", then {k} Progressive rollouts beside it (step rows)"),
    };
    let mut out = format!(
        "\n### {} — N = {}, window {:.0} s{beside}\n\n| metric |",
        first.scenario.label(),
        first.n,
        first.window.as_secs_f64()
    );
    for o in outcomes {
        let _ = write!(out, " {} |", o.which.label());
    }
    let ratio = outcomes.len() == 2;
    out.push_str(if ratio { " Go ÷ ours |" } else { "" });
    out.push_str(" target (ours) |\n|---|");
    out.push_str(&"---:|".repeat(outcomes.len() + usize::from(ratio)));
    out.push_str("---|\n");
    for row in ROWS {
        let values: Vec<Option<f64>> = outcomes.iter().map(|o| (row.value)(o)).collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(out, "| {} |", row.name);
        for v in &values {
            let _ = write!(out, " {} |", fmt(*v, row.digits));
        }
        if ratio {
            let r = match (values[0], values[1]) {
                (Some(a), Some(b)) if a != 0.0 => format!("{:.1}×", b / a),
                (Some(_), Some(b)) if b != 0.0 => "∞".into(),
                _ => "–".into(),
            };
            let _ = write!(out, " {r} |");
        }
        let _ = writeln!(out, " {} |", verdict(row, outcomes, &values));
    }
    let settled: Vec<String> = outcomes
        .iter()
        .map(|o| {
            format!(
                "{}: {}",
                o.which.label(),
                if o.settled {
                    "yes"
                } else {
                    "no (still writing)"
                }
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "\nWrites went quiet before the window: {}",
        settled.join(", ")
    );
    out
}

/// The target cell: the target and whether our value meets it, or empty.
fn verdict(row: &Row, outcomes: &[&Outcome], values: &[Option<f64>]) -> String {
    let value_of = |which| {
        outcomes
            .iter()
            .position(|o| o.which == which)
            .and_then(|i| values[i])
    };
    let (Some(target), Some(ours), Some(first)) =
        (&row.target, value_of(Which::Ours), outcomes.first())
    else {
        return String::new();
    };
    match (target.met)(ours, value_of(Which::Go), first.scenario) {
        Some(true) => format!("{}: met", target.text),
        Some(false) => format!("{}: **missed**", target.text),
        None => String::new(),
    }
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) => format!("{v:.digits$}"),
        None => "–".into(),
    }
}

/// Per-minute requests in the window: Kubernetes by verb/resource, Temporal by method.
pub fn raw(o: &Outcome) -> String {
    let mut out = format!(
        "\nRaw, {} / {} / N = {} (per minute over {:.0} s):\n",
        o.which.label(),
        o.scenario.label(),
        o.n,
        o.window.as_secs_f64()
    );
    let lease: Vec<String> = o
        .steady
        .lease_by_verb
        .iter()
        .map(|(verb, n)| format!("{verb} {:.1}", per_min(o, *n as f64)))
        .collect();
    let _ = writeln!(
        out,
        "  Kubernetes (controller's user; Lease apart, per minute: {}):",
        lease.join(", ")
    );
    write_kube(&mut out, o, &o.steady);
    let _ = writeln!(
        out,
        "  Temporal frontend by method (worker methods marked *):"
    );
    for (method, count) in &o.steady_temporal {
        let star = if measure::is_worker_method(method) {
            "*"
        } else {
            " "
        };
        let _ = writeln!(out, "   {star}{:>9.1}  {method}", per_min(o, *count));
    }
    if let Some(ours) = &o.ours_temporal {
        let _ = writeln!(
            out,
            "  Our controller's own count (temporal_requests_total):"
        );
        for (method, count) in ours {
            let _ = writeln!(out, "    {:>9.1}  {method}", per_min(o, *count));
        }
    }
    let _ = writeln!(out, "  During creation, Kubernetes (totals):");
    let names: BTreeSet<&String> = o.creation.by_verb.keys().collect();
    for name in names {
        let _ = writeln!(out, "    {:>9}  {name}", o.creation.by_verb[name]);
    }
    out
}

fn write_kube(out: &mut String, o: &Outcome, tally: &KubeTally) {
    if tally.by_verb.is_empty() {
        let _ = writeln!(out, "    (none)");
    }
    for (name, count) in &tally.by_verb {
        let _ = writeln!(out, "    {:>9.1}  {name}", per_min(o, *count as f64));
    }
}
