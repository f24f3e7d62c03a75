//! The alerts on the controller itself (issue 49), each made to fire in a real Prometheus by a
//! real fault, on a control plane, Temporal dev server and kubelet stand-in of this binary's
//! own, so that nothing but this test moves the controller's metrics.
//!
//! Two Prometheus servers scrape the controller as job `temporal-worker-controller`, both with
//! the chart's rules (`files/alerts.yaml` as its PrometheusRule renders it), their `for:`
//! shortened to 1 s: one with the thresholds as shipped, one with four lowered so that the run
//! lasts minutes (the reconcile error ratio, the webhook's 99th percentile, the queue's
//! oldest age and the budget wait).
//!
//! 1. **Healthy**: controller A (the chart's ServiceAccount and RBAC, webhook on, certificates
//!    from files, called by the real API server) runs a rollout to Ready and admits a template.
//!    With the thresholds as shipped no alert is pending or firing at any time.
//! 2. **Faults on A**, each alert then firing for its object: a Connection pointed at a closed
//!    port (`TemporalConnectionUnreachable`); a worker deployment naming a missing Connection
//!    (`TemporalWorkerControllerReconcileErrors`); the right to make LocalSubjectAccessReviews
//!    taken from the controller while templates keep being written, so the webhook cannot
//!    decide (`TemporalWorkerControllerWebhookErrors`, and `...WebhookSlow` on its timings); a
//!    serving certificate 3 days from its end put in place of the 30-day one
//!    (`...WebhookCertificateExpiring`, threshold as shipped).
//! 3. **A stopped**: `TemporalWorkerControllerAbsent`.
//! 4. **B started with its Lease held by another holder**: `...NoLeader`.
//! 5. **The Lease released**: B leads, two reconciles at a time under a budget of one Temporal
//!    call per second, for twenty rollouts waiting for Pods (B, new, knows none of them):
//!    `...WorkQueueBehind` and `...TemporalBudgetExhausted`.

#[path = "common/controller.rs"]
mod controller;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_harness::certs::{Authority, Usage, Ymd};
use test_harness::gitops::unix_now;
use test_harness::prometheus::Prometheus;
use test_harness::supervise::free_port;
use test_harness::wait::eventually;
use test_harness::world::{self, Infra};
use test_harness::{dashboards, manifests};

const T: Duration = Duration::from_secs(180);
/// The scrape job: what the chart's ServiceMonitor names it (the Service's name).
const JOB: &str = "temporal-worker-controller";
const CONTROLLER_NS: &str = "twc-alerts-system";
const IDENTITY: &str = "twc-alerts";
/// B's Lease, held by another holder until phase 5.
const LEASE_B: &str = "twc-alerts-b";
/// Rollouts whose Pods never schedule, for B to fall behind on.
const WAITING: usize = 20;
/// The alerts whose thresholds the run lowers, and to what.
const LOWERED: [(&str, &str); 4] = [
    ("TemporalWorkerControllerReconcileErrors", "0.01"),
    ("TemporalWorkerControllerWebhookSlow", "0.001"),
    ("TemporalWorkerControllerWorkQueueBehind", "3"),
    ("TemporalWorkerControllerTemporalBudgetExhausted", "0.5"),
];

/// Runs blocking work (Helm, kubectl) off the runtime's workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await?
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let out = test_harness::kubectl::run(kubeconfig, args, stdin)?;
    ensure!(out.success, "kubectl {args:?} failed: {}", out.text);
    Ok(out.text)
}

/// The webhook's serving certificates, from one CA, written where the controller reads them.
struct WebhookCerts {
    ca: Authority,
    dir: PathBuf,
}

impl WebhookCerts {
    fn new() -> Result<WebhookCerts> {
        let dir = std::env::temp_dir().join(format!("twc-alerts-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(WebhookCerts {
            ca: Authority::new("twc-alerts-webhook-ca")?,
            dir,
        })
    }

    /// Serves from now on a certificate for 127.0.0.1 valid until `days` from today.
    fn serve_for_days(&self, days: i64) -> Result<()> {
        let today = jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        let ymd =
            |d: jiff::civil::Date| -> Ymd { (i32::from(d.year()), d.month() as u8, d.day() as u8) };
        let from = today.checked_sub(jiff::Span::new().days(1))?;
        let until = today.checked_add(jiff::Span::new().days(days))?;
        let pair = self.ca.issue_valid(
            "twc-alerts-webhook",
            None,
            &["127.0.0.1"],
            Usage::Server,
            Some((ymd(from), ymd(until))),
        )?;
        // The key first: a reader that sees the new certificate with the old key fails and
        // retries at its next check.
        std::fs::write(self.dir.join("tls.key"), pair.key_pem)?;
        std::fs::write(self.dir.join("tls.crt"), pair.cert_pem)?;
        Ok(())
    }
}

