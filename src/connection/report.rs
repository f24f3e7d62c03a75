//! Report stage of the Connection reconciler: counts failures and decides when to look again
//! (a Connection has no status of its own yet).

use kube::runtime::controller::Action;

use crate::api::TemporalConnection;
use crate::connection::ConnectionContext;
use crate::connection::outcome::{ConnectionFailure, verdict};
use crate::connection::plan::{Plan, RECHECK};
use crate::reconciler::{ControllerKind, ReconcileOutcome, count_failure};

pub fn report(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    attempt: Result<Plan, ConnectionFailure>,
) -> (Action, ReconcileOutcome) {
    let key = conn.key();
    match attempt {
        Ok(plan) => {
            ctx.streaks.succeeded(&key);
            let action = match plan {
                Plan::Keep => Action::requeue(RECHECK),
                Plan::Release => Action::await_change(),
            };
            (action, ReconcileOutcome::Success)
        }
        Err(failure) => {
            let streak = ctx.streaks.failed(&key);
            count_failure(&ctx.metrics, ControllerKind::Connection, &failure, streak);
            (
                Action::requeue(verdict(&failure, streak)),
                ReconcileOutcome::Error,
            )
        }
    }
}
