//! Build IDs, pod-template and connection hashes, and versioned Deployment names.
//!
//! Everything here must give the same answer across controller restarts and releases: a
//! changed hash means a new build ID, and a new build ID means a new rollout. So hashes are
//! taken over a canonical JSON form that we write ourselves (sorted keys, no insignificant
//! whitespace) rather than over `Debug` output or whatever map order serde_json happens to use.
//!
//! A target's build ID has two sources, and only two:
//! 1. [`compute`] here: the cleaned `customBuildID`, else the first image's tag (or short
//!    digest) plus a short hash of the whole pod template (the validate stage);
//! 2. for an object taken over from a predecessor controller, the build ID of the version that
//!    controller already made for this same template (`adopted_target()` in
//!    `src/planner/takeover.rs`), so the take-over starts no new rollout. The observe stage puts
//!    it in place of the computed one (`target_build_id()` in `src/worker_deployment/observe/mod.rs`)
//!    before Temporal is asked about the target.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::TemporalConnectionSpec;
use crate::api::connection::{AuthMode, WorkerServerCa};

/// Longest build ID: it is also a Kubernetes label value.
pub const MAX_BUILD_ID_LEN: usize = 63;
/// Longest versioned Deployment name; leaves room for the ReplicaSet and pod suffixes.
pub const MAX_DEPLOYMENT_NAME_LEN: usize = 47;
/// Hex characters of the template hash appended to image-derived build IDs (40 bits).
const SHORT_HASH_LEN: usize = 10;
/// Hex characters kept from an image digest when there is no tag (like `docker images`).
const DIGEST_PREFIX_LEN: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildIdError {
    #[error(
        "spec.workerOptions.customBuildID: {0:?} has no letters or digits left after removing \
         characters that are not allowed in a build ID ([A-Za-z0-9._-])"
    )]
    EmptyCustom(String),
}

/// The build ID for a pod template: the cleaned custom ID when given, otherwise the first
/// container's image tag (or short digest) plus a short hash of the whole template.
pub fn compute(template: &PodTemplateSpec, custom: Option<&str>) -> Result<String, BuildIdError> {
    if let Some(custom) = custom {
        let cleaned = clean(custom, MAX_BUILD_ID_LEN);
        return if cleaned.is_empty() {
            Err(BuildIdError::EmptyCustom(custom.to_string()))
        } else {
            Ok(cleaned)
        };
    }
    let hash = pod_template_hash(template);
    let short = &hash[..SHORT_HASH_LEN];
    let image = template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or("");
    let prefix = clean(&image_prefix(image), MAX_BUILD_ID_LEN - SHORT_HASH_LEN - 1);
    if prefix.is_empty() {
        Ok(short.to_string())
    } else {
        Ok(format!("{prefix}-{short}"))
    }
}

/// SHA-256 hex of the canonical JSON form of the user's pod template.
pub fn pod_template_hash(template: &PodTemplateSpec) -> String {
    // Serialising k8s-openapi types to a `Value` cannot fail (string-keyed maps, no floats);
    // `Null` keeps this total without a panic path.
    let value = serde_json::to_value(template).unwrap_or(Value::Null);
    let mut out = String::new();
    write_canonical(&value, &mut out);
    sha256_hex(out.as_bytes())
}

