//! **Process Pods**: a Pod whose first container's `image` is one of the rig's registry
//! ([`Source::Image`], run from the image's own root by `kubelet/container_root.rs`) or one the
//! test maps to a locally built binary ([`KubeletOptions::images`], [`Source::Binary`]) runs as
//! a child process, set up from the Pod spec as a kubelet would (for an image, the command is
//! its entrypoint and `CMD` as `command`/`args` override them; the rest below holds for both):
//!
//! - **command**: the binary with the container's `args` (`$(VAR)` expanded); the image's
//!   entrypoint is the binary, so `command` replaces it only by naming the same binary. As an
//!   image's root filesystem would, the binary lives where no volume reaches: it is
//!   bind-mounted into the Pod's own directory before any volume is mounted and executed from
//!   there, so a volume over `/tmp` (or over the binary's host directory, as when the checkout
//!   or its Cargo target dir lies under `/tmp` and the chart mounts an `emptyDir` at `/tmp`)
//!   never hides it.
//! - **env**: nothing of the test process leaks in. The container's `env`/`envFrom` as the
//!   stand-in resolves them for every Pod (incl. downward-API `fieldRef`s), plus what a kubelet
//!   adds: `HOSTNAME` (the Pod name), `KUBERNETES_SERVICE_HOST`/`_PORT` (here the test API
//!   server's loopback address, [`KubeletOptions::api_server`], since nothing routes the
//!   `kubernetes` Service's ClusterIP), `PATH`, and `HOME` (the image's, which does not exist
//!   here, so no kubeconfig of the test machine is found).
//! - **volumes**, each materialised in a directory of the Pod and bind-mounted at the
//!   container's `mountPath` in a **mount namespace of the process's own** (`unshare
//!   --mount`), read-only where the mount says so, `subPath` as a single file: `secret`,
//!   `configMap`, `emptyDir`, and `projected` (what the ServiceAccount admission plugin adds as
//!   `kube-api-access-*`): `serviceAccountToken` is a real token from the TokenRequest API for
//!   the Pod's ServiceAccount, bound to the Pod, with the source's audience and expiry;
//!   `configMap` (the `kube-root-ca.crt` CA of the API server), `secret` and `downwardAPI`.
//!   So the process finds its in-cluster config exactly where kube clients look
//!   (`/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}`) and
//!   authenticates as the chart's ServiceAccount with the chart's RBAC.
//! - **`/etc/hosts`**, which a kubelet writes for every container, here with cluster DNS and
//!   kube-proxy folded in: the Pod's name and every Service of the cluster as the container
//!   start finds them (`<name>` in the Pod's namespace, `<name>.<namespace>.svc[.cluster.local]`)
//!   resolve to loopback, where process Pods listen. So a Pod that calls a Service by its DNS
//!   name (the chart's `helm test` Pod asks `http://<fullname>.<namespace>.svc:<port>/readyz`)
//!   reaches the process Pod listening on that port: only a Service whose `port` equals its
//!   Pods' container port is reachable this way, and any listener on that port answers.
//! - **run to completion**: a container that exits is restarted or not as `restartPolicy` says
//!   (the stand-in's rule for every Pod), so a `restartPolicy: Never` Pod ends `Succeeded` on
//!   exit code 0 and `Failed` otherwise, as `helm test` waits for.
//! - **readiness** from the container's `readinessProbe` (`httpGet` on `127.0.0.1`, port by
//!   number or by the container port's name; `initialDelaySeconds`, `periodSeconds`,
//!   `timeoutSeconds`, `failureThreshold`, `successThreshold`), Ready at once without one.
//! - **exit and stop**: an exit is the container's (the exit code, `128 + signal` when killed,
//!   the log's tail as the message: `FallbackToLogsOnError`), restarted by the stand-in's
//!   back-off as any container. Deleting the Pod sends `SIGTERM`, then `SIGKILL` after the
//!   grace period. stdout and stderr go to `<pod dir>/container.log` (printed on exit).
//!
//! What it skips, stated once: network namespaces (the process shares the test machine's
//! network and listens on the ports its flags say, on every address: two Pods listening on the
//! same port conflict as with `hostNetwork: true`, so a test gives Pods that overlap, such as
//! the old and new Pod of a rolling update, different ports through the chart's values; the Pod
//! IP is only reported), PID/user/IPC namespaces, cgroups and resource limits, the
//! `securityContext` for a mapped binary (it runs as the test's user; `readOnlyRootFilesystem`
//! is not enforced; an image of the rig's registry runs as its user on its own, optionally
//! read-only, root: `kubelet/container_root.rs`), liveness and startup probes, `exec`/`tcpSocket`/`grpc` probes, token rotation
//! (tokens live for the source's `expirationSeconds`, an hour by default: longer than any
//! test), updates of mounted Secrets after the start (volumes are set up anew at each container
//! start, so an `emptyDir` does not survive a restart), `hostPath` and other volume types,
//! service-link env vars, and every container but the first.
//!
//! The mount namespace needs `unshare` and `mount` (util-linux) and `CAP_SYS_ADMIN`: the test
//! machines run the tests as root. A mount point that does not exist on the machine (such as
//! `/var/run/secrets/kubernetes.io/serviceaccount`) is created there as an empty directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    Container, KeyToPath, PodSpec, Probe, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::{PodActor, expand, secret_data};

