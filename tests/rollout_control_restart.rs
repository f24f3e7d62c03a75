//! A paused step keeps its remaining time across a controller restart (issue 16): the pause is
//! recorded in the status, not in the controller's memory; and what Temporal answers when a
//! worker deployment is described right after a routing write. Real control plane, real Temporal, real workers (kubelet stand-in); the
//! controller runs in-process and is stopped and started again, so this binary has its own
//! controller rather than the e2e suite's shared one.

#[path = "common/controller.rs"]
mod controller;
#[path = "common/ready.rs"]
mod ready;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerDeployment;

use ready::reason;
use temporal_worker_controller::run::Running;
use test_harness::manifests;
use test_harness::world::{World, wait};

const NAME: &str = "orders";
const STEP_SECS: i64 = 12;

const IDENTITY: &str = "twc-restart-test";

fn twd(tag: &str, temporal_ns: &str, rollout: Value) -> Value {
    manifests::twd(NAME)
        .replicas(1)
        .tag(tag)
        .task_queue("restart")
        .temporal_namespace(temporal_ns)
        .rollout(rollout)
        .build()
}

/// A controller watching only the world's namespace, acting as [`IDENTITY`].
async fn controller(world: &World) -> Result<Running> {
    controller::start(
        world.client.clone(),
        &controller::watching(&world.ns, IDENTITY),
    )
    .await
}

fn progressive(paused: bool) -> Value {
    json!({"strategy": "Progressive", "paused": paused, "steps": [
        {"rampPercentage": 20, "pauseDuration": format!("{STEP_SECS}s")},
        {"rampPercentage": 60, "pauseDuration": "600s"},
    ]})
}

fn ramp(t: &TemporalWorkerDeployment) -> Option<f32> {
    t.status.as_ref()?.target_version.as_ref()?.ramp_percentage
}

/// Temporal's ramp percentage and when it last changed.
async fn temporal_ramp(
    client: &temporal_worker_controller::temporal::TemporalClient,
    ns: &str,
) -> Result<(f32, jiff::Timestamp)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client.describe_deployment(&format!("{ns}/{NAME}")).await {
            Ok(s) => {
                let r = s.routing;
                return Ok((
                    r.ramp_percentage,
                    r.ramp_percentage_changed_at.context("no ramp time")?,
                ));
            }
            Err(e) if Instant::now() > deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_step_keeps_its_remaining_time_across_a_controller_restart() -> Result<()> {
    let world = World::new("restart").await?;
    let (ns, temporal_ns) = (world.ns.clone(), world.temporal_ns.clone());
    let server_address = world.address.clone();
    let ssa = PatchParams::apply("restart-test").force();
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    let first = controller(&world).await?;

    api.patch(
        NAME,
        &ssa,
        &Patch::Apply(twd("v1", &temporal_ns, json!({"strategy": "AllAtOnce"}))),
    )
    .await?;
    wait(&api, NAME, "v1 Ready", |t| reason(t) == "RolloutComplete").await?;
    api.patch(
        NAME,
        &ssa,
        &Patch::Apply(twd("v2", &temporal_ns, progressive(false))),
    )
    .await?;
    wait(&api, NAME, "20% step", |t| ramp(t) == Some(20.0)).await?;
    let observer = connect_observer(&server_address, &temporal_ns).await?;
    let (_, started) = temporal_ramp(&observer, &ns).await?;

    let remaining = pause_and_read_the_remaining_time(&api, &temporal_ns).await?;

    // The controller goes away; the step's deadline passes while none runs.
    first.stop().await;
    let past = started + jiff::SignedDuration::from_secs(STEP_SECS + 3);
    let left = past.duration_since(jiff::Timestamp::now());
    if left.is_positive() {
        tokio::time::sleep(Duration::try_from(left)?).await;
    }
    let _second = controller(&world).await?;
    let resumed = jiff::Timestamp::now();
    api.patch(
        NAME,
        &ssa,
        &Patch::Apply(twd("v2", &temporal_ns, progressive(false))),
    )
    .await?;
    wait(&api, NAME, "60% step", |t| ramp(t) == Some(60.0)).await?;
    let (pct, next) = temporal_ramp(&observer, &ns).await?;
    ensure!(pct == 60.0);
    let took = next.duration_since(resumed).as_secs_f64();
    println!(
        "paused with {remaining}s left, restarted after the deadline; next step {took:.1}s after resume"
    );
    // Without the recorded pause the new controller would see a step long over and move on at
    // once.
    ensure!(
        took >= remaining as f64 - 1.0 && took <= remaining as f64 + 6.0,
        "resumed with {remaining}s left after a restart, moved on after {took:.1}s"
    );
    ensure!(remaining >= 3, "paused too late to tell: {remaining}s left");
    Ok(())
}

/// A client of the Temporal namespace, to read the routing the controller writes.
async fn connect_observer(
    address: &str,
    temporal_ns: &str,
) -> Result<temporal_worker_controller::temporal::TemporalClient> {
    Ok(temporal_worker_controller::temporal::ClientPool::default()
        .get_or_connect(
            temporal_worker_controller::temporal::ConnectionKey::new(
                &temporal_worker_controller::api::TemporalConnectionSpec {
                    host_port: address.to_string(),
                    tls: None,
                    mutual_tls_secret_ref: None,
                    api_key_secret_ref: None,
                    worker_credentials: None,
                },
                temporal_worker_controller::temporal::AuthMaterial::Plain,
            ),
            temporal_ns,
            "restart-observer",
        )
        .await?)
}

/// Pauses the rollout and returns the remaining time of its step the status records.
async fn pause_and_read_the_remaining_time(
    api: &kube::Api<TemporalWorkerDeployment>,
    temporal_ns: &str,
) -> Result<i64> {
    let ssa = PatchParams::apply("restart-test").force();
    api.patch(
        NAME,
        &ssa,
        &Patch::Apply(twd("v2", temporal_ns, progressive(true))),
    )
    .await?;
    let paused = wait(api, NAME, "RolloutPaused", |t| reason(t) == "RolloutPaused").await?;
    paused
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.paused.as_ref())
        .and_then(|p| p.remaining_seconds)
        .context("no remaining time recorded")
}

