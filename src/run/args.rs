//! The `run` subcommand's flags (`RunArgs`) and their checks across flags, as a library type:
//! the binary and the tests build [`RunOptions`](crate::run::RunOptions) the same way
//! ([`RunArgs::from_flags`], [`RunArgs::options`]). The Go manager's flags are accepted here
//! too, with the precedence [`http_addrs`] states.

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use clap::{Parser as _, ValueEnum};

use crate::planner::poller_health;
use crate::run::defaults;
use crate::run::go_flags::{GoBind, go_bind_address, http_addrs};
use crate::temporal::BudgetConfig;
use crate::{api, webhook};

/// A Go-style duration flag (`500ms`, `1m30s`), parsed once by clap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoDuration(pub Duration);

impl FromStr for GoDuration {
    type Err = api::duration::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        api::duration::parse(s).map(GoDuration)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&api::duration::format(self.0))
    }
}

/// A duration in whole days (`14d`) or, for shorter ones, a Go-style duration (`36h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DaysOrDuration(pub Duration);

pub const DAY_SECS: u64 = 24 * 3600;

impl FromStr for DaysOrDuration {
    type Err = api::duration::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.strip_suffix('d').map(str::parse::<u64>) {
            Some(Ok(days)) => days
                .checked_mul(DAY_SECS)
                .map(|secs| DaysOrDuration(Duration::from_secs(secs)))
                .ok_or(api::duration::ParseError {
                    input: s.to_string(),
                    why: "too large",
                }),
            _ => api::duration::parse(s).map(DaysOrDuration),
        }
    }
}

