//! One real Temporal worker (official Rust SDK, worker versioning on, default behaviour
//! Pinned), configured only from the env vars the controller injects into a pod template.
//!
//! The server CA follows the SDKs' environment configuration (temporalio-common `envconfig`,
//! converted by temporalio-client into `TlsOptions::server_root_ca_cert`):
//! `TEMPORAL_TLS_SERVER_CA_CERT_PATH` (a file, which must be mounted) or
//! `TEMPORAL_TLS_SERVER_CA_CERT_DATA` (PEM), not both; either turns TLS on, and the CA
//! **replaces** the trust store the worker would otherwise use (the image's,
//! [`WorkerConfig::trusted_ca_pem`]), as the SDK's setting replaces the system roots.
//!
//! `Worker::run` is `!Send`, so a worker started by [`spawn`] lives on its own OS thread with its
//! own current-thread tokio runtime, SDK runtime and connection (a process of its own, as far as
//! a test can tell); [`crate::worker_host::WorkerHost`] instead runs many workers on one shared
//! runtime and a few shared connections. Either way the [`WorkerHandle`] talks to the worker
//! through watch channels only.

use std::collections::BTreeMap;
use std::str::FromStr as _;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result};
use temporalio_client::{
    Client, ClientOptions, ClientTlsOptions, Connection, ConnectionOptions, TlsOptions, Url,
};
use temporalio_common::data_converters::RawValue;
use temporalio_common::worker::{
    VersioningBehavior, WorkerDeploymentOptions, WorkerDeploymentVersion,
};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};
use tokio::sync::watch;

pub use workflows::{
    FailingFlakyWorkflow, FanoutWorkflow, FlakyInput, FlakyWorkflow, GateInput, GateWorkflow,
    HelloWorkflow, TestActivities, UpgradableWorkflow, WaitWorkflow,
};

/// Env var names the controller injects (`src/api/mod.rs`, `ENV_*`) plus the task queue the user sets.
pub const ENV_ADDRESS: &str = "TEMPORAL_ADDRESS";
pub const ENV_NAMESPACE: &str = "TEMPORAL_NAMESPACE";
pub const ENV_DEPLOYMENT_NAME: &str = "TEMPORAL_DEPLOYMENT_NAME";
pub const ENV_BUILD_ID: &str = "TEMPORAL_WORKER_BUILD_ID";
pub const ENV_TASK_QUEUE: &str = "TEMPORAL_TASK_QUEUE";
/// `true` when the worker must dial TLS.
pub const ENV_TLS: &str = "TEMPORAL_TLS";
/// Name to verify the server certificate against (and to send as SNI / `:authority`).
pub const ENV_TLS_SERVER_NAME: &str = "TEMPORAL_TLS_SERVER_NAME";
/// Path of the mounted mTLS client certificate (PEM).
pub const ENV_TLS_CLIENT_CERT_PATH: &str = "TEMPORAL_TLS_CLIENT_CERT_PATH";
/// Path of the mounted mTLS client key (PEM).
pub const ENV_TLS_CLIENT_KEY_PATH: &str = "TEMPORAL_TLS_CLIENT_KEY_PATH";
/// API key, sent as `authorization: Bearer <key>`.
pub const ENV_API_KEY: &str = "TEMPORAL_API_KEY";
/// Path of the server CA (PEM) the worker verifies the frontend with (envconfig).
pub const ENV_TLS_SERVER_CA_CERT_PATH: &str = "TEMPORAL_TLS_SERVER_CA_CERT_PATH";
/// The server CA itself (PEM), instead of a path (envconfig).
pub const ENV_TLS_SERVER_CA_CERT_DATA: &str = "TEMPORAL_TLS_SERVER_CA_CERT_DATA";
/// Test-only: makes this worker's `flaky` workflow fail as its input asks ([`FlakyInput`]).
pub const ENV_FLAKY_FAILS: &str = "TEST_FLAKY_FAILS";
/// Test-only: the most activities per second this worker runs (the SDK's
/// `max_worker_activities_per_second`), so that a burst of `fanout` work waits in the version's
/// activity queue as a backlog and more replicas drain it faster.
pub const ENV_ACTIVITIES_PER_SECOND: &str = "TEST_ACTIVITIES_PER_SECOND";

/// Test-only: `true` makes this an unversioned worker (no worker versioning, as a team runs
/// before adopting it): `TEMPORAL_DEPLOYMENT_NAME` and `TEMPORAL_WORKER_BUILD_ID` are then
/// optional and only name the worker.
pub const ENV_UNVERSIONED: &str = "TEST_UNVERSIONED";

