//! Who may have the controller copy a kind: a TemporalWorkerOwnedResource makes the controller
//! create, change and delete objects of its `spec.object.kind` in the TWOR's namespace, so the
//! requesting user must hold those rights themselves (or a TWOR would be a way around RBAC),
//! and the controller must hold them too (or every copy would fail after admission).
//!
//! The user is checked with a LocalSubjectAccessReview (namespaced, so a namespaced install
//! needs no ClusterRole) built from the AdmissionRequest's userInfo; the controller with a
//! SelfSubjectAccessReview, which every authenticated identity may create. Each denial names
//! the user, the verb, the group/resource and the namespace.

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, UserInfo};
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, ResourceAttributes, SelfSubjectAccessReview,
    SelfSubjectAccessReviewSpec, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;
use tokio::sync::OnceCell;

/// What the requesting user must be allowed to do with the kind: what the controller does on
/// their behalf, named as RBAC verbs a user would hold.
pub const USER_VERBS: &[&str] = &["create", "update", "delete"];
/// What the controller itself does with each copy: server-side apply (create, patch) and
/// delete (`src/owned/apply.rs`); the chart's `ownedResourceKinds` grants exactly these.
pub const CONTROLLER_VERBS: &[&str] = &["create", "patch", "delete"];

/// One kind, as RBAC names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub group: String,
    pub resource: String,
    pub namespace: String,
}

impl Target {
    /// `group/resource` (just `resource` for the core group).
    pub fn label(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.group, self.resource)
        }
    }

    fn attributes(&self, verb: &str) -> ResourceAttributes {
        ResourceAttributes {
            namespace: Some(self.namespace.clone()),
            verb: Some(verb.to_string()),
            group: Some(self.group.clone()),
            resource: Some(self.resource.clone()),
            ..Default::default()
        }
    }
}

/// The refusal for a user who lacks `verb` on `target`.
pub fn user_denial(username: &str, verb: &str, target: &Target, kind: &str) -> String {
    format!(
        "user {username:?} may not {verb} {} in namespace {:?}: a TemporalWorkerOwnedResource \
         has the controller create, update and delete a {kind} for every version, so its \
         author needs those rights in the namespace too",
        target.label(),
        target.namespace
    )
}

/// The refusal when the controller itself lacks `verb` on `target`.
pub fn controller_denial(identity: &str, verb: &str, target: &Target) -> String {
    format!(
        "the controller ({identity:?}) may not {verb} {} in namespace {:?}: grant the kind \
         with the chart's ownedResourceKinds",
        target.label(),
        target.namespace
    )
}

/// The LocalSubjectAccessReview asking whether `user` may `verb` `target`.
pub fn user_review(user: &UserInfo, verb: &str, target: &Target) -> LocalSubjectAccessReview {
    LocalSubjectAccessReview {
        metadata: ObjectMeta {
            namespace: Some(target.namespace.clone()),
            ..Default::default()
        },
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(target.attributes(verb)),
            ..Default::default()
        },
        status: None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("asking the API server whether {who} may {verb} {resource}: {source}")]
    Review {
        who: String,
        verb: String,
        resource: String,
        source: kube::Error,
    },
}

/// Whether `user` may `verb` `target` (a LocalSubjectAccessReview).
pub async fn user_may(
    client: &kube::Client,
    user: &UserInfo,
    verb: &str,
    target: &Target,
) -> Result<bool, AccessError> {
    let reviews: Api<LocalSubjectAccessReview> = Api::namespaced(client.clone(), &target.namespace);
    let review = reviews
        .create(&PostParams::default(), &user_review(user, verb, target))
        .await
        .map_err(|source| AccessError::Review {
            who: format!("user {:?}", user.username.clone().unwrap_or_default()),
            verb: verb.to_string(),
            resource: target.label(),
            source,
        })?;
    Ok(review.status.is_some_and(|s| s.allowed))
}

/// The refusal of a TWOR deletion for a user who may not delete its kind.
pub fn delete_denial(username: &str, target: &Target, kind: &str) -> String {
    format!(
        "user {username:?} may not delete {} in namespace {:?}: deleting a          TemporalWorkerOwnedResource has the controller delete its {kind} copies, so its          deleter needs that right in the namespace too",
        target.label(),
        target.namespace
    )
}

