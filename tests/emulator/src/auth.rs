//! The authentication APIs: TokenRequest (`POST .../serviceaccounts/<name>/token`, what
//! `kubectl create token` calls) and TokenReview (`POST /apis/authentication.k8s.io/v1/tokenreviews`),
//! plus static tokens registered from Rust (kube-apiserver's `--token-auth-file`).
//!
//! Tokens are opaque random strings, not signed JWTs: the emulator is their only verifier. They
//! are remembered in memory keyed by their SHA-256, never by the raw token. A review follows
//! kube-apiserver's ServiceAccount JWT authenticator: audiences first (the review's, or the API
//! server's default audience), then expiry (with go-jose's one-minute leeway), then the
//! ServiceAccount (and the bound Pod or Secret) must still exist with the UID it had when the
//! token was minted. Failures carry the real server's error text.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine as _;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Shared;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResKey;
use crate::store::State;

pub const GROUP: &str = "authentication.k8s.io";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "authentication.k8s.io/v1";

/// The API server's audience (`--api-audiences`): what a TokenRequest without audiences gets
/// and what a TokenReview without audiences checks for.
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// `spec.expirationSeconds` when a TokenRequest leaves it out (API defaulting).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a TokenRequest may ask for (10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// go-jose's `jwt.DefaultLeeway`, which kube-apiserver applies to expiry and to deletions.
const LEEWAY_SECONDS: i64 = 60;

const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";
const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";

const INVALID_BEARER: &str = "invalid bearer token";
const EXPIRED: &str = "service account token has expired";
const INVALIDATED: &str = "service account token has been invalidated";

/// The object a token is bound to (`spec.boundObjectRef`): the token dies with it.
#[derive(Debug, Clone)]
struct Bound {
    /// `pods` or `secrets`.
    plural: &'static str,
    name: String,
    uid: String,
}

#[derive(Debug, Clone)]
struct ServiceAccountToken {
    namespace: String,
    name: String,
    uid: String,
    audiences: Vec<String>,
    expires: Timestamp,
    /// The JWT ID a real token would carry; reported as the credential id.
    jti: String,
    bound: Option<Bound>,
    /// `spec.nodeName` of the bound Pod, if scheduled.
    node_name: Option<String>,
}

#[derive(Debug, Clone)]
struct StaticUser {
    username: String,
    uid: String,
    groups: Vec<String>,
}

#[derive(Debug, Clone)]
enum Credential {
    ServiceAccount(ServiceAccountToken),
    Static(StaticUser),
}

#[derive(Default)]
struct Inner {
    tokens: HashMap<[u8; 32], Credential>,
    /// Seconds added to the wall clock for token expiry (a test hook).
    skew_seconds: i64,
}

/// Every token the emulator knows. Never held together with the store lock.
#[derive(Default)]
pub(crate) struct Authn {
    inner: Mutex<Inner>,
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// 32 bytes (244 of them random) from two v4 UUIDs, base64url without padding.
fn new_token() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `metav1.Time` form: RFC 3339, whole seconds, UTC.
fn rfc3339(ts: Timestamp) -> String {
    Timestamp::from_second(ts.as_second())
        .unwrap_or(ts)
        .to_string()
}

fn plus_seconds(ts: Timestamp, secs: i64) -> Timestamp {
    ts.checked_add(SignedDuration::from_secs(secs))
        .unwrap_or(if secs < 0 {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        })
}

impl Authn {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock tokens are minted and checked against.
    pub(crate) fn now(&self) -> Timestamp {
        let skew = self.lock().skew_seconds;
        plus_seconds(Timestamp::now(), skew)
    }

    pub(crate) fn advance(&self, by: Duration) {
        let secs = i64::try_from(by.as_secs()).unwrap_or(i64::MAX);
        let mut inner = self.lock();
        inner.skew_seconds = inner.skew_seconds.saturating_add(secs);
    }