/// Connecting includes the SDK's own retries; an unreachable address must not hang a test.
const CONNECT_DEADLINE: Duration = Duration::from_secs(20);
/// Graceful shutdown of an idle worker takes well under a second; leave room for a busy machine.
const STOP_DEADLINE: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum WorkerConfigError {
    #[error("env var {0} is missing or empty")]
    Missing(&'static str),
    #[error("invalid TEMPORAL_ADDRESS {0:?}: {1}")]
    BadAddress(String, String),
    #[error("env var {0} must be a boolean (true/false), got {1:?}")]
    BadBool(&'static str, String),
    #[error("env var {0} must be a positive whole number, got {1:?}")]
    BadCount(&'static str, String),
    #[error("env var {set} is set but {missing} is not: mTLS needs both a certificate and a key")]
    Incomplete {
        set: &'static str,
        missing: &'static str,
    },
    #[error("{path} (from env var {var}) is not mounted into the container")]
    FileNotMounted { var: &'static str, path: String },
    /// envconfig's own refusal.
    #[error("Cannot specify both {path} and {data}")]
    BothPathAndData {
        path: &'static str,
        data: &'static str,
    },
}

/// Everything a worker needs; built by [`WorkerConfig::from_pod`] (or [`WorkerConfig::from_env`])
/// the way a worker process would.
///
/// `Debug` never prints key material: the client key, the API key (and, for brevity, the
/// certificates) only show whether they are present.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct WorkerConfig {
    /// `host:port`. A scheme is optional: without one the worker dials `https` when TLS is on
    /// and plain `http` (what the dev server speaks) otherwise.
    pub address: String,
    pub namespace: String,
    pub deployment_name: String,
    pub build_id: String,
    pub task_queue: String,
    /// Client identity, shown as the poller identity in `DescribeTaskQueue`.
    pub identity: String,
    /// `TEMPORAL_TLS=true`. TLS is also on whenever an API key or a client certificate is set.
    pub tls: bool,
    /// `TEMPORAL_TLS_SERVER_NAME`: the name the server certificate is verified against.
    pub tls_server_name: Option<String>,
    /// PEM read from `TEMPORAL_TLS_CLIENT_CERT_PATH`.
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM read from `TEMPORAL_TLS_CLIENT_KEY_PATH`.
    pub client_key_pem: Option<Vec<u8>>,
    /// `TEMPORAL_API_KEY`.
    pub api_key: Option<String>,
    /// The server CA from `TEMPORAL_TLS_SERVER_CA_CERT_PATH` / `_DATA`: when set, the only CA
    /// the worker trusts for the server certificate.
    pub server_ca_pem: Option<Vec<u8>>,
    /// CA bundle (PEM) the worker trusts for the server certificate: the container image's trust
    /// store, which no env var describes. `None` means the operating system's roots.
    pub trusted_ca_pem: Option<Vec<u8>>,
    /// `TEST_FLAKY_FAILS=true`: this worker's `flaky` workflow fails the share of runs its input
    /// asks for (a bad build, for canary analysis); otherwise `flaky` always succeeds.
    pub flaky_fails: bool,
    /// `TEST_ACTIVITIES_PER_SECOND`: at most this many activities per second on this worker.
    pub activities_per_second: Option<u32>,
    /// `TEST_UNVERSIONED=true`: polls without worker versioning.
    pub unversioned: bool,
}

impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let present = |v: bool| if v { "<present>" } else { "<absent>" };
        f.debug_struct("WorkerConfig")
            .field("address", &self.address)
            .field("namespace", &self.namespace)
            .field("deployment_name", &self.deployment_name)
            .field("build_id", &self.build_id)
            .field("task_queue", &self.task_queue)
            .field("identity", &self.identity)
            .field("tls", &self.uses_tls())
            .field("tls_server_name", &self.tls_server_name)
            .field("client_cert_pem", &present(self.client_cert_pem.is_some()))
            .field("client_key_pem", &present(self.client_key_pem.is_some()))
            .field("api_key", &present(self.api_key.is_some()))
            .field("server_ca_pem", &present(self.server_ca_pem.is_some()))
            .field("trusted_ca_pem", &present(self.trusted_ca_pem.is_some()))
            .finish()
    }
}

impl WorkerConfig {
    /// [`WorkerConfig::from_pod`] for a container with no mounted files (so no mTLS).
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<WorkerConfig> {
        WorkerConfig::from_pod(env, &BTreeMap::new())
    }

    /// Builds the config a worker process would from its env and the files mounted into its
    /// container (`files`: absolute path → contents).
    ///
    /// Required: `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_DEPLOYMENT_NAME`,
    /// `TEMPORAL_WORKER_BUILD_ID`, `TEMPORAL_TASK_QUEUE`. Optional: `TEMPORAL_TLS`,
    /// `TEMPORAL_TLS_SERVER_NAME`, `TEMPORAL_TLS_CLIENT_CERT_PATH` + `TEMPORAL_TLS_CLIENT_KEY_PATH`
    /// (both or neither; each must name a file in `files`), `TEMPORAL_API_KEY` and
    /// `TEMPORAL_TLS_SERVER_CA_CERT_PATH` (a file in `files`) or `_DATA` (not both).
    /// [`WorkerConfig::trusted_ca_pem`] is left unset: it is not part of a pod's env.
    ///
    /// The identity defaults to `<deployment>@<build>`; callers running several replicas
    /// should make it unique.
    pub fn from_pod(
        env: &BTreeMap<String, String>,
        files: &BTreeMap<String, Vec<u8>>,
    ) -> Result<WorkerConfig> {
        let opt = |key: &'static str| -> Option<String> {
            env.get(key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let get = |key: &'static str| -> Result<String, WorkerConfigError> {
            opt(key).ok_or(WorkerConfigError::Missing(key))
        };
        let tls_flag = flag(opt(ENV_TLS), ENV_TLS)?;
        let file = |var: &'static str, path: String| -> Result<Vec<u8>, WorkerConfigError> {
            files
                .get(&path)
                .cloned()
                .ok_or(WorkerConfigError::FileNotMounted { var, path })
        };
        let (client_cert_pem, client_key_pem) =
            match (opt(ENV_TLS_CLIENT_CERT_PATH), opt(ENV_TLS_CLIENT_KEY_PATH)) {
                (None, None) => (None, None),
                (Some(_), None) => {
                    return Err(WorkerConfigError::Incomplete {
                        set: ENV_TLS_CLIENT_CERT_PATH,
                        missing: ENV_TLS_CLIENT_KEY_PATH,
                    }
                    .into());
                }
                (None, Some(_)) => {
                    return Err(WorkerConfigError::Incomplete {
                        set: ENV_TLS_CLIENT_KEY_PATH,
                        missing: ENV_TLS_CLIENT_CERT_PATH,
                    }
                    .into());
                }
                (Some(cert), Some(key)) => (
                    Some(file(ENV_TLS_CLIENT_CERT_PATH, cert)?),
                    Some(file(ENV_TLS_CLIENT_KEY_PATH, key)?),
                ),
            };
        let api_key = opt(ENV_API_KEY);
        let server_ca_pem = match (
            opt(ENV_TLS_SERVER_CA_CERT_PATH),
            opt(ENV_TLS_SERVER_CA_CERT_DATA),
        ) {
            (Some(_), Some(_)) => {
                return Err(WorkerConfigError::BothPathAndData {
                    path: ENV_TLS_SERVER_CA_CERT_PATH,
                    data: ENV_TLS_SERVER_CA_CERT_DATA,
                }
                .into());
            }
            (Some(path), None) => Some(file(ENV_TLS_SERVER_CA_CERT_PATH, path)?),
            (None, Some(data)) => Some(data.into_bytes()),
            (None, None) => None,
        };
        let flaky_fails = flag(opt(ENV_FLAKY_FAILS), ENV_FLAKY_FAILS)?;
        let activities_per_second = match opt(ENV_ACTIVITIES_PER_SECOND) {
            None => None,
            Some(v) => Some(
                v.parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(WorkerConfigError::BadCount(ENV_ACTIVITIES_PER_SECOND, v))?,
            ),
        };
        let unversioned = flag(opt(ENV_UNVERSIONED), ENV_UNVERSIONED)?;
        // An unversioned worker needs no version; its names only label it.
        let named = |key: &'static str, default: &str| match opt(key) {
            None if unversioned => Ok(default.to_string()),
            _ => get(key),
        };
        let cfg = WorkerConfig {
            address: get(ENV_ADDRESS)?,
            namespace: get(ENV_NAMESPACE)?,
            deployment_name: named(ENV_DEPLOYMENT_NAME, "unversioned")?,
            build_id: named(ENV_BUILD_ID, "unversioned")?,
            task_queue: get(ENV_TASK_QUEUE)?,
            identity: String::new(),
            tls: tls_flag
                || api_key.is_some()
                || client_cert_pem.is_some()
                || server_ca_pem.is_some(),
            tls_server_name: opt(ENV_TLS_SERVER_NAME),
            client_cert_pem,
            client_key_pem,
            api_key,
            server_ca_pem,
            trusted_ca_pem: None,
            flaky_fails,
            activities_per_second,
            unversioned,
        };
        cfg.url()?;
        Ok(WorkerConfig {
            identity: format!("{}@{}", cfg.deployment_name, cfg.build_id),
            ..cfg
        })
    }

    /// TLS is on when asked for, and always with credentials (an API key is useless in
    /// plaintext; a client certificate only exists in TLS).
    pub fn uses_tls(&self) -> bool {
        self.tls || self.api_key.is_some() || self.client_cert_pem.is_some()
    }

    /// The SDK connection options this worker dials with (TLS, client certificate, API key).
    pub fn connection_options(&self) -> Result<ConnectionOptions> {
        let url = self.url()?;
        let tls = self.uses_tls().then(|| {
            let client = match (&self.client_cert_pem, &self.client_key_pem) {
                (Some(cert), Some(key)) => Some(
                    ClientTlsOptions::builder()
                        .client_cert(cert.clone())
                        .client_private_key(key.clone())
                        .build(),
                ),
                _ => None,
            };
            TlsOptions::builder()
                // The env's server CA replaces the image's trust store, as in the SDK.
                .maybe_server_root_ca_cert(
                    self.server_ca_pem
                        .clone()
                        .or_else(|| self.trusted_ca_pem.clone()),
                )
                .maybe_domain(self.tls_server_name.clone())
                .maybe_client_tls_options(client)
                .build()
        });
        Ok(ConnectionOptions::new(url)
            .identity(self.identity.clone())
            .maybe_tls_options(tls)
            .maybe_api_key(self.api_key.clone())
            .build())
    }

    fn url(&self) -> Result<Url, WorkerConfigError> {
        let text = if self.address.contains("://") {
            self.address.clone()
        } else if self.uses_tls() {
            format!("https://{}", self.address)
        } else {
            format!("http://{}", self.address)
        };
        Url::from_str(&text)
            .map_err(|e| WorkerConfigError::BadAddress(self.address.clone(), e.to_string()))
    }
}