impl Drop for WebhookCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The chart's values here: the webhook on, called by URL (the controller is a local process).
fn values(webhook: SocketAddr) -> Value {
    json!({
        "controller": {"identity": IDENTITY},
        "webhook": {"enabled": true, "url": format!("https://{webhook}")},
    })
}

/// The flags of controller A: the webhook on with certificates from `certs`.
fn flags_a(http: SocketAddr, webhook: SocketAddr, certs: &Path) -> Vec<String> {
    let mut flags = common_flags(http);
    flags.extend([
        format!("--webhook-port={}", webhook.port()),
        "--webhook-bind=127.0.0.1".into(),
        "--webhook-cert-mode=files".into(),
        format!("--webhook-cert-dir={}", certs.display()),
        "--webhook-cert-check-interval=1s".into(),
        format!("--webhook-namespace={CONTROLLER_NS}"),
        "--webhook-hosts=127.0.0.1".into(),
    ]);
    flags
}

/// The flags of controller B: its own Lease, two reconciles at a time, one Temporal call per
/// second.
fn flags_b(http: SocketAddr) -> Vec<String> {
    let mut flags = common_flags(http);
    flags.extend([
        format!("--lease-name={LEASE_B}"),
        "--max-concurrent-reconciles=2".into(),
        "--temporal-qps=1".into(),
        "--temporal-visibility-qps=1".into(),
    ]);
    flags
}

fn common_flags(http: SocketAddr) -> Vec<String> {
    vec![
        format!("--http-addr={http}"),
        "--leader-elect".into(),
        format!("--lease-namespace={CONTROLLER_NS}"),
        // One install whichever replica leads (the install ID is otherwise the Lease's name).
        format!("--install-id={CONTROLLER_NS}/{IDENTITY}"),
        format!("--identity={IDENTITY}"),
        "--idle-interval=10s".into(),
        "--fast-poll=300ms".into(),
        "--backlog-poll-interval=0s".into(),
    ]
}

