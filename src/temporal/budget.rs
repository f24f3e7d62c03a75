//! Temporal is a shared budget: the server rate-limits each namespace (and its visibility API
//! much harder) and each worker deployment, and a refusal slows down every rollout on that
//! namespace, not only the one that asked too often. So every call the controller makes first
//! takes a token here, client-side, before Temporal has to refuse it.
//!
//! One [`NamespaceBudget`] per (Temporal address, namespace), shared by every rollout that
//! talks to it. Calls are sorted into [`Class`]es by method; each class has its own token
//! bucket, so a queue of reads never delays a routing write (routing writes have a reserve of
//! their own) and visibility queries cannot use up the reads. A call that names a worker
//! deployment also takes a token from that deployment's bucket.
//!
//! The buckets are `governor`'s GCRA limiters (a maintained crate rather than a hand-written
//! token bucket). How long a call waited is reported to the metrics observer and added to the
//! current reconcile's tally ([`tally`]), which the status reports once it is long.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Which bucket a call takes its token from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// SetCurrent, SetRamping, SetManager: what moves rollouts forward. A reserve of their own.
    Routing,
    /// Visibility queries (Count/List workflow executions): the server's visibility limit is
    /// far below its general one.
    Visibility,
    /// Everything else: describes, gate starts, batch operations, deletions.
    Shared,
}

impl Class {
    /// The class of a `WorkflowService` method, by name.
    pub fn of(method: &str) -> Class {
        match method {
            "SetWorkerDeploymentCurrentVersion"
            | "SetWorkerDeploymentRampingVersion"
            | "SetWorkerDeploymentManager" => Class::Routing,
            "CountWorkflowExecutions" | "ListWorkflowExecutions" => Class::Visibility,
            _ => Class::Shared,
        }
    }

    /// The `class` label of the wait metric.
    pub fn label(self) -> &'static str {
        match self {
            Class::Routing => "routing",
            Class::Visibility => "visibility",
            Class::Shared => "shared",
        }
    }
}

/// Rates per second (bursts equal the rate: one second's worth may go at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// [`Class::Shared`] calls per Temporal namespace.
    pub shared: NonZeroU32,
    /// [`Class::Visibility`] calls per Temporal namespace.
    pub visibility: NonZeroU32,
    /// [`Class::Routing`] calls per Temporal namespace, on top of `shared`.
    pub routing: NonZeroU32,
    /// Calls naming one worker deployment, whatever their class.
    pub per_deployment: NonZeroU32,
}

impl BudgetConfig {
    /// Chosen from `cargo bench --bench temporal_limits` against the dev server (Temporal
    /// 1.32) and kept well below where it first refused (numbers in `docs/temporal-budget.md`).
    pub const DEFAULT: BudgetConfig = BudgetConfig {
        shared: nz(50),
        visibility: nz(8),
        routing: nz(20),
        per_deployment: nz(10),
    };
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

const fn nz(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => NonZeroU32::MIN,
    }
}

/// Called once per admitted call that had to wait, with its class and the wait.
pub type WaitObserver = Arc<dyn Fn(Class, Duration) + Send + Sync>;

/// The buckets of one (Temporal address, namespace).
pub struct NamespaceBudget {
    shared: DefaultDirectRateLimiter,
    visibility: DefaultDirectRateLimiter,
    routing: DefaultDirectRateLimiter,
    /// One bucket per worker deployment ever named: a few bytes each, kept for the process.
    deployments: DefaultKeyedRateLimiter<String>,
    observer: Option<WaitObserver>,
}

impl fmt::Debug for NamespaceBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceBudget")
            .field("deployments", &self.deployments.len())
            .finish()
    }
}

impl NamespaceBudget {
    pub fn new(config: BudgetConfig, observer: Option<WaitObserver>) -> Self {
        let quota = |n: NonZeroU32| Quota::per_second(n).allow_burst(n);
        NamespaceBudget {
            shared: RateLimiter::direct(quota(config.shared)),
            visibility: RateLimiter::direct(quota(config.visibility)),
            routing: RateLimiter::direct(quota(config.routing)),
            deployments: RateLimiter::keyed(quota(config.per_deployment)),
            observer,
        }
    }

    /// Waits for a token of `class` (and of `deployment`'s bucket, when the call names one);
    /// returns how long that took.
    pub async fn admit(&self, class: Class, deployment: Option<&str>) -> Duration {
        let started = Instant::now();
        match class {
            Class::Routing => self.routing.until_ready().await,
            Class::Visibility => self.visibility.until_ready().await,
            Class::Shared => self.shared.until_ready().await,
        }
        if let Some(d) = deployment {
            self.deployments.until_key_ready(&d.to_string()).await;
        }
        let waited = started.elapsed();
        // Sub-millisecond "waits" are the cost of asking, not throttling.
        if waited >= Duration::from_millis(1) {
            if let Some(observe) = &self.observer {
                observe(class, waited);
            }
            add_to_tally(waited);
        }
        waited
    }
}

