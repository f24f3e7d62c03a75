//! Leader election: the Lease, who acts, and how long a leader may still write.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::{oneshot, watch};

use crate::metrics::Metrics;

use super::RunError;
use super::options::RunOptions;

/// How long releasing the lease may take.
const RELEASE_BUDGET: Duration = Duration::from_secs(5);

/// Releases the leader lease on request, after the controller stopped acting.
pub(super) struct LeaseHandle {
    release: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseHandle {
    pub(super) async fn release(self) {
        let _ = self.release.send(());
        if tokio::time::timeout(RELEASE_BUDGET, self.task)
            .await
            .is_err()
        {
            tracing::warn!("releasing the lease timed out; it expires on its own");
        }
    }
}

/// Without leader election the channel is constantly `true`. The handle releases the lease
/// (and turns the channel `false`) when asked, not before: only once the controller stopped.
pub(super) async fn leader_channel(
    client: &kube::Client,
    opts: &RunOptions,
    metrics: Arc<Metrics>,
) -> Result<(watch::Receiver<bool>, LeaseHandle), RunError> {
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let (rx, task) = if opts.leader_elect {
        elect(client, opts, metrics, release_rx).await?
    } else {
        always_leader(&metrics, release_rx)
    };
    Ok((
        rx,
        LeaseHandle {
            release: release_tx,
            task,
        },
    ))
}

/// Without election: `true` until the release.
fn always_leader(
    metrics: &Metrics,
    release: oneshot::Receiver<()>,
) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
    metrics.set_leader(true);
    let (tx, rx) = watch::channel(true);
    // Keep the sender alive until the release.
    let task = tokio::spawn(async move {
        let _ = release.await;
        drop(tx);
    });
    (rx, task)
}

/// Joins the election on the Lease; the task follows it until the release.
async fn elect(
    client: &kube::Client,
    opts: &RunOptions,
    metrics: Arc<Metrics>,
    release: oneshot::Receiver<()>,
) -> Result<(watch::Receiver<bool>, tokio::task::JoinHandle<()>), RunError> {
    let lease = LeaseConfig {
        client: client.clone(),
        name: opts.lease_name.clone(),
        namespace: opts
            .lease_namespace
            .clone()
            // kube-lease-manager's default.
            .unwrap_or_else(|| "default".to_string()),
        identity: lease_identity(opts),
    };
    let (lease_rx, watcher) = lease.watch().await?;
    let (tx, rx) = watch::channel(*lease_rx.borrow());
    metrics.set_leader(*lease_rx.borrow());
    let task = tokio::spawn(follow(lease, (lease_rx, watcher), tx, metrics, release));
    Ok((rx, task))
}

/// Passes the lease manager's verdict on, confirmed by reading the Lease back, until the
/// release; then stops acting and releases the Lease.
async fn follow(
    lease: LeaseConfig,
    (mut lease_rx, mut watcher): (watch::Receiver<bool>, LeaseWatcher),
    tx: watch::Sender<bool>,
    metrics: Arc<Metrics>,
    release: oneshot::Receiver<()>,
) {
    let mut release = std::pin::pin!(release);
    let mut backstop = tokio::time::interval(FOLLOWER_BACKSTOP);
    backstop.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A follower watches the Lease (no polling): each renewal says when it would lapse, and a
    // release says so at once.
    let mut changes = lease.changes();
    let mut lapses: Option<jiff::Timestamp> = None;
    // What the leader last confirmed by reading its Lease back (see `acting`).
    let mut confirmed = Confirmed::new(lease_rx.borrow().then(lease_end_from_now));
    loop {
        let leader = *lease_rx.borrow();
        let wait = confirmed.wait(jiff::Timestamp::now());
        tokio::select! {
            _ = &mut release => break,
            changed = lease_rx.changed() => {
                if changed.is_err() { break; }
                let leader = *lease_rx.borrow();
                tracing::info!(leader, "leader election state changed");
                // The manager has just acquired or renewed the Lease when it says leader.
                confirmed = Confirmed::new(leader.then(lease_end_from_now));
                metrics.set_leader(leader);
                if tx.send(leader).is_err() { break; }
            }
            // A leader reads its Lease back when a renewal should show, and stops acting the
            // moment too little of it is confirmed (see `Confirmed`).
            () = tokio::time::sleep(wait), if leader => {
                if !confirm_leadership(&lease, &mut confirmed, &tx, &metrics).await { break; }
            }
            // A follower learns from the watch when the Lease lapses (or was released)...
            // (Read by a leader too, so that it knows the latest lapse the moment it follows.)
            Some(at) = changes.next() => lapses = Some(at),
            () = tokio::time::sleep(until(lapses)), if !leader && lapses.is_some() => {
                lapses = None;
                if !take_over_if_free(&lease, &mut lease_rx, &mut watcher, &tx, &metrics).await {
                    break;
                }
            }
            // ...and reads it now and then in case the watch is broken (no `watch` granted).
            _ = backstop.tick(), if !leader => {
                if !take_over_if_free(&lease, &mut lease_rx, &mut watcher, &tx, &metrics).await {
                    break;
                }
            }
        }
    }
    // Released, or the lease task is gone (we can no longer prove leadership): stop acting.
    let _ = tx.send(false);
    metrics.set_leader(false);
    // Closing the lease channel makes the lease manager clear holderIdentity and return.
    drop(lease_rx);
    match watcher.await {
        Ok(Ok(_)) => tracing::info!("leader lease released"),
        Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader lease failed"),
        Err(e) if e.is_cancelled() => {}
        Err(e) => tracing::warn!(error = %e, "leader lease task failed"),
    }
}

