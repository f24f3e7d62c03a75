//! The real Prometheus (Debian's `prometheus`) scrapes the controller every second during a
//! live rollout (issue 6). Every PromQL expression of every dashboard in `dashboards/` is then
//! evaluated against it over the run and must return data; the template variables must offer
//! this rollout; `promtool check metrics` must accept a live scrape. The alerts the chart ships
//! (the PrometheusRule it renders with `prometheusRule.enabled`, from its `files/alerts.yaml`)
//! must pass `promtool check rules`, and, loaded as Prometheus rules (the rollout thresholds
//! lowered to seconds), the rollout and certificate alerts must fire for the objects made to
//! trigger them (issues 26 and 43); the alerts on the controller itself fire in
//! `tests/controller_alerts.rs`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::support::*;
use test_harness::dashboards;
use test_harness::gitops::unix_now;
use test_harness::prometheus::Prometheus;

const T: Duration = Duration::from_secs(120);
/// Grafana's `$__rate_interval` is at least four scrape intervals; 1 s scrapes here.
const RATE_INTERVAL: &str = "5s";

/// What the rollout alerts' thresholds are lowered to, in seconds (the rules as written wait
/// 5 and 15 minutes).
const ALERT_THRESHOLD: &str = "3";
/// The alerts whose thresholds are lowered. The certificate alert fires as written (within 7
/// days of `notAfter`), for a certificate made to expire in 3 days.
const LOWERED: [&str; 2] = [
    "TemporalWorkerRolloutBlocked",
    "TemporalWorkerRolloutStepOverdue",
];

/// The shipped alerts about rollouts and Connections' certificates, checked here.
const ROLLOUT_ALERTS: [&str; 3] = [
    "TemporalWorkerRolloutBlocked",
    "TemporalWorkerRolloutStepOverdue",
    "TemporalConnectionCertificateExpiring",
];

/// Dashboard expressions the run is not able to make return data, with the reason. Every
/// entry must name a series that only a failure outside our control would create.
const UNPRODUCIBLE: &[(&str, &str)] = &[];