/// SHA-256 hex over everything about a connection that ends up in the worker pods: address,
/// TLS server name, the workers' auth mode and the Secret (and key) they read credentials from
/// (`workerCredentials` when set: the controller's own Secret is not in their pods), and the
/// source of their server CA. A change of any of them rolls the workers.
pub fn connection_hash(spec: &TemporalConnectionSpec) -> String {
    let (mode, secret, key) = match spec.worker_auth_mode() {
        AuthMode::Plain => ("plain", "", ""),
        AuthMode::MutualTls { secret } => ("mtls", secret, ""),
        AuthMode::ApiKey { secret, key } => ("apikey", secret, key),
    };
    let mut fields = vec![
        spec.host_port.as_str(),
        spec.server_name().unwrap_or(""),
        mode,
        secret,
        key,
    ];
    // Only when set: a Connection without a server CA keeps its hash, so an upgrade of the
    // controller rolls no worker.
    match spec.worker_server_ca() {
        Some(WorkerServerCa::CaSecret(name)) => fields.extend(["server-ca", name]),
        Some(WorkerServerCa::MutualTlsSecret(_)) => fields.push("server-ca-from-mtls"),
        None => {}
    }
    // Length-prefixed so that moving characters between fields changes the hash.
    let mut framed = String::new();
    for f in fields {
        let _ = write!(framed, "{}:{f};", f.len());
    }
    sha256_hex(framed.as_bytes())
}

/// The Go temporal-worker-controller v1.8.1's `temporal.io/connection-spec-hash`
/// (`ComputeConnectionSpecHash` in its `internal/k8s/deployments.go`): SHA-256 hex of host:port,
/// TLS server name and the mTLS Secret's name (else the API key Secret's), concatenated; empty
/// without a host:port. Computed exactly so that a take-over can tell its Pods carry the
/// current Connection (adopted, not rolled) from Pods whose Connection changed since.
pub fn go_connection_hash(spec: &TemporalConnectionSpec) -> String {
    if spec.host_port.is_empty() {
        return String::new();
    }
    let secret = match (&spec.mutual_tls_secret_ref, &spec.api_key_secret_ref) {
        (Some(m), _) => m.name.as_str(),
        (None, Some(k)) => k.name.as_str(),
        (None, None) => "",
    };
    let server_name = spec.tls.as_ref().and_then(|t| t.server_name.as_deref());
    let joined = format!("{}{}{secret}", spec.host_port, server_name.unwrap_or(""));
    sha256_hex(joined.as_bytes())
}

/// Name of the versioned Deployment for a build: `<twd>-<build>` when that is already a
/// lowercase DNS label of at most 47 characters; otherwise a readable, truncated prefix plus a
/// hash of the exact inputs, so that distinct builds (`v1.0` vs `v1-0`, `A` vs `a`) never
/// share a Deployment.
pub fn deployment_name(twd_name: &str, build_id: &str) -> String {
    let full = format!("{twd_name}-{build_id}");
    let sanitised = dns_label(&full, usize::MAX);
    if sanitised == full && full.len() <= MAX_DEPLOYMENT_NAME_LEN {
        return full;
    }
    let mut framed = String::new();
    let _ = write!(
        framed,
        "{}:{twd_name};{}:{build_id};",
        twd_name.len(),
        build_id.len()
    );
    let hash = sha256_hex(framed.as_bytes());
    let prefix = dns_label(&sanitised, MAX_DEPLOYMENT_NAME_LEN - SHORT_HASH_LEN - 1);
    if prefix.is_empty() {
        hash[..SHORT_HASH_LEN].to_string()
    } else {
        format!("{prefix}-{}", &hash[..SHORT_HASH_LEN])
    }
}

/// Makes `input` a valid build ID / label value: each run of characters outside
/// `[A-Za-z0-9._-]` becomes one `-`, then non-alphanumerics are trimmed from both ends and
/// the result is cut to `max` characters (trimming again after the cut).
pub fn clean(input: &str, max: usize) -> String {
    let mut out = String::with_capacity(input.len());
    let mut in_bad_run = false;
    for c in input.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
            in_bad_run = false;
        } else if !in_bad_run {
            out.push('-');
            in_bad_run = true;
        }
    }
    trim_to(&out, max)
}

/// True when `s` is usable as a build ID and label value as-is.
pub fn is_label_safe(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_BUILD_ID_LEN && clean(s, MAX_BUILD_ID_LEN) == s
}

