//! Leader election: the Lease, who acts, and how long a leader may still write.

use std::sync::Arc;
use std::time::Duration;

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
    let mut follow = tokio::time::interval(FOLLOWER_RECHECK);
    follow.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When our Lease ends, as last confirmed by reading it back (see `acting`).
    let mut confirmed_until = lease_rx.borrow().then(lease_end_from_now);
    loop {
        tokio::select! {
            _ = &mut release => break,
            changed = lease_rx.changed() => {
                if changed.is_err() { break; }
                let leader = *lease_rx.borrow();
                tracing::info!(leader, "leader election state changed");
                // The manager has just acquired or renewed the Lease when it says leader.
                confirmed_until = leader.then(lease_end_from_now);
                metrics.set_leader(leader);
                if tx.send(leader).is_err() { break; }
            }
            // A leader confirms how much of its Lease is left; a follower looks for a
            // released Lease (see the two functions).
            _ = follow.tick() => {
                let keep_going = if *lease_rx.borrow() {
                    confirm_leadership(&lease, &mut confirmed_until, &tx, &metrics).await
                } else {
                    take_over_if_free(&lease, &mut lease_rx, &mut watcher, &tx, &metrics).await
                };
                if !keep_going { break; }
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

/// How often a follower re-reads the Lease to notice that it was released.
const FOLLOWER_RECHECK: Duration = Duration::from_secs(1);
/// The Lease's validity after each renewal, and how long before its end the leader renews it
/// (every 3 s, so a read-back normally finds 12–15 s left, well above `min_lease_left`). While renewals succeed, the holder's Lease always has at least the grace left,
/// so a Temporal write it starts (bounded by `temporal::client::WRITE_TIMEOUT`, shorter than the
/// grace) ends before that Lease could expire and another replica take over, even if the
/// renewals after the write started all fail. A crashed leader is still replaced after 15 s.
const LEASE_DURATION_SECS: u64 = 15;
const LEASE_GRACE_SECS: u64 = 12;
/// Clock skew between this node and the next leader's that the write bound tolerates.
const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(1);

/// kube-lease-manager keeps saying "leader" while its renewals fail, until it sees another
/// holder. So a leader reads its Lease back and stops acting once too little of it is confirmed
/// left for a write to finish inside it (and acts again once a renewal shows). False when the
/// receiver is gone.
async fn confirm_leadership(
    lease: &LeaseConfig,
    confirmed_until: &mut Option<jiff::Timestamp>,
    tx: &watch::Sender<bool>,
    metrics: &Metrics,
) -> bool {
    if read_back_due(*confirmed_until, jiff::Timestamp::now()) {
        match lease.held_until().await {
            Ok(held) => *confirmed_until = held,
            Err(e) => tracing::debug!(error = %e, "reading our Lease back failed"),
        }
    }
    let act = acting(*confirmed_until, jiff::Timestamp::now());
    if *tx.borrow() == act {
        return true;
    }
    tracing::warn!(acting = act, until = ?confirmed_until, "leadership confirmation changed");
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
            .is_ok_and(|left: Duration| left >= min_lease_left())
    })
}

/// Whether the leader reads its Lease back now: only once what is confirmed left comes within
/// one recheck of the least a leader may act with, so a healthy leader (renewing every 3 s)
/// reads about every 3-6 s instead of every second, and still never stops acting between two
/// renewals. Issue 41: leader election cost 80 GETs and 20 PATCHes a minute, now about 13 of
/// these reads plus the lease manager's 20 GETs and 20 PATCHes (client-go's default is about
/// 60 requests a minute).
fn read_back_due(until: Option<jiff::Timestamp>, now: jiff::Timestamp) -> bool {
    let low = jiff::SignedDuration::try_from(min_lease_left() + FOLLOWER_RECHECK)
        .unwrap_or(jiff::SignedDuration::MAX);
    until.is_none_or(|u| u.duration_since(now) < low)
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
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
            return true;
        }
        match (spec.renew_time, spec.lease_duration_seconds) {
            (Some(renewed), Some(secs)) => {
                let until = renewed.0 + jiff::SignedDuration::from_secs(i64::from(secs));
                until < jiff::Timestamp::now()
            }
            _ => true,
        }
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

    #[test]
    fn a_leader_reads_its_lease_back_only_as_its_confirmed_time_runs_low() {
        let now = jiff::Timestamp::now();
        let at = |secs: i64| Some(now + jiff::SignedDuration::from_secs(secs));
        // Just confirmed (a renewal at most 3 s old): no read for the next few ticks.
        assert!(!read_back_due(at(15), now));
        assert!(!read_back_due(at(12), now));
        // Within one recheck of the least a leader acts with: read, while still acting.
        let low = min_lease_left() + FOLLOWER_RECHECK - Duration::from_millis(500);
        let low_at = Some(now + jiff::SignedDuration::try_from(low).expect("small"));
        assert!(read_back_due(low_at, now));
        assert!(acting(low_at, now), "the read comes before acting stops");
        assert!(read_back_due(at(-1), now), "expired");
        assert!(
            read_back_due(None, now),
            "never confirmed, or held by another"
        );
        // A renewal every 3 s keeps a read every 3-6 s enough: after a read that finds the
        // oldest renewal, the next read is due before acting would stop.
        let renew = Duration::from_secs(LEASE_DURATION_SECS - LEASE_GRACE_SECS);
        assert!(
            Duration::from_secs(LEASE_DURATION_SECS) - renew >= min_lease_left() + FOLLOWER_RECHECK
        );
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
