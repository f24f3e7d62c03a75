//! TemporalWorkerOwnedResource (TWOR): a user's object copied once per live worker version.
//!
//! A small controller of its own (wired in `src/controller.rs`), so a Temporal outage that
//! holds back a TWD's rollout never holds back its autoscalers. One pass over a TWOR:
//! read the worker and its live versioned Deployments → check `spec.object` against the
//! [`rules`] (the admission webhook's, so with it off a refusal reads the same in status, and
//! nothing is applied) → [`render`] each copy (pure) → [`apply`] only copies whose hash changed
//! (server-side apply, one field manager per TWOR) → remove copies of a replaced kind → one
//! status write from [`status::compute`], only when it changed. Each copy is owned by its
//! versioned Deployment, so Kubernetes' garbage collector removes it with its version;
//! deleting the TWOR removes every copy before our finalizer goes.

pub mod apply;
pub mod render;
pub mod rules;
pub mod status;
pub mod task_queue;
pub mod template;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tokio::sync::watch;

use crate::api::twor::OwnedVersionStatus;
use crate::api::{
    LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME, TemporalWorkerDeployment, TemporalWorkerOwnedResource,
};
use crate::metrics::{ControllerKind, Metrics, ReconcileOutcome};
use crate::temporal::ClientPool;
use apply::Resources;
use render::{Rendered, Version};
use status::Pass;

/// How often an idle TWOR is looked at again (copies are also re-applied on every change of
/// the TWOR, its worker or its versioned Deployments).
const IDLE: Duration = Duration::from_secs(300);
/// How soon a missing worker or a failed copy is looked at again.
const RETRY: Duration = Duration::from_secs(30);

/// Shared state of the TWOR controller.
pub struct OwnedContext {
    pub client: kube::Client,
    /// True while this replica may write (see `reconcile::Context::leads`).
    pub leader: watch::Receiver<bool>,
    /// Kinds a TWOR may carry.
    pub allowed_kinds: Vec<String>,
    /// Temporal clients (shared with the TWD reconciler) and the identity to use, for
    /// task-queue lookups.
    pub pool: Arc<ClientPool>,
    pub identity: String,
    pub metrics: Arc<Metrics>,
    resources: Resources,
    task_queues: task_queue::Known,
}

