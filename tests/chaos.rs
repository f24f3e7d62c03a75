//! The chaos run (issue 28 items 1 and 4): several Progressive rollouts (one with a gate and an
//! owned resource) in flight at once on the real control plane, real Temporal and real
//! workers, while faults hit everything around the controller; the invariant checker
//! (`test_harness::invariants`) watches throughout.
//!
//! Faults, each while rollouts are mid-step: (a) latency, resets and dropped connections on
//! the controller's links to kube-apiserver and to Temporal (Toxiproxy); (b) an admission
//! webhook refusing a share of the controller's writes with 500 or 409; (c) kube-apiserver
//! restarted; (d) Temporal unreachable for 15 s (link cut); (e) the leader SIGKILLed mid-step
//! and restarted; (f) leader failover between two controller processes, each with its own
//! client certificate (user) so the audit log tells their writes apart. A worker deployment and
//! a whole namespace are deleted during the faults.
//!
//! After the faults clear: every rollout completes, no condition still names a fault, nothing
//! is left behind (no orphan versioned Deployment or owned-resource copy; no worker deployment
//! in Temporal once everything is deleted), the audit log shows one writer at a time, and no
//! secret value appears in logs, status, events, metrics or the status API. A summary is
//! printed (faults by type, checks, violations, rollouts, time).
//!
//! Short by default (one round of faults, CI). `TWC_CHAOS_SOAK_MINUTES=30` repeats rounds of
//! new versions and faults for that long (docs/reliability.md).

#[path = "chaos/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Namespace, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use temporal_worker_controller::api::TemporalWorkerDeployment;
use test_harness::invariants;
use test_harness::toxiproxy::{Toxic, Toxiproxy};
use test_harness::{fault_webhook, manifests, names, world};

use support::{Controller, Rig};

/// Rollouts must complete this long after the faults of a round clear.
const SETTLE: Duration = Duration::from_secs(300);
/// The secret the gate's input carries; it must show up nowhere the controller writes.
const SECRET: &str = "chaos-gate-token-5d1e9b7f3c";
const WORKERS: [&str; 3] = ["alpha", "beta", "gamma"];

/// Faults injected, by type.
#[derive(Default)]
struct Faults(BTreeMap<String, u32>);

impl Faults {
    fn add(&mut self, kind: &str) {
        *self.0.entry(kind.to_string()).or_default() += 1;
        eprintln!("chaos: fault {kind}");
    }
}

/// Everything the run holds.
struct Run {
    rig: Rig,
    toxi: Toxiproxy,
    webhook: fault_webhook::FaultWebhook,
    controllers: [Controller; 2],
    ns: String,
    doomed_ns: String,
    temporal_ns: String,
    lease_ns: String,
    faults: Faults,
    rollouts_completed: u32,
    temporal_reasons_seen: BTreeMap<String, u32>,
    snapshots: Vec<String>,
    /// Rollouts mid-ramp when the Temporal cut and the SIGKILL began, per round.
    in_flight_at: Vec<(String, usize)>,
}

fn rollout(worker: &str) -> serde_json::Value {
    // Steps long enough that every fault lands mid-step.
    support::progressive(&[(20, "40s"), (50, "40s")], worker == "alpha")
}

