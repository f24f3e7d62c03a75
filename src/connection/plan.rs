//! Plan stage of the Connection reconciler (pure): release our finalizer or not, the status
//! to write (only when it differs from the one the object has), the Warnings to emit and when
//! to look again. The status rules are in [`crate::connection::status`].

use std::time::Duration;

use kube::{Resource, ResourceExt};

use crate::api::connection::TemporalConnectionStatus;
use crate::api::{FINALIZER, TemporalConnection};
use crate::connection::observe::Observed;
use crate::connection::status::{self, Auth, Facts};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finalizer {
    /// In use, not being deleted, or not ours to release.
    Keep,
    /// Being deleted, unused, and still carrying our finalizer: drop it.
    Release,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub finalizer: Finalizer,
    /// The status to write; `None` when it is unchanged (no write at rest) or the Connection
    /// is being deleted.
    pub status: Option<TemporalConnectionStatus>,
    /// `(reason, note)` of each Warning event to emit.
    pub warnings: Vec<(&'static str, String)>,
    /// When to look again (`None`: only on a change, after a release).
    pub requeue: Option<Duration>,
}

pub fn plan(conn: &TemporalConnection, observed: &Observed, warn_before: Duration) -> Plan {
    let deleting = conn.meta().deletion_timestamp.is_some();
    let ours = conn.finalizers().iter().any(|f| f == FINALIZER);
    let used = !observed.users.is_empty();
    if deleting {
        let finalizer = if ours && !used {
            Finalizer::Release
        } else {
            Finalizer::Keep
        };
        return Plan {
            finalizer,
            status: None,
            warnings: Vec::new(),
            requeue: (finalizer == Finalizer::Keep).then_some(status::RECHECK),
        };
    }
    let old = conn.status.as_ref();
    let new = status::status(
        old,
        &Facts {
            generation: conn.meta().generation.unwrap_or_default(),
            host_port: &conn.spec.host_port,
            users: &observed.users,
            auth: &observed.auth,
            reach: observed.check.as_ref().map(|c| &c.reach),
            warn_before,
            now: observed.now,
        },
    );
    let not_after = match &observed.auth {
        Auth::Valid { not_after, .. } | Auth::Invalid { not_after, .. } => *not_after,
    };
    Plan {
        finalizer: Finalizer::Keep,
        warnings: status::warnings(old, &new),
        status: (old != Some(&new)).then_some(new),
        requeue: Some(status::next_look(
            observed.check.as_ref(),
            not_after,
            warn_before,
            observed.now,
        )),
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::conditions as reason;
    use crate::connection::status::{LastCheck, Reach};
    use crate::fixtures::{NOW, ts};

    fn conn(deleting: bool, finalizer: bool) -> TemporalConnection {
        let mut c = TemporalConnection::new(
            "prod",
            serde_json::from_value(serde_json::json!({"hostPort": "temporal:7233"})).expect("spec"),
        );
        c.metadata.namespace = Some("shop".into());
        c.metadata.generation = Some(1);
        if deleting {
            c.metadata.deletion_timestamp = Some(Time(ts(NOW)));
        }
        if finalizer {
            c.metadata.finalizers = Some(vec![FINALIZER.into()]);
        }
        c
    }

    fn observed(users: &[&str], reach: Reach) -> Observed {
        Observed {
            users: users.iter().map(|u| u.to_string()).collect(),
            auth: Auth::Valid {
                fingerprint: "fp".into(),
                not_after: None,
            },
            check: Some(LastCheck {
                fingerprint: "fp".into(),
                at: ts(NOW),
                reach,
            }),
            fresh: true,
            now: ts(NOW),
        }
    }

    const W: Duration = status::DEFAULT_EXPIRY_WARNING;

    #[test]
    fn only_an_unused_connection_being_deleted_with_our_finalizer_is_released() {
        let unused = observed(&[], Reach::Answered);
        let used = observed(&["web"], Reach::Answered);
        let release = |c: &TemporalConnection, o: &Observed| plan(c, o, W).finalizer;
        assert_eq!(release(&conn(true, true), &unused), Finalizer::Release);
        assert_eq!(
            release(&conn(true, true), &used),
            Finalizer::Keep,
            "still used"
        );
        assert_eq!(
            release(&conn(false, true), &unused),
            Finalizer::Keep,
            "not deleted"
        );
        assert_eq!(
            release(&conn(true, false), &unused),
            Finalizer::Keep,
            "not ours"
        );
        let p = plan(&conn(true, true), &unused, W);
        assert_eq!(
            (p.status, p.requeue),
            (None, None),
            "nothing to write once released"
        );
    }

    #[test]
    fn the_status_is_written_once_and_then_left_alone() {
        let mut c = conn(false, false);
        let o = observed(&["web"], Reach::Answered);
        let first = plan(&c, &o, W);
        let written = first.status.clone().expect("a first status");
        assert_eq!(written.worker_deployments, ["web"]);
        assert_eq!(written.conditions[0].reason, reason::REACHABLE);
        c.status = Some(written);
        let later = Observed {
            now: Timestamp::from_second(ts(NOW).as_second() + 120).expect("time"),
            fresh: false,
            ..o
        };
        let again = plan(&c, &later, W);
        assert_eq!(again.status, None, "no idle write");
        assert!(again.warnings.is_empty());
        assert_eq!(again.requeue, Some(status::RECHECK));
    }

    #[test]
    fn a_failure_is_written_with_one_warning() {
        let mut c = conn(false, false);
        c.status = plan(&c, &observed(&[], Reach::Answered), W).status;
        let down = plan(&c, &observed(&[], Reach::Failed("refused".into())), W);
        let s = down.status.expect("changed");
        assert_eq!(s.conditions[0].reason, reason::CLIENT_CREATION_FAILED);
        assert_eq!(down.warnings.len(), 1);
    }
}
