//! Observe stage of the Connection reconciler: whether any TWD uses the Connection, from the
//! TWD reconciler's cache. A cache that has not listed yet is never read: it would look empty,
//! and every Connection would look unused. The pass fails instead and is retried with backoff;
//! it does not wait inside the reconcile (a reconcile waiting on a cache would hold up a
//! graceful shutdown, which waits for in-flight reconciles).

use futures::FutureExt as _;
use kube::ResourceExt;

use crate::api::TemporalConnection;
use crate::connection::ConnectionContext;
use crate::connection::outcome::ConnectionFailure;

/// What the plan needs.
pub struct Observed {
    /// Some TWD in the Connection's namespace names it.
    pub used: bool,
}

pub async fn observe(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
) -> Result<Observed, ConnectionFailure> {
    match ctx.workers.wait_until_ready().now_or_never() {
        Some(Ok(())) => {}
        Some(Err(dropped)) => return Err(ConnectionFailure::CacheUnavailable(dropped)),
        None => return Err(ConnectionFailure::CacheNotReady),
    }
    let ns = conn.namespace();
    let name = conn.name_any();
    // References resolve within a kind set: a Connection is used by WorkerDeployments, a
    // TemporalConnection by TemporalWorkerDeployments.
    let set = conn.kind_set();
    let used = ctx.workers.state().iter().any(|t| {
        t.kind_set() == set
            && t.namespace() == ns
            && t.spec.worker_options.connection_ref.name == name
    });
    Ok(Observed { used })
}