/// How often a leader whose renewal is late and who no longer acts re-reads its Lease.
const FOLLOWER_RECHECK: Duration = Duration::from_secs(1);
/// How often a follower reads the Lease beside its watch (which tells it of every renewal and
/// release without a request): only a broken watch makes this the way it notices a release.
const FOLLOWER_BACKSTOP: Duration = Duration::from_secs(15);
/// A follower tries to take a lapsed Lease over this long after it lapsed (the holder's clock
/// may run a little behind ours).
const LAPSE_MARGIN: Duration = Duration::from_millis(100);

/// How long to sleep until `at` (plus [`LAPSE_MARGIN`]); at once if it has passed.
fn until(at: Option<jiff::Timestamp>) -> Duration {
    at.and_then(|at| Duration::try_from(at.duration_since(jiff::Timestamp::now())).ok())
        .unwrap_or_default()
        + LAPSE_MARGIN
}

/// When `spec`'s Lease stops binding its holder: its renewal plus its duration; released (no
/// holder) or never renewed, at once (the earliest time).
fn lapses_at(spec: &k8s_openapi::api::coordination::v1::LeaseSpec) -> jiff::Timestamp {
    if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
        return jiff::Timestamp::MIN;
    }
    match (&spec.renew_time, spec.lease_duration_seconds) {
        (Some(renewed), Some(secs)) => renewed.0 + jiff::SignedDuration::from_secs(i64::from(secs)),
        _ => jiff::Timestamp::MIN,
    }
}
/// The Lease's validity after each renewal, and how long before its end the leader renews it
/// (every 4 s). While renewals succeed, the holder's Lease always has at least the grace left,
/// so a Temporal write it starts (bounded by `temporal::client::WRITE_TIMEOUT`, shorter than the
/// grace) ends before that Lease could expire and another replica take over, even if the
/// renewals after the write started all fail. A crashed leader is still replaced after 15 s.
/// Renewing every 4 s rather than 3 s is what brings the cost under client-go's 60 requests a
/// minute (issue 41): each renewal costs a PATCH, the lease manager's GET and our read-back.
const LEASE_DURATION_SECS: u64 = 15;
const LEASE_GRACE_SECS: u64 = 11;
/// Clock skew between this node and the next leader's that the write bound tolerates.
const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(1);

/// kube-lease-manager keeps saying "leader" while its renewals fail, until it sees another
/// holder. So a leader reads its Lease back when a renewal should show, and stops acting once
/// too little of it is confirmed left for a write to finish inside it (and acts again once a
/// renewal shows). False when the receiver is gone.
async fn confirm_leadership(
    lease: &LeaseConfig,
    confirmed: &mut Confirmed,
    tx: &watch::Sender<bool>,
    metrics: &Metrics,
) -> bool {
    let now = jiff::Timestamp::now();
    if confirmed.read_back_due(now) {
        match lease.held_until().await {
            Ok(held) => confirmed.read(held, now),
            Err(e) => {
                tracing::debug!(error = %e, "reading our Lease back failed");
                confirmed.read(confirmed.until, now);
            }
        }
    }
    let act = acting(confirmed.until, jiff::Timestamp::now());
    if *tx.borrow() == act {
        return true;
    }
    tracing::warn!(acting = act, until = ?confirmed.until, "leadership confirmation changed");
    metrics.set_leader(act);
    tx.send(act).is_ok()
}