impl fmt::Display for DaysOrDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        if secs > 0 && secs.is_multiple_of(DAY_SECS) && self.0.subsec_nanos() == 0 {
            write!(f, "{}d", secs / DAY_SECS)
        } else {
            f.write_str(&api::duration::format(self.0))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WebhookCertMode {
    /// The controller makes a CA and a serving certificate, renews them and keeps the
    /// caBundle current.
    SelfManaged,
    /// `tls.crt`/`tls.key` from `--webhook-cert-dir` (e.g. a cert-manager Secret).
    Files,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ApiAuthMode {
    None,
    TokenReview,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Address for /metrics, /healthz, /readyz and the status API [default: 0.0.0.0:8080,
    /// or the first of the Go flags below when only those are given].
    #[arg(long)]
    pub http_addr: Option<SocketAddr>,
    /// The Go controller's metrics address (`:8080`, `127.0.0.1:8080`; `0` turns it off):
    /// served too, with every endpoint, unless its port is already served. See
    /// [`http_addrs`] for the precedence.
    #[arg(long, value_parser = go_bind_address)]
    pub metrics_bind_address: Option<GoBind>,
    /// The Go controller's health-probe address (`:8081`): served too, with every endpoint.
    #[arg(long, value_parser = go_bind_address)]
    pub health_probe_bind_address: Option<GoBind>,
    /// Use a Lease so that only one replica acts at a time (`--leader-elect` or, as the Go
    /// manager takes it, `--leader-elect=true|false`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// The Go manager's logging flags (`--zap-devel`, `--zap-encoder`, `--zap-log-level`,
    /// `--zap-stacktrace-level`, `--zap-time-encoding`): accepted and ignored with one warning
    /// (logging here is set with `RUST_LOG`).
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    pub zap_devel: Option<String>,
    #[arg(long, hide = true)]
    pub zap_encoder: Option<String>,
    #[arg(long, hide = true)]
    pub zap_log_level: Option<String>,
    #[arg(long, hide = true)]
    pub zap_stacktrace_level: Option<String>,
    #[arg(long, hide = true)]
    pub zap_time_encoding: Option<String>,
    #[arg(long, default_value = defaults::LEASE_NAME)]
    pub lease_name: String,
    /// Namespace of the Lease (default: POD_NAMESPACE, else the client's default namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Comma-separated namespaces to watch (default: all).
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Identity used for Temporal writes and as routing manager identity.
    #[arg(
        long,
        env = "CONTROLLER_IDENTITY",
        default_value = defaults::IDENTITY
    )]
    pub identity: String,
    /// Append `/<UID of the controller's namespace>` (POD_NAMESPACE) to the identity, so that
    /// installs named alike in different clusters differ in Temporal (the chart's default).
    /// The identity without it stays recognised as this controller's own. Needs `get` on that
    /// Namespace.
    #[arg(long, env = "TWC_IDENTITY_NAMESPACE_UID")]
    pub identity_namespace_uid: bool,
    /// Comma-separated identities of predecessor controllers whose routing this controller
    /// takes over instead of yielding to it: `*` matches anything, `<uuid>` a Kubernetes UID;
    /// `none` takes over from nobody. Default: the Go temporal-worker-controller's
    /// (`temporal-worker-controller` and `*/<uuid>`).
    #[arg(long, env = "TWC_PREDECESSOR_IDENTITIES", value_delimiter = ',')]
    pub predecessor_identities: Vec<String>,
    /// Recorded with every routing write so that a second install using the same identity is
    /// detected (DuplicateInstall). Default: `<lease namespace>/<lease name>`, which stays the
    /// same across upgrades; without a namespace, the identity.
    #[arg(long, env = "TWC_INSTALL_ID")]
    pub install_id: Option<String>,
    /// Re-check interval for rollouts with nothing pending (Go duration).
    #[arg(long, default_value_t = GoDuration(defaults::IDLE_INTERVAL))]
    pub idle_interval: GoDuration,
    /// Re-check interval for rollouts at rest, whose state only a watched event or a change
    /// made in Temporal can move (Go duration): a routing change made directly in Temporal is
    /// in the status within it. Jittered up to a fifth earlier.
    #[arg(long, default_value_t = GoDuration(defaults::REST_INTERVAL))]
    pub rest_interval: GoDuration,
    /// Poll interval while waiting for pollers or gate workflows (Go duration); the planner
    /// and the retry of raced routing writes use it.
    #[arg(long, default_value_t = GoDuration(defaults::FAST_POLL))]
    pub fast_poll: GoDuration,
    #[arg(
        long,
        env = "CONTROLLER_MAX_DEPLOYMENT_VERSIONS_INELIGIBLE_FOR_DELETION",
        default_value_t = defaults::MAX_VERSIONS_INELIGIBLE_FOR_DELETION
    )]
    pub max_versions_ineligible_for_deletion: usize,
    /// A target that was Current within this window is promoted at once (Go duration).
    #[arg(long, default_value_t = GoDuration(defaults::ROLLBACK_WINDOW))]
    pub rollback_window: GoDuration,
    /// Progress deadline of a WorkerDeployment without `spec.progressDeadlineSeconds` (Go
    /// duration): a target not routable by then is `Stalled=True/ProgressDeadlineExceeded`.
    #[arg(long, default_value_t = GoDuration(defaults::PROGRESS_DEADLINE))]
    pub default_progress_deadline: GoDuration,
    /// How often each live version's task-queue backlog is read from Temporal for the
    /// per-version backlog metrics (Go duration; 0 turns them off).
    #[arg(long, default_value_t = GoDuration(defaults::BACKLOG_POLL))]
    pub backlog_poll_interval: GoDuration,
    /// Whose backlog is read: `consumed` (an autoscaler in play, or the WorkerDeployment
    /// annotated `temporal.io/backlog-metrics: "true"`) or `all` (one Temporal request per
    /// live version per interval, for every worker).
    #[arg(long, value_enum, default_value_t = crate::backlog::Scope::Consumed)]
    pub backlog_metrics: crate::backlog::Scope,
    /// A poller of a Current or Ramping version counts as live only if Temporal saw it poll
    /// within this (Go duration): Temporal lists a stopped poller for 5 minutes, and a live one
    /// re-polls at least once a minute.
    #[arg(long, default_value_t = GoDuration(poller_health::DEFAULT_LIVE_WITHIN))]
    pub poller_live_threshold: GoDuration,
    /// How often the pollers of the Current and Ramping versions are checked (Go duration;
    /// also right after those versions change; 0 turns the check off).
    #[arg(long, default_value_t = GoDuration(poller_health::DEFAULT_INTERVAL))]
    pub poller_check_interval: GoDuration,
    /// Temporal calls per second per Temporal namespace (describes, gate starts, batch
    /// operations), shared by every rollout on it; routing writes and visibility queries
    /// have budgets of their own.
    #[arg(long, default_value_t = BudgetConfig::DEFAULT.shared)]
    pub temporal_qps: NonZeroU32,
    /// Visibility queries (count/list workflows) per second per Temporal namespace.
    #[arg(long, default_value_t = BudgetConfig::DEFAULT.visibility)]
    pub temporal_visibility_qps: NonZeroU32,
    /// Routing writes (SetCurrent, SetRamping, manager claims) per second per Temporal
    /// namespace, reserved so that reads never delay them.
    #[arg(long, default_value_t = BudgetConfig::DEFAULT.routing)]
    pub temporal_routing_qps: NonZeroU32,
    /// Temporal calls per second about one worker deployment.
    #[arg(long, default_value_t = BudgetConfig::DEFAULT.per_deployment)]
    pub temporal_deployment_qps: NonZeroU32,
    /// TemporalWorkerDeployments reconciled at once (0: unbounded).
    #[arg(long, default_value_t = defaults::MAX_CONCURRENT_RECONCILES)]
    pub max_concurrent_reconciles: u16,
    /// A Connection's mTLS client certificate this close to its expiry gets a Warning event,
    /// `status.clientCertificate.expiringSoon` and the
    /// `connection_certificate_expiring_soon` metric: whole days (`14d`) or a Go duration.
    #[arg(long, default_value_t = DaysOrDuration(defaults::CERTIFICATE_EXPIRY_WARNING))]
    pub certificate_expiry_warning: DaysOrDuration,
    /// This replica's shard of a sharded install (docs/sharding.md): a name of its own, with
    /// `--shard-selector`. Its leader Lease is `<lease-name>-shard-<name>`.
    #[arg(long, env = "TWC_SHARD")]
    pub shard: Option<String>,
    /// The label selector of the worker deployments this shard reconciles (for example
    /// `sharding.temporal.io/key=a`, or `sharding.temporal.io/key notin (a,b)` for the default
    /// shard); their versioned Deployments carry the same labels.
    #[arg(long, env = "TWC_SHARD_SELECTOR")]
    pub shard_selector: Option<String>,
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Status API authentication: `none`, or `token-review` (bearer tokens checked with a
    /// Kubernetes TokenReview; needs `create` on `tokenreviews`).
    #[arg(long, env = "API_AUTH", value_enum, default_value_t = ApiAuthMode::None)]
    pub api_auth: ApiAuthMode,
    /// With `token-review`: accept only tokens minted for one of these audiences
    /// (comma-separated; default: the API server's own audience).
    #[arg(long, env = "API_AUTH_AUDIENCES", value_delimiter = ',')]
    pub api_auth_audiences: Vec<String>,
    /// With `token-review`: require a token on `/metrics` as well.
    #[arg(long)]
    pub api_auth_metrics: bool,
    /// Kinds a TemporalWorkerOwnedResource may carry (comma-separated, case-insensitive); the
    /// controller and the webhook both refuse others.
    #[arg(long, value_delimiter = ',', default_values_t = default_owned_kinds())]
    pub owned_resource_kinds: Vec<String>,
    /// Without `--webhook-port` nobody checks that a TemporalWorkerOwnedResource's author may
    /// manage its kind, so TWORs are refused unless their kind is listed here (comma-separated,
    /// case-insensitive): kinds the operator declares safe for anyone who may write TWORs.
    #[arg(long, value_delimiter = ',')]
    pub owned_resource_kinds_without_access_check: Vec<String>,
    #[command(flatten)]
    pub webhook: WebhookArgs,
}

