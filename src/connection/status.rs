//! The Connection's status rules, pure: what `Ready` says, when the certificate counts as
//! expiring soon, when Temporal is asked again and when the Connection is looked at again.
//! The observe stage uses [`check_due`]; the plan stage everything else.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::conditions as reason;
use crate::api::connection::{
    ClientCertificateStatus, MAX_LISTED_WORKERS, TemporalConnectionStatus,
};
use crate::temporal::auth::CERT_EXPIRY_MARGIN;

/// How long a frontend that answered is trusted to still answer: one `GetSystemInfo` per
/// Connection per interval at rest (issue 30's budget is 1 request per worker deployment per
/// minute; a Connection serves one or many).
pub const CHECK_INTERVAL: Duration = Duration::from_secs(300);
/// How soon a frontend that did not answer is asked again (a failing check reaches no
/// Temporal rate limit: nothing got through).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(30);
/// How often a Connection is looked at again at rest: its users and its Secret (which is not
/// watched) are re-read, Temporal is asked only when [`check_due`] says so.
pub const RECHECK: Duration = Duration::from_secs(60);
/// Default of `--certificate-expiry-warning`.
pub const DEFAULT_EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

/// What the Secret said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Usable credentials; `not_after` of the client certificate for mTLS.
    Valid {
        fingerprint: String,
        not_after: Option<Timestamp>,
    },
    /// Missing Secret or key, wrong type, bad PEM, expired certificate (`not_after` then).
    Invalid {
        message: String,
        not_after: Option<Timestamp>,
    },
}

/// How the frontend answered the last check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    Answered,
    Failed(String),
}

/// The last reachability check of one Connection, remembered between reconciles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastCheck {
    /// Endpoint and credentials it was made with ([`crate::temporal::ConnectionKey`]).
    pub fingerprint: String,
    pub at: Timestamp,
    pub reach: Reach,
}

/// Whether Temporal must be asked now: never asked with these credentials and endpoint, or
/// the last answer is older than its interval.
pub fn check_due(last: Option<&LastCheck>, fingerprint: &str, now: Timestamp) -> bool {
    match last {
        None => true,
        Some(l) if l.fingerprint != fingerprint => true,
        Some(l) => now >= l.at + interval_after(&l.reach),
    }
}

fn interval_after(reach: &Reach) -> SignedDuration {
    let d = match reach {
        Reach::Answered => CHECK_INTERVAL,
        Reach::Failed(_) => RETRY_INTERVAL,
    };
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// Everything the status is computed from.
pub struct Facts<'a> {
    pub generation: i64,
    pub host_port: &'a str,
    /// Names of the worker deployments that use the Connection, any order.
    pub users: &'a [String],
    pub auth: &'a Auth,
    /// The last check (`None` when the credentials are invalid: nothing was asked).
    pub reach: Option<&'a Reach>,
    pub warn_before: Duration,
    pub now: Timestamp,
}

fn warn_window(warn_before: Duration) -> SignedDuration {
    SignedDuration::try_from(warn_before).unwrap_or(SignedDuration::MAX)
}

/// True once `now` is within `warn_before` of `not_after`.
pub fn expiring_soon(not_after: Timestamp, warn_before: Duration, now: Timestamp) -> bool {
    // A window past the end of time covers every certificate.
    now.checked_add(warn_window(warn_before))
        .map_or(true, |t| t >= not_after)
}

