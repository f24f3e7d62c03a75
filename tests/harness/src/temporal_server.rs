//! A real Temporal dev server (`temporal server start-dev --headless`) as a child process.
//!
//! The server runs under [`crate::supervise`], so a server kept in a `static` (see [`shared`])
//! does not outlive the test binary.

use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use temporalio_client::grpc::WorkflowService as _;
use temporalio_client::tonic::Request;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions, Url};
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeTaskQueueRequest, GetSystemInfoRequest,
};
use tokio::sync::OnceCell;

use crate::supervise::{Supervised, free_port};

/// How long a fresh dev server may take to answer `GetSystemInfo` on a loaded 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(90);
/// How long a newly registered namespace may take to become usable.
const NAMESPACE_DEADLINE: Duration = Duration::from_secs(60);
/// The dev server picks its ports itself only for the HTTP API/metrics; the frontend port is
/// ours, so a port freed by the probe listener can be taken by someone else in between. Retry.
const START_ATTEMPTS: usize = 3;

/// Dynamic config that makes a drained version show as DRAINED about 1 s after its last pinned
/// workflow closes: the server waits out the visibility grace period (3 minutes by default)
/// and then refreshes the drainage status on its own interval, so both are set to 1 s.
/// Pollers are forgotten quickly too: Temporal refuses to delete a version (and so a worker
/// deployment) while it remembers pollers for it, 5 minutes by default after the last poll.
/// Long polls are cut to 2 s so that live workers re-poll well within the 5 s history TTL and
/// stay visible in `DescribeTaskQueue`.
const FAST_DRAINAGE: [&str; 4] = [
    r#"matching.wv.VersionDrainageStatusVisibilityGracePeriod="1s""#,
    r#"matching.wv.VersionDrainageStatusRefreshInterval="1s""#,
    r#"matching.PollerHistoryTTL="5s""#,
    r#"matching.longPollExpirationInterval="2s""#,
];

/// A running `temporal server start-dev --headless` child process, killed on drop.
pub struct DevServer {
    port: u16,
    /// Where the server's own Prometheus metrics are served (`/metrics`).
    metrics_port: u16,
    log_path: PathBuf,
    child: Mutex<Option<Supervised>>,
}

impl std::fmt::Debug for DevServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevServer")
            .field("address", &self.address())
            .field("log", &self.log_path)
            .finish()
    }
}

impl DevServer {
    /// Starts a dev server on a free loopback port (fast drainage, in-memory SQLite, no UI)
    /// and waits until it answers `GetSystemInfo`.
    pub async fn start() -> Result<DevServer> {
        Self::start_with(&[]).await
    }

