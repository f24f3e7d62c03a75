//! kube-runtime wiring and the reconcile of one `TemporalWorkerDeployment`:
//! observe (Kubernetes + Temporal) → plan (pure) → execute → write status once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::sync::{broadcast, watch};
use tracing::{Instrument, info, info_span, warn};

use crate::api::conditions as reason;
use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::api::validate::{self, ControllerSettings};
use crate::api::{FINALIZER, LABEL_DEPLOYMENT_NAME, TemporalConnection, TemporalWorkerDeployment};
use crate::error::{Error, Result};
use crate::events::{self, EventSink};
use crate::executor::{self, Done, ExecContext};
use crate::metrics::Metrics;
use crate::observe;
use crate::planner::{self, model::PlanInput, model::RoutingChange};
use crate::status::{self, Blocked, Report};
use crate::temporal::{self, ClientPool, ConnectionKey, TemporalClient};

/// How often finalizer cleanup retries while Temporal still remembers pollers.
const CLEANUP_RETRY: Duration = Duration::from_secs(5);
/// After this long in deletion, the finalizer is released even if Temporal cleanup failed
/// (twice Temporal's default PollerHistoryTTL plus slack).
const CLEANUP_GIVE_UP_AFTER: Duration = Duration::from_secs(15 * 60);

/// Retry delay after a status write lost a race with the watch cache.
const STALE_RETRY: Duration = Duration::from_millis(200);

/// Rate-limited reads, and raced or rate-limited routing writes, retry quietly this many times
/// in a row before the status says so.
const THROTTLE_REPORT_AFTER: u32 = 5;

/// 0.5 s, 1 s, 2 s … capped at 30 s, plus up to 50 % jitter so that many TWDs throttled
/// together do not retry in lockstep.
fn throttle_delay(attempt: u32) -> Duration {
    let base = (0.5 * 2f64.powi((attempt.saturating_sub(1)).min(6) as i32)).min(30.0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = f64::from(nanos % 1000) / 1000.0 * 0.5;
    Duration::from_secs_f64(base * (1.0 + jitter))
}

fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Kube(kube::Error::Api(s)) if s.code == 409)
}

/// Runtime settings (from flags).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Identity used for every Temporal write and as the routing manager identity.
    pub identity: String,
    pub controller_version: String,
    /// Re-check interval for resources with nothing pending.
    pub idle_interval: Duration,
    /// Poll interval while waiting for Temporal-side facts (pollers, gates).
    pub fast_poll: Duration,
    /// Empty = all namespaces.
    pub watch_namespaces: Vec<String>,
    pub planner: ControllerSettings,
}

/// Shared state of the reconciler.
pub struct Context {
    pub client: kube::Client,
    pub pool: Arc<ClientPool>,
    pub settings: Settings,
    pub events: EventSink,
    pub metrics: Arc<Metrics>,
    /// Every status written is published here (SSE watch of the status API).
    pub feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
    /// True while this replica holds the leader lease (always true without leader election).
    pub leader: watch::Receiver<bool>,
    /// Consecutive failures per object, for backoff on transient errors.
    failures: Streaks,
    /// Consecutive rate-limited Temporal reads per object.
    throttled_reads: Streaks,
    /// Consecutive rate-limited Temporal writes (routing changes) per object.
    throttled_writes: Streaks,
}

/// Consecutive occurrences of something per object.
#[derive(Default)]
struct Streaks(Mutex<HashMap<ObjectRef<TemporalWorkerDeployment>, u32>>);

