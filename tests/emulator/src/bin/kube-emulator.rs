//! Runs the Kubernetes API emulator standalone until Ctrl-C.

use std::path::PathBuf;

use clap::Parser;
use kube_emulator::{DeploymentMode, Emulator, EmulatorOptions};

#[derive(Parser)]
#[command(about = "Test-only Kubernetes API emulator (plain HTTP on 127.0.0.1)")]
struct Args {
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Directory of CRD YAML files to register at start.
    #[arg(long)]
    crd_dir: Option<PathBuf>,
    /// Also write the kubeconfig here.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Deployments stay unready until their /status says otherwise.
    #[arg(long)]
    manual_deployments: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let opts = EmulatorOptions {
        crd_dir: args.crd_dir,
        deployment_mode: if args.manual_deployments {
            DeploymentMode::Manual
        } else {
            DeploymentMode::AutoReady
        },
    };
    let emu = Emulator::start_on(opts, args.port).await?;
    let path = match &args.kubeconfig_out {
        Some(p) => {
            emu.write_kubeconfig_to(p)?;
            p.clone()
        }
        None => emu.kubeconfig_path().to_path_buf(),
    };
    println!("{}", path.display());
    eprintln!("kube-emulator listening on {}", emu.base_url());
    tokio::signal::ctrl_c().await?;
    emu.shutdown().await;
    Ok(())
}