    pub(crate) fn add_static(&self, token: &str, username: &str, uid: &str, groups: &[&str]) {
        self.lock().tokens.insert(
            hash(token),
            Credential::Static(StaticUser {
                username: username.to_string(),
                uid: uid.to_string(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            }),
        );
    }

    /// Remembers a minted token; drops ServiceAccount tokens that can no longer pass a review.
    fn remember(&self, token: &str, t: ServiceAccountToken) {
        let mut inner = self.lock();
        let horizon = plus_seconds(
            plus_seconds(Timestamp::now(), inner.skew_seconds),
            -LEEWAY_SECONDS,
        );
        inner.tokens.retain(|_, c| match c {
            Credential::ServiceAccount(s) => s.expires >= horizon,
            Credential::Static(_) => true,
        });
        inner
            .tokens
            .insert(hash(token), Credential::ServiceAccount(t));
    }

    fn lookup(&self, token: &str) -> Option<Credential> {
        self.lock().tokens.get(&hash(token)).cloned()
    }
}

/// Checks `apiVersion`/`kind` of a body the way the decoder does, then decodes it as `T`
/// (wrongly typed fields are a 400 like Go's strict JSON decoding of known fields).
fn decode<T: serde::de::DeserializeOwned>(body: Value, kind: &str) -> ApiResult<T> {
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "the body of the request was not a JSON object".into(),
        ));
    }
    let av = body.get("apiVersion").and_then(Value::as_str);
    let k = body.get("kind").and_then(Value::as_str);
    let av_ok = av.is_none_or(|a| a.is_empty() || a == API_VERSION);
    let kind_ok = k.is_none_or(|k| k.is_empty() || k == kind);
    if !av_ok || !kind_ok {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({}) does not match the expected API version ({API_VERSION})",
            av.unwrap_or_default()
        )));
    }
    let mut body = body;
    if let Value::Object(m) = &mut body {
        // Tolerate empty strings the Go decoder would accept.
        m.remove("apiVersion");
        m.remove("kind");
    }
    serde_json::from_value(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "{kind} in version \"{VERSION}\" cannot be handled as a {kind}: {e}"
        ))
    })
}

fn key(plural: &str) -> ResKey {
    ResKey {
        group: String::new(),
        plural: plural.into(),
    }
}

fn meta<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| json!(s).to_string()).collect();
    format!("[{}]", quoted.join(" "))
}

/// `Audiences.Intersect`: the requested audiences the token carries, in requested order.
fn intersect(token: &[String], requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .filter(|r| token.contains(r))
        .cloned()
        .collect()
}

/// Whether a token expiring at `expires` is past go-jose's leeway at `now`.
fn expired(expires: Timestamp, now: Timestamp) -> bool {
    plus_seconds(now, -LEEWAY_SECONDS) > expires
}

/// An object that still exists with `uid` and was not deleted longer than the leeway ago.
fn alive(obj: Option<&Value>, uid: &str, now: Timestamp) -> bool {
    let Some(obj) = obj else { return false };
    if meta(obj, "uid") != Some(uid) {
        return false;
    }
    match meta(obj, "deletionTimestamp").and_then(|d| d.parse::<Timestamp>().ok()) {
        Some(deleted) => deleted >= plus_seconds(now, -LEEWAY_SECONDS),
        None => true,
    }
}

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        GROUP,
        "TokenRequest",
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            message,
            field: field.into(),
        }],
    )
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: mints a token (201 body).
pub(crate) fn token_request(
    shared: &Shared,
    ns: &str,
    name: &str,
    body: Value,
) -> ApiResult<Value> {
    let mut body = body;
    if let Value::Object(m) = &mut body {
        // The server clears status; don't let a partial one fail decoding.
        m.remove("status");
    }
    let req: TokenRequest = decode(body, "TokenRequest")?;
    if let Some(n) = req.metadata.name.as_deref().filter(|n| !n.is_empty())
        && n != name
    {
        return Err(invalid(
            name,
            "metadata.name",
            format!("Invalid value: \"{n}\": must match the service account name if specified"),
        ));
    }
    if let Some(n) = req.metadata.namespace.as_deref().filter(|n| !n.is_empty())
        && n != ns
    {
        return Err(invalid(
            name,
            "metadata.namespace",
            format!(
                "Invalid value: \"{n}\": must match the service account namespace if specified"
            ),
        ));
    }

    let st = shared.lock();
    let sa = st
        .get(&key("serviceaccounts"), ns, name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let sa_uid = meta(&sa.obj, "uid").unwrap_or_default().to_string();
    if let Some(u) = req.metadata.uid.as_deref().filter(|u| !u.is_empty())
        && u != sa_uid
    {
        return Err(ApiError::conflict(
            GROUP,
            "TokenRequest",
            name,
            &format!(
                "the UID in the token request ({u}) does not match the UID of the service account ({sa_uid})"
            ),
        ));
    }
    let spec = &req.spec;
    let audiences = if spec.audiences.is_empty() {
        vec![DEFAULT_AUDIENCE.to_string()]
    } else {
        spec.audiences.clone()
    };
    let seconds = spec
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            "",
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            "",
            "spec.expirationSeconds",
            format!(
                "Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    let (bound, node_name) = match &spec.bound_object_ref {
        Some(r) => bind(&st, ns, name, r)?,
        None => (None, None),
    };
    drop(st);

    let now = shared.auth.now();
    let expires = plus_seconds(now, seconds);
    let token = new_token();
    shared.auth.remember(
        &token,
        ServiceAccountToken {
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: sa_uid.clone(),
            audiences: audiences.clone(),
            expires,
            jti: uuid::Uuid::new_v4().to_string(),
            bound,
            node_name,
        },
    );

    let mut metadata = serde_json::to_value(&req.metadata).unwrap_or_else(|_| json!({}));
    if !metadata.is_object() {
        metadata = json!({});
    }
    metadata["name"] = json!(name);
    metadata["namespace"] = json!(ns);
    metadata["uid"] = json!(sa_uid);
    metadata["creationTimestamp"] = json!(rfc3339(now));
    let mut out_spec = json!({"audiences": audiences, "expirationSeconds": seconds});
    if let Some(r) = &spec.bound_object_ref {
        out_spec["boundObjectRef"] = serde_json::to_value(r).unwrap_or_else(|_| json!({}));
    }
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "spec": out_spec,
        "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
    }))
}

