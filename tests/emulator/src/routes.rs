//! HTTP routing: path parsing, verb dispatch, query parameters, bodies and responses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::Shared;
use crate::error::{ApiError, ApiResult};
use crate::registry::{Builtin, ResourceDef};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{DeleteOpts, DeleteOutcome, FieldValidation, Propagation, Sub, WriteOpts};
use crate::{auth, discovery, patch, table, watch};

type Params = HashMap<String, String>;

fn json_response(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn ok(v: &Value) -> Response {
    json_response(StatusCode::OK, v)
}

struct ResourcePath {
    group: String,
    version: String,
    ns: Option<String>,
    plural: String,
    name: Option<String>,
    sub: Option<String>,
}

pub async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match route(shared, &method, &uri, &headers, body) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn route(
    shared: Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let path = uri.path().trim_end_matches('/');
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let not_found = || ApiError::NotFound {
        message: "the server could not find the requested resource".into(),
        details: Default::default(),
    };
    let get_only = || {
        if method == Method::GET {
            Ok(())
        } else {
            Err(ApiError::MethodNotAllowed(format!(
                "{method} is not allowed"
            )))
        }
    };
    match segs.as_slice() {
        ["version"] => {
            get_only()?;
            return Ok(ok(&discovery::version()));
        }
        ["healthz" | "readyz" | "livez"] => return Ok("ok".into_response()),
        ["openapi", "v3"] => {
            get_only()?;
            return Ok(ok(&crate::openapi::root(&shared.lock().registry)));
        }
        ["openapi", "v3", rest @ ..] => {
            get_only()?;
            let doc = crate::openapi::group_version(&shared.lock().registry, &rest.join("/"))
                .ok_or_else(not_found)?;
            return Ok(ok(&doc));
        }
        ["api"] => {
            get_only()?;
            return Ok(ok(&discovery::api_versions(&shared.addr.to_string())));
        }
        ["apis"] => {
            get_only()?;
            return Ok(ok(&discovery::group_list(&shared.lock().registry)));
        }
        ["api", v] => {
            get_only()?;
            let doc =
                discovery::resource_list(&shared.lock().registry, "", v).ok_or_else(not_found)?;
            return Ok(ok(&doc));
        }
        ["apis", g] => {
            get_only()?;
            let doc = discovery::group(&shared.lock().registry, g).ok_or_else(not_found)?;
            return Ok(ok(&doc));
        }
        ["apis", g, v] => {
            get_only()?;
            let doc =
                discovery::resource_list(&shared.lock().registry, g, v).ok_or_else(not_found)?;
            return Ok(ok(&doc));
        }
        ["apis", auth::GROUP, auth::VERSION, "tokenreviews"] => {
            return create_only(&shared, method, headers, &body, "tokenreviews", |v| {
                auth::token_review(&shared, v)
            });
        }
        [
            "api",
            "v1",
            "namespaces",
            ns,
            "serviceaccounts",
            name,
            "token",
        ] => {
            return create_only(
                &shared,
                method,
                headers,
                &body,
                "serviceaccounts/token",
                |v| auth::token_request(&shared, ns, name, v),
            );
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Err(not_found()),
    };
    let rp = {
        let st = shared.lock();
        let namespaced_plural = |p: &str| {
            st.registry
                .get(group, version, p)
                .is_some_and(|d| d.namespaced)
        };
        match rest {
            ["namespaces", ns, plural, tail @ ..]
                if namespaced_plural(plural) && tail.len() <= 2 =>
            {
                ResourcePath {
                    group: group.into(),
                    version: version.into(),
                    ns: Some(ns.to_string()),
                    plural: plural.to_string(),
                    name: tail.first().map(|s| s.to_string()),
                    sub: tail.get(1).map(|s| s.to_string()),
                }
            }
            [plural, tail @ ..] if tail.len() <= 2 => ResourcePath {
                group: group.into(),
                version: version.into(),
                ns: None,
                plural: plural.to_string(),
                name: tail.first().map(|s| s.to_string()),
                sub: tail.get(1).map(|s| s.to_string()),
            },
            _ => return Err(not_found()),
        }
    };
    let def = shared
        .lock()
        .registry
        .get(&rp.group, &rp.version, &rp.plural)
        .ok_or_else(not_found)?;
    if def.namespaced && rp.ns.is_none() && rp.name.is_some() {
        return Err(not_found());
    }
    match rp.sub.as_deref() {
        None => {}
        Some("status") if def.status_sub => {}
        Some("scale") if def.scale_sub => {}
        Some(_) => return Err(not_found()),
    }
    let params: Params = Query::<Params>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let is_watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = match (method.as_str(), rp.name.is_some()) {
        ("GET", _) if is_watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => {
            return Err(ApiError::MethodNotAllowed(format!(
                "{method} is not allowed on this path"
            )));
        }
    };
    let resource = match &rp.sub {
        Some(s) => format!("{}/{s}", rp.plural),
        None => rp.plural.clone(),
    };
    if let Some(code) = shared.faults.take(verb, &resource) {
        return Err(ApiError::Injected {
            code,
            message: format!("injected fault: {verb} {resource} fails with {code}"),
        });
    }
    let accept = headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let ctx = Ctx {
        shared: shared.clone(),
        def,
        rp,
        params,
        headers: headers.clone(),
        accept,
    };
    match verb {
        "watch" => ctx.watch(),
        "get" => ctx.get(),
        "list" => ctx.list(),
        "create" => ctx.create(&body),
        "update" => ctx.update(&body),
        "patch" => ctx.patch(&body),
        "delete" => ctx.delete(&body),
        _ => ctx.delete_collection(&body),
    }
}

/// A create-only, unstored resource (TokenReview, the `serviceaccounts/token` subresource):
/// POST only, fault injection as `create`, JSON (or the protobuf subset in `protobuf`) bodies,
/// 201 with what `f` makes of the body.
fn create_only(
    shared: &Shared,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
    resource: &str,
    f: impl FnOnce(Value) -> ApiResult<Value>,
) -> ApiResult<Response> {
    if method != Method::POST {
        return Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        ));
    }
    if let Some(code) = shared.faults.take("create", resource) {
        return Err(ApiError::Injected {
            code,
            message: format!("injected fault: create {resource} fails with {code}"),
        });
    }
    let content_type = headers
        .get("content-type")
        .and_then(|c| c.to_str().ok())
        .unwrap_or_default()
        .to_lowercase();
    // client-go's typed clients (kubectl create token) send protobuf.
    let obj = if content_type.starts_with(crate::protobuf::CONTENT_TYPE) {
        crate::protobuf::decode_authentication(body)?
    } else {
        parse_body(body, &content_type)?
    };
    Ok(json_response(StatusCode::CREATED, &f(obj)?))
}

