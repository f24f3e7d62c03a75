//! Rollout strategies end to end (issue 3): AllAtOnce, Progressive, Manual, and a spec change
//! in the middle of a ramp. Old versions and their pinned workflows: `old_versions.rs`.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};
use temporal_worker_controller::api::TemporalWorkerDeployment;
use temporal_worker_controller::temporal::state::TemporalVersionStatus;

use crate::support::*;
use test_harness::gitops::{self, Status};

const T: Duration = Duration::from_secs(120);

fn progressive(steps: &[(i32, &str)]) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(p, d)| json!({"rampPercentage": p, "pauseDuration": d}))
        .collect();
    json!({"strategy": "Progressive", "steps": steps})
}

/// Applies v1 with AllAtOnce and waits until it is Current; returns its build ID.
pub(crate) async fn deploy_first(c: &Case, name: &str) -> Result<String> {
    c.apply_twd(name, "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c.wait_twd(name, "first version Ready", T, is_ready).await?;
    current_build(&twd).context("Ready without a current version")
}

fn build_of_spec(twd: &TemporalWorkerDeployment) -> String {
    temporal_worker_controller::build_id::compute(
        &twd.spec.template,
        twd.spec.worker_options.custom_build_id.as_deref(),
    )
    .expect("valid template")
}

/// Invariants that hold throughout every rollout:
/// - Temporal never routes new work (Current) to a version without running workers;
/// - a status that claims to have observed the current generation describes that
///   generation's build;
/// - kstatus and the ArgoCD health script never call an unobserved generation done.
fn check_invariants(samples: &[Sample], history: &[Value]) -> Result<()> {
    for s in samples {
        let twd: TemporalWorkerDeployment = serde_json::from_value(s.twd.clone())?;
        if let Some(current) = &s.temporal.routing.current_build_id
            && !s.workers.is_empty()
        {
            let dep = deployment_of(&twd.metadata.name.clone().unwrap_or_default(), current);
            ensure!(
                s.workers.get(&dep).copied().unwrap_or(0) > 0,
                "Temporal routes to {current} but {dep} has no running workers"
            );
        }
    }
    for v in history {
        let twd: TemporalWorkerDeployment = serde_json::from_value(v.clone())?;
        // Every GitOps engine reads every version of the object the same way: real kstatus
        // (kubectl-style waits, Helm 4 --wait through Flux's fork), Flux's CEL health checks and
        // the ArgoCD Lua, in mlua and in Argo CD's own engine (gopher-lua), which must agree
        // (`gitops::verdicts` asserts it on every watch event).
        let g = gitops::verdicts(v);
        ensure!(
            g.flux.status == g.kstatus.status && g.flux.error.is_empty(),
            "Flux {:?} ({}) but kstatus {:?} ({}) at resourceVersion {}",
            g.flux.status,
            g.flux.error,
            g.kstatus.status,
            g.kstatus.message,
            v["metadata"]["resourceVersion"]
        );
        let argocd_for = match g.kstatus.status {
            Status::Current => "Healthy",
            Status::Failed => "Degraded",
            _ => "Progressing",
        };
        ensure!(
            g.argocd.0 == argocd_for,
            "ArgoCD {} ({}) but kstatus {:?} at resourceVersion {}",
            g.argocd.0,
            g.argocd.1,
            g.kstatus.status,
            v["metadata"]["resourceVersion"]
        );
        // A healthy rollout never reports a blocking verdict, not even for one reconcile
        // (races with Temporal's rate limits and conflict tokens are retried quietly).
        if let Some(p) = condition(&twd, "Progressing") {
            ensure!(
                p.status == "True" || p.reason == "RolloutComplete",
                "healthy rollout reported Progressing=False/{}: {}",
                p.reason,
                p.message
            );
        }
        let observed = twd.status.as_ref().and_then(|st| st.observed_generation);
        if observed == twd.metadata.generation {
            ensure!(
                target_build(&twd).is_none_or(|b| b == build_of_spec(&twd)),
                "status observed generation {observed:?} but names target {:?}, not the spec's build {}",
                target_build(&twd),
                build_of_spec(&twd)
            );
        } else if twd.status.is_some() {
            let (k, msg) = gitops::kstatus(v);
            ensure!(
                k != Status::Current,
                "kstatus Current for an unobserved generation: {msg}"
            );
            let (health, msg) = gitops::argocd_health(v);
            ensure!(
                health != "Healthy",
                "ArgoCD Healthy for an unobserved generation: {msg}"
            );
        }
    }
    Ok(())
}

/// kstatus results of every TWD version the controller wrote a status for, consecutive
/// duplicates removed (before its first write the object carries the CRD's placeholder status,
/// which kstatus reads as InProgress).
fn kstatus_walk(history: &[Value]) -> Vec<Status> {
    let mut walk: Vec<Status> = Vec::new();
    for v in history.iter().filter(|v| !v["status"].is_null()) {
        let (k, _) = gitops::kstatus(v);
        if walk.last() != Some(&k) {
            walk.push(k);
        }
    }
    walk
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_at_once_first_and_second_deploy_with_kubectl_wait() -> Result<()> {
    let c = case("aao").await?;
    let rec = c.record("orders").await?;
    c.apply_twd("orders", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let out = c
        .kubectl()
        .args([
            "wait",
            "--for=condition=Ready",
            "twd/orders",
            "--timeout=150s",
        ])
        .output()
        .await?;
    ensure!(
        out.status.success(),
        "kubectl wait failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (v1, temporal) = check_v1_routed_and_running_with_the_injected_env(&c).await?;
    second_deploy_makes_v2_current_and_deprecates_v1(&c, &temporal, &v1).await?;
    check_no_ready_before_temporal_routed(rec).await
}

/// `kubectl wait` returned: Temporal must already route to v1, and the status must say so;
/// the versioned Deployment carries the injected env and its workers poll Temporal. Returns v1
/// and the Temporal client.
async fn check_v1_routed_and_running_with_the_injected_env(
    c: &Case,
) -> Result<(String, temporal_worker_controller::temporal::TemporalClient)> {
    let twd = c.get_twd("orders").await?;
    ensure!(
        condition_is(&twd, "Ready", "True", "RolloutComplete"),
        "{:?}",
        twd.status
    );
    let v1 = current_build(&twd).context("no current version")?;
    let temporal = c.temporal().await?;
    let state = describe_soon(&temporal, &c.temporal_deployment_name("orders")).await?;
    assert_eq!(state.routing.current_build_id.as_deref(), Some(v1.as_str()));
    assert_eq!(
        twd.status.as_ref().and_then(|s| s.observed_generation),
        twd.metadata.generation
    );

    // The versioned Deployment carries the injected env; its workers poll Temporal.
    let dep = c.deployments().get(&deployment_of("orders", &v1)).await?;
    let env = env_of(&dep);
    assert_eq!(env.get("TEMPORAL_ADDRESS"), Some(&c.env.temporal_address));
    assert_eq!(env.get("TEMPORAL_NAMESPACE"), Some(&c.temporal_ns));
    assert_eq!(
        env.get("TEMPORAL_DEPLOYMENT_NAME"),
        Some(&c.temporal_deployment_name("orders"))
    );
    assert_eq!(env.get("TEMPORAL_WORKER_BUILD_ID"), Some(&v1));
    assert_eq!(env.get("TEMPORAL_TASK_QUEUE"), Some(&c.task_queue));
    ensure!(state.version(&v1).is_some(), "Temporal does not list {v1}");
    if let Some(kubelet) = &c.env.kubelet {
        ensure!(kubelet.running_workers(&c.ns, &deployment_of("orders", &v1)) >= 1);
    }
    c.check_pods_come_from_kubernetes(&deployment_of("orders", &v1))
        .await?;
    Ok((v1, temporal))
}

/// Second deploy, same strategy: v2 becomes Current, v1 drains.
async fn second_deploy_makes_v2_current_and_deprecates_v1(
    c: &Case,
    temporal: &temporal_worker_controller::temporal::TemporalClient,
    v1: &str,
) -> Result<()> {
    c.apply_twd("orders", "v2", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c
        .wait_twd("orders", "v2 Current", T, |t| {
            is_ready(t) && current_build(t).is_some_and(|b| b != v1)
        })
        .await?;
    let v2 = current_build(&twd).context("current")?;
    let state = describe_soon(temporal, &c.temporal_deployment_name("orders")).await?;
    assert_eq!(state.routing.current_build_id.as_deref(), Some(v2.as_str()));
    c.wait_twd("orders", "v1 listed as deprecated", T, |t| {
        t.status.as_ref().is_some_and(|s| {
            s.deprecated_versions
                .iter()
                .any(|d| d.version.build_id == v1)
        })
    })
    .await?;
    Ok(())
}

/// The recorded history holds the invariants; before Temporal routed to v1, no sample said
/// Ready; kstatus ends Current after going through InProgress, never Failed.
async fn check_no_ready_before_temporal_routed(rec: Recorder) -> Result<()> {
    let (samples, history) = rec.finish().await?;
    check_invariants(&samples, &history)?;
    // Before Temporal routed to v1, no sample said Ready.
    for s in &samples {
        let t: TemporalWorkerDeployment = serde_json::from_value(s.twd.clone())?;
        if is_ready(&t) {
            ensure!(
                s.temporal.routing.current_build_id.is_some(),
                "Ready=True while Temporal had no current version"
            );
        }
    }
    let walk = kstatus_walk(&history);
    ensure!(
        walk.last() == Some(&Status::Current),
        "kstatus walk {walk:?}"
    );
    ensure!(walk.contains(&Status::InProgress), "kstatus walk {walk:?}");
    ensure!(!walk.contains(&Status::Failed), "kstatus walk {walk:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_ramps_on_schedule_then_sunsets_the_old_version() -> Result<()> {
    let c = case("prog").await?;
    let v1 = deploy_first(&c, "billing").await?;
    let rec = c.record("billing").await?;
    c.apply_twd(
        "billing",
        "v2",
        progressive(&[(25, "4s"), (50, "4s")]),
        json!({}),
    )
    .await?;
    let temporal = c.temporal().await?;
    let (v2, step_started) = wait_for_each_ramp_step(&c, &rec, &temporal).await?;
    let promoted = wait_for_v2_current(&c, &temporal, &v1, &v2).await?;
    check_step_timing(&step_started, promoted)?;
    check_steps_in_status(&rec).await?;
    check_sunset_timing(&c, &rec, &v1).await?;
    check_gitops_walks(rec).await?;
    check_milestone_events(&c, &v1, &v2).await?;
    check_status_api_milestones(&c).await
}

/// The milestone events of a Progressive rollout of v2 over v1 that sunsets v1, in order.
const PROGRESSIVE_MILESTONES: [&str; 10] = [
    "VersionCreated",
    "VersionRegistered",
    "Promoted",
    "VersionCreated",
    "VersionRegistered",
    "RampStepStarted",
    "RampStepStarted",
    "Promoted",
    "ScaledDown",
    "VersionDeleted",
];

/// Waits for the 25% and 50% steps in the status; while each runs, Temporal itself routes that
/// share of new workflows to v2. Returns v2 and each step's start by Temporal's clock.
async fn wait_for_each_ramp_step(
    c: &Case,
    rec: &Recorder,
    temporal: &temporal_worker_controller::temporal::TemporalClient,
) -> Result<(String, Vec<jiff::Timestamp>)> {
    let dep_name = c.temporal_deployment_name("billing");
    let mut v2 = String::new();
    let mut step_started = Vec::new();
    for pct in [25.0, 50.0] {
        let twd = c
            .wait_twd("billing", &format!("status at {pct}%"), T, |t| {
                t.status
                    .as_ref()
                    .and_then(|s| s.target_version.as_ref())
                    .and_then(|tv| tv.ramp_percentage)
                    == Some(pct)
            })
            .await?;
        v2 = target_build(&twd).context("target")?;
        let state = describe_soon(temporal, &dep_name).await?;
        let routing = &state.routing;
        let in_step = routing.ramping_build_id.as_deref() == Some(v2.as_str())
            && routing.ramp_percentage == pct;
        if !in_step {
            // On a busy machine the status (its write retried while Temporal rate-limits reads
            // right after a routing write) can be seen late, and this describe can land after
            // the step ended: Temporal must then have moved forward, never back or elsewhere.
            let moved_on = (routing.ramping_build_id.as_deref() == Some(v2.as_str())
                && routing.ramp_percentage > pct)
                || routing.current_build_id.as_deref() == Some(v2.as_str());
            ensure!(
                moved_on,
                "status says {pct}% but Temporal routes {:?} at {}%",
                routing.ramping_build_id,
                routing.ramp_percentage
            );
        }
        // The step's start by Temporal's clock (sub-second; the status only has seconds):
        // from this describe, or else from the recorder's samples taken during the step.
        let from_samples = || {
            rec.samples().iter().find_map(|s| {
                let r = &s.temporal.routing;
                (r.ramping_build_id.as_deref() == Some(v2.as_str()) && r.ramp_percentage == pct)
                    .then_some(r.ramp_percentage_changed_at)
                    .flatten()
            })
        };
        let started = if in_step {
            routing.ramp_percentage_changed_at
        } else {
            from_samples()
        };
        step_started.push(started.with_context(|| format!("no start time for the {pct}% step"))?);
    }
    Ok((v2, step_started))
}

/// Waits until v2 is Current in the status and in Temporal; returns Temporal's promotion time.
async fn wait_for_v2_current(
    c: &Case,
    temporal: &temporal_worker_controller::temporal::TemporalClient,
    v1: &str,
    v2: &str,
) -> Result<jiff::Timestamp> {
    c.wait_twd("billing", "v2 Current", T, |t| {
        is_ready(t) && current_build(t).as_deref() == Some(v2)
    })
    .await?;
    let state = describe_soon(temporal, &c.temporal_deployment_name("billing")).await?;
    ensure!(state.routing.current_build_id.as_deref() == Some(v2));
    ensure!(v2 != v1);
    state
        .routing
        .current_changed_at
        .context("no promotion time")
}

/// Step timing, by Temporal's own clock: each step lasts its pause and ends within 1 s.
fn check_step_timing(step_started: &[jiff::Timestamp], promoted: jiff::Timestamp) -> Result<()> {
    let step1 = step_started[1]
        .duration_since(step_started[0])
        .as_secs_f64();
    let step2 = promoted.duration_since(step_started[1]).as_secs_f64();
    ensure!(
        (4.0..=5.0).contains(&step1),
        "25% lasted {step1:.3}s, want 4s (+1s)"
    );
    ensure!(
        (4.0..=5.0).contains(&step2),
        "50% lasted {step2:.3}s, want 4s (+1s)"
    );
    Ok(())
}

/// The status reported each step while it ran.
async fn check_steps_in_status(rec: &Recorder) -> Result<()> {
    rec.catch_up().await?;
    let steps_in_status: Vec<i32> = rec
        .history()
        .iter()
        .filter_map(|v| {
            v.pointer("/status/targetVersion/currentStep")
                .and_then(Value::as_i64)
                .map(|v| v as i32)
        })
        .collect();
    ensure!(
        // Numbered from 1, as in the messages: the two steps are 1 and 2.
        steps_in_status.contains(&1)
            && steps_in_status.contains(&2)
            && !steps_in_status.contains(&0),
        "steps seen {steps_in_status:?}"
    );
    Ok(())
}

/// Sunset: v1 drains, is scaled to 0 two seconds after it drained, deleted two more later.
/// The scaled-down state can be short-lived (if the controller notices the drain late, both
/// deadlines have passed and it deletes right after scaling), so the times come from the
/// controller's Events (microseconds) and Temporal's drained-since, not from catching the
/// state in passing.
async fn check_sunset_timing(c: &Case, rec: &Recorder, v1: &str) -> Result<()> {
    let v1_dep = deployment_of("billing", v1);
    eventually("v1 Deployment deleted", T, || async {
        Ok(c.deployments()
            .get_opt(&v1_dep)
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    let event_time = |events: &[SeenEvent], reason: &str| {
        events
            .iter()
            .find(|e| e.reason == reason && e.note.contains(v1))
            .and_then(|e| e.time)
    };
    let (scaled_at, deleted_at) =
        eventually("v1 ScaledDown and VersionDeleted events", T, || async {
            let events = c.events_of("billing").await?;
            Ok(event_time(&events, "ScaledDown").zip(event_time(&events, "VersionDeleted")))
        })
        .await?;
    // Temporal's drained-since for v1, from the recorder's samples taken while it was Drained;
    // no sample may show it scaled to 0 while Temporal did not report it Drained.
    rec.catch_up().await?;
    let samples = rec.samples();
    let drained_since = samples
        .iter()
        .filter_map(|s| s.temporal.version(v1))
        .find(|v| v.status == TemporalVersionStatus::Drained)
        .and_then(|v| v.drainage_changed_at)
        .context("the recorder never saw v1 Drained")?;
    let waited = scaled_at.duration_since(drained_since).as_secs_f64();
    ensure!(
        waited >= 2.0,
        "scaled down {waited:.3}s after draining, before scaledownDelay (2s)"
    );
    let waited = deleted_at.duration_since(drained_since).as_secs_f64();
    ensure!(
        waited >= 4.0,
        "deleted {waited:.3}s after draining, before scaledown+delete delays (4s)"
    );
    ensure!(deleted_at >= scaled_at, "deleted before it was scaled down");
    Ok(())
}

/// The recorded history holds the invariants; kstatus and ArgoCD both walk from healthy
/// through progressing back to healthy.
async fn check_gitops_walks(rec: Recorder) -> Result<()> {
    let (samples, history) = rec.finish().await?;
    check_invariants(&samples, &history)?;
    let walk = kstatus_walk(&history);
    ensure!(
        walk == [Status::Current, Status::InProgress, Status::Current],
        "kstatus walk {walk:?}"
    );
    // ArgoCD walks Healthy → Progressing → Healthy too.
    let mut health_walk: Vec<String> = Vec::new();
    for v in history.iter().filter(|v| !v["status"].is_null()) {
        let (h, _) = gitops::argocd_health(v);
        if health_walk.last() != Some(&h) {
            health_walk.push(h);
        }
    }
    ensure!(
        health_walk == ["Healthy", "Progressing", "Healthy"],
        "ArgoCD health walk {health_walk:?}"
    );
    Ok(())
}

/// Milestone events: every transition once, in order, nothing to warn about.
async fn check_milestone_events(c: &Case, v1: &str, v2: &str) -> Result<()> {
    let events = eventually("VersionDeleted event", T, || async {
        let ev = c.events_of("billing").await?;
        Ok(ev
            .iter()
            .any(|e| e.reason == "VersionDeleted")
            .then_some(ev))
    })
    .await?;
    let reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    let expected = PROGRESSIVE_MILESTONES;
    ensure!(
        is_subsequence(&reasons, &expected),
        "events {reasons:?} do not contain {expected:?} in order"
    );
    ensure!(
        events.iter().all(|e| e.type_ == "Normal"),
        "warnings during a healthy rollout: {events:#?}"
    );
    ensure!(
        events.iter().all(|e| e.count == 1),
        "an event repeated (storm): {events:#?}"
    );
    for (reason, build) in [
        ("RampStepStarted", v2),
        ("ScaledDown", v1),
        ("VersionDeleted", v1),
    ] {
        ensure!(
            events
                .iter()
                .any(|e| e.reason == reason && e.note.contains(build)),
            "no {reason} event naming {build}: {events:#?}"
        );
    }
    Ok(())
}

/// The status API's recent milestones are the milestone events of v2's rollout.
async fn check_status_api_milestones(c: &Case) -> Result<()> {
    let (code, body) = test_harness::loopback_http::get(
        c.env.http_addr,
        &format!("/api/v1/namespaces/{}/rollouts/billing", c.ns),
        "application/json",
        Some(&c.env.api_token),
    )
    .await?;
    ensure!(code == 200, "status API: {code} {body}");
    let view: Value = serde_json::from_str(&body)?;
    let milestones: Vec<&str> = view["milestones"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["reason"].as_str())
        .collect();
    let expected = &PROGRESSIVE_MILESTONES[3..];
    ensure!(
        is_subsequence(&milestones, expected),
        "status API milestones {milestones:?} lack {expected:?}",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_strategy_waits_for_a_human_promotion() -> Result<()> {
    let c = case("manual").await?;
    let temporal = c.temporal().await?;
    let dep_name = c.temporal_deployment_name("mailer");
    let waiting = |t: &TemporalWorkerDeployment| {
        condition_is(t, "Ready", "False", "WaitingForPromotion")
            && t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation
    };
    // Manual never routes, not even the first version, so the controller never claims the
    // manager identity and a human can promote with the plain CLI.
    let mut previous: Option<String> = None;
    for tag in ["v1", "v2"] {
        c.apply_twd("mailer", tag, json!({"strategy": "Manual"}), json!({}))
            .await?;
        let twd = c
            .wait_twd(
                "mailer",
                &format!("{tag} registered, waiting for promotion"),
                T,
                |t| waiting(t) && target_build(t) != previous,
            )
            .await?;
        let build = target_build(&twd).context("target")?;
        ensure!(
            c.deployments()
                .get_opt(&deployment_of("mailer", &build))
                .await?
                .is_some(),
            "{tag} Deployment not created"
        );
        let state = describe_soon(&temporal, &dep_name).await?;
        assert_eq!(
            state.routing.current_build_id, previous,
            "Manual must not route"
        );
        assert_eq!(state.routing.ramping_build_id, None, "Manual must not ramp");
        assert_eq!(state.manager_identity, "", "Manual must not claim routing");
        // ArgoCD reports a rollout waiting for a human as Suspended.
        let (health, _) = gitops::argocd_health(&serde_json::to_value(&twd)?);
        assert_eq!(health, "Suspended");

        // A human promotes with the Temporal CLI; the status follows.
        c.temporal_cli(&[
            "worker",
            "deployment",
            "set-current-version",
            "--deployment-name",
            &dep_name,
            "--build-id",
            &build,
            "--yes",
        ])
        .await?;
        let twd = c
            .wait_twd("mailer", "status shows the human promotion", T, |t| {
                is_ready(t) && current_build(t).as_deref() == Some(build.as_str())
            })
            .await?;
        ensure!(condition_is(&twd, "Ready", "True", "RolloutComplete"));
        if let Some(old) = &previous {
            // The version the human replaced drains and is retired by the sunset policy.
            let old_dep = deployment_of("mailer", old);
            eventually("replaced version retired", T, || async {
                let d = c.deployments().get_opt(&old_dep).await?;
                Ok(d.is_none_or(|d| d.spec.replicas == Some(0)).then_some(()))
            })
            .await?;
        }
        previous = Some(build);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_change_mid_ramp_supersedes_the_ramping_version() -> Result<()> {
    let c = case("midramp").await?;
    let v1 = deploy_first(&c, "search").await?;
    let rec = c.record("search").await?;
    let temporal = c.temporal().await?;
    let dep_name = c.temporal_deployment_name("search");
    c.apply_twd("search", "v2", progressive(&[(20, "30s")]), json!({}))
        .await?;
    let twd = c
        .wait_twd("search", "v2 ramping", T, |t| {
            condition_is(t, "Progressing", "True", "Ramping")
        })
        .await?;
    let v2 = target_build(&twd).context("target")?;
    ensure!(v2 != v1);

    // v3 replaces v2 while v2 ramps.
    c.apply_twd("search", "v3", progressive(&[(20, "2s")]), json!({}))
        .await?;
    let twd = c
        .wait_twd("search", "v3 Current", T, |t| {
            is_ready(t) && current_build(t).is_some_and(|b| b != v1 && b != v2)
        })
        .await?;
    let v3 = current_build(&twd).context("current")?;
    let (samples, history) = rec.finish().await?;
    check_invariants(&samples, &history)?;
    ensure!(
        samples
            .iter()
            .all(|s| s.temporal.routing.current_build_id.as_deref() != Some(v2.as_str())),
        "superseded v2 became Current"
    );
    ensure!(
        history.iter().any(|v| v
            .pointer("/status/targetVersion/buildID")
            .and_then(Value::as_str)
            == Some(v3.as_str())
            && v.pointer("/status/targetVersion/rampPercentage")
                .and_then(Value::as_f64)
                == Some(20.0)),
        "v3 was promoted without ramping"
    );
    let state = describe_soon(&temporal, &dep_name).await?;
    assert_eq!(state.routing.current_build_id.as_deref(), Some(v3.as_str()));
    // v2 never served as Current: it is retired (scaled to 0) rather than left running.
    eventually("superseded v2 scaled down or deleted", T, || async {
        let d = c
            .deployments()
            .get_opt(&deployment_of("search", &v2))
            .await?;
        Ok(d.is_none_or(|d| d.spec.replicas == Some(0)).then_some(()))
    })
    .await?;
    Ok(())
}