/// What a running process Pod's container is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ProcState {
    Running { ready: bool },
    Exited { code: i32, message: String },
}

/// One run of a process Pod's container.
pub(super) struct Process {
    state: watch::Receiver<ProcState>,
    /// Dropped (with the Process): the supervisor kills the child at once.
    stop: Option<oneshot::Sender<Duration>>,
    _tasks: Vec<JoinHandle<()>>,
}

/// Bytes of the log's tail reported as the termination message.
const LOG_TAIL: usize = 2048;
/// A probe's `timeoutSeconds` when unset (the API's default).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

impl Process {
    pub(super) fn state(&self) -> ProcState {
        self.state.borrow().clone()
    }

    /// Resolves when the state may have changed (never, once the process is gone).
    pub(super) async fn changed(&mut self) {
        if self.state.changed().await.is_err() {
            futures::future::pending::<()>().await;
        }
    }

    /// `SIGTERM`, then `SIGKILL` after `grace`; `true` if the process exited 0 within it.
    pub(super) async fn stop(&mut self, grace: Duration) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(grace);
        }
        let ended = self
            .state
            .wait_for(|s| matches!(s, ProcState::Exited { .. }))
            .await
            .map(|s| matches!(*s, ProcState::Exited { code: 0, .. }));
        matches!(ended, Ok(true))
    }
}

/// What a process Pod's container runs.
pub(super) enum Source {
    /// A local binary standing for the image (it is the entrypoint; `command` is ignored).
    Binary(PathBuf),
    /// An image pulled from the rig's registry, run from its own root file system
    /// (`kubelet/container_root.rs`).
    Image(super::image::Image),
}

/// What the container runs as a process Pod: the image pulled from the rig's registry, else
/// the binary the test mapped its image to; `None`: not a process Pod.
pub(super) fn source_for(
    actor: &PodActor,
    container: &Container,
    pulled: Option<super::image::Image>,
) -> Option<Source> {
    if let Some(image) = pulled {
        return Some(Source::Image(image));
    }
    let image = container.image.as_deref()?;
    let binary = actor.ctx.options.images.get(image)?;
    Some(Source::Binary(binary.clone()))
}