impl OwnedContext {
    pub fn new(
        client: kube::Client,
        leader: watch::Receiver<bool>,
        pool: Arc<ClientPool>,
        identity: String,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            client,
            leader,
            pool,
            identity,
            metrics,
            task_queues: task_queue::Known::default(),
            allowed_kinds: rules::DEFAULT_ALLOWED_KINDS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            resources: Resources::default(),
        }
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OwnedError {
    #[error("TemporalWorkerOwnedResource has no namespace")]
    NoNamespace,
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

impl OwnedError {
    /// The `reason` label of `reconcile_errors_total`: no status is written when a pass fails
    /// this way, so it is counted as the copies not applied.
    pub fn reason(&self) -> &'static str {
        crate::api::conditions::APPLY_FAILED
    }
}

/// The kube-runtime entry point for one TWOR: one timer per reconcile, and a failed or
/// blocked pass counted by its condition reason.
pub async fn reconcile(
    twor: Arc<TemporalWorkerOwnedResource>,
    ctx: Arc<OwnedContext>,
) -> Result<Action, OwnedError> {
    if !ctx.leads() {
        // Followers never write; winning the Lease reconciles every TWOR.
        return Ok(Action::await_change());
    }
    let timer = ctx.metrics.reconcile_started(ControllerKind::OwnedResource);
    let result = reconcile_pass(twor, Arc::clone(&ctx)).await;
    let failed = match &result {
        Ok((_, failed)) => *failed,
        Err(e) => Some(e.reason()),
    };
    if let Some(reason) = failed {
        ctx.metrics
            .reconcile_error(ControllerKind::OwnedResource, reason);
    }
    timer.finish(match failed {
        Some(_) => ReconcileOutcome::Error,
        None => ReconcileOutcome::Success,
    });
    result.map(|(action, _)| action)
}

/// One pass over a TWOR: what to do next, and the condition reason when it failed or is
/// blocked.
async fn reconcile_pass(
    twor: Arc<TemporalWorkerOwnedResource>,
    ctx: Arc<OwnedContext>,
) -> Result<(Action, Option<&'static str>), OwnedError> {
    let ns = twor.namespace().ok_or(OwnedError::NoNamespace)?;
    let all = live_deployments(&ctx.client, &ns, &twor.spec.worker_ref.name).await?;
    if twor.meta().deletion_timestamp.is_some() {
        remove_all(&ctx, &twor, &ns, &all).await?;
        apply::remove_finalizer(&ctx.client, &twor).await?;
        return Ok((Action::await_change(), None));
    }
    let twds: Api<TemporalWorkerDeployment> = Api::namespaced(ctx.client.clone(), &ns);
    let twd = twds.get_opt(&twor.spec.worker_ref.name).await?;
    // A version due for scale-down (or already at 0) loses its copies first: the TWD's sunset
    // waits for that before scaling it to 0, so an autoscaler never fights the scale-down.
    let now = Timestamp::now();
    let (asleep, live): (Vec<Deployment>, Vec<Deployment>) = all
        .into_iter()
        .partition(|d| retiring(d, twd.as_ref(), now));
    remove_asleep(&ctx, &twor, &ns, &asleep).await;
    apply::ensure_metadata(&ctx.client, &twor, twd.as_ref()).await?;
    let allowed: Vec<&str> = ctx.allowed_kinds.iter().map(String::as_str).collect();
    // The webhook's rules, checked before anything else: with the webhook off a refused
    // object is reported in status with the webhook's words, and no copy is applied.
    let refused = rules::check(&twor.spec.object, &allowed).err();
    let (pass, again) = match (&twd, refused) {
        (_, Some(invalid)) => (
            Pass::Invalid {
                message: invalid.to_string(),
            },
            IDLE,
        ),
        (None, None) => (
            Pass::WorkerNotFound {
                worker: twor.spec.worker_ref.name.clone(),
            },
            RETRY,
        ),
        (Some(twd), None) => {
            let versions = sync(&ctx, &twor, twd, &live).await;
            let again = if versions.iter().all(|v| v.applied) {
                IDLE
            } else {
                RETRY
            };
            (Pass::Applied(versions), again)
        }
    };
    let failed = pass.failure_reason();
    let generation = twor.metadata.generation.unwrap_or_default();
    let new = status::compute(twor.status.as_ref(), generation, pass, Timestamp::now());
    if twor.status.as_ref() != Some(&new) && ctx.leads() {
        apply::write_status(&ctx.client, &twor, &new).await?;
    }
    let action = Action::requeue(next_scaledown(twd.as_ref(), now).map_or(again, |d| again.min(d)));
    Ok((action, failed))
}

/// The worker's versioned Deployments that are not being deleted, by build ID.
async fn live_deployments(
    client: &kube::Client,
    ns: &str,
    worker: &str,
) -> Result<Vec<Deployment>, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let selector = format!(
        "{LABEL_DEPLOYMENT_NAME}={}",
        crate::render::label_value(worker)
    );
    let mut live: Vec<Deployment> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|d| d.meta().deletion_timestamp.is_none() && build_of(d).is_some())
        .collect();
    live.sort_by(|a, b| build_of(a).cmp(&build_of(b)));
    Ok(live)
}

/// True for a version whose copies must go: its Deployment is at 0, or the TWD's status says
/// its scale-down is due.
fn retiring(d: &Deployment, twd: Option<&TemporalWorkerDeployment>, now: Timestamp) -> bool {
    if d.spec.as_ref().and_then(|s| s.replicas) == Some(0) {
        return true;
    }
    let Some(build) = build_of(d) else {
        return false;
    };
    twd.and_then(|t| t.status.as_ref())
        .into_iter()
        .flat_map(|s| &s.deprecated_versions)
        .any(|v| v.version.build_id == build && v.scaledown_at.as_ref().is_some_and(|t| t.0 <= now))
}

/// Time until the earliest scale-down still ahead, to remove that version's copies on time.
fn next_scaledown(twd: Option<&TemporalWorkerDeployment>, now: Timestamp) -> Option<Duration> {
    twd?.status
        .as_ref()?
        .deprecated_versions
        .iter()
        .filter_map(|v| v.scaledown_at.as_ref())
        .filter_map(|t| Duration::try_from(t.0.duration_since(now)).ok())
        .filter(|d| !d.is_zero())
        .min()
}

