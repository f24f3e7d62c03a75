//! The typed options of `run` (filled from the command line by [`RunArgs::options`], or
//! directly by the end-to-end tests) and the reconciler settings they give.
//!
//! [`RunArgs::options`]: crate::run::args::RunArgs::options

use std::net::SocketAddr;
use std::time::Duration;

use crate::connection::ConnectionSettings;
use crate::owned::OwnedSettings;
use crate::reconciler::services::Services;
use crate::temporal::BudgetConfig;
use crate::worker_deployment::Settings;
use crate::worker_deployment::validate::ControllerSettings;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub http_addr: SocketAddr,
    /// More addresses serving the same HTTP endpoints (the Go manager's metrics and probe
    /// addresses, `--metrics-bind-address`, `--health-probe-bind-address`).
    pub extra_http_addrs: Vec<SocketAddr>,
    pub leader_elect: bool,
    pub lease_name: String,
    pub lease_namespace: Option<String>,
    pub watch_namespaces: Vec<String>,
    pub identity: String,
    /// Append `/<UID of the controller's namespace>` (`lease_namespace`, i.e. `POD_NAMESPACE`)
    /// to `identity`, as the Go controller does: installs named alike in different clusters
    /// then differ in Temporal. `identity` alone stays recognised as this controller's own
    /// (the identity an install used before). Needs `get` on that Namespace.
    pub identity_namespace_uid: bool,
    /// Identities of predecessor controllers (patterns, see
    /// [`crate::planner::takeover::Succession`]) whose routing this controller takes over
    /// instead of yielding to it; empty takes over from nobody.
    pub predecessor_identities: Vec<String>,
    /// Recorded with every routing write to tell installs apart that share `identity`
    /// (duplicate-install detection). `None` or empty: [`RunOptions::install_id`] derives it.
    pub install_id: Option<String>,
    pub idle_interval: Duration,
    /// The rest cadence ([`crate::planner::rest`]).
    pub rest_interval: Duration,
    pub fast_poll: Duration,
    pub max_versions_ineligible_for_deletion: usize,
    pub rollback_window: Duration,
    /// The progress deadline of a WorkerDeployment that sets none.
    pub default_progress_deadline: Duration,
    pub pod_name: Option<String>,
    /// Bearer-token authentication of the status API (and optionally `/metrics`).
    pub api_auth: ApiAuth,
    /// How often the task-queue backlog of every live version is read for the backlog
    /// metrics; `None` turns it off.
    pub backlog_poll: Option<Duration>,
    /// Whose backlog is read: only where something consumes it, or everywhere.
    pub backlog_scope: crate::backlog::Scope,
    /// The admission webhook (`crate::webhook`); `None` serves none.
    pub webhook: Option<crate::webhook::WebhookOptions>,
    /// Kinds a TemporalWorkerOwnedResource may carry, for the controller's own check and the
    /// webhook's alike.
    pub owned_kinds: Vec<String>,
    /// Without the webhook, the kinds copied although nobody checked the TWOR author's rights
    /// on them; TWORs of other kinds are refused. Ignored while the webhook runs.
    pub owned_kinds_without_access_check: Vec<String>,
    /// Client-side Temporal rate limits, per Temporal namespace and per worker deployment.
    pub temporal_budget: BudgetConfig,
    /// Reconciles of TemporalWorkerDeployments running at once (0: unbounded).
    pub max_concurrent_reconciles: u16,
    /// A rollout whose Temporal calls waited this long in one reconcile for the budget says
    /// so in its status (`DelayedByTemporalBudget`).
    pub budget_delay_report: Duration,
    /// Poller health of the live versions: `--poller-live-threshold` and
    /// `--poller-check-interval` (`src/planner/poller_health.rs`).
    pub pollers: crate::planner::poller_health::PollerSettings,
    /// A Connection's mTLS client certificate this close to its expiry gets a Warning event,
    /// `status.clientCertificate.expiringSoon` and the metric.
    pub certificate_expiry_warning: Duration,
    /// This replica's shard (`--shard`, `--shard-selector`); `None`: not sharded.
    pub shard: Option<crate::shard::Shard>,
}

