//! The chaos suite's invariant checker (issue 28): it runs beside the controller and the faults
//! and records every breach of the safety rules, with details, as it happens.
//!
//! - **Live versions keep their workers**: on every watch event of a versioned Deployment
//!   (label `temporal.io/build-id`), one scaled to 0 or deleted must not be the Current,
//!   Ramping or Draining version of its worker deployment in Temporal (unless its worker
//!   deployment or its namespace is being deleted). A suspect is confirmed with fresh reads of Temporal and the
//!   worker deployment before it counts, so a checker that lags the controller by one poll
//!   reports nothing false.
//! - **Routing only to versions with ready pollers**: Temporal's routing of every known worker
//!   deployment is polled at [`CheckerOptions::poll`] with `DescribeWorkerDeployment`; its
//!   conflict token (and the routing revision) tells a change apart, and a skipped revision is
//!   counted as an unseen change. Each new Current or Ramping version must have a running
//!   worker in a Pod of its Deployment, by the kubelet stand-in's own knowledge, unless its
//!   worker deployment or namespace is being deleted (confirmed by a fresh read: deletion stops
//!   the workers before it clears the routing).
//! - **One writer**: from the API server's audit log, every successful write of a controller
//!   user must come from the user that last acquired or renewed the Lease
//!   ([`single_writer_violations`], pure). Temporal routing changes are counted by identity.
//!
//! The watches and reads use their own admin client and a direct Temporal connection, never
//! the links the faults are injected on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use temporalio_client::Connection;
use temporalio_common::protos::temporal::api::enums::v1::WorkerDeploymentVersionStatus;
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeWorkerDeploymentResponse;
use tokio::task::JoinHandle;

use crate::kubelet::Kubelet;
use crate::observe::describe_deployment;
use crate::world::api_resource;

/// The label every versioned Deployment carries.
const LABEL_BUILD_ID: &str = "temporal.io/build-id";

/// One breach of an invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A Current, Ramping or Draining version's Deployment was scaled to 0 or deleted.
    LiveVersionScaledDown {
        deployment: String,
        build_id: String,
        status: String,
        action: String,
    },
    /// Temporal routed to a version with no running worker in any of its Pods.
    RoutedWithoutPollers {
        worker_deployment: String,
        build_id: String,
        role: String,
        modifier: String,
    },
    /// A controller user wrote while another held the Lease.
    TwoWriters {
        writer: String,
        lease_holder: String,
        write: String,
        at: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::LiveVersionScaledDown {
                deployment,
                build_id,
                status,
                action,
            } => write!(
                f,
                "Deployment {deployment} of {status} version {build_id} was {action}"
            ),
            Violation::RoutedWithoutPollers {
                worker_deployment,
                build_id,
                role,
                modifier,
            } => write!(
                f,
                "{worker_deployment}: {build_id} made {role} by {modifier:?} without a running worker"
            ),
            Violation::TwoWriters {
                writer,
                lease_holder,
                write,
                at,
            } => write!(
                f,
                "{writer} wrote {write} at {at} while {lease_holder} held the Lease"
            ),
        }
    }
}

/// What the checker did, for the chaos suite's summary.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Versioned-Deployment watch events checked.
    pub deployment_events: u64,
    /// Worker-deployment watch events seen.
    pub worker_deployment_events: u64,
    /// `DescribeWorkerDeployment` polls.
    pub temporal_polls: u64,
    /// Failed polls (the checker's own link is not faulted; a restart of nothing but the
    /// controller should leave this at 0).
    pub temporal_poll_errors: u64,
    /// Routing changes seen (conflict token moved).
    pub routing_changes: u64,
    /// Routing revisions skipped between two polls (changes that happened unseen).
    pub unseen_routing_changes: u64,
    /// Routing changes by `lastModifierIdentity`.
    pub routing_changes_by_identity: BTreeMap<String, u64>,
    /// New Current/Ramping versions checked for pollers.
    pub routing_targets_checked: u64,
}