impl Streaks {
    /// Counts one more occurrence; returns the streak including it.
    fn bump(&self, key: &ObjectRef<TemporalWorkerDeployment>) -> u32 {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    fn reset(&self, key: &ObjectRef<TemporalWorkerDeployment>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

impl Context {
    pub fn new(
        client: kube::Client,
        pool: Arc<ClientPool>,
        settings: Settings,
        events: EventSink,
        metrics: Arc<Metrics>,
        feed: broadcast::Sender<Arc<TemporalWorkerDeployment>>,
        leader: watch::Receiver<bool>,
    ) -> Self {
        Self {
            client,
            pool,
            settings,
            events,
            metrics,
            feed,
            leader,
            failures: Streaks::default(),
            throttled_reads: Streaks::default(),
            throttled_writes: Streaks::default(),
        }
    }

    fn backoff(&self, key: &ObjectRef<TemporalWorkerDeployment>) -> Duration {
        let n = self.failures.bump(key);
        // 0.5 s, 1 s, 2 s … capped at 30 s: quick recovery once the fault is fixed.
        let secs = 0.5 * 2f64.powi((n as i32 - 1).min(6));
        Duration::from_secs_f64(secs.min(30.0))
    }

    fn reset_backoff(&self, key: &ObjectRef<TemporalWorkerDeployment>) {
        self.failures.reset(key);
    }
}

/// Builds the controller. Returns its reflector store (for the status API) and a future
/// that runs it until `shutdown` resolves.
pub fn build(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> (
    Store<TemporalWorkerDeployment>,
    impl std::future::Future<Output = ()>,
) {
    let client = ctx.client.clone();
    let single_ns = match ctx.settings.watch_namespaces.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let (twds, deployments, connections): (
        Api<TemporalWorkerDeployment>,
        Api<Deployment>,
        Api<TemporalConnection>,
    ) = match &single_ns {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        ),
    };
    let controller = Controller::new(twds, watcher::Config::default());
    let store = controller.store();
    let mapper_store = store.clone();
    let fut = controller
        .owns(
            deployments,
            watcher::Config::default().labels(LABEL_DEPLOYMENT_NAME),
        )
        // A Connection change requeues every TWD that references it.
        .watches(
            connections,
            watcher::Config::default(),
            move |conn: TemporalConnection| {
                let ns = conn.namespace();
                let name = conn.name_any();
                mapper_store
                    .state()
                    .into_iter()
                    .filter(|t| {
                        t.namespace() == ns && t.spec.worker_options.connection_ref.name == name
                    })
                    .map(|t| ObjectRef::from_obj(&*t))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "reconcile stream error");
            }
        });
    (store, fut)
}

fn error_policy(twd: Arc<TemporalWorkerDeployment>, err: &Error, ctx: Arc<Context>) -> Action {
    warn!(error = %err, name = %twd.name_any(), "reconcile failed");
    ctx.metrics.reconcile_error(err.metric_label());
    Action::requeue(ctx.backoff(&ObjectRef::from_obj(&*twd)))
}

async fn reconcile(twd: Arc<TemporalWorkerDeployment>, ctx: Arc<Context>) -> Result<Action> {
    let ns = twd.namespace().ok_or(Error::MissingObjectKey)?;
    let name = twd.name_any();
    if !ctx.settings.watch_namespaces.is_empty() && !ctx.settings.watch_namespaces.contains(&ns) {
        return Ok(Action::await_change());
    }
    if !*ctx.leader.borrow() {
        // Followers never write; re-check soon so a new leader picks up at once.
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    let span = info_span!("reconcile", namespace = %ns, name = %name, generation = twd.metadata.generation);
    let timer = ctx.metrics.reconcile_started();
    let result = Reconciler {
        ctx: &ctx,
        twd,
        ns,
        name,
    }
    .run()
    .instrument(span)
    .await;
    timer.finish(match &result {
        Ok(_) => "success",
        Err(_) => "error",
    });
    result
}

struct Reconciler<'a> {
    ctx: &'a Context,
    twd: Arc<TemporalWorkerDeployment>,
    ns: String,
    name: String,
}

/// How a reconcile that could not plan ends.
struct Stop {
    blocked: Blocked,
    action: Action,
    /// Transient (rate limiting): retry without touching the status, so a finished rollout
    /// does not flap Ready for GitOps tools. Reported once it persists.
    quiet: bool,
}

impl Reconciler<'_> {
    fn key(&self) -> ObjectRef<TemporalWorkerDeployment> {
        ObjectRef::from_obj(&*self.twd)
    }