/// A boolean env var: unset is `false`.
fn flag(value: Option<String>, var: &'static str) -> Result<bool, WorkerConfigError> {
    match value {
        None => Ok(false),
        Some(v) => parse_bool(&v).ok_or(WorkerConfigError::BadBool(var, v)),
    }
}

/// Go's `strconv.ParseBool`, which is what Temporal's own tooling accepts.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Lifecycle of a spawned worker as seen from outside its thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// Connecting and constructing the SDK worker.
    Starting,
    /// Constructed; `Worker::run` is polling.
    Running,
    /// Shut down cleanly.
    Stopped,
    /// Could not connect/construct, or `run` returned an error.
    Failed(String),
}

impl WorkerState {
    pub fn is_finished(&self) -> bool {
        matches!(self, WorkerState::Stopped | WorkerState::Failed(_))
    }
}

/// A worker running on its own OS thread ([`spawn`]) or on a shared host
/// ([`crate::worker_host::WorkerHost::spawn`]). Dropping the handle asks the worker to shut down
/// without waiting; [`WorkerHandle::stop`] waits for it.
#[derive(Debug)]
pub struct WorkerHandle {
    config: WorkerConfig,
    state: watch::Receiver<WorkerState>,
    stop: watch::Sender<bool>,
    /// `false`: the worker stops polling but its process (thread) lives on.
    polling: watch::Sender<bool>,
    /// `None` for a worker on a shared host.
    thread: Option<JoinHandle<()>>,
}