/// The admission webhook (docs/webhook.md). Off unless `--webhook-port` is given.
#[derive(clap::Args)]
pub struct WebhookArgs {
    /// Serve the validating admission webhook over HTTPS on this port.
    #[arg(long)]
    pub webhook_port: Option<u16>,
    /// Address the webhook listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub webhook_bind: std::net::IpAddr,
    #[arg(long, value_enum, default_value_t = WebhookCertMode::SelfManaged)]
    pub webhook_cert_mode: WebhookCertMode,
    /// With `files`: the directory holding tls.crt and tls.key.
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs")]
    pub webhook_cert_dir: std::path::PathBuf,
    /// With `self-managed`: the Secret (in the controller's namespace) holding the certificates.
    #[arg(long, default_value = "temporal-worker-controller-webhook-tls")]
    pub webhook_secret_name: String,
    /// With `self-managed`: the ValidatingWebhookConfiguration whose caBundle is kept current.
    #[arg(long, default_value = "temporal-worker-controller")]
    pub webhook_configuration_name: String,
    /// The Service in front of the webhook; its DNS names go into the certificate.
    #[arg(long)]
    pub webhook_service_name: Option<String>,
    /// Extra host names or IP addresses for the certificate (comma-separated), e.g.
    /// `127.0.0.1` when the API server calls a local controller by URL.
    #[arg(long, value_delimiter = ',')]
    pub webhook_hosts: Vec<String>,
    /// Namespace of the Secret and the Service (default: POD_NAMESPACE, as for the Lease).
    #[arg(long)]
    pub webhook_namespace: Option<String>,
    /// How long a self-managed certificate is valid (Go duration).
    #[arg(long, default_value_t = GoDuration(webhook::certs::Validity::default().valid_for))]
    pub webhook_cert_validity: GoDuration,
    /// Renew a self-managed certificate this long before it expires (Go duration).
    #[arg(long, default_value_t = GoDuration(webhook::certs::Validity::default().renew_before))]
    pub webhook_cert_renew_before: GoDuration,
    /// How often every replica re-reads the certificate (Go duration).
    #[arg(long, default_value_t = GoDuration(webhook::DEFAULT_CHECK_INTERVAL))]
    pub webhook_cert_check_interval: GoDuration,
}

