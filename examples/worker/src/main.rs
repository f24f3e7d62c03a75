//! The quickstart's sample worker (docs/quickstart.md): a Temporal worker built with the Rust SDK
//! that takes part in worker deployment versioning, configured only from its environment, as the
//! controller starts it:
//!
//! - `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE` (and `TEMPORAL_API_KEY`, `TEMPORAL_TLS*` when the
//!   Connection has credentials): the SDK's environment configuration, which the controller sets
//!   from the WorkerDeployment's Connection;
//! - `TEMPORAL_DEPLOYMENT_NAME` and `TEMPORAL_WORKER_BUILD_ID`: the worker deployment version this
//!   process polls as, set by the controller for each version's Deployment;
//! - `TEMPORAL_TASK_QUEUE`: set by you in the pod template.
//!
//! New workflows are pinned to the version they start on (the default versioning behaviour
//! `Pinned`), so the controller can ramp a new version in while old workflows finish on the old.
//! On SIGTERM (a Pod being deleted) the worker stops polling and finishes its tasks, then exits.
//!
//! It takes no arguments. Its image comes from the controller's packaging
//! (`tools/image/package.sh --name hello-worker --cmd '[]'`); an image packaged without
//! `--cmd '[]'` passes the controller's default `run`, which is accepted too.

mod workflows;

use anyhow::Context as _;
use temporalio_client::envconfig::LoadClientConfigProfileOptions;
use temporalio_client::{Client, ClientOptions, Connection};
use temporalio_common::worker::{
    VersioningBehavior, WorkerDeploymentOptions, WorkerDeploymentVersion,
};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};
use tokio::signal::unix::{SignalKind, signal};

use workflows::{Greetings, HelloWorkflow};

#[derive(Debug, thiserror::Error)]
enum ConfigError {
    #[error("env var {0} is missing or empty (the controller sets it in every versioned Pod)")]
    Missing(&'static str),
    #[error("env var TEMPORAL_TASK_QUEUE is missing or empty: set it in the pod template")]
    NoTaskQueue,
    #[error("unexpected arguments {0:?}: hello-worker takes none (or `run`)")]
    Arguments(Vec<String>),
}

/// What the controller and the pod template tell this worker, besides the connection.
struct Version {
    deployment_name: String,
    build_id: String,
    task_queue: String,
}

fn env(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Version {
    fn from_env() -> Result<Version, ConfigError> {
        Ok(Version {
            deployment_name: env("TEMPORAL_DEPLOYMENT_NAME")
                .ok_or(ConfigError::Missing("TEMPORAL_DEPLOYMENT_NAME"))?,
            build_id: env("TEMPORAL_WORKER_BUILD_ID")
                .ok_or(ConfigError::Missing("TEMPORAL_WORKER_BUILD_ID"))?,
            task_queue: env("TEMPORAL_TASK_QUEUE").ok_or(ConfigError::NoTaskQueue)?,
        })
    }
}

fn worker_options(v: &Version) -> anyhow::Result<WorkerOptions> {
    let version = WorkerDeploymentVersion::builder()
        .deployment_name(v.deployment_name.clone())
        .build_id(v.build_id.clone())
        .build();
    Ok(WorkerOptions::new(v.task_queue.clone())
        .deployment_options(
            WorkerDeploymentOptions::new(version)
                .use_worker_versioning(true)
                .default_versioning_behavior(VersioningBehavior::Pinned)
                .build(),
        )
        .register_workflow::<HelloWorkflow>()?
        .register_activities(Greetings)
        .build())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(args.is_empty() || args == ["run"]) {
        return Err(ConfigError::Arguments(args).into());
    }
    let version = Version::from_env()?;
    let (conn_opts, client_opts) =
        ClientOptions::load_from_config(LoadClientConfigProfileOptions::default())
            // The SDK's error is not Sync, so anyhow cannot wrap it: keep its message.
            .map_err(|e| {
                anyhow::anyhow!("reading the Temporal connection from the environment: {e}")
            })?;
    let runtime = Runtime::from_current_tokio(Default::default())?;
    let connection = Connection::connect(conn_opts)
        .await
        .context("connecting to Temporal")?;
    let client = Client::new(connection, client_opts)?;
    let mut worker = Worker::new(&runtime, client, worker_options(&version)?)?;
    let shutdown = worker.shutdown_handle();
    let mut term = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        shutdown();
    });
    println!(
        "hello-worker: polling task queue {} as {}:{}",
        version.task_queue, version.deployment_name, version.build_id
    );
    worker.run().await.context("worker stopped with an error")?;
    println!("hello-worker: stopped");
    Ok(())
}