/// Resolves `spec.boundObjectRef` like kube-apiserver: Pods (running as this ServiceAccount)
/// and Secrets; Nodes are looked up too, and there are none in the emulator.
fn bind(
    st: &State,
    ns: &str,
    sa_name: &str,
    r: &k8s_openapi::api::authentication::v1::BoundObjectReference,
) -> ApiResult<(Option<Bound>, Option<String>)> {
    let av = r.api_version.as_deref().unwrap_or_default();
    let (group, version) = crate::registry::split_api_version(av);
    let kind = r.kind.as_deref().unwrap_or_default();
    let ref_name = r.name.as_deref().unwrap_or_default();
    let plural = match (group, kind) {
        ("", "Pod") => "pods",
        ("", "Secret") => "secrets",
        ("", "Node") => "nodes",
        _ => {
            return Err(ApiError::BadRequest(format!(
                "cannot bind token to object of type {group}/{version}, Kind={kind}"
            )));
        }
    };
    if ref_name.is_empty() {
        return Err(ApiError::BadRequest("Name parameter required.".into()));
    }
    if plural == "nodes" {
        // The emulator serves no Node objects, so every lookup misses, as it would on a
        // cluster without that node.
        return Err(ApiError::not_found("", "nodes", ref_name));
    }
    let obj = &st
        .get(&key(plural), ns, ref_name)
        .ok_or_else(|| ApiError::not_found("", plural, ref_name))?
        .obj;
    let mut node_name = None;
    if plural == "pods" {
        // The ServiceAccount admission plugin defaults an unset name to "default".
        let runs_as = obj
            .pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        if runs_as != sa_name {
            return Err(ApiError::BadRequest(format!(
                "cannot bind token for serviceaccount \"{sa_name}\" to pod running with different serviceaccount name."
            )));
        }
        node_name = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
    }
    let uid = meta(obj, "uid").unwrap_or_default().to_string();
    if let Some(want) = r.uid.as_deref().filter(|u| !u.is_empty())
        && want != uid
    {
        return Err(ApiError::conflict(
            "",
            kind,
            ref_name,
            &format!(
                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok((
        Some(Bound {
            plural,
            name: ref_name.to_string(),
            uid,
        }),
        node_name,
    ))
}

/// Who a token authenticates as.
#[derive(Debug, Clone, PartialEq)]
struct User {
    username: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn to_json(&self) -> Value {
        let mut u = json!({"username": self.username});
        if !self.uid.is_empty() {
            u["uid"] = json!(self.uid);
        }
        if !self.groups.is_empty() {
            u["groups"] = json!(self.groups);
        }
        if !self.extra.is_empty() {
            u["extra"] = json!(self.extra);
        }
        u
    }
}

/// `AuthenticatedGroupAdder`: everyone but `system:anonymous` is in `system:authenticated`.
fn with_authenticated_group(mut groups: Vec<String>, username: &str) -> Vec<String> {
    let has = groups
        .iter()
        .any(|g| g == "system:authenticated" || g == "system:unauthenticated");
    if username != "system:anonymous" && !has {
        groups.push("system:authenticated".into());
    }
    groups
}

/// The authenticator chain: `Ok((user, audiences))` or the error text a review reports.
fn authenticate(
    shared: &Shared,
    token: &str,
    requested: &[String],
) -> Result<(User, Vec<String>), String> {
    let now = shared.auth.now();
    match shared.auth.lookup(token) {
        None => Err(INVALID_BEARER.into()),
        Some(Credential::Static(s)) => {
            // Token-file users are audience-agnostic: valid for the API server's audience only.
            let auds = intersect(&[DEFAULT_AUDIENCE.to_string()], requested);
            if auds.is_empty() {
                return Err(INVALID_BEARER.into());
            }
            let user = User {
                groups: with_authenticated_group(s.groups.clone(), &s.username),
                username: s.username,
                uid: s.uid,
                extra: BTreeMap::new(),
            };
            Ok((user, auds))
        }
        Some(Credential::ServiceAccount(t)) => {
            let fail = |why: &str| format!("[{INVALID_BEARER}, {why}]");
            let auds = intersect(&t.audiences, requested);
            if auds.is_empty() {
                return Err(fail(&format!(
                    "token audiences {} is invalid for the target audiences {}",
                    go_quote_list(&t.audiences),
                    go_quote_list(requested)
                )));
            }
            if expired(t.expires, now) {
                return Err(fail(EXPIRED));
            }
            let st = shared.lock();
            let sa = st
                .get(&key("serviceaccounts"), &t.namespace, &t.name)
                .map(|s| &s.obj);
            if !alive(sa, &t.uid, now) {
                return Err(fail(INVALIDATED));
            }
            let mut extra = BTreeMap::new();
            if let Some(b) = &t.bound {
                let obj = st
                    .get(&key(b.plural), &t.namespace, &b.name)
                    .map(|s| &s.obj);
                if !alive(obj, &b.uid, now) {
                    return Err(fail(INVALIDATED));
                }
                if b.plural == "pods" {
                    extra.insert(POD_NAME_KEY.to_string(), vec![b.name.clone()]);
                    extra.insert(POD_UID_KEY.to_string(), vec![b.uid.clone()]);
                    if let Some(n) = &t.node_name {
                        extra.insert(NODE_NAME_KEY.to_string(), vec![n.clone()]);
                    }
                }
            }
            drop(st);
            extra.insert(
                CREDENTIAL_ID_KEY.to_string(),
                vec![format!("JTI={}", t.jti)],
            );
            let username = format!("system:serviceaccount:{}:{}", t.namespace, t.name);
            let groups = with_authenticated_group(
                vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{}", t.namespace),
                ],
                &username,
            );
            Ok((
                User {
                    username,
                    uid: t.uid,
                    groups,
                    extra,
                },
                auds,
            ))
        }
    }
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: the review with its status (201 body).
pub(crate) fn token_review(shared: &Shared, body: Value) -> ApiResult<Value> {
    let review: TokenReview = decode(body, "TokenReview")?;
    let token = review.spec.token.as_deref().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::BadRequest(
            "token is required for TokenReview in authentication".into(),
        ));
    }
    let requested: Vec<String> = match review.spec.audiences.as_deref() {
        Some(a) if !a.is_empty() => a.to_vec(),
        _ => vec![DEFAULT_AUDIENCE.to_string()],
    };
    let status = match authenticate(shared, token, &requested) {
        Ok((user, auds)) => json!({
            "authenticated": true,
            "user": user.to_json(),
            "audiences": auds,
        }),
        Err(error) => json!({"user": {}, "error": error}),
    };
    let metadata = serde_json::to_value(&review.metadata).unwrap_or_else(|_| json!({}));
    let spec = serde_json::to_value(&review.spec).unwrap_or_else(|_| json!({}));
    Ok(json!({
        "kind": "TokenReview",
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }))
}

/// Group/versions served here (for `/apis` discovery).
pub(crate) const GROUP_VERSIONS: &[(&str, &str)] = &[(GROUP, VERSION)];

/// Discovery entries of the resources served here in `group`/`version`.
pub(crate) fn discovery_resources(group: &str, version: &str) -> Vec<Value> {
    if group != GROUP || version != VERSION {
        return Vec::new();
    }
    vec![json!({
        "name": "tokenreviews",
        "singularName": "tokenreview",
        "namespaced": false,
        "kind": "TokenReview",
        "verbs": ["create"],
    })]
}

/// Discovery entries of the subresources served here for a stored resource.
pub(crate) fn discovery_subresources(group: &str, version: &str, plural: &str) -> Vec<Value> {
    if group.is_empty() && version == "v1" && plural == "serviceaccounts" {
        return vec![json!({
            "name": "serviceaccounts/token",
            "singularName": "",
            "namespaced": true,
            "group": GROUP,
            "version": VERSION,
            "kind": "TokenRequest",
            "verbs": ["create"],
        })];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn expiry_allows_one_minute_of_leeway() {
        let exp = ts("2025-01-01T01:00:00Z");
        assert!(!expired(exp, ts("2025-01-01T00:59:59Z")));
        assert!(!expired(exp, ts("2025-01-01T01:00:00Z")));
        assert!(!expired(exp, ts("2025-01-01T01:01:00Z")));
        assert!(expired(exp, ts("2025-01-01T01:01:01Z")));
    }

    #[test]
    fn intersection_keeps_requested_order() {
        let token = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let req = vec!["c".to_string(), "x".to_string(), "a".to_string()];
        assert_eq!(intersect(&token, &req), vec!["c", "a"]);
        assert!(intersect(&token, &["x".to_string()]).is_empty());
    }

    #[test]
    fn go_quoting_of_audience_lists() {
        assert_eq!(
            go_quote_list(&["a".to_string(), "b\"c".to_string()]),
            r#"["a" "b\"c"]"#
        );
    }

    #[test]
    fn deleted_objects_invalidate_after_the_leeway() {
        let now = ts("2025-01-01T00:10:00Z");
        let obj = |deleted: Option<&str>| {
            let mut o = json!({"metadata": {"uid": "u1"}});
            if let Some(d) = deleted {
                o["metadata"]["deletionTimestamp"] = json!(d);
            }
            o
        };
        assert!(alive(Some(&obj(None)), "u1", now));
        assert!(!alive(Some(&obj(None)), "u2", now));
        assert!(!alive(None, "u1", now));
        assert!(alive(Some(&obj(Some("2025-01-01T00:09:30Z"))), "u1", now));
        assert!(!alive(Some(&obj(Some("2025-01-01T00:08:59Z"))), "u1", now));
    }

    #[test]
    fn authenticated_group_is_added_once() {
        assert_eq!(
            with_authenticated_group(vec!["g".into()], "alice"),
            vec!["g", "system:authenticated"]
        );
        assert_eq!(
            with_authenticated_group(vec!["system:authenticated".into()], "alice"),
            vec!["system:authenticated"]
        );
        assert!(with_authenticated_group(vec![], "system:anonymous").is_empty());
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        let authn = Authn::default();
        authn.add_static(&a, "alice", "", &[]);
        assert!(authn.lookup(&a).is_some());
        assert!(authn.lookup(&b).is_none());
        assert!(authn.lock().tokens.contains_key(&hash(&a)));
    }

    #[test]
    fn decode_rejects_other_kinds_and_bad_types() {
        let e = decode::<TokenReview>(json!({"apiVersion": "v1", "kind": "Pod"}), "TokenReview");
        assert!(matches!(e, Err(ApiError::BadRequest(_))));
        let e = decode::<TokenReview>(json!({"spec": {"token": 5}}), "TokenReview");
        assert!(
            matches!(e, Err(ApiError::BadRequest(m)) if m.contains("cannot be handled as a TokenReview"))
        );
        let ok = decode::<TokenReview>(
            json!({"apiVersion": API_VERSION, "kind": "TokenReview", "spec": {"token": "t"}}),
            "TokenReview",
        );
        assert!(ok.is_ok());
    }
}