/// Lowercases and maps each run of characters outside `[a-z0-9-]` to one `-`, trims `-`
/// from both ends and cuts to `max` characters.
fn dns_label(input: &str, max: usize) -> String {
    let mut out = String::with_capacity(input.len());
    let mut in_bad_run = false;
    for c in input.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            out.push(c);
            in_bad_run = false;
        } else if !in_bad_run {
            out.push('-');
            in_bad_run = true;
        }
    }
    trim_to(&out, max)
}

/// Trims non-alphanumerics from both ends, cuts to `max` bytes, trims the end again.
/// Callers only pass ASCII, so cutting at a byte index is a char boundary.
fn trim_to(s: &str, max: usize) -> String {
    let trimmed = s.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let cut = if trimmed.len() > max {
        &trimmed[..max]
    } else {
        trimmed
    };
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Why an image reference is mutable (the same reference can name other code tomorrow), or
/// `None` when a digest, or a tag other than `latest`, names the image. A mutable reference
/// breaks build-ID identity: the build ID comes from the reference and the pod template, not
/// from the image's content, so a re-pushed image runs new code under the old build ID, and
/// workflows pinned to that version replay on code they never ran.
pub fn mutable_reference(image: &str) -> Option<&'static str> {
    let image = image.trim();
    if image.is_empty() || image.contains('@') {
        return None;
    }
    // A ':' after the last '/' separates the tag; one before it belongs to a registry port.
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rsplit_once(':') {
        None => Some("no tag, so the runtime pulls latest"),
        Some((_, "latest")) => Some("the tag latest"),
        Some(_) => None,
    }
}

/// The readable part of a build ID taken from an image reference: the tag if there is one
/// (a tag wins over a digest), else the first hex characters of the digest, else the
/// repository path without the registry host. Not yet cleaned.
fn image_prefix(image: &str) -> String {
    let image = image.trim();
    let (name_and_tag, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    // A ':' after the last '/' separates the tag; one before it belongs to a registry port.
    let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_and_tag[..last_slash + i],
            Some(&name_and_tag[last_slash + i + 1..]),
        ),
        None => (name_and_tag, None),
    };
    if let Some(tag) = tag.filter(|t| !t.is_empty()) {
        return tag.to_string();
    }
    if let Some(digest) = digest {
        let hex = digest.split_once(':').map_or(digest, |(_, h)| h);
        return hex.chars().take(DIGEST_PREFIX_LEN).collect();
    }
    // Docker's rule: the first component is a registry when it has a '.' or ':' or is localhost.
    match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            rest.to_string()
        }
        _ => name.to_string(),
    }
}

/// Compact JSON with object keys sorted bytewise. Nulls and empty arrays inside objects are
/// dropped: the API server omits both (Go `omitempty`), so `env: []` and a missing `env`
/// must hash the same whether a template came from a user's file or from the API.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .iter()
                .filter(|(_, v)| !is_omitted(v))
                .map(|(k, _)| k)
                .collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        // Numbers, booleans and null print the same under every serde_json feature set.
        other => out.push_str(&other.to_string()),
    }
}