impl Counts {
    /// Every check made.
    pub fn total_checks(&self) -> u64 {
        self.deployment_events + self.temporal_polls + self.routing_targets_checked
    }
}

/// How the checker runs.
pub struct CheckerOptions {
    /// An admin client (not through a fault proxy).
    pub client: kube::Client,
    /// A direct connection to Temporal (not through a fault proxy).
    pub temporal: Connection,
    /// The worker-deployment kind to watch (`TemporalWorkerDeployment` or `WorkerDeployment`).
    pub kind: &'static str,
    /// How often Temporal's routing is polled per worker deployment.
    pub poll: Duration,
    /// Which Pods run a worker.
    pub kubelet: Arc<Kubelet>,
}

/// The running checker; stopped on drop.
pub struct Checker {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

struct Shared {
    opts: CheckerOptions,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    counts: Counts,
    violations: Vec<Violation>,
    /// Worker deployments by `<ns>/<name>`: their Temporal namespace, and whether deleting.
    workers: HashMap<String, WorkerView>,
    /// Last Temporal view per worker deployment.
    routing: HashMap<String, RoutingView>,
    /// Versioned Deployments last seen, `<ns>/<name>` → (worker deployment, build ID).
    deployments: HashMap<String, (String, String)>,
}

#[derive(Clone, Debug)]
struct WorkerView {
    temporal_ns: String,
    deleting: bool,
}

#[derive(Clone, Debug, Default)]
struct RoutingView {
    token: Vec<u8>,
    revision: i64,
    current: Option<String>,
    ramping: Option<String>,
}

impl Checker {
    /// Starts the watches and the Temporal poller.
    pub fn start(opts: CheckerOptions) -> Checker {
        let shared = Arc::new(Shared {
            opts,
            state: Mutex::new(State::default()),
        });
        let tasks = vec![
            tokio::spawn(watch_workers(shared.clone())),
            tokio::spawn(watch_deployments(shared.clone())),
            tokio::spawn(poll_temporal(shared.clone())),
        ];
        Checker { shared, tasks }
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        self.shared.with(|s| s.counts.clone())
    }

    /// The violations so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.with(|s| s.violations.clone())
    }

    /// Adds violations found elsewhere (the audit log's, at the end).
    pub fn record(&self, found: Vec<Violation>) {
        self.shared
            .with(|s| found.into_iter().for_each(|v| s.push(v)));
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl State {
    /// Records a violation once (a Deployment held at 0 gives many events).
    fn push(&mut self, v: Violation) {
        if !self.violations.contains(&v) {
            tracing::error!(violation = %v, "invariant violated");
            self.violations.push(v);
        }
    }
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }
}

/// Watches the worker deployments: which exist, their Temporal namespace, which are deleting.
async fn watch_workers(shared: Arc<Shared>) {
    let api: Api<DynamicObject> =
        Api::all_with(shared.opts.client.clone(), &api_resource(shared.opts.kind));
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let (obj, gone) = match event {
            Ok(Event::Apply(o) | Event::InitApply(o)) => (o, false),
            Ok(Event::Delete(o)) => (o, true),
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "checker: worker-deployment watch error (retrying)");
                continue;
            }
        };
        let key = format!(
            "{}/{}",
            obj.metadata.namespace.clone().unwrap_or_default(),
            obj.metadata.name.clone().unwrap_or_default()
        );
        let temporal_ns = obj.data["spec"]["workerOptions"]["temporalNamespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let deleting = gone || obj.metadata.deletion_timestamp.is_some();
        shared.with(|s| {
            s.counts.worker_deployment_events += 1;
            if gone {
                s.workers.remove(&key);
            } else {
                s.workers.insert(
                    key,
                    WorkerView {
                        temporal_ns,
                        deleting,
                    },
                );
            }
        });
    }
}

/// One versioned Deployment as the checker reads it.
struct Seen {
    key: String,
    worker: String,
    build_id: String,
    replicas: i32,
}