/// The lease manager of a follower sleeps until the holder's lease would expire and only then
/// reads the Lease again, so it misses a release (a clean shutdown) by up to the lease
/// duration. Re-read it and start over with a fresh manager, which takes the free Lease at
/// once. False when election cannot go on.
async fn take_over_if_free(
    lease: &LeaseConfig,
    lease_rx: &mut watch::Receiver<bool>,
    watcher: &mut LeaseWatcher,
    tx: &watch::Sender<bool>,
    metrics: &Metrics,
) -> bool {
    if !lease.is_free().await {
        return true;
    }
    tracing::info!("leader lease is free; taking it over");
    // A follower holds nothing: stopping its manager writes nothing.
    watcher.abort();
    match lease.watch().await {
        Ok((new_rx, new_watcher)) => {
            *lease_rx = new_rx;
            *watcher = new_watcher;
            let leader = *lease_rx.borrow();
            metrics.set_leader(leader);
            tx.send(leader).is_ok()
        }
        Err(e) => {
            tracing::warn!(error = %e, "restarting leader election failed");
            false
        }
    }
}

/// A leader starts no new write unless this much of its Lease is confirmed left: a Temporal
/// write (`temporal::client::WRITE_TIMEOUT`) plus clock skew then ends inside the Lease even if
/// every renewal from now on fails.
fn min_lease_left() -> Duration {
    crate::temporal::client::WRITE_TIMEOUT + CLOCK_SKEW_ALLOWANCE
}

/// Whether a leader whose Lease is confirmed until `until` may still act at `now`.
fn acting(until: Option<jiff::Timestamp>, now: jiff::Timestamp) -> bool {
    until.is_some_and(|u| {
        u.duration_since(now)
            .try_into()
            // Strictly more: the loop wakes at the very moment the least is left, and stops.
            .is_ok_and(|left: Duration| left > min_lease_left())
    })
}

/// After the renewal a read-back looks for should have landed, how long to wait before reading:
/// a PATCH on a healthy API server takes milliseconds, so a read at this delay finds the
/// renewal with one request.
const RENEWAL_SETTLE: Duration = Duration::from_millis(750);
/// Between read-backs while a renewal is late and the leader still acts: a late renewal is
/// seen within this, well before acting would stop.
const LATE_RENEWAL_RECHECK: Duration = Duration::from_millis(250);

/// What a leader has confirmed of its Lease by reading it back, and when it reads next (pure:
/// the times come in). The lease manager renews `LEASE_GRACE_SECS` before the end it last
/// stored; a read just after that renewal shows it, and confirms the leader for one more
/// renewal interval. So a healthy leader reads once per renewal (15 a minute), the fewest that
/// keep it acting: a read can only confirm renewals already made, and a renewal is good for
/// `LEASE_DURATION_SECS - min_lease_left()` of acting, less than two renewal intervals. Issue
/// 41: 15 PATCHes, the lease manager's 15 GETs and these 15 reads, 45 requests a minute
/// (client-go's default is about 60).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Confirmed {
    /// When our Lease ends, as last confirmed; `None` when unconfirmed or held by another.
    until: Option<jiff::Timestamp>,
    /// When we last read it back.
    read_at: Option<jiff::Timestamp>,
}

impl Confirmed {
    fn new(until: Option<jiff::Timestamp>) -> Self {
        Self {
            until,
            read_at: None,
        }
    }

    /// A read-back at `now` found `until` (a failed read confirms nothing new).
    fn read(&mut self, until: Option<jiff::Timestamp>, now: jiff::Timestamp) {
        self.until = until;
        self.read_at = Some(now);
    }

