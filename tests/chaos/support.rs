//! What the chaos suite's binaries share (`tests/chaos.rs`, `tests/chaos_seeded.rs`): the rig
//! (control plane, Temporal, kubelet stand-in, invariant checker) and the controller run as a
//! child process with its own credentials, so that it can be SIGKILLed and its writes told
//! apart in the audit log.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use kube::api::Api;
use serde_json::{Value, json};
use temporal_worker_controller::api::{KindSet, TemporalWorkerDeployment};
use test_harness::control_plane::{self, ControlPlane};
use test_harness::invariants::{Checker, CheckerOptions};
use test_harness::kubelet::Kubelet;
use test_harness::supervise::free_port;
use test_harness::temporal_server::{self, DevServer};
use test_harness::{manifests, world};

/// The controllers' Temporal identity (both processes: one install).
pub const IDENTITY: &str = "twc-chaos";
/// The Lease both processes compete for.
pub const LEASE: &str = "twc-chaos";
/// How often the checker polls Temporal's routing, per worker deployment.
pub const POLL: Duration = Duration::from_millis(500);

/// Control plane, Temporal, the stand-in and the checker.
pub struct Rig {
    pub plane: &'static ControlPlane,
    pub admin: kube::Client,
    pub temporal: &'static DevServer,
    pub kubelet: Arc<Kubelet>,
    pub checker: Checker,
}

impl Rig {
    pub async fn start() -> Result<Rig> {
        let (plane, admin) = control_plane::shared_with_crds().await?;
        let temporal = temporal_server::shared().await?;
        let kubelet = Arc::new(Kubelet::start(admin.clone()).await?);
        let checker = Checker::start(CheckerOptions {
            client: admin.clone(),
            temporal: temporal.connect("twc-chaos-checker").await?,
            kind: "TemporalWorkerDeployment",
            poll: POLL,
            kubelet: kubelet.clone(),
        });
        Ok(Rig {
            plane,
            admin,
            temporal,
            kubelet,
            checker,
        })
    }

    /// A namespace with Connection `temporal` to `temporal_address` and Temporal namespace
    /// `temporal_ns`.
    pub async fn namespace(
        &self,
        ns: &str,
        temporal_ns: &str,
        temporal_address: &str,
    ) -> Result<()> {
        self.temporal.create_namespace(temporal_ns).await?;
        world::create_namespace(&self.admin, ns).await?;
        world::apply(
            &self.admin,
            ns,
            "chaos-test",
            manifests::connection("temporal", temporal_address),
        )
        .await
    }

    /// A kubeconfig for controller user `user` (its own client certificate, cluster-admin
    /// group), talking to `server` (the API server itself, or a proxy in front of it).
    pub fn controller_kubeconfig(&self, user: &str, server: Option<SocketAddr>) -> Result<PathBuf> {
        let path = self.plane.user_kubeconfig(user, Some("system:masters"))?;
        if let Some(proxy) = server {
            let text = std::fs::read_to_string(&path)?;
            let replaced = text.replace(self.plane.server(), &format!("https://{proxy}"));
            if replaced == text {
                bail!(
                    "kubeconfig {} does not name {}",
                    path.display(),
                    self.plane.server()
                );
            }
            std::fs::write(&path, replaced)?;
        }
        Ok(path)
    }
}

/// The controller binary as a child process (killed with SIGKILL on drop).
pub struct Controller {
    pub name: String,
    pub user: String,
    pub kubeconfig: PathBuf,
    pub http: SocketAddr,
    pub log: PathBuf,
    child: Option<Child>,
    /// Starts so far (restarts + 1).
    pub starts: u32,
    /// The Lease it competes for, and flags beyond the common ones (e.g. a shard's).
    lease: String,
    extra: Vec<String>,
}

impl Controller {
    /// Starts `temporal-worker-controller run` as `user` (its kubeconfig) with pod name `name`,
    /// leader election on [`LEASE`] in `lease_ns`, logs appended to a file.
    pub fn start(name: &str, user: &str, kubeconfig: &Path, lease_ns: &str) -> Result<Controller> {
        Controller::start_with(name, user, kubeconfig, (lease_ns, LEASE), Vec::new())
    }

