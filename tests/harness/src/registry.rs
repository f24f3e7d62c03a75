//! A real OCI registry on loopback, and the controller's image and charts in it.
//!
//! - [`Registry`]: Debian's `docker-registry` (the CNCF distribution registry 2.8) serving plain
//!   HTTP on `127.0.0.1:<free port>` with a storage directory of its own, supervised so that it
//!   never outlives the test process. [`Registry::shared`] starts one per test binary.
//! - [`package`]: the controller binary the test build already made, packaged as an OCI image
//!   archive by the release's own `tools/image/package.sh` (no second release build); the archive
//!   and digest are kept in the temp dir keyed by the binary's hash, so later test binaries of
//!   one run reuse them.
//! - [`Registry::push_image`] (`skopeo copy oci-archive:… docker://…`, digest preserved) and
//!   [`Registry::push_chart`] (`helm package` + `helm push … oci://…/charts --plain-http`, the
//!   real Helm 4 of [`crate::helm`]).
//!
//! The kubelet stand-in pulls images from here ([`crate::kubelet::KubeletOptions::registry`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use sha2::Digest as _;

use crate::supervise::{Supervised, free_port};

/// How long the registry may take to answer `GET /v2/`.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// The repository the controller image is pushed to.
pub const IMAGE_REPOSITORY: &str = "temporal-worker-controller";
/// Where charts go: `oci://<registry>/charts/<chart name>`.
pub const CHART_PATH: &str = "charts";

/// A running `docker-registry` on loopback.
pub struct Registry {
    host: String,
    _server: Supervised,
    _storage: PathBuf,
}

/// A chart pushed to the registry: `helm install <reference> --version <version>`.
#[derive(Clone, Debug)]
pub struct ChartRef {
    pub reference: String,
    pub version: String,
}

/// An image archive made by `tools/image/package.sh`.
#[derive(Clone, Debug)]
pub struct PackagedImage {
    pub archive: PathBuf,
    /// `sha256:…` of the manifest.
    pub digest: String,
}

/// What to package and how.
#[derive(Clone, Debug)]
pub struct PackageOptions {
    pub version: String,
    pub revision: String,
    pub timestamp: u64,
    /// A base package left out (`--omit-package`; the mutation test: no `libgcc-s1`).
    pub omit_package: Option<String>,
}

impl PackageOptions {
    /// The working tree's version (Cargo), `HEAD` as the revision, timestamp 0.
    pub fn working_tree() -> PackageOptions {
        PackageOptions {
            version: env!("CARGO_PKG_VERSION").to_string(),
            revision: head_revision(),
            timestamp: 0,
            omit_package: None,
        }
    }
}

fn head_revision() -> String {
    Command::new("git")
        .arg("-C")
        .arg(crate::repo_root())
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

impl Registry {
    /// Starts a registry with an empty storage directory and waits until it answers.
    pub fn start() -> Result<Registry> {
        let program = which("docker-registry")?;
        let port = free_port()?;
        let registries = std::env::temp_dir().join("twc-registries");
        // A registry's storage lives as long as its test process; older ones are left-overs.
        prune_older_than(&registries, STALE);
        let dir = registries.join(format!("{}-{port}", std::process::id()));
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage)?;
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
                 delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: twc-test-rig\n",
                storage.display()
            ),
        )?;
        let mut server = Supervised::spawn(
            "docker-registry",
            &program,
            [std::ffi::OsStr::new("serve"), config.as_os_str()],
            &dir.join("registry.log"),
        )?;
        let host = format!("127.0.0.1:{port}");
        let begin = Instant::now();
        while !answers(&host) {
            if let Some(e) = server.died() {
                return Err(e);
            }
            ensure!(
                begin.elapsed() < START_DEADLINE,
                "docker-registry did not answer on {host} within {START_DEADLINE:?}: {}",
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Registry {
            host,
            _server: server,
            _storage: dir,
        })
    }

    /// One registry per test process, started on first use.
    pub fn shared() -> Result<&'static Registry> {
        static SHARED: OnceLock<Registry> = OnceLock::new();
        static STARTING: Mutex<()> = Mutex::new(());
        let _one = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = SHARED.get() {
            return Ok(r);
        }
        let r = Registry::start()?;
        Ok(SHARED.get_or_init(|| r))
    }

    /// `127.0.0.1:<port>`: the registry part of an image reference.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Pushes an image archive as `<host>/<repository>:<tag>`; returns the reference by digest
    /// (`<host>/<repository>@sha256:…`).
    pub fn push_image(&self, image: &PackagedImage, repository: &str, tag: &str) -> Result<String> {
        let dest = format!("docker://{}/{repository}:{tag}", self.host);
        let out = Command::new("skopeo")
            .args([
                "copy",
                "--quiet",
                "--preserve-digests",
                "--dest-tls-verify=false",
            ])
            .arg(format!("oci-archive:{}", image.archive.display()))
            .arg(&dest)
            .output()
            .context("running skopeo copy")?;
        ensure!(
            out.status.success(),
            "skopeo copy to {dest} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(format!("{}/{repository}@{}", self.host, image.digest))
    }

    /// `helm package` of a chart directory, then `helm push` to `oci://<host>/<path>`
    /// ([`CHART_PATH`] for the working tree's charts).
    pub fn push_chart(&self, chart_dir: &Path, path: &str) -> Result<ChartRef> {
        let meta: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(chart_dir.join("Chart.yaml"))?)?;
        let (Some(name), Some(version)) = (meta["name"].as_str(), meta["version"].as_str()) else {
            bail!(
                "{}: Chart.yaml without name or version",
                chart_dir.display()
            );
        };
        let out_dir = std::env::temp_dir().join(format!(
            "twc-charts-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&out_dir)?;
        let dir = chart_dir.to_string_lossy();
        let dest = out_dir.to_string_lossy();
        crate::helm::run_checked(&["package", &dir, "--destination", &dest])?;
        let tgz = out_dir.join(format!("{name}-{version}.tgz"));
        let remote = format!("oci://{}/{path}", self.host);
        crate::helm::run_checked(&["push", &tgz.to_string_lossy(), &remote, "--plain-http"])?;
        let _ = std::fs::remove_dir_all(&out_dir);
        Ok(ChartRef {
            reference: format!("{remote}/{name}"),
            version: version.to_string(),
        })
    }

    /// The working tree's image ([`package`] of `binary`) pushed under `tag`: the reference by
    /// digest.
    pub fn push_controller(&self, binary: &Path, tag: &str) -> Result<String> {
        let image = package(binary, &PackageOptions::working_tree())?;
        self.push_image(&image, IMAGE_REPOSITORY, tag)
    }
}

fn answers(host: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET /v2/ HTTP/1.0\r\nHost: {host}\r\n\r\n");
    let mut head = [0u8; 16];
    s.write_all(req.as_bytes()).is_ok()
        && s.read(&mut head).is_ok_and(|n| {
            String::from_utf8_lossy(&head[..n])
                .split_whitespace()
                .nth(1)
                == Some("200")
        })
}

fn which(program: &str) -> Result<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .with_context(|| format!("{program} not found (bash .ci/setup-tests checks installs it)"))
}

