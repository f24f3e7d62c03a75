//! The resource types the emulator serves: built-in kinds plus CRDs registered at start or
//! through the `customresourcedefinitions` API.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// Storage identity of a resource: one store per group + plural, whatever the version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResKey {
    pub group: String,
    pub plural: String,
}

/// Kinds whose server-side behaviour is special-cased.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Namespace,
    Deployment,
    Crd,
    Event,
    Other,
    /// A custom resource described by a CRD.
    Custom,
}

#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub json_path: String,
    pub description: String,
    pub priority: i64,
    pub format: String,
}

#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_sub: bool,
    pub scale_sub: bool,
    pub builtin: Builtin,
    /// `openAPIV3Schema` of a CRD version.
    pub schema: Option<Arc<Value>>,
    pub printer_columns: Vec<PrinterColumn>,
    /// Extra field selectors a built-in kind supports beyond metadata.name/namespace.
    pub field_selectors: Vec<&'static str>,
    /// Whether `metadata.generation` is maintained (kinds with a spec).
    pub tracks_generation: bool,
}

impl ResourceDef {
    pub fn key(&self) -> ResKey {
        ResKey {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn is_custom(&self) -> bool {
        self.builtin == Builtin::Custom
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    status_sub: bool,
    scale_sub: bool,
    b: Builtin,
) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        status_sub,
        scale_sub,
        builtin: b,
        schema: None,
        printer_columns: Vec::new(),
        field_selectors: Vec::new(),
        tracks_generation: false,
    }
}

pub fn builtins() -> Vec<ResourceDef> {
    let mut v = vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            true,
            false,
            Builtin::Namespace,
        ),
        builtin(
            "",
            "v1",
            "Secret",
            "secrets",
            true,
            &[],
            false,
            false,
            Builtin::Other,
        ),
        builtin(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            false,
            false,
            Builtin::Other,
        ),
        builtin(
            "",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            false,
            Builtin::Event,
        ),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            false,
            false,
            Builtin::Other,
        ),
        builtin(
            "",
            "v1",
            "Pod",
            "pods",
            true,
            &["po"],
            true,
            false,
            Builtin::Other,
        ),
        builtin(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            false,
            Builtin::Event,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &[],
            false,
            false,
            Builtin::Other,
        ),
        builtin(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            true,
            true,
            Builtin::Deployment,
        ),
        builtin(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &["hpa"],
            true,
            false,
            Builtin::Other,
        ),
        builtin(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
            &["pdb"],
            true,
            false,
            Builtin::Other,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            true,
            false,
            Builtin::Crd,
        ),
    ];
    for d in &mut v {
        match (d.group.as_str(), d.plural.as_str()) {
            ("", "events") => {
                d.field_selectors = vec![
                    "involvedObject.kind",
                    "involvedObject.namespace",
                    "involvedObject.name",
                    "involvedObject.uid",
                    "involvedObject.apiVersion",
                    "involvedObject.resourceVersion",
                    "involvedObject.fieldPath",
                    "reason",
                    "reportingComponent",
                    "source",
                    "type",
                ]
            }
            ("events.k8s.io", "events") => {
                d.field_selectors = vec![
                    "regarding.kind",
                    "regarding.namespace",
                    "regarding.name",
                    "regarding.uid",
                    "regarding.apiVersion",
                    "reason",
                    "reportingController",
                    "type",
                ]
            }
            ("", "secrets") => d.field_selectors = vec!["type"],
            ("", "pods") => d.field_selectors = vec!["spec.nodeName", "status.phase"],
            ("", "namespaces") => d.field_selectors = vec!["status.phase"],
            _ => {}
        }
        if d.builtin == Builtin::Deployment {
            d.categories = vec!["all".into()];
        }
        d.tracks_generation = matches!(
            d.plural.as_str(),
            "deployments"
                | "horizontalpodautoscalers"
                | "poddisruptionbudgets"
                | "customresourcedefinitions"
        );
    }
    v
}