struct Ctx {
    shared: Arc<Shared>,
    def: Arc<ResourceDef>,
    rp: ResourcePath,
    params: Params,
    headers: HeaderMap,
    accept: String,
}

fn parse_body(body: &[u8], content_type: &str) -> ApiResult<Value> {
    let mut v = parse_body_raw(body, content_type)?;
    crate::schema::normalize_numbers(&mut v);
    Ok(v)
}

fn parse_body_raw(body: &[u8], content_type: &str) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::BadRequest("the request body is empty".into()));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) if content_type.contains("yaml") => serde_yaml::from_slice::<Value>(body)
            .map_err(|y| ApiError::BadRequest(format!("error decoding YAML: {y} (as JSON: {e})"))),
        Err(e) => Err(ApiError::BadRequest(format!(
            "couldn't get version/kind; json parse error: {e}"
        ))),
    }
}

impl Ctx {
    fn ns(&self) -> &str {
        self.rp.ns.as_deref().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.rp.name.as_deref().unwrap_or_default()
    }

    fn sub(&self) -> Sub {
        if self.rp.sub.as_deref() == Some("status") {
            Sub::Status
        } else {
            Sub::Main
        }
    }

    fn content_type(&self) -> String {
        self.headers
            .get("content-type")
            .and_then(|c| c.to_str().ok())
            .unwrap_or_default()
            .to_lowercase()
    }

