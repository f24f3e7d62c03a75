//! Runs a process Pod's container **from its image's own root file system**, as a container
//! runtime would, once `kubelet/image.rs` has pulled and unpacked the image:
//!
//! - **Root**: the unpacked image is copied into the Pod's directory (`vol/.root`) at every
//!   container start (a fresh writable layer: nothing a container writes survives its restart).
//! - **Mount namespace** of its own (`unshare --mount --propagation private`): the root
//!   bind-mounted onto itself; `/proc` (the machine's, bound recursively); a minimal `/dev` (a
//!   tmpfs with `null`, `zero`, `full`, `random`, `urandom`, `tty` bound from the machine, a
//!   `shm` tmpfs and the `fd`/`stdin`/`stdout`/`stderr` links); the Pod's volumes and
//!   `/etc/hosts` at their `mountPath`s inside the root (read-only where the mount says so);
//!   then the root remounted read-only when `securityContext.readOnlyRootFilesystem` is set.
//! - **Process**: `unshare --root --wd --setgid --setuid`: chroot into the root, the working
//!   directory (`workingDir`, else the image's, else `/`), supplementary groups dropped, the gid
//!   and uid of the `securityContext` (`runAsUser`/`runAsGroup`, container over Pod) or of the
//!   image's `USER` (a non-root uid has no capabilities left), and `exec` of the entrypoint and
//!   command as Kubernetes combines them with the container's `command`/`args` (`$(VAR)`
//!   expanded). `runAsNonRoot` with uid 0 does not start (the kubelet's message).
//!
//! Skipped: PID, network, IPC, UTS, user and cgroup namespaces (the process shares the
//! machine's network, as with `hostNetwork: true`, and sees its processes), cgroups and
//! resource limits, `capabilities` add/drop, `allowPrivilegeEscalation` (no `no_new_privs`),
//! seccomp and AppArmor profiles, `supplementalGroups`, `fsGroup` (volume files keep the
//! stand-in's modes: files 0644, `emptyDir` 0777), `/sys`, `/dev/pts`, masked and read-only
//! `/proc` paths, and image layers shared between containers (each start copies the root).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::controller_pod::{Bind, bind_mount, quote};
use super::expand;
use super::image::{self, Image};

/// The container's root, relative to the Pod's `vol` directory.
const ROOT: &str = ".root";

/// Copies the image's root into the Pod's directory and starts the container in it.
pub(super) fn spawn(
    image: &Image,
    spec: &PodSpec,
    container: &Container,
    env: &BTreeMap<String, String>,
    vol_dir: &Path,
    mounts: &[Bind],
    log: &Path,
) -> Result<tokio::process::Child, String> {
    let pod_sc = spec.security_context.as_ref();
    let sc = container.security_context.as_ref();
    let (uid, gid) = image::run_as(
        image,
        sc.and_then(|s| s.run_as_user)
            .or_else(|| pod_sc.and_then(|s| s.run_as_user)),
        sc.and_then(|s| s.run_as_group)
            .or_else(|| pod_sc.and_then(|s| s.run_as_group)),
    )?;
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod_sc.and_then(|s| s.run_as_non_root));
    if non_root == Some(true) && uid == 0 {
        return Err("container has runAsNonRoot and image will run as root".into());
    }
    let read_only = sc.and_then(|s| s.read_only_root_filesystem) == Some(true);
    let expand_all = |v: &Option<Vec<String>>| -> Option<Vec<String>> {
        v.as_ref()
            .map(|v| v.iter().map(|a| expand(a, env)).collect())
    };
    let argv = image::argv(
        image,
        expand_all(&container.command).as_deref(),
        expand_all(&container.args).as_deref(),
    );
    if argv.is_empty() {
        return Err("no command specified".into());
    }
    let wd = container
        .working_dir
        .clone()
        .filter(|w| !w.is_empty())
        .or_else(|| Some(image.working_dir.clone()).filter(|w| !w.is_empty()))
        .unwrap_or_else(|| "/".into());
    copy_root(&image.root, &vol_dir.join(ROOT))?;
    let out = std::fs::File::create(log).map_err(|e| format!("container log: {e}"))?;
    let err = out.try_clone().map_err(|e| format!("container log: {e}"))?;
    tokio::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(script(mounts, read_only, &wd, uid, gid))
        .arg("sh")
        .args(&argv)
        .env_clear()
        .envs(env)
        .current_dir(vol_dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {argv:?} of {} under unshare: {e}", image.digest))
}

/// `cp -a` of the unpacked image (ownership, modes and links as the layers say).
fn copy_root(from: &Path, to: &Path) -> Result<(), String> {
    let out = std::process::Command::new("cp")
        .args(["-a", "--reflink=auto"])
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| format!("copying the image root: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "copying the image root: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The script run in the new mount namespace (working directory: the Pod's `vol` directory;
/// `$@`: the container's argv): the mounts described in the module docs, then the `exec`.
fn script(mounts: &[Bind], read_only: bool, wd: &str, uid: u32, gid: u32) -> String {
    let mut s = format!(
        "set -e\nR=./{ROOT}\n\
         mount --no-canonicalize --bind \"$R\" \"$R\"\n\
         mkdir -p \"$R/proc\" \"$R/dev\"\n\
         mount --no-canonicalize --rbind /proc \"$R/proc\"\n\
         mount -t tmpfs -o nosuid,mode=0755 tmpfs \"$R/dev\"\n\
         for d in null zero full random urandom tty; do\n  \
         : > \"$R/dev/$d\"\n  mount --bind \"/dev/$d\" \"$R/dev/$d\"\ndone\n\
         mkdir \"$R/dev/shm\"\nmount -t tmpfs -o nosuid,nodev,mode=1777 shm \"$R/dev/shm\"\n\
         ln -s /proc/self/fd \"$R/dev/fd\"\nln -s /proc/self/fd/0 \"$R/dev/stdin\"\n\
         ln -s /proc/self/fd/1 \"$R/dev/stdout\"\nln -s /proc/self/fd/2 \"$R/dev/stderr\"\n"
    );
    let mut sorted: Vec<&Bind> = mounts.iter().collect();
    sorted.sort_by_key(|b| b.target.matches('/').count());
    for b in sorted {
        s.push_str(&bind_mount(b, &format!("\"$R\"{}", quote(&b.target))));
    }
    if read_only {
        s.push_str("mount -o remount,ro,bind \"$R\"\n");
    }
    s.push_str(&format!(
        "exec unshare --root=\"$R\" --wd={} --setgid={gid} --setuid={uid} -- \"$@\"\n",
        quote(wd)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_go_inside_the_root_before_it_turns_read_only() {
        let s = script(
            &[Bind {
                source: "tmp".into(),
                target: "/tmp".into(),
                read_only: false,
                file: false,
            }],
            true,
            "/",
            65532,
            65532,
        );
        let tmp = s.find("--bind './tmp' \"$R\"'/tmp'").expect("tmp mount");
        let ro = s.find("remount,ro,bind \"$R\"\n").expect("read-only root");
        let exec = s.find("exec unshare --root=\"$R\"").expect("exec");
        assert!(tmp < ro && ro < exec, "{s}");
        assert!(s.contains("--setgid=65532 --setuid=65532 -- \"$@\""), "{s}");
        let writable = script(&[], false, "/work", 0, 0);
        assert!(!writable.contains("remount,ro,bind \"$R\"\n"), "{writable}");
        assert!(writable.contains("--wd='/work'"), "{writable}");
    }
}