/// Packages `binary` with `tools/image/package.sh` (cached by the binary's hash and the
/// options in the temp dir; one packaging at a time per process).
pub fn package(binary: &Path, options: &PackageOptions) -> Result<PackagedImage> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut hash = sha2::Sha256::new();
    hash.update(std::fs::read(binary).with_context(|| binary.display().to_string())?);
    hash.update(format!("{options:?}"));
    let key = hex::encode(hash.finalize());
    let dir = std::env::temp_dir().join("twc-images").join(&key[..24]);
    let (archive, digest_file) = (dir.join("image.oci.tar"), dir.join("digest"));
    if let (true, Ok(digest)) = (archive.is_file(), std::fs::read_to_string(&digest_file)) {
        return Ok(PackagedImage {
            archive,
            digest: digest.trim().to_string(),
        });
    }
    if let Some(parent) = dir.parent() {
        prune_older_than(parent, STALE);
    }
    std::fs::create_dir_all(&dir)?;
    let digest = run_package(binary, options, &archive)?;
    std::fs::write(&digest_file, &digest)?;
    Ok(PackagedImage { archive, digest })
}

/// Cached images and unpacked roots older than this are removed when a new one is made: the
/// cache serves one test run (each build's binary is a new entry).
pub const STALE: Duration = Duration::from_secs(24 * 3600);

/// Removes the entries of `dir` last modified more than `age` ago (best effort).
pub fn prune_older_than(dir: &Path, age: Duration) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|e| e > age);
        if old {
            let path = entry.path();
            // Unpacked roots hold read-only directories.
            let _ = std::process::Command::new("chmod")
                .args(["-R", "u+w"])
                .arg(&path)
                .output();
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// One run of `tools/image/package.sh`; the digest is its last line of stdout.
pub fn run_package(binary: &Path, options: &PackageOptions, out: &Path) -> Result<String> {
    let script = crate::repo_root().join("tools/image/package.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .arg("--binary")
        .arg(binary)
        .args([
            "--version",
            &options.version,
            "--revision",
            &options.revision,
        ])
        .args(["--timestamp", &options.timestamp.to_string()])
        .arg("--out")
        .arg(out);
    if let Some(p) = &options.omit_package {
        cmd.args(["--omit-package", p]);
    }
    let begin = Instant::now();
    let run = cmd.output().context("running tools/image/package.sh")?;
    ensure!(
        run.status.success(),
        "tools/image/package.sh failed ({}): {}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let digest = stdout.lines().last().unwrap_or_default().trim().to_string();
    ensure!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "package.sh printed no digest: {stdout}"
    );
    tracing::info!(took = ?begin.elapsed(), %digest, "image packaged");
    Ok(digest)
}