fn label_values(series: &[Value], label: &str) -> Vec<String> {
    series
        .iter()
        .filter_map(|s| s[label].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_a_rollout_and_every_dashboard_query_has_data() -> Result<()> {
    let c = case("prom").await?;
    let shipped = tokio::task::spawn_blocking(dashboards::chart_alert_rules).await?;
    check_rules_with_promtool(&shipped).await?;
    let prom = Prometheus::start(
        "temporal-worker-controller",
        &[c.env.http_addr],
        &dashboards::with_thresholds(&shipped, ALERT_THRESHOLD, &LOWERED),
    )
    .await?;
    let start = unix_now() - 1.0;
    wait_for_target_up(&prom).await?;
    let v2 = run_gated_progressive_rollout(&c, &prom).await?;
    block_a_rollout_on_a_missing_connection(&c).await?;
    stall_a_rollout_on_a_refused_pod_template(&c).await?;
    connect_with_a_certificate_expiring_soon(&c).await?;
    let late = case("promlate").await?;
    block_a_rollout_in_the_middle_of_a_step(&late).await?;
    wait_for_final_state_scraped(&c, &prom, &v2).await?;
    check_every_dashboard_query_has_data(&c, &prom, start).await?;
    check_gate_outcomes_counted(&prom).await?;
    check_shipped_alerts_fire(&prom, &shipped, &c, &late).await?;
    lint_a_live_scrape_with_promtool(&c).await
}

/// The shipped rules as rendered are a valid rule file.
async fn check_rules_with_promtool(rules: &str) -> Result<()> {
    let path = std::env::temp_dir().join(format!("twc-e2e-alerts-{}.yml", std::process::id()));
    std::fs::write(&path, rules)?;
    let out = tokio::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .await
        .context("running promtool")?;
    let _ = std::fs::remove_file(&path);
    ensure!(
        out.status.success(),
        "promtool check rules on the chart's alerts: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// v1, then v2 through a long step; at 50 % its Connection is switched to one that does not
/// exist, so it is Blocked with the step's due time passing: the step becomes overdue.
async fn block_a_rollout_in_the_middle_of_a_step(c: &Case) -> Result<()> {
    c.apply_twd("late", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    c.wait_twd("late", "v1 Ready", T, is_ready).await?;
    let steps = json!({"strategy": "Progressive",
                       "steps": [{"rampPercentage": 50, "pauseDuration": "20s"}]});
    c.apply_twd("late", "v2", steps.clone(), json!({})).await?;
    c.wait_twd("late", "v2 at 50% with a next step", T, |t| {
        t.status
            .as_ref()
            .and_then(|s| s.target_version.as_ref())
            .is_some_and(|tv| tv.ramp_percentage == Some(50.0) && tv.next_step_at.is_some())
    })
    .await?;
    c.apply_twd(
        "late",
        "v2",
        steps,
        json!({"workerOptions": {"connectionRef": {"name": "missing"}}}),
    )
    .await?;
    c.wait_twd("late", "late blocked", T, |t| {
        t.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Progressing"))
            .is_some_and(|p| p.status == "False" && p.reason.contains("NotFound"))
    })
    .await?;
    Ok(())
}

/// Every shipped alert reaches `firing` for the objects made to trigger it, and none fires
/// for the healthy rollout.
async fn check_shipped_alerts_fire(
    prom: &Prometheus,
    shipped: &str,
    c: &Case,
    late: &Case,
) -> Result<()> {
    let names = dashboards::alert_names(shipped);
    // The alerts on the controller itself fire in tests/controller_alerts.rs, which has a
    // control plane of its own for the faults they need; every shipped alert is in one of them.
    let controller_alerts = include_str!("../controller_alerts.rs");
    let (ours, theirs): (Vec<String>, Vec<String>) = names
        .iter()
        .cloned()
        .partition(|n| ROLLOUT_ALERTS.contains(&n.as_str()));
    ensure!(
        ours.len() == ROLLOUT_ALERTS.len(),
        "shipped alerts {names:?} lack some of {ROLLOUT_ALERTS:?}"
    );
    let untested: Vec<&String> = theirs
        .iter()
        .filter(|n| !controller_alerts.contains(&format!("\"{n}\"")))
        .collect();
    ensure!(
        untested.is_empty(),
        "alerts no test makes fire: {untested:?}"
    );
    let want: Vec<(String, &str, &str)> = ours
        .iter()
        .flat_map(|alert| {
            let on: Vec<(&str, &str)> = if alert.contains("Certificate") {
                vec![(c.ns.as_str(), EXPIRING)]
            } else if alert.contains("Overdue") {
                vec![(late.ns.as_str(), "late")]
            } else {
                vec![
                    (c.ns.as_str(), "orphan"),
                    (c.ns.as_str(), "badpod"),
                    (late.ns.as_str(), "late"),
                ]
            };
            on.into_iter()
                .map(move |(ns, name)| (alert.clone(), ns, name))
        })
        .collect();
    ensure!(want.len() == 5, "rollout alerts to check: {want:?}");
    eventually("shipped alerts firing", T, || async {
        let data = prom.api("/api/v1/alerts", &[]).await?;
        let alerts = data["alerts"].as_array().cloned().unwrap_or_default();
        let firing = |alert: &str, ns: &str, name: &str| {
            alerts.iter().any(|a| {
                a["state"] == "firing"
                    && a["labels"]["alertname"] == alert
                    && a["labels"]["namespace"] == ns
                    && a["labels"]["name"] == name
            })
        };
        let healthy: Vec<&Value> = alerts
            .iter()
            .filter(|a| a["labels"]["namespace"] == c.ns.as_str() && a["labels"]["name"] == "web")
            .collect();
        ensure!(
            healthy.is_empty(),
            "alerts on the healthy rollout: {healthy:?}"
        );
        let missing: Vec<String> = want
            .iter()
            .filter(|(alert, ns, name)| !firing(alert, ns, name))
            .map(|(alert, ns, name)| format!("{alert} on {ns}/{name}"))
            .collect();
        ensure!(
            missing.is_empty(),
            "not firing: {missing:?}; alerts: {alerts:?}"
        );
        Ok(Some(()))
    })
    .await
}

/// The Connection whose client certificate expires soon.
const EXPIRING: &str = "expiring";

/// A Connection whose mTLS client certificate expires in 3 days. Its Temporal (the plain dev
/// server) cannot accept it, which does not matter: the controller reads `notAfter` from the
/// Secret whether or not the connection works, and the metric follows.
async fn connect_with_a_certificate_expiring_soon(c: &Case) -> Result<()> {
    use test_harness::certs::{Authority, Usage};
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let ymd = |d: jiff::civil::Date| (i32::from(d.year()), d.month() as u8, d.day() as u8);
    let from = today.checked_sub(jiff::Span::new().days(1))?;
    let until = today.checked_add(jiff::Span::new().days(3))?;
    let ca = Authority::new("twc-e2e-expiring-ca")?;
    let pair = ca.issue_valid(
        "twc-e2e-client",
        None,
        &[],
        Usage::Client,
        Some((ymd(from), ymd(until))),
    )?;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(c.client.clone(), &c.ns);
    secrets
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "expiring-mtls"}, "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "ca.crt": ca.ca_pem}
            }))?,
        )
        .await?;
    let mut conn = test_harness::manifests::connection(EXPIRING, &c.env.temporal_address);
    test_harness::manifests::merge(
        &mut conn["spec"],
        json!({"mutualTLSSecretRef": {"name": "expiring-mtls"}}),
    );
    c.apply(conn).await
}