    fn twd_api(&self) -> Api<TemporalWorkerDeployment> {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    async fn run(mut self) -> Result<Action> {
        if self.twd.meta().deletion_timestamp.is_some() {
            return self.finalize().await;
        }
        if !self.twd.finalizers().iter().any(|f| f == FINALIZER) {
            self.twd = Arc::new(self.add_finalizer().await?);
        }
        match self.plan_and_execute().await {
            Ok(action) => Ok(action),
            Err(Stop {
                action,
                quiet: true,
                blocked,
            }) => {
                tracing::debug!(reason = blocked.reason, message = %blocked.message, "transient; retrying");
                Ok(action)
            }
            Err(Stop {
                blocked,
                action,
                quiet: false,
            }) => match self.write_blocked(blocked).await {
                Ok(()) => Ok(action),
                Err(e) if is_conflict(&e) => Ok(Action::requeue(STALE_RETRY)),
                Err(e) => Err(e),
            },
        }
    }

    async fn add_finalizer(&self) -> Result<TemporalWorkerDeployment> {
        let res = set_finalizers(&self.twd_api(), &*self.twd, with_finalizer(&*self.twd)).await;
        self.ctx
            .metrics
            .kube_write("patch", "temporalworkerdeployments", res.is_ok());
        Ok(res?)
    }

    fn blocked(
        &self,
        reason: &'static str,
        message: String,
        stalled: bool,
        retry: Option<Duration>,
    ) -> Stop {
        let action = match retry {
            Some(d) => Action::requeue(d),
            None if stalled => Action::await_change(),
            None => Action::requeue(self.ctx.backoff(&self.key())),
        };
        Stop {
            blocked: Blocked {
                reason,
                message,
                stalled,
            },
            action,
            quiet: false,
        }
    }

    async fn plan_and_execute(&self) -> Result<Action, Stop> {
        let ctx = self.ctx;
        let twd = &*self.twd;
        if let Err(invalid) = validate::validate(twd) {
            return Err(self.blocked(reason::INVALID_SPEC, invalid.message, true, None));
        }

        // Connection and credentials.
        let conn_name = &twd.spec.worker_options.connection_ref.name;
        let conn_api: Api<TemporalConnection> = Api::namespaced(ctx.client.clone(), &self.ns);
        let connection = match conn_api.get_opt(conn_name).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(self.blocked(
                    reason::CONNECTION_NOT_FOUND,
                    format!(
                        "TemporalConnection {conn_name:?} not found in namespace {:?}",
                        self.ns
                    ),
                    false,
                    None,
                ));
            }
            Err(e) => {
                return Err(self.blocked(
                    reason::CONNECTION_NOT_FOUND,
                    format!("reading TemporalConnection {conn_name:?}: {e}"),
                    false,
                    None,
                ));
            }
        };
        self.protect_connection(&conn_api, &connection).await;
        let mode = connection.spec.auth_mode();
        let secret = match observe::auth_secret(&ctx.client, &self.ns, &mode).await {
            Ok(s) => s,
            Err(message) => {
                return Err(self.blocked(reason::AUTH_SECRET_INVALID, message, false, None));
            }
        };
        let auth = temporal::auth_from_secret(&mode, secret.as_ref())
            .map_err(|e| self.blocked(reason::AUTH_SECRET_INVALID, e.to_string(), false, None))?;
        let key = ConnectionKey::new(&connection.spec, auth);
        let temporal_ns = &twd.spec.worker_options.temporal_namespace;
        let client = ctx
            .pool
            .get_or_connect(key.clone(), temporal_ns, &ctx.settings.identity)
            .await
            .map_err(|e| {
                self.blocked(
                    reason::CLIENT_CREATION_FAILED,
                    format!(
                        "connecting to Temporal at {}: {e}",
                        connection.spec.host_port
                    ),
                    false,
                    None,
                )
            })?;

