//! **Images** from the rig's registry ([`crate::registry`], [`KubeletOptions::registry`]), as a
//! container runtime handles them: an image reference whose registry is the rig's is pulled
//! with `skopeo copy docker://… oci:…` (plain HTTP), its manifest and config are read from
//! the OCI layout, and its layers are unpacked in order into a root file system cached by the
//! manifest digest (whiteouts honoured: `.wh.<name>` deletes `<name>` of the layers below,
//! `.wh..wh..opq` empties its directory). `imagePullPolicy` is honoured against what this
//! process pulled before (the node's image store): `Always` pulls at every container start,
//! `IfNotPresent` once per reference, `Never` only uses a present image (else
//! `ErrImageNeverPull`). A reference the registry does not have is `ErrImagePull` with
//! skopeo's message, then `ImagePullBackOff`, as for any Pod.
//!
//! Skipped: `imagePullSecrets` (the registry has no auth), other registries (only the rig's
//! is pulled; any other image of a process Pod falls back to [`KubeletOptions::images`]),
//! signature policies, platform selection from image indexes (the images are single-platform),
//! and garbage collection of unused images.
//!
//! [`KubeletOptions::registry`]: super::KubeletOptions::registry
//! [`KubeletOptions::images`]: super::KubeletOptions::images

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

/// A pulled image: its unpacked root (shared, never written: each container start copies it)
/// and the parts of its config a container runtime uses.
#[derive(Clone, Debug)]
pub(crate) struct Image {
    pub digest: String,
    pub root: PathBuf,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `KEY=value` entries.
    pub env: Vec<String>,
    pub user: String,
    pub working_dir: String,
}