/// Prometheus parses the exposition it scrapes: the target must be up.
async fn wait_for_target_up(prom: &Prometheus) -> Result<()> {
    eventually("controller target up", T, || async {
        let up = prom.instant("up").await?;
        ensure!(
            up.iter().any(|s| s["value"][1] == "1"),
            "up: {up:?}\n{}",
            prom.log()
        );
        Ok(Some(()))
    })
    .await
}

/// A gated rollout: v1 at once, then v2 through one 50 % step, whose next-step time
/// Prometheus must scrape while it lasts. Returns v2's build.
async fn run_gated_progressive_rollout(c: &Case, prom: &Prometheus) -> Result<String> {
    let gate = json!({"workflowType": "gate"});
    c.apply_twd(
        "web",
        "v1",
        json!({"strategy": "AllAtOnce", "gate": gate}),
        json!({}),
    )
    .await?;
    // The dashboard's backlog panel needs the backlog metric, which is read only where
    // something consumes it (docs/autoscaling.md): this worker opts in.
    c.twds()
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {
                temporal_worker_controller::api::ANNOTATION_BACKLOG_METRICS: "true"}}})),
        )
        .await?;
    let twd = c.wait_twd("web", "v1 Ready", T, is_ready).await?;
    let v1 = current_build(&twd).context("v1 build")?;
    c.apply_twd(
        "web",
        "v2",
        json!({"strategy": "Progressive", "gate": gate,
               "steps": [{"rampPercentage": 50, "pauseDuration": "5s"}]}),
        json!({}),
    )
    .await?;
    let ramping = c
        .wait_twd("web", "v2 at 50%", T, |t| {
            t.status
                .as_ref()
                .and_then(|s| s.target_version.as_ref())
                .and_then(|tv| tv.ramp_percentage)
                == Some(50.0)
        })
        .await?;
    let v2 = target_build(&ramping).context("v2 build")?;
    // The step's next-step time exists only while ramping: wait until Prometheus has it.
    let sel = format!(r#"{{namespace="{}", name="web"}}"#, c.ns);
    eventually("next-step time scraped", T, || async {
        let v = prom
            .instant(&format!(
                "temporal_worker_controller_rollout_next_step_timestamp_seconds{sel}"
            ))
            .await?;
        ensure!(!v.is_empty(), "not yet");
        Ok(Some(()))
    })
    .await?;
    c.wait_twd("web", "v2 Current", T, |t| {
        is_ready(t) && current_build(t).as_deref() == Some(v2.as_str())
    })
    .await?;
    ensure!(v1 != v2);
    Ok(v2)
}

/// A rollout that cannot proceed (its Connection does not exist): Blocked, with reconcile
/// errors.
async fn block_a_rollout_on_a_missing_connection(c: &Case) -> Result<()> {
    c.apply_twd(
        "orphan",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"workerOptions": {"connectionRef": {"name": "missing"}}}),
    )
    .await?;
    c.wait_twd("orphan", "orphan blocked", T, |t| {
        condition_is(t, "Progressing", "False", "ConnectionNotFound")
    })
    .await?;
    Ok(())
}

/// A pod template the API server refuses (container names must be DNS labels): the
/// Deployment write fails, which is what the Kubernetes write-error panel shows.
async fn stall_a_rollout_on_a_refused_pod_template(c: &Case) -> Result<()> {
    c.apply_twd(
        "badpod",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"template": {"spec": {"containers": [{
            "name": "Not_A_DNS_Label",
            "image": "registry.example/worker:v1",
            "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue}]
        }]}}}),
    )
    .await?;
    // Retrying cannot help, so the rollout is Stalled (GitOps tools fail fast) and says why.
    let refused = c
        .wait_twd("badpod", "Deployment refused", T, |t| {
            condition_is(t, "Stalled", "True", "InvalidSpec")
        })
        .await?;
    let p = condition(&refused, "Stalled").context("Stalled")?;
    ensure!(
        p.message.contains("pod template") && p.message.contains("containers[0].name"),
        "the refusal should say what is wrong: {p:?}"
    );
    ensure!(
        test_harness::gitops::kstatus(&serde_json::to_value(&refused)?).0
            == test_harness::gitops::Status::Failed,
        "kstatus should report Failed"
    );
    Ok(())
}

