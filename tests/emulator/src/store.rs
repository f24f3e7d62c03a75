//! In-memory object storage with a global resourceVersion counter, bounded per-resource event
//! history for watches, and the write pipeline every mutation goes through (status subresource
//! rules, defaulting, pruning, validation, generation, finalizers, managedFields).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::builtin;
use crate::error::{ApiError, ApiResult, Cause};
use crate::managed::{self, ApplyInput, ManagerEntry, Shape};
use crate::registry::{Builtin, Registry, ResKey, ResourceDef, defs_from_crd};
use crate::schema;

/// Events kept per resource for watches that resume from a resourceVersion.
pub const HISTORY_LIMIT: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub rv: u64,
    pub key: ResKey,
    pub kind: EventKind,
    pub obj: Arc<Value>,
    /// The previous state, for MODIFIED (lets selector watches turn it into ADDED/DELETED).
    pub old: Option<Arc<Value>>,
}

#[derive(Debug, Default)]
pub struct History {
    pub events: VecDeque<Arc<WatchEvent>>,
    /// Events at or below this resourceVersion are no longer available.
    pub compacted: u64,
}

#[derive(Debug, Clone)]
pub struct Stored {
    pub obj: Value,
    pub managers: Vec<ManagerEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Main,
    Status,
}