pub fn default_owned_kinds() -> Vec<String> {
    crate::owned::validate::DEFAULT_ALLOWED_KINDS
        .iter()
        .map(|k| (*k).to_string())
        .collect()
}

/// Why the flags of `run` do not make a controller: the checks across flags, which clap's
/// per-flag parsing cannot make.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    #[error("--webhook-cert-renew-before must be shorter than --webhook-cert-validity")]
    RenewNotBeforeExpiry,
    #[error(
        "--webhook-port needs --webhook-service-name or --webhook-hosts: the certificate must \
         name how the API server reaches it"
    )]
    WebhookUnnamed,
    #[error(
        "--webhook-port needs the controller's namespace: set POD_NAMESPACE or --webhook-namespace"
    )]
    WebhookWithoutNamespace,
    #[error("--api-auth-audiences and --api-auth-metrics need --api-auth=token-review")]
    ApiAuthWithoutTokenReview,
    #[error(transparent)]
    Shard(#[from] crate::shard::ShardError),
}

/// The webhook's options from its flags; `namespace` is the controller's (POD_NAMESPACE).
pub fn webhook_options(
    args: WebhookArgs,
    namespace: Option<&str>,
) -> Result<Option<webhook::WebhookOptions>, ArgsError> {
    let Some(port) = args.webhook_port else {
        return Ok(None);
    };
    let certs = match args.webhook_cert_mode {
        WebhookCertMode::Files => webhook::CertMode::Files {
            dir: args.webhook_cert_dir,
        },
        WebhookCertMode::SelfManaged => {
            let validity = webhook::certs::Validity {
                valid_for: args.webhook_cert_validity.0,
                renew_before: args.webhook_cert_renew_before.0,
            };
            if validity.renew_before >= validity.valid_for {
                return Err(ArgsError::RenewNotBeforeExpiry);
            }
            webhook::CertMode::SelfManaged {
                secret_name: args.webhook_secret_name,
                configuration_name: args.webhook_configuration_name,
                validity,
            }
        }
    };
    let namespace = args
        .webhook_namespace
        .or_else(|| namespace.map(str::to_string))
        .filter(|n| !n.trim().is_empty())
        .ok_or(ArgsError::WebhookWithoutNamespace)?;
    let extra_hosts: Vec<String> = args
        .webhook_hosts
        .into_iter()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .collect();
    if args.webhook_service_name.is_none() && extra_hosts.is_empty() {
        return Err(ArgsError::WebhookUnnamed);
    }
    Ok(Some(webhook::WebhookOptions {
        addr: SocketAddr::new(args.webhook_bind, port),
        certs,
        namespace,
        service_name: args.webhook_service_name,
        extra_hosts,
        check_interval: args.webhook_cert_check_interval.0,
    }))
}

