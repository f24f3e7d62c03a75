//! Legacy (unaggregated) discovery documents: `/version`, `/api`, `/api/v1`, `/apis`,
//! `/apis/<group>`, `/apis/<group>/<version>`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::registry::Registry;

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-kube-emulator",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn api_versions(server: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}]})
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(json!({}));
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

/// Groups of stored resources plus those of the create-only APIs in `auth`.
fn all_groups(reg: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut groups = reg.groups();
    for (g, v) in crate::auth::GROUP_VERSIONS {
        let vs = groups.entry(g.to_string()).or_default();
        if !vs.iter().any(|x| x == v) {
            vs.push(v.to_string());
        }
    }
    groups
}

pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = all_groups(reg)
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let groups = all_groups(reg);
    let vs = groups.get(name)?;
    let mut doc = group_doc(name, vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources = Vec::new();
    for d in reg
        .all()
        .filter(|d| d.group == group && d.version == version)
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": VERBS,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.status_sub {
            resources.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}));
        }
        if d.scale_sub {
            resources.push(json!({"name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        resources.extend(crate::auth::discovery_subresources(
            &d.group, &d.version, &d.plural,
        ));
    }
    resources.extend(crate::auth::discovery_resources(group, version));
    if resources.is_empty() {
        return None;
    }
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}