#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("CRD is missing {0}")]
    Missing(&'static str),
    #[error("reading CRD file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("parsing CRD file {path}: {source}")]
    Yaml {
        path: String,
        source: serde_yaml::Error,
    },
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// One `ResourceDef` per served version of a CRD object.
pub fn defs_from_crd(crd: &Value) -> Result<Vec<ResourceDef>, CrdError> {
    let group = str_at(crd, "/spec/group").ok_or(CrdError::Missing("spec.group"))?;
    let kind = str_at(crd, "/spec/names/kind").ok_or(CrdError::Missing("spec.names.kind"))?;
    let plural = str_at(crd, "/spec/names/plural").ok_or(CrdError::Missing("spec.names.plural"))?;
    let singular = str_at(crd, "/spec/names/singular")
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let namespaced = str_at(crd, "/spec/scope") != Some("Cluster");
    let strings = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strings("/spec/names/shortNames");
    let categories = strings("/spec/names/categories");
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .ok_or(CrdError::Missing("spec.versions"))?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let Some(version) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        let printer_columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        type_: c
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .into(),
                        json_path: c
                            .get("jsonPath")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        description: c
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        format: c
                            .get("format")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceDef {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: singular.clone(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            status_sub: v.pointer("/subresources/status").is_some(),
            scale_sub: false,
            builtin: Builtin::Custom,
            schema: v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new),
            printer_columns,
            field_selectors: Vec::new(),
            tracks_generation: true,
        });
    }
    Ok(out)
}

/// Reads every `*.yaml`/`*.yml` CRD in a directory (documents of other kinds are skipped).
pub fn load_crd_dir(dir: &std::path::Path) -> Result<Vec<Value>, CrdError> {
    let io = |e| CrdError::Io {
        path: dir.display().to_string(),
        source: e,
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).map_err(|e| CrdError::Io {
            path: p.display().to_string(),
            source: e,
        })?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v: Value =
                serde::Deserialize::deserialize(doc).map_err(|e| CrdError::Yaml {
                    path: p.display().to_string(),
                    source: e,
                })?;
            crate::schema::normalize_numbers(&mut v);
            if v.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
                out.push(v);
            }
        }
    }
    Ok(out)
}

/// All served resource types, looked up by group/version/plural.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// (group, version, plural) → def
    defs: BTreeMap<(String, String, String), Arc<ResourceDef>>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut r = Registry::default();
        for d in builtins() {
            r.add(d);
        }
        r
    }

    pub fn add(&mut self, d: ResourceDef) {
        self.defs.insert(
            (d.group.clone(), d.version.clone(), d.plural.clone()),
            Arc::new(d),
        );
    }

    /// Removes every version of a group/plural (a CRD was deleted).
    pub fn remove(&mut self, group: &str, plural: &str) {
        self.defs
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Any served version of a resource (for internal writers that know only group + plural).
    pub fn any_version(&self, key: &ResKey) -> Option<Arc<ResourceDef>> {
        self.defs
            .values()
            .find(|d| d.group == key.group && d.plural == key.plural)
            .cloned()
    }

    /// Finds the def for an object's apiVersion + kind (used for ownerReference lookups).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = split_api_version(api_version);
        self.defs
            .values()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.defs.values()
    }

    /// Groups with their versions, core group excluded, in registration-independent order.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in self.defs.values().filter(|d| !d.group.is_empty()) {
            let vs = out.entry(d.group.clone()).or_default();
            if !vs.contains(&d.version) {
                vs.push(d.version.clone());
            }
        }
        for vs in out.values_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
fn version_priority(v: &str) -> (u8, u32, u32) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = if let Some(t) = tail.strip_prefix("beta") {
        (1, t.parse().unwrap_or(0))
    } else if let Some(t) = tail.strip_prefix("alpha") {
        (0, t.parse().unwrap_or(0))
    } else if tail.is_empty() {
        (2, 0)
    } else {
        (0, 0)
    };
    (stage, major, minor)
}