fn is_omitted(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json's string escaping is fixed by the JSON spec; it does not depend on features.
    out.push_str(&Value::String(s.to_string()).to_string());
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::connection::{SecretKeyRef, SecretRef, TlsOptions, WorkerCredentials};
    use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn template(image: Option<&str>) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".to_string(), "worker".to_string())])),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "worker".into(),
                    image: image.map(String::from),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn hash_of(t: &PodTemplateSpec) -> String {
        pod_template_hash(t)[..SHORT_HASH_LEN].to_string()
    }

    fn assert_label_safe(id: &str) {
        assert!(!id.is_empty(), "empty id");
        assert!(id.len() <= MAX_BUILD_ID_LEN, "{id} is {} long", id.len());
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
            "{id} has an invalid character"
        );
        assert!(id.starts_with(|c: char| c.is_ascii_alphanumeric()), "{id}");
        assert!(id.ends_with(|c: char| c.is_ascii_alphanumeric()), "{id}");
    }

    fn assert_dns_label(name: &str) {
        assert!(!name.is_empty());
        assert!(
            name.len() <= MAX_DEPLOYMENT_NAME_LEN,
            "{name} is {} long",
            name.len()
        );
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
        assert!(!name.starts_with('-') && !name.ends_with('-'), "{name}");
    }

    // Pinned once: any change to the canonical form (and so to every user's build ID) fails here.
    #[test]
    fn template_hash_is_pinned() {
        let t = template(Some("repo:v1"));
        let mut canonical = String::new();
        write_canonical(&serde_json::to_value(&t).unwrap(), &mut canonical);
        assert_eq!(
            canonical,
            r#"{"metadata":{"labels":{"app":"worker"}},"spec":{"containers":[{"image":"repo:v1","name":"worker"}]}}"#
        );
        // Also checked with `printf '%s' <canonical> | sha256sum`.
        assert_eq!(
            pod_template_hash(&t),
            "536fd32289b71d95f4ed7c4e68ca84c0503088132aa85ef8874c6b173b9950ad"
        );
        assert_eq!(compute(&t, None).unwrap(), "v1-536fd32289");
    }

    #[test]
    fn canonical_form_sorts_keys_and_drops_omitted() {
        let v =
            serde_json::json!({"b": 1, "a": {"d": [], "c": null, "e": "x\"y"}, "arr": [null, 2]});
        let mut out = String::new();
        write_canonical(&v, &mut out);
        assert_eq!(out, r#"{"a":{"e":"x\"y"},"arr":[null,2],"b":1}"#);
    }

    #[test]
    fn empty_list_and_missing_list_hash_the_same() {
        let a = template(Some("repo:v1"));
        let mut b = a.clone();
        if let Some(spec) = b.spec.as_mut() {
            spec.containers[0].env = Some(vec![]);
        }
        assert_eq!(pod_template_hash(&a), pod_template_hash(&b));
    }

    #[test]
    fn hash_covers_whole_template() {
        let base = template(Some("repo:v1"));
        let mut env = base.clone();
        if let Some(spec) = env.spec.as_mut() {
            spec.containers[0].env = Some(vec![EnvVar {
                name: "X".into(),
                value: Some("1".into()),
                ..Default::default()
            }]);
        }
        let mut label = base.clone();
        if let Some(m) = label.metadata.as_mut() {
            m.labels = Some(BTreeMap::from([("app".to_string(), "other".to_string())]));
        }
        let h = pod_template_hash(&base);
        assert_ne!(h, pod_template_hash(&env));
        assert_ne!(h, pod_template_hash(&label));
        assert_ne!(compute(&base, None).unwrap(), compute(&env, None).unwrap());
        assert_eq!(h.len(), 64);
        assert_eq!(h, pod_template_hash(&base.clone()));
    }

    #[test]
    fn latest_no_tag_and_no_digest_are_mutable_references() {
        for image in [
            "worker",
            "worker:latest",
            "myorg/worker",
            "registry.local:5000/team/worker",
            "registry.local:5000/team/worker:latest",
            " ghcr.io/acme/worker:latest ",
        ] {
            assert!(mutable_reference(image).is_some(), "{image}");
        }
        assert_eq!(mutable_reference("worker:latest"), Some("the tag latest"));
        assert_eq!(
            mutable_reference("registry.local:5000/worker"),
            Some("no tag, so the runtime pulls latest"),
            "a registry port is not a tag"
        );
        for image in [
            "worker:v1",
            "registry.local:5000/team/worker:2024.01",
            "worker@sha256:0123abcd",
            "worker:latest@sha256:0123abcd",
            "worker:latest-2024",
            "",
        ] {
            assert_eq!(mutable_reference(image), None, "{image}");
        }
    }

    #[test]
    fn tag_is_the_prefix() {
        let t = template(Some("repo:v1.2.3"));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("v1.2.3-{}", hash_of(&t))
        );
    }

    #[test]
    fn name_only_uses_repository_path() {
        let t = template(Some("myorg/worker"));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("myorg-worker-{}", hash_of(&t))
        );
        let t = template(Some("worker"));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("worker-{}", hash_of(&t))
        );
    }

    #[test]
    fn registry_port_is_not_a_tag() {
        let t = template(Some("registry.local:5000/team/worker:2024.01"));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("2024.01-{}", hash_of(&t))
        );
        let t = template(Some("registry.local:5000/team/worker"));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("team-worker-{}", hash_of(&t))
        );
        let t = template(Some("localhost/worker"));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("worker-{}", hash_of(&t))
        );
    }

    #[test]
    fn digest_is_shortened_and_tag_wins() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let t = template(Some(&format!("repo@{digest}")));
        assert_eq!(
            compute(&t, None).unwrap(),
            format!("0123456789ab-{}", hash_of(&t))
        );
        let t = template(Some(&format!("registry:5000/repo:v2@{digest}")));
        assert_eq!(compute(&t, None).unwrap(), format!("v2-{}", hash_of(&t)));
    }

    #[test]
    fn uppercase_is_kept() {
        let t = template(Some("Repo/Worker:V1-RC"));
        let id = compute(&t, None).unwrap();
        assert_eq!(id, format!("V1-RC-{}", hash_of(&t)));
        assert_label_safe(&id);
    }

    #[test]
    fn empty_or_missing_image_is_hash_only() {
        for image in [None, Some(""), Some("   "), Some(":"), Some("@")] {
            let t = template(image);
            let id = compute(&t, None).unwrap();
            assert_eq!(id, hash_of(&t), "image {image:?}");
            assert_label_safe(&id);
        }
        let no_containers = PodTemplateSpec::default();
        assert_eq!(
            compute(&no_containers, None).unwrap(),
            hash_of(&no_containers)
        );
    }

    #[test]
    fn long_tag_keeps_its_start_and_fits() {
        let tag = "a".repeat(100);
        let t = template(Some(&format!("repo:{tag}")));
        let id = compute(&t, None).unwrap();
        assert_eq!(id.len(), MAX_BUILD_ID_LEN);
        assert_eq!(id, format!("{}-{}", "a".repeat(52), hash_of(&t)));
        assert_label_safe(&id);
        // A cut that lands on a separator must not leave it dangling before ours.
        let tag = format!("{}.{}", "b".repeat(51), "c".repeat(20));
        let t = template(Some(&format!("repo:{tag}")));
        let id = compute(&t, None).unwrap();
        assert_eq!(id, format!("{}-{}", "b".repeat(51), hash_of(&t)));
        assert_label_safe(&id);
    }

    #[test]
    fn odd_tags_are_cleaned() {
        let t = template(Some("repo:_v1__"));
        assert_eq!(compute(&t, None).unwrap(), format!("v1-{}", hash_of(&t)));
        let t = template(Some("repo:---"));
        assert_eq!(compute(&t, None).unwrap(), hash_of(&t));
    }

    #[test]
    fn custom_id_is_cleaned_and_used_as_is() {
        let t = template(Some("repo:v1"));
        assert_eq!(compute(&t, Some("release-7")).unwrap(), "release-7");
        assert_eq!(
            compute(&t, Some("Release 7 / hotfix!")).unwrap(),
            "Release-7-hotfix"
        );
        assert_eq!(compute(&t, Some("..v1.0__")).unwrap(), "v1.0");
        let long = "x".repeat(80);
        assert_eq!(compute(&t, Some(&long)).unwrap(), "x".repeat(63));
        let cut_on_dash = format!("{}-{}", "y".repeat(62), "z".repeat(5));
        assert_eq!(compute(&t, Some(&cut_on_dash)).unwrap(), "y".repeat(62));
        // The template does not matter under a custom ID.
        assert_eq!(
            compute(&template(Some("repo:v2")), Some("release-7")).unwrap(),
            "release-7"
        );
    }

    #[test]
    fn custom_id_empty_after_cleaning_is_an_error() {
        let t = template(Some("repo:v1"));
        for bad in ["", "---", "///", "_._"] {
            assert_eq!(
                compute(&t, Some(bad)),
                Err(BuildIdError::EmptyCustom(bad.to_string())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn is_label_safe_matches_clean() {
        assert!(is_label_safe("v1.2.3-abc"));
        assert!(is_label_safe("A"));
        assert!(!is_label_safe(""));
        assert!(!is_label_safe("-a"));
        assert!(!is_label_safe("a b"));
        assert!(!is_label_safe(&"a".repeat(64)));
    }

    fn conn() -> TemporalConnectionSpec {
        TemporalConnectionSpec {
            host_port: "temporal:7233".into(),
            tls: None,
            mutual_tls_secret_ref: None,
            api_key_secret_ref: None,
            worker_credentials: None,
        }
    }

    #[test]
    fn connection_hash_is_pinned_and_sensitive() {
        let plain = conn();
        assert_eq!(
            connection_hash(&plain),
            sha256_hex(b"13:temporal:7233;0:;5:plain;0:;0:;")
        );
        let mut host = conn();
        host.host_port = "other:7233".into();
        let mut sni = conn();
        sni.tls = Some(TlsOptions {
            server_name: Some("t.example".into()),
            ..Default::default()
        });
        let mut mtls = conn();
        mtls.mutual_tls_secret_ref = Some(SecretRef {
            name: "cert".into(),
        });
        let mut mtls2 = conn();
        mtls2.mutual_tls_secret_ref = Some(SecretRef {
            name: "cert2".into(),
        });
        let mut key = conn();
        key.api_key_secret_ref = Some(SecretKeyRef {
            name: "cert".into(),
            key: "k".into(),
        });
        let mut key2 = key.clone();
        if let Some(r) = key2.api_key_secret_ref.as_mut() {
            r.key = "k2".into();
        }
        // A server CA, its Secret, and the opt-in CA of the mTLS Secret each change it.
        let mut ca = conn();
        ca.tls = Some(TlsOptions {
            ca_cert_secret_ref: Some(SecretRef { name: "ca".into() }),
            ..Default::default()
        });
        let mut ca2 = conn();
        ca2.tls = Some(TlsOptions {
            ca_cert_secret_ref: Some(SecretRef { name: "ca2".into() }),
            ..Default::default()
        });
        let mut mtls_ca = mtls.clone();
        mtls_ca.tls = Some(TlsOptions {
            workers_trust_mutual_tls_ca: Some(true),
            ..Default::default()
        });
        // The workers' own credentials replace the controller's in the hash.
        let mut own = key.clone();
        own.worker_credentials = Some(WorkerCredentials {
            mutual_tls_secret_ref: Some(SecretRef {
                name: "workers".into(),
            }),
            api_key_secret_ref: None,
        });
        let mut same_as_mtls = key.clone();
        same_as_mtls.worker_credentials = Some(WorkerCredentials {
            mutual_tls_secret_ref: Some(SecretRef {
                name: "cert".into(),
            }),
            api_key_secret_ref: None,
        });
        assert_eq!(connection_hash(&same_as_mtls), connection_hash(&mtls));
        let all = [
            &plain, &host, &sni, &mtls, &mtls2, &key, &key2, &ca, &ca2, &mtls_ca, &own,
        ]
        .map(connection_hash);
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                assert_ne!(all[i], all[j], "{i} vs {j}");
            }
        }
        assert_eq!(connection_hash(&mtls), connection_hash(&mtls.clone()));
    }

    #[test]
    fn go_connection_hash_is_the_go_controllers() {
        // `printf '%s' <input> | sha256sum`, the bytes Go's hasher.Write calls see.
        assert_eq!(
            go_connection_hash(&conn()),
            "bd437636002ac3e9058baa1583ae546b5fb693f4175b7d66449b1f9002250b82"
        );
        let mut mtls = conn();
        mtls.tls = Some(TlsOptions {
            server_name: Some("t.example.com".into()),
            ..Default::default()
        });
        mtls.mutual_tls_secret_ref = Some(SecretRef {
            name: "cert".into(),
        });
        assert_eq!(
            go_connection_hash(&mtls),
            "1ab4d5e8661238cce8308aebb89afa9b763fb93fd3c491b3e1a818b1df30acc3"
        );
        // The mTLS Secret wins over an API key; the key name is not part of Go's hash.
        let mut both = mtls.clone();
        both.api_key_secret_ref = Some(SecretKeyRef {
            name: "other".into(),
            key: "k".into(),
        });
        assert_eq!(go_connection_hash(&both), go_connection_hash(&mtls));
        let mut key = conn();
        key.api_key_secret_ref = Some(SecretKeyRef {
            name: "cert".into(),
            key: "k".into(),
        });
        assert_eq!(go_connection_hash(&key), sha256_hex(b"temporal:7233cert"));
        assert_ne!(go_connection_hash(&conn()), connection_hash(&conn()));
        let mut empty = conn();
        empty.host_port.clear();
        assert_eq!(go_connection_hash(&empty), "");
    }

    #[test]
    fn deployment_name_plain_when_already_valid() {
        assert_eq!(deployment_name("worker", "v1-abc123"), "worker-v1-abc123");
        assert_dns_label(&deployment_name("worker", "v1-abc123"));
    }

    #[test]
    fn deployment_name_lossy_inputs_stay_distinct() {
        let dotted = deployment_name("worker", "v1.0");
        let dashed = deployment_name("worker", "v1-0");
        let upper = deployment_name("worker", "V1-0");
        let underscored = deployment_name("worker", "v1_0");
        assert_eq!(dashed, "worker-v1-0");
        for n in [&dotted, &upper, &underscored] {
            assert_dns_label(n);
            assert!(n.starts_with("worker-v1-0-"), "{n}");
        }
        let all = [&dotted, &dashed, &upper, &underscored];
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                assert_ne!(all[i], all[j]);
            }
        }
        // Same inputs, same name.
        assert_eq!(deployment_name("worker", "v1.0"), dotted);
    }

    #[test]
    fn deployment_name_long_inputs_are_shortened_and_distinct() {
        let twd = "w".repeat(63);
        let a = deployment_name(&twd, &format!("{}-1111111111", "v".repeat(50)));
        let b = deployment_name(&twd, &format!("{}-2222222222", "v".repeat(50)));
        assert_dns_label(&a);
        assert_dns_label(&b);
        assert_ne!(a, b);
        assert_eq!(a.len(), MAX_DEPLOYMENT_NAME_LEN);
        assert!(a.starts_with(&"w".repeat(36)));
        // Exactly at the limit stays readable.
        let exact = deployment_name(&"a".repeat(40), "bcdefg");
        assert_eq!(exact, format!("{}-bcdefg", "a".repeat(40)));
        // A cut landing on '-' must not end the prefix with '-'.
        let n = deployment_name(&format!("{}-x", "a".repeat(35)), &"b".repeat(30));
        assert_dns_label(&n);
        assert!(
            n.starts_with(&format!("{}-", "a".repeat(35))) && !n.contains("--"),
            "{n}"
        );
    }

    #[test]
    fn deployment_name_never_empty_or_dashed() {
        for (t, b) in [("", ""), ("-", "-"), ("...", "___"), ("W", "X")] {
            assert_dns_label(&deployment_name(t, b));
        }
    }
}
