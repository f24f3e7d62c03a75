//! The Temporal access layer against a real dev server (Server 1.32) with real versioned SDK
//! workers from `test_harness`. Each scenario uses its own worker deployment name and deletes
//! it at the end (100-deployments-per-namespace cap).
//!
//! The server is started here rather than through `test_harness::temporal_server::shared()`
//! because deleting a version needs its pollers forgotten, which takes
//! `matching.PollerHistoryTTL` (5 min by default); this server runs with 1 s.

use std::future::Future;
use std::io::Write as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use temporal_worker_controller::api::twd::GateWorkflowStatus;
use temporal_worker_controller::temporal::state::{
    TemporalVersionStatus, VersionDetail, WorkerDeploymentState,
};
use temporal_worker_controller::temporal::{
    AuthMaterial, ClientPool, ConnectionKey, TemporalClient,
};
use test_harness::worker::{self, WorkerConfig, WorkerHandle};

const NAMESPACE: &str = "default";
const CONTROLLER: &str = "it-controller";
/// Temporal registers a build asynchronously: it appears in `DescribeWorkerDeployment`, and its
/// task queue in `DescribeWorkerDeploymentVersion`, only some time after its worker's first poll
/// (about 0.3 s on an idle machine; the `[timing]` lines below print it). So every such fact is
/// polled for with [`eventually`], never read once; the deadline leaves a wide margin for a
/// loaded 2-core box.
const DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);

type Calls = Arc<Mutex<Vec<(&'static str, &'static str, Duration)>>>;

fn observed_pool() -> (ClientPool, Calls) {
    let calls: Calls = Arc::default();
    let sink = calls.clone();
    let pool = ClientPool::with_observer(Arc::new(move |method, code, latency| {
        sink.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((method, code, latency))
    }));
    (pool, calls)
}

/// Dynamic config: DRAINED about 1 s after the last pinned workflow closes, and stopped
/// workers' pollers forgotten after 1 s so versions can be deleted.
const SERVER_FLAGS: [&str; 3] = [
    r#"matching.wv.VersionDrainageStatusVisibilityGracePeriod="1s""#,
    r#"matching.wv.VersionDrainageStatusRefreshInterval="1s""#,
    r#"matching.PollerHistoryTTL="1s""#,
];

/// `temporal server start-dev` under a `sh` guard that kills the server when our end of its
/// stdin pipe closes, so the server also dies if this test process is killed.
struct DevServer {
    port: u16,
    guard: Child,
    stdin: Option<ChildStdin>,
}

impl DevServer {
    fn start() -> Result<DevServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::env::temp_dir().join(format!(
            "temporal-client-it-{}-{port}.log",
            std::process::id()
        ));
        let log =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"temporal "$@" </dev/null & server=$!; read -r _ignored; kill "$server" 2>/dev/null; wait "$server""#)
            .arg("temporal-guard")
            .args(["server", "start-dev", "--headless", "--ip", "127.0.0.1", "--log-level", "warn"])
            .args(["--port", &port.to_string()]);
        for flag in SERVER_FLAGS {
            cmd.args(["--dynamic-config-value", flag]);
        }
        let mut guard = cmd
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("spawning `temporal server start-dev` (is the Temporal CLI on PATH?)")?;
        let stdin = guard.stdin.take();
        Ok(DevServer { port, guard, stdin })
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        // A line (or EOF) on stdin tells the guard to stop the server and wait for it.
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if matches!(self.guard.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.guard.kill();
        let _ = self.guard.wait();
    }
}

fn key(server: &DevServer) -> ConnectionKey {
    ConnectionKey::from_parts(&server.address(), None, AuthMaterial::Plain)
}