/// Sets up the container's volumes and starts the process. `Err`: why the container cannot
/// start yet (the kubelet's `ContainerCreating` / `CreateContainerConfigError` message).
pub(super) async fn start(
    actor: &PodActor,
    spec: &PodSpec,
    container: &Container,
    source: &Source,
    mut env: BTreeMap<String, String>,
) -> Result<Process, String> {
    let dir = pod_dir(actor);
    let _ = std::fs::remove_dir_all(&dir);
    let vol_dir = dir.join("vol");
    std::fs::create_dir_all(&vol_dir).map_err(|e| format!("pod dir: {e}"))?;
    let mut mounts = volume_binds(actor, spec, container, &vol_dir).await?;
    let hosts = etc_hosts(actor).await?;
    std::fs::write(vol_dir.join(HOSTS_FILE), hosts).map_err(|e| format!("/etc/hosts: {e}"))?;
    mounts.push(Bind {
        source: HOSTS_FILE.into(),
        target: "/etc/hosts".into(),
        read_only: true,
        file: true,
    });
    add_kubelet_env(actor, source, &mut env)?;
    let log = dir.join("container.log");
    let child = match source {
        Source::Binary(binary) => {
            let args: Vec<String> = container
                .args
                .iter()
                .flatten()
                .map(|a| expand(a, &env))
                .collect();
            spawn(binary, &args, &env, &vol_dir, &mounts, &log)?
        }
        Source::Image(image) => {
            super::container_root::spawn(image, spec, container, &env, &vol_dir, &mounts, &log)?
        }
    };
    let (state_tx, state) = watch::channel(ProcState::Running { ready: false });
    let (stop_tx, stop_rx) = oneshot::channel();
    let mut tasks = vec![tokio::spawn(supervise(
        child,
        stop_rx,
        state_tx.clone(),
        log,
    ))];
    match container
        .readiness_probe
        .as_ref()
        .and_then(|p| http_target(p, container))
    {
        Some((port, path, probe)) => {
            tasks.push(tokio::spawn(probe_readiness(port, path, probe, state_tx)));
        }
        None => {
            state_tx.send_if_modified(|s| {
                let running = matches!(s, ProcState::Running { ready: false });
                if running {
                    *s = ProcState::Running { ready: true };
                }
                running
            });
        }
    }
    Ok(Process {
        state,
        stop: Some(stop_tx),
        _tasks: tasks,
    })
}

/// What a kubelet adds to the container's env, and the image's `ENV` under the container's own.
fn add_kubelet_env(
    actor: &PodActor,
    source: &Source,
    env: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(api_server) = actor.ctx.options.api_server.clone() else {
        return Err("the kubelet stand-in was started without KubeletOptions::api_server".into());
    };
    env.insert("HOSTNAME".into(), actor.name.clone());
    env.insert("KUBERNETES_SERVICE_HOST".into(), api_server.0);
    env.insert("KUBERNETES_SERVICE_PORT".into(), api_server.1.to_string());
    if let Source::Image(image) = source {
        for (k, v) in image.env.iter().filter_map(|kv| kv.split_once('=')) {
            env.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    env.entry("PATH".into())
        .or_insert_with(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    env.entry("HOME".into())
        .or_insert_with(|| "/home/nonroot".into());
    Ok(())
}

/// Materialises the container's volumes in the Pod's `vol` directory: their bind mounts.
async fn volume_binds(
    actor: &PodActor,
    spec: &PodSpec,
    container: &Container,
    vol_dir: &Path,
) -> Result<Vec<Bind>, String> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| format!("volume {:?} not found in the Pod spec", mount.name))?;
        let source = vol_dir.join(&volume.name);
        if !source.exists() {
            let files = volume_files(actor, spec, volume).await?;
            write_files(&source, &files).map_err(|e| format!("volume {:?}: {e}", volume.name))?;
            if volume.empty_dir.is_some() {
                // A kubelet makes an emptyDir world-writable: the container may run as any user.
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o777))
                    .map_err(|e| format!("volume {:?}: {e}", volume.name))?;
            }
        }
        mounts.push(bind_of(mount, &volume.name));
    }
    Ok(mounts)
}