/// Why a pull failed: the waiting reason and its message.
pub(crate) type PullError = (&'static str, String);

/// Whether `image` names a repository of the rig's registry `registry` (`host:port`).
pub(crate) fn from_registry(registry: Option<&str>, image: &str) -> bool {
    registry.is_some_and(|r| {
        image
            .strip_prefix(r)
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Pulls (or finds present) `image` as `policy` says and unpacks it.
pub(crate) fn pull(image: &str, policy: Option<&str>) -> Result<Image, PullError> {
    static PRESENT: Mutex<Option<HashMap<String, Image>>> = Mutex::new(None);
    let mut present = PRESENT.lock().unwrap_or_else(|e| e.into_inner());
    let store = present.get_or_insert_with(HashMap::new);
    let policy = policy.unwrap_or(if image.contains('@') || !image.ends_with(":latest") {
        "IfNotPresent"
    } else {
        "Always"
    });
    match (policy, store.get(image)) {
        ("IfNotPresent" | "Never", Some(found)) => return Ok(found.clone()),
        ("Never", None) => {
            return Err((
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
            ));
        }
        _ => {}
    }
    let pulled = fetch(image).map_err(|m| ("ErrImagePull", m))?;
    store.insert(image.to_string(), pulled.clone());
    Ok(pulled)
}

fn images_dir() -> PathBuf {
    std::env::temp_dir().join("twc-kubelet-images")
}

/// `skopeo copy` into a fresh OCI layout, then the cached root of its manifest.
fn fetch(image: &str) -> Result<Image, String> {
    let layout = images_dir().join(format!("pull-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&layout);
    std::fs::create_dir_all(&layout).map_err(|e| format!("image store: {e}"))?;
    let out = Command::new("skopeo")
        .args(["copy", "--quiet", "--src-tls-verify=false"])
        .arg(format!("docker://{image}"))
        .arg(format!("oci:{}:pulled", layout.display()))
        .output()
        .map_err(|e| format!("running skopeo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "failed to pull and unpack image {image:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let unpacked = from_layout(&layout);
    let _ = std::fs::remove_dir_all(&layout);
    unpacked
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

fn json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The image of an OCI layout holding one manifest; its layers unpacked unless cached.
fn from_layout(layout: &Path) -> Result<Image, String> {
    let index = json(&layout.join("index.json"))?;
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .ok_or("index.json names no manifest")?
        .to_string();
    let manifest = json(&blob(layout, &digest))?;
    let config_digest = manifest["config"]["digest"]
        .as_str()
        .ok_or("the manifest has no config")?;
    let config = json(&blob(layout, config_digest))?;
    let root = images_dir()
        .join("roots")
        .join(digest.trim_start_matches("sha256:"));
    if !root.is_dir() {
        if let Some(roots) = root.parent() {
            crate::registry::prune_older_than(roots, crate::registry::STALE);
        }
        let layers: Vec<PathBuf> = manifest["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["digest"].as_str())
            .map(|d| blob(layout, d))
            .collect();
        unpack(&layers, &root)?;
    }
    let c = &config["config"];
    Ok(Image {
        digest,
        root,
        entrypoint: strings(&c["Entrypoint"]),
        cmd: strings(&c["Cmd"]),
        env: strings(&c["Env"]),
        user: c["User"].as_str().unwrap_or_default().to_string(),
        working_dir: c["WorkingDir"].as_str().unwrap_or_default().to_string(),
    })
}

/// Unpacks `layers` (bottom first) into `root`, through a scratch directory renamed at the end.
fn unpack(layers: &[PathBuf], root: &Path) -> Result<(), String> {
    let scratch = root.with_extension("unpacking");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(|e| format!("unpacking: {e}"))?;
    for layer in layers {
        apply_whiteouts(layer, &scratch)?;
        let out = Command::new("tar")
            .args([
                "--extract",
                "--numeric-owner",
                "--same-owner",
                "--same-permissions",
            ])
            .args(["--exclude=.wh.*", "--file"])
            .arg(layer)
            .arg("--directory")
            .arg(&scratch)
            .output()
            .map_err(|e| format!("running tar: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "unpacking layer {}: {}",
                layer.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    std::fs::rename(&scratch, root).map_err(|e| format!("unpacking: {e}"))
}

/// Deletes from `root` (the layers below) what `layer`'s whiteout entries delete.
fn apply_whiteouts(layer: &Path, root: &Path) -> Result<(), String> {
    let out = Command::new("tar")
        .args(["--list", "--file"])
        .arg(layer)
        .output()
        .map_err(|e| format!("running tar: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "listing layer {}: {}",
            layer.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    for entry in String::from_utf8_lossy(&out.stdout).lines() {
        let path = Path::new(entry.trim_start_matches("./"));
        let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        else {
            continue;
        };
        let target = root.join(dir);
        if name == ".wh..wh..opq" {
            for child in std::fs::read_dir(&target).into_iter().flatten().flatten() {
                remove(&child.path());
            }
        } else if let Some(hidden) = name.strip_prefix(".wh.") {
            remove(&target.join(hidden));
        }
    }
    Ok(())
}

fn remove(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// The user and group a container runs as: the `securityContext`'s `runAsUser`/`runAsGroup`
/// (container over Pod), else the image's `USER` (`uid[:gid]` or names, looked up in the
/// image's `/etc/passwd` and `/etc/group`); a uid without a gid takes its passwd entry's
/// group, else 0 (as containerd does). `Err`: a name the image does not define.
pub(crate) fn run_as(
    image: &Image,
    run_as_user: Option<i64>,
    run_as_group: Option<i64>,
) -> Result<(u32, u32), String> {
    let (user, group) = match image.user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (image.user.as_str(), None),
    };
    let passwd = std::fs::read_to_string(image.root.join("etc/passwd")).unwrap_or_default();
    let groups = std::fs::read_to_string(image.root.join("etc/group")).unwrap_or_default();
    let uid = match run_as_user {
        Some(u) => u32::try_from(u).map_err(|_| format!("runAsUser {u} is out of range"))?,
        None if user.is_empty() => 0,
        None => lookup(&passwd, user, 2).ok_or_else(|| {
            format!("unable to find user {user}: no matching entries in passwd file")
        })?,
    };
    let gid = match (run_as_group, group) {
        (Some(g), _) => u32::try_from(g).map_err(|_| format!("runAsGroup {g} is out of range"))?,
        (None, Some(g)) => lookup(&groups, g, 2).ok_or_else(|| {
            format!("unable to find group {g}: no matching entries in group file")
        })?,
        (None, None) => primary_group(&passwd, uid).unwrap_or(0),
    };
    Ok((uid, gid))
}

/// A numeric id as is, or the id (field `id_field`) of the `/etc/passwd`-style entry `name`.
fn lookup(file: &str, name: &str, id_field: usize) -> Option<u32> {
    if let Ok(id) = name.parse() {
        return Some(id);
    }
    file.lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&name))
        .and_then(|f| f.get(id_field)?.parse().ok())
}

fn primary_group(passwd: &str, uid: u32) -> Option<u32> {
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.get(2).and_then(|u| u.parse::<u32>().ok()) == Some(uid))
        .and_then(|f| f.get(3)?.parse().ok())
}

/// The process's argv as Kubernetes defines it: `command` replaces the image's entrypoint
/// (and drops its `CMD`), `args` replace its `CMD`.
pub(crate) fn argv(
    image: &Image,
    command: Option<&[String]>,
    args: Option<&[String]>,
) -> Vec<String> {
    match (command.filter(|c| !c.is_empty()), args) {
        (Some(c), a) => c.iter().chain(a.into_iter().flatten()).cloned().collect(),
        (None, Some(a)) => image.entrypoint.iter().chain(a).cloned().collect(),
        (None, None) => image.entrypoint.iter().chain(&image.cmd).cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(user: &str) -> Image {
        Image {
            digest: "sha256:x".into(),
            root: PathBuf::from("/nonexistent"),
            entrypoint: vec!["/bin/app".into()],
            cmd: vec!["run".into()],
            env: vec![],
            user: user.into(),
            working_dir: String::new(),
        }
    }

    #[test]
    fn command_and_args_override_as_kubernetes_defines() {
        let i = image("");
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(argv(&i, None, None), s(&["/bin/app", "run"]));
        let go = s(&["--leader-elect"]);
        assert_eq!(
            argv(&i, None, Some(&go)),
            s(&["/bin/app", "--leader-elect"])
        );
        let cmd = s(&["/bin/other"]);
        assert_eq!(argv(&i, Some(&cmd), None), s(&["/bin/other"]));
        assert_eq!(
            argv(&i, Some(&cmd), Some(&go)),
            s(&["/bin/other", "--leader-elect"])
        );
    }

    #[test]
    fn the_security_context_wins_over_the_images_user() {
        assert_eq!(
            run_as(&image("65532:65532"), None, None),
            Ok((65532, 65532))
        );
        assert_eq!(
            run_as(&image("65532:65532"), Some(1000), None),
            Ok((1000, 65532))
        );
        assert_eq!(run_as(&image("65532"), Some(7), Some(8)), Ok((7, 8)));
        assert_eq!(run_as(&image(""), None, None), Ok((0, 0)));
        assert!(run_as(&image("nonroot"), None, None).is_err());
        assert!(from_registry(
            Some("127.0.0.1:5000"),
            "127.0.0.1:5000/twc@sha256:ab"
        ));
        assert!(!from_registry(
            Some("127.0.0.1:5000"),
            "127.0.0.1:50001/twc:v1"
        ));
        assert!(!from_registry(None, "127.0.0.1:5000/twc:v1"));
    }
}
