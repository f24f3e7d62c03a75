//! The one way an integration test starts the controller in-process: from the flags a user
//! passes to `temporal-worker-controller run`, through `RunArgs::from_flags(..).options()`, so
//! a test meets every check across flags a user's command line meets (and a flag a test needs
//! is a flag a user has). Included by path (`#[path = "common/controller.rs"]`) in each test
//! binary that starts one.
//!
//! The HTTP server always binds a free loopback port (`--http-addr 127.0.0.1:0`) unless the
//! flags say otherwise; the returned `Running` names the address.

#![allow(dead_code)] // each test binary uses part of it

use anyhow::{Context as _, Result};
use temporal_worker_controller::run::args::RunArgs;
use temporal_worker_controller::run::{self, RunOptions, Running};

/// `run`'s options from command-line `flags`, checked as the binary checks them.
pub fn options<S: AsRef<str>>(flags: &[S]) -> Result<RunOptions> {
    let mut argv: Vec<String> = flags.iter().map(|f| f.as_ref().to_string()).collect();
    if !argv.iter().any(|f| f.starts_with("--http-addr")) {
        argv.extend(["--http-addr".into(), "127.0.0.1:0".into()]);
    }
    let args = RunArgs::from_flags(&argv).with_context(|| format!("flags {argv:?}"))?;
    args.options()
        .map_err(anyhow::Error::new)
        .with_context(|| format!("flags {argv:?}"))
}

/// The flags most suites run with: watching only `namespaces` (comma-separated), acting as
/// `identity`, polling fast (a test's rollouts are seconds long), without the backlog poller.
pub fn watching(namespaces: &str, identity: &str) -> Vec<String> {
    vec![
        format!("--watch-namespaces={namespaces}"),
        format!("--identity={identity}"),
        "--idle-interval=10s".into(),
        "--rest-interval=30s".into(),
        "--fast-poll=300ms".into(),
        "--backlog-poll-interval=0s".into(),
    ]
}

/// Starts the controller as `client` with `flags`.
pub async fn start<S: AsRef<str>>(client: kube::Client, flags: &[S]) -> Result<Running> {
    let opts = options(flags)?;
    run::start(client, opts)
        .await
        .context("starting the controller")
}

/// Logs of the test and the controller to the test's output, filtered by `RUST_LOG` or else
/// `default` (once per binary; later calls do nothing).
pub fn init_tracing(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| default.into()))
        .with_test_writer()
        .try_init();
}