/// The Pod's `/etc/hosts`, relative to its `vol` directory.
const HOSTS_FILE: &str = ".etc-hosts";

/// The kubelet-managed `/etc/hosts` of the container, with cluster DNS and kube-proxy folded
/// in: every Service's names (`<name>`, in the Pod's namespace, `<name>.<namespace>.svc` and
/// `<name>.<namespace>.svc.cluster.local`) resolve to loopback, where process Pods listen.
async fn etc_hosts(actor: &PodActor) -> Result<String, String> {
    use k8s_openapi::api::core::v1::Service;
    let services = Api::<Service>::all(actor.ctx.client.clone())
        .list(&Default::default())
        .await
        .map_err(|e| format!("listing Services for /etc/hosts: {e}"))?;
    let mut hosts = format!(
        "# Kubernetes-managed hosts file (kubelet stand-in).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.0.1\t{}\n",
        actor.name
    );
    for svc in services.items {
        let (Some(name), Some(ns)) = (svc.metadata.name, svc.metadata.namespace) else {
            continue;
        };
        let short = if ns == actor.namespace {
            name.as_str()
        } else {
            ""
        };
        hosts.push_str(&format!(
            "127.0.0.1\t{name}.{ns}.svc {name}.{ns}.svc.cluster.local {short}\n"
        ));
    }
    Ok(hosts)
}

fn pod_dir(actor: &PodActor) -> PathBuf {
    std::env::temp_dir()
        .join(format!("{}-pods", actor.ctx.node))
        .join(format!("{}_{}_{}", actor.namespace, actor.name, actor.uid))
}

/// One bind mount: the volume's directory (or a file of it) at the container's path.
pub(super) struct Bind {
    /// Relative to the Pod's `vol` directory.
    pub(super) source: String,
    pub(super) target: String,
    pub(super) read_only: bool,
    pub(super) file: bool,
}

fn bind_of(mount: &VolumeMount, volume: &str) -> Bind {
    let sub = mount
        .sub_path
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_matches('/'));
    Bind {
        source: match sub {
            Some(s) => format!("{volume}/{s}"),
            None => volume.to_string(),
        },
        target: mount.mount_path.trim_end_matches('/').to_string(),
        read_only: mount.read_only == Some(true),
        file: sub.is_some(),
    }
}

/// The files of a volume (relative path → bytes); an `emptyDir` is an empty map.
async fn volume_files(
    actor: &PodActor,
    spec: &PodSpec,
    volume: &Volume,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let setup_failed = |why: String| {
        format!(
            "MountVolume.SetUp failed for volume {:?} : {why}",
            volume.name
        )
    };
    if volume.empty_dir.is_some() {
        return Ok(BTreeMap::new());
    }
    if let Some(s) = &volume.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let data = actor.secret(&name).map(|s| secret_data(&s));
        return pick(
            data,
            s.items.as_deref(),
            s.optional == Some(true),
            "secret",
            &name,
        )
        .map_err(setup_failed);
    }
    if let Some(c) = &volume.config_map {
        let data = config_map_data(actor, &c.name);
        return pick(
            data,
            c.items.as_deref(),
            c.optional == Some(true),
            "configmap",
            &c.name,
        )
        .map_err(setup_failed);
    }
    if let Some(p) = &volume.projected {
        let mut files = BTreeMap::new();
        for source in p.sources.iter().flatten() {
            if let Some(t) = &source.service_account_token {
                let token = request_token(actor, spec, t.audience.clone(), t.expiration_seconds)
                    .await
                    .map_err(setup_failed)?;
                files.insert(t.path.clone(), token.into_bytes());
            }
            if let Some(c) = &source.config_map {
                let data = config_map_data(actor, &c.name);
                let optional = c.optional == Some(true);
                files.extend(
                    pick(data, c.items.as_deref(), optional, "configmap", &c.name)
                        .map_err(setup_failed)?,
                );
            }
            if let Some(s) = &source.secret {
                let data = actor.secret(&s.name).map(|s| secret_data(&s));
                let optional = s.optional == Some(true);
                files.extend(
                    pick(data, s.items.as_deref(), optional, "secret", &s.name)
                        .map_err(setup_failed)?,
                );
            }
            for item in source
                .downward_api
                .iter()
                .flat_map(|d| d.items.iter().flatten())
            {
                if let Some(f) = &item.field_ref {
                    files.insert(item.path.clone(), actor.field(&f.field_path).into_bytes());
                }
            }
        }
        return Ok(files);
    }
    Err(setup_failed(
        "volume type not supported by the kubelet stand-in".into(),
    ))
}

