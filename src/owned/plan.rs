//! Plan stage of the owned-resource reconciler (pure): which copies to remove, which to render
//! and apply, and what the pass reports when nothing can be applied. Rendering itself is
//! [`render::render`]; the act stage carries the plan out.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Resource, ResourceExt};

use crate::api::twor::OwnedVersionStatus;
use crate::api::{TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use crate::owned::observe::Observed;
use crate::owned::render::{self, Rendered, Version};
use crate::owned::status::Pass;
use crate::owned::validate::Invalid;
use crate::owned::versions::{build_of, next_scaledown, retiring};

/// How often an idle TWOR is looked at again (copies are also re-applied on every change of
/// the TWOR, its worker or its versioned Deployments).
pub const IDLE: Duration = Duration::from_secs(300);
/// How soon a missing worker or a failed copy is looked at again.
pub const RETRY: Duration = Duration::from_secs(30);

/// What one pass does.
#[derive(Debug)]
pub enum Plan {
    /// The TWOR is being deleted: remove every copy it may have made, then our finalizer.
    Delete {
        copies: Vec<OwnedVersionStatus>,
    },
    Sync(Sync),
}

/// A pass over a TWOR that is not being deleted.
#[derive(Debug)]
pub struct Sync {
    /// Copies of versions scaled down (or due to be): removed first, best effort, so an
    /// autoscaler never fights the sunset's scale-down.
    pub remove_asleep: Vec<OwnedVersionStatus>,
    /// Adds our finalizer and the worker's owner reference, when one is missing.
    pub metadata_patch: Option<serde_json::Value>,
    pub work: Work,
    /// The earliest scale-down still ahead, to remove that version's copies on time.
    pub next_scaledown: Option<Duration>,
}

/// What the pass does about the live versions.
#[derive(Debug)]
pub enum Work {
    /// Nothing is applied; the pass reports this.
    Report(Pass),
    /// One entry per live version, in build-ID order.
    Versions(Vec<VersionWork>),
}

/// One live version's copy.
#[derive(Debug)]
pub struct VersionWork {
    pub build_id: String,
    pub copy: Result<Rendered, OwnedVersionStatus>,
    /// The last apply of the same object succeeded: nothing to write.
    pub unchanged: bool,
    /// The version's copy of a kind `spec.object` no longer has: removed.
    pub replaced: Option<OwnedVersionStatus>,
}

/// `valid`: the result of [`validate::check`] on `spec.object` (the validate stage).
pub fn plan(
    twor: &TemporalWorkerOwnedResource,
    observed: &Observed,
    valid: Result<(), Invalid>,
    allowed: &[&str],
) -> Plan {
    if twor.meta().deletion_timestamp.is_some() {
        return Plan::Delete {
            copies: every_copy(twor, &observed.deployments),
        };
    }
    let twd = observed.worker.as_ref();
    let now = observed.now;
    let (asleep, live): (Vec<&Deployment>, Vec<&Deployment>) = observed
        .deployments
        .iter()
        .partition(|d| retiring(d, twd, now));
    let remove_asleep = recorded(twor)
        .filter(|e| asleep.iter().any(|d| build_of(d) == Some(&e.build_id)))
        .cloned()
        .collect();
    let work = match (twd, valid) {
        (_, Err(invalid)) => Work::Report(Pass::Invalid {
            message: invalid.to_string(),
        }),
        (None, Ok(())) => Work::Report(Pass::WorkerNotFound {
            worker: twor.spec.worker_name().to_string(),
        }),
        (Some(twd), Ok(())) => Work::Versions(
            live.iter()
                .map(|d| version(twor, twd, d, observed, allowed))
                .collect(),
        ),
    };
    Plan::Sync(Sync {
        remove_asleep,
        metadata_patch: metadata_patch(twor, twd),
        work,
        next_scaledown: next_scaledown(twd, now),
    })
}

/// The copy of one live version, rendered, or the status entry saying why it cannot be.
fn version(
    twor: &TemporalWorkerOwnedResource,
    twd: &TemporalWorkerDeployment,
    d: &Deployment,
    observed: &Observed,
    allowed: &[&str],
) -> VersionWork {
    let build = build_of(d).unwrap_or_default();
    let (api_version, kind) = spec_kind(twor);
    let twd_name = twd.name_any();
    let (deployment_name, uid) = (d.name_any(), d.uid().unwrap_or_default());
    let selector = d.spec.selector.match_labels.clone().unwrap_or_default();
    let queue = observed.task_queues.get(build).cloned().unwrap_or(Ok(None));
    let version = Version {
        twd_name: &twd_name,
        namespace: &observed.namespace,
        deployment_name: &deployment_name,
        deployment_uid: &uid,
        build_id: build,
        selector_labels: &selector,
        temporal_namespace: &twd.spec.worker_options.temporal_namespace,
        task_queue: queue.as_ref().ok().and_then(|q| q.as_deref()),
    };
    let rendered = match &queue {
        Err(message) => Err(message.clone()),
        Ok(_) => render::render(&twor.name_any(), twor.spec.object(), &version, allowed)
            .map_err(|e| e.to_string()),
    };
    let previous = recorded(twor).find(|v| v.build_id == build);
    let replaced = previous
        .filter(|p| p.api_version != api_version || p.kind != kind)
        .cloned();
    let copy = rendered.map_err(|message| OwnedVersionStatus {
        build_id: build.to_string(),
        resource_name: render::resource_name(&twd_name, &twor.name_any(), build),
        api_version,
        kind,
        applied: false,
        message,
        applied_hash: String::new(),
    });
    let unchanged = copy.as_ref().is_ok_and(|c| {
        previous.is_some_and(|p| p.applied && p.applied_hash == c.hash && p.resource_name == c.name)
    });
    VersionWork {
        build_id: build.to_string(),
        copy,
        unchanged,
        replaced,
    }
}

/// The status entries of `twor`'s copies.
fn recorded(twor: &TemporalWorkerOwnedResource) -> impl Iterator<Item = &OwnedVersionStatus> {
    twor.status.iter().flat_map(|s| &s.versions)
}

/// Our finalizer (so deletion removes the copies) and, once the worker is known, a controller
/// reference from the TWD (so the TWOR goes with its worker), as one merge patch guarded by the
/// resourceVersion; `None` when both are already there.
pub fn metadata_patch(
    twor: &TemporalWorkerOwnedResource,
    twd: Option<&TemporalWorkerDeployment>,
) -> Option<serde_json::Value> {
    let has_finalizer = twor.finalizers().iter().any(|f| f == crate::api::FINALIZER);
    let owner = twd.and_then(|t| t.controller_owner_ref(&t.kind_set()));
    let refs = twor.owner_references();
    let has_owner = owner
        .as_ref()
        .is_none_or(|o| refs.iter().any(|r| r.uid == o.uid));
    if has_finalizer && has_owner {
        return None;
    }
    let mut finalizers = twor.finalizers().to_vec();
    if !has_finalizer {
        finalizers.push(crate::api::FINALIZER.to_string());
    }
    let mut owners: Vec<_> = refs
        .iter()
        .filter(|r| crate::api::KindSet::of_kind(&r.kind).is_none())
        .cloned()
        .collect();
    owners.extend(owner);
    Some(serde_json::json!({"metadata": {
        "resourceVersion": twor.resource_version(),
        "finalizers": finalizers,
        "ownerReferences": owners,
    }}))
}

/// Every copy the TWOR may have made: those in its status, and those its spec names for the
/// live versions (a copy applied just before a status write that never happened).
fn every_copy(twor: &TemporalWorkerOwnedResource, live: &[Deployment]) -> Vec<OwnedVersionStatus> {
    let (api_version, kind) = spec_kind(twor);
    let mut copies: Vec<OwnedVersionStatus> = recorded(twor).cloned().collect();
    for d in live {
        copies.push(OwnedVersionStatus {
            resource_name: render::resource_name(
                twor.spec.worker_name(),
                &twor.name_any(),
                build_of(d).unwrap_or_default(),
            ),
            api_version: api_version.clone(),
            kind: kind.clone(),
            ..Default::default()
        });
    }
    copies.retain(|c| !c.api_version.is_empty() && !c.kind.is_empty());
    copies
}

/// When to look again after a pass that reported `pass`.
pub fn requeue(pass: &Pass, next_scaledown: Option<Duration>) -> Duration {
    let again = match pass {
        Pass::Applied(versions) if versions.iter().all(|v| v.applied) => IDLE,
        Pass::Applied(_) | Pass::WorkerNotFound { .. } => RETRY,
        Pass::Invalid { .. } => IDLE,
    };
    next_scaledown.map_or(again, |d| again.min(d))
}

/// `spec.object`'s apiVersion and kind.
pub fn spec_kind(twor: &TemporalWorkerOwnedResource) -> (String, String) {
    let field = |k: &str| {
        twor.spec
            .object()
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    (field("apiVersion"), field("kind"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use crate::api::TemporalWorkerDeployment;
    use crate::api::twd::{DeprecatedVersion, TemporalWorkerDeploymentStatus, VersionStatus};
    use crate::fixtures::{NOW, ago, ts};
    use crate::owned::versions::{next_scaledown, retiring};

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

    #[test]
    fn the_metadata_patch_adds_only_what_is_missing() {
        use crate::api::{FINALIZER, TemporalWorkerOwnedResource};
        use kube::Resource as _;
        let mut worker = TemporalWorkerDeployment::test();
        worker.metadata.uid = Some("twd-uid".into());
        let mut twor: TemporalWorkerOwnedResource = serde_json::from_value(json!({
            "apiVersion": "temporal.io/v1alpha1", "kind": "TemporalWorkerOwnedResource",
            "metadata": {"name": "hpa", "namespace": "shop", "resourceVersion": "7",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm"}]},
            "spec": {"workerRef": {"name": "orders"}, "object": {"apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler", "spec": {}}}
        }))
        .expect("twor");
        let patch = super::metadata_patch(&twor, Some(&worker)).expect("both missing");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["metadata"]["finalizers"], json!([FINALIZER]));
        let owners: Vec<&str> = patch["metadata"]["ownerReferences"]
            .as_array()
            .expect("owners")
            .iter()
            .map(|o| o["uid"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(owners, ["cm", "twd-uid"], "other owners are kept");
        // Without a worker only the finalizer is owed; with both in place nothing is.
        twor.metadata.finalizers = Some(vec![FINALIZER.into()]);
        assert!(super::metadata_patch(&twor, None).is_none());
        assert!(
            super::metadata_patch(&twor, Some(&worker)).is_some(),
            "owner missing"
        );
        twor.metadata.owner_references = worker
            .controller_owner_ref(&worker.kind_set())
            .map(|o| vec![o]);
        assert!(super::metadata_patch(&twor, Some(&worker)).is_none());
    }
}
