//! Act stage of the Connection reconciler: the one write, dropping our finalizer.

use crate::api::TemporalConnection;
use crate::connection::ConnectionContext;
use crate::connection::outcome::ConnectionFailure;
use crate::connection::plan::Plan;
use crate::reconcile::act::finalizers;

pub async fn act(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    plan: &Plan,
) -> Result<(), ConnectionFailure> {
    match plan {
        Plan::Keep => Ok(()),
        Plan::Release => finalizers::release_unused_connection(&ctx.client, conn)
            .await
            .map_err(ConnectionFailure::ReleaseFailed),
    }
}