    /// When the next read-back is due: once the renewal after the confirmed one should show;
    /// while it is late, every [`LATE_RENEWAL_RECHECK`] as long as the leader acts, else every
    /// [`FOLLOWER_RECHECK`].
    fn next_read(&self) -> Option<jiff::Timestamp> {
        let span = |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or_default();
        let renewal_shows = self.until.map(|u| {
            u - jiff::SignedDuration::from_secs(LEASE_GRACE_SECS as i64) + span(RENEWAL_SETTLE)
        });
        let retry = self.read_at.map(|r| {
            let acts = acting(self.until, r);
            r + span(if acts {
                LATE_RENEWAL_RECHECK
            } else {
                FOLLOWER_RECHECK
            })
        });
        match (renewal_shows, retry) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    fn read_back_due(&self, now: jiff::Timestamp) -> bool {
        self.next_read().is_none_or(|t| t <= now)
    }

    /// When acting must stop unless a renewal is confirmed first.
    fn stop_acting_at(&self) -> Option<jiff::Timestamp> {
        let least = jiff::SignedDuration::try_from(min_lease_left()).unwrap_or_default();
        self.until.map(|u| u - least)
    }

    /// How long the leader's loop sleeps from `now`: to the next read-back, or to the moment
    /// acting must stop if that comes first (so acting never outlasts the confirmed Lease by a
    /// tick).
    fn wait(&self, now: jiff::Timestamp) -> Duration {
        let stop = self.stop_acting_at().filter(|s| *s > now);
        let wake = match (self.next_read(), stop) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(now),
        };
        Duration::try_from(wake.duration_since(now)).unwrap_or_default()
    }
}

/// The end of a Lease renewed just now.
fn lease_end_from_now() -> jiff::Timestamp {
    jiff::Timestamp::now() + jiff::SignedDuration::from_secs(LEASE_DURATION_SECS as i64)
}

type LeaseWatcher =
    tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>;

/// Where the Lease is and whom this process holds it as.
struct LeaseConfig {
    client: kube::Client,
    name: String,
    namespace: String,
    identity: String,
}

impl LeaseConfig {
    /// A fresh lease manager, watching: the channel says whether this process leads.
    async fn watch(&self) -> Result<(watch::Receiver<bool>, LeaseWatcher), RunError> {
        let manager = kube_lease_manager::LeaseManagerBuilder::new(self.client.clone(), &self.name)
            .with_namespace(&self.namespace)
            .with_identity(&self.identity)
            .with_duration(LEASE_DURATION_SECS)
            .with_grace(LEASE_GRACE_SECS)
            .build()
            .await
            .map_err(|e| RunError::Lease(e.to_string()))?;
        Ok(manager.watch().await)
    }

    /// When our hold of the Lease ends as stored (`renewTime + leaseDurationSeconds`); `None`
    /// when someone else holds it.
    async fn held_until(&self) -> kube::Result<Option<jiff::Timestamp>> {
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        let spec = leases.get(&self.name).await?.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(None);
        }
        Ok(spec
            .renew_time
            .zip(spec.lease_duration_seconds)
            .map(|(renewed, secs)| renewed.0 + jiff::SignedDuration::from_secs(i64::from(secs))))
    }

    /// True when nobody holds the Lease (released) or its holder's term has run out.
    async fn is_free(&self) -> bool {
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        let Ok(Some(lease)) = leases.get_opt(&self.name).await else {
            return false;
        };
        lapses_at(&lease.spec.unwrap_or_default()) < jiff::Timestamp::now()
    }

    /// When the Lease lapses, at each change a watch of it delivers (retried with backoff).
    fn changes(&self) -> futures::stream::BoxStream<'static, jiff::Timestamp> {
        use kube::runtime::{WatchStreamExt as _, watcher};
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        watcher(leases, config)
            .default_backoff()
            .applied_objects()
            .filter_map(|l| std::future::ready(l.ok()))
            .map(|l| lapses_at(&l.spec.unwrap_or_default()))
            .boxed()
    }
}

