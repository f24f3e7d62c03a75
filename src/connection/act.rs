//! Act stage of the Connection reconciler: the one write besides status, dropping our
//! finalizer, and remembering the reachability check for the next pass.

use crate::api::TemporalConnection;
use crate::connection::context::ConnectionContext;
use crate::connection::observe::Observed;
use crate::connection::outcome::ConnectionFailure;
use crate::connection::plan::{Finalizer, Plan};
use crate::reconciler::finalizers;

pub async fn act(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    observed: &Observed,
    plan: &Plan,
) -> Result<(), ConnectionFailure> {
    match plan.finalizer {
        Finalizer::Keep => {
            if observed.fresh
                && let Some(check) = &observed.check
            {
                ctx.remember_check(conn, check.clone());
            }
            Ok(())
        }
        Finalizer::Release => {
            ctx.forget_check(conn);
            finalizers::release_unused_connection(&ctx.services.client, conn)
                .await
                .map_err(ConnectionFailure::ReleaseFailed)
        }
    }
}