/// Connecting doubles as the readiness probe: the pool's connect runs `GetSystemInfo`.
async fn wait_ready(pool: &ClientPool, server: &DevServer) -> Result<TemporalClient> {
    let started = Instant::now();
    loop {
        match pool
            .get_or_connect(key(server), NAMESPACE, CONTROLLER)
            .await
        {
            Ok(client) => return Ok(client),
            Err(e) if started.elapsed() < Duration::from_secs(120) => {
                tracing::debug!(error = %e, "dev server not ready yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).context("dev server never became ready"),
        }
    }
}

async fn start_worker(
    server: &DevServer,
    deployment: &str,
    build_id: &str,
    task_queue: &str,
) -> Result<WorkerHandle> {
    let handle = worker::spawn(WorkerConfig {
        address: server.address(),
        namespace: NAMESPACE.into(),
        deployment_name: deployment.into(),
        build_id: build_id.into(),
        task_queue: task_queue.into(),
        identity: format!("{deployment}@{build_id}"),
        ..Default::default()
    })?;
    handle.wait_running(DEADLINE).await?;
    Ok(handle)
}

/// Polls `check` until it yields a value or the deadline passes.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if started.elapsed() > DEADLINE {
            bail!("timed out after {DEADLINE:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn wait_listed(
    client: &TemporalClient,
    deployment: &str,
    build_id: &str,
) -> Result<WorkerDeploymentState> {
    eventually(&format!("{build_id} listed in {deployment}"), || async {
        let state = client.describe_deployment(deployment).await?;
        Ok(state.version(build_id).is_some().then_some(state))
    })
    .await
}

async fn wait_queue(
    client: &TemporalClient,
    deployment: &str,
    build_id: &str,
    queue: &str,
) -> Result<VersionDetail> {
    eventually(&format!("{queue} on {deployment}/{build_id}"), || async {
        let detail = client.describe_version(deployment, build_id).await?;
        Ok(detail.filter(|d| d.workflow_task_queues.iter().any(|q| q == queue)))
    })
    .await
}

/// Stops the workers, then removes the deployment and checks that it is gone.
async fn cleanup(
    client: &TemporalClient,
    deployment: &str,
    workers: Vec<WorkerHandle>,
) -> Result<Duration> {
    for w in workers {
        w.stop().await?;
    }
    let started = Instant::now();
    // Deleting a version is refused until the server forgets the stopped workers' pollers
    // (PollerHistoryTTL); each attempt redoes whatever is left, so retrying is safe.
    eventually("cleanup_deployment to succeed", || async {
        match client.cleanup_deployment(deployment).await {
            Ok(()) => Ok(Some(())),
            Err(e) if e.has_active_pollers() => Ok(None),
            Err(e) => Err(e).context("cleanup_deployment"),
        }
    })
    .await?;
    let took = started.elapsed();
    let after = client.describe_deployment(deployment).await?;
    ensure!(
        !after.exists,
        "deployment still described after cleanup: {after:?}"
    );
    // A second cleanup of a deployment that no longer exists is a no-op.
    client
        .cleanup_deployment(deployment)
        .await
        .context("second cleanup_deployment")?;
    Ok(took)
}

fn timed<T>(label: &str, started: Instant, value: T) -> T {
    eprintln!("[timing] {label}: {:?}", started.elapsed());
    value
}

/// One server for the whole binary, owned by this test so it is stopped when the test ends;
/// the two scenarios run side by side on it, as concurrent reconciles would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporal_client_against_dev_server() -> Result<()> {
    let server = DevServer::start()?;
    let (pool, calls) = observed_pool();
    let t = Instant::now();
    let client = wait_ready(&pool, &server).await?;
    eprintln!("[timing] dev server ready: {:?}", t.elapsed());
    let (routing, gates) = tokio::join!(
        routing_tokens_manager_and_cleanup(&server, &pool, &client, &calls),
        gate_workflows_start_pinned_and_are_described(&server, &client),
    );
    routing.context("routing scenario")?;
    gates.context("gate scenario")?;
    Ok(())
}

async fn routing_tokens_manager_and_cleanup(
    server: &DevServer,
    pool: &ClientPool,
    client: &TemporalClient,
    calls: &Calls,
) -> Result<()> {
    let deployment = "it-routing/app";
    let queue = "it-routing-tq";
    assert_eq!(client.identity(), CONTROLLER);
    let w1 = first_version_is_listed_inactive(server, client, deployment, queue).await?;
    let w2 = start_worker(server, deployment, "v2", queue).await?;
    let state = wait_listed(client, deployment, "v2").await?;
    // v2 must be able to take traffic before it can ramp.
    wait_queue(client, deployment, "v2", queue).await?;
    let last_token = chain_routing_tokens(client, deployment, &state.conflict_token).await?;
    client
        .update_version_metadata(deployment, "v2", "0.0.0-it")
        .await?;
    let state = described_after_writes(client, deployment, &last_token).await?;
    claim_manager_and_promote(server, pool, client, deployment, &state.conflict_token).await?;
    let took = cleanup(client, deployment, vec![w1, w2]).await?;
    eprintln!("[timing] cleanup_deployment: {took:?}");
    report_and_check_calls(calls);
    Ok(())
}

/// Before any worker polls the deployment does not exist; once v1 polls, it is listed as
/// Inactive with its task queue, and only versioned pollers are seen.
async fn first_version_is_listed_inactive(
    server: &DevServer,
    client: &TemporalClient,
    deployment: &str,
    queue: &str,
) -> Result<WorkerHandle> {
    let empty = client.describe_deployment(deployment).await?;
    assert_eq!(empty, WorkerDeploymentState::default());
    assert!(client.describe_version(deployment, "v1").await?.is_none());

    let w1 = start_worker(server, deployment, "v1", queue).await?;
    let t = Instant::now();
    let state = timed(
        "worker v1 running → listed",
        t,
        wait_listed(client, deployment, "v1").await?,
    );
    assert!(state.exists);
    assert!(!state.conflict_token.is_empty());
    assert_eq!(
        state.version("v1").map(|v| v.status),
        Some(TemporalVersionStatus::Inactive)
    );
    assert_eq!(state.routing.current_build_id, None);
    let detail = timed(
        "→ task queue in DescribeVersion",
        t,
        wait_queue(client, deployment, "v1", queue).await?,
    );
    assert_eq!(detail.workflow_task_queues, vec![queue.to_string()]);
    // Only versioned pollers exist, so the migration check is negative; no queues is never true.
    assert!(!client.unversioned_pollers_on_all_queues(&detail).await?);
    assert!(
        !client
            .unversioned_pollers_on_all_queues(&VersionDetail::default())
            .await?
    );
    Ok(w1)
}

/// Chains tokens straight from the Set responses, never re-describing in between; each is new,
/// and a stale one is refused as a conflict. Returns the last token.
async fn chain_routing_tokens(
    client: &TemporalClient,
    deployment: &str,
    described: &[u8],
) -> Result<Vec<u8>> {
    let t = Instant::now();
    let t1 = timed(
        "SetCurrent(v1)",
        t,
        client.set_current(deployment, "v1", described).await?,
    );
    let t = Instant::now();
    let t2 = timed(
        "SetRamping(v2, 25)",
        t,
        client.set_ramping(deployment, "v2", 25.0, &t1).await?,
    );
    let t3 = client.set_ramping(deployment, "v2", 50.0, &t2).await?;
    let t4 = client.clear_ramp(deployment, &t3).await?;
    let t5 = client.set_ramping(deployment, "v2", 10.0, &t4).await?;
    let tokens: [&[u8]; 6] = [described, &t1, &t2, &t3, &t4, &t5];
    for (i, a) in tokens.iter().enumerate() {
        for b in &tokens[i + 1..] {
            assert_ne!(a, b, "every routing change yields a new token");
        }
    }

    // A stale token is refused as a conflict, not as anything else.
    let stale = client
        .set_ramping(deployment, "v2", 75.0, &t2)
        .await
        .unwrap_err();
    assert!(stale.is_conflict(), "{stale:?}");
    assert_eq!(stale.manager_conflict(), None);
    assert!(!stale.is_not_found());
    Ok(t5)
}

/// Describe after the writes: the last Set response's token is current, v1 Current, v2
/// Ramping at 10 %.
async fn described_after_writes(
    client: &TemporalClient,
    deployment: &str,
    last_token: &[u8],
) -> Result<WorkerDeploymentState> {
    let t = Instant::now();
    let state = timed(
        "Describe after writes",
        t,
        client.describe_deployment(deployment).await?,
    );
    assert_eq!(
        state.conflict_token, last_token,
        "the last Set response's token is the current one"
    );
    assert_eq!(state.routing.current_build_id.as_deref(), Some("v1"));
    assert_eq!(state.routing.ramping_build_id.as_deref(), Some("v2"));
    assert_eq!(state.routing.ramp_percentage, 10.0);
    assert!(state.routing.ramp_percentage_changed_at.is_some());
    assert!(state.routing.ramping_changed_at.is_some());
    assert_eq!(
        state.version("v1").map(|v| v.status),
        Some(TemporalVersionStatus::Current)
    );
    assert_eq!(
        state.version("v2").map(|v| v.status),
        Some(TemporalVersionStatus::Ramping)
    );
    assert_eq!(state.last_modifier_identity, CONTROLLER);
    Ok(state)
}

/// Claims the manager role; another identity is then refused and told who the owner is. The
/// owner promotes v2: the ramp ends and v1 starts draining.
async fn claim_manager_and_promote(
    server: &DevServer,
    pool: &ClientPool,
    client: &TemporalClient,
    deployment: &str,
    token: &[u8],
) -> Result<()> {
    let t6 = client.claim_manager(deployment, token).await?;
    let intruder = pool
        .get_or_connect(key(server), NAMESPACE, "it-intruder")
        .await?;
    assert_eq!(
        pool.len(),
        1,
        "same endpoint and namespace share one connection"
    );
    let refused = intruder
        .set_current(deployment, "v2", &t6)
        .await
        .unwrap_err();
    assert_eq!(
        refused.manager_conflict().as_deref(),
        Some(CONTROLLER),
        "{refused:?}"
    );
    assert!(!refused.is_conflict());

    let t = Instant::now();
    timed(
        "SetCurrent(v2)",
        t,
        client.set_current(deployment, "v2", &t6).await?,
    );
    let state = eventually("v1 draining after promotion", || async {
        let s = client.describe_deployment(deployment).await?;
        let draining = s.version("v1").map(|v| v.status) == Some(TemporalVersionStatus::Draining);
        Ok(draining.then_some(s))
    })
    .await?;
    assert_eq!(state.manager_identity, CONTROLLER);
    assert_eq!(state.routing.current_build_id.as_deref(), Some("v2"));
    assert_eq!(state.routing.ramping_build_id, None);
    assert_eq!(
        state.version("v2").map(|v| v.status),
        Some(TemporalVersionStatus::Current)
    );
    Ok(())
}

/// Prints the latencies of the routing calls and checks every outcome the scenario provoked
/// reached the wire.
fn report_and_check_calls(calls: &Calls) {
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for method in [
        "DescribeWorkerDeployment",
        "SetWorkerDeploymentRampingVersion",
        "SetWorkerDeploymentCurrentVersion",
    ] {
        let mut ok: Vec<Duration> = calls
            .iter()
            .filter(|(m, c, _)| *m == method && *c == "OK")
            .map(|(_, _, d)| *d)
            .collect();
        ok.sort();
        if let (Some(min), Some(max)) = (ok.first(), ok.last()) {
            eprintln!(
                "[timing] {method}: n={} min={min:?} p50={:?} max={max:?}",
                ok.len(),
                ok[ok.len() / 2]
            );
        }
    }
    let seen = |method: &str, code: &str| calls.iter().any(|(m, c, _)| *m == method && *c == code);
    assert!(seen("Connect", "OK"));
    assert!(seen("DescribeWorkerDeployment", "NotFound"));
    assert!(seen("DescribeWorkerDeployment", "OK"));
    assert!(seen(
        "SetWorkerDeploymentRampingVersion",
        "FailedPrecondition"
    ));
    assert!(seen(
        "SetWorkerDeploymentCurrentVersion",
        "FailedPrecondition"
    ));
    assert!(seen("SetWorkerDeploymentManager", "OK"));
    assert!(seen("DeleteWorkerDeployment", "OK"));
}

async fn gate_workflows_start_pinned_and_are_described(
    server: &DevServer,
    client: &TemporalClient,
) -> Result<()> {
    let deployment = "it-gates/app";
    let queue = "it-gates-tq";

    let w1 = start_worker(server, deployment, "v1", queue).await?;
    let w2 = start_worker(server, deployment, "v2", queue).await?;
    wait_listed(client, deployment, "v1").await?;
    wait_listed(client, deployment, "v2").await?;
    let detail = wait_queue(client, deployment, "v1", queue).await?;
    wait_queue(client, deployment, "v2", queue).await?;

    // No gate yet: nothing to report (NotFound is skipped, not an error).
    assert!(
        client
            .describe_gates(deployment, "v1", &detail.workflow_task_queues)
            .await?
            .is_empty()
    );

    // v1's gate waits for a signal that never comes, so it stays Running. Neither version is
    // current: only the pinned override can route these workflows to a worker.
    let waiting = serde_json::json!({ "waitForSignal": true });
    let run1 = client
        .start_gate(deployment, "v1", queue, "gate", Some(&waiting))
        .await?;
    assert!(!run1.is_empty());
    let again = client
        .start_gate(deployment, "v1", queue, "gate", Some(&waiting))
        .await?;
    assert_eq!(again, run1, "a gate is started once per build and queue");

    // v2's gate succeeds at once (empty input) — proving it ran on the pinned version's worker.
    let run2 = client
        .start_gate(deployment, "v2", queue, "gate", None)
        .await?;
    let t = Instant::now();
    let done = eventually("v2 gate completed", || async {
        let gates = client
            .describe_gates(deployment, "v2", &[queue.to_string()])
            .await?;
        Ok(gates
            .into_iter()
            .find(|g| g.status == GateWorkflowStatus::Completed))
    })
    .await?;
    eprintln!(
        "[timing] gate start → Completed observed: {:?}",
        t.elapsed()
    );
    assert_eq!(done.run_id, run2);
    assert_eq!(
        done.workflow_id,
        TemporalClient::gate_workflow_id(deployment, "v2", queue)
    );
    assert_eq!(done.task_queue, queue);
    // Re-starting a finished gate never re-runs it (REJECT_DUPLICATE); the old run is reported.
    assert_eq!(
        client
            .start_gate(deployment, "v2", queue, "gate", None)
            .await?,
        run2
    );

    let gates = client
        .describe_gates(
            deployment,
            "v1",
            &[queue.to_string(), "it-gates-no-such-queue".to_string()],
        )
        .await?;
    assert_eq!(gates.len(), 1, "{gates:?}");
    assert_eq!(
        gates[0].workflow_id,
        format!("test-{deployment}:v1-{queue}")
    );
    assert_eq!(gates[0].run_id, run1);
    assert_eq!(gates[0].task_queue, queue);
    assert_eq!(gates[0].status, GateWorkflowStatus::Running);

    // Visibility counts the running pinned gate on v1 (with and without the pinned-only
    // filter) and nothing open on v2: the query's search attributes and values are ones the
    // server knows (a wrong name is InvalidArgument, a wrong value counts 0).
    for pinned_only in [false, true] {
        let n = eventually("v1's running gate in visibility", || async {
            let n = client
                .count_open_workflows(deployment, "v1", pinned_only)
                .await?;
            Ok((n >= 1).then_some(n))
        })
        .await?;
        assert_eq!(n, 1, "pinned_only={pinned_only}");
        // v2's gate completed above; visibility records the close a moment later.
        eventually("v2's completed gate closed in visibility", || async {
            let n = client
                .count_open_workflows(deployment, "v2", pinned_only)
                .await?;
            Ok((n == 0).then_some(()))
        })
        .await?;
    }

    cleanup(client, deployment, vec![w1, w2]).await?;
    Ok(())
}