/// The chart's rules with every `for:` shortened to 1 s, and the thresholds of [`LOWERED`]
/// lowered when `lower`.
fn rules(shipped: &str, lower: bool) -> String {
    let mut out = dashboards::with_for(shipped, "1s");
    if lower {
        for (alert, threshold) in LOWERED {
            out = dashboards::with_thresholds(&out, threshold, &[alert]);
        }
    }
    out
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_controller_alert_fires_on_its_fault_and_none_on_a_healthy_rollout() -> Result<()> {
    controller::init_tracing("warn,temporal_worker_controller=info");
    let infra = Infra::start(Default::default()).await?;
    let plane = infra.plane.context("needs the local control plane")?;
    let ns = format!("alerts-{}", std::process::id() % 10000);
    let temporal_ns = format!("e2e-{ns}");
    world::enter(&infra, &ns, &temporal_ns, "alerts").await?;
    let (http_a, http_b) = (loopback(free_port()?), loopback(free_port()?));
    let webhook = loopback(free_port()?);
    let id = test_harness::chart::install_identity(plane, &values(webhook), CONTROLLER_NS).await?;
    let certs = WebhookCerts::new()?;
    certs.serve_for_days(30)?;
    let client = test_harness::control_plane::client_from(&id.kubeconfig).await?;
    let a = controller::start(client.clone(), &flags_a(http_a, webhook, &certs.dir)).await?;
    let admin = plane.kubeconfig_path().to_path_buf();
    register_webhook(&admin, webhook, &certs.ca.ca_pem).await?;

    let shipped = blocking(|| Ok(dashboards::chart_alert_rules())).await?;
    let targets = [http_a, http_b];
    let as_shipped = Prometheus::start(JOB, &targets, &rules(&shipped, false)).await?;
    let lowered = Prometheus::start(JOB, &targets, &rules(&shipped, true)).await?;
    // A leads (and says so) before the healthy phase starts.
    for prom in [&as_shipped, &lowered] {
        eventually("controller A scraped as the leader", T, || async {
            let leads = prom
                .instant("temporal_worker_controller_leader == 1")
                .await?;
            Ok((prom.targets_up().await? == 1 && !leads.is_empty()).then_some(()))
        })
        .await?;
    }
    let run = Run {
        infra: &infra,
        ns: &ns,
        temporal_ns: &temporal_ns,
        admin: &admin,
    };
    // Two evaluations after A was first scraped as the leader: a rule evaluated before that
    // scrape (Absent, pending for an instant) is resolved by then.
    let healthy_from = unix_now() + 2.0;
    run.healthy_rollout(&as_shipped).await?;
    check_nothing_fired(&as_shipped, healthy_from).await?;

    run.faults_on_a(&lowered, &id, &certs).await?;
    a.stop().await;
    wait_firing(&lowered, "TemporalWorkerControllerAbsent", &[]).await?;

    let leases: Api<Lease> = Api::namespaced(infra.client.clone(), CONTROLLER_NS);
    hold_lease(&leases).await?;
    let b = controller::start(client, &flags_b(http_b)).await?;
    wait_firing(
        &lowered,
        "TemporalWorkerControllerNoLeader",
        &[("job", JOB)],
    )
    .await?;
    // Released as a holder releases it: no holder any more.
    let release = json!({"spec": {"holderIdentity": null}});
    leases
        .patch(LEASE_B, &PatchParams::default(), &Patch::Merge(&release))
        .await?;
    wait_resolved(&lowered, "TemporalWorkerControllerNoLeader").await?;
    let behind = [("controller", "temporalworkerdeployment")];
    wait_firing(&lowered, "TemporalWorkerControllerWorkQueueBehind", &behind).await?;
    // The depth agrees: requests were waiting (the reconciles that call Temporal wait for the
    // budget while both slots are taken; most of the waiting rollouts need no call and pass).
    let depth = r#"max_over_time(temporal_worker_controller_workqueue_depth{controller="temporalworkerdeployment"}[1m])"#;
    let deepest = first_value(&lowered.instant(depth).await?)?;
    ensure!(
        deepest >= 1.0,
        "no reconcile request seen waiting: {deepest}"
    );
    wait_firing(
        &lowered,
        "TemporalWorkerControllerTemporalBudgetExhausted",
        &[("job", JOB)],
    )
    .await?;
    b.stop().await;
    Ok(())
}

/// What the phases share.
struct Run<'a> {
    infra: &'a Infra,
    ns: &'a str,
    temporal_ns: &'a str,
    admin: &'a Path,
}