/// The status for `facts`; `old` keeps `lastTransitionTime` of unchanged conditions, so an
/// unchanged Connection computes an identical status (and nothing is written).
pub fn status(old: Option<&TemporalConnectionStatus>, f: &Facts<'_>) -> TemporalConnectionStatus {
    let not_after = match f.auth {
        Auth::Valid { not_after, .. } | Auth::Invalid { not_after, .. } => *not_after,
    };
    let client_certificate = not_after.map(|t| ClientCertificateStatus {
        not_after: Time(t),
        expiring_soon: expiring_soon(t, f.warn_before, f.now),
    });
    let (ready, why, message) = match (f.auth, f.reach) {
        (Auth::Invalid { message, .. }, _) => (false, reason::AUTH_SECRET_INVALID, message.clone()),
        (Auth::Valid { .. }, Some(Reach::Failed(m))) => {
            (false, reason::CLIENT_CREATION_FAILED, m.clone())
        }
        (Auth::Valid { .. }, _) => {
            let mut m = format!("Connected to {}", f.host_port);
            if let Some(c) = client_certificate.as_ref().filter(|c| c.expiring_soon) {
                // The margin is the one `CERT_EXPIRY_MARGIN` enforces.
                m.push_str(&format!(
                    "; the client certificate expires at {} (renew it: worker deployments \
                     on this Connection stop 5 minutes before that)",
                    c.not_after.0
                ));
            }
            (true, reason::REACHABLE, m)
        }
    };
    let mut users = f.users.to_vec();
    users.sort();
    users.dedup();
    let count = i32::try_from(users.len()).unwrap_or(i32::MAX);
    users.truncate(MAX_LISTED_WORKERS);
    TemporalConnectionStatus {
        observed_generation: Some(f.generation),
        conditions: conditions(old, f.generation, ready, why, &message, f.now),
        client_certificate,
        worker_deployments: users,
        worker_deployment_count: count,
    }
}

/// `Ready`, `Reconciling` (True while not ready: the controller keeps retrying) and `Stalled`
/// (never True: every failure here is fixed by a Secret or the network, and retried).
fn conditions(
    old: Option<&TemporalConnectionStatus>,
    generation: i64,
    ready: bool,
    why: &str,
    message: &str,
    now: Timestamp,
) -> Vec<Condition> {
    let old_conditions = old.map(|s| s.conditions.as_slice()).unwrap_or_default();
    reason::with_transitions(
        old_conditions,
        &[
            (reason::READY, reason::status_of(ready)),
            (reason::RECONCILING, reason::status_of(!ready)),
            (reason::STALLED, reason::status_of(false)),
        ],
        (why, message),
        generation,
        now,
    )
}

/// A Warning to emit for the change from `old` to `new`, if any: once when `Ready` turns to a
/// failure reason, and once when a certificate (a new one included) enters the warning
/// window. Never on an unchanged status, so nothing is written at rest.
pub fn warnings(
    old: Option<&TemporalConnectionStatus>,
    new: &TemporalConnectionStatus,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let ready = |s: &TemporalConnectionStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == reason::READY)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    if let Some((status, why, message)) = ready(new)
        && status == "False"
        && old.and_then(ready).map(|(_, r, _)| r) != Some(why.clone())
    {
        let why = if why == reason::AUTH_SECRET_INVALID {
            reason::AUTH_SECRET_INVALID
        } else {
            reason::CLIENT_CREATION_FAILED
        };
        out.push((why, message));
    }
    if let Some(c) = new.client_certificate.as_ref().filter(|c| c.expiring_soon) {
        let before = old.and_then(|o| o.client_certificate.as_ref());
        if before != Some(c) {
            out.push((
                CERTIFICATE_EXPIRING_SOON,
                format!(
                    "The client certificate expires at {}; renew the Secret before then",
                    c.not_after.0
                ),
            ));
        }
    }
    out
}

/// Reason of the Warning event for a certificate entering the warning window.
pub const CERTIFICATE_EXPIRING_SOON: &str = "CertificateExpiringSoon";

