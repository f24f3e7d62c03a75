//! `temporal-worker-controller status NAME --watch`: a live per-version table of one rollout,
//! redrawn on every change (the status API's event stream with `--api-url`, else a Kubernetes
//! watch).
//!
//! [`render`] and [`frame`] are pure and unit-tested; [`run`] follows and prints.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use crate::api::conditions as cond;
use crate::api::twd::{DeprecatedVersion, RolloutStrategy, VersionInfo, VersionStatus};
use crate::cli::follow::{self, Source, Update};
use crate::cli::render::{eta, old_version_eta, rel, table};
use crate::cli::status::{self, CliError, OutputFormat};
use crate::summary::{self as view, Phase, RolloutView};

/// Clears the screen and homes the cursor (a TTY's redraw).
pub const CLEAR: &str = "\x1b[H\x1b[2J";

/// How often a TTY redraws without a change, so that the ETA counts down.
const TICK: Duration = Duration::from_secs(1);

/// The view of one rollout: a header line and one row per version.
pub fn render(v: &RolloutView, now: jiff::Timestamp) -> String {
    let s = &v.summary;
    let phase = match (&s.reason, &s.message) {
        (Some(r), Some(m)) => format!("{} ({r}: {m})", s.phase.as_str()),
        (Some(r), None) => format!("{} ({r})", s.phase.as_str()),
        _ => s.phase.as_str().to_string(),
    };
    let generation = match (s.observed_generation, s.generation) {
        (Some(o), Some(g)) => format!("{o}/{g}"),
        (None, Some(g)) => format!("-/{g}"),
        _ => "-".into(),
    };
    let mut out = format!(
        "{}/{}   {}   {phase}   generation {generation}\n",
        v.namespace,
        v.name,
        view::strategy_str(s.strategy)
    );
    let rows = rows(v, now);
    if rows.is_empty() {
        out.push_str("No versions yet.\n");
    } else {
        out.push_str(&table(
            &[
                "BUILD",
                "ROLE",
                "STATE",
                "RAMP",
                "PODS",
                "POLLERS",
                "DRAIN",
                "NEXT STEP",
                "ETA",
            ],
            &rows,
        ));
    }
    out
}

/// `body` as printed: after a screen clear on a TTY; else after a blank line, except the first,
/// so that a pipe reads tables separated by blank lines.
pub fn frame(body: &str, tty: bool, first: bool) -> String {
    match (tty, first) {
        (true, _) => format!("{CLEAR}{body}"),
        (false, true) => body.to_string(),
        (false, false) => format!("\n{body}"),
    }
}

fn pct(p: f64) -> String {
    if (p - p.round()).abs() < 0.05 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

fn pods(v: &VersionInfo) -> String {
    match (v.ready_replicas, v.replicas) {
        (r, Some(d)) => format!("{}/{d}", r.unwrap_or(0)),
        _ => "-".into(),
    }
}

/// What the status says about a version's pollers. Status keeps no poller counts; the
/// conditions say whether the live versions' pollers are healthy and whether the target's
/// have registered.
fn pollers(v: &RolloutView, version: &VersionInfo, is_target: bool) -> &'static str {
    let reason = v.summary.reason.as_deref();
    match version.status {
        VersionStatus::Current | VersionStatus::Ramping => match reason {
            Some(cond::NO_ACTIVE_POLLERS) => "none active",
            Some(cond::POLLER_STATUS_UNKNOWN) => "unknown",
            _ => "ok",
        },
        VersionStatus::NotRegistered | VersionStatus::Inactive
            if is_target && reason == Some(cond::WAITING_FOR_POLLERS) =>
        {
            "waiting"
        }
        VersionStatus::Inactive => "registered",
        VersionStatus::NotRegistered => "none",
        VersionStatus::Draining | VersionStatus::Drained => "-",
    }
}

/// Share of new workflows going to the target (0–100).
fn target_share(v: &RolloutView) -> f64 {
    v.summary.target_traffic_ratio * 100.0
}

