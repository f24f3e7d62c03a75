//! A test-only Kubernetes API server emulator: plain HTTP on 127.0.0.1, in-memory storage,
//! enough of kube-apiserver (and of the Deployment and garbage-collection controllers) for
//! kube-rs controllers and the real `kubectl`. See README.md for what is emulated and the gaps.

pub mod auth;
pub mod builtin;
pub mod cel_rules;
mod deployment;
pub mod discovery;
pub mod error;
mod faults;
mod gc;
pub mod kubeconfig;
pub mod managed;
mod openapi;
pub mod patch;
mod protobuf;
pub mod registry;
mod routes;
pub mod schema;
pub mod selectors;
pub mod store;
pub mod table;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use serde_json::json;
use tokio::sync::{Notify, broadcast, mpsc};

pub use faults::Faults;

use crate::registry::ResKey;
use crate::store::{State, Sub, WriteOpts};

/// How the emulated Deployment controller reports readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeploymentMode {
    /// Every Deployment becomes ready with `spec.replicas` pods as soon as its spec is observed.
    #[default]
    AutoReady,
    /// Readiness comes only from [`Emulator::set_deployment_ready`] (or a client's `/status` write).
    Manual,
}

#[derive(Debug, Clone, Default)]
pub struct EmulatorOptions {
    /// Directory of CRD YAML files registered at start.
    pub crd_dir: Option<PathBuf>,
    pub deployment_mode: DeploymentMode,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) faults: Faults,
    pub(crate) auth: auth::Authn,
    pub(crate) mode: DeploymentMode,
    ready: Mutex<HashMap<(String, String), i32>>,
    kicks: mpsc::UnboundedSender<(String, String)>,
    pub(crate) gc_kick: Notify,
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
    pub(crate) addr: SocketAddr,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ready_for(&self, ns: &str, name: &str) -> Option<i32> {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ns.to_string(), name.to_string()))
            .copied()
    }
}

pub struct Emulator {
    shared: Arc<Shared>,
    base_url: String,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Emulator {
    /// Starts the emulator on 127.0.0.1 with an ephemeral port.
    pub async fn start(opts: EmulatorOptions) -> anyhow::Result<Emulator> {
        Self::start_on(opts, 0).await
    }

    /// Starts on a given port (0 for any).
    pub async fn start_on(opts: EmulatorOptions, port: u16) -> anyhow::Result<Emulator> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .context("binding the emulator port")?;
        let addr = listener.local_addr()?;
        let (tx, _) = broadcast::channel(16384);
        let mut state = State::new(tx);
        seed(&mut state)?;
        if let Some(dir) = &opts.crd_dir {
            let crds = registry::load_crd_dir(dir)?;
            let def = state
                .registry
                .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                .context("CRD kind missing from the registry")?;
            for crd in crds {
                state
                    .create(
                        &def,
                        "",
                        crd,
                        &WriteOpts::internal("kube-emulator", Sub::Main),
                    )
                    .map_err(|e| anyhow::anyhow!("registering CRD from {}: {e}", dir.display()))?;
            }
        }
        let (kick_tx, kick_rx) = mpsc::unbounded_channel();
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            faults: Faults::new(),
            auth: auth::Authn::default(),
            mode: opts.deployment_mode,
            ready: Mutex::new(HashMap::new()),
            kicks: kick_tx,
            gc_kick: Notify::new(),
            shutdown,
            addr,
        });
        deployment::spawn(shared.clone(), kick_rx);
        gc::spawn(shared.clone());
        let app = axum::Router::new()
            .fallback(routes::handle)
            .with_state(shared.clone());
        let mut stop = shared.shutdown.subscribe();
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stop.changed().await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "kube-emulator server stopped");
            }
        });
        let base_url = format!("http://{addr}");
        let dir = tempfile::Builder::new()
            .prefix("kube-emulator-")
            .tempdir()?;
        let kubeconfig = kubeconfig::write(dir.path(), &base_url)?;
        Ok(Emulator {
            shared,
            base_url,
            kubeconfig,
            _dir: dir,
            server: Some(server),
        })
    }

    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn client_config(&self) -> kube::Config {
        // The URL is ours and always valid; fall back to the default URI form just in case.
        let uri = self.base_url.parse().unwrap_or_default();
        let mut c = kube::Config::new(uri);
        c.default_namespace = "default".into();
        c
    }

    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(self.client_config())?)
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Manual mode: the Deployment now has `ready_replicas` ready (and available) pods.
    pub fn set_deployment_ready(&self, namespace: &str, name: &str, ready_replicas: i32) {
        self.shared
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((namespace.to_string(), name.to_string()), ready_replicas);
        let _ = self
            .shared
            .kicks
            .send((namespace.to_string(), name.to_string()));
    }

    /// Registers a static bearer token, like a line of kube-apiserver's `--token-auth-file`:
    /// a TokenReview of `token` (for the API server's audience, [`auth::DEFAULT_AUDIENCE`])
    /// authenticates as `username` with `uid` (may be empty) and `groups` plus
    /// `system:authenticated`. Registering the same token again replaces its user.
    pub fn add_static_token(&self, token: &str, username: &str, uid: &str, groups: &[&str]) {
        self.shared.auth.add_static(token, username, uid, groups);
    }

    /// Moves the clock that tokens are minted and checked against forward by `by` (test hook
    /// for expiry; TokenRequest lifetimes are at least 10 minutes). Affects only tokens.
    pub fn advance_token_clock(&self, by: std::time::Duration) {
        self.shared.auth.advance(by);
    }

    pub async fn shutdown(mut self) {
        let _ = self.shared.shutdown.send(true);
        if let Some(s) = self.server.take() {
            let _ = s.await;
        }
    }

    /// Where the kubeconfig lives; also written to `path` when asked (standalone binary).
    pub fn write_kubeconfig_to(&self, path: &Path) -> std::io::Result<()> {
        kubeconfig::write_to(path, &self.base_url)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.shared.shutdown.send(true);
    }
}

/// The namespaces every cluster starts with.
fn seed(state: &mut State) -> anyhow::Result<()> {
    let def = state
        .registry
        .any_version(&ResKey {
            group: String::new(),
            plural: "namespaces".into(),
        })
        .context("namespaces kind")?;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        state
            .create(
                &def,
                "",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                &WriteOpts::internal("kube-apiserver", Sub::Main),
            )
            .map_err(|e| anyhow::anyhow!("seeding namespace {ns}: {e}"))?;
    }
    Ok(())
}