fn seen(d: &Deployment) -> Option<Seen> {
    let ns = d.metadata.namespace.clone()?;
    let name = d.metadata.name.clone()?;
    let build_id = d.metadata.labels.as_ref()?.get(LABEL_BUILD_ID)?.clone();
    let owner = d
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?
        .name
        .clone();
    Some(Seen {
        key: format!("{ns}/{name}"),
        worker: format!("{ns}/{owner}"),
        build_id,
        replicas: d.spec.replicas.unwrap_or(1),
    })
}

/// Watches versioned Deployments and checks each scale-to-zero and deletion.
async fn watch_deployments(shared: Arc<Shared>) {
    let api: Api<Deployment> = Api::all(shared.opts.client.clone());
    let cfg = watcher::Config::default().labels(LABEL_BUILD_ID);
    let stream = watcher::watcher(api, cfg).default_backoff();
    futures::pin_mut!(stream);
    // Deployments listed again after a broken watch: those missing were deleted unseen.
    let mut relisted: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relisted = Some(HashSet::new()),
            Ok(Event::InitApply(d)) => {
                if let (Some(set), Some(s)) = (relisted.as_mut(), seen(&d)) {
                    set.insert(s.key.clone());
                }
                on_deployment(&shared, &d, false).await;
            }
            Ok(Event::InitDone) => {
                let listed = relisted.take().unwrap_or_default();
                let missing: Vec<(String, (String, String))> = shared.with(|s| {
                    s.deployments
                        .iter()
                        .filter(|(k, _)| !listed.contains(*k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                });
                for (key, (worker, build_id)) in missing {
                    let s = Seen {
                        key,
                        worker,
                        build_id,
                        replicas: 0,
                    };
                    check_scaled_down(&shared, s, "deleted").await;
                }
            }
            Ok(Event::Apply(d)) => on_deployment(&shared, &d, false).await,
            Ok(Event::Delete(d)) => on_deployment(&shared, &d, true).await,
            Err(e) => tracing::debug!(error = %e, "checker: Deployment watch error (retrying)"),
        }
    }
}

async fn on_deployment(shared: &Shared, d: &Deployment, deleted: bool) {
    let Some(s) = seen(d) else { return };
    shared.with(|st| {
        st.counts.deployment_events += 1;
        if deleted {
            st.deployments.remove(&s.key);
        } else {
            st.deployments
                .insert(s.key.clone(), (s.worker.clone(), s.build_id.clone()));
        }
    });
    if deleted {
        check_scaled_down(shared, s, "deleted").await;
    } else if s.replicas == 0 {
        check_scaled_down(shared, s, "scaled to 0").await;
    }
}

/// Records a violation if the version is still Current, Ramping or Draining in a fresh read of
/// Temporal and its worker deployment is not being deleted (by a fresh read too).
async fn check_scaled_down(shared: &Shared, s: Seen, action: &str) {
    let view = shared.with(|st| st.workers.get(&s.worker).cloned());
    let Some(view) = view else { return };
    if view.deleting || worker_deleting(shared, &s.worker).await {
        return;
    }
    let Ok(Some(resp)) =
        describe_deployment(&shared.opts.temporal, &view.temporal_ns, &s.worker).await
    else {
        return;
    };
    let Some(status) = version_status(&resp, &s.build_id) else {
        return;
    };
    if matches!(
        status,
        WorkerDeploymentVersionStatus::Current
            | WorkerDeploymentVersionStatus::Ramping
            | WorkerDeploymentVersionStatus::Draining
    ) {
        let v = Violation::LiveVersionScaledDown {
            deployment: s.key,
            build_id: s.build_id,
            status: status.as_str_name().to_string(),
            action: action.to_string(),
        };
        shared.with(|st| st.push(v));
    }
}