/// The step that comes next for the target and when.
fn next_step(v: &RolloutView, now: jiff::Timestamp) -> (String, String) {
    let s = &v.summary;
    if s.target_status == Some(VersionStatus::Current) || s.target_build_id.is_none() {
        return ("-".into(), "-".into());
    }
    let next = match s.strategy {
        RolloutStrategy::Manual => "manual promote".to_string(),
        RolloutStrategy::AllAtOnce => "promote".to_string(),
        RolloutStrategy::Progressive => {
            let done = s.step.and_then(|i| usize::try_from(i).ok()).unwrap_or(0);
            match v.spec.steps.get(done) {
                Some(step) => format!(
                    "step {}/{} ({}%)",
                    done + 1,
                    v.spec.steps.len(),
                    step.ramp_percentage
                ),
                None => "promote".to_string(),
            }
        }
    };
    let when = if s.phase == Phase::Paused || s.phase == Phase::Stalled {
        s.phase.as_str().to_lowercase()
    } else {
        eta(s.next_step_at, now)
    };
    (next, when)
}

fn drain(d: &DeprecatedVersion, now: jiff::Timestamp) -> String {
    match d.version.status {
        VersionStatus::Draining => {
            let mut text = "draining".to_string();
            if let Some(since) = &d.draining_since {
                text.push_str(&format!(" since {}", rel(since.0, now)));
            }
            if let Some(n) = d.open_pinned_workflows {
                text.push_str(&format!(", {n} pinned"));
            }
            text
        }
        VersionStatus::Drained => match old_version_eta(d, now).as_str() {
            "-" => "drained".into(),
            eta => format!("drained, {eta}"),
        },
        _ => "-".into(),
    }
}