impl Sub {
    pub fn name(self) -> &'static str {
        match self {
            Sub::Main => "",
            Sub::Status => "status",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// Per-request write options.
#[derive(Debug, Clone)]
pub struct WriteOpts {
    pub manager: String,
    pub sub: Sub,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
}

impl WriteOpts {
    pub fn internal(manager: &str, sub: Sub) -> Self {
        WriteOpts {
            manager: manager.into(),
            sub,
            dry_run: false,
            field_validation: FieldValidation::Ignore,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

pub struct DeleteOpts {
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

pub enum DeleteOutcome {
    /// Still present (finalizers pending); the updated object.
    Pending(Value),
    /// Removed; the final state.
    Gone(Value),
}

pub struct State {
    pub rv: u64,
    pub registry: Registry,
    pub objects: HashMap<ResKey, BTreeMap<(String, String), Stored>>,
    pub history: HashMap<ResKey, History>,
    pub tx: broadcast::Sender<Arc<WatchEvent>>,
}

pub fn now_rfc3339() -> String {
    let ts = jiff::Timestamp::now();
    jiff::Timestamp::from_second(ts.as_second())
        .unwrap_or(ts)
        .to_string()
}

fn meta_str<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get("metadata")
        .and_then(|m| m.get(k))
        .and_then(Value::as_str)
}

fn meta_mut(v: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !v.is_object() {
        *v = json!({});
    }
    let Value::Object(root) = v else {
        unreachable_map()
    };
    let m = root.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    match m {
        Value::Object(m) => m,
        _ => unreachable_map(),
    }
}

/// Both call sites above make the value an object first; this keeps them panic-free in form.
fn unreachable_map() -> ! {
    unreachable!("value was just made an object")
}

fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes
        .iter()
        .take(n)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Everything a write compares to decide it is a no-op.
fn comparable(v: &Value) -> Value {
    let mut c = v.clone();
    if let Some(Value::Object(m)) = c.get_mut("metadata") {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    c
}

/// Whether a change bumps `metadata.generation`.
fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    match def.builtin {
        Builtin::Deployment => {
            // Annotations bump it too: the Deployment controller copies them to ReplicaSets.
            old.get("spec") != new.get("spec")
                || old.pointer("/metadata/annotations") != new.pointer("/metadata/annotations")
        }
        Builtin::Custom => {
            let strip = |v: &Value| {
                let mut c = v.clone();
                if let Value::Object(m) = &mut c {
                    m.remove("metadata");
                    if def.status_sub {
                        m.remove("status");
                    }
                }
                c
            };
            strip(old) != strip(new)
        }
        _ => old.get("spec") != new.get("spec"),
    }
}

impl State {
    pub fn new(tx: broadcast::Sender<Arc<WatchEvent>>) -> Self {
        State {
            rv: 1,
            registry: Registry::with_builtins(),
            objects: HashMap::new(),
            history: HashMap::new(),
            tx,
        }
    }

    pub fn get(&self, key: &ResKey, ns: &str, name: &str) -> Option<&Stored> {
        self.objects
            .get(key)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
    }

    pub fn list(&self, key: &ResKey, ns: Option<&str>) -> Vec<&Value> {
        self.objects
            .get(key)
            .map(|m| {
                m.iter()
                    .filter(|((n, _), _)| ns.is_none_or(|x| x == n))
                    .map(|(_, s)| &s.obj)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn emit(&mut self, key: &ResKey, kind: EventKind, obj: Value, old: Option<Value>) {
        let ev = Arc::new(WatchEvent {
            rv: self.rv,
            key: key.clone(),
            kind,
            obj: Arc::new(obj),
            old: old.map(Arc::new),
        });
        let h = self.history.entry(key.clone()).or_default();
        h.events.push_back(ev.clone());
        while h.events.len() > HISTORY_LIMIT {
            if let Some(e) = h.events.pop_front() {
                h.compacted = e.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(ev);
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn namespace_check(
        &self,
        def: &ResourceDef,
        ns: &str,
        creating: bool,
        name: &str,
    ) -> ApiResult<()> {
        if !def.namespaced {
            return Ok(());
        }
        let nskey = ResKey {
            group: String::new(),
            plural: "namespaces".into(),
        };
        match self.get(&nskey, "", ns) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(s) if creating && s.obj.pointer("/metadata/deletionTimestamp").is_some() => {
                Err(ApiError::Forbidden(format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    crate::error::qualified(&def.plural, &def.group),
                    name
                )))
            }
            Some(_) => Ok(()),
        }
    }

    /// Defaulting, pruning and validation shared by create and update.
    fn admit(
        &self,
        def: &ResourceDef,
        obj: &mut Value,
        old: Option<&Value>,
        opts: &WriteOpts,
    ) -> ApiResult<()> {
        builtin::apply_defaults(def, obj);
        if let Some(s) = &def.schema {
            let mut dropped = Vec::new();
            schema::prune(s, obj, true, "", &mut dropped);
            if opts.field_validation == FieldValidation::Strict && !dropped.is_empty() {
                let list: Vec<String> = dropped
                    .iter()
                    .map(|d| format!("unknown field \"{d}\""))
                    .collect();
                return Err(ApiError::BadRequest(format!(
                    "strict decoding error: {}",
                    list.join(", ")
                )));
            }
            schema::default(s, obj);
        }
        builtin::normalize_status(def, obj);
        let name = meta_str(obj, "name").unwrap_or_default().to_string();
        let mut causes: Vec<Cause> = Vec::new();
        builtin::validate_meta(def, obj, &mut causes);
        builtin::validate_builtin(def, obj, old, &mut causes);
        if let Some(s) = &def.schema {
            schema::validate(s, obj, old, "", &mut causes);
        }
        if let Some(o) = old
            && o.pointer("/metadata/deletionTimestamp").is_some()
        {
            let old_f: Vec<&Value> = o
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            let added: Vec<String> = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|f| !old_f.contains(f))
                        .map(|f| f.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            if !added.is_empty() {
                let quoted: Vec<String> = added.iter().map(|a| format!("\"{a}\"")).collect();
                causes.push(Cause {
                    reason: "FieldValueForbidden",
                    message: format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        quoted.join(", ")
                    ),
                    field: "metadata.finalizers".into(),
                });
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(&def.group, &def.kind, &name, causes))
        }
    }

    fn check_kind(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
        let av = obj.get("apiVersion").and_then(Value::as_str);
        let kind = obj.get("kind").and_then(Value::as_str);
        if let Some(k) = kind
            && k != def.kind
        {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                av.unwrap_or_default(),
                def.api_version()
            )));
        }
        if let Some(av) = av
            && av != def.api_version()
            && crate::registry::split_api_version(av).0 != def.group
        {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                def.api_version()
            )));
        }
        Ok(())
    }

    pub fn create(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        self.create_with(def, ns, &mut obj, opts, None)
    }

    /// `applied`: managedFields computed by server-side apply (create-on-apply).
    pub fn create_with(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        obj: &mut Value,
        opts: &WriteOpts,
        applied: Option<Vec<ManagerEntry>>,
    ) -> ApiResult<Value> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(
                "the body of the request was not a JSON object".into(),
            ));
        }
        Self::check_kind(def, obj)?;
        let ns = if def.namespaced { ns } else { "" };
        if def.namespaced {
            if let Some(body_ns) = meta_str(obj, "namespace")
                && !body_ns.is_empty()
                && body_ns != ns
            {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            self.namespace_check(def, ns, true, meta_str(obj, "name").unwrap_or_default())?;
        }
        if meta_str(obj, "resourceVersion").is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::BadRequest(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        let mut name = meta_str(obj, "name").unwrap_or_default().to_string();
        if name.is_empty() {
            match meta_str(obj, "generateName").filter(|g| !g.is_empty()) {
                Some(g) => name = format!("{g}{}", random_suffix(5)),
                None => {
                    return Err(ApiError::invalid(
                        &def.group,
                        &def.kind,
                        "",
                        vec![Cause {
                            reason: "FieldValueRequired",
                            message: "Required value: name or generateName is required".into(),
                            field: "metadata.name".into(),
                        }],
                    ));
                }
            }
        }
        {
            let m = meta_mut(obj);
            m.insert("name".into(), json!(name));
            if def.namespaced {
                m.insert("namespace".into(), json!(ns));
            } else {
                m.remove("namespace");
            }
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "managedFields",
                "selfLink",
            ] {
                m.remove(k);
            }
        }
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if def.status_sub
            && def.builtin != Builtin::Namespace
            && let Value::Object(m) = obj
        {
            m.remove("status");
        }
        self.admit(def, obj, None, opts)?;
        let key = def.key();
        if self.get(&key, ns, &name).is_some() {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        let now = now_rfc3339();
        {
            let m = meta_mut(obj);
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now));
            if def.tracks_generation {
                m.insert("generation".into(), json!(1));
            }
        }
        let managers = match applied {
            Some(m) => m,
            None => {
                let mut m = Vec::new();
                let shape = Shape {
                    schema: def.schema.as_deref(),
                };
                managed::record_update(
                    None,
                    obj,
                    &mut m,
                    shape,
                    &opts.manager,
                    opts.sub.name(),
                    &def.api_version(),
                    &now,
                );
                m
            }
        };
        if opts.dry_run {
            return Ok(obj.clone());
        }
        let rv = self.next_rv();
        {
            let m = meta_mut(obj);
            m.insert("resourceVersion".into(), json!(rv.to_string()));
            m.insert("managedFields".into(), managed::render(&managers));
        }
        self.objects.entry(key.clone()).or_default().insert(
            (ns.to_string(), name.clone()),
            Stored {
                obj: obj.clone(),
                managers,
            },
        );
        self.emit(&key, EventKind::Added, obj.clone(), None);
        if def.builtin == Builtin::Crd {
            self.on_crd_written(obj);
        }
        Ok(obj.clone())
    }

    /// Registers (or re-registers) a CRD's types and marks it Established.
    fn on_crd_written(&mut self, crd: &Value) {
        let Ok(defs) = defs_from_crd(crd) else { return };
        if let (Some(g), Some(p)) = (
            crd.pointer("/spec/group").and_then(Value::as_str),
            crd.pointer("/spec/names/plural").and_then(Value::as_str),
        ) {
            self.registry.remove(g, p);
        }
        for d in defs {
            self.registry.add(d);
        }
        let name = meta_str(crd, "name").unwrap_or_default().to_string();
        let established = crd
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.get("type") == Some(&json!("Established")))
            });
        if established && crd.pointer("/status/acceptedNames") == crd.pointer("/spec/names") {
            return;
        }
        let now = now_rfc3339();
        let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
        let status = json!({
            "acceptedNames": names,
            "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array)
                .map(|vs| vs.iter().filter(|v| v.get("storage") == Some(&json!(true))).filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>())
                .unwrap_or_default(),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
        let crd_key = ResKey {
            group: "apiextensions.k8s.io".into(),
            plural: "customresourcedefinitions".into(),
        };
        let Some(def) = self.registry.any_version(&crd_key) else {
            return;
        };
        let _ = self.mutate(
            &def,
            "",
            &name,
            &WriteOpts::internal("kube-apiserver", Sub::Status),
            |o| {
                o["status"] = status.clone();
                Ok(())
            },
        );
    }

    /// Read-modify-write of an existing object under the lock (internal controllers).
    pub fn mutate(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &WriteOpts,
        f: impl FnOnce(&mut Value) -> ApiResult<()>,
    ) -> ApiResult<Value> {
        let cur = self
            .get(&def.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let mut obj = cur.obj.clone();
        f(&mut obj)?;
        self.update(def, ns, name, obj, opts, None)
    }

    /// PUT semantics (also the tail of every patch). `applied`: managers computed by SSA.
    pub fn update(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut obj: Value,
        opts: &WriteOpts,
        applied: Option<Vec<ManagerEntry>>,
    ) -> ApiResult<Value> {
        let ns = if def.namespaced { ns } else { "" };
        let key = def.key();
        if !obj.is_object() {
            return Err(ApiError::BadRequest(
                "the body of the request was not a JSON object".into(),
            ));
        }
        Self::check_kind(def, &obj)?;
        if def.namespaced {
            self.namespace_check(def, ns, false, name)?;
        }
        let body_name = meta_str(&obj, "name").unwrap_or_default();
        if body_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if def.namespaced
            && let Some(body_ns) = meta_str(&obj, "namespace")
            && !body_ns.is_empty()
            && body_ns != ns
        {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        let Some(old) = self.get(&key, ns, name).cloned() else {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        match meta_str(&obj, "resourceVersion").filter(|s| !s.is_empty()) {
            Some(rv) if Some(rv) != meta_str(&old.obj, "resourceVersion") => {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.plural,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            None if def.is_custom() => {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        message: "Invalid value: 0: must be specified for an update".into(),
                        field: "metadata.resourceVersion".into(),
                    }],
                ));
            }
            _ => {}
        }
        // Subresource rules: the main endpoint ignores status, /status ignores everything else.
        if opts.sub == Sub::Status {
            let status = obj.get("status").cloned();
            obj = old.obj.clone();
            if let Value::Object(m) = &mut obj {
                match status {
                    Some(s) => {
                        m.insert("status".into(), s);
                    }
                    None => {
                        m.remove("status");
                    }
                }
            }
        } else if def.status_sub
            && let Value::Object(m) = &mut obj
        {
            match old.obj.get("status") {
                Some(s) => {
                    m.insert("status".into(), s.clone());
                }
                None => {
                    m.remove("status");
                }
            }
        }
        {
            let old_meta = old.obj.get("metadata").cloned().unwrap_or(json!({}));
            let m = meta_mut(&mut obj);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
                "namespace",
                "selfLink",
            ] {
                match old_meta.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            m.remove("managedFields");
        }
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        self.admit(def, &mut obj, Some(&old.obj), opts)?;
        if def.tracks_generation && spec_changed(def, &old.obj, &obj) {
            let g = old
                .obj
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut obj).insert("generation".into(), json!(g + 1));
        }
        let now = now_rfc3339();
        let managers = match applied {
            Some(m) => m,
            None => {
                let mut m = old.managers.clone();
                let shape = Shape {
                    schema: def.schema.as_deref(),
                };
                managed::record_update(
                    Some(&old.obj),
                    &obj,
                    &mut m,
                    shape,
                    &opts.manager,
                    opts.sub.name(),
                    &def.api_version(),
                    &now,
                );
                m
            }
        };
        let unchanged = comparable(&obj) == comparable(&old.obj) && managers == old.managers;
        if unchanged {
            return Ok(old.obj);
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let rv = self.next_rv();
        {
            let m = meta_mut(&mut obj);
            m.insert("resourceVersion".into(), json!(rv.to_string()));
            m.insert("managedFields".into(), managed::render(&managers));
        }
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some()
            && obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(|f| f.is_empty())
            && !spec_finalizers_pending(def, &obj);
        if deleting {
            self.remove_now(def, ns, name, obj.clone());
            return Ok(obj);
        }
        self.objects.entry(key.clone()).or_default().insert(
            (ns.to_string(), name.to_string()),
            Stored {
                obj: obj.clone(),
                managers,
            },
        );
        self.emit(&key, EventKind::Modified, obj.clone(), Some(old.obj));
        if def.builtin == Builtin::Crd && opts.sub == Sub::Main {
            self.on_crd_written(&obj);
        }
        Ok(obj)
    }

    /// Server-side apply. Returns the object and whether it was created.
    pub fn apply(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut applied: Value,
        opts: &WriteOpts,
        force: bool,
    ) -> ApiResult<(Value, bool)> {
        let ns = if def.namespaced { ns } else { "" };
        if !applied.is_object() {
            return Err(ApiError::BadRequest(
                "the body of the request was not a JSON object".into(),
            ));
        }
        if applied
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            || applied
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            return Err(ApiError::BadRequest("invalid object type: /, Kind=".into()));
        }
        Self::check_kind(def, &applied)?;
        match meta_str(&applied, "name") {
            Some(n) if n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        {
            let m = meta_mut(&mut applied);
            m.insert("name".into(), json!(name));
            m.remove("managedFields");
            if def.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
        }
        // Only what the endpoint may change is applied.
        let applied_rv = meta_str(&applied, "resourceVersion").map(str::to_string);
        let shape = Shape {
            schema: def.schema.as_deref(),
        };
        let restrict = |v: &Value| -> Value {
            let mut c = v.clone();
            if let Value::Object(m) = &mut c {
                match opts.sub {
                    Sub::Status => m.retain(|k, _| {
                        matches!(k.as_str(), "status" | "apiVersion" | "kind" | "metadata")
                    }),
                    Sub::Main if def.status_sub => {
                        m.remove("status");
                    }
                    Sub::Main => {}
                }
                if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                    meta.remove("resourceVersion");
                    if opts.sub == Sub::Status {
                        meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace"));
                    }
                }
            }
            c
        };
        let applied_r = restrict(&applied);
        let now = now_rfc3339();
        let input = ApplyInput {
            manager: &opts.manager,
            subresource: opts.sub.name(),
            api_version: &def.api_version(),
            force,
            now: &now,
        };
        let existing = self.get(&def.key(), ns, name).cloned();
        match existing {
            None => {
                if opts.sub == Sub::Status {
                    return Err(ApiError::not_found(&def.group, &def.plural, name));
                }
                if applied_rv.is_some() {
                    return Err(ApiError::conflict(
                        &def.group,
                        &def.plural,
                        name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
                let mut entries = Vec::new();
                let mut obj = managed::apply(&json!({}), &applied_r, &mut entries, shape, &input)
                    .map_err(|c| conflict_error(def, name, c))?;
                let created = self.create_with(def, ns, &mut obj, opts, Some(entries))?;
                Ok((created, true))
            }
            Some(old) => {
                if let Some(rv) = &applied_rv
                    && Some(rv.as_str()) != meta_str(&old.obj, "resourceVersion")
                {
                    return Err(ApiError::conflict(
                        &def.group,
                        &def.plural,
                        name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
                let mut entries = old.managers.clone();
                let mut merged = managed::apply(&old.obj, &applied_r, &mut entries, shape, &input)
                    .map_err(|c| conflict_error(def, name, c))?;
                meta_mut(&mut merged).insert(
                    "resourceVersion".into(),
                    json!(meta_str(&old.obj, "resourceVersion").unwrap_or_default()),
                );
                let out = self.update(def, ns, name, merged, opts, Some(entries))?;
                Ok((out, false))
            }
        }
    }

    /// Deletes an object (or marks it for deletion while finalizers remain).
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> ApiResult<DeleteOutcome> {
        let ns = if def.namespaced { ns } else { "" };
        let key = def.key();
        let Some(cur) = self.get(&key, ns, name).cloned() else {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        if let Some(uid) = &opts.precondition_uid
            && Some(uid.as_str()) != meta_str(&cur.obj, "uid")
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&cur.obj, "uid").unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_rv
            && Some(rv.as_str()) != meta_str(&cur.obj, "resourceVersion")
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&cur.obj, "resourceVersion").unwrap_or_default()
                ),
            ));
        }
        if opts.dry_run {
            return Ok(DeleteOutcome::Gone(cur.obj));
        }
        let uid = meta_str(&cur.obj, "uid").unwrap_or_default().to_string();
        if opts.propagation == Some(Propagation::Orphan) {
            self.orphan_dependents(&uid);
        }
        let mut finalizers: Vec<Value> = cur
            .obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if opts.propagation == Some(Propagation::Foreground)
            && !finalizers.contains(&json!("foregroundDeletion"))
        {
            finalizers.push(json!("foregroundDeletion"));
        }
        let ns_pending = spec_finalizers_pending(def, &cur.obj);
        if !finalizers.is_empty() || ns_pending {
            let unchanged_fins = cur
                .obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
                == finalizers.len();
            if cur.obj.pointer("/metadata/deletionTimestamp").is_some() && unchanged_fins {
                return Ok(DeleteOutcome::Pending(cur.obj));
            }
            let mut obj = cur.obj.clone();
            mark_deleting(&mut obj);
            if def.builtin == Builtin::Namespace {
                obj["status"] = json!({"phase": "Terminating"});
            }
            if !finalizers.is_empty() {
                meta_mut(&mut obj).insert("finalizers".into(), Value::Array(finalizers));
            }
            if let Some(g) = obj.pointer("/metadata/generation").and_then(Value::as_i64) {
                meta_mut(&mut obj).insert("generation".into(), json!(g + 1));
            }
            let rv = self.next_rv();
            meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
            self.objects.entry(key.clone()).or_default().insert(
                (ns.to_string(), name.to_string()),
                Stored {
                    obj: obj.clone(),
                    managers: cur.managers,
                },
            );
            self.emit(&key, EventKind::Modified, obj.clone(), Some(cur.obj));
            return Ok(DeleteOutcome::Pending(obj));
        }
        let rv = self.next_rv();
        let mut obj = cur.obj.clone();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.remove_now(def, ns, name, obj.clone());
        Ok(DeleteOutcome::Gone(obj))
    }

    /// Drops an object from storage and emits DELETED with `last` (whose rv is already new).
    fn remove_now(&mut self, def: &ResourceDef, ns: &str, name: &str, last: Value) {
        let key = def.key();
        if let Some(m) = self.objects.get_mut(&key) {
            m.remove(&(ns.to_string(), name.to_string()));
        }
        self.emit(&key, EventKind::Deleted, last.clone(), None);
        if def.builtin == Builtin::Crd {
            self.on_crd_deleted(&last);
        }
    }

    fn on_crd_deleted(&mut self, crd: &Value) {
        let (Some(g), Some(p)) = (
            crd.pointer("/spec/group").and_then(Value::as_str),
            crd.pointer("/spec/names/plural").and_then(Value::as_str),
        ) else {
            return;
        };
        let key = ResKey {
            group: g.into(),
            plural: p.into(),
        };
        let objs: Vec<Value> = self
            .objects
            .remove(&key)
            .map(|m| m.into_values().map(|s| s.obj).collect())
            .unwrap_or_default();
        for mut o in objs {
            let rv = self.next_rv();
            meta_mut(&mut o).insert("resourceVersion".into(), json!(rv.to_string()));
            self.emit(&key, EventKind::Deleted, o, None);
        }
        self.registry.remove(g, p);
    }

    /// Removes ownerReferences to `uid` from every object (propagationPolicy=Orphan).
    fn orphan_dependents(&mut self, uid: &str) {
        for (def, ns, name) in self.dependents_of(uid) {
            let _ = self.mutate(
                &def,
                &ns,
                &name,
                &WriteOpts::internal("kube-controller-manager", Sub::Main),
                |o| {
                    if let Some(Value::Array(refs)) = o.pointer_mut("/metadata/ownerReferences") {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                    }
                    Ok(())
                },
            );
        }
    }

    /// Objects with an ownerReference to `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(ResourceDef, String, String)> {
        let mut out = Vec::new();
        for (key, objs) in &self.objects {
            let Some(def) = self.registry.any_version(key) else {
                continue;
            };
            for ((ns, name), s) in objs {
                let refs = s
                    .obj
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array);
                if refs.is_some_and(|r| {
                    r.iter()
                        .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
                }) {
                    out.push(((*def).clone(), ns.clone(), name.clone()));
                }
            }
        }
        out
    }
}

/// Namespaces are held by `spec.finalizers` until the namespace controller empties them.
fn spec_finalizers_pending(def: &ResourceDef, o: &Value) -> bool {
    def.builtin == Builtin::Namespace
        && o.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
}

fn mark_deleting(o: &mut Value) {
    if o.pointer("/metadata/deletionTimestamp").is_none() {
        let m = meta_mut(o);
        m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
    }
}

fn conflict_error(def: &ResourceDef, name: &str, conflicts: managed::Conflicts) -> ApiError {
    let n = conflicts.len();
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(m, av, p)| Cause {
            reason: "FieldManagerConflict",
            message: format!("conflict with \"{m}\" using {av}"),
            field: managed::display_path(p),
        })
        .collect();
    let list: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.message, c.field))
        .collect();
    ApiError::ApplyConflict {
        message: format!(
            "Apply failed with {n} conflict{}: {}",
            if n == 1 { "" } else { "s" },
            list.join(", ")
        ),
        details: crate::error::Details {
            name: name.into(),
            group: def.group.clone(),
            kind: def.plural.clone(),
        },
        causes,
    }
}