impl Run {
    async fn start() -> Result<Run> {
        let rig = Rig::start().await?;
        let toxi = Toxiproxy::start().await?;
        let kube_proxy = toxi
            .proxy("kube", rig.plane.server().trim_start_matches("https://"))
            .await?;
        let temporal_proxy = toxi.proxy("temporal", &rig.temporal.address()).await?;
        let ns = names::unique("chaos");
        let doomed_ns = names::unique("chaos-doomed");
        let lease_ns = names::unique("chaos-system");
        let temporal_ns = format!("chaos-{}", std::process::id());
        for n in [&ns, &doomed_ns] {
            rig.namespace(n, &temporal_ns, &temporal_proxy.to_string())
                .await?;
        }
        world::create_namespace(&rig.admin, &lease_ns).await?;
        let users = ["twc-chaos-a", "twc-chaos-b"];
        let webhook = fault_webhook::FaultWebhook::start(
            &rig.admin,
            "twc-chaos-faults",
            users.iter().map(|u| u.to_string()).collect(),
        )
        .await?;
        let mut started = Vec::new();
        for (name, user) in [("chaos-a", users[0]), ("chaos-b", users[1])] {
            let kubeconfig = rig.controller_kubeconfig(user, Some(kube_proxy))?;
            started.push(Controller::start(name, user, &kubeconfig, &lease_ns)?);
        }
        let controllers: [Controller; 2] = started
            .try_into()
            .map_err(|_| anyhow::anyhow!("two controllers"))?;
        Ok(Run {
            rig,
            toxi,
            webhook,
            controllers,
            ns,
            doomed_ns,
            temporal_ns,
            lease_ns,
            faults: Faults::default(),
            rollouts_completed: 0,
            temporal_reasons_seen: BTreeMap::new(),
            snapshots: Vec::new(),
            in_flight_at: Vec::new(),
        })
    }

    async fn apply(&self, ns: &str, name: &str, tag: &str, r: serde_json::Value) -> Result<()> {
        world::apply(
            &self.rig.admin,
            ns,
            "chaos-test",
            support::twd(name, tag, &self.temporal_ns, r),
        )
        .await
    }

