//! Observe stage of the Connection reconciler: whether any TWD uses the Connection, from the
//! TWD reconciler's cache. The cache is waited for until it has listed: read before that it
//! would look empty, and every Connection would look unused.

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
    ctx.twds
        .wait_until_ready()
        .await
        .map_err(ConnectionFailure::CacheUnavailable)?;
    let ns = conn.namespace();
    let name = conn.name_any();
    let used = ctx
        .twds
        .state()
        .iter()
        .any(|t| t.namespace() == ns && t.spec.worker_options.connection_ref.name == name);
    Ok(Observed { used })
}