/// The worker's side of a [`WorkerHandle`]: where it reports its state and hears stop and
/// polling requests.
pub(crate) struct WorkerChannels {
    pub(crate) state: watch::Sender<WorkerState>,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) polling: watch::Receiver<bool>,
}

impl WorkerChannels {
    /// Reports how the worker ended: its last state.
    pub(crate) fn finish(&self, outcome: Result<()>) {
        let last = match outcome {
            Ok(()) => WorkerState::Stopped,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "test worker ended with an error");
                WorkerState::Failed(format!("{e:#}"))
            }
        };
        self.state.send_replace(last);
    }
}

/// A handle in state `Starting` (with no thread) and the worker's side of it.
pub(crate) fn handle_and_channels(cfg: WorkerConfig) -> (WorkerHandle, WorkerChannels) {
    let (state_tx, state_rx) = watch::channel(WorkerState::Starting);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (polling_tx, polling_rx) = watch::channel(true);
    let handle = WorkerHandle {
        config: cfg,
        state: state_rx,
        stop: stop_tx,
        polling: polling_tx,
        thread: None,
    };
    let channels = WorkerChannels {
        state: state_tx,
        stop: stop_rx,
        polling: polling_rx,
    };
    (handle, channels)
}

/// Starts a worker thread. Returns at once; use [`WorkerHandle::wait_running`] to know when the
/// SDK worker has been constructed and is polling.
pub fn spawn(cfg: WorkerConfig) -> Result<WorkerHandle> {
    let conn_opts = cfg.connection_options()?;
    let (mut handle, channels) = handle_and_channels(cfg.clone());
    let thread = std::thread::Builder::new()
        .name(format!("worker-{}", cfg.build_id))
        .spawn(move || {
            let outcome = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(run_worker(cfg, conn_opts, &channels)),
                Err(e) => {
                    Err(anyhow::Error::from(e).context("building the worker's tokio runtime"))
                }
            };
            channels.finish(outcome);
        })
        .context("spawning the worker thread")?;
    handle.thread = Some(thread);
    Ok(handle)
}