        let desired = validate::desired(twd, &connection.spec, &ctx.settings.planner)
            .map_err(|invalid| self.blocked(reason::INVALID_SPEC, invalid.message, true, None))?;
        let gate_input = observe::gate_input(&ctx.client, &self.ns, twd)
            .await
            .map_err(|message| {
                self.blocked(reason::PLAN_GENERATION_FAILED, message, false, None)
            })?;

        // Observe.
        let deployments = observe::owned_deployments(&ctx.client, twd)
            .await
            .map_err(|e| {
                self.blocked(
                    reason::PLAN_EXECUTION_FAILED,
                    format!("listing versioned Deployments: {e}"),
                    false,
                    None,
                )
            })?;
        let deployment_name = twd.temporal_deployment_name();
        let state = match client.describe_deployment(&deployment_name).await {
            Ok(s) => s,
            Err(e) => {
                if e.is_auth() {
                    ctx.pool.evict(&key, temporal_ns);
                }
                if e.is_resource_exhausted() {
                    // Temporal limits reads per worker deployment and namespace: back off with
                    // jitter; only a persistent limit is worth a condition.
                    let attempts = ctx.throttled_reads.bump(&self.key());
                    let mut stop = self.blocked(
                        reason::STATE_FETCH_FAILED,
                        format!("rate limited by Temporal describing worker deployment {deployment_name:?} ({attempts} attempts): {e}"),
                        false,
                        Some(throttle_delay(attempts)),
                    );
                    stop.quiet = attempts < THROTTLE_REPORT_AFTER;
                    return Err(stop);
                }
                return Err(self.blocked(
                    reason::STATE_FETCH_FAILED,
                    format!("describing worker deployment {deployment_name:?}: {e}"),
                    false,
                    None,
                ));
            }
        };
        ctx.throttled_reads.reset(&self.key());
        let temporal_facts = observe::target_facts(&client, &deployment_name, &desired, &state)
            .await
            .map_err(|e| {
                self.blocked(
                    reason::STATE_FETCH_FAILED,
                    format!("describing target version: {e}"),
                    false,
                    None,
                )
            })?;

        let input = PlanInput {
            desired,
            deployments,
            temporal: state,
            gates: temporal_facts.gates,
            target_task_queues: temporal_facts.task_queues,
            unversioned_pollers_on_all_queues: temporal_facts.unversioned_pollers_on_all_queues,
            controller_identity: ctx.settings.identity.clone(),
            now: Timestamp::now(),
        };
        let plan = planner::plan(&input);
        tracing::debug!(?plan, "planned");

        let exec_ctx = ExecContext {
            kube: &ctx.client,
            temporal: &client,
            twd,
            connection: &connection.spec,
            deployment_name: &deployment_name,
            conflict_token: input.temporal.conflict_token.clone(),
            gate_input: gate_input.as_ref(),
            gate_workflow_type: twd
                .spec
                .rollout
                .gate
                .as_ref()
                .map(|g| g.workflow_type.as_str()),
            target_build_id: &input.desired.build_id,
            controller_version: &ctx.settings.controller_version,
            metrics: &ctx.metrics,
        };
        let executed = executor::execute(&exec_ctx, &plan).await;
        self.emit_milestones(&input, &plan, &executed).await;