/// A progress deadline survives a controller restart halfway through it (issue 38): its start
/// is kept in the status, so the stall comes at the target's creation plus the deadline, not
/// a deadline after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_deadline_is_not_restarted_by_a_controller_restart() -> Result<()> {
    const DEADLINE_S: i64 = 20;
    let world = World::new("deadline-restart").await?;
    let temporal_ns = world.temporal_ns.clone();
    let ssa = PatchParams::apply("restart-test").force();
    let api = TemporalWorkerDeployment::api(world.client.clone(), &world.ns, KindSet::Seed);
    let first = controller(&world).await?;
    let spec = |image: &str| {
        let mut m = manifests::twd(NAME)
            .replicas(1)
            .image(image)
            .task_queue("restart")
            .temporal_namespace(&temporal_ns)
            .rollout(json!({"strategy": "AllAtOnce"}))
            .spec(json!({"progressDeadlineSeconds": DEADLINE_S}))
            .build();
        m["metadata"]["namespace"] = json!(world.ns);
        m
    };
    api.patch(
        NAME,
        &ssa,
        &Patch::Apply(spec(&manifests::worker_image("v1"))),
    )
    .await?;
    wait(&api, NAME, "v1 Ready", |t| reason(t) == "RolloutComplete").await?;
    api.patch(
        NAME,
        &ssa,
        &Patch::Apply(spec("registry.invalid/worker:v2")),
    )
    .await?;
    let waiting = wait(&api, NAME, "the clock recorded", |t| {
        t.status
            .as_ref()
            .and_then(|s| s.rollout_control.as_ref())
            .is_some_and(|r| r.waiting.is_some())
    })
    .await?;
    let build = waiting
        .status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .map(|t| t.version.build_id.clone())
        .context("no target")?;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(world.client.clone(), &world.ns);
    let created = deployments
        .get(&temporal_worker_controller::build_id::deployment_name(
            NAME, &build,
        ))
        .await?
        .metadata
        .creation_timestamp
        .context("no creationTimestamp")?
        .0;

    // Halfway through, the controller goes away and a new one starts a few seconds later.
    let half = created + jiff::SignedDuration::from_secs(DEADLINE_S / 2);
    let left = half.duration_since(jiff::Timestamp::now());
    if left.is_positive() {
        tokio::time::sleep(Duration::try_from(left)?).await;
    }
    first.stop().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _second = controller(&world).await?;

    let stalled = wait(&api, NAME, "ProgressDeadlineExceeded", |t| {
        reason(t) == "ProgressDeadlineExceeded"
    })
    .await?;
    let failed_at = stalled
        .status
        .as_ref()
        .and_then(|s| s.rollout_control.as_ref())
        .and_then(|r| r.aborted.as_ref())
        .map(|a| a.at.0)
        .context("no failure recorded")?;
    let after = failed_at.duration_since(created).as_secs_f64();
    println!(
        "created {created}, stalled {after:.1}s later (deadline {DEADLINE_S}s, restart at half)"
    );
    ensure!(
        after >= DEADLINE_S as f64 - 1.0 && after <= DEADLINE_S as f64 + 5.0,
        "stalled {after:.1}s after the target's creation; deadline {DEADLINE_S}s (a restarted \
         clock would give about {}s)",
        DEADLINE_S + DEADLINE_S / 2 + 3
    );
    Ok(())
}