    /// [`DevServer::start`] with more `--dynamic-config-value`s (`key=value`, the value in
    /// YAML), e.g. a lowered `matching.maxVersionsInDeployment`.
    pub async fn start_with(extra_dynamic_config: &[&str]) -> Result<DevServer> {
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(extra_dynamic_config).await {
                Ok(server) => return Ok(server),
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "temporal dev server did not start; retrying");
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("temporal dev server did not start")))
    }

    async fn start_once(extra_dynamic_config: &[&str]) -> Result<DevServer> {
        let port = free_port()?;
        let metrics_port = free_port()?;
        let log_path =
            std::env::temp_dir().join(format!("temporal-dev-{}-{port}.log", std::process::id()));
        let mut args: Vec<String> = ["server", "start-dev", "--headless", "--ip", "127.0.0.1"]
            .into_iter()
            .map(String::from)
            .collect();
        args.extend([
            "--port".into(),
            port.to_string(),
            "--log-level".into(),
            "warn".into(),
            "--metrics-port".into(),
            metrics_port.to_string(),
        ]);
        for value in FAST_DRAINAGE.iter().chain(extra_dynamic_config) {
            args.extend(["--dynamic-config-value".into(), value.to_string()]);
        }
        let child = Supervised::spawn(
            "temporal-dev",
            std::path::Path::new("temporal"),
            args,
            &log_path,
        )
        .context("spawning `temporal server start-dev` (is the Temporal CLI on PATH?)")?;
        let server = DevServer {
            port,
            metrics_port,
            log_path,
            child: Mutex::new(Some(child)),
        };
        server.wait_healthy().await?;
        Ok(server)
    }

    /// `127.0.0.1:PORT` of the frontend gRPC service.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT` of the server's own Prometheus `/metrics` endpoint (what Temporal
    /// itself counts, e.g. `service_errors_resource_exhausted`).
    pub fn metrics_address(&self) -> String {
        format!("127.0.0.1:{}", self.metrics_port)
    }

    /// `http://127.0.0.1:PORT`, the form `temporalio_client::ConnectionOptions` wants.
    pub fn url(&self) -> Result<Url> {
        Ok(Url::from_str(&format!("http://{}", self.address()))?)
    }

    /// A raw gRPC connection to this server.
    pub async fn connect(&self, identity: &str) -> Result<Connection> {
        let opts = ConnectionOptions::new(self.url()?)
            .identity(identity.to_string())
            .build();
        Connection::connect(opts)
            .await
            .context("connecting to the temporal dev server")
    }

    /// A high-level client bound to `namespace` (for starting and signalling workflows).
    pub async fn client(&self, namespace: &str, identity: &str) -> Result<Client> {
        let conn = self.connect(identity).await?;
        Ok(Client::new(
            conn,
            ClientOptions::new(namespace.to_string()).build(),
        )?)
    }

    /// Path of the file receiving the server's stdout and stderr.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log_path
    }

    /// A `Command` for the `temporal` CLI. The CLI takes `--address` per subcommand, so callers
    /// append their subcommand first and then `.args(["--address", &server.address()])`.
    pub fn cli(&self) -> Command {
        Command::new("temporal")
    }

    /// Registers a Temporal namespace with the real CLI and waits until matching accepts calls
    /// for it. An already existing namespace is fine.
    pub async fn create_namespace(&self, ns: &str) -> Result<()> {
        let mut cmd = tokio::process::Command::from(self.cli());
        cmd.args([
            "operator",
            "namespace",
            "create",
            "--namespace",
            ns,
            "--address",
            &self.address(),
        ]);
        let out = cmd
            .output()
            .await
            .context("running `temporal operator namespace create`")?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !stderr.contains("already") {
                bail!(
                    "creating Temporal namespace {ns:?} failed: {}",
                    stderr.trim()
                );
            }
        }
        // Registration is a DB write; the frontend and matching namespace caches catch up later,
        // so probe with a call that goes through both.
        let conn = self.connect("test-harness").await?;
        let deadline = Instant::now() + NAMESPACE_DEADLINE;
        loop {
            let mut svc = conn.clone();
            let probe = svc
                .describe_task_queue(Request::new(DescribeTaskQueueRequest {
                    namespace: ns.to_string(),
                    task_queue: Some(TaskQueue {
                        name: "test-harness-probe".into(),
                        ..Default::default()
                    }),
                    task_queue_type: TaskQueueType::Workflow as i32,
                    ..Default::default()
                }))
                .await;
            match probe {
                Ok(_) => return Ok(()),
                Err(status) if Instant::now() < deadline => {
                    tracing::debug!(code = ?status.code(), message = status.message(), "namespace not usable yet");
                }
                Err(status) => {
                    bail!("namespace {ns:?} still unusable after {NAMESPACE_DEADLINE:?}: {status}")
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_healthy(&self) -> Result<()> {
        let deadline = Instant::now() + START_DEADLINE;
        let url = self.url()?;
        loop {
            if let Some(status) = self.exited()? {
                bail!(
                    "temporal dev server exited early ({status}); log tail:\n{}",
                    self.log_tail()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                let opts = ConnectionOptions::new(url.clone())
                    .identity("test-harness".to_string())
                    .build();
                let attempt = async {
                    let mut conn = Connection::connect(opts).await?;
                    conn.get_system_info(Request::new(GetSystemInfoRequest::default()))
                        .await?;
                    anyhow::Ok(())
                };
                match tokio::time::timeout(Duration::from_secs(5), attempt).await {
                    Ok(Ok(())) => return Ok(()),
                    Ok(Err(e)) => tracing::debug!(error = %e, "dev server not healthy yet"),
                    Err(_) => tracing::debug!("dev server health probe timed out"),
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "temporal dev server not healthy after {START_DEADLINE:?}; log tail:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn exited(&self) -> Result<Option<std::process::ExitStatus>> {
        let mut guard = self
            .child
            .lock()
            .map_err(|_| anyhow::anyhow!("dev server lock poisoned"))?;
        match guard.as_mut() {
            Some(sup) => sup.exited(),
            None => bail!("dev server already stopped"),
        }
    }

    fn log_tail(&self) -> String {
        crate::supervise::log_tail(&self.log_path)
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        if let Some(mut sup) = self.child.get_mut().ok().and_then(Option::take) {
            // Closing the pipe makes the supervisor stop the server gracefully.
            sup.stop(Duration::from_secs(10));
        }
    }
}

static SHARED: OnceCell<DevServer> = OnceCell::const_new();

/// One dev server per test binary, started on first use.
///
/// It lives in a `static` and is therefore never dropped; it still stops when the test process
/// exits, because the process's end closes the supervisor's stdin pipe (see the module docs).
/// Safe to call from any tokio runtime: nothing in [`DevServer`] is tied to the runtime that
/// started it.
pub async fn shared() -> Result<&'static DevServer> {
    SHARED.get_or_try_init(DevServer::start).await
}

/// [`shared`], started with more dynamic config when this is the binary's first use of it (a
/// binary whose tests need e.g. a lowered version cap calls this before anything else).
pub async fn shared_with(
    extra_dynamic_config: &'static [&'static str],
) -> Result<&'static DevServer> {
    SHARED
        .get_or_try_init(|| DevServer::start_with(extra_dynamic_config))
        .await
}