/// The identity this process holds the Lease under: the pod name, else
/// `<identity>-<host>-<pid>-<random>`. Never the bare controller identity, which every replica
/// shares: two processes holding the Lease under one identity would both act as leader.
fn lease_identity(opts: &RunOptions) -> String {
    if let Some(pod) = opts.pod_name.as_ref().filter(|p| !p.is_empty()) {
        return pod.clone();
    }
    use std::hash::BuildHasher as _;
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    // RandomState is seeded randomly per instance: a nonce without another dependency.
    let nonce = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!(
        "{}-{host}-{}-{:08x}",
        opts.identity,
        std::process::id(),
        nonce as u32
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::defaults;

    #[test]
    fn a_follower_learns_when_the_lease_lapses_from_what_the_watch_delivers() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        let renewed = jiff::Timestamp::now();
        let held = LeaseSpec {
            holder_identity: Some("pod-a".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        };
        assert_eq!(
            lapses_at(&held),
            renewed + jiff::SignedDuration::from_secs(15)
        );
        let released = LeaseSpec {
            holder_identity: None,
            ..held.clone()
        };
        assert_eq!(
            lapses_at(&released),
            jiff::Timestamp::MIN,
            "released: free at once"
        );
        let never_renewed = LeaseSpec {
            renew_time: None,
            ..held
        };
        assert_eq!(lapses_at(&never_renewed), jiff::Timestamp::MIN);
        // A lapse in the past is acted on at once (after the margin), a future one when due.
        assert_eq!(until(Some(jiff::Timestamp::MIN)), LAPSE_MARGIN);
        let later = until(Some(renewed + jiff::SignedDuration::from_secs(10)));
        assert!(later > Duration::from_secs(9) && later <= Duration::from_secs(10) + LAPSE_MARGIN);
    }

    #[test]
    fn every_process_has_its_own_lease_identity_even_without_a_pod_name() {
        let named = RunOptions {
            pod_name: Some("twc-7d9f-abcde".into()),
            ..RunOptions::default()
        };
        assert_eq!(lease_identity(&named), "twc-7d9f-abcde");
        // Two replicas run outside a pod (or without POD_NAME) share the controller identity;
        // with it as lease identity both would believe they hold the lease.
        let a = lease_identity(&RunOptions::default());
        let b = lease_identity(&RunOptions::default());
        assert_ne!(a, b, "two processes would share the lease identity {a:?}");
        assert!(a.starts_with(defaults::IDENTITY), "{a}");
    }

    #[test]
    fn a_leader_acts_only_while_enough_of_its_lease_is_confirmed() {
        let now = jiff::Timestamp::now();
        let at = |secs: i64| Some(now + jiff::SignedDuration::from_secs(secs));
        assert!(acting(at(15), now), "just renewed");
        assert!(acting(at(10), now));
        assert!(!acting(at(8), now), "a write could outlast the Lease");
        assert!(!acting(at(-1), now), "expired");
        assert!(!acting(None, now), "someone else holds it");
        // Read back one tick before a renewal, a healthy leader still has enough left.
        assert!(Duration::from_secs(LEASE_GRACE_SECS) >= min_lease_left() + FOLLOWER_RECHECK);
    }

    /// What [`simulate`] counted.
    #[derive(Debug)]
    struct Simulated {
        /// Lease requests a minute: the lease manager's PATCH and GET per renewal, our reads.
        per_minute: f64,
        /// How often the leader stopped or started acting.
        flips: usize,
        /// When it last stopped acting.
        stopped: Option<jiff::Timestamp>,
    }

    /// `minutes` of a leader that took its Lease at `t0`: the lease manager renews every
    /// `LEASE_DURATION_SECS - LEASE_GRACE_SECS` (each renewal visible `latency` after it is
    /// made) until `fails_after`; the leader's loop sleeps [`Confirmed::wait`], reads back when
    /// due and acts per [`acting`], as `follow()` does. Checks the fence at every wake: while
    /// acting, the Lease as really renewed so far lasts `min_lease_left()` beyond the wake.
    fn simulate(minutes: i64, latency: Duration, fails_after: Option<i64>) -> Simulated {
        let secs = |s: i64| jiff::SignedDuration::from_secs(s);
        let span = |d: Duration| jiff::SignedDuration::try_from(d).expect("small");
        let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let (end, period) = (
            t0 + secs(minutes * 60),
            (LEASE_DURATION_SECS - LEASE_GRACE_SECS) as i64,
        );
        let fails = fails_after.map(|s| t0 + secs(s));
        // The last renewal made by `t` (acquisition included), its end.
        let renewed = |t: jiff::Timestamp, seen_late: Duration| {
            let k = (t - span(seen_late)).duration_since(t0).as_secs() / period;
            let mut r = t0 + secs(k.max(0) * period);
            while fails.is_some_and(|f| r >= f) {
                r -= secs(period);
            }
            Some(r + secs(LEASE_DURATION_SECS as i64))
        };
        let mut confirmed = Confirmed::new(renewed(t0, Duration::ZERO));
        let (mut now, mut reads, mut acts, mut flips, mut stopped) = (t0, 0u64, true, 0, None);
        while now < end {
            let next = now + span(confirmed.wait(now).max(Duration::from_millis(1)));
            if acts {
                let left = renewed(now, Duration::ZERO)
                    .expect("ended")
                    .duration_since(next);
                assert!(
                    left >= span(min_lease_left()),
                    "acting at {next} with {left} left"
                );
            }
            now = next;
            if confirmed.read_back_due(now) {
                reads += 1;
                confirmed.read(renewed(now, latency), now);
            }
            if acting(confirmed.until, now) != acts {
                (acts, flips) = (!acts, flips + 1);
                stopped = (!acts).then_some(now);
            }
        }
        let renewing = fails
            .map_or(end, |f| f.min(end))
            .duration_since(t0)
            .as_secs();
        let renewals = (renewing / period) as u64;
        Simulated {
            per_minute: (2 * renewals + reads) as f64 / minutes as f64,
            flips,
            stopped,
        }
    }

    #[test]
    fn a_healthy_leader_costs_45_lease_requests_a_minute_and_never_stops_acting() {
        let ms = Duration::from_millis;
        for latency in [ms(5), ms(200), ms(700)] {
            let sim = simulate(10, latency, None);
            println!("renewals visible after {latency:?}: {sim:?}");
            assert_eq!(sim.flips, 0, "{latency:?}: {sim:?}");
            assert!(sim.per_minute <= 45.5, "{latency:?}: {sim:?}");
        }
        // A renewal seen late costs a few more reads, and still never stops a healthy leader.
        let slow = simulate(10, ms(1500), None);
        println!("renewals visible after 1.5 s: {slow:?}");
        assert_eq!(slow.flips, 0, "{slow:?}");
        assert!(slow.per_minute <= 100.0, "{slow:?}");
    }

    #[test]
    fn a_leader_whose_renewals_fail_stops_acting_as_its_confirmed_lease_runs_low() {
        let secs = jiff::SignedDuration::from_secs;
        let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        // Renewals stop after 2 minutes: the last one (at 119 s... the 4-s grid: 116 s) ends at
        // 131 s, so acting stops at 131 s less the least a write needs. `simulate` checks the
        // fence at every wake.
        let sim = simulate(4, Duration::from_millis(5), Some(120));
        let last = t0 + secs(116 + LEASE_DURATION_SECS as i64);
        let least = jiff::SignedDuration::try_from(min_lease_left()).expect("small");
        assert_eq!(sim.flips, 1, "{sim:?}");
        assert_eq!(sim.stopped, Some(last - least), "{sim:?}");
    }

    #[test]
    fn a_read_back_is_due_when_the_next_renewal_should_show_and_retried_while_late() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let at = |ms: i64| now + jiff::SignedDuration::from_millis(ms);
        // Just renewed: the next renewal is made in 4 s and read 0.75 s later.
        let mut c = Confirmed::new(Some(at(15_000)));
        assert_eq!(c.next_read(), Some(at(4_750)));
        assert!(!c.read_back_due(at(4_000)));
        assert!(c.read_back_due(at(4_750)));
        // Not there yet: read again soon while acting ...
        c.read(Some(at(15_000)), at(4_750));
        assert_eq!(c.next_read(), Some(at(5_000)));
        // ... and the loop wakes when acting must stop, whether or not a read is due.
        assert_eq!(c.stop_acting_at(), Some(at(6_000)));
        c.read(Some(at(15_000)), at(5_900));
        assert_eq!(c.wait(at(5_900)), Duration::from_millis(100));
        // Held by another, or never confirmed: read every second, without acting.
        c.read(None, at(7_000));
        assert_eq!(c.next_read(), Some(at(8_000)));
        assert!(!acting(c.until, at(7_000)));
        assert!(Confirmed::new(None).read_back_due(now));
    }

    #[test]
    fn a_temporal_write_ends_before_the_lease_it_started_under_can_expire() {
        use crate::temporal::client::WRITE_TIMEOUT;
        let grace = Duration::from_secs(LEASE_GRACE_SECS);
        assert!(
            WRITE_TIMEOUT + CLOCK_SKEW_ALLOWANCE <= grace,
            "a write of up to {WRITE_TIMEOUT:?} can outlast the {grace:?} of Lease left at renewal"
        );
        const {
            assert!(
                LEASE_GRACE_SECS < LEASE_DURATION_SECS,
                "the lease manager needs a renewal before expiry"
            );
            // Renewing every second or faster would only load the API server.
            assert!(LEASE_DURATION_SECS - LEASE_GRACE_SECS >= 2);
        }
    }
}