/// Whether worker deployment `<ns>/<name>` or its namespace is gone or has a deletion timestamp
/// (fresh reads).
async fn worker_deleting(shared: &Shared, key: &str) -> bool {
    let Some((ns, name)) = key.split_once('/') else {
        return false;
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        shared.opts.client.clone(),
        ns,
        &api_resource(shared.opts.kind),
    );
    // A namespace being deleted: the namespace controller deletes the Deployments itself,
    // whatever the controller does.
    let namespaces: Api<Namespace> = Api::all(shared.opts.client.clone());
    if let Ok(found) = namespaces.get_opt(ns).await
        && found.is_none_or(|n| n.metadata.deletion_timestamp.is_some())
    {
        return true;
    }
    match api.get_opt(name).await {
        Ok(Some(o)) => o.metadata.deletion_timestamp.is_some(),
        Ok(None) => true,
        // Unknown: not counted as deleting, so a real violation is not hidden.
        Err(_) => false,
    }
}

/// The version's status in Temporal's answer (routing first: Current/Ramping even on a server
/// that reports no status).
fn version_status(
    resp: &DescribeWorkerDeploymentResponse,
    build_id: &str,
) -> Option<WorkerDeploymentVersionStatus> {
    let info = resp.worker_deployment_info.as_ref()?;
    let routing = routing_of(resp);
    if routing.current.as_deref() == Some(build_id) {
        return Some(WorkerDeploymentVersionStatus::Current);
    }
    if routing.ramping.as_deref() == Some(build_id) {
        return Some(WorkerDeploymentVersionStatus::Ramping);
    }
    info.version_summaries
        .iter()
        .find(|v| {
            v.deployment_version
                .as_ref()
                .is_some_and(|d| d.build_id == build_id)
        })
        .and_then(|v| WorkerDeploymentVersionStatus::try_from(v.status).ok())
}

fn routing_of(resp: &DescribeWorkerDeploymentResponse) -> RoutingView {
    let rc = resp
        .worker_deployment_info
        .as_ref()
        .and_then(|i| i.routing_config.as_ref());
    let build = |v: Option<
        &temporalio_common::protos::temporal::api::deployment::v1::WorkerDeploymentVersion,
    >| { v.map(|v| v.build_id.clone()).filter(|b| !b.is_empty()) };
    RoutingView {
        token: resp.conflict_token.clone(),
        revision: rc.map(|r| r.revision_number).unwrap_or(0),
        current: rc.and_then(|r| build(r.current_deployment_version.as_ref())),
        ramping: rc.and_then(|r| build(r.ramping_deployment_version.as_ref())),
    }
}