impl Run<'_> {
    async fn apply(&self, manifest: Value) -> Result<()> {
        world::apply(&self.infra.client, self.ns, "alerts-test", manifest).await
    }

    fn twd(&self, name: &str) -> manifests::Twd {
        manifests::twd(name)
            .replicas(1)
            .task_queue(name)
            .temporal_namespace(self.temporal_ns)
            .rollout(json!({"strategy": "AllAtOnce"}))
    }

    /// A rollout to Ready with a real worker, and a template for it admitted by the webhook.
    async fn healthy_rollout(&self, prom: &Prometheus) -> Result<()> {
        self.apply(self.twd("web").build()).await?;
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            self.infra.client.clone(),
            self.ns,
            &world::api_resource("TemporalWorkerDeployment"),
        );
        world::wait(&api, "web", "web Ready", |t| {
            let status = &t.data["status"];
            status["observedGeneration"] == json!(t.metadata.generation)
                && status["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "True"
                            && c["reason"] == "RolloutComplete"
                    })
        })
        .await?;
        // The rollout is counted as completed, with its duration.
        for finished in [
            r#"temporal_worker_controller_rollout_outcomes_total{outcome="completed"} >= 1"#,
            "temporal_worker_controller_rollout_duration_seconds_count >= 1",
        ] {
            eventually(finished, T, || async {
                Ok((!prom.instant(finished).await?.is_empty()).then_some(()))
            })
            .await?;
        }
        // The Connection's first check is scraped, so its alert could have fired.
        let reachable = format!(
            r#"temporal_worker_controller_connection_reachable{{namespace="{}", name="temporal"}} == 1"#,
            self.ns
        );
        eventually("the Connection's reachability scraped", T, || async {
            Ok((!prom.instant(&reachable).await?.is_empty()).then_some(()))
        })
        .await?;
        // The ratio and latency alerts read rates, which need increases between scrapes:
        // templates keep being admitted until they have their inputs, so that they could
        // have fired.
        let inputs = async {
            for rate in [
                r#"rate(temporal_worker_controller_webhook_requests_total{verdict="allowed"}[1m]) > 0"#,
                r#"rate(temporal_worker_controller_reconcile_total{controller="temporalworkerdeployment"}[1m]) > 0"#,
            ] {
                eventually(rate, T, || async {
                    Ok((!prom.instant(rate).await?.is_empty()).then_some(()))
                })
                .await?;
            }
            Ok::<(), anyhow::Error>(())
        };
        tokio::select! {
            r = inputs => r,
            r = self.keep_writing_templates("admitted", false) => r,
        }
    }

    /// Phase 2: the faults controller A is exposed to, each alert firing on it.
    async fn faults_on_a(
        &self,
        prom: &Prometheus,
        id: &test_harness::chart::ChartIdentity,
        certs: &WebhookCerts,
    ) -> Result<()> {
        let closed = free_port()?;
        self.apply(manifests::connection(
            "closed",
            &format!("127.0.0.1:{closed}"),
        ))
        .await?;
        self.apply(self.twd("orphan").connection("missing").build())
            .await?;
        certs.serve_for_days(3)?;
        take_access_reviews_away(self.admin, id)?;
        let unreachable = [("namespace", self.ns), ("name", "closed")];
        let writes = self.keep_writing_templates("refused", true);
        let alerts = async {
            wait_firing(prom, "TemporalConnectionUnreachable", &unreachable).await?;
            let errors = [("controller", "temporalworkerdeployment")];
            wait_firing(prom, "TemporalWorkerControllerReconcileErrors", &errors).await?;
            let job = [("job", JOB)];
            wait_firing(prom, "TemporalWorkerControllerWebhookErrors", &job).await?;
            wait_firing(prom, "TemporalWorkerControllerWebhookSlow", &job).await?;
            wait_firing(
                prom,
                "TemporalWorkerControllerWebhookCertificateExpiring",
                &job,
            )
            .await
        };
        tokio::select! {
            r = alerts => r?,
            r = writes => r?,
        }
        let healthy = alerts_on(
            prom,
            "TemporalConnectionUnreachable",
            &[("name", "temporal")],
        );
        ensure!(
            healthy.await?.is_empty(),
            "the working Connection is reported unreachable"
        );
        // Work for B (phase 5), created now: their successful reconciles would have diluted
        // the orphan's error ratio above.
        for i in 0..WAITING {
            let waiting = self
                .twd(&format!("waiting-{i}"))
                .spec(json!({"template": {"spec": {"schedulerName": "nobody"}}}));
            self.apply(waiting.build()).await?;
        }
        Ok(())
    }

    /// Writes a template named `prefix-<n>` every half second; never returns Ok. With
    /// `refused`, each must be refused by the webhook once the controller can no longer ask
    /// whether the writer may (RBAC changes reach the API server's authorizer within moments),
    /// and one admitted after that fails; otherwise each must be admitted.
    async fn keep_writing_templates(&self, prefix: &str, refused: bool) -> Result<()> {
        let mut refusals = 0u64;
        let mut i = 0u64;
        loop {
            i += 1;
            let name = format!("{prefix}-{i}");
            match (self.apply(template(&name, "web")).await, refused) {
                (Ok(()), true) => ensure!(
                    refusals == 0,
                    "template {name} was admitted without an access review"
                ),
                (Ok(()), false) => {}
                (Err(e), true) => {
                    let text = format!("{e:#}");
                    ensure!(
                        text.contains("localsubjectaccessreviews"),
                        "refused for another reason: {text}"
                    );
                    refusals += 1;
                }
                (Err(e), false) => return Err(e.context(format!("template {name} refused"))),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// A TemporalWorkerOwnedResource `name` copying an HPA to every version of `worker`.
fn template(name: &str, worker: &str) -> Value {
    manifests::owned_resource(
        name,
        worker,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "spec": {"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 2}}),
    )
}

/// The chart's ValidatingWebhookConfiguration, calling `webhook`, trusting `ca_pem` (what
/// cert-manager's CA injector does for a certificate from files).
async fn register_webhook(admin: &Path, webhook: SocketAddr, ca_pem: &str) -> Result<()> {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let admin = admin.to_path_buf();
    blocking(move || {
        let objects = test_harness::chart::render(&values(webhook), CONTROLLER_NS)?;
        let mut vwc = objects
            .into_iter()
            .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
            .context("the chart renders no ValidatingWebhookConfiguration")?;
        for hook in vwc["webhooks"].as_array_mut().into_iter().flatten() {
            hook["clientConfig"]["caBundle"] = json!(bundle);
        }
        kubectl(
            &admin,
            &["apply", "--server-side", "--field-manager=helm", "-f", "-"],
            Some(&vwc.to_string()),
        )
        .map(|_| ())
    })
    .await
}

/// Removes the chart's grant to create LocalSubjectAccessReviews from the controller's role.
fn take_access_reviews_away(admin: &Path, id: &test_harness::chart::ChartIdentity) -> Result<()> {
    let is_review = |rule: &Value| {
        rule["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r == "localsubjectaccessreviews"))
    };
    let (role, rules) = id
        .grants
        .iter()
        .find(|(_, rules)| rules.as_array().is_some_and(|r| r.iter().any(is_review)))
        .context("no role of the chart grants localsubjectaccessreviews")?;
    let kept: Vec<&Value> = rules
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !is_review(r))
        .collect();
    let patch = json!({"rules": kept}).to_string();
    // `Kind/name` or `Kind/namespace/name`, as install_identity names them.
    let parts: Vec<&str> = role.split('/').collect();
    let args: Vec<&str> = match parts.as_slice() {
        [kind, name] => vec!["patch", kind, name, "--type=merge", "-p", &patch],
        [kind, namespace, name] => {
            vec![
                "patch",
                kind,
                name,
                "-n",
                namespace,
                "--type=merge",
                "-p",
                &patch,
            ]
        }
        _ => anyhow::bail!("unexpected role name {role}"),
    };
    kubectl(admin, &args, None).map(|_| ())
}

/// B's Lease, held for an hour by a holder that is not B.
async fn hold_lease(leases: &Api<Lease>) -> Result<()> {
    let now = jiff::Timestamp::now().to_string();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE_B},
        "spec": {"holderIdentity": "another-installation", "leaseDurationSeconds": 3600,
                 "acquireTime": now, "renewTime": now},
    }))?;
    leases.create(&PostParams::default(), &lease).await?;
    Ok(())
}