/// Everything above has reached Prometheus.
async fn wait_for_final_state_scraped(c: &Case, prom: &Prometheus, v2: &str) -> Result<()> {
    eventually("final state scraped", T, || async {
        let current = prom
            .instant(&format!(
                r#"temporal_worker_controller_rollout_info{{namespace="{}", name="web", current_build_id="{v2}"}}"#,
                c.ns
            ))
            .await?;
        let blocked = prom
            .instant(&format!(
                r#"temporal_worker_controller_rollout_info{{namespace="{}", name="orphan", phase="Blocked"}}"#,
                c.ns
            ))
            .await?;
        ensure!(
            !current.is_empty() && !blocked.is_empty(),
            "current {current:?} blocked {blocked:?}"
        );
        Ok(Some(()))
    })
    .await
}

/// Every dashboard expression returns data over the run. Counters need two scrapes after
/// their first increment before `rate` has a value, so retry for a while.
async fn check_every_dashboard_query_has_data(
    c: &Case,
    prom: &Prometheus,
    start: f64,
) -> Result<()> {
    let files = dashboards::files();
    ensure!(files.len() >= 2, "dashboards: {files:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let checked = loop {
        let (checked, missing) = dashboard_queries_without_data(c, prom, start, &files).await?;
        if missing.is_empty() {
            break checked;
        }
        if Instant::now() > deadline {
            bail!(
                "{} of {checked} dashboard queries returned no data over the rollout:\n{}",
                missing.len(),
                missing.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    ensure!(checked >= 20, "only {checked} dashboard queries found");
    Ok(())
}

/// How many dashboard queries were checked, and those of them (and the template variables)
/// with no data since `start`.
async fn dashboard_queries_without_data(
    c: &Case,
    prom: &Prometheus,
    start: f64,
    files: &[String],
) -> Result<(usize, Vec<String>)> {
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in files {
        let board = dashboards::load(file);
        for expr in dashboards::exprs(&board) {
            if UNPRODUCIBLE.iter().any(|(e, _)| *e == expr) {
                continue;
            }
            let q = dashboards::substitute(&expr, &c.ns, "web", RATE_INTERVAL);
            checked += 1;
            if prom.range(&q, start, unix_now()).await?.is_empty() {
                missing.push(format!("{file}: {q}"));
            }
        }
        for var in dashboards::label_values_queries(&board) {
            let selector = dashboards::substitute(&var.selector, &c.ns, "web", "");
            let series = prom
                .api(
                    "/api/v1/series",
                    &[
                        ("match[]", selector.as_str()),
                        ("start", &format!("{start:.3}")),
                    ],
                )
                .await?;
            let values = label_values(series.as_array().map_or(&[][..], |v| v), &var.label);
            let want = if var.label == "namespace" {
                c.ns.as_str()
            } else {
                "web"
            };
            if !values.iter().any(|v| v == want) {
                missing.push(format!(
                    "{file}: variable ${} ({selector}) does not offer {want:?}: {values:?}",
                    var.variable
                ));
            }
        }
    }
    Ok((checked, missing))
}

/// The gate ran twice (v1 and v2) and both completed: the outcome counter says so.
async fn check_gate_outcomes_counted(prom: &Prometheus) -> Result<()> {
    let gates = prom
        .instant(r#"sum(temporal_worker_controller_gate_workflows_total{outcome="completed"})"#)
        .await?;
    let n: f64 = gates
        .first()
        .and_then(|s| s["value"][1].as_str())
        .context("no gate outcome series")?
        .parse()?;
    ensure!(n >= 2.0, "gate completions counted: {n}");
    Ok(())
}

/// promtool lints a live scrape in the Prometheus text format.
async fn lint_a_live_scrape_with_promtool(c: &Case) -> Result<()> {
    let (code, text) = test_harness::loopback_http::get(
        c.env.http_addr,
        "/metrics",
        "text/plain;version=0.0.4",
        None,
    )
    .await?;
    ensure!(code == 200, "/metrics answered {code}");
    let mut lint = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    lint.stdin
        .take()
        .context("promtool stdin")?
        .write_all(text.as_bytes())
        .await?;
    let out = lint.wait_with_output().await?;
    ensure!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