/// Polls every known worker deployment's routing at the stated rate.
async fn poll_temporal(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.opts.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let workers: Vec<(String, WorkerView)> = shared.with(|s| {
            s.workers
                .iter()
                .filter(|(_, v)| !v.deleting)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        for (key, view) in workers {
            let answer = describe_deployment(&shared.opts.temporal, &view.temporal_ns, &key).await;
            shared.with(|s| s.counts.temporal_polls += 1);
            match answer {
                Ok(Some(resp)) => {
                    let suspects = on_routing(&shared, &key, &resp);
                    confirm_routed(&shared, &key, suspects).await;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(error = %format!("{e:#}"), "checker: describe failed");
                    shared.with(|s| s.counts.temporal_poll_errors += 1);
                }
            }
        }
    }
}

/// Records routing suspects unless the worker deployment (or its namespace) is being deleted
/// by now, by the checker's view and a fresh read. The poll's list of worker deployments is
/// taken before a round of describes that can last seconds: a deletion that began meanwhile
/// stops the workers before it clears Temporal's routing, by design.
async fn confirm_routed(shared: &Shared, key: &str, suspects: Vec<Violation>) {
    if suspects.is_empty() {
        return;
    }
    let deleting = shared.with(|s| s.workers.get(key).is_none_or(|v| v.deleting));
    if deleting || worker_deleting(shared, key).await {
        return;
    }
    shared.with(|s| suspects.into_iter().for_each(|v| s.push(v)));
}

/// Compares one poll with the last: on a new conflict token, counts the change and returns
/// each new routing target without running workers (suspects, for [`confirm_routed`]).
fn on_routing(
    shared: &Shared,
    key: &str,
    resp: &DescribeWorkerDeploymentResponse,
) -> Vec<Violation> {
    let now = routing_of(resp);
    let modifier = resp
        .worker_deployment_info
        .as_ref()
        .map(|i| i.last_modifier_identity.clone())
        .unwrap_or_default();
    let before = shared.with(|s| s.routing.insert(key.to_string(), now.clone()));
    let before = before.unwrap_or_default();
    if before.token == now.token {
        return Vec::new();
    }
    let mut targets = Vec::new();
    if now.current.is_some() && now.current != before.current {
        targets.push(("Current", now.current.clone().unwrap_or_default()));
    }
    if now.ramping.is_some() && now.ramping != before.ramping {
        targets.push(("Ramping", now.ramping.clone().unwrap_or_default()));
    }
    let found: Vec<Violation> = targets
        .into_iter()
        .filter(|(_, build)| running_workers(shared, key, build) == 0)
        .map(|(role, build)| Violation::RoutedWithoutPollers {
            worker_deployment: key.to_string(),
            build_id: build,
            role: role.to_string(),
            modifier: modifier.clone(),
        })
        .collect();
    shared.with(|s| {
        s.counts.routing_changes += 1;
        if before.revision > 0 && now.revision > before.revision + 1 {
            s.counts.unseen_routing_changes += (now.revision - before.revision - 1) as u64;
        }
        *s.counts
            .routing_changes_by_identity
            .entry(modifier.clone())
            .or_default() += 1;
        s.counts.routing_targets_checked += (now.current != before.current) as u64
            + (now.ramping != before.ramping && now.ramping.is_some()) as u64;
    });
    found
}

/// Running workers (by the kubelet stand-in) in the Pods of `build`'s Deployments.
fn running_workers(shared: &Shared, worker: &str, build: &str) -> usize {
    let deployments: Vec<(String, String)> = shared.with(|s| {
        s.deployments
            .iter()
            .filter(|(_, (w, b))| w == worker && b == build)
            .filter_map(|(k, _)| k.split_once('/').map(|(n, d)| (n.into(), d.into())))
            .collect()
    });
    deployments
        .iter()
        .map(|(ns, d)| shared.opts.kubelet.running_workers(ns, d))
        .sum()
}

/// One successful write of the audit log, as the single-writer rule reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditWrite {
    pub user: String,
    /// `requestReceivedTimestamp` (RFC 3339, sortable as text at equal precision).
    pub received: String,
    /// `stageTimestamp`: when it took effect.
    pub completed: String,
    pub is_lease: bool,
    pub what: String,
    /// The `fieldManager` of the request, if any.
    pub field_manager: String,
}

/// Writes counted per user and field manager (`user/manager`), for the summary.
pub fn writes_by_user_and_manager(writes: &[AuditWrite]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for w in writes {
        *counts
            .entry(format!("{}/{}", w.user, w.field_manager))
            .or_default() += 1;
    }
    counts
}

/// Successful writes (2xx) of `users` from the audit log's raw JSON lines.
pub fn audit_writes(text: &str, users: &[&str]) -> Vec<AuditWrite> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .filter(|e| (200..300).contains(&e["responseStatus"]["code"].as_u64().unwrap_or(0)))
        .filter_map(|e| {
            let user = e["user"]["username"].as_str()?;
            let uri = e["requestURI"].as_str().unwrap_or("");
            let field_manager = uri
                .split_once('?')
                .and_then(|(_, q)| {
                    form_urlencoded::parse(q.as_bytes())
                        .find(|(k, _)| k == "fieldManager")
                        .map(|(_, v)| v.into_owned())
                })
                .unwrap_or_default();
            users.contains(&user).then(|| AuditWrite {
                user: user.to_string(),
                received: e["requestReceivedTimestamp"].as_str().unwrap_or("").into(),
                completed: e["stageTimestamp"].as_str().unwrap_or("").into(),
                is_lease: e["objectRef"]["resource"] == "leases",
                what: format!("{} {uri}", e["verb"].as_str().unwrap_or("")),
                field_manager,
            })
        })
        .collect()
}