fn build_of(d: &Deployment) -> Option<&str> {
    d.labels().get(LABEL_BUILD_ID).map(String::as_str)
}

/// Renders and applies the copy of every live version; one failure never stops the others.
async fn sync(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    twd: &TemporalWorkerDeployment,
    live: &[Deployment],
) -> Vec<OwnedVersionStatus> {
    let ns = twd.namespace().unwrap_or_default();
    let old: BTreeMap<&str, &OwnedVersionStatus> = twor
        .status
        .iter()
        .flat_map(|s| &s.versions)
        .map(|v| (v.build_id.as_str(), v))
        .collect();
    let allowed: Vec<&str> = ctx.allowed_kinds.iter().map(String::as_str).collect();
    let (api_version, kind) = spec_kind(twor);
    let twd_name = twd.name_any();
    let twor_name = twor.name_any();
    let needs_queue = render::needs_task_queue(&twor.spec.object);
    let mut out = Vec::with_capacity(live.len());
    for d in live {
        let build = build_of(d).unwrap_or_default();
        let (deployment_name, uid) = (d.name_any(), d.uid().unwrap_or_default());
        let queue = if needs_queue {
            task_queue::lookup(
                &ctx.client,
                &ctx.pool,
                &ctx.identity,
                &ctx.task_queues,
                twd,
                build,
            )
            .await
        } else {
            Ok(None)
        };
        let selector = d
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone())
            .unwrap_or_default();
        let version = Version {
            twd_name: &twd_name,
            namespace: &ns,
            deployment_name: &deployment_name,
            deployment_uid: &uid,
            build_id: build,
            selector_labels: &selector,
            temporal_namespace: &twd.spec.worker_options.temporal_namespace,
            task_queue: queue.as_ref().ok().and_then(|q| q.as_deref()),
        };
        let rendered = match &queue {
            Err(message) => Err(message.clone()),
            Ok(_) => render::render(&twor_name, &twor.spec.object, &version, &allowed)
                .map_err(|e| e.to_string()),
        };
        let previous = old.get(build).copied();
        let entry = match rendered {
            Err(e) => OwnedVersionStatus {
                build_id: build.to_string(),
                resource_name: render::resource_name(&twd_name, &twor_name, build),
                api_version: api_version.clone(),
                kind: kind.clone(),
                applied: false,
                message: e,
                applied_hash: String::new(),
            },
            Ok(copy) => write_copy(ctx, twor, &ns, copy, previous).await,
        };
        if let Some(p) = previous
            && (p.api_version != api_version || p.kind != kind)
            && let Err(e) = remove_copy(ctx, &ns, p).await
        {
            tracing::warn!(error = %e, copy = %p.resource_name, "removing the copy of a replaced kind");
        }
        out.push(entry);
    }
    out
}

fn spec_kind(twor: &TemporalWorkerOwnedResource) -> (String, String) {
    let field = |k: &str| {
        twor.spec
            .object
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    (field("apiVersion"), field("kind"))
}

/// Applies `copy` unless the last apply of the same object succeeded (same hash).
async fn write_copy(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    copy: Rendered,
    previous: Option<&OwnedVersionStatus>,
) -> OwnedVersionStatus {
    let build_id = copy
        .object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_BUILD_ID))
        .and_then(|b| b.as_str())
        .unwrap_or_default()
        .to_string();
    let unchanged = previous
        .is_some_and(|p| p.applied && p.applied_hash == copy.hash && p.resource_name == copy.name);
    let result = if unchanged || !ctx.leads() {
        Ok(())
    } else {
        apply::apply_copy(&ctx.client, &ctx.resources, ns, &twor.name_any(), &copy).await
    };
    let (applied, message, applied_hash) = match result {
        Ok(()) if unchanged || ctx.leads() => (true, String::new(), copy.hash),
        Ok(()) => (
            false,
            "not applied: this replica lost leadership".into(),
            String::new(),
        ),
        Err(e) => (false, apply::message(&e), String::new()),
    };
    OwnedVersionStatus {
        build_id,
        resource_name: copy.name,
        api_version: copy.api_version,
        kind: copy.kind,
        applied,
        message,
        applied_hash,
    }
}

