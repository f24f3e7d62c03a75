//! Plan stage of the Connection reconciler (pure): release our finalizer or not.

use std::time::Duration;

use kube::{Resource, ResourceExt};

use crate::api::{FINALIZER, TemporalConnection};
use crate::connection::observe::Observed;

/// How often a kept Connection is looked at again (a TWD's change of Connection is also
/// seen through the TWD watch the next time the Connection changes).
pub const RECHECK: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// In use, not being deleted, or not ours to release: look again later.
    Keep,
    /// Being deleted, unused, and still carrying our finalizer: drop it.
    Release,
}

pub fn plan(conn: &TemporalConnection, observed: &Observed) -> Plan {
    let deleting = conn.meta().deletion_timestamp.is_some();
    let ours = conn.finalizers().iter().any(|f| f == FINALIZER);
    if deleting && ours && !observed.used {
        Plan::Release
    } else {
        Plan::Keep
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::fixtures::{NOW, ts};

    fn conn(deleting: bool, finalizer: bool) -> TemporalConnection {
        let mut c = TemporalConnection::new(
            "prod",
            serde_json::from_value(serde_json::json!({"hostPort": "temporal:7233"})).expect("spec"),
        );
        c.metadata.namespace = Some("shop".into());
        if deleting {
            c.metadata.deletion_timestamp = Some(Time(ts(NOW)));
        }
        if finalizer {
            c.metadata.finalizers = Some(vec![FINALIZER.into()]);
        }
        c
    }

    #[test]
    fn only_an_unused_connection_being_deleted_with_our_finalizer_is_released() {
        let unused = Observed { used: false };
        let used = Observed { used: true };
        assert_eq!(plan(&conn(true, true), &unused), Plan::Release);
        assert_eq!(plan(&conn(true, true), &used), Plan::Keep, "still used");
        assert_eq!(plan(&conn(false, true), &unused), Plan::Keep, "not deleted");
        assert_eq!(plan(&conn(true, false), &unused), Plan::Keep, "not ours");
    }
}
