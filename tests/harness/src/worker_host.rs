//! A shared host for many test workers (issue 52): light enough that the kubelet stand-in can
//! run hundreds of live worker Pods on a 2-core machine
//! ([`crate::kubelet::KubeletOptions::shared_worker_host`]).
//!
//! A worker started by [`crate::worker::spawn`] costs an OS thread, a tokio runtime, an SDK
//! `Runtime` and a gRPC connection. A worker on a [`WorkerHost`] costs one SDK `Worker` (its
//! pollers and its slice of a connection):
//!
//! - one OS thread drives every hosted worker's `Worker::run` (which is `!Send`, so it cannot
//!   go to a multi-thread runtime's pool): it only dispatches activations, the lang side;
//! - one multi-thread tokio runtime ([`RUNTIME_THREADS`] threads) under it, where the SDK core
//!   spawns its pollers and tonic its connections, and one SDK `Runtime` (telemetry, the
//!   60 s worker heartbeat) for all;
//! - one `Connection` per distinct connection settings (address, TLS, client certificate,
//!   API key, CA), shared by up to [`WORKERS_PER_CONNECTION`] workers, and one `Client` per
//!   worker on it (its Temporal namespace).
//!
//! What each worker keeps of its own, as in a Pod: its identity (`1@<pod name>`, sent on every
//! poll: the SDK's per-worker `client_identity_override` over the shared connection), its task
//! queue, deployment name and build ID, its versioning (Pinned by default), its sticky queue,
//! the SDK's pollers with their normal long-poll timeout, its stop / polling pause / failure.
//!
//! Connections are shared only where the SDK allows it: it refuses two workers with the same
//! Temporal namespace, task queue and build ID on one connection, so replicas of one version
//! each get another connection (the pool keeps a slot per such triple), as separate processes
//! would have. A worker that fails retires its connection from new workers (the SDK might still
//! count the failed worker on it), as a crashed process takes its connection with it.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use futures::StreamExt as _;
use futures::future::LocalBoxFuture;
use futures::stream::FuturesUnordered;
use temporalio_client::{Client, ClientOptions, Connection};
use temporalio_sdk::{Runtime, Worker};
use tokio::sync::{mpsc, oneshot};

use crate::worker::{self, WorkerChannels, WorkerConfig, WorkerHandle};

/// Threads of the shared tokio runtime (the SDK core's pollers, gRPC): the machine's two cores.
pub const RUNTIME_THREADS: usize = 2;
/// Workers sharing one connection at most. Each idle worker keeps a few long polls open (HTTP/2
/// streams); a server may cap the streams of one connection, and a fleet of Pods would not all
/// share one anyway.
pub const WORKERS_PER_CONNECTION: usize = 50;
/// The shared connections' own identity; every worker polls with its own.
const HOST_IDENTITY: &str = "twc-worker-host";

/// Runs many workers on one thread, one runtime and a few connections. Dropping it lets the
/// host thread end once its last worker has stopped (dropping a [`WorkerHandle`] asks its worker
/// to stop).
pub struct WorkerHost {
    jobs: mpsc::UnboundedSender<Job>,
}

/// A worker to start on the host.
struct Job {
    cfg: WorkerConfig,
    channels: WorkerChannels,
}

impl std::fmt::Debug for WorkerHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHost").finish_non_exhaustive()
    }
}

