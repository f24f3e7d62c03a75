//! Admission of a TemporalWorkerOwnedResource: the controller's own rules
//! ([`crate::owned::validate::check`], so the webhook and the status say the same thing), the
//! immutable `workerRef`, and the access check ([`super::access`]) that only admission can
//! make, because only admission knows who asks.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::GroupVersion;
use kube::discovery::ApiResource;
use serde_json::Value;

use super::State;
use super::access::{self, Target};
use super::review::Verdict;
use crate::api::TemporalWorkerOwnedResource;
use crate::owned::validate;

/// The message for a changed `workerRef` (the CRD's CEL rule says the same).
pub fn worker_ref_changed(old: &str, new: &str) -> String {
    format!(
        "spec.workerRef.name is immutable (was {old:?}, now {new:?}): create a new \
         TemporalWorkerOwnedResource for another worker"
    )
}

/// Every problem with `new` that needs no API call; `old` on update.
pub fn problems(
    new: &TemporalWorkerOwnedResource,
    old: Option<&TemporalWorkerOwnedResource>,
    allowed_kinds: &[&str],
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(old) = old
        && old.spec.worker_name() != new.spec.worker_name()
    {
        out.push(worker_ref_changed(
            old.spec.worker_name(),
            new.spec.worker_name(),
        ));
    }
    if let Err(validate::Invalid(p)) = validate::check_template_spec(&new.spec, allowed_kinds) {
        out.extend(p);
    }
    out
}

/// Whether a request needs checking at all: writes that leave the spec alone (the
/// controller's finalizer and owner-reference patches, deletion) are always let through, so a
/// rule added later can never block cleanup of an object stored before it.
pub fn needs_review(
    new: &TemporalWorkerOwnedResource,
    old: Option<&TemporalWorkerOwnedResource>,
) -> bool {
    if new.metadata.deletion_timestamp.is_some() {
        return false;
    }
    old.is_none_or(|o| o.spec != new.spec)
}

/// `apiVersion` split into group and version (`v1` is the core group).
pub fn group_version(object: &Value) -> Option<GroupVersion> {
    let api_version = object.get("apiVersion")?.as_str()?;
    api_version.parse().ok()
}

/// The whole admission decision for one TWOR request.
pub async fn admit(
    state: &State,
    user: &UserInfo,
    namespace: &str,
    new: &TemporalWorkerOwnedResource,
    old: Option<&TemporalWorkerOwnedResource>,
) -> Verdict {
    if !needs_review(new, old) {
        return Verdict::Allow;
    }
    let allowed: Vec<&str> = state.allowed_kinds.iter().map(String::as_str).collect();
    let problems = problems(new, old, &allowed);
    if !problems.is_empty() {
        return Verdict::Invalid(problems);
    }
    let kind = new
        .spec
        .object()
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let resource = match resolve(&state.client, new.spec.object(), kind).await {
        Ok(r) => r,
        Err(message) => return Verdict::Invalid(vec![message]),
    };
    let target = Target {
        group: resource.group.clone(),
        resource: resource.plural.clone(),
        namespace: namespace.to_string(),
    };
    match access::check(&state.client, &state.identity, user, &target, kind).await {
        Ok(denials) if denials.is_empty() => Verdict::Allow,
        Ok(denials) => Verdict::Forbidden(denials),
        // Not knowing is not allowing: the TWOR webhook fails closed, like its failurePolicy.
        Err(e) => Verdict::Error(e.to_string()),
    }
}

/// Admission of a TWOR deletion: the controller then deletes every copy, so the deleter must
/// be allowed to delete the kind (as the Go controller checks). Only the user is checked: a
/// controller that lost the right cannot be helped by refusing the deletion. A TWOR whose
/// kind was never copied (refused by the rules, or no longer served: nothing to delete) is
/// let through, so a rule or a removed CRD can never block cleanup.
pub async fn admit_delete(
    state: &State,
    user: &UserInfo,
    namespace: &str,
    deleted: &TemporalWorkerOwnedResource,
) -> Verdict {
    let allowed: Vec<&str> = state.allowed_kinds.iter().map(String::as_str).collect();
    if validate::check(deleted.spec.object(), &allowed).is_err() {
        return Verdict::Allow;
    }
    let kind = deleted
        .spec
        .object()
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Ok(resource) = resolve(&state.client, deleted.spec.object(), kind).await else {
        return Verdict::Allow;
    };
    let target = Target {
        group: resource.group.clone(),
        resource: resource.plural.clone(),
        namespace: namespace.to_string(),
    };
    let username = user.username.clone().unwrap_or_default();
    match access::user_may(&state.client, user, "delete", &target).await {
        Ok(true) => Verdict::Allow,
        Ok(false) => Verdict::Forbidden(vec![access::delete_denial(&username, &target, kind)]),
        // Not knowing is not allowing, as for writes (failurePolicy Fail).
        Err(e) => Verdict::Error(e.to_string()),
    }
}