async fn run_worker(
    cfg: WorkerConfig,
    conn_opts: ConnectionOptions,
    channels: &WorkerChannels,
) -> Result<()> {
    let setup = async {
        let runtime = Runtime::from_current_tokio(Default::default())?;
        let conn = connect(&cfg, conn_opts).await?;
        let client = Client::new(conn, ClientOptions::new(cfg.namespace.clone()).build())?;
        let worker = Worker::new(&runtime, client.clone(), worker_options(&cfg)?)?;
        // The SDK runtime must outlive the worker, so both travel together.
        anyhow::Ok((runtime, client, worker))
    };
    let mut stop = channels.stop.clone();
    let (runtime, client, worker) = tokio::select! {
        built = setup => built?,
        _ = stop.wait_for(|s| *s) => return Ok(()),
    };
    drive(&runtime, &client, worker, &cfg, channels).await
}

/// Dials Temporal, giving up after [`CONNECT_DEADLINE`].
pub(crate) async fn connect(
    cfg: &WorkerConfig,
    conn_opts: ConnectionOptions,
) -> Result<Connection> {
    tokio::time::timeout(CONNECT_DEADLINE, Connection::connect(conn_opts))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "connecting to {} timed out after {CONNECT_DEADLINE:?}",
                cfg.address
            )
        })?
        .map_err(anyhow::Error::from)
}

/// Runs a constructed SDK worker (state `Running`) until it is asked to stop or fails; a
/// polling pause shuts it down and a resume constructs a new one on the same client.
pub(crate) async fn drive(
    runtime: &Runtime,
    client: &Client,
    mut worker: Worker,
    cfg: &WorkerConfig,
    channels: &WorkerChannels,
) -> Result<()> {
    let (mut stop, mut polling) = (channels.stop.clone(), channels.polling.clone());
    channels.state.send_replace(WorkerState::Running);
    loop {
        // The run future borrows the worker: it ends with this block.
        {
            let shutdown = worker.shutdown_handle();
            let run = worker.run();
            tokio::pin!(run);
            tokio::select! {
                r = &mut run => return r.context("worker run failed"),
                _ = stop.wait_for(|s| *s) => {
                    shutdown();
                    return run.await.context("worker run failed");
                }
                _ = polling.wait_for(|p| !*p) => {
                    shutdown();
                    run.await.context("worker run failed while pausing its polling")?;
                }
            }
        }
        // The process lives on (state stays Running, so the Pod stays Ready) without polling,
        // until polling resumes with a new SDK worker, as a restarted in-process loop would.
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return Ok(()),
            _ = polling.wait_for(|p| *p) => {}
        }
        worker = Worker::new(runtime, client.clone(), worker_options(cfg)?)?;
    }
}

