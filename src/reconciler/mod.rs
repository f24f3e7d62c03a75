//! The skeleton every reconciler of the controller follows (worker deployments in
//! `src/worker_deployment/`, owned-resource templates in `src/owned/`, Connections in
//! `src/connection/`; this module depends on none of them):
//!
//! - the same stages, one file each: validate → observe → plan (pure) → act (the only writer
//!   to Kubernetes or Temporal besides status) → report (the only writer of status and
//!   events, and the one place that counts failures);
//! - a driver that is a plain list of stage calls inside [`instrumented`], which gives every
//!   reconcile its span, its duration and its outcome count, labelled by [`ControllerKind`];
//! - one failure type per controller implementing [`ReconcileFailure`]: one variant per stage or cause
//!   keeping its typed source, a [`ReconcileFailure::reason`] that is both the metric label and, where
//!   the status reports it, the documented condition reason, and an exhaustive `verdict()`
//!   next to it (in the controller's `outcome.rs`) deciding conditions, event and retry;
//! - failure streaks per object ([`Streaks`]) feeding one [`backoff`].
//!
//! `docs/architecture.md` has the table of reconcilers and their stage files.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::{Instrument, info_span};

pub mod connect;
pub mod finalizers;
pub mod services;

use crate::error::Error;

use crate::metrics::Metrics;
pub use crate::metrics::{ControllerKind, ReconcileOutcome};

/// A reconciler's failure.
pub trait ReconcileFailure: std::error::Error + Send + Sync + 'static {
    /// The `reason` label of `reconcile_errors_total`; where the status reports the failure,
    /// also its documented condition reason.
    fn reason(&self) -> &'static str;
}

/// The kube-runtime entry of every reconciler: a follower waits (winning the Lease reconciles
/// every object at once, `reconcile_all_on` in `src/controller/mod.rs`, so there is nothing to poll
/// for); the leader runs `stages` with the object's namespace inside [`instrumented`], in a
/// span naming the controller, the object and its generation.
pub async fn lead<K, Fut>(
    controller: ControllerKind,
    metrics: &Metrics,
    leads: bool,
    obj: &K,
    stages: impl FnOnce(String) -> Fut,
) -> Result<Action, Error>
where
    K: Resource,
    Fut: Future<Output = (Action, ReconcileOutcome)>,
{
    if !leads {
        return Ok(Action::await_change());
    }
    let ns = obj.namespace().ok_or(Error::MissingObjectKey)?;
    let span = info_span!(
        "reconcile",
        controller = controller.as_str(),
        namespace = %ns,
        name = %obj.name_any(),
        generation = obj.meta().generation
    );
    // Boxed: a reconcile's future is large (every stage's state), and whoever polls it
    // should not have to hold it on its own stack.
    Ok(instrumented(controller, metrics, span, Box::pin(stages(ns))).await)
}

/// Runs one reconcile of `controller` inside its span, timing it and counting how it ended.
/// `stages` returns the result for kube-runtime and how it ended.
pub async fn instrumented<T>(
    controller: ControllerKind,
    metrics: &Metrics,
    span: tracing::Span,
    stages: impl Future<Output = (T, ReconcileOutcome)>,
) -> T {
    async move {
        let timer = metrics.reconcile_started(controller);
        let (out, ended) = stages.await;
        timer.finish(ended);
        out
    }
    .instrument(span)
    .await
}

/// Counts one failed reconcile by reason and logs it once, the same way for every controller.
pub fn count_failure(
    metrics: &Metrics,
    controller: ControllerKind,
    failure: &dyn ReconcileFailure,
    streak: u32,
) {
    metrics.reconcile_error(controller, failure.reason());
    tracing::info!(
        controller = controller.as_str(),
        reason = failure.reason(),
        error = %failure,
        streak,
        "reconcile failed"
    );
}