/// The API resource of `spec.object`'s kind, from discovery (kinds matched case-insensitively,
/// as the allow-list is).
async fn resolve(client: &kube::Client, object: &Value, kind: &str) -> Result<ApiResource, String> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let gv = group_version(object)
        .ok_or_else(|| format!("spec.object.apiVersion {api_version:?} is not group/version"))?;
    let not_served = || {
        format!(
            "spec.object: kind {kind:?} of apiVersion {api_version:?} is not served by this cluster"
        )
    };
    let group = kube::discovery::oneshot::pinned_group(client, &gv)
        .await
        .map_err(|_| not_served())?;
    group
        .versioned_resources(&gv.version)
        .into_iter()
        .map(|(r, _)| r)
        .find(|r| r.kind.eq_ignore_ascii_case(kind))
        .ok_or_else(not_served)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twor::TemporalWorkerOwnedResourceSpec;
    use serde_json::json;

    fn twor(worker: &str, object: Value) -> TemporalWorkerOwnedResource {
        TemporalWorkerOwnedResource::new(
            "scaler",
            TemporalWorkerOwnedResourceSpec::of(crate::api::KindSet::Seed, worker, object),
        )
    }

    fn hpa() -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3}})
    }

    #[test]
    fn the_webhook_refuses_what_the_controller_refuses_with_the_same_words() {
        let bad = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "x"}, "spec": {"minReplicas": 0, "scaleTargetRef": {"name": "d"}}});
        let controller = match validate::check(&bad, validate::DEFAULT_ALLOWED_KINDS) {
            Err(validate::Invalid(p)) => p,
            Ok(()) => panic!("the rules must refuse it"),
        };
        let webhook = problems(&twor("w", bad), None, validate::DEFAULT_ALLOWED_KINDS);
        assert_eq!(webhook, controller);
        assert_eq!(webhook.len(), 3, "{webhook:?}");
        assert!(problems(&twor("w", hpa()), None, validate::DEFAULT_ALLOWED_KINDS).is_empty());
    }

    #[test]
    fn the_kind_allow_list_is_configurable() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        let p = problems(
            &twor("w", cm.clone()),
            None,
            validate::DEFAULT_ALLOWED_KINDS,
        );
        assert!(p[0].contains("kind \"ConfigMap\" is not allowed"), "{p:?}");
        assert!(problems(&twor("w", cm), None, &["ConfigMap"]).is_empty());
    }

    #[test]
    fn the_worker_ref_is_immutable_but_unchanged_specs_pass_unchecked() {
        let old = twor("a", hpa());
        let moved = twor("b", hpa());
        let p = problems(&moved, Some(&old), validate::DEFAULT_ALLOWED_KINDS);
        assert_eq!(p, vec![worker_ref_changed("a", "b")]);
        assert!(p[0].contains("spec.workerRef.name is immutable"));

        // A finalizer patch on a TWOR stored before a rule existed is not refused.
        let stored = twor("a", json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        let mut patched = stored.clone();
        patched.metadata.finalizers = Some(vec!["temporal.io/owned".into()]);
        assert!(!needs_review(&patched, Some(&stored)));
        assert!(needs_review(&moved, Some(&old)));
        assert!(needs_review(&old, None));
        let mut deleting = moved.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        assert!(!needs_review(&deleting, Some(&old)));
    }

    #[test]
    fn api_versions_split_into_group_and_version() {
        let gv = group_version(&json!({"apiVersion": "keda.sh/v1alpha1"})).expect("gv");
        assert_eq!(
            (gv.group.as_str(), gv.version.as_str()),
            ("keda.sh", "v1alpha1")
        );
        let core = group_version(&json!({"apiVersion": "v1"})).expect("core");
        assert_eq!((core.group.as_str(), core.version.as_str()), ("", "v1"));
        assert!(group_version(&json!({})).is_none());
    }
}
