//! Where the control-plane binaries come from: `TWC_CONTROL_PLANE_BIN` (a directory holding
//! `etcd`, `kube-apiserver` and `kube-controller-manager`), or `tools/control-plane/build.sh`,
//! which builds them from the Go module proxy once and caches them by version outside the
//! repository (`.ci/setup` runs it, so tests normally find them cached).

use std::path::PathBuf;

use anyhow::{Result, bail};

pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
}

impl Binaries {
    pub fn locate() -> Result<Binaries> {
        let dir = match std::env::var_os("TWC_CONTROL_PLANE_BIN") {
            Some(dir) => PathBuf::from(dir),
            None => build_or_reuse()?,
        };
        let bins = Binaries {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
        };
        for path in [
            &bins.etcd,
            &bins.kube_apiserver,
            &bins.kube_controller_manager,
        ] {
            if !path.is_file() {
                bail!("control-plane binary missing: {}", path.display());
            }
        }
        Ok(bins)
    }
}

fn build_or_reuse() -> Result<PathBuf> {
    crate::cached_build("control-plane")
}