/// When to look at the Connection again: at rest every [`RECHECK`], sooner when the next check
/// of Temporal falls due or the certificate crosses the warning window or its expiry margin.
pub fn next_look(
    last: Option<&LastCheck>,
    not_after: Option<Timestamp>,
    warn_before: Duration,
    now: Timestamp,
) -> Duration {
    let mut due = vec![now + SignedDuration::try_from(RECHECK).unwrap_or(SignedDuration::MAX)];
    if let Some(l) = last {
        due.push(l.at + interval_after(&l.reach));
    }
    if let Some(t) = not_after {
        due.push(t - CERT_EXPIRY_MARGIN);
        if let Ok(w) = t.checked_sub(warn_window(warn_before)) {
            due.push(w);
        }
    }
    let next = due.into_iter().filter(|t| *t > now).min();
    let wait = next.map_or(RECHECK, |t| {
        Duration::try_from(t.duration_since(now)).unwrap_or(RECHECK)
    });
    // Never sooner than a second: a crossing just passed is seen on the next look.
    wait.clamp(Duration::from_secs(1), RECHECK)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("time")
    }

    fn valid(not_after: Option<Timestamp>) -> Auth {
        Auth::Valid {
            fingerprint: "fp".into(),
            not_after,
        }
    }

    fn facts<'a>(
        auth: &'a Auth,
        reach: Option<&'a Reach>,
        users: &'a [String],
        now: Timestamp,
    ) -> Facts<'a> {
        Facts {
            generation: 3,
            host_port: "temporal:7233",
            users,
            auth,
            reach,
            warn_before: DEFAULT_EXPIRY_WARNING,
            now,
        }
    }

    fn ready(s: &TemporalConnectionStatus) -> (String, String) {
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("Ready");
        (c.status.clone(), c.reason.clone())
    }

    fn flag(s: &TemporalConnectionStatus, type_: &str) -> String {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.clone())
            .unwrap_or_default()
    }

    #[test]
    fn a_valid_secret_and_an_answering_frontend_are_ready_and_reachable() {
        let auth = valid(Some(t(90 * DAY)));
        let s = status(None, &facts(&auth, Some(&Reach::Answered), &[], t(0)));
        assert_eq!(ready(&s), ("True".into(), reason::REACHABLE.into()));
        assert_eq!(flag(&s, "Reconciling"), "False");
        assert_eq!(flag(&s, "Stalled"), "False");
        assert_eq!(s.observed_generation, Some(3));
        let cert = s.client_certificate.expect("certificate");
        assert_eq!(cert.not_after, Time(t(90 * DAY)));
        assert!(!cert.expiring_soon);
    }

    #[test]
    fn an_invalid_secret_is_auth_secret_invalid_whatever_temporal_said() {
        let auth = Auth::Invalid {
            message: "Secret \"m\" has no \"tls.key\" entry, or it is empty".into(),
            not_after: None,
        };
        for reach in [None, Some(&Reach::Answered)] {
            let s = status(None, &facts(&auth, reach, &[], t(0)));
            assert_eq!(
                ready(&s),
                ("False".into(), reason::AUTH_SECRET_INVALID.into())
            );
            assert_eq!(flag(&s, "Reconciling"), "True", "retried, not stalled");
            assert_eq!(flag(&s, "Stalled"), "False");
            assert_eq!(s.client_certificate, None);
        }
    }

    #[test]
    fn an_expired_certificate_is_invalid_and_still_shows_its_expiry() {
        let auth = Auth::Invalid {
            message: "expired".into(),
            not_after: Some(t(-DAY)),
        };
        let s = status(None, &facts(&auth, None, &[], t(0)));
        assert_eq!(ready(&s).1, reason::AUTH_SECRET_INVALID);
        let cert = s.client_certificate.expect("certificate");
        assert!(cert.expiring_soon);
    }

    #[test]
    fn a_frontend_that_does_not_answer_is_client_creation_failed() {
        let auth = valid(None);
        let reach = Reach::Failed("connecting to Temporal at t:1: refused".into());
        let s = status(None, &facts(&auth, Some(&reach), &[], t(0)));
        assert_eq!(
            ready(&s),
            ("False".into(), reason::CLIENT_CREATION_FAILED.into())
        );
        assert!(s.conditions[0].message.contains("refused"));
    }

    #[test]
    fn a_certificate_within_the_window_warns_but_stays_ready() {
        let auth = valid(Some(t(3 * DAY)));
        let s = status(None, &facts(&auth, Some(&Reach::Answered), &[], t(0)));
        assert_eq!(ready(&s), ("True".into(), reason::REACHABLE.into()));
        assert!(
            s.client_certificate
                .as_ref()
                .is_some_and(|c| c.expiring_soon)
        );
        assert!(s.conditions[0].message.contains("expires at"));
        // Just outside the window: not yet.
        assert!(!expiring_soon(
            t(14 * DAY + 1),
            DEFAULT_EXPIRY_WARNING,
            t(0)
        ));
        assert!(expiring_soon(t(14 * DAY), DEFAULT_EXPIRY_WARNING, t(0)));
    }

    #[test]
    fn users_are_sorted_deduplicated_bounded_and_counted() {
        let users: Vec<String> = (0..MAX_LISTED_WORKERS + 5)
            .rev()
            .map(|i| format!("w{i:03}"))
            .chain(["w000".to_string()])
            .collect();
        let auth = valid(None);
        let s = status(None, &facts(&auth, Some(&Reach::Answered), &users, t(0)));
        assert_eq!(s.worker_deployment_count, (MAX_LISTED_WORKERS + 5) as i32);
        assert_eq!(s.worker_deployments.len(), MAX_LISTED_WORKERS);
        assert_eq!(s.worker_deployments[0], "w000");
        assert!(s.worker_deployments.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn an_unchanged_connection_computes_the_same_status_later() {
        let auth = valid(Some(t(90 * DAY)));
        let users = vec!["a".to_string()];
        let first = status(None, &facts(&auth, Some(&Reach::Answered), &users, t(0)));
        let later = status(
            Some(&first),
            &facts(&auth, Some(&Reach::Answered), &users, t(3600)),
        );
        assert_eq!(first, later, "an idle Connection must not be written");
        assert!(warnings(Some(&first), &later).is_empty());
    }

    #[test]
    fn a_transition_keeps_no_old_transition_time() {
        let auth = valid(None);
        let ok = status(None, &facts(&auth, Some(&Reach::Answered), &[], t(0)));
        let reach = Reach::Failed("down".into());
        let down = status(Some(&ok), &facts(&auth, Some(&reach), &[], t(60)));
        assert_eq!(down.conditions[0].last_transition_time, Time(t(60)));
        // Stalled stayed False: its transition time is kept.
        assert_eq!(down.conditions[2].last_transition_time, Time(t(0)));
    }

    #[test]
    fn warnings_fire_once_per_transition() {
        let good = valid(Some(t(90 * DAY)));
        let ok = status(None, &facts(&good, Some(&Reach::Answered), &[], t(0)));
        let bad = Auth::Invalid {
            message: "missing".into(),
            not_after: None,
        };
        let broken = status(Some(&ok), &facts(&bad, None, &[], t(60)));
        assert_eq!(
            warnings(Some(&ok), &broken),
            vec![(reason::AUTH_SECRET_INVALID, "missing".to_string())]
        );
        assert!(warnings(Some(&broken), &broken).is_empty());
        // Into the warning window: one Warning, then none while it stays there.
        let soon = valid(Some(t(10 * DAY)));
        let expiring = status(Some(&ok), &facts(&soon, Some(&Reach::Answered), &[], t(0)));
        let w = warnings(Some(&ok), &expiring);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].0, CERTIFICATE_EXPIRING_SOON);
        assert!(warnings(Some(&expiring), &expiring).is_empty());
        // A renewed certificate that is again within the window warns again.
        let renewed = valid(Some(t(12 * DAY)));
        let again = status(
            Some(&expiring),
            &facts(&renewed, Some(&Reach::Answered), &[], t(0)),
        );
        assert_eq!(warnings(Some(&expiring), &again).len(), 1);
    }

    #[test]
    fn temporal_is_asked_on_change_and_at_a_slow_cadence() {
        let answered = LastCheck {
            fingerprint: "fp".into(),
            at: t(0),
            reach: Reach::Answered,
        };
        assert!(check_due(None, "fp", t(0)));
        assert!(!check_due(Some(&answered), "fp", t(299)));
        assert!(check_due(Some(&answered), "fp", t(300)));
        assert!(check_due(Some(&answered), "other", t(1)), "new credentials");
        let failed = LastCheck {
            reach: Reach::Failed("x".into()),
            ..answered
        };
        assert!(!check_due(Some(&failed), "fp", t(29)));
        assert!(check_due(Some(&failed), "fp", t(30)));
    }

    #[test]
    fn the_next_look_is_the_nearest_deadline_within_the_recheck() {
        let answered = LastCheck {
            fingerprint: "fp".into(),
            at: t(0),
            reach: Reach::Answered,
        };
        let w = DEFAULT_EXPIRY_WARNING;
        assert_eq!(next_look(None, None, w, t(0)), RECHECK);
        assert_eq!(next_look(Some(&answered), None, w, t(0)), RECHECK);
        assert_eq!(
            next_look(Some(&answered), None, w, t(280)),
            Duration::from_secs(20)
        );
        // The certificate enters the window in 10 s.
        assert_eq!(
            next_look(None, Some(t(14 * DAY + 10)), w, t(0)),
            Duration::from_secs(10)
        );
        // Everything passed: still never sooner than a second, never later than the recheck.
        assert_eq!(next_look(None, Some(t(-DAY)), w, t(0)), RECHECK);
    }
}