    fn write_opts(&self, apply: bool) -> ApiResult<WriteOpts> {
        let manager = match self.params.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) if m.len() > 128 => {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![crate::error::Cause {
                        reason: "FieldValueTooLong",
                        message: "Too long: may not be more than 128 bytes".into(),
                        field: "fieldManager".into(),
                    }],
                ));
            }
            Some(m) => m.clone(),
            None if apply => {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![crate::error::Cause {
                        reason: "FieldValueRequired",
                        message: "Required value: is required for apply patch".into(),
                        field: "fieldManager".into(),
                    }],
                ));
            }
            None => {
                // The real server names unnamed writers after their user agent.
                let ua = self
                    .headers
                    .get("user-agent")
                    .and_then(|u| u.to_str().ok())
                    .unwrap_or("unknown");
                ua.split('/').next().unwrap_or("unknown").to_string()
            }
        };
        let field_validation = match self.params.get("fieldValidation").map(String::as_str) {
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some("Warn") | None | Some("") => FieldValidation::Warn,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "fieldValidation must be one of Ignore, Warn, Strict, got {other}"
                )));
            }
        };
        Ok(WriteOpts {
            manager,
            sub: self.sub(),
            dry_run: self.params.get("dryRun").is_some_and(|d| d == "All"),
            field_validation,
        })
    }

    fn selectors(&self) -> ApiResult<(LabelSelector, FieldSelector)> {
        let labels = LabelSelector::parse(
            self.params
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )?;
        let fields = FieldSelector::parse(
            self.params
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
            &self.def.field_selectors,
            &crate::error::qualified(&self.def.kind, &self.def.group),
        )?;
        Ok((labels, fields))
    }

    fn out(&self, mut obj: Value) -> Value {
        obj["apiVersion"] = json!(self.def.api_version());
        obj
    }

    fn maybe_table(&self, objs: &[&Value], rv: Option<u64>, single: bool) -> Option<Response> {
        if !table::wants_table(&self.accept) {
            return None;
        }
        let include = self
            .params
            .get("includeObject")
            .map(String::as_str)
            .unwrap_or("Metadata");
        let t = table::build(&self.def, objs, include, if single { None } else { rv });
        Some(ok(&t))
    }

    fn watch(&self) -> ApiResult<Response> {
        if self.rp.sub.is_some() {
            return Err(ApiError::MethodNotAllowed(
                "watch is not supported on subresources".into(),
            ));
        }
        let (labels, fields) = self.selectors()?;
        let timeout = self
            .params
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs);
        let send_initial = self
            .params
            .get("sendInitialEvents")
            .is_some_and(|v| v == "true");
        if send_initial
            && self.params.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan")
        {
            return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", vec![crate::error::Cause {
                reason: "FieldValueForbidden",
                message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
                field: "resourceVersionMatch".into(),
            }]));
        }
        watch::start(
            self.shared.clone(),
            self.def.clone(),
            watch::WatchParams {
                ns: self.rp.ns.clone(),
                resource_version: self.params.get("resourceVersion").cloned(),
                bookmarks: self
                    .params
                    .get("allowWatchBookmarks")
                    .is_some_and(|v| v == "true"),
                timeout,
                send_initial_events: send_initial,
                labels,
                fields,
            },
        )
    }

    fn get(&self) -> ApiResult<Response> {
        let st = self.shared.lock();
        let stored = st
            .get(&self.def.key(), self.ns(), self.name())
            .ok_or_else(|| ApiError::not_found(&self.def.group, &self.def.plural, self.name()))?;
        if self.rp.sub.as_deref() == Some("scale") {
            return Ok(ok(&scale_of(&stored.obj)));
        }
        let obj = self.out(stored.obj.clone());
        drop(st);
        if let Some(t) = self.maybe_table(&[&obj], None, true) {
            return Ok(t);
        }
        Ok(ok(&obj))
    }

    fn list(&self) -> ApiResult<Response> {
        if self.rp.sub.is_some() {
            return Err(ApiError::MethodNotAllowed(
                "list is not supported on subresources".into(),
            ));
        }
        let (labels, fields) = self.selectors()?;
        let st = self.shared.lock();
        let rv = st.rv;
        let items: Vec<Value> = st
            .list(&self.def.key(), self.rp.ns.as_deref())
            .into_iter()
            .filter(|o| labels.matches_obj(o) && fields.matches(o))
            .map(|o| {
                let mut o = o.clone();
                if self.def.is_custom() {
                    o["apiVersion"] = json!(self.def.api_version());
                } else if let Value::Object(m) = &mut o {
                    // Typed lists of built-ins carry no per-item apiVersion/kind.
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                o
            })
            .collect();
        drop(st);
        if table::wants_table(&self.accept) {
            let with_kind: Vec<Value> = items
                .iter()
                .map(|o| {
                    let mut o = o.clone();
                    o["apiVersion"] = json!(self.def.api_version());
                    o["kind"] = json!(self.def.kind);
                    o
                })
                .collect();
            let refs: Vec<&Value> = with_kind.iter().collect();
            if let Some(t) = self.maybe_table(&refs, Some(rv), false) {
                return Ok(t);
            }
        }
        Ok(ok(&json!({
            "kind": format!("{}List", self.def.kind),
            "apiVersion": self.def.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        })))
    }

    fn create(&self, body: &[u8]) -> ApiResult<Response> {
        let obj = parse_body(body, &self.content_type())?;
        let opts = self.write_opts(false)?;
        let created = self
            .shared
            .lock()
            .create(&self.def, self.ns(), obj, &opts)?;
        Ok(json_response(StatusCode::CREATED, &self.out(created)))
    }

    fn update(&self, body: &[u8]) -> ApiResult<Response> {
        let obj = parse_body(body, &self.content_type())?;
        let opts = self.write_opts(false)?;
        if self.rp.sub.as_deref() == Some("scale") {
            return self.write_scale(|_| Ok(obj));
        }
        let out = self
            .shared
            .lock()
            .update(&self.def, self.ns(), self.name(), obj, &opts, None)?;
        Ok(ok(&self.out(out)))
    }

    fn patch(&self, body: &[u8]) -> ApiResult<Response> {
        let ct = self.content_type();
        let kind = ct.split(';').next().unwrap_or_default().trim().to_string();
        if kind == "application/apply-patch+yaml" {
            let applied = parse_body(body, "yaml")?;
            let opts = self.write_opts(true)?;
            let force = self.params.get("force").is_some_and(|f| f == "true");
            if self.rp.sub.as_deref() == Some("scale") {
                return self.write_scale(|mut cur| {
                    patch::merge_patch(&mut cur, &applied);
                    Ok(cur)
                });
            }
            let (out, created) = self.shared.lock().apply(
                &self.def,
                self.ns(),
                self.name(),
                applied,
                &opts,
                force,
            )?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            return Ok(json_response(code, &self.out(out)));
        }
        if self.params.contains_key("force") {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![crate::error::Cause {
                    reason: "FieldValueForbidden",
                    message: "Forbidden: may not be specified for non-apply patch".into(),
                    field: "force".into(),
                }],
            ));
        }
        let apply_patch = |target: &mut Value| -> ApiResult<()> {
            match kind.as_str() {
                "application/merge-patch+json" => {
                    let p = parse_body(body, "json")?;
                    patch::merge_patch(target, &p);
                    Ok(())
                }
                "application/json-patch+json" => patch::json_patch(target, body),
                "application/strategic-merge-patch+json" => {
                    if self.def.is_custom() {
                        return Err(ApiError::UnsupportedMediaType(
                            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
                        ));
                    }
                    let p = parse_body(body, "json")?;
                    patch::strategic_merge(target, &p);
                    Ok(())
                }
                other => Err(ApiError::UnsupportedMediaType(format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other})"
                ))),
            }
        };
        if self.rp.sub.as_deref() == Some("scale") {
            return self.write_scale(|mut cur| {
                apply_patch(&mut cur)?;
                Ok(cur)
            });
        }
        let opts = self.write_opts(false)?;
        let mut st = self.shared.lock();
        let cur = st
            .get(&self.def.key(), self.ns(), self.name())
            .ok_or_else(|| ApiError::not_found(&self.def.group, &self.def.plural, self.name()))?;
        let old_rv = cur.obj.pointer("/metadata/resourceVersion").cloned();
        let mut target = cur.obj.clone();
        apply_patch(&mut target)?;
        // A patch without a resourceVersion is unconditional: pin it to what it was applied to.
        if target
            .pointer("/metadata/resourceVersion")
            .is_none_or(|v| v.as_str().is_none_or(str::is_empty))
            && let (Some(rv), Some(Value::Object(m))) = (old_rv, target.get_mut("metadata"))
        {
            m.insert("resourceVersion".into(), rv);
        }
        let out = st.update(&self.def, self.ns(), self.name(), target, &opts, None)?;
        Ok(ok(&self.out(out)))
    }

    /// `/scale`: read the Deployment as a Scale, let `f` produce the new Scale, write replicas.
    fn write_scale(&self, f: impl FnOnce(Value) -> ApiResult<Value>) -> ApiResult<Response> {
        let opts = WriteOpts {
            sub: Sub::Main,
            ..self.write_opts(false)?
        };
        let mut st = self.shared.lock();
        let cur = st
            .get(&self.def.key(), self.ns(), self.name())
            .ok_or_else(|| ApiError::not_found(&self.def.group, &self.def.plural, self.name()))?
            .obj
            .clone();
        let scale = f(scale_of(&cur))?;
        if let Some(rv) = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            && Some(rv)
                != cur
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
        {
            return Err(ApiError::conflict(
                &self.def.group,
                &self.def.plural,
                self.name(),
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                self.name(),
                vec![crate::error::Cause {
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                    field: "spec.replicas".into(),
                }],
            ));
        }
        let mut next = cur.clone();
        next["spec"]["replicas"] = json!(replicas);
        let out = st.update(&self.def, self.ns(), self.name(), next, &opts, None)?;
        Ok(ok(&scale_of(&out)))
    }

    fn delete_opts(&self, body: &[u8]) -> ApiResult<DeleteOpts> {
        let b: Value = if body.is_empty() {
            json!({})
        } else {
            parse_body(body, "json")?
        };
        let policy = b
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| self.params.get("propagationPolicy").cloned());
        let propagation = match policy.as_deref() {
            None | Some("") => match b.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some(Propagation::Orphan),
                _ => None,
            },
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Orphan") => Some(Propagation::Orphan),
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "invalid propagationPolicy: {other}"
                )));
            }
        };
        let dry = b
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"))
            || self.params.get("dryRun").is_some_and(|d| d == "All");
        Ok(DeleteOpts {
            propagation,
            precondition_uid: b
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            precondition_rv: b
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
            dry_run: dry,
        })
    }

    fn delete(&self, body: &[u8]) -> ApiResult<Response> {
        if self.rp.sub.is_some() {
            return Err(ApiError::MethodNotAllowed(
                "delete is not supported on subresources".into(),
            ));
        }
        let opts = self.delete_opts(body)?;
        let outcome = self
            .shared
            .lock()
            .delete(&self.def, self.ns(), self.name(), &opts)?;
        self.shared.gc_kick.notify_one();
        match outcome {
            DeleteOutcome::Pending(o) => Ok(ok(&self.out(o))),
            DeleteOutcome::Gone(o) if self.def.is_custom() || self.def.builtin == Builtin::Crd => {
                Ok(ok(&self.out(o)))
            }
            DeleteOutcome::Gone(o) => Ok(ok(&json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": self.name(),
                    "group": self.def.group,
                    "kind": self.def.plural,
                    "uid": o.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
                },
            }))),
        }
    }

    fn delete_collection(&self, body: &[u8]) -> ApiResult<Response> {
        let opts = self.delete_opts(body)?;
        let (labels, fields) = self.selectors()?;
        let mut st = self.shared.lock();
        let targets: Vec<(String, String)> = st
            .list(&self.def.key(), self.rp.ns.as_deref())
            .into_iter()
            .filter(|o| labels.matches_obj(o) && fields.matches(o))
            .map(|o| {
                (
                    o.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    o.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        let mut items = Vec::new();
        for (ns, name) in targets {
            match st.delete(&self.def, &ns, &name, &opts)? {
                DeleteOutcome::Pending(o) | DeleteOutcome::Gone(o) => items.push(o),
            }
        }
        let rv = st.rv;
        drop(st);
        self.shared.gc_kick.notify_one();
        Ok(ok(&json!({
            "kind": format!("{}List", self.def.kind),
            "apiVersion": self.def.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        })))
    }
}

/// A Deployment seen through `/scale` (autoscaling/v1 Scale).
fn scale_of(d: &Value) -> Value {
    let sel = d
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let meta = d.get("metadata").cloned().unwrap_or(json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": d.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": d.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": sel,
        },
    })
}