fn config_map_data(actor: &PodActor, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    actor.config_map(name).map(|cm| config_map_bytes(&cm))
}

/// A ConfigMap's `data` and `binaryData` as one map of file contents, as a kubelet mounts it.
pub(super) fn config_map_bytes(
    cm: &k8s_openapi::api::core::v1::ConfigMap,
) -> BTreeMap<String, Vec<u8>> {
    let mut d: BTreeMap<String, Vec<u8>> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in cm.binary_data.iter().flatten() {
        d.insert(k.clone(), v.0.clone());
    }
    d
}

/// The keys of a Secret or ConfigMap as files: all of them, or `items` under their paths.
fn pick(
    data: Option<BTreeMap<String, Vec<u8>>>,
    items: Option<&[KeyToPath]>,
    optional: bool,
    kind: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut data = match data {
        Some(d) => d,
        None if optional => return Ok(BTreeMap::new()),
        None => return Err(format!("{kind} \"{name}\" not found")),
    };
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        return Ok(data);
    };
    let mut files = BTreeMap::new();
    for item in items {
        match data.remove(&item.key) {
            Some(bytes) => {
                files.insert(item.path.clone(), bytes);
            }
            None if optional => {}
            None => return Err(format!("references non-existent {kind} key: {}", item.key)),
        }
    }
    Ok(files)
}

/// A token for the Pod's ServiceAccount from the TokenRequest API, bound to the Pod (it stops
/// working when the Pod is deleted), as the kubelet requests it for a projected volume.
async fn request_token(
    actor: &PodActor,
    spec: &PodSpec,
    audience: Option<String>,
    expiration_seconds: Option<i64>,
) -> Result<String, String> {
    let sa = spec
        .service_account_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".into());
    let req = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: audience.filter(|a| !a.is_empty()).map(|a| vec![a]),
            expiration_seconds: Some(expiration_seconds.unwrap_or(3607)),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(actor.name.clone()),
                uid: Some(actor.uid.clone()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(actor.ctx.client.clone(), &actor.namespace);
    let minted = api
        .create_token_request(&sa, &PostParams::default(), &req)
        .await
        .map_err(|e| format!("TokenRequest for ServiceAccount {sa}: {e}"))?;
    minted
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("TokenRequest for ServiceAccount {sa} returned no token"))
}