pub fn api_auth(
    mode: ApiAuthMode,
    audiences: Vec<String>,
    protect_metrics: bool,
) -> Result<crate::run::ApiAuth, ArgsError> {
    use crate::run::ApiAuth;
    let audiences: Vec<String> = audiences
        .into_iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    match mode {
        ApiAuthMode::None if audiences.is_empty() && !protect_metrics => Ok(ApiAuth::None),
        ApiAuthMode::None => Err(ArgsError::ApiAuthWithoutTokenReview),
        ApiAuthMode::TokenReview => Ok(ApiAuth::TokenReview {
            audiences,
            protect_metrics,
        }),
    }
}

/// `--predecessor-identities`: unset gives the defaults, `none` nobody.
pub fn predecessors(given: Vec<String>) -> Vec<String> {
    let given: Vec<String> = given
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    if given.is_empty() {
        return crate::run::RunOptions::default().predecessor_identities;
    }
    if given.iter().any(|p| p == "none") {
        return Vec::new();
    }
    given
}

/// The `--zap-*` flags given, for the one warning that they are ignored.
pub fn zap_flags(args: &RunArgs) -> Vec<&'static str> {
    [
        ("--zap-devel", &args.zap_devel),
        ("--zap-encoder", &args.zap_encoder),
        ("--zap-log-level", &args.zap_log_level),
        ("--zap-stacktrace-level", &args.zap_stacktrace_level),
        ("--zap-time-encoding", &args.zap_time_encoding),
    ]
    .into_iter()
    .filter_map(|(f, v)| v.as_ref().map(|_| f))
    .collect()
}