impl WorkerHost {
    /// Starts the host thread and its runtimes.
    pub async fn start() -> Result<WorkerHost> {
        let (jobs, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("worker-host".into())
            .spawn(move || host_thread(rx, ready_tx))
            .context("spawning the worker host thread")?;
        ready_rx
            .await
            .context("the worker host thread ended while starting")??;
        Ok(WorkerHost { jobs })
    }

    /// Starts a worker on the host. Returns at once (a bad config fails here, as
    /// [`worker::spawn`] does); use [`WorkerHandle::wait_running`] to know when it polls.
    pub fn spawn(&self, cfg: WorkerConfig) -> Result<WorkerHandle> {
        cfg.connection_options()?;
        let (handle, channels) = worker::handle_and_channels(cfg.clone());
        self.jobs
            .send(Job { cfg, channels })
            .map_err(|_| anyhow::anyhow!("the worker host has stopped"))?;
        Ok(handle)
    }
}

/// The host thread: builds the shared runtimes, then serves jobs until the host is dropped and
/// its last worker has ended. The runtime is dropped here, off any async context.
fn host_thread(jobs: mpsc::UnboundedReceiver<Job>, ready: oneshot::Sender<Result<()>>) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_THREADS)
        .thread_name("worker-host-rt")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(
                anyhow::Error::from(e).context("building the host runtime")
            ));
            return;
        }
    };
    rt.block_on(async move {
        let sdk = match Runtime::from_current_tokio(Default::default()) {
            Ok(sdk) => Rc::new(sdk),
            Err(e) => {
                let _ = ready.send(Err(anyhow::Error::from(e).context("the SDK runtime")));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        serve(jobs, sdk).await;
    });
}

/// Drives every hosted worker on this thread (the block_on future of the host runtime).
async fn serve(mut jobs: mpsc::UnboundedReceiver<Job>, sdk: Rc<Runtime>) {
    let pools = Rc::new(Pools::default());
    let mut running: FuturesUnordered<LocalBoxFuture<'static, ()>> = FuturesUnordered::new();
    let mut open = true;
    loop {
        tokio::select! {
            job = jobs.recv(), if open => match job {
                Some(job) => running.push(Box::pin(host_worker(job, sdk.clone(), pools.clone()))),
                None => open = false,
            },
            Some(()) = running.next(), if !running.is_empty() => {}
            else => break,
        }
    }
}

async fn host_worker(job: Job, sdk: Rc<Runtime>, pools: Rc<Pools>) {
    let outcome = run_hosted(&job.cfg, &sdk, &pools, &job.channels).await;
    job.channels.finish(outcome);
}

/// [`worker::spawn`]'s worker, on a leased connection and the shared SDK runtime.
async fn run_hosted(
    cfg: &WorkerConfig,
    sdk: &Runtime,
    pools: &Pools,
    channels: &WorkerChannels,
) -> Result<()> {
    let setup = async {
        let lease = pools.lease(cfg).await?;
        let client = Client::new(
            lease.conn.clone(),
            ClientOptions::new(cfg.namespace.clone()).build(),
        )?;
        match Worker::new(sdk, client.clone(), worker::worker_options(cfg)?) {
            Ok(worker) => anyhow::Ok((lease, client, worker)),
            Err(e) => {
                lease.retire();
                Err(e.into())
            }
        }
    };
    let mut stop = channels.stop.clone();
    let (lease, client, worker) = tokio::select! {
        built = setup => built?,
        _ = stop.wait_for(|s| *s) => return Ok(()),
    };
    let outcome = worker::drive(sdk, &client, worker, cfg, channels).await;
    if outcome.is_err() {
        lease.retire();
    }
    outcome
}

/// Temporal namespace, task queue and build ID: the SDK allows one worker of each on a
/// connection.
type Slot = (String, String, String);

/// Shared connections by connection settings.
#[derive(Default)]
struct Pools {
    by_settings: Mutex<HashMap<WorkerConfig, Arc<Pool>>>,
}

/// The connections of one set of settings.
#[derive(Default)]
struct Pool {
    /// Held while dialing, so that workers starting together share the new connection.
    dialing: tokio::sync::Mutex<()>,
    shared: Mutex<Vec<Shared>>,
    next_id: AtomicU64,
}

struct Shared {
    id: u64,
    conn: Connection,
    slots: HashSet<Slot>,
}

/// A worker's place on a shared connection; dropping it frees the place.
struct Lease {
    pool: Arc<Pool>,
    id: u64,
    slot: Slot,
    conn: Connection,
}

impl Pools {
    /// A connection with room for `cfg`'s slot: a shared one, or a new one.
    async fn lease(&self, cfg: &WorkerConfig) -> Result<Lease> {
        let key = settings(cfg);
        let pool = match self.by_settings.lock() {
            Ok(mut pools) => pools.entry(key.clone()).or_default().clone(),
            Err(_) => anyhow::bail!("the connection pool is poisoned"),
        };
        let slot = (
            cfg.namespace.clone(),
            cfg.task_queue.clone(),
            cfg.build_id.clone(),
        );
        if let Some(lease) = Pool::take(&pool, &slot) {
            return Ok(lease);
        }
        let _dialing = pool.dialing.lock().await;
        if let Some(lease) = Pool::take(&pool, &slot) {
            return Ok(lease);
        }
        let conn = worker::connect(cfg, key.connection_options()?).await?;
        let id = pool.next_id.fetch_add(1, Ordering::Relaxed);
        let mut shared = pool
            .shared
            .lock()
            .map_err(|_| anyhow::anyhow!("the connection pool is poisoned"))?;
        shared.push(Shared {
            id,
            conn: conn.clone(),
            slots: HashSet::from([slot.clone()]),
        });
        drop(shared);
        Ok(Lease {
            pool: pool.clone(),
            id,
            slot,
            conn,
        })
    }
}

impl Pool {
    fn take(pool: &Arc<Pool>, slot: &Slot) -> Option<Lease> {
        let mut shared = pool.shared.lock().ok()?;
        let s = shared
            .iter_mut()
            .find(|s| s.slots.len() < WORKERS_PER_CONNECTION && !s.slots.contains(slot))?;
        s.slots.insert(slot.clone());
        Some(Lease {
            pool: pool.clone(),
            id: s.id,
            slot: slot.clone(),
            conn: s.conn.clone(),
        })
    }
}

impl Lease {
    /// No new worker gets this connection (its workers keep it).
    fn retire(&self) {
        if let Ok(mut shared) = self.pool.shared.lock() {
            shared.retain(|s| s.id != self.id);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Ok(mut shared) = self.pool.shared.lock() else {
            return;
        };
        if let Some(s) = shared.iter_mut().find(|s| s.id == self.id) {
            s.slots.remove(&self.slot);
        }
        // A connection nobody uses is closed, as a process that exits closes its own.
        shared.retain(|s| !s.slots.is_empty());
    }
}

/// The connection settings of `cfg`: what a shared connection must agree on (the worker's
/// own fields blanked, the host's identity).
fn settings(cfg: &WorkerConfig) -> WorkerConfig {
    WorkerConfig {
        identity: HOST_IDENTITY.into(),
        namespace: String::new(),
        deployment_name: String::new(),
        build_id: String::new(),
        task_queue: String::new(),
        flaky_fails: false,
        activities_per_second: None,
        unversioned: false,
        ..cfg.clone()
    }
}