/// The single-writer rule: a write received at `t` must come from the user whose Lease write
/// (acquisition or renewal) last completed before `t`. Lease writes themselves only succeed for
/// the holder, so they define who holds it.
pub fn single_writer_violations(writes: &[AuditWrite]) -> Vec<Violation> {
    let mut leases: Vec<&AuditWrite> = writes.iter().filter(|w| w.is_lease).collect();
    leases.sort_by(|a, b| a.completed.cmp(&b.completed));
    writes
        .iter()
        .filter(|w| !w.is_lease)
        .filter_map(|w| {
            let holder = leases
                .iter()
                .take_while(|l| l.completed <= w.received)
                .last()
                .map(|l| l.user.clone())
                .unwrap_or_else(|| "nobody".into());
            (holder != w.user).then(|| Violation::TwoWriters {
                writer: w.user.clone(),
                lease_holder: holder,
                write: w.what.clone(),
                at: w.received.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, verb: &str, resource: &str, code: u16, recv: &str, done: &str) -> String {
        serde_json::json!({
            "stage": "ResponseComplete", "verb": verb, "user": {"username": user},
            "objectRef": {"resource": resource}, "responseStatus": {"code": code},
            "requestURI": format!("/apis/x/{resource}"),
            "requestReceivedTimestamp": recv, "stageTimestamp": done,
        })
        .to_string()
    }

    #[test]
    fn writes_follow_the_lease_holder_and_a_stray_write_is_caught() {
        let log = [
            line(
                "a",
                "update",
                "leases",
                200,
                "2026-01-01T00:00:00.000000Z",
                "2026-01-01T00:00:00.100000Z",
            ),
            line(
                "a",
                "patch",
                "deployments",
                200,
                "2026-01-01T00:00:01.000000Z",
                "2026-01-01T00:00:01.100000Z",
            ),
            // b fails to take the Lease (409): not a write that counts.
            line(
                "b",
                "update",
                "leases",
                409,
                "2026-01-01T00:00:02.000000Z",
                "2026-01-01T00:00:02.100000Z",
            ),
            line(
                "b",
                "update",
                "leases",
                200,
                "2026-01-01T00:00:20.000000Z",
                "2026-01-01T00:00:20.100000Z",
            ),
            line(
                "b",
                "patch",
                "deployments",
                200,
                "2026-01-01T00:00:21.000000Z",
                "2026-01-01T00:00:21.100000Z",
            ),
            // a writes after b took over: two writers.
            line(
                "a",
                "patch",
                "deployments",
                200,
                "2026-01-01T00:00:22.000000Z",
                "2026-01-01T00:00:22.100000Z",
            ),
            line(
                "someone-else",
                "patch",
                "deployments",
                200,
                "2026-01-01T00:00:23.000000Z",
                "2026-01-01T00:00:23.100000Z",
            ),
        ]
        .join("\n");
        let writes = audit_writes(&log, &["a", "b"]);
        assert_eq!(writes.len(), 5);
        let found = single_writer_violations(&writes);
        assert_eq!(
            found,
            vec![Violation::TwoWriters {
                writer: "a".into(),
                lease_holder: "b".into(),
                write: "patch /apis/x/deployments".into(),
                at: "2026-01-01T00:00:22.000000Z".into(),
            }]
        );
        // Without the stray write, nothing.
        let clean: Vec<AuditWrite> = writes.into_iter().take(4).collect();
        assert!(single_writer_violations(&clean).is_empty());
    }

    #[test]
    fn a_write_before_any_lease_is_a_violation() {
        let log = line(
            "a",
            "create",
            "events",
            201,
            "2026-01-01T00:00:00.000000Z",
            "2026-01-01T00:00:00.000001Z",
        );
        let found = single_writer_violations(&audit_writes(&log, &["a"]));
        assert_eq!(found.len(), 1);
    }
}