/// The alerts named `alert` whose labels include `labels`, in any state.
async fn alerts_on(prom: &Prometheus, alert: &str, labels: &[(&str, &str)]) -> Result<Vec<Value>> {
    Ok(prom
        .alerts()
        .await?
        .into_iter()
        .filter(|a| {
            a["labels"]["alertname"] == alert && labels.iter().all(|(k, v)| a["labels"][*k] == *v)
        })
        .collect())
}

/// Waits until `alert` fires with `labels`.
async fn wait_firing(prom: &Prometheus, alert: &str, labels: &[(&str, &str)]) -> Result<()> {
    let what = format!("{alert} {labels:?} firing");
    eventually(&what, T, || async {
        let found = alerts_on(prom, alert, labels).await?;
        Ok(found.iter().any(|a| a["state"] == "firing").then_some(()))
    })
    .await
    .with_context(|| prom.log())
}

/// The value of the first sample of an instant query's result.
fn first_value(samples: &[Value]) -> Result<f64> {
    samples
        .first()
        .and_then(|s| s["value"][1].as_str())
        .context("no sample")?
        .parse()
        .context("a sample value")
}

/// Waits until no `alert` is pending or firing.
async fn wait_resolved(prom: &Prometheus, alert: &str) -> Result<()> {
    eventually(&format!("{alert} resolved"), T, || async {
        Ok(alerts_on(prom, alert, &[]).await?.is_empty().then_some(()))
    })
    .await
}

/// No alert was pending or firing at any evaluation since `from`. Waits first for two rule
/// evaluations after now and after `from`, so that an alert whose condition held with the
/// inputs of the phase would be seen firing (`for: 1s`).
async fn check_nothing_fired(prom: &Prometheus, from: f64) -> Result<()> {
    let until = unix_now().max(from) + 2.0;
    eventually(
        "two rule evaluations after the healthy phase",
        T,
        || async { Ok((prom.last_evaluation().await? > until).then_some(())) },
    )
    .await?;
    let fired = prom.range("ALERTS", from, unix_now()).await?;
    let names: Vec<String> = fired
        .iter()
        .map(|s| format!("{} {}", s["metric"]["alertname"], s["metric"]["alertstate"]))
        .collect();
    ensure!(
        fired.is_empty(),
        "alerts during the healthy rollout: {names:?}: {fired:?}"
    );
    Ok(())
}
