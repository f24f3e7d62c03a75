//! Smoke test of the Go controller rig ([`test_harness::go_controller`]): the real Go
//! temporal-worker-controller v1.8.1, on a fresh control plane with only its CRDs, a fresh
//! Temporal dev server and the kubelet stand-in, rolls out a `WorkerDeployment` (AllAtOnce)
//! written its way until its status and Temporal both show the version Current.
//!
//! This is the first half of the take-over test (issue 25) and the peer's side of the benchmark
//! (issue 27); it prints what it measured.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::json;
use test_harness::go_controller::{self, GoRig};

/// Generous: a cold rig start on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(180);
const TAG: &str = "v1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_controller_rolls_out_all_at_once_until_current() -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
    let mut rig = GoRig::start().await?;
    eprintln!(
        "rig: Go controller {} ({}), timings {:?}",
        rig.build.version,
        rig.build.binary.display(),
        rig.timings
    );
    let result = roll_out(&rig).await;
    if result.is_err() {
        eprintln!("Go controller log tail:\n{}", rig.controller_log_tail());
    }
    result?;
    stop(&mut rig)
}

/// The take-over test stops it this way before ours starts: gracefully, and the process is gone.
fn stop(rig: &mut GoRig) -> Result<()> {
    let mut controller = rig.controller.take().context("controller already taken")?;
    let pid = controller.pid();
    let t = Instant::now();
    controller.stop();
    let stopped = t.elapsed();
    ensure!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the Go controller (pid {pid}) still runs after stop()"
    );
    eprintln!("go-rig: stopped (SIGTERM) in {stopped:?}");
    Ok(())
}

async fn roll_out(rig: &GoRig) -> Result<()> {
    let case = rig.case("go-rig").await?;
    let task_queue = "go-rig-tq";
    let wd = go_controller::worker_deployment_manifest(
        "hello",
        &case.connection,
        &case.temporal_namespace,
        &format!("registry.example/worker:{TAG}"),
        task_queue,
        json!({"strategy": "AllAtOnce"}),
    );
    let applied = Instant::now();
    go_controller::apply(&rig.client, &case.namespace, &wd).await?;

    let build_id = go_controller::wait_current_in_status(
        &rig.client,
        &case.namespace,
        "hello",
        None,
        DEADLINE,
    )
    .await?;
    let status_current = applied.elapsed();
    ensure!(
        go_controller::is_go_build_id_for_tag(&build_id, TAG),
        "build ID {build_id:?} is not the Go controller's `<tag>-<4 safe-encoded chars>`"
    );

    let conn = rig.temporal.connect("go-rig-observer").await?;
    let deployment = case.temporal_deployment("hello");
    let routing = go_controller::wait_current_in_temporal(
        &conn,
        &case.temporal_namespace,
        &deployment,
        &build_id,
        DEADLINE,
    )
    .await?;
    let temporal_current = applied.elapsed();
    // Its routing changes carry `CONTROLLER_IDENTITY/<UID of POD_NAMESPACE>`: the identity shape
    // the take-over has to recognise.
    let identity = go_controller::temporal_identity(&rig.client, &rig.options).await?;
    ensure!(
        routing.last_modifier_identity == identity,
        "last modifier {:?}, expected the Go controller's {identity:?}",
        routing.last_modifier_identity
    );
    ensure!(
        routing.build_ids == vec![build_id.clone()],
        "Temporal lists {:?}, expected only {build_id}",
        routing.build_ids
    );
    let workers = rig
        .kubelet
        .running_workers(&case.namespace, &format!("hello-{build_id}"));
    ensure!(
        workers == 1,
        "{workers} workers run hello-{build_id}, expected 1"
    );
    let rss = rss_kib(rig).context("reading the Go controller's RSS")?;

    eprintln!(
        "go-rig: build ID {build_id}; controller ready {:?} after spawn; status Current {:?} and \
         Temporal Current {:?} after apply; manager identity {:?}; RSS {} KiB",
        rig.timings.controller_ready,
        status_current,
        temporal_current,
        routing.manager_identity,
        rss
    );
    Ok(())
}

/// The controller's resident set (`VmRSS` in `/proc/<pid>/status`).
fn rss_kib(rig: &GoRig) -> Result<u64> {
    let pid = rig.controller.as_ref().context("controller stopped")?.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS line")
}