fn write_files(dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (rel, bytes) in files {
        let path = dir.join(rel.trim_start_matches('/'));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    Ok(())
}

/// `'…'` for `sh`.
/// The shell lines that mount one volume at `dst` (already quoted): the mount point made (an
/// empty file for a file volume), the bind, then read-only if asked.
pub(super) fn bind_mount(b: &Bind, dst: &str) -> String {
    let src = quote(&format!("./{}", b.source));
    let point = if b.file {
        format!("mkdir -p \"$(dirname {dst})\"\n[ -e {dst} ] || : > {dst}\n")
    } else {
        format!("mkdir -p {dst}\n")
    };
    let ro = if b.read_only {
        format!("mount -o remount,ro,bind {dst}\n")
    } else {
        String::new()
    };
    format!("{point}mount --no-canonicalize --bind {src} {dst}\n{ro}")
}

pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Where, relative to the Pod's `vol` directory, the image's binary is bind-mounted before any
/// volume: the container's own root filesystem, which no volume mount can cover.
const IMAGE_ROOT: &str = ".image";

/// The shell script run inside the new mount namespace (`$1`: the binary, then its args):
/// the binary bind-mounted into [`IMAGE_ROOT`] first, then the volumes' bind mounts (parents
/// before children), then `exec` of the binary from [`IMAGE_ROOT`]. Every path the script uses
/// after the first mount is relative to the working directory (the Pod's `vol` directory) and
/// not canonicalised: a volume mounted over `/tmp` (or over the directory holding the binary)
/// hides neither the sources of later mounts nor the binary, since the working directory
/// keeps pointing into the file system as it was before the mounts, as an image's root
/// filesystem would be.
fn mount_script(binary_name: &str, mounts: &[Bind]) -> String {
    let mut sorted: Vec<&Bind> = mounts.iter().collect();
    sorted.sort_by_key(|b| b.target.matches('/').count());
    let entrypoint = quote(&format!("./{IMAGE_ROOT}/{binary_name}"));
    let mut script = format!(
        "set -e\nmkdir -p ./{IMAGE_ROOT}\n: > {entrypoint}\n\
         mount --no-canonicalize --bind \"$1\" {entrypoint}\nshift\n"
    );
    for b in sorted {
        script.push_str(&bind_mount(b, &quote(&b.target)));
    }
    script.push_str(&format!("exec {entrypoint} \"$@\"\n"));
    script
}

fn spawn(
    binary: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    vol_dir: &Path,
    mounts: &[Bind],
    log: &Path,
) -> Result<tokio::process::Child, String> {
    let out = std::fs::File::create(log).map_err(|e| format!("container log: {e}"))?;
    let err = out.try_clone().map_err(|e| format!("container log: {e}"))?;
    let name = binary
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("entrypoint");
    tokio::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(mount_script(name, mounts))
        .arg("sh")
        .arg(binary)
        .args(args)
        .env_clear()
        .envs(env)
        .current_dir(vol_dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {} under unshare: {e}", binary.display()))
}

/// Waits for the child to exit (or to be stopped) and reports how it ended.
async fn supervise(
    mut child: tokio::process::Child,
    stop: oneshot::Receiver<Duration>,
    state: watch::Sender<ProcState>,
    log: PathBuf,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        grace = stop => {
            // A dropped sender (the Pod actor went away) means: no grace.
            let grace = grace.unwrap_or(Duration::ZERO);
            if let Some(pid) = child.id() {
                let _ = tokio::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            }
        }
    };
    let code = match status {
        Ok(s) => s.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt as _;
            128 + s.signal().unwrap_or(9)
        }),
        Err(_) => 128 + 9,
    };
    // The container's copy of its image's root (`kubelet/container_root.rs`) goes with the
    // container, as its writable layer would; the next start copies it afresh.
    if let Some(dir) = log.parent() {
        let _ = std::fs::remove_dir_all(dir.join("vol/.root"));
    }
    let text = std::fs::read(&log).unwrap_or_default();
    let tail = &text[text.len().saturating_sub(LOG_TAIL)..];
    let message = String::from_utf8_lossy(tail).into_owned();
    tracing::info!(log = %log.display(), code, "process Pod container exited");
    state.send_replace(ProcState::Exited { code, message });
}

/// Port, path and the probe itself, for an `httpGet` readiness probe.
fn http_target(probe: &Probe, container: &Container) -> Option<(u16, String, Probe)> {
    let get = probe.http_get.as_ref()?;
    let port = match &get.port {
        IntOrString::Int(p) => u16::try_from(*p).ok()?,
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())?,
    };
    let path = get.path.clone().unwrap_or_else(|| "/".into());
    Some((port, path, probe.clone()))
}