/// 0.5 s, 1 s, 2 s … capped at 30 s after `streak` failures in a row: quick recovery once the
/// fault is fixed, little load while it lasts.
pub fn backoff(streak: u32) -> Duration {
    let exp = i32::try_from(streak.saturating_sub(1).min(6)).unwrap_or(6);
    Duration::from_secs_f64((0.5 * 2f64.powi(exp)).min(30.0))
}

/// [`backoff`] plus up to 50 % jitter, `jitter` in `0.0..1.0`.
pub fn jittered(streak: u32, jitter: f64) -> Duration {
    backoff(streak).mul_f64(1.0 + jitter.clamp(0.0, 1.0) * 0.5)
}

/// A draw in `0.0..1.0` for [`jittered`], independent of the clock: throttled reconciles that
/// fail together must not retry together. (The clock's sub-second digits, used before, are
/// equal for draws taken at the same instant, move in step for draws taken one after another,
/// and are always 0 on a clock with microsecond resolution.)
pub fn jitter() -> f64 {
    fastrand::f64()
}

/// Consecutive failed reconciles per object.
#[derive(Debug)]
pub struct Streaks<K>(Mutex<HashMap<K, u32>>);

impl<K> Default for Streaks<K> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<K: Eq + Hash + Clone> Streaks<K> {
    /// A success: the streak is over. Returns 0.
    pub fn succeeded(&self, key: &K) -> u32 {
        self.lock().remove(key);
        0
    }

    /// One more failure; returns the streak including it.
    pub fn failed(&self, key: &K) -> u32 {
        let mut m = self.lock();
        let n = m.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// The streak as it stands (a stale read neither ends nor extends it).
    pub fn current(&self, key: &K) -> u32 {
        self.lock().get(key).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        // A poisoned lock only means another reconcile panicked mid-update; counts stay usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_half_a_second_up_to_thirty() {
        let secs: Vec<f64> = (1..=9).map(|n| backoff(n).as_secs_f64()).collect();
        assert_eq!(secs, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]);
        assert_eq!(backoff(0), backoff(1));
        assert!(jittered(3, 0.99) > backoff(3));
        assert!(jittered(3, 0.99) <= backoff(3).mul_f64(1.5));
    }

    /// A burst of draws taken back to back (as many rollouts throttled by the same refusal do)
    /// covers the range evenly and is not ordered: each decile holds about a tenth, and about
    /// half the successive pairs go up. The clock's digits fail both (a burst spans a few
    /// microseconds, so successive draws mostly go up by the few nanoseconds between them).
    /// The bounds are over 5 standard deviations wide, so an honest generator does not fail.
    #[test]
    fn jitter_draws_taken_at_once_spread_across_the_range() {
        const N: usize = 2000;
        let draws: Vec<f64> = (0..N).map(|_| jitter()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)), "{draws:?}");
        let mut deciles = [0usize; 10];
        for d in &draws {
            deciles[((d * 10.0) as usize).min(9)] += 1;
        }
        assert!(
            deciles.iter().all(|&n| (130..=270).contains(&n)),
            "uneven: {deciles:?}"
        );
        let ups = draws.windows(2).filter(|w| w[1] > w[0]).count();
        let share = ups as f64 / (N - 1) as f64;
        assert!(
            (0.44..=0.56).contains(&share),
            "{share} of the successive draws go up"
        );
        let mut distinct = draws.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > N * 99 / 100, "{} distinct", distinct.len());
    }

    #[test]
    fn a_streak_grows_with_failures_and_ends_with_a_success() {
        let s = Streaks::<&str>::default();
        assert_eq!((s.failed(&"a"), s.failed(&"a"), s.failed(&"b")), (1, 2, 1));
        assert_eq!(s.current(&"a"), 2);
        assert_eq!(s.succeeded(&"a"), 0);
        assert_eq!((s.current(&"a"), s.current(&"b")), (0, 1));
    }

    #[test]
    fn every_controller_has_its_own_label() {
        let labels: std::collections::BTreeSet<_> =
            ControllerKind::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(labels.len(), ControllerKind::ALL.len());
    }
}
