//! The user's pod template of an older version, read back from its versioned Deployment for
//! `undo`. The Deployment's template is the user's plus what the controller put in (connection
//! env and volumes, our labels and annotations) plus the API server's defaults
//! (`terminationMessagePath`, `dnsPolicy`, …). A build ID is a hash of the user's template as
//! written, so the template is only good if it hashes to the value the controller recorded on
//! the Deployment (`temporal.io/pod-template-spec-hash`): the defaults are taken out in the
//! likeliest combinations (all of them, then all but one, all but two) until one does.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

use crate::api::{
    ANNOTATION_CONNECTION_HASH, ANNOTATION_CONNECTION_REF, ANNOTATION_POD_TEMPLATE_HASH,
    ANNOTATION_RESTART, ANNOTATION_RESTARTED_AT, LABEL_BUILD_ID, LABEL_DEPLOYMENT_NAME,
};
use crate::build_id::pod_template_hash;

/// The annotation `kubectl rollout restart` puts on a Deployment's template.
const KUBECTL_RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
/// Combinations of defaults tried before giving up (each costs one hash).
const BUDGET: usize = 50_000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecoverError {
    #[error(
        "the Deployment's pod template has no {ANNOTATION_POD_TEMPLATE_HASH} annotation (not \
         rendered by this controller)"
    )]
    NoHash,
    #[error(
        "no form of the Deployment's pod template hashes to its {ANNOTATION_POD_TEMPLATE_HASH}; \
         restore spec.template from Git or your own records"
    )]
    NoMatch,
}

/// The user's template that the versioned Deployment's `template` was rendered from.
pub fn recover(deployed: &PodTemplateSpec) -> Result<PodTemplateSpec, RecoverError> {
    let meta = deployed.metadata.as_ref();
    let want = meta
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_POD_TEMPLATE_HASH))
        .ok_or(RecoverError::NoHash)?;
    let base = without_ours(deployed);
    let defaults = defaulted(&base);
    for keep in keep_sets(defaults.len()).take(BUDGET) {
        let mut candidate = base.clone();
        for (i, pointer) in defaults.iter().enumerate().rev() {
            if !keep.contains(&i) {
                remove(&mut candidate, pointer);
            }
        }
        if let Ok(t) = serde_json::from_value::<PodTemplateSpec>(candidate)
            && &pod_template_hash(&t) == want
        {
            return Ok(t);
        }
    }
    Err(RecoverError::NoMatch)
}

/// `deployed` without what the controller (or `kubectl rollout restart`) added.
fn without_ours(deployed: &PodTemplateSpec) -> Value {
    let mut t = deployed.clone();
    if let Some(spec) = t.spec.as_mut() {
        crate::render::inject::strip(spec);
    }
    if let Some(meta) = t.metadata.as_mut() {
        if let Some(labels) = meta.labels.as_mut() {
            for key in [LABEL_DEPLOYMENT_NAME, LABEL_BUILD_ID] {
                labels.remove(key);
            }
        }
        if let Some(annotations) = meta.annotations.as_mut() {
            for key in [
                ANNOTATION_POD_TEMPLATE_HASH,
                ANNOTATION_CONNECTION_HASH,
                ANNOTATION_CONNECTION_REF,
                ANNOTATION_RESTART,
                ANNOTATION_RESTARTED_AT,
                KUBECTL_RESTARTED_AT,
            ] {
                annotations.remove(key);
            }
        }
    }
    let mut value = serde_json::to_value(&t).unwrap_or(Value::Null);
    for pointer in ["/metadata/labels", "/metadata/annotations", "/metadata"] {
        if value.pointer(pointer) == Some(&json!({})) {
            remove(&mut value, pointer);
        }
    }
    value
}