/// Who may read the status API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ApiAuth {
    /// Anyone who can reach the port (restrict it with a NetworkPolicy).
    #[default]
    None,
    /// Bearer tokens checked with a Kubernetes TokenReview. With `audiences`, only tokens
    /// minted for one of them pass; with `protect_metrics`, `/metrics` needs a token too.
    TokenReview {
        audiences: Vec<String>,
        protect_metrics: bool,
    },
}

/// Defaults of the options; the command line takes its defaults from here too.
pub mod defaults {
    use std::time::Duration;

    pub const IDLE_INTERVAL: Duration = Duration::from_secs(60);
    pub const REST_INTERVAL: Duration = crate::planner::rest::DEFAULT_INTERVAL;
    pub const FAST_POLL: Duration = Duration::from_millis(500);
    /// One `DescribeWorkerDeploymentVersion` per live version per interval: fresh enough for
    /// an autoscaler's 15-30 s sync period, modest for Temporal.
    pub const BACKLOG_POLL: Duration = Duration::from_secs(15);
    pub const MAX_VERSIONS_INELIGIBLE_FOR_DELETION: usize = 75;
    pub const ROLLBACK_WINDOW: Duration = Duration::from_secs(3600);
    pub const PROGRESS_DEADLINE: Duration =
        crate::worker_deployment::validate::DEFAULT_PROGRESS_DEADLINE;
    pub const IDENTITY: &str = "temporal-worker-controller";
    pub const LEASE_NAME: &str = "temporal-worker-controller";
    /// Enough to keep 2 cores busy while calls wait on Temporal, few enough that a storm of
    /// events (a restart with 1,000 TWDs) queues in kube-runtime instead of in the budget
    /// (measured in `docs/temporal-budget.md`).
    pub const MAX_CONCURRENT_RECONCILES: u16 = 16;
    /// Long enough that an ordinary burst (a restart reconciling everything) does not show.
    pub const BUDGET_DELAY_REPORT: Duration = Duration::from_secs(5);
    /// Days, not minutes: time for a human or cert-manager to renew.
    pub const CERTIFICATE_EXPIRY_WARNING: Duration =
        crate::connection::status::DEFAULT_EXPIRY_WARNING;
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            http_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
            extra_http_addrs: Vec::new(),
            leader_elect: false,
            lease_name: defaults::LEASE_NAME.into(),
            lease_namespace: None,
            watch_namespaces: Vec::new(),
            identity: defaults::IDENTITY.into(),
            identity_namespace_uid: false,
            predecessor_identities: crate::planner::takeover::DEFAULT_PREDECESSORS
                .iter()
                .map(|p| (*p).to_string())
                .collect(),
            install_id: None,
            idle_interval: defaults::IDLE_INTERVAL,
            rest_interval: defaults::REST_INTERVAL,
            fast_poll: defaults::FAST_POLL,
            max_versions_ineligible_for_deletion: defaults::MAX_VERSIONS_INELIGIBLE_FOR_DELETION,
            rollback_window: defaults::ROLLBACK_WINDOW,
            default_progress_deadline: defaults::PROGRESS_DEADLINE,
            pod_name: None,
            api_auth: ApiAuth::None,
            backlog_poll: Some(defaults::BACKLOG_POLL),
            backlog_scope: crate::backlog::Scope::Consumed,
            webhook: None,
            owned_kinds: crate::owned::validate::DEFAULT_ALLOWED_KINDS
                .iter()
                .map(|k| (*k).to_string())
                .collect(),
            owned_kinds_without_access_check: Vec::new(),
            temporal_budget: BudgetConfig::DEFAULT,
            max_concurrent_reconciles: defaults::MAX_CONCURRENT_RECONCILES,
            budget_delay_report: defaults::BUDGET_DELAY_REPORT,
            pollers: Default::default(),
            certificate_expiry_warning: defaults::CERTIFICATE_EXPIRY_WARNING,
            shard: None,
        }
    }
}

