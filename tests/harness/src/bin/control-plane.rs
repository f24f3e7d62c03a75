//! `cargo run -p test-harness --bin control-plane`: starts the real control plane the tests use
//! (etcd + kube-apiserver + kube-controller-manager on loopback), prints the admin kubeconfig
//! path and the audit log, and stays up until interrupted (Ctrl-C or SIGTERM).
//!
//! With `--kubelet` it also runs the pod-level kubelet stand-in, so Pods of versioned workers
//! get bound and run (needs `TEMPORAL_ADDRESS` reachable from the Pods' env).

use anyhow::Result;
use test_harness::control_plane::ControlPlane;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
        .init();
    let plane = ControlPlane::start().await?;
    println!("control plane ready in {:.1?}", plane.started_in());
    println!("  server:     {}", plane.server());
    println!("  kubeconfig: {}", plane.kubeconfig_path().display());
    println!("  audit log:  {}", plane.audit_log_path().display());
    println!("  logs:       {}", plane.dir().display());
    println!(
        "try: KUBECONFIG={} kubectl get ns",
        plane.kubeconfig_path().display()
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    println!("stopping");
    drop(plane);
    Ok(())
}