/// JSON pointers of the fields of `t` that hold the API server's default for them, in
/// document order.
fn defaulted(t: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = |pointer: String, defaults: &[Value]| {
        if t.pointer(&pointer).is_some_and(|v| defaults.contains(v)) {
            out.push(pointer);
        }
    };
    for (key, default) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
    ] {
        at(format!("/spec/{key}"), &[default]);
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in items(&t["spec"][list]) {
            let c_at = format!("/spec/{list}/{i}");
            for (key, defaults) in [
                (
                    "terminationMessagePath",
                    vec![json!("/dev/termination-log")],
                ),
                ("terminationMessagePolicy", vec![json!("File")]),
                (
                    "imagePullPolicy",
                    vec![json!("IfNotPresent"), json!("Always")],
                ),
                ("resources", vec![json!({})]),
            ] {
                at(format!("{c_at}/{key}"), &defaults);
            }
            for (j, _) in items(&c["ports"]) {
                at(format!("{c_at}/ports/{j}/protocol"), &[json!("TCP")]);
            }
            for (j, _) in items(&c["env"]) {
                at(
                    format!("{c_at}/env/{j}/valueFrom/fieldRef/apiVersion"),
                    &[json!("v1")],
                );
            }
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                let p = format!("{c_at}/{probe}");
                for (key, default) in [
                    ("timeoutSeconds", json!(1)),
                    ("periodSeconds", json!(10)),
                    ("successThreshold", json!(1)),
                    ("failureThreshold", json!(3)),
                    ("httpGet/scheme", json!("HTTP")),
                ] {
                    at(format!("{p}/{key}"), &[default]);
                }
            }
        }
    }
    for (i, _) in items(&t["spec"]["volumes"]) {
        for source in ["secret", "configMap", "projected", "downwardAPI"] {
            at(
                format!("/spec/volumes/{i}/{source}/defaultMode"),
                &[json!(420)],
            );
        }
    }
    out
}

fn items(list: &Value) -> impl Iterator<Item = (usize, &Value)> {
    list.as_array().into_iter().flatten().enumerate()
}

/// The sets of defaults to keep, likeliest first: none (the user wrote no default), then each
/// one, then each pair.
fn keep_sets(n: usize) -> impl Iterator<Item = Vec<usize>> {
    let none = std::iter::once(Vec::new());
    let one = (0..n).map(|i| vec![i]);
    let two = (0..n).flat_map(move |i| (i + 1..n).map(move |j| vec![i, j]));
    none.chain(one).chain(two)
}

/// Removes the field at `pointer` (an object key) from `value`.
fn remove(value: &mut Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(Value::Object(map)) = value.pointer_mut(parent) {
        map.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user template and the same as the API server stores it in a versioned Deployment.
    fn user_and_deployed(user: Value) -> (PodTemplateSpec, PodTemplateSpec) {
        let user: PodTemplateSpec = serde_json::from_value(user).expect("template");
        let hash = pod_template_hash(&user);
        let mut deployed = serde_json::to_value(&user).expect("json");
        let c = &mut deployed["spec"]["containers"][0];
        c["terminationMessagePath"] = json!("/dev/termination-log");
        c["terminationMessagePolicy"] = json!("File");
        c["imagePullPolicy"] = json!("IfNotPresent");
        let env = c["env"].as_array().cloned().unwrap_or_default();
        let mut ours = vec![json!({"name": "TEMPORAL_ADDRESS", "value": "t:7233"})];
        ours.extend(env);
        c["env"] = json!(ours);
        let spec = &mut deployed["spec"];
        spec["restartPolicy"] = json!("Always");
        spec["dnsPolicy"] = json!("ClusterFirst");
        spec["securityContext"] = json!({});
        deployed["metadata"]["labels"][LABEL_BUILD_ID] = json!("v1");
        deployed["metadata"]["annotations"] = json!({
            ANNOTATION_POD_TEMPLATE_HASH: hash,
            ANNOTATION_CONNECTION_REF: "Connection/c",
        });
        (
            user,
            serde_json::from_value(deployed).expect("deployed template"),
        )
    }

    #[test]
    fn the_user_template_comes_back_without_defaults_or_injections() {
        let (user, deployed) = user_and_deployed(json!({
            "metadata": {"labels": {"app": "orders"}},
            "spec": {"containers": [{"name": "worker", "image": "w:v1",
                     "env": [{"name": "MINE", "value": "1"}]}]}}));
        assert_eq!(recover(&deployed), Ok(user));
    }

    #[test]
    fn a_default_the_user_wrote_is_kept() {
        // The user wrote `dnsPolicy: ClusterFirst` and `imagePullPolicy: IfNotPresent`.
        let (user, deployed) = user_and_deployed(json!({
            "spec": {"dnsPolicy": "ClusterFirst",
                     "containers": [{"name": "worker", "image": "w:v1",
                                     "imagePullPolicy": "IfNotPresent"}]}}));
        assert_eq!(recover(&deployed), Ok(user));
    }

    #[test]
    fn a_template_that_matches_no_hash_is_refused() {
        let (_, mut deployed) = user_and_deployed(json!({
            "spec": {"containers": [{"name": "worker", "image": "w:v1"}]}}));
        let mut other = deployed.clone();
        if let Some(c) = deployed.spec.as_mut().map(|s| &mut s.containers[0]) {
            c.image = Some("w:edited".into());
        }
        assert_eq!(recover(&deployed), Err(RecoverError::NoMatch));
        other.metadata = None;
        assert_eq!(recover(&other), Err(RecoverError::NoHash));
    }
}