/// One look at the worker deployment after a routing write.
#[derive(Debug)]
struct Look {
    /// Since the write returned (ms).
    after_ms: f64,
    /// How long the describe took (ms).
    took_ms: f64,
    /// `Ok(update in progress, token as the write returned it, routing as written)`, or the
    /// refusal (code and message).
    seen: std::result::Result<(bool, bool, bool), String>,
}

/// What Temporal 1.32 answers when a worker deployment is described right after a routing
/// write (issue 41: the settle before the next describe). Real dev server, two real versioned
/// workers. Each round writes routing with the token of the last write, records the install on
/// the version as the controller does, and describes `delay` after the write's answer (the
/// measured variable, swept from 0 to 3 s), then every 50 ms, without the SDK's retries (so a
/// refusal shows as one), until Temporal reports the update completed. Prints every look;
/// asserts only what the controller relies on: the token a write returns is the token Temporal
/// then describes, and the write is what Temporal describes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_right_after_a_routing_write() -> Result<()> {
    const DELAYS_MS: [u64; 7] = [0, 250, 500, 1000, 1500, 2000, 3000];
    let server = test_harness::temporal_server::shared().await?;
    let deployment = format!("after-write/{}", test_harness::names::unique("probe"));
    let (client, mut raw, workers) = probe_setup(server, &deployment).await?;
    let mut token = client
        .describe_deployment(&deployment)
        .await?
        .conflict_token;
    // (build, ramp %): 0 % is a SetCurrent.
    let writes = [
        ("v1", 0.0),
        ("v2", 25.0),
        ("v2", 50.0),
        ("v2", 0.0),
        ("v1", 25.0),
        ("v1", 0.0),
    ];
    let (mut rounds, mut refused_writes) = (Vec::new(), 0);
    for round in 0..2 * DELAYS_MS.len() + 1 {
        let (build, pct) = writes[round % writes.len()];
        // Round 0 routes a fresh deployment; the sweep runs twice after it.
        let delay = Duration::from_millis(DELAYS_MS[round.saturating_sub(1) % DELAYS_MS.len()]);
        let started = Instant::now();
        let written = if pct == 0.0 {
            client.set_current(&deployment, build, &token).await
        } else {
            client.set_ramping(&deployment, build, pct, &token).await
        };
        let (wrote, returned) = (started.elapsed(), Instant::now());
        // A write refused on a loaded server (the suite's other tests share it) is reported,
        // and the round skipped with a fresh token.
        let metadata = client.update_version_metadata(&deployment, build, "probe");
        token = match (written, metadata.await) {
            (Ok(t), Ok(())) => t,
            (w, m) => {
                println!("round {round}: write {:?}, metadata {:?}", w.err(), m.err());
                refused_writes += 1;
                token = client
                    .describe_deployment(&deployment)
                    .await?
                    .conflict_token;
                continue;
            }
        };
        let metadata = returned.elapsed();
        // The delay is what this probe measures, not a wait for a condition.
        tokio::time::sleep_until((returned + delay).into()).await;
        let mut looks = Vec::new();
        loop {
            let look = describe_once(&mut raw, &deployment, returned, &token, (build, pct)).await;
            let done = matches!(look.seen, Ok((false, true, true)));
            looks.push(look);
            if done || returned.elapsed() > Duration::from_secs(10) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!(
            "round {round}: {build} {pct}% written in {wrote:?}, metadata in {metadata:?}, \
             described {delay:?} after: {looks:?}"
        );
        rounds.push((delay, wrote, metadata, looks));
    }
    for d in DELAYS_MS {
        let first: Vec<String> = rounds
            .iter()
            .skip(1)
            .filter(|r| r.0 == Duration::from_millis(d))
            .map(|r| format!("{:.0} ms at +{:.0} ms", r.3[0].took_ms, r.3[0].after_ms))
            .collect();
        println!("described {d} ms after the write: the first describe took {first:?}");
    }
    let ms = |d: &Duration| (d.as_secs_f64() * 1e3).round();
    let refused = rounds
        .iter()
        .flat_map(|r| &r.3)
        .filter(|l| l.seen.is_err())
        .count();
    let in_progress = rounds
        .iter()
        .filter(|r| r.3.iter().any(|l| matches!(l.seen, Ok((true, _, _)))))
        .count();
    println!(
        "writes took {:?} ms, the metadata write after each {:?} ms (sorted); {refused} refused \
         describes, {refused_writes} refused writes; update in progress seen in {in_progress}/{} \
         rounds",
        sorted(rounds.iter().map(|r| ms(&r.1)).collect()),
        sorted(rounds.iter().map(|r| ms(&r.2)).collect()),
        rounds.len()
    );
    for w in workers {
        w.stop().await?;
    }
    ensure!(
        rounds
            .iter()
            .all(|r| matches!(r.3.last().map(|l| &l.seen), Some(Ok((false, true, true))))),
        "a write was never described as written with its token"
    );
    ensure!(
        refused_writes <= 3,
        "{refused_writes} of the routing writes were refused"
    );
    Ok(())
}