impl RunOptions {
    /// The install ID: `--install-id` if set, else `<lease namespace>/<lease name>`, else the
    /// controller identity.
    ///
    /// The default must survive upgrades of one install (a new ID after `helm upgrade` would
    /// make the install look like a stranger to its own earlier routing writes and stall it as
    /// `DuplicateInstall`) and differ between installs: the Lease's namespace and name are
    /// both. Two installs sharing one Lease would share leadership too, so in one cluster a
    /// distinct install already has a distinct Lease; the pod name or a random value would
    /// change on every rollout. Without a namespace (run outside a pod, no `--lease-namespace`)
    /// nothing install-specific is known and the identity is used; installs in different
    /// clusters with the same release namespace and Lease name also collide, so they set
    /// `--install-id` explicitly.
    pub fn install_id(&self) -> String {
        if let Some(id) = self
            .install_id
            .as_deref()
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            return id.to_string();
        }
        match self
            .lease_namespace
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            Some(ns) => format!("{ns}/{}", self.lease_name),
            None => self.identity.clone(),
        }
    }
}

/// The identity this controller acts as in Temporal, and the identities it used before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub identity: String,
    pub earlier: Vec<String>,
}

impl Identity {
    /// `base`, with `/<uid>` appended when a namespace UID is given (and `base` then counted
    /// as this controller's earlier identity).
    pub fn new(base: &str, namespace_uid: Option<&str>) -> Identity {
        match namespace_uid.map(str::trim).filter(|u| !u.is_empty()) {
            Some(uid) => Identity {
                identity: format!("{base}/{uid}"),
                earlier: vec![base.to_string()],
            },
            None => Identity {
                identity: base.to_string(),
                earlier: Vec::new(),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "--identity-namespace-uid needs the controller's namespace (POD_NAMESPACE or --lease-namespace)"
    )]
    NoNamespace,
    #[error(
        "reading the UID of namespace {namespace:?} for the controller identity (grant `get` on it): {source}"
    )]
    Namespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("namespace {0:?} has no UID")]
    NoUid(String),
}

/// Resolves [`RunOptions::identity`] and [`RunOptions::identity_namespace_uid`] once at start.
pub(super) async fn identity(
    client: &kube::Client,
    opts: &RunOptions,
) -> Result<Identity, IdentityError> {
    if !opts.identity_namespace_uid {
        return Ok(Identity::new(&opts.identity, None));
    }
    let namespace = opts
        .lease_namespace
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or(IdentityError::NoNamespace)?;
    let ns = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get(namespace)
        .await
        .map_err(|source| IdentityError::Namespace {
            namespace: namespace.to_string(),
            source,
        })?;
    let uid = ns
        .metadata
        .uid
        .ok_or_else(|| IdentityError::NoUid(namespace.to_string()))?;
    Ok(Identity::new(&opts.identity, Some(&uid)))
}

/// The three reconcilers' settings, each its own (what they share is in [`Services`]).
pub(super) struct ReconcilerSettings {
    pub worker: Settings,
    pub owned: OwnedSettings,
    pub connection: ConnectionSettings,
}

/// The reconcilers' settings from the typed options and the resolved identity.
pub(super) fn settings(opts: &RunOptions, identity: &Identity) -> ReconcilerSettings {
    let worker = Settings {
        succession: crate::planner::takeover::Succession {
            earlier_own: identity.earlier.clone(),
            predecessors: opts.predecessor_identities.clone(),
        },
        controller_version: env!("CARGO_PKG_VERSION").to_string(),
        idle_interval: opts.idle_interval,
        rest_interval: opts.rest_interval,
        fast_poll: opts.fast_poll,
        planner: ControllerSettings {
            max_versions_ineligible_for_deletion: opts.max_versions_ineligible_for_deletion,
            rollback_window: opts.rollback_window,
            default_progress_deadline: opts.default_progress_deadline,
        },
        max_concurrent_reconciles: opts.max_concurrent_reconciles,
        budget_delay_report: opts.budget_delay_report,
        backlog_scope: opts.backlog_scope,
        pollers: opts.pollers,
    };
    // Without the webhook nobody checks a TWOR author's rights on its kind.
    let unchecked = opts
        .webhook
        .is_none()
        .then(|| opts.owned_kinds_without_access_check.clone());
    ReconcilerSettings {
        worker,
        owned: OwnedSettings::new(&opts.owned_kinds, unchecked),
        connection: ConnectionSettings {
            expiry_warning: opts.certificate_expiry_warning,
        },
    }
}