        // A stale conflict token or a rate-limited routing write is a race, not a failure:
        // retry soon without flipping the status, unless it keeps happening.
        let retryable = executed
            .failure
            .as_ref()
            .is_some_and(|f| f.conflict || f.throttled);
        let write_attempts = if retryable {
            ctx.throttled_writes.bump(&self.key())
        } else {
            ctx.throttled_writes.reset(&self.key());
            0
        };
        let outcome = match &executed.failure {
            None => Ok(()),
            Some(_) if retryable && write_attempts < THROTTLE_REPORT_AFTER => {
                tracing::debug!(
                    attempts = write_attempts,
                    "routing write raced or was rate limited; retrying"
                );
                Ok(())
            }
            Some(f) if retryable => Err(Blocked {
                reason: reason::PLAN_EXECUTION_FAILED,
                message: format!("{} ({write_attempts} attempts in a row)", f.message),
                stalled: false,
            }),
            Some(f) if f.invalid => Err(Blocked {
                reason: reason::INVALID_SPEC,
                message: f.message.clone(),
                stalled: true,
            }),
            Some(f) if f.manager_owner.is_some() => Err(Blocked {
                reason: reason::MANAGED_ELSEWHERE,
                message: format!(
                    "routing is managed by {:?} in Temporal; the controller will resume when that identity releases it",
                    f.manager_owner.clone().unwrap_or_default()
                ),
                stalled: false,
            }),
            Some(f) => Err(Blocked {
                reason: reason::PLAN_EXECUTION_FAILED,
                message: f.message.clone(),
                stalled: false,
            }),
        };
        let report = Report::Planned {
            input: &input,
            plan: &plan,
            routed: executed.routed(),
            outcome: outcome.clone(),
        };
        let new_status = status::compute(
            twd.status.as_ref(),
            twd.metadata.generation.unwrap_or_default(),
            &report,
            Timestamp::now(),
        );
        // One Warning per transition into any blocking verdict: execution failures and
        // planned ones alike (failed gate, too many versions, routing managed elsewhere).
        if let Some(p) = new_status
            .conditions
            .iter()
            .find(|c| c.type_ == reason::PROGRESSING)
            && p.status == "False"
            && p.reason != reason::ROLLOUT_COMPLETE
        {
            self.warn_if_new(&p.reason, &p.message).await;
        }
        let recorded_gates = twd
            .status
            .as_ref()
            .and_then(|s| s.target_version.as_ref())
            .map(|t| t.gate_workflows.as_slice())
            .unwrap_or_default();
        let gate_outcomes = planner::gates::newly_finished(recorded_gates, &input.gates);
        match self.write_status(new_status).await {
            // Counted only once written, so a retried reconcile does not count a gate twice.
            Ok(()) => {
                for outcome in gate_outcomes {
                    ctx.metrics.gate_outcome(outcome);
                }
            }
            // Reconciled from a cached object older than our last write: the plan was
            // idempotent, so just look again with the fresh object.
            Err(e) if is_conflict(&e) => return Ok(Action::requeue(STALE_RETRY)),
            Err(e) => {
                return Err(Stop {
                    blocked: Blocked {
                        reason: reason::PLAN_EXECUTION_FAILED,
                        message: format!("writing status: {e}"),
                        stalled: false,
                    },
                    action: Action::requeue(Duration::from_secs(1)),
                    quiet: false,
                });
            }
        }