    /// The gate's input Secret, the owned resource, v1 of every worker (and of the ones to
    /// be deleted), all Current.
    async fn first_versions(&mut self) -> Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.rig.admin.clone(), &self.ns);
        let input = json!({"outcome": "succeed", "token": SECRET}).to_string();
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "gate-input"},
                    "stringData": {"input.json": input}}))?,
            )
            .await?;
        world::apply(
            &self.rig.admin,
            &self.ns,
            "chaos-test",
            manifests::owned_resource(
                "alpha-pdb",
                "alpha",
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "spec": {"maxUnavailable": 1}}),
            ),
        )
        .await?;
        for w in WORKERS.iter().chain(&["victim"]) {
            self.apply(&self.ns.clone(), w, "v1", json!({"strategy": "AllAtOnce"}))
                .await?;
        }
        self.apply(
            &self.doomed_ns.clone(),
            "doomed",
            "v1",
            json!({"strategy": "AllAtOnce"}),
        )
        .await?;
        for (ns, w) in WORKERS.iter().map(|w| (self.ns.clone(), *w)).chain([
            (self.ns.clone(), "victim"),
            (self.doomed_ns.clone(), "doomed"),
        ]) {
            let api = support::twds(&self.rig.admin, &ns);
            world::wait(&api, w, "v1 Current", |t| support::complete(t, None)).await?;
        }
        Ok(())
    }

    /// New versions of every worker (the gate reads its input from the Secret).
    async fn next_versions(&mut self, round: u32) -> Result<()> {
        let tag = format!("v{}", round + 2);
        for w in WORKERS {
            let mut r = rollout(w);
            if w == "alpha" {
                r["gate"]["inputFrom"] =
                    json!({"secretKeyRef": {"name": "gate-input", "key": "input.json"}});
            }
            self.apply(&self.ns.clone(), w, &tag, r).await?;
        }
        Ok(())
    }

    /// Which controller leads (index), waiting up to `within`.
    async fn leader(&self, within: Duration) -> Result<usize> {
        support::wait_leader(&[&self.controllers[0], &self.controllers[1]], within).await
    }

    async fn round(&mut self, round: u32) -> Result<()> {
        self.next_versions(round).await?;
        // (a) latency on both links while the new versions start.
        for (proxy, ms) in [("kube", 150), ("temporal", 100)] {
            let t = Toxic::Latency {
                latency_ms: ms,
                jitter_ms: ms / 2,
            };
            self.toxi.add_toxic(proxy, "slow", &t, 1.0).await?;
            self.faults.add(&format!("{}:{proxy}", t.kind()));
        }
        if round == 0 {
            // Deletions during the faults: one worker deployment and one whole namespace.
            support::twds(&self.rig.admin, &self.ns)
                .delete("victim", &DeleteParams::default())
                .await?;
            Api::<Namespace>::all(self.rig.admin.clone())
                .delete(&self.doomed_ns, &DeleteParams::default())
                .await?;
            self.faults.add("delete:worker-deployment");
            self.faults.add("delete:namespace");
        }
        self.hold(Duration::from_secs(8)).await?;
        for proxy in ["kube", "temporal"] {
            self.toxi.remove_toxic(proxy, "slow").await?;
        }
        // (a) resets on the API link, dropped connections on the Temporal link.
        let reset = Toxic::ResetPeer { timeout_ms: 1500 };
        self.toxi.add_toxic("kube", "reset", &reset, 0.5).await?;
        self.faults.add("reset_peer:kube");
        let dropped = Toxic::Timeout { timeout_ms: 3000 };
        self.toxi
            .add_toxic("temporal", "drop", &dropped, 0.5)
            .await?;
        self.faults.add("timeout:temporal");
        self.hold(Duration::from_secs(6)).await?;
        self.toxi.remove_toxic("kube", "reset").await?;
        self.toxi.remove_toxic("temporal", "drop").await?;
        // (b) 500/409 on a share of the controller's writes.
        self.webhook.set_share(0.3);
        self.faults.add("admission:500/409");
        self.hold(Duration::from_secs(8)).await?;
        self.until_a_write_is_refused().await?;
        self.webhook.set_share(0.0);
        // (d) Temporal unreachable, mid-ramp.
        self.temporal_cut(Duration::from_secs(15)).await?;
        // (c) kube-apiserver restarted.
        let down = self
            .rig
            .plane
            .restart_apiserver(Duration::from_secs(5))
            .await?;
        self.faults.add("apiserver:restart");
        eprintln!("chaos: kube-apiserver back after {down:?}");
        // (e)+(f) the leader SIGKILLed mid-step: the other process takes over; the killed
        // one restarts as a follower.
        let leader = self.leader(Duration::from_secs(60)).await?;
        self.note_in_flight("controller:sigkill").await?;
        self.controllers[leader].kill();
        self.faults.add("controller:sigkill");
        let took_over = Instant::now();
        let new_leader = self.leader(Duration::from_secs(60)).await?;
        ensure!(new_leader != leader, "the killed controller still leads");
        self.faults.add("leader:failover");
        eprintln!(
            "chaos: failover to {} in {:?}",
            self.controllers[new_leader].name,
            took_over.elapsed()
        );
        let lease_ns = self.lease_ns.clone();
        self.controllers[leader].restart(&lease_ns)?;
        self.webhook.set_share(0.0);
        self.toxi.reset().await?;
        Ok(())
    }

    /// Rollouts whose target is Ramping right now; recorded under `fault`.
    async fn note_in_flight(&mut self, fault: &str) -> Result<()> {
        let n = support::twds(&self.rig.admin, &self.ns)
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|t| {
                t.status
                    .as_ref()
                    .and_then(|s| s.target_version.as_ref())
                    .and_then(|v| v.ramp_percentage)
                    .is_some_and(|r| r > 0.0 && r < 100.0)
            })
            .count();
        eprintln!("chaos: {n} rollouts mid-ramp at {fault}");
        self.in_flight_at.push((fault.to_string(), n));
        Ok(())
    }

    /// Lets the rollouts run under the faults for `d`, checking the controllers are alive.
    /// A controller at rest writes nothing for the admission faults to refuse (it writes a
    /// status only when it changes): while none was refused, change the PDB template so that
    /// the owned-resource controller has copies and a status to write (at most 30 s).
    async fn until_a_write_is_refused(&mut self) -> Result<()> {
        let templates = world::api_resource("TemporalWorkerOwnedResource");
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.rig.admin.clone(), &self.ns, &templates);
        let until = Instant::now() + Duration::from_secs(30);
        let mut unavailable = 2;
        while self.webhook.refused().is_empty() && Instant::now() < until {
            let patch = json!({"spec": {"object": {"spec": {"maxUnavailable": unavailable}}}});
            api.patch(
                "alpha-pdb",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await?;
            unavailable = 3 - unavailable;
            self.hold(Duration::from_secs(2)).await?;
        }
        Ok(())
    }

    async fn hold(&mut self, d: Duration) -> Result<()> {
        let until = Instant::now() + d;
        while Instant::now() < until {
            for c in &mut self.controllers {
                c.check_alive()?;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    }

    /// Cuts the Temporal link for `d`, recording which condition reasons name it meanwhile,
    /// and takes a snapshot of the status API for the secret scan.
    async fn temporal_cut(&mut self, d: Duration) -> Result<()> {
        self.note_in_flight("temporal:cut").await?;
        self.toxi.set_enabled("temporal", false).await?;
        self.faults.add("temporal:cut");
        let until = Instant::now() + d;
        let api = support::twds(&self.rig.admin, &self.ns);
        while Instant::now() < until {
            for t in api.list(&ListParams::default()).await?.items {
                for c in t.status.iter().flat_map(|s| &s.conditions) {
                    // A transient failure is never Stalled (kstatus would call it failed).
                    ensure!(
                        !(c.type_ == "Stalled" && c.status == "True"),
                        "{:?} Stalled during the Temporal cut: {} {}",
                        t.metadata.name,
                        c.reason,
                        c.message
                    );
                    if c.reason.starts_with("Temporal") {
                        *self
                            .temporal_reasons_seen
                            .entry(format!("{}={}", c.type_, c.reason))
                            .or_default() += 1;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.snapshot().await?;
        self.toxi.set_enabled("temporal", true).await
    }

    /// Waits until every worker's newest version is Current with no condition naming a fault.
    async fn settle(&mut self) -> Result<()> {
        let api = support::twds(&self.rig.admin, &self.ns);
        let begin = Instant::now();
        for w in WORKERS {
            let t = wait_long(&api, w, SETTLE, |t| support::complete(t, None)).await?;
            for c in t.status.iter().flat_map(|s| &s.conditions) {
                ensure!(
                    !c.reason.starts_with("Temporal") && c.reason != "PlanExecutionFailed",
                    "{w}: condition {} still names a fault: {} {}",
                    c.type_,
                    c.reason,
                    c.message
                );
            }
            self.rollouts_completed += 1;
        }
        eprintln!(
            "chaos: rollouts complete {:?} after the faults cleared",
            begin.elapsed()
        );
        Ok(())
    }

    /// Status API, metrics, statuses and events, for the secret scan.
    async fn snapshot(&mut self) -> Result<()> {
        for c in &self.controllers {
            for path in ["/metrics", "/api/v1/rollouts"] {
                if let Ok((_, body)) =
                    test_harness::loopback_http::get(c.http, path, "application/json", None).await
                {
                    self.snapshots.push(body);
                }
            }
            let detail = format!("/api/v1/namespaces/{}/rollouts/alpha", self.ns);
            if let Ok((_, body)) =
                test_harness::loopback_http::get(c.http, &detail, "application/json", None).await
            {
                self.snapshots.push(body);
            }
        }
        let twds = support::twds(&self.rig.admin, &self.ns)
            .list(&ListParams::default())
            .await?;
        self.snapshots.push(serde_json::to_string(&twds.items)?);
        let events: Api<KubeEvent> = Api::namespaced(self.rig.admin.clone(), &self.ns);
        self.snapshots.push(serde_json::to_string(
            &events.list(&ListParams::default()).await?.items,
        )?);
        Ok(())
    }
}

/// [`world::wait`] with a deadline of its own.
async fn wait_long(
    api: &Api<TemporalWorkerDeployment>,
    name: &str,
    within: Duration,
    pred: impl Fn(&TemporalWorkerDeployment) -> bool,
) -> Result<TemporalWorkerDeployment> {
    let begin = Instant::now();
    loop {
        let t = api.get(name).await?;
        if pred(&t) {
            return Ok(t);
        }
        if begin.elapsed() > within {
            bail!(
                "{name} not complete after {within:?}: {}",
                serde_json::to_value(&t)?["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// No versioned Deployment without its worker deployment, no owned-resource copy without its
/// Deployment, and the deleted ones gone from Kubernetes.
async fn no_orphans(run: &Run) -> Result<()> {
    let client = &run.rig.admin;
    let twds = support::twds(client, &run.ns)
        .list(&ListParams::default())
        .await?;
    let live: Vec<String> = twds
        .items
        .iter()
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &run.ns);
    let versioned = deployments
        .list(&ListParams::default().labels("temporal.io/build-id"))
        .await?;
    let names: Vec<String> = versioned
        .items
        .iter()
        .filter_map(|d| d.metadata.name.clone())
        .collect();
    for d in &versioned.items {
        let owner = d
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        ensure!(
            owner.is_some_and(|o| live.contains(&o.name)),
            "orphan Deployment {:?} (owner {owner:?})",
            d.metadata.name
        );
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &run.ns);
    for p in pdbs.list(&ListParams::default()).await?.items {
        let owner = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .next()
            .map(|o| o.name.clone());
        ensure!(
            owner.as_ref().is_some_and(|o| names.contains(o)),
            "orphan PodDisruptionBudget {:?} (owner {owner:?})",
            p.metadata.name
        );
    }
    test_harness::wait::eventually(
        "the victim and the doomed namespace gone",
        SETTLE,
        || async {
            let victim = support::twds(client, &run.ns).get_opt("victim").await?;
            let doomed = Api::<Namespace>::all(client.clone())
                .get_opt(&run.doomed_ns)
                .await?;
            Ok((victim.is_none() && doomed.is_none()).then_some(()))
        },
    )
    .await
}

/// Deletes everything left and checks Temporal keeps no worker deployment of ours.
async fn nothing_left_in_temporal(run: &Run) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(run.rig.admin.clone());
    namespaces.delete(&run.ns, &DeleteParams::default()).await?;
    test_harness::wait::eventually("the chaos namespace gone", SETTLE, || async {
        Ok(namespaces.get_opt(&run.ns).await?.is_none().then_some(()))
    })
    .await?;
    let conn = run.rig.temporal.connect("chaos-test").await?;
    let mut left = Vec::new();
    for (ns, w) in WORKERS
        .iter()
        .map(|w| (&run.ns, *w))
        .chain([(&run.ns, "victim"), (&run.doomed_ns, "doomed")])
    {
        let name = format!("{ns}/{w}");
        if test_harness::observe::describe_deployment(&conn, &run.temporal_ns, &name)
            .await?
            .is_some()
        {
            left.push(name);
        }
    }
    ensure!(left.is_empty(), "left in Temporal: {left:?}");
    Ok(())
}

/// Item 4: the secret in no log, status, event, metric or status API answer.
fn scan_for_secret(run: &Run) -> Result<usize> {
    use base64::Engine as _;
    let needles = [
        SECRET.to_string(),
        base64::engine::general_purpose::STANDARD
            .encode(json!({"outcome": "succeed", "token": SECRET}).to_string()),
    ];
    let mut haystacks: Vec<(String, String)> = run
        .snapshots
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("snapshot {i}"), s.clone()))
        .collect();
    for c in &run.controllers {
        let log = std::fs::read_to_string(&c.log)
            .with_context(|| format!("reading {}", c.log.display()))?;
        haystacks.push((format!("log of {}", c.name), log));
    }
    let mut bytes = 0;
    for (what, text) in &haystacks {
        bytes += text.len();
        for n in &needles {
            ensure!(!text.contains(n.as_str()), "secret material in {what}");
        }
    }
    Ok(bytes)
}

/// Prints the run's summary (faults, checks, violations, rollouts, time).
fn print_summary(
    run: &Run,
    writes: &[invariants::AuditWrite],
    rounds: u32,
    elapsed: Duration,
    scanned: usize,
) {
    let counts = run.rig.checker.counts();
    let violations = run.rig.checker.violations();
    println!("chaos summary ({rounds} round(s), {elapsed:?}):");
    println!(
        "  faults injected: {:?} (total {})",
        run.faults.0,
        run.faults.0.values().sum::<u32>()
    );
    println!("  admission faults served: {:?}", run.webhook.refused());
    println!(
        "  invariant checks: {} ({} Deployment events, {} worker-deployment events, {} Temporal polls every {:?}, {} routing targets, {} controller writes in the audit log)",
        counts.total_checks() + writes.len() as u64,
        counts.deployment_events,
        counts.worker_deployment_events,
        counts.temporal_polls,
        support::POLL,
        counts.routing_targets_checked,
        writes.len()
    );
    println!(
        "  controller writes by user/field manager: {:?}",
        invariants::writes_by_user_and_manager(writes)
    );
    println!(
        "  routing changes seen: {} (unseen between polls: {}), by identity: {:?}; checker poll errors: {}",
        counts.routing_changes,
        counts.unseen_routing_changes,
        counts.routing_changes_by_identity,
        counts.temporal_poll_errors
    );
    println!(
        "  conditions naming the Temporal cut: {:?}",
        run.temporal_reasons_seen
    );
    println!(
        "  rollouts completed: {}; secret scan: {scanned} bytes clean",
        run.rollouts_completed
    );
    println!("  violations: {}", violations.len());
    for v in &violations {
        println!("    {v}");
    }
    println!(
        "  rollouts mid-ramp when faults began: {:?}",
        run.in_flight_at
    );
}

async fn chaos() -> Result<()> {
    let begin = Instant::now();
    let soak = std::env::var("TWC_CHAOS_SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .map(|m| Duration::from_secs(m * 60));
    let mut run = Run::start().await?;
    for c in &mut run.controllers {
        c.wait_serving().await?;
    }
    let first = run.leader(Duration::from_secs(60)).await?;
    eprintln!("chaos: {} leads", run.controllers[first].name);
    run.first_versions().await?;
    let mut round = 0;
    loop {
        run.round(round).await?;
        run.settle().await?;
        round += 1;
        if soak.is_none_or(|s| begin.elapsed() >= s) {
            break;
        }
    }
    run.snapshot().await?;
    no_orphans(&run).await?;
    nothing_left_in_temporal(&run).await?;
    let audit = std::fs::read_to_string(run.rig.plane.audit_log_path())?;
    let writes = invariants::audit_writes(&audit, &["twc-chaos-a", "twc-chaos-b"]);
    run.rig
        .checker
        .record(invariants::single_writer_violations(&writes));
    let scanned = scan_for_secret(&run)?;
    print_summary(&run, &writes, round, begin.elapsed(), scanned);
    let counts = run.rig.checker.counts();
    let violations = run.rig.checker.violations();
    ensure!(violations.is_empty(), "invariants violated: {violations:?}");
    ensure!(
        run.in_flight_at.iter().all(|(_, n)| *n > 0),
        "a fault hit no rollout mid-ramp: {:?}",
        run.in_flight_at
    );
    ensure!(
        run.webhook.refused().values().sum::<u64>() > 0,
        "the admission webhook refused no write"
    );
    ensure!(
        !run.temporal_reasons_seen.is_empty(),
        "no condition named the Temporal outage while it lasted"
    );
    let foreign: Vec<&String> = counts
        .routing_changes_by_identity
        .keys()
        .filter(|id| !id.is_empty() && !id.starts_with(support::IDENTITY))
        .collect();
    ensure!(
        foreign.is_empty(),
        "routing changed by other identities: {foreign:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_complete_safely_under_faults() {
    chaos().await.expect("chaos run");
}