/// The worker's options: its version, task queue, identity and workflows. The identity is set
/// on the worker (the SDK's `client_identity_override`) as well as on a thread worker's own
/// connection, so that workers sharing one connection ([`crate::worker_host`]) keep theirs.
pub(crate) fn worker_options(cfg: &WorkerConfig) -> Result<WorkerOptions> {
    let version = WorkerDeploymentVersion::builder()
        .deployment_name(cfg.deployment_name.clone())
        .build_id(cfg.build_id.clone())
        .build();
    let deployment_options = if cfg.unversioned {
        WorkerDeploymentOptions::from_build_id(cfg.build_id.clone())
    } else {
        WorkerDeploymentOptions::new(version)
            .use_worker_versioning(true)
            .default_versioning_behavior(VersioningBehavior::Pinned)
            .build()
    };
    let opts = WorkerOptions::new(cfg.task_queue.clone())
        .deployment_options(deployment_options)
        .client_identity_override(cfg.identity.clone())
        .register_workflow::<HelloWorkflow>()?
        .register_workflow::<WaitWorkflow>()?
        .register_workflow::<UpgradableWorkflow>()?
        .register_workflow::<GateWorkflow>()?
        .register_workflow::<FanoutWorkflow>()?
        .register_activities(TestActivities)
        .maybe_max_worker_activities_per_second(cfg.activities_per_second.map(f64::from));
    // One `flaky` workflow type, failing only on a worker configured as a bad build.
    let opts = if cfg.flaky_fails {
        opts.register_workflow::<FailingFlakyWorkflow>()?
    } else {
        opts.register_workflow::<FlakyWorkflow>()?
    };
    Ok(opts.build())
}

impl WorkerHandle {
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    pub fn state(&self) -> WorkerState {
        self.state.borrow().clone()
    }

    /// A receiver of this worker's state changes.
    pub fn subscribe(&self) -> watch::Receiver<WorkerState> {
        self.state.clone()
    }

    pub fn is_running(&self) -> bool {
        *self.state.borrow() == WorkerState::Running
    }