/// A comma-separated kind list from a flag: trimmed, empty entries dropped.
pub fn kind_list(kinds: Vec<String>) -> Vec<String> {
    kinds
        .into_iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

impl RunArgs {
    /// `run`'s flags parsed from `flags` (without the program and subcommand names), exactly
    /// as the binary parses them: tests build their options this way, so they pass the same
    /// checks a user's flags do.
    pub fn from_flags<I, S>(flags: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        #[derive(clap::Parser)]
        #[command(name = "run")]
        struct Flags {
            #[command(flatten)]
            args: RunArgs,
        }
        let argv = std::iter::once(std::ffi::OsString::from("run"))
            .chain(flags.into_iter().map(Into::into));
        Flags::try_parse_from(argv).map(|f| f.args)
    }

    /// The controller's options from the flags, after the checks across flags (the API auth
    /// mode, the webhook's certificate settings, the Go manager's addresses); logs the one
    /// line each about ignored `--zap-*` flags and where the Go addresses are served.
    pub fn options(self) -> Result<crate::run::RunOptions, ArgsError> {
        let addrs = self.http_addrs();
        let (temporal_budget, pollers) = (self.temporal_budget(), self.pollers());
        let webhook = webhook_options(self.webhook, self.lease_namespace.as_deref())?;
        let opts = crate::run::RunOptions {
            http_addr: addrs[0],
            extra_http_addrs: addrs[1..].to_vec(),
            leader_elect: self.leader_elect,
            lease_name: self.lease_name,
            lease_namespace: self.lease_namespace,
            watch_namespaces: self
                .watch_namespaces
                .into_iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            identity: self.identity,
            identity_namespace_uid: self.identity_namespace_uid,
            predecessor_identities: predecessors(self.predecessor_identities),
            install_id: self.install_id,
            idle_interval: self.idle_interval.0,
            rest_interval: self.rest_interval.0,
            fast_poll: self.fast_poll.0,
            max_versions_ineligible_for_deletion: self.max_versions_ineligible_for_deletion,
            rollback_window: self.rollback_window.0,
            default_progress_deadline: self.default_progress_deadline.0,
            backlog_poll: Some(self.backlog_poll_interval.0).filter(|d| !d.is_zero()),
            backlog_scope: self.backlog_metrics,
            pod_name: self.pod_name,
            temporal_budget,
            max_concurrent_reconciles: self.max_concurrent_reconciles,
            budget_delay_report: crate::run::defaults::BUDGET_DELAY_REPORT,
            pollers,
            certificate_expiry_warning: self.certificate_expiry_warning.0,
            shard: crate::shard::Shard::from_flags(
                self.shard.as_deref(),
                self.shard_selector.as_deref(),
            )?,
            api_auth: api_auth(
                self.api_auth,
                self.api_auth_audiences,
                self.api_auth_metrics,
            )?,
            webhook,
            owned_kinds: kind_list(self.owned_resource_kinds),
            owned_kinds_without_access_check: kind_list(
                self.owned_resource_kinds_without_access_check,
            ),
        };
        Ok(opts)
    }

    /// Where the HTTP server listens ([`http_addrs`]), logging once what the Go manager's
    /// flags did and that its `--zap-*` flags are ignored.
    fn http_addrs(&self) -> Vec<SocketAddr> {
        let zap = zap_flags(self);
        if !zap.is_empty() {
            tracing::warn!(
                flags = %zap.join(", "),
                "the Go manager's --zap-* logging flags are ignored; set RUST_LOG instead"
            );
        }
        let (addrs, go_note) = http_addrs(
            self.http_addr,
            self.metrics_bind_address,
            self.health_probe_bind_address,
        );
        if let Some(note) = go_note {
            tracing::info!("{note}");
        }
        addrs
    }

    fn temporal_budget(&self) -> BudgetConfig {
        BudgetConfig {
            shared: self.temporal_qps,
            visibility: self.temporal_visibility_qps,
            routing: self.temporal_routing_qps,
            per_deployment: self.temporal_deployment_qps,
        }
    }

    fn pollers(&self) -> poller_health::PollerSettings {
        poller_health::PollerSettings {
            live_within: self.poller_live_threshold.0,
            interval: Some(self.poller_check_interval.0).filter(|d| !d.is_zero()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::{Cli, Command};
    use crate::run::{ApiAuth, RunOptions};

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn the_go_charts_manager_flags_are_accepted_and_its_two_addresses_served() {
        // As the Go chart's templates/manager.yaml passes them.
        let a = run_args(&[
            "--leader-elect",
            "--metrics-bind-address=127.0.0.1:8080",
            "--health-probe-bind-address=:8081",
            "--zap-log-level=info",
            "--zap-devel",
            "--zap-encoder",
            "json",
        ]);
        assert!(a.leader_elect);
        assert_eq!(
            zap_flags(&a),
            ["--zap-devel", "--zap-encoder", "--zap-log-level"]
        );
        let (addrs, note) = http_addrs(
            a.http_addr,
            a.metrics_bind_address,
            a.health_probe_bind_address,
        );
        assert_eq!(addrs, [addr("127.0.0.1:8080"), addr("0.0.0.0:8081")]);
        let note = note.expect("one line about the Go flags");
        assert!(note.contains("127.0.0.1:8080 and 0.0.0.0:8081"), "{note}");
    }

    #[test]
    fn ours_wins_and_a_go_address_on_a_port_already_served_is_not_bound_twice() {
        let a = run_args(&[
            "--http-addr=0.0.0.0:8080",
            "--metrics-bind-address=127.0.0.1:8080",
            "--health-probe-bind-address=:8081",
        ]);
        let (addrs, note) = http_addrs(
            a.http_addr,
            a.metrics_bind_address,
            a.health_probe_bind_address,
        );
        assert_eq!(addrs, [addr("0.0.0.0:8080"), addr("0.0.0.0:8081")]);
        assert!(
            note.expect("note")
                .contains("already answered on port 8080")
        );
        // Without any Go flag: our default, and nothing to say.
        let (addrs, note) = http_addrs(None, None, None);
        assert_eq!((addrs, note), (vec![addr("0.0.0.0:8080")], None));
        // `0` turns the Go metrics address off.
        let (addrs, _) = http_addrs(
            None,
            Some(GoBind::Off),
            Some(GoBind::At(addr("0.0.0.0:8081"))),
        );
        assert_eq!(addrs, [addr("0.0.0.0:8081")]);
    }

    #[test]
    fn go_bind_addresses_parse_as_the_go_manager_takes_them() {
        assert_eq!(
            go_bind_address(":8081"),
            Ok(GoBind::At(addr("0.0.0.0:8081")))
        );
        assert_eq!(go_bind_address("0"), Ok(GoBind::Off));
        assert!(go_bind_address("localhost").is_err());
        assert!(!run_args(&["--leader-elect=false"]).leader_elect);
        assert!(run_args(&["--leader-elect=true"]).leader_elect);
        assert!(!run_args(&[]).leader_elect);
    }

    #[test]
    fn flag_defaults_are_the_library_defaults() {
        let cli = Cli::try_parse_from(["twc", "run"]).expect("parse");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        let d = RunOptions::default();
        assert_eq!(args.idle_interval.0, d.idle_interval);
        assert_eq!(args.rest_interval.0, d.rest_interval);
        assert_eq!(
            args.certificate_expiry_warning.0,
            d.certificate_expiry_warning
        );
        assert_eq!(args.fast_poll.0, d.fast_poll);
        assert_eq!(args.rollback_window.0, d.rollback_window);
        assert_eq!(
            args.default_progress_deadline.0,
            d.default_progress_deadline
        );
        assert_eq!(Some(args.backlog_poll_interval.0), d.backlog_poll);
        assert_eq!(args.poller_live_threshold.0, d.pollers.live_within);
        assert_eq!(Some(args.poller_check_interval.0), d.pollers.interval);
        assert_eq!(args.identity, d.identity);
        assert_eq!(args.lease_name, d.lease_name);
        assert_eq!(args.install_id, d.install_id);
        assert_eq!(args.identity_namespace_uid, d.identity_namespace_uid);
        assert_eq!(
            predecessors(args.predecessor_identities.clone()),
            d.predecessor_identities
        );
        assert_eq!(
            args.max_versions_ineligible_for_deletion,
            d.max_versions_ineligible_for_deletion
        );
        let cli = Cli::try_parse_from(["twc", "run", "--fast-poll", "250ms"]).expect("parse");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.fast_poll.0, Duration::from_millis(250));
        assert!(Cli::try_parse_from(["twc", "run", "--fast-poll", "soon"]).is_err());
        assert!(Cli::try_parse_from(["twc", "run", "--api-auth", "oidc"]).is_err());
        assert_eq!(args.owned_resource_kinds, d.owned_kinds);
        assert!(args.owned_resource_kinds_without_access_check.is_empty());
        assert_eq!(webhook_options(args.webhook, Some("twc")), Ok(None));
        let opted_out = run_args(&[
            "--owned-resource-kinds-without-access-check=PodDisruptionBudget, HorizontalPodAutoscaler",
        ]);
        assert_eq!(
            kind_list(opted_out.owned_resource_kinds_without_access_check),
            ["PodDisruptionBudget", "HorizontalPodAutoscaler"]
        );
    }

    fn run_args(extra: &[&str]) -> RunArgs {
        RunArgs::from_flags(extra).expect("parse")
    }

    #[test]
    fn webhook_flags() {
        let args = run_args(&[
            "--webhook-port=9443",
            "--webhook-service-name=twc-webhook",
            "--webhook-cert-validity=1h",
            "--webhook-cert-renew-before=20m",
            "--owned-resource-kinds=HorizontalPodAutoscaler, ConfigMap",
        ]);
        assert_eq!(
            args.owned_resource_kinds,
            vec![
                "HorizontalPodAutoscaler".to_string(),
                " ConfigMap".to_string()
            ]
        );
        let w = webhook_options(args.webhook, Some("twc-system"))
            .expect("valid")
            .expect("on");
        assert_eq!(w.addr, "0.0.0.0:9443".parse().expect("addr"));
        assert_eq!(w.namespace, "twc-system");
        assert_eq!(
            w.certs,
            webhook::CertMode::SelfManaged {
                secret_name: "temporal-worker-controller-webhook-tls".into(),
                configuration_name: "temporal-worker-controller".into(),
                validity: webhook::certs::Validity {
                    valid_for: Duration::from_secs(3600),
                    renew_before: Duration::from_secs(1200),
                },
            }
        );
        let files = run_args(&[
            "--webhook-port=9443",
            "--webhook-cert-mode=files",
            "--webhook-cert-dir=/certs",
            "--webhook-hosts=127.0.0.1",
        ]);
        let w = webhook_options(files.webhook, Some("n"))
            .expect("valid")
            .expect("on");
        assert_eq!(
            w.certs,
            webhook::CertMode::Files {
                dir: "/certs".into()
            }
        );
        assert_eq!(w.hosts(), vec!["127.0.0.1".to_string()]);

        let refused = |extra: &[&str], ns: Option<&str>| {
            webhook_options(run_args(extra).webhook, ns).is_err()
        };
        assert!(
            refused(&["--webhook-port=1"], Some("n")),
            "no host to certify"
        );
        assert!(
            refused(&["--webhook-port=1", "--webhook-hosts=a"], None),
            "no namespace"
        );
        assert!(refused(
            &[
                "--webhook-port=1",
                "--webhook-hosts=a",
                "--webhook-cert-validity=1h",
                "--webhook-cert-renew-before=1h"
            ],
            Some("n")
        ));
    }

    #[test]
    fn identity_flags_parse() {
        let cli = Cli::try_parse_from([
            "twc",
            "run",
            "--identity-namespace-uid",
            "--predecessor-identities",
            "go-prod/*/<uuid>, legacy",
        ])
        .expect("parse");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert!(args.identity_namespace_uid);
        assert_eq!(
            predecessors(args.predecessor_identities),
            vec!["go-prod/*/<uuid>".to_string(), "legacy".to_string()]
        );
        let cli =
            Cli::try_parse_from(["twc", "run", "--predecessor-identities=none"]).expect("parse");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert!(predecessors(args.predecessor_identities).is_empty());
    }

    #[test]
    fn install_id_flag_parses() {
        let cli =
            Cli::try_parse_from(["twc", "run", "--install-id", "cluster-1/twc"]).expect("parse");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.install_id.as_deref(), Some("cluster-1/twc"));
        let cli = Cli::try_parse_from(["twc", "run", "--install-id=prod"]).expect("parse");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.install_id.as_deref(), Some("prod"));
    }

    #[test]
    fn api_auth_flags() {
        let none = ApiAuthMode::None;
        assert_eq!(api_auth(none, vec![], false), Ok(ApiAuth::None));
        assert_eq!(
            api_auth(
                ApiAuthMode::TokenReview,
                vec![" twc ".into(), String::new()],
                true
            ),
            Ok(ApiAuth::TokenReview {
                audiences: vec!["twc".into()],
                protect_metrics: true
            })
        );
        assert!(api_auth(none, vec!["twc".into()], false).is_err());
        assert!(api_auth(none, vec![], true).is_err());
    }

    #[test]
    fn the_expiry_warning_takes_days_or_a_go_duration() {
        let parse = |s: &str| s.parse::<DaysOrDuration>().map(|d| d.0);
        assert_eq!(parse("14d"), Ok(Duration::from_secs(14 * DAY_SECS)));
        assert_eq!(parse("36h"), Ok(Duration::from_secs(36 * 3600)));
        assert!(parse("d").is_err());
        assert!(parse("14").is_err());
        assert_eq!(
            DaysOrDuration(Duration::from_secs(14 * DAY_SECS)).to_string(),
            "14d"
        );
        assert_eq!(DaysOrDuration(Duration::from_secs(3600)).to_string(), "1h");
    }
}
