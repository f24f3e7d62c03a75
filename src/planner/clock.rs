//! Timestamp arithmetic and the "when to look again" accumulator.
//!
//! Deadlines are computed from Temporal's timestamps (not controller memory) so a restarted
//! controller reaches the same decisions.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// How soon to re-check while a version drains: the server cannot report DRAINED sooner
/// than its visibility grace period (3 min by default), so polling faster gains nothing.
pub const DRAIN_POLL: Duration = Duration::from_secs(30);

/// How soon to re-check while a Manual target waits for a human: a promotion done with the
/// Temporal CLI or UI shows up in the status (and ends `kubectl wait`) within seconds.
pub const MANUAL_POLL: Duration = Duration::from_secs(5);

/// How soon to re-check while another identity owns routing in Temporal.
pub const MANAGER_POLL: Duration = Duration::from_secs(5);

/// `at + d`, or `None` when it does not fit in a timestamp (absurd delays mean "never").
pub fn add(at: Timestamp, d: Duration) -> Option<Timestamp> {
    let signed = SignedDuration::try_from(d).ok()?;
    at.checked_add(signed).ok()
}

/// Time left until `deadline`; `None` once it has passed (or is exactly now).
pub fn until(now: Timestamp, deadline: Timestamp) -> Option<Duration> {
    let left = deadline.duration_since(now);
    if left.is_positive() {
        Duration::try_from(left).ok()
    } else {
        None
    }
}

/// Collects every reason to come back and keeps the earliest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wake(Option<Duration>);

impl Wake {
    /// Come back after `d` at the latest.
    pub fn after(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |cur| cur.min(d)));
    }

    /// Come back exactly at `deadline` if it is still ahead.
    pub fn at(&mut self, now: Timestamp, deadline: Timestamp) {
        if let Some(d) = until(now, deadline) {
            self.after(d);
        }
    }

    pub fn get(self) -> Option<Duration> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn add_and_until_round_trip() {
        let t0 = ts("2026-03-02T10:00:00Z");
        let t1 = add(t0, Duration::from_secs(90)).unwrap();
        assert_eq!(t1, ts("2026-03-02T10:01:30Z"));
        assert_eq!(until(t0, t1), Some(Duration::from_secs(90)));
        assert_eq!(until(t1, t0), None);
        assert_eq!(until(t1, t1), None, "a deadline that is now has passed");
    }

    #[test]
    fn absurd_delays_never_fire() {
        assert_eq!(
            add(ts("2026-03-02T10:00:00Z"), Duration::from_secs(u64::MAX)),
            None
        );
    }

    #[test]
    fn wake_keeps_the_earliest() {
        let now = ts("2026-03-02T10:00:00Z");
        let mut w = Wake::default();
        assert_eq!(w.get(), None);
        w.after(Duration::from_secs(30));
        w.at(now, ts("2026-03-02T10:00:05Z"));
        w.at(now, ts("2026-03-02T09:00:00Z")); // passed: ignored
        w.after(Duration::from_secs(60));
        assert_eq!(w.get(), Some(Duration::from_secs(5)));
    }
}