type Probe = (
    temporal_worker_controller::temporal::TemporalClient,
    temporalio_client::Connection,
    Vec<test_harness::worker::WorkerHandle>,
);

/// Two versioned workers (v1, v2) of `deployment`, both registered; the controller's client;
/// a raw connection without retries.
async fn probe_setup(
    server: &test_harness::temporal_server::DevServer,
    deployment: &str,
) -> Result<Probe> {
    use temporal_worker_controller::temporal::{AuthMaterial, ClientPool, ConnectionKey};
    let mut workers = Vec::new();
    for build in ["v1", "v2"] {
        let w = test_harness::worker::spawn(test_harness::worker::WorkerConfig {
            address: server.address(),
            namespace: "default".into(),
            deployment_name: deployment.to_string(),
            build_id: build.into(),
            task_queue: "after-write".into(),
            identity: format!("{deployment}@{build}"),
            ..Default::default()
        })?;
        w.wait_running(Duration::from_secs(60)).await?;
        workers.push(w);
    }
    let client = ClientPool::default()
        .get_or_connect(
            ConnectionKey::from_parts(&server.address(), None, AuthMaterial::Plain),
            "default",
            "after-write-probe",
        )
        .await?;
    let mut raw = server.connect("after-write-raw").await?;
    *raw.retry_options_mut() = temporalio_client::RetryOptions::no_retries();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = client.describe_deployment(deployment).await?;
        if s.version("v1").is_some() && s.version("v2").is_some() {
            return Ok((client, raw, workers));
        }
        ensure!(
            Instant::now() < deadline,
            "v1 and v2 never registered: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One describe without retries: whether Temporal shows the write (`build` Current at 0 %,
/// else ramping at `pct`) with its `token`, and how long it took.
async fn describe_once(
    raw: &mut temporalio_client::Connection,
    deployment: &str,
    returned: Instant,
    token: &[u8],
    (build, pct): (&str, f32),
) -> Look {
    use temporalio_client::grpc::WorkflowService as _;
    use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeWorkerDeploymentRequest;
    let asked = Instant::now();
    let req = DescribeWorkerDeploymentRequest {
        namespace: "default".into(),
        deployment_name: deployment.to_string(),
    };
    let seen = match raw.describe_worker_deployment(tonic_request(req)).await {
        Ok(resp) => {
            let s = temporal_worker_controller::temporal::convert::deployment_state(resp.get_ref());
            let r = &s.routing;
            let as_written = if pct == 0.0 {
                r.current_build_id.as_deref() == Some(build)
            } else {
                r.ramping_build_id.as_deref() == Some(build) && r.ramp_percentage == pct
            };
            Ok((r.update_in_progress, s.conflict_token == token, as_written))
        }
        Err(status) => Err(format!("{:?}: {}", status.code(), status.message())),
    };
    Look {
        after_ms: asked.duration_since(returned).as_secs_f64() * 1e3,
        took_ms: asked.elapsed().as_secs_f64() * 1e3,
        seen,
    }
}

fn tonic_request<T>(t: T) -> temporalio_client::tonic::Request<T> {
    temporalio_client::tonic::Request::new(t)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v.iter().map(|x| x.round()).collect()
}