/// `services` as this install runs them: acting in Temporal as `identity`, recording the
/// install ID with its routing writes, over the watched namespaces, in its shard.
pub(super) fn installed(
    mut services: Services,
    opts: &RunOptions,
    identity: &Identity,
) -> Services {
    let install_id = opts.install_id();
    tracing::info!(identity = %identity.identity, %install_id, "Temporal identity and install ID");
    services.identity = identity.identity.clone();
    services.install_id = install_id;
    services.watch_namespaces = opts.watch_namespaces.clone();
    services.shard = opts.shard.clone().map(std::sync::Arc::new);
    services
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_id_defaults_to_the_lease_and_is_overridable() {
        let in_pod = RunOptions {
            lease_namespace: Some("temporal-system".into()),
            lease_name: "twc-east".into(),
            pod_name: Some("twc-7d9f-abcde".into()),
            ..RunOptions::default()
        };
        assert_eq!(in_pod.install_id(), "temporal-system/twc-east");
        // Stable across a rollout (new pod name) and the process.
        let upgraded = RunOptions {
            pod_name: Some("twc-5c4b-fghij".into()),
            ..in_pod.clone()
        };
        assert_eq!(upgraded.install_id(), in_pod.install_id());
        // Distinct between installs: another namespace or another Lease.
        let other_ns = RunOptions {
            lease_namespace: Some("team-a".into()),
            ..in_pod.clone()
        };
        let other_lease = RunOptions {
            lease_name: "twc-west".into(),
            ..in_pod.clone()
        };
        assert_ne!(other_ns.install_id(), in_pod.install_id());
        assert_ne!(other_lease.install_id(), in_pod.install_id());
        // No namespace known: the controller identity.
        for ns in [None, Some(String::new())] {
            let outside = RunOptions {
                lease_namespace: ns,
                identity: "prod-east".into(),
                ..RunOptions::default()
            };
            assert_eq!(outside.install_id(), "prod-east");
        }
        // An explicit ID wins; an empty one means "derive".
        let explicit = RunOptions {
            install_id: Some(" cluster-1/twc ".into()),
            ..in_pod.clone()
        };
        assert_eq!(explicit.install_id(), "cluster-1/twc");
        let empty = RunOptions {
            install_id: Some(String::new()),
            ..in_pod.clone()
        };
        assert_eq!(empty.install_id(), in_pod.install_id());
    }

    #[tokio::test]
    async fn the_services_act_as_this_install_over_the_watched_namespaces() {
        let opts = RunOptions {
            lease_namespace: Some("temporal-system".into()),
            lease_name: "twc-east".into(),
            watch_namespaces: vec!["team-a".into()],
            ..RunOptions::default()
        };
        let uid = "5f0c2a4e-8b1d-4c3e-9a7f-0123456789ab";
        let (base, _leader) = crate::fixtures::offline_services(true);
        let services = installed(base, &opts, &Identity::new("twc", Some(uid)));
        assert_eq!(services.install_id, "temporal-system/twc-east");
        assert_eq!(services.identity, format!("twc/{uid}"));
        assert!(services.watches("team-a") && !services.watches("team-b"));
        assert!(services.shard.is_none());
    }

    #[test]
    fn the_identity_gains_the_namespace_uid_and_remembers_the_plain_one() {
        let uid = "5f0c2a4e-8b1d-4c3e-9a7f-0123456789ab";
        let id = Identity::new("twc", Some(uid));
        assert_eq!(id.identity, format!("twc/{uid}"));
        assert_eq!(id.earlier, vec!["twc".to_string()]);
        // Our own suffixed identity has the Go controller's shape; Settings keep both lists.
        let s = settings(&RunOptions::default(), &id).worker;
        assert_eq!(s.succession.earlier_own, vec!["twc".to_string()]);
        assert_eq!(
            s.succession.predecessors,
            crate::planner::takeover::DEFAULT_PREDECESSORS
        );
        // Two clusters, one install shape: two identities.
        let other = Identity::new("twc", Some("0f0c2a4e-8b1d-4c3e-9a7f-0123456789ab"));
        assert_ne!(other.identity, id.identity);
        for none in [None, Some(""), Some("  ")] {
            let plain = Identity::new("twc", none);
            assert_eq!(plain.identity, "twc");
            assert!(plain.earlier.is_empty());
        }
    }
}