    /// [`Controller::start`] on Lease `lease` in `lease_ns`, with `extra` flags.
    pub fn start_with(
        name: &str,
        user: &str,
        kubeconfig: &Path,
        (lease_ns, lease): (&str, &str),
        extra: Vec<String>,
    ) -> Result<Controller> {
        let log = std::env::temp_dir().join(format!("twc-chaos-{}-{name}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let mut c = Controller {
            name: name.into(),
            user: user.into(),
            kubeconfig: kubeconfig.into(),
            http: SocketAddr::from(([127, 0, 0, 1], free_port()?)),
            log,
            child: None,
            starts: 0,
            lease: lease.into(),
            extra,
        };
        c.spawn(lease_ns)?;
        Ok(c)
    }

    fn spawn(&mut self, lease_ns: &str) -> Result<()> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
            .args([
                "run",
                "--leader-elect",
                "--lease-name",
                &self.lease,
                "--lease-namespace",
                lease_ns,
            ])
            .args([
                "--http-addr",
                &self.http.to_string(),
                "--pod-name",
                &self.name,
            ])
            .args([
                "--identity",
                IDENTITY,
                "--idle-interval",
                "5s",
                "--rest-interval",
                "20s",
                "--fast-poll",
                "300ms",
            ])
            .args([
                "--owned-resource-kinds-without-access-check",
                "PodDisruptionBudget",
            ])
            .args(["--backlog-poll-interval", "0s", "--log-format", "json"])
            .args(&self.extra)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "info,temporal_worker_controller=debug")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("spawning the controller binary")?;
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM (graceful: releases the Lease), and wait up to 30 s for the exit.
    pub fn terminate(&mut self) -> Result<()> {
        let Some(mut c) = self.child.take() else {
            return Ok(());
        };
        Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()?;
        let begin = Instant::now();
        while c.try_wait()?.is_none() {
            if begin.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                let _ = c.wait();
                bail!("{} still running 30 s after SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Starts the process again (same user, port and log file).
    pub fn restart(&mut self, lease_ns: &str) -> Result<()> {
        self.kill();
        self.spawn(lease_ns)
    }

    /// Whether the process says it leads (its `leader` gauge); false if unreachable.
    pub async fn is_leader(&self) -> bool {
        match test_harness::loopback_http::get(self.http, "/metrics", "text/plain", None).await {
            Ok((200, body)) => body
                .lines()
                .any(|l| l.trim() == "temporal_worker_controller_leader 1"),
            _ => false,
        }
    }

    /// Waits until the process serves `/metrics` (at most 60 s); fails with its log tail if it
    /// exits first.
    pub async fn wait_serving(&mut self) -> Result<()> {
        let begin = Instant::now();
        loop {
            self.check_alive()?;
            let answer =
                test_harness::loopback_http::get(self.http, "/metrics", "text/plain", None).await;
            if matches!(answer, Ok((200, _))) {
                return Ok(());
            }
            if begin.elapsed() > Duration::from_secs(60) {
                bail!(
                    "controller {} does not serve /metrics after 60 s",
                    self.name
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// An error naming the process if it exited on its own.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(c) = self.child.as_mut()
            && let Some(status) = c.try_wait()?
        {
            bail!(
                "controller {} exited ({status}); log tail:\n{}",
                self.name,
                test_harness::supervise::log_tail(&self.log)
            );
        }
        Ok(())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until one of `controllers` leads; returns its index.
pub async fn wait_leader(controllers: &[&Controller], within: Duration) -> Result<usize> {
    let begin = Instant::now();
    loop {
        for (i, c) in controllers.iter().enumerate() {
            if c.is_leader().await {
                return Ok(i);
            }
        }
        if begin.elapsed() > within {
            bail!("no controller leads after {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A worker deployment with one replica polling task queue `name`, at image tag `tag`.
pub fn twd(name: &str, tag: &str, temporal_ns: &str, rollout: Value) -> Value {
    manifests::twd(name)
        .replicas(1)
        .tag(tag)
        .task_queue(name)
        .temporal_namespace(temporal_ns)
        .rollout(rollout)
        .sunset("5s", "10s")
        .build()
}

/// A Progressive rollout through `steps` (ramp %, pause), with a gate if asked.
pub fn progressive(steps: &[(u32, &str)], gate: bool) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(ramp, pause)| json!({"rampPercentage": ramp, "pauseDuration": pause}))
        .collect();
    let mut r = json!({"strategy": "Progressive", "steps": steps});
    if gate {
        r["gate"] = json!({"workflowType": "gate"});
    }
    r
}

pub fn twds(client: &kube::Client, ns: &str) -> Api<TemporalWorkerDeployment> {
    TemporalWorkerDeployment::api(client.clone(), ns, KindSet::Seed)
}

/// The condition `type_` of a worker deployment, as (status, reason, message).
pub fn condition(t: &TemporalWorkerDeployment, type_: &str) -> Option<(String, String, String)> {
    t.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Ready=True/RolloutComplete for the current generation, with `build` Current (if given).
pub fn complete(t: &TemporalWorkerDeployment, build: Option<&str>) -> bool {
    let ready =
        condition(t, "Ready").is_some_and(|(s, r, _)| s == "True" && r == "RolloutComplete");
    let observed = t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation;
    let current = current_build(t);
    ready && observed && build.is_none_or(|b| current.as_deref() == Some(b))
}

pub fn current_build(t: &TemporalWorkerDeployment) -> Option<String> {
    Some(
        t.status
            .as_ref()?
            .current_version
            .as_ref()?
            .build_id
            .clone(),
    )
}

pub fn target_build(t: &TemporalWorkerDeployment) -> Option<String> {
    Some(
        t.status
            .as_ref()?
            .target_version
            .as_ref()?
            .version
            .build_id
            .clone(),
    )
}