/// Every namespace's budget, created on first use.
#[derive(Default)]
pub struct Budgets {
    config: BudgetConfig,
    observer: Option<WaitObserver>,
    map: Mutex<HashMap<(String, String), Arc<NamespaceBudget>>>,
}

impl fmt::Debug for Budgets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budgets")
            .field("config", &self.config)
            .finish()
    }
}

impl Budgets {
    pub fn new(config: BudgetConfig, observer: Option<WaitObserver>) -> Self {
        Budgets {
            config,
            observer,
            map: Mutex::default(),
        }
    }

    /// The budget shared by every client of `namespace` at `address`.
    pub fn of(&self, address: &str, namespace: &str) -> Arc<NamespaceBudget> {
        // A poisoned map only means another thread panicked mid-insert; the data is usable.
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let key = (address.to_string(), namespace.to_string());
        if let Some(b) = map.get(&key) {
            return b.clone();
        }
        let budget = Arc::new(NamespaceBudget::new(self.config, self.observer.clone()));
        map.insert(key, budget.clone());
        budget
    }
}

tokio::task_local! {
    static TALLY: Cell<Duration>;
}

fn add_to_tally(waited: Duration) {
    let _ = TALLY.try_with(|t| t.set(t.get() + waited));
}

/// Runs `fut` and returns its output with the time its Temporal calls spent waiting for the
/// budget (calls made from tasks it spawns are not counted).
pub async fn tally<F: Future>(fut: F) -> (F::Output, Duration) {
    TALLY
        .scope(Cell::new(Duration::ZERO), async move {
            let out = fut.await;
            (out, TALLY.with(Cell::get))
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(shared: u32) -> BudgetConfig {
        BudgetConfig {
            shared: nz(shared),
            visibility: nz(1),
            routing: nz(5),
            per_deployment: nz(100),
        }
    }

    #[test]
    fn methods_fall_into_their_classes() {
        assert_eq!(
            Class::of("SetWorkerDeploymentCurrentVersion"),
            Class::Routing
        );
        assert_eq!(
            Class::of("SetWorkerDeploymentRampingVersion"),
            Class::Routing
        );
        assert_eq!(Class::of("SetWorkerDeploymentManager"), Class::Routing);
        assert_eq!(Class::of("CountWorkflowExecutions"), Class::Visibility);
        assert_eq!(Class::of("ListWorkflowExecutions"), Class::Visibility);
        assert_eq!(Class::of("DescribeWorkerDeployment"), Class::Shared);
        assert_eq!(Class::of("StartBatchOperation"), Class::Shared);
    }

    #[tokio::test]
    async fn a_burst_passes_at_once_and_the_next_call_waits_its_turn() {
        let b = NamespaceBudget::new(config(10), None);
        let ((), first) = tally(async {
            for _ in 0..10 {
                b.admit(Class::Shared, None).await;
            }
        })
        .await;
        assert!(first < Duration::from_millis(50), "burst waited {first:?}");
        let waited = b.admit(Class::Shared, None).await;
        assert!(
            waited >= Duration::from_millis(60),
            "the 11th call in a second should wait ~100 ms, waited {waited:?}"
        );
    }

    #[tokio::test]
    async fn routing_writes_do_not_queue_behind_exhausted_reads() {
        let b = NamespaceBudget::new(config(1), None);
        b.admit(Class::Shared, None).await;
        // Reads are exhausted for a second; a routing write still goes at once.
        let started = Instant::now();
        b.admit(Class::Routing, None).await;
        assert!(started.elapsed() < Duration::from_millis(50));
        // A read does wait.
        assert!(b.admit(Class::Shared, None).await >= Duration::from_millis(500));
    }

    #[tokio::test]
    async fn one_busy_deployment_does_not_hold_back_another() {
        let b = NamespaceBudget::new(
            BudgetConfig {
                per_deployment: nz(1),
                ..config(100)
            },
            None,
        );
        b.admit(Class::Shared, Some("ns/a")).await;
        assert!(b.admit(Class::Shared, Some("ns/b")).await < Duration::from_millis(50));
        assert!(b.admit(Class::Shared, Some("ns/a")).await >= Duration::from_millis(500));
    }

    #[tokio::test]
    async fn the_tally_counts_waits_inside_its_scope_only() {
        let b = NamespaceBudget::new(config(1), None);
        b.admit(Class::Shared, None).await; // outside any tally: ignored
        let (waited, tallied) = tally(b.admit(Class::Shared, None)).await;
        assert!(waited >= Duration::from_millis(500));
        assert_eq!(tallied, waited);
    }

    #[test]
    fn one_budget_per_address_and_namespace() {
        let budgets = Budgets::new(BudgetConfig::DEFAULT, None);
        let a = budgets.of("t:7233", "ns1");
        assert!(Arc::ptr_eq(&a, &budgets.of("t:7233", "ns1")));
        assert!(!Arc::ptr_eq(&a, &budgets.of("t:7233", "ns2")));
        assert!(!Arc::ptr_eq(&a, &budgets.of("u:7233", "ns1")));
    }
}
