//! A worker built from controller-style env registers as a versioned poller in a real Temporal
//! dev server and runs the `hello`, `gate` and `wait` workflows.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde_json::json;
use temporalio_client::errors::WorkflowGetResultError;
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_client::{Client, Connection};
use temporalio_client::{WorkflowGetResultOptions, WorkflowSignalOptions, WorkflowStartOptions};
use temporalio_common::data_converters::{PayloadConverter, RawValue};
use temporalio_common::protos::temporal::api::common::v1::WorkflowExecution;
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeWorkflowExecutionRequest;
use test_harness::names::unique;
use test_harness::worker::{
    self, GateWorkflow, HelloWorkflow, WaitWorkflow, WorkerConfig, WorkerHandle, WorkerState,
};
use test_harness::{observe, temporal_server};

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn input(value: serde_json::Value) -> RawValue {
    RawValue::from_value(&value, &PayloadConverter::default())
}

#[test]
fn config_from_env_requires_every_variable() {
    let full = [
        ("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
        ("TEMPORAL_NAMESPACE", "ns"),
        ("TEMPORAL_DEPLOYMENT_NAME", "k8s-ns/twd"),
        ("TEMPORAL_WORKER_BUILD_ID", "v1-abc"),
        ("TEMPORAL_TASK_QUEUE", "tq"),
        ("UNRELATED", "x"),
    ];
    let cfg = WorkerConfig::from_env(&env(&full)).expect("complete env");
    assert_eq!(cfg.address, "127.0.0.1:7233");
    assert_eq!(cfg.namespace, "ns");
    assert_eq!(cfg.deployment_name, "k8s-ns/twd");
    assert_eq!(cfg.build_id, "v1-abc");
    assert_eq!(cfg.task_queue, "tq");
    assert!(!cfg.identity.is_empty());
    for missing in 0..5 {
        let partial: Vec<_> = full
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != missing)
            .map(|(_, p)| *p)
            .collect();
        let err = WorkerConfig::from_env(&env(&partial)).expect_err("a variable is missing");
        assert!(err.to_string().contains(full[missing].0), "{err}");
    }
    let mut blank = env(&full);
    blank.insert("TEMPORAL_NAMESPACE".into(), "  ".into());
    assert!(WorkerConfig::from_env(&blank).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_worker_registers_and_runs_workflows() -> Result<()> {
    let t = Instant::now();
    let server = temporal_server::shared().await?;
    eprintln!(
        "dev server ready after {:?} at {}",
        t.elapsed(),
        server.address()
    );
    let ns = unique("harness-worker");
    let (handle, w) = start_a_worker_and_wait_until_it_polls(server, &ns).await?;
    observe::set_current(&w.conn, &ns, &w.deployment, "v1", "harness-test").await?;
    let client = server.client(&ns, "harness-test").await?;
    check_hello_round_trip_pinned_to_v1(&client, &w, &ns).await?;
    check_gates_apply_their_outcome(&client, &w.task_queue).await?;
    check_a_held_gate_waits_for_its_signal(&client, &w.task_queue).await?;
    check_wait_finishes_on_its_signal(&client, &w.task_queue).await?;
    let t = Instant::now();
    handle.stop().await?;
    eprintln!("worker stopped in {:?}", t.elapsed());
    Ok(())
}

/// Where a started worker polls, and a connection to its server.
struct Polling {
    deployment: String,
    task_queue: String,
    conn: Connection,
}

/// Starts worker `v1` from the env the controller injects and waits until Temporal lists its
/// version and sees it poll.
async fn start_a_worker_and_wait_until_it_polls(
    server: &temporal_server::DevServer,
    ns: &str,
) -> Result<(WorkerHandle, Polling)> {
    let t = Instant::now();
    server.create_namespace(ns).await?;
    eprintln!("namespace usable after {:?}", t.elapsed());

    let deployment = format!("{}/hello", unique("k8s-ns"));
    let task_queue = unique("tq");
    let cfg = WorkerConfig::from_env(&env(&[
        ("TEMPORAL_ADDRESS", &server.address()),
        ("TEMPORAL_NAMESPACE", ns),
        ("TEMPORAL_DEPLOYMENT_NAME", &deployment),
        ("TEMPORAL_WORKER_BUILD_ID", "v1"),
        ("TEMPORAL_TASK_QUEUE", &task_queue),
    ]))?;
    let identity = cfg.identity.clone();
    let t = Instant::now();
    let handle = worker::spawn(cfg)?;
    handle.wait_running(Duration::from_secs(30)).await?;
    eprintln!("worker running after {:?}", t.elapsed());
    assert_eq!(handle.state(), WorkerState::Running);

    let conn = server.connect("harness-test").await?;
    let listed =
        observe::wait_version_listed(&conn, ns, &deployment, "v1", Duration::from_secs(30)).await?;
    eprintln!("version listed {listed:?} after running");
    let polled = observe::wait_poller(
        &conn,
        ns,
        &task_queue,
        &deployment,
        "v1",
        Some(&identity),
        Duration::from_secs(30),
    )
    .await?;
    eprintln!("poller visible {polled:?} after that");
    Ok((
        handle,
        Polling {
            deployment,
            task_queue,
            conn,
        },
    ))
}

fn opts(task_queue: &str, id: &str) -> WorkflowStartOptions {
    WorkflowStartOptions::new(task_queue.to_string(), id.to_string()).build()
}

fn result_opts() -> WorkflowGetResultOptions {
    WorkflowGetResultOptions::default()
}

/// Hello answers, and the worker's default behaviour is Pinned, so the run is pinned to v1.
async fn check_hello_round_trip_pinned_to_v1(client: &Client, w: &Polling, ns: &str) -> Result<()> {
    let t = Instant::now();
    let hello = client
        .start_workflow(
            HelloWorkflow::run,
            input(json!("tester")),
            opts(&w.task_queue, &unique("hello")),
        )
        .await?;
    let greeting =
        tokio::time::timeout(Duration::from_secs(30), hello.get_result(result_opts())).await??;
    assert_eq!(greeting, "hello tester");
    eprintln!("hello round trip {:?}", t.elapsed());

    let mut svc = w.conn.clone();
    let described = svc
        .describe_workflow_execution(Request::new(DescribeWorkflowExecutionRequest {
            namespace: ns.to_string(),
            execution: Some(WorkflowExecution {
                workflow_id: hello.info().workflow_id.clone(),
                run_id: String::new(),
            }),
        }))
        .await?
        .into_inner();
    let versioning = described
        .workflow_execution_info
        .and_then(|i| i.versioning_info)
        .context("no versioning info")?;
    assert_eq!(
        versioning.deployment_version.map(|v| v.build_id).as_deref(),
        Some("v1")
    );
    assert_eq!(
        versioning.behavior,
        temporalio_common::protos::temporal::api::enums::v1::VersioningBehavior::Pinned as i32
    );
    Ok(())
}

/// A gate fails or passes as its input says; with no input at all (the controller may start
/// a gate without one) it passes.
async fn check_gates_apply_their_outcome(client: &Client, task_queue: &str) -> Result<()> {
    let opts = |id: &str| opts(task_queue, id);
    let fail = client
        .start_workflow(
            GateWorkflow::run,
            input(json!({"outcome": "fail"})),
            opts(&unique("gate-fail")),
        )
        .await?;
    let failed =
        tokio::time::timeout(Duration::from_secs(30), fail.get_result(result_opts())).await?;
    assert!(
        matches!(failed, Err(WorkflowGetResultError::Failed(_))),
        "gate with outcome fail: {failed:?}"
    );

    let pass = client
        .start_workflow(
            GateWorkflow::run,
            input(json!({"outcome": "succeed"})),
            opts(&unique("gate-ok")),
        )
        .await?;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(30), pass.get_result(result_opts())).await??,
        "gate passed"
    );

    // No input at all: the controller may start a gate without one.
    let bare = client
        .start_workflow(
            GateWorkflow::run,
            RawValue::new(vec![]),
            opts(&unique("gate-bare")),
        )
        .await?;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(30), bare.get_result(result_opts())).await??,
        "gate passed"
    );
    Ok(())
}