fn rows(v: &RolloutView, now: jiff::Timestamp) -> Vec<Vec<String>> {
    let Some(status) = &v.status else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    let target_id = status
        .target_version
        .as_ref()
        .map(|t| t.version.build_id.as_str());
    let share = target_share(v);
    if let Some(t) = &status.target_version {
        let is_current = status
            .current_version
            .as_ref()
            .is_some_and(|c| c.build_id == t.version.build_id);
        let (next, when) = next_step(v, now);
        rows.push(vec![
            t.version.build_id.clone(),
            if is_current {
                "target, current"
            } else {
                "target"
            }
            .into(),
            view::version_status_str(t.version.status).into(),
            pct(share),
            pods(&t.version),
            pollers(v, &t.version, true).into(),
            "-".into(),
            next,
            when,
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
            view::version_status_str(c.status).into(),
            pct(100.0 - share),
            pods(c),
            pollers(v, c, false).into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    for d in &status.deprecated_versions {
        rows.push(vec![
            d.version.build_id.clone(),
            "old".into(),
            view::version_status_str(d.version.status).into(),
            "-".into(),
            pods(&d.version),
            pollers(v, &d.version, false).into(),
            drain(d, now),
            "-".into(),
            "-".into(),
        ]);
    }
    rows
}

pub struct WatchArgs {
    pub source: Source,
    pub namespace: Option<String>,
    pub name: String,
    /// Print each new state in this shape (one JSON document a line, or YAML documents)
    /// instead of the table.
    pub output: Option<OutputFormat>,
}

/// Follows the rollout until it is deleted or the user interrupts.
pub async fn run(args: WatchArgs) -> Result<(), CliError> {
    let mut updates = follow::follow(&args.source, args.namespace.as_deref(), &args.name).await?;
    let tty = std::io::stdout().is_terminal() && args.output.is_none();
    let mut latest: Option<Box<RolloutView>> = None;
    let mut printed: Option<String> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            update = updates.recv() => match update {
                Some(Update::Rollout(v)) => {
                    if let Some(format) = args.output {
                        emit(&structured_line(&v, format)?);
                        continue;
                    }
                    let body = render(&v, jiff::Timestamp::now());
                    // A pipe gets a table only when it differs from the last one.
                    if tty || printed.as_deref() != Some(body.as_str()) {
                        emit(&frame(&body, tty, printed.is_none()));
                        printed = Some(body);
                    }
                    latest = Some(v);
                }
                Some(Update::Deleted) => {
                    eprintln!("{} was deleted", args.name);
                    return Ok(());
                }
                Some(Update::Trouble(t)) => eprintln!("warning: {t} (retrying)"),
                Some(Update::Fatal(e)) => return Err(e),
                None => return Ok(()),
            },
            _ = tick.tick(), if tty => {
                if let Some(v) = &latest {
                    emit(&frame(&render(v, jiff::Timestamp::now()), true, false));
                }
            }
        }
    }
}

/// One state as a JSON line or a YAML document.
fn structured_line(v: &RolloutView, format: OutputFormat) -> Result<String, CliError> {
    let value = serde_json::to_value(v).map_err(|e| CliError::Encode(e.to_string()))?;
    match format {
        OutputFormat::Json => serde_json::to_string(&value)
            .map(|s| s + "\n")
            .map_err(|e| CliError::Encode(e.to_string())),
        OutputFormat::Yaml => status::encode(&value, format).map(|s| format!("---\n{s}")),
    }
}

fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TemporalWorkerDeployment;
    use crate::fixtures::ts;

    fn view(status: serde_json::Value) -> RolloutView {
        let mut twd = TemporalWorkerDeployment::test()
            .image("orders:v2")
            .generation(4)
            .progressive(&[(10, "5m"), (25, "5m"), (50, "5m")]);
        twd.status = Some(serde_json::from_value(status).expect("status"));
        RolloutView::from_twd(&twd, Vec::new())
    }

    fn ramping() -> RolloutView {
        view(serde_json::json!({
            "observedGeneration": 4,
            "targetVersion": {"buildID": "v2-abc", "status": "Ramping", "rampPercentage": 25.0,
                              "currentStep": 2, "nextStepAt": "2024-05-01T12:04:30Z",
                              "replicas": 3, "readyReplicas": 2},
            "currentVersion": {"buildID": "v1-def", "status": "Current", "replicas": 3, "readyReplicas": 3},
            "deprecatedVersions": [
                {"buildID": "v0-xyz", "status": "Drained", "drainedSince": "2024-05-01T11:00:00Z",
                 "scaledownAt": "2024-05-01T13:00:00Z", "replicas": 1, "readyReplicas": 1},
                {"buildID": "v0-old", "status": "Draining", "drainingSince": "2024-05-01T11:50:00Z",
                 "openPinnedWorkflows": 2}],
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Ramping", "message": "step 2 of 3",
                 "lastTransitionTime": "2024-05-01T11:50:00Z"},
                {"type": "Progressing", "status": "True", "reason": "Ramping", "message": "step 2 of 3",
                 "lastTransitionTime": "2024-05-01T11:50:00Z"}]
        }))
    }

    #[test]
    fn a_ramping_rollout_shows_every_version() {
        let text = render(&ramping(), ts("2024-05-01T12:00:00Z"));
        let want = "\
shop/orders   Progressive   Progressing (Ramping: step 2 of 3)   generation 4/4
BUILD    ROLE      STATE      RAMP   PODS   POLLERS   DRAIN                          NEXT STEP        ETA
v2-abc   target    Ramping    25%    2/3    ok        -                              step 3/3 (50%)   in 4m30s
v1-def   current   Current    75%    3/3    ok        -                              -                -
v0-xyz   old       Drained    -      1/1    -         drained, scale-down in 1h      -                -
v0-old   old       Draining   -      -      -         draining since 10m ago, 2 pinned   -            -
";
        // Columns align on the widest cell; compare row by row, whitespace-normalised.
        let norm = |s: &str| -> Vec<Vec<String>> {
            s.lines()
                .map(|l| {
                    l.split("   ")
                        .map(|c| c.trim().to_string())
                        .filter(|c| !c.is_empty())
                        .collect()
                })
                .collect()
        };
        assert_eq!(norm(&text), norm(want), "{text}");
        // And the table really is aligned: every row's ETA column starts at the same place.
        let lines: Vec<&str> = text.lines().skip(1).collect();
        let at = lines[0].find("ETA").expect("header");
        assert_eq!(lines[1].find("in 4m30s"), Some(at), "{text}");
    }

    #[test]
    fn a_completed_rollout_has_one_live_version_at_100() {
        let done = view(serde_json::json!({
            "observedGeneration": 4,
            "targetVersion": {"buildID": "v2-abc", "status": "Current", "replicas": 3, "readyReplicas": 3},
            "currentVersion": {"buildID": "v2-abc", "status": "Current", "replicas": 3, "readyReplicas": 3},
            "conditions": [{"type": "Ready", "status": "True", "reason": "RolloutComplete", "message": "done",
                            "lastTransitionTime": "2024-05-01T11:50:00Z"}]
        }));
        let text = render(&done, ts("2024-05-01T12:00:00Z"));
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(
            rows[0].contains("Completed (RolloutComplete: done)"),
            "{text}"
        );
        let cells: Vec<&str> = rows[2].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "v2-abc", "target,", "current", "Current", "100%", "3/3", "ok", "-", "-", "-"
            ]
        );
    }

    #[test]
    fn waiting_paused_and_stalled_targets_say_so() {
        let waiting = view(serde_json::json!({
            "observedGeneration": 3,
            "targetVersion": {"buildID": "v2-abc", "status": "NotRegistered", "replicas": 1, "readyReplicas": 0},
            "currentVersion": {"buildID": "v1-def", "status": "Current"},
            "conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForPollers", "message": "",
                            "lastTransitionTime": "2024-05-01T11:50:00Z"}]
        }));
        let text = render(&waiting, ts("2024-05-01T12:00:00Z"));
        assert!(text.contains("generation 3/4"), "{text}");
        let target: Vec<&str> = text
            .lines()
            .nth(2)
            .expect("row")
            .split_whitespace()
            .collect();
        assert_eq!(
            target,
            [
                "v2-abc",
                "target",
                "NotRegistered",
                "0%",
                "0/1",
                "waiting",
                "-",
                "step",
                "1/3",
                "(10%)",
                "-"
            ]
        );
        let current: Vec<&str> = text
            .lines()
            .nth(3)
            .expect("row")
            .split_whitespace()
            .collect();
        assert_eq!(current[3], "100%", "{text}");

        let mut paused = ramping();
        paused.summary.phase = Phase::Paused;
        let text = render(&paused, ts("2024-05-01T12:00:00Z"));
        assert!(
            text.lines().nth(2).expect("row").ends_with("paused"),
            "{text}"
        );

        let none = view(serde_json::json!({"observedGeneration": 4}));
        assert!(render(&none, ts("2024-05-01T12:00:00Z")).ends_with("No versions yet.\n"));
    }

    #[test]
    fn frames_clear_a_tty_and_separate_tables_on_a_pipe() {
        assert_eq!(frame("T\n", true, true), "\x1b[H\x1b[2JT\n");
        assert_eq!(frame("T\n", true, false), "\x1b[H\x1b[2JT\n");
        assert_eq!(frame("T\n", false, true), "T\n");
        assert_eq!(frame("U\n", false, false), "\nU\n");
        let piped: String = [frame("A\n", false, true), frame("B\n", false, false)].concat();
        assert_eq!(piped.split("\n\n").collect::<Vec<_>>(), ["A", "B\n"]);
    }

    #[test]
    fn structured_lines_are_one_json_document_each() {
        let line = structured_line(&ramping(), OutputFormat::Json).expect("json");
        assert_eq!(line.matches('\n').count(), 1);
        let back: RolloutView = serde_json::from_str(&line).expect("parses");
        assert_eq!(back, ramping());
        let yaml = structured_line(&ramping(), OutputFormat::Yaml).expect("yaml");
        let doc = yaml.strip_prefix("---\n").expect("a YAML document");
        let back: RolloutView = serde_yaml::from_str(doc).expect("parses");
        assert_eq!(back, ramping());
    }
}