async fn remove_copy(
    ctx: &OwnedContext,
    ns: &str,
    entry: &OwnedVersionStatus,
) -> Result<(), kube::Error> {
    let key = (
        entry.api_version.as_str(),
        entry.kind.as_str(),
        entry.resource_name.as_str(),
    );
    apply::delete_copy(&ctx.client, &ctx.resources, ns, key).await
}

/// Removes the copies of versions scaled to 0. Best effort: a failure is logged, and the copy
/// goes with its Deployment at the end of the sunset anyway.
async fn remove_asleep(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    asleep: &[Deployment],
) {
    let entries = twor.status.iter().flat_map(|s| &s.versions);
    for entry in entries.filter(|e| asleep.iter().any(|d| build_of(d) == Some(&e.build_id))) {
        if !ctx.leads() {
            return;
        }
        if let Err(e) = remove_copy(ctx, ns, entry).await {
            tracing::warn!(error = %e, copy = %entry.resource_name, "removing the copy of a version at 0");
        }
    }
}

/// Every copy the TWOR may have made: those in its status, and those its spec names for the
/// live versions (a copy applied just before a status write that never happened).
async fn remove_all(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    live: &[Deployment],
) -> Result<(), kube::Error> {
    let (api_version, kind) = spec_kind(twor);
    let mut copies: Vec<OwnedVersionStatus> = twor
        .status
        .iter()
        .flat_map(|s| s.versions.clone())
        .collect();
    for d in live {
        copies.push(OwnedVersionStatus {
            resource_name: render::resource_name(
                &twor.spec.worker_ref.name,
                &twor.name_any(),
                build_of(d).unwrap_or_default(),
            ),
            api_version: api_version.clone(),
            kind: kind.clone(),
            ..Default::default()
        });
    }
    for copy in &copies {
        if copy.api_version.is_empty() || copy.kind.is_empty() || !ctx.leads() {
            continue;
        }
        remove_copy(ctx, ns, copy).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::{next_scaledown, retiring};
    use crate::api::TemporalWorkerDeployment;
    use crate::api::twd::{DeprecatedVersion, TemporalWorkerDeploymentStatus, VersionStatus};
    use crate::fixtures::{NOW, ago, ts};

    fn deployment(build: &str, replicas: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": format!("w-{build}"), "labels": {crate::api::LABEL_BUILD_ID: build}},
            "spec": {"replicas": replicas, "selector": {}, "template": {}}
        }))
        .expect("deployment")
    }

    /// A TWD whose status lists v1 with a scale-down `secs` from now (negative: past).
    fn twd(secs: i64) -> TemporalWorkerDeployment {
        let mut t = TemporalWorkerDeployment::test();
        let mut v1 = DeprecatedVersion::test("v1", VersionStatus::Drained);
        v1.scaledown_at = Some(Time(ago(-secs)));
        t.status = Some(TemporalWorkerDeploymentStatus {
            deprecated_versions: vec![v1],
            ..Default::default()
        });
        t
    }

    #[test]
    fn copies_go_once_the_scale_down_is_due_or_the_version_is_at_zero() {
        let now = ts(NOW);
        assert!(!retiring(&deployment("v1", 2), Some(&twd(60)), now));
        assert!(
            retiring(&deployment("v1", 2), Some(&twd(0)), now),
            "due now"
        );
        assert!(retiring(&deployment("v1", 2), Some(&twd(-60)), now));
        assert!(retiring(&deployment("v1", 0), None, now), "already at 0");
        assert!(
            !retiring(&deployment("v2", 2), Some(&twd(-60)), now),
            "other version"
        );
        assert!(!retiring(&deployment("v1", 2), None, now), "no TWD");
    }

    #[test]
    fn the_controller_comes_back_at_the_next_scale_down() {
        let now = ts(NOW);
        assert_eq!(
            next_scaledown(Some(&twd(90)), now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(next_scaledown(Some(&twd(-5)), now), None, "already due");
        assert_eq!(next_scaledown(None, now), None);
    }
}