        let action = match &executed.failure {
            Some(f) if f.throttled => Action::requeue(throttle_delay(write_attempts)),
            // Stalled until the spec changes; an occasional look still notices a relaxed
            // admission policy.
            Some(f) if f.invalid => Action::requeue(ctx.settings.idle_interval),
            Some(f) if f.conflict => Action::requeue(ctx.settings.fast_poll),
            Some(f) if f.manager_owner.is_some() => {
                Action::requeue(ctx.settings.fast_poll.max(Duration::from_secs(2)))
            }
            Some(_) => Action::requeue(ctx.backoff(&self.key())),
            None => {
                ctx.reset_backoff(&self.key());
                Action::requeue(
                    plan.requeue_after
                        .unwrap_or(ctx.settings.idle_interval)
                        .min(ctx.settings.idle_interval),
                )
            }
        };
        Ok(action)
    }

    /// The Connection carries our finalizer while any TWD uses it, so cleanup can still reach Temporal.
    async fn protect_connection(&self, api: &Api<TemporalConnection>, conn: &TemporalConnection) {
        if conn.meta().deletion_timestamp.is_some()
            || conn.finalizers().iter().any(|f| f == FINALIZER)
        {
            return;
        }
        let res = set_finalizers(api, conn, with_finalizer(conn)).await;
        self.ctx
            .metrics
            .kube_write("patch", "temporalconnections", res.is_ok());
        if let Err(e) = res {
            tracing::debug!(error = %e, "could not add finalizer to TemporalConnection; will retry next reconcile");
        }
    }

    async fn emit_milestones(
        &self,
        input: &PlanInput,
        plan: &planner::model::Plan,
        executed: &executor::Executed,
    ) {
        let twd = &*self.twd;
        let prev_target = twd.status.as_ref().and_then(|s| s.target_version.as_ref());
        let build = &input.desired.build_id;
        let was_registered = prev_target
            .map(|t| {
                &t.version.build_id == build
                    && t.version.status != crate::api::twd::VersionStatus::NotRegistered
            })
            .unwrap_or(false);
        if !was_registered && input.temporal.version(build).is_some() {
            self.ctx
                .events
                .normal(
                    twd,
                    events::VERSION_REGISTERED,
                    format!("Build ID {build} is polling Temporal"),
                )
                .await;
        }
        for done in &executed.done {
            let (reason, message) = match done {
                Done::Created { name, build_id } => (
                    events::VERSION_CREATED,
                    format!("Created Deployment {name} for build ID {build_id}"),
                ),
                Done::Updated { name, build_id } => (
                    events::VERSION_UPDATED,
                    format!("Updated Deployment {name} of build ID {build_id} in place"),
                ),
                Done::Scaled {
                    name,
                    build_id,
                    replicas,
                } if *replicas == 0 => (
                    events::SCALED_DOWN,
                    format!("Scaled Deployment {name} of build ID {build_id} to 0"),
                ),
                Done::Scaled { .. } => continue,
                Done::GateStarted {
                    task_queue,
                    workflow_id,
                } => (
                    events::GATE_STARTED,
                    format!("Started gate workflow {workflow_id} on task queue {task_queue}"),
                ),
                Done::ManagerClaimed => continue,
                Done::Routed(RoutingChange::SetCurrent { build_id }) if plan.progress.rollback => (
                    events::ROLLED_BACK,
                    format!("Rolled back: build ID {build_id} is Current again"),
                ),
                Done::Routed(RoutingChange::SetCurrent { build_id }) => (
                    events::PROMOTED,
                    format!("Build ID {build_id} is now Current"),
                ),
                Done::Routed(RoutingChange::SetRamping {
                    build_id,
                    percentage,
                }) => (
                    events::RAMP_STEP_STARTED,
                    format!("Ramping build ID {build_id} to {percentage}%"),
                ),
                Done::Routed(RoutingChange::ClearRamp) => {
                    (events::RAMP_CLEARED, "Cleared a stale ramp".to_string())
                }
                Done::Deleted { name, build_id } => (
                    events::VERSION_DELETED,
                    format!("Deleted Deployment {name} of build ID {build_id}"),
                ),
            };
            self.ctx.events.normal(twd, reason, message).await;
        }
    }

    /// One Warning event per transition into a blocking reason (no storms on retries).
    async fn warn_on_transition(&self, blocked: &Blocked) {
        self.warn_if_new(blocked.reason, &blocked.message).await;
    }

    async fn warn_if_new(&self, new_reason: &str, message: &str) {
        let previous = self
            .twd
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == reason::PROGRESSING))
            .map(|c| c.reason.as_str());
        if previous != Some(new_reason) {
            self.ctx
                .events
                .warning(&self.twd, new_reason, message.to_string())
                .await;
        }
    }

    async fn write_blocked(&self, blocked: Blocked) -> Result<()> {
        info!(reason = blocked.reason, message = %blocked.message, "rollout blocked");
        self.warn_on_transition(&blocked).await;
        self.ctx.metrics.reconcile_error(blocked.reason);
        let report = Report::Blocked(blocked);
        let new_status = status::compute(
            self.twd.status.as_ref(),
            self.twd.metadata.generation.unwrap_or_default(),
            &report,
            Timestamp::now(),
        );
        self.write_status(new_status).await
    }

    /// One status write per reconcile, skipped when nothing changed (our own writes would
    /// otherwise re-trigger reconciles forever).
    async fn write_status(&self, status: TemporalWorkerDeploymentStatus) -> Result<()> {
        if self.twd.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut obj = (*self.twd).clone();
        obj.status = Some(status);
        let res = self
            .twd_api()
            .replace_status(&self.name, &PostParams::default(), &obj)
            .await;
        self.ctx
            .metrics
            .kube_write("update", "temporalworkerdeployments/status", res.is_ok());
        let updated = res?;
        let _ = self.ctx.feed.send(Arc::new(updated));
        Ok(())
    }

    /// Deletion: clean Temporal state, release the Connection, then drop our finalizer.
    async fn finalize(&self) -> Result<Action> {
        if !self.twd.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(Action::await_change());
        }
        let ctx = self.ctx;
        let twd = &*self.twd;
        let conn_name = &twd.spec.worker_options.connection_ref.name;
        let conn_api: Api<TemporalConnection> = Api::namespaced(ctx.client.clone(), &self.ns);
        // Stop the workers first: Temporal refuses to delete versions that still have pollers,
        // and garbage collection would only remove the Deployments after this finalizer is gone.
        self.delete_owned_deployments().await?;
        match conn_api.get_opt(conn_name).await? {
            Some(connection) => {
                let mode = connection.spec.auth_mode();
                let cleaned = async {
                    let secret = observe::auth_secret(&ctx.client, &self.ns, &mode).await?;
                    let auth = temporal::auth_from_secret(&mode, secret.as_ref())
                        .map_err(|e| e.to_string())?;
                    let key = ConnectionKey::new(&connection.spec, auth);
                    let client: TemporalClient = ctx
                        .pool
                        .get_or_connect(
                            key,
                            &twd.spec.worker_options.temporal_namespace,
                            &ctx.settings.identity,
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    client
                        .cleanup_deployment(&twd.temporal_deployment_name())
                        .await
                        .map_err(|e| e.to_string())
                }
                .await;
                if let Err(message) = cleaned {
                    let deleting_for = twd
                        .meta()
                        .deletion_timestamp
                        .as_ref()
                        .map(|t| Timestamp::now().duration_since(t.0).unsigned_abs())
                        .unwrap_or_default();
                    if deleting_for < CLEANUP_GIVE_UP_AFTER {
                        // Keep the finalizer and retry: Temporal would otherwise keep a stale
                        // deployment. Stopped workers stay "pollers" for matching.PollerHistoryTTL.
                        info!(%message, "Temporal cleanup not finished; retrying");
                        let blocked = Blocked {
                            reason: reason::DELETING,
                            message: format!(
                                "cleaning up Temporal state (workers stopped; Temporal forgets their pollers after matching.PollerHistoryTTL, 5m by default): {message}"
                            ),
                            stalled: false,
                        };
                        self.write_blocked(blocked).await.ok();
                        return Ok(Action::requeue(CLEANUP_RETRY));
                    }
                    // Never hang deletion forever: leave Temporal state behind, loudly.
                    self.ctx
                        .events
                        .warning(
                            twd,
                            events::CLEANUP_ABANDONED,
                            format!("gave up cleaning worker deployment {:?} in Temporal after {}s: {message}", twd.temporal_deployment_name(), deleting_for.as_secs()),
                        )
                        .await;
                }
                self.release_connection(&conn_api, &connection).await?;
            }
            // Without a Connection there is no way to reach Temporal; don't hang deletion forever.
            None => {
                warn!(connection = %conn_name, "TemporalConnection gone; skipping Temporal cleanup")
            }
        }
        let res = set_finalizers(&self.twd_api(), twd, without_finalizer(twd)).await;
        self.ctx
            .metrics
            .kube_write("patch", "temporalworkerdeployments", res.is_ok());
        match res {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        self.ctx.reset_backoff(&self.key());
        Ok(Action::await_change())
    }

    async fn delete_owned_deployments(&self) -> Result<()> {
        let api: Api<Deployment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for d in observe::owned_deployments(&self.ctx.client, &self.twd).await? {
            if d.deleting {
                continue;
            }
            let res = api
                .delete(&d.name, &kube::api::DeleteParams::background())
                .await;
            self.ctx
                .metrics
                .kube_write("delete", "deployments", res.is_ok());
            match res {
                Ok(_) => self.ctx.events.normal(&self.twd, events::VERSION_DELETED, format!("Deleted Deployment {} of build ID {} (TemporalWorkerDeployment deleted)", d.name, d.build_id)).await,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn release_connection(
        &self,
        api: &Api<TemporalConnection>,
        conn: &TemporalConnection,
    ) -> Result<()> {
        let twds = self.twd_api().list(&ListParams::default()).await?;
        let still_used = twds.items.iter().any(|t| {
            t.uid() != self.twd.uid()
                && t.meta().deletion_timestamp.is_none()
                && t.spec.worker_options.connection_ref.name == conn.name_any()
        });
        if still_used || !conn.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(());
        }
        let res = set_finalizers(api, conn, without_finalizer(conn)).await;
        self.ctx
            .metrics
            .kube_write("patch", "temporalconnections", res.is_ok());
        match res {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Connections whose last user is gone lose our finalizer (e.g. after a TWD switched to
/// another Connection). Runs as a tiny second controller.
pub fn build_connection_janitor(
    client: kube::Client,
    twd_store: Store<TemporalWorkerDeployment>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> {
    let api: Api<TemporalConnection> = Api::all(client.clone());
    Controller::new(api, watcher::Config::default())
        .graceful_shutdown_on(shutdown)
        .run(
            move |conn: Arc<TemporalConnection>,
                  ctx: Arc<(kube::Client, Store<TemporalWorkerDeployment>)>| async move {
                let (client, store) = &*ctx;
                let ns = conn.namespace().unwrap_or_default();
                let used = store.state().iter().any(|t| {
                    t.namespace().as_deref() == Some(ns.as_str())
                        && t.spec.worker_options.connection_ref.name == conn.name_any()
                });
                if used
                    || conn.meta().deletion_timestamp.is_none()
                    || !conn.finalizers().iter().any(|f| f == FINALIZER)
                {
                    return Ok::<_, kube::Error>(Action::requeue(Duration::from_secs(30)));
                }
                let api: Api<TemporalConnection> = Api::namespaced(client.clone(), &ns);
                set_finalizers(&api, &*conn, without_finalizer(&*conn)).await?;
                Ok(Action::await_change())
            },
            |_conn, _err, _ctx| Action::requeue(Duration::from_secs(5)),
            Arc::new((client, twd_store)),
        )
        .for_each(|_| async {})
}

/// The object's finalizers plus ours.
fn with_finalizer<K: Resource>(obj: &K) -> Vec<String> {
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(FINALIZER.to_string());
    finalizers
}

/// The object's finalizers without ours.
fn without_finalizer<K: Resource>(obj: &K) -> Vec<String> {
    obj.finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect()
}

/// Writes `metadata.finalizers` with the object's resourceVersion, a compare-and-swap: a
/// concurrent writer's finalizers are never clobbered (409 instead).
async fn set_finalizers<K>(api: &Api<K>, obj: &K, finalizers: Vec<String>) -> kube::Result<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({ "metadata": { "finalizers": finalizers, "resourceVersion": obj.resource_version() } });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}
