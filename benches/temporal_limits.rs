//! Where a real Temporal dev server starts refusing the calls the controller makes: for each
//! method, requests are sent at a fixed rate (spread evenly, many in flight) for a few seconds
//! on a connection with the SDK's retries turned off, and the `ResourceExhausted` answers are
//! counted. The controller's `--temporal-qps*` defaults are chosen below the first refusing
//! rate (see `src/temporal/budget.rs`).
//!
//! Run: `cargo bench --bench temporal_limits --profile dev` (`cargo test --benches` only tries
//! the slowest rate) (the server does the work, so an
//! unoptimised client measures the same limits).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::{Code, Request};
use temporalio_client::{Connection, ConnectionOptions, RetryOptions};
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    CountWorkflowExecutionsRequest, DescribeTaskQueueRequest, DescribeWorkerDeploymentRequest,
};
use test_harness::temporal_server::DevServer;

const NAMESPACE: &str = "limits";
const LIVE_DEPLOYMENT: &str = "limits/live";
const RATES: &[u64] = &[10, 25, 50, 100, 200, 400];
const SECONDS_PER_RATE: u64 = 4;

#[derive(Clone, Copy, Debug)]
enum Method {
    /// Of deployments nobody polled yet (NotFound), spread over 50 names.
    DescribeWorkerDeployment,
    /// Of one deployment a real worker registered: the per-deployment limit.
    DescribeOneLiveDeployment,
    CountWorkflowExecutions,
    DescribeTaskQueue,
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    exhausted: AtomicU64,
    other: AtomicU64,
}

async fn call(conn: Connection, method: Method, i: u64) -> Result<(), Code> {
    let ns = NAMESPACE.to_string();
    let res = match method {
        Method::DescribeWorkerDeployment => conn
            .clone()
            .describe_worker_deployment(Request::new(DescribeWorkerDeploymentRequest {
                namespace: ns,
                deployment_name: format!("limits/probe-{}", i % 50),
            }))
            .await
            .map(|_| ()),
        Method::DescribeOneLiveDeployment => conn
            .clone()
            .describe_worker_deployment(Request::new(DescribeWorkerDeploymentRequest {
                namespace: ns,
                deployment_name: LIVE_DEPLOYMENT.into(),
            }))
            .await
            .map(|_| ()),
        Method::CountWorkflowExecutions => conn
            .clone()
            .count_workflow_executions(Request::new(CountWorkflowExecutionsRequest {
                namespace: ns,
                query: "ExecutionStatus = 'Running'".into(),
            }))
            .await
            .map(|_| ()),
        Method::DescribeTaskQueue => {
            #[allow(deprecated)]
            let req = DescribeTaskQueueRequest {
                namespace: ns,
                task_queue: Some(TaskQueue {
                    name: format!("probe-{}", i % 50),
                    ..Default::default()
                }),
                task_queue_type: TaskQueueType::Workflow as i32,
                ..Default::default()
            };
            conn.clone()
                .describe_task_queue(Request::new(req))
                .await
                .map(|_| ())
        }
    };
    match res {
        Ok(()) => Ok(()),
        // A deployment nobody polled is NotFound: answered, not refused.
        Err(s) if s.code() == Code::NotFound => Ok(()),
        Err(s) => Err(s.code()),
    }
}

async fn run_rate(conn: &Connection, method: Method, rate: u64) -> (u64, u64, u64, f64) {
    let tally = Arc::new(Tally::default());
    let total = rate * SECONDS_PER_RATE;
    let gap = Duration::from_secs_f64(1.0 / rate as f64);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        tokio::time::sleep_until((start + gap * i as u32).into()).await;
        let (conn, tally) = (conn.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            let counter = match call(conn, method, i).await {
                Ok(()) => &tally.ok,
                Err(Code::ResourceExhausted) => &tally.exhausted,
                Err(_) => &tally.other,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let achieved = total as f64 / start.elapsed().as_secs_f64();
    (
        tally.ok.load(Ordering::Relaxed),
        tally.exhausted.load(Ordering::Relaxed),
        tally.other.load(Ordering::Relaxed),
        achieved,
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = DevServer::start().await?;
    server.create_namespace(NAMESPACE).await?;
    let worker = test_harness::worker::spawn(test_harness::worker::WorkerConfig {
        address: server.address(),
        namespace: NAMESPACE.into(),
        deployment_name: LIVE_DEPLOYMENT.into(),
        build_id: "v1".into(),
        task_queue: "live".into(),
        identity: "limits-worker".into(),
        tls: false,
        tls_server_name: None,
        client_cert_pem: None,
        client_key_pem: None,
        api_key: None,
        server_ca_pem: None,
        trusted_ca_pem: None,
        flaky_fails: false,
        activities_per_second: None,
        unversioned: false,
    })?;
    worker.wait_running(Duration::from_secs(60)).await?;
    let conn = Connection::connect(
        ConnectionOptions::new(server.url()?)
            .identity("limits-probe".to_string())
            .retry_options(
                RetryOptions::builder()
                    .max_retries(0)
                    .max_elapsed_time(Some(Duration::ZERO))
                    .build(),
            )
            .build(),
    )
    .await?;
    println!("method                     rate/s  achieved/s     ok  exhausted  other");
    wait_registered(&conn).await?;
    for method in [
        Method::DescribeWorkerDeployment,
        Method::DescribeOneLiveDeployment,
        Method::CountWorkflowExecutions,
        Method::DescribeTaskQueue,
    ] {
        // `cargo test --benches` runs this binary without `--bench`: one slow rate, so the
        // probe is exercised without hammering the server for minutes.
        let rates = if std::env::args().any(|a| a == "--bench") {
            RATES
        } else {
            &RATES[..1]
        };
        for &rate in rates {
            let (ok, exhausted, other, achieved) = run_rate(&conn, method, rate).await;
            println!(
                "{:<26} {rate:>6} {achieved:>11.1} {ok:>6} {exhausted:>10} {other:>6}",
                format!("{method:?}")
            );
            // Let the server's token buckets refill before the next rate.
            tokio::time::sleep(Duration::from_secs(2)).await;
            if exhausted > total_of(rate) / 2 {
                break;
            }
        }
    }
    Ok(())
}

/// Until the live worker's deployment is known to Temporal (bounded).
async fn wait_registered(conn: &Connection) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !registered(conn).await {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the live worker never registered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

async fn registered(conn: &Connection) -> bool {
    conn.clone()
        .describe_worker_deployment(Request::new(DescribeWorkerDeploymentRequest {
            namespace: NAMESPACE.into(),
            deployment_name: LIVE_DEPLOYMENT.into(),
        }))
        .await
        .is_ok()
}

fn total_of(rate: u64) -> u64 {
    rate * SECONDS_PER_RATE
}
