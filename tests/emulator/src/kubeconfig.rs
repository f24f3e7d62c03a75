//! A kubeconfig pointing at the emulator, usable by kubectl and kube-rs.

use std::path::{Path, PathBuf};

pub fn render(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kube-emulator
  cluster:
    server: {server}
contexts:
- name: kube-emulator
  context:
    cluster: kube-emulator
    user: kube-emulator
    namespace: default
current-context: kube-emulator
users:
- name: kube-emulator
  user: {{}}
"
    )
}

pub fn write(dir: &Path, server: &str) -> std::io::Result<PathBuf> {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, render(server))?;
    Ok(path)
}

pub fn write_to(path: &Path, server: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, render(server))
}