/// Checks the user and the controller; `Ok` holds every denial (empty: allowed).
pub async fn check(
    client: &kube::Client,
    controller: &ControllerIdentity,
    user: &UserInfo,
    target: &Target,
    kind: &str,
) -> Result<Vec<String>, AccessError> {
    let username = user.username.clone().unwrap_or_default();
    let mut denials = Vec::new();
    for verb in USER_VERBS {
        if !user_may(client, user, verb, target).await? {
            denials.push(user_denial(&username, verb, target, kind));
        }
    }
    let own: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let identity = controller.name(client).await;
    for verb in CONTROLLER_VERBS {
        let review = SelfSubjectAccessReview {
            metadata: ObjectMeta::default(),
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(target.attributes(verb)),
                non_resource_attributes: None,
            },
            status: None,
        };
        let review = own
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| AccessError::Review {
                who: "the controller".into(),
                verb: (*verb).to_string(),
                resource: target.label(),
                source,
            })?;
        if !review.status.is_some_and(|s| s.allowed) {
            denials.push(controller_denial(&identity, verb, target));
        }
    }
    Ok(denials)
}

/// The controller's own user name, asked once (SelfSubjectReview) for denial messages.
#[derive(Debug, Default)]
pub struct ControllerIdentity(OnceCell<String>);

impl ControllerIdentity {
    pub async fn name(&self, client: &kube::Client) -> String {
        if let Some(name) = self.0.get() {
            return name.clone();
        }
        let api: Api<SelfSubjectReview> = Api::all(client.clone());
        let review = SelfSubjectReview {
            metadata: ObjectMeta::default(),
            status: None,
        };
        match api.create(&PostParams::default(), &review).await {
            Ok(r) => {
                let name = r
                    .status
                    .and_then(|s| s.user_info)
                    .and_then(|u| u.username)
                    .unwrap_or_else(|| "its ServiceAccount".into());
                let _ = self.0.set(name.clone());
                name
            }
            // Not remembered: the next denial asks again.
            Err(_) => "its ServiceAccount".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            group: "autoscaling".into(),
            resource: "horizontalpodautoscalers".into(),
            namespace: "team-a".into(),
        }
    }

    #[test]
    fn a_denial_names_user_verb_resource_and_namespace() {
        let m = user_denial("alice", "create", &target(), "HorizontalPodAutoscaler");
        assert!(
            m.starts_with(
                "user \"alice\" may not create autoscaling/horizontalpodautoscalers in namespace \"team-a\""
            ),
            "{m}"
        );
        let m = controller_denial("system:serviceaccount:twc:twc", "patch", &target());
        assert!(
            m.contains("\"system:serviceaccount:twc:twc\") may not patch autoscaling/horizontalpodautoscalers in namespace \"team-a\""),
            "{m}"
        );
        let core = Target {
            group: String::new(),
            resource: "configmaps".into(),
            namespace: "n".into(),
        };
        assert_eq!(core.label(), "configmaps");
    }

    #[test]
    fn the_user_review_carries_the_whole_identity() {
        let user = UserInfo {
            username: Some("alice".into()),
            uid: Some("u-1".into()),
            groups: Some(vec!["devs".into(), "system:authenticated".into()]),
            extra: Some([("scopes".to_string(), vec!["a".to_string()])].into()),
        };
        let r = user_review(&user, "delete", &target());
        assert_eq!(r.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(r.spec.user.as_deref(), Some("alice"));
        assert_eq!(r.spec.uid.as_deref(), Some("u-1"));
        assert_eq!(r.spec.groups, user.groups);
        assert_eq!(r.spec.extra, user.extra);
        let attrs = r.spec.resource_attributes.expect("attributes");
        assert_eq!(attrs.verb.as_deref(), Some("delete"));
        assert_eq!(attrs.group.as_deref(), Some("autoscaling"));
        assert_eq!(attrs.resource.as_deref(), Some("horizontalpodautoscalers"));
        assert_eq!(attrs.namespace.as_deref(), Some("team-a"));
    }
}