fn seconds(v: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(v.and_then(|s| u64::try_from(s).ok()).unwrap_or(default))
}

/// The kubelet's readiness prober: after `initialDelaySeconds`, one GET every `periodSeconds`;
/// `successThreshold` successes in a row make the container Ready, `failureThreshold`
/// failures in a row unready.
async fn probe_readiness(port: u16, path: String, probe: Probe, state: watch::Sender<ProcState>) {
    let period = seconds(probe.period_seconds, 10).max(Duration::from_secs(1));
    let timeout = probe
        .timeout_seconds
        .map_or(PROBE_TIMEOUT, |s| seconds(Some(s), 1));
    let success_needed = probe.success_threshold.unwrap_or(1).max(1);
    let failure_needed = probe.failure_threshold.unwrap_or(3).max(1);
    tokio::time::sleep(seconds(probe.initial_delay_seconds, 0)).await;
    let (mut successes, mut failures) = (0, 0);
    loop {
        if matches!(*state.borrow(), ProcState::Exited { .. }) {
            return;
        }
        let ok = matches!(
            tokio::time::timeout(timeout, http_get(port, &path)).await,
            Ok(Ok(code)) if (200..400).contains(&code)
        );
        if ok {
            (successes, failures) = (successes + 1, 0);
        } else {
            (successes, failures) = (0, failures + 1);
        }
        let ready = if successes >= success_needed {
            Some(true)
        } else if failures >= failure_needed {
            Some(false)
        } else {
            None
        };
        if let Some(ready) = ready {
            state.send_if_modified(|s| match s {
                ProcState::Running { ready: r } if *r != ready => {
                    *r = ready;
                    true
                }
                _ => false,
            });
        }
        tokio::time::sleep(period).await;
    }
}

/// The status code of `GET path` on `127.0.0.1:port`.
async fn http_get(port: u16, path: &str) -> std::io::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/twc-standin\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = vec![0u8; 64];
    let n = stream.read(&mut head).await?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {line}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_go_parents_first_and_quote_paths() {
        let script = mount_script(
            "twc",
            &[
                Bind {
                    source: "certs".into(),
                    target: "/tmp/k8s-webhook-server/serving-certs".into(),
                    read_only: true,
                    file: false,
                },
                Bind {
                    source: "tmp".into(),
                    target: "/tmp".into(),
                    read_only: false,
                    file: false,
                },
            ],
        );
        let tmp = script.find("'./tmp' '/tmp'").expect("tmp mount");
        let certs = script.find("'./certs'").expect("certs mount");
        assert!(tmp < certs, "{script}");
        assert!(script.contains("remount,ro,bind '/tmp/k8s-webhook-server/serving-certs'"));
        // The binary comes first, from its host path, before any volume can cover it; it is
        // executed from the Pod's own copy of the image root, never from the host path.
        let image = script
            .find("--bind \"$1\" './.image/twc'")
            .expect("binary mount");
        assert!(image < tmp, "{script}");
        assert!(script.ends_with("exec './.image/twc' \"$@\"\n"), "{script}");
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn a_readiness_probe_port_is_found_by_number_or_by_name() {
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "manager",
            "ports": [{"name": "http", "containerPort": 8080}],
        }))
        .expect("container");
        let probe = |port: serde_json::Value| -> Probe {
            serde_json::from_value(
                serde_json::json!({"httpGet": {"path": "/readyz", "port": port}}),
            )
            .expect("probe")
        };
        let by_name = http_target(&probe(serde_json::json!("http")), &container);
        assert_eq!(
            by_name.map(|t| (t.0, t.1)),
            Some((8080, "/readyz".to_string()))
        );
        let by_number = http_target(&probe(serde_json::json!(9090)), &container);
        assert_eq!(by_number.map(|t| t.0), Some(9090));
        assert!(http_target(&probe(serde_json::json!("metrics")), &container).is_none());
    }
}
