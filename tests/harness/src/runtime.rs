//! The one background runtime of a test binary. Shared infrastructure (control plane clients,
//! the kubelet stand-in, in-process controllers) is started on it so that it outlives each
//! `#[tokio::test]` runtime: kube clients and spawned tasks are tied to the runtime that built
//! them, and a test's runtime ends with the test.

use std::future::Future;
use std::sync::LazyLock;

use tokio::runtime::Runtime;

static RT: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("test-infra")
        .build()
        .expect("infra runtime")
});

/// The binary's infrastructure runtime, started on first use.
pub fn infra() -> &'static Runtime {
    &RT
}

/// Runs `fut` on the infrastructure runtime and waits for it from the caller's runtime.
///
/// # Panics
/// When the task panics (the test fails with the task's panic).
pub async fn on_infra<F>(fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match RT.spawn(fut).await {
        Ok(out) => out,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Runs `fut` to completion on the infrastructure runtime, from a plain `#[test]`.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    RT.block_on(fut)
}