    /// Waits until the worker is constructed and polling; fails if it ends first or the
    /// timeout passes.
    pub async fn wait_running(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.state.clone();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|s| *s != WorkerState::Starting))
            .await
            .map(|r| r.map(|s| s.clone()));
        match waited {
            Err(_) => anyhow::bail!(
                "worker {} did not start within {timeout:?}",
                self.config.identity
            ),
            Ok(Err(_)) => anyhow::bail!("worker {} thread vanished", self.config.identity),
            Ok(Ok(WorkerState::Running)) => Ok(()),
            Ok(Ok(other)) => anyhow::bail!(
                "worker {} ended before running: {other:?}",
                self.config.identity
            ),
        }
    }

    /// A sender that pauses (`false`) or resumes (`true`) this worker's polling while its
    /// process lives on: what a worker stuck or crash-looping inside its process, or one that
    /// lost its credentials, looks like from outside. Pausing shuts the SDK worker down
    /// gracefully (Temporal may then forget its pollers at once instead of aging them out);
    /// resuming constructs a new one with the same identity.
    pub fn polling_control(&self) -> watch::Sender<bool> {
        self.polling.clone()
    }

    /// Asks the worker to shut down without waiting.
    pub fn request_stop(&self) {
        self.stop.send_replace(true);
    }

    /// Shuts the worker down and joins its thread, giving up after a deadline (the thread is
    /// then left to finish on its own).
    pub async fn stop(mut self) -> Result<()> {
        self.request_stop();
        let mut rx = self.state.clone();
        let finished = tokio::time::timeout(STOP_DEADLINE, rx.wait_for(WorkerState::is_finished))
            .await
            .is_ok();
        if !finished {
            anyhow::bail!(
                "worker {} did not stop within {STOP_DEADLINE:?}",
                self.config.identity
            );
        }
        if let Some(thread) = self.thread.take() {
            // The state is final, so the thread is at its last statement; joining is brief.
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .context("joining the worker thread")?
                .map_err(|_| anyhow::anyhow!("worker {} thread panicked", self.config.identity))?;
        }
        match self.state() {
            WorkerState::Failed(e) => anyhow::bail!("worker {} failed: {e}", self.config.identity),
            _ => Ok(()),
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Reads a JSON value out of raw workflow input: nothing or `null` gives `None`.
fn decode_json(raw: &RawValue) -> Result<Option<serde_json::Value>, String> {
    let Some(payload) = raw.payloads.first() else {
        return Ok(None);
    };
    let encoding = payload
        .metadata
        .get("encoding")
        .map(|v| String::from_utf8_lossy(v).into_owned());
    match encoding.as_deref() {
        Some("json/plain") => {
            let value: serde_json::Value = serde_json::from_slice(&payload.data)
                .map_err(|e| format!("input is not JSON: {e}"))?;
            Ok(if value.is_null() { None } else { Some(value) })
        }
        Some("binary/null") | None if payload.data.is_empty() => Ok(None),
        other => Err(format!("unsupported input encoding {other:?}")),
    }
}

mod workflows {
    #![allow(unreachable_pub)]

    use serde::{Deserialize, Serialize};
    use temporalio_common::data_converters::RawValue;
    use temporalio_macros::{workflow, workflow_methods};
    use temporalio_sdk::{
        ApplicationFailure, ContinueAsNewOptions, ContinueAsNewVersioningBehavior,
        SyncWorkflowContext, WorkflowContext, WorkflowResult,
    };

    use std::time::Duration;

    use temporalio_macros::activities;
    use temporalio_sdk::ActivityOptions;
    use temporalio_sdk::activities::{ActivityContext, ActivityError};
    use temporalio_sdk::workflows::join_all;

    use super::decode_json;

    fn bad_input(message: String) -> ApplicationFailure {
        ApplicationFailure::non_retryable(std::io::Error::other(message))
    }

    /// `hello`: returns `"hello <input>"` (a JSON string input is used as is, anything else
    /// as its JSON text, no input as `world`).
    #[workflow]
    #[derive(Default)]
    pub struct HelloWorkflow;

    #[workflow_methods]
    impl HelloWorkflow {
        #[run(name = "hello")]
        pub async fn run(
            _ctx: &mut WorkflowContext<Self>,
            input: RawValue,
        ) -> WorkflowResult<String> {
            let who = match decode_json(&input).map_err(bad_input)? {
                None => "world".to_string(),
                Some(serde_json::Value::String(s)) => s,
                Some(other) => other.to_string(),
            };
            Ok(format!("hello {who}"))
        }
    }

    /// `wait`: completes once signal `finish` arrives; keeps its version Draining meanwhile.
    #[workflow]
    #[derive(Default)]
    pub struct WaitWorkflow {
        finished: bool,
    }

    #[workflow_methods]
    impl WaitWorkflow {
        #[run(name = "wait")]
        pub async fn run(
            ctx: &mut WorkflowContext<Self>,
            _input: RawValue,
        ) -> WorkflowResult<String> {
            ctx.wait_condition(|s| s.finished).await?;
            Ok("finished".to_string())
        }

        #[signal(name = "finish")]
        pub fn finish(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _input: RawValue) {
            self.finished = true;
        }
    }

    /// `upgradable`: waits like `wait`; on signal `upgrade` (what the controller's
    /// `spec.sunset.upgradeSignal` sends to a draining version's pinned workflows) it continues
    /// as new with the AutoUpgrade initial behaviour, so its next run starts on the Current
    /// version and pins there. `finish` ends it.
    #[workflow]
    #[derive(Default)]
    pub struct UpgradableWorkflow {
        upgrade: bool,
        finished: bool,
    }

    #[workflow_methods]
    impl UpgradableWorkflow {
        #[run(name = "upgradable")]
        pub async fn run(
            ctx: &mut WorkflowContext<Self>,
            input: RawValue,
        ) -> WorkflowResult<String> {
            ctx.wait_condition(|s| s.upgrade || s.finished).await?;
            if ctx.state(|s| s.finished) {
                return Ok("finished".to_string());
            }
            let mut opts = ContinueAsNewOptions::default();
            opts.initial_versioning_behavior = Some(ContinueAsNewVersioningBehavior::AutoUpgrade);
            match ctx.continue_as_new(input, opts) {
                Err(next) => Err(next),
                Ok(never) => match never {},
            }
        }

        #[signal(name = "upgrade")]
        pub fn upgrade(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _input: RawValue) {
            self.upgrade = true;
        }

        #[signal(name = "finish")]
        pub fn finish(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _input: RawValue) {
            self.finished = true;
        }
    }

    /// The activities of every test worker.
    pub struct TestActivities;

    #[activities]
    impl TestActivities {
        /// `work`: one unit of work; how fast a worker takes them is its
        /// `TEST_ACTIVITIES_PER_SECOND`.
        #[activity(name = "work")]
        pub async fn work(_ctx: ActivityContext) -> Result<(), ActivityError> {
            Ok(())
        }
    }

    /// `fanout`: schedules `n` `work` activities at once (input: the number `n`) and completes
    /// once all have run: a burst of `n` activity tasks on the version it is pinned to.
    #[workflow]
    #[derive(Default)]
    pub struct FanoutWorkflow;

    #[workflow_methods]
    impl FanoutWorkflow {
        #[run(name = "fanout")]
        pub async fn run(
            ctx: &mut WorkflowContext<Self>,
            input: RawValue,
        ) -> WorkflowResult<String> {
            let n = decode_json(&input)
                .map_err(bad_input)?
                .and_then(|v| v.as_u64())
                .ok_or_else(|| bad_input("fanout wants a whole number of activities".into()))?;
            let calls: Vec<_> = (0..n)
                .map(|_| {
                    ctx.execute_activity(
                        TestActivities::work,
                        (),
                        ActivityOptions::start_to_close_timeout(Duration::from_secs(60)),
                    )
                })
                .collect();
            for done in join_all(calls).await {
                done?;
            }
            Ok(format!("{n} done"))
        }
    }

    /// Input of the `flaky` workflow.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct FlakyInput {
        /// The run's sequence number: run `n` fails when `n % 100 < failPercent`.
        pub n: u32,
        /// Share of runs (percent) that fail on a worker with `TEST_FLAKY_FAILS=true`.
        pub fail_percent: u32,
    }

    /// `flaky` on a healthy worker: always succeeds.
    #[workflow]
    #[derive(Default)]
    pub struct FlakyWorkflow;

    #[workflow_methods]
    impl FlakyWorkflow {
        #[run(name = "flaky")]
        pub async fn run(
            _ctx: &mut WorkflowContext<Self>,
            _input: RawValue,
        ) -> WorkflowResult<String> {
            Ok("ok".to_string())
        }
    }

    /// `flaky` on a bad build (`TEST_FLAKY_FAILS=true`): fails the share of runs the input asks.
    #[workflow]
    #[derive(Default)]
    pub struct FailingFlakyWorkflow;

    #[workflow_methods]
    impl FailingFlakyWorkflow {
        #[run(name = "flaky")]
        pub async fn run(
            _ctx: &mut WorkflowContext<Self>,
            input: RawValue,
        ) -> WorkflowResult<String> {
            let input: FlakyInput = match decode_json(&input).map_err(bad_input)? {
                None => FlakyInput::default(),
                Some(v) => serde_json::from_value(v)
                    .map_err(|e| bad_input(format!("bad flaky input: {e}")))?,
            };
            if input.n % 100 < input.fail_percent {
                return Err(ApplicationFailure::non_retryable(std::io::Error::other(
                    "flaky failed as requested",
                ))
                .into());
            }
            Ok("ok".to_string())
        }
    }

    /// Input of the `gate` workflow. Missing fields mean "succeed at once".
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct GateInput {
        /// `"succeed"` (default) or `"fail"`.
        pub outcome: Option<String>,
        /// Wait for signal `finish` before deciding.
        pub wait_for_signal: bool,
    }

    /// `gate`: succeeds or fails (application error) as its input says, optionally only after
    /// signal `finish`.
    #[workflow]
    #[derive(Default)]
    pub struct GateWorkflow {
        finished: bool,
    }

    #[workflow_methods]
    impl GateWorkflow {
        #[run(name = "gate")]
        pub async fn run(
            ctx: &mut WorkflowContext<Self>,
            input: RawValue,
        ) -> WorkflowResult<String> {
            let input: GateInput = match decode_json(&input).map_err(bad_input)? {
                None => GateInput::default(),
                Some(v) => serde_json::from_value(v)
                    .map_err(|e| bad_input(format!("bad gate input: {e}")))?,
            };
            if input.wait_for_signal {
                ctx.wait_condition(|s| s.finished).await?;
            }
            match input.outcome.as_deref().unwrap_or("succeed") {
                "succeed" => Ok("gate passed".to_string()),
                "fail" => Err(ApplicationFailure::non_retryable(std::io::Error::other(
                    "gate failed as requested",
                ))
                .into()),
                other => Err(bad_input(format!("unknown gate outcome {other:?}")).into()),
            }
        }

        #[signal(name = "finish")]
        pub fn finish(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _input: RawValue) {
            self.finished = true;
        }
    }
}