/// A gate told to wait stays open until signalled, then applies its outcome.
async fn check_a_held_gate_waits_for_its_signal(client: &Client, task_queue: &str) -> Result<()> {
    let opts = |id: &str| opts(task_queue, id);
    let held = client
        .start_workflow(
            GateWorkflow::run,
            input(json!({"outcome": "fail", "waitForSignal": true})),
            opts(&unique("gate-held")),
        )
        .await?;
    let early =
        tokio::time::timeout(Duration::from_millis(1500), held.get_result(result_opts())).await;
    assert!(
        early.is_err(),
        "held gate finished before its signal: {early:?}"
    );
    held.signal(
        GateWorkflow::finish,
        RawValue::new(vec![]),
        WorkflowSignalOptions::default(),
    )
    .await?;
    let held_result =
        tokio::time::timeout(Duration::from_secs(30), held.get_result(result_opts())).await?;
    assert!(
        matches!(held_result, Err(WorkflowGetResultError::Failed(_))),
        "{held_result:?}"
    );
    Ok(())
}

async fn check_wait_finishes_on_its_signal(client: &Client, task_queue: &str) -> Result<()> {
    let opts = |id: &str| opts(task_queue, id);
    let wait = client
        .start_workflow(
            WaitWorkflow::run,
            RawValue::new(vec![]),
            opts(&unique("wait")),
        )
        .await?;
    let early =
        tokio::time::timeout(Duration::from_millis(500), wait.get_result(result_opts())).await;
    assert!(early.is_err(), "wait finished before its signal: {early:?}");
    wait.signal(
        WaitWorkflow::finish,
        RawValue::new(vec![]),
        WorkflowSignalOptions::default(),
    )
    .await?;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(30), wait.get_result(result_opts())).await??,
        "finished"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_with_unreachable_address_fails_instead_of_hanging() -> Result<()> {
    // Port 1 on loopback refuses connections.
    let cfg = WorkerConfig::from_env(&env(&[
        ("TEMPORAL_ADDRESS", "127.0.0.1:1"),
        ("TEMPORAL_NAMESPACE", "default"),
        ("TEMPORAL_DEPLOYMENT_NAME", "k8s-ns/nowhere"),
        ("TEMPORAL_WORKER_BUILD_ID", "v1"),
        ("TEMPORAL_TASK_QUEUE", "tq"),
    ]))?;
    let handle = worker::spawn(cfg)?;
    let err = handle
        .wait_running(Duration::from_secs(60))
        .await
        .expect_err("nothing listens on port 1");
    assert!(
        matches!(handle.state(), WorkerState::Failed(_)),
        "{err:#}; state {:?}",
        handle.state()
    );
    assert!(
        handle.stop().await.is_err(),
        "a failed worker reports its failure on stop"
    );
    Ok(())
}
