//! A skeletal OpenAPI v3 index: for every group/version, the PATCH operations with their
//! query parameters. kubectl reads it to learn that the server validates fields itself
//! (`fieldValidation`), instead of demanding schemas for client-side validation. No schemas
//! are published.

use serde_json::{Value, json};

use crate::registry::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

pub fn root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for d in reg.all() {
        let p = gv_path(&d.group, &d.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
        );
    }
    json!({"paths": paths})
}

pub fn group_version(reg: &Registry, gv: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
        .iter()
        .map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    for d in reg.all().filter(|d| gv_path(&d.group, &d.version) == gv) {
        let base = if d.namespaced {
            format!("/{gv}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("/{gv}/{}/{{name}}", d.plural)
        };
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        paths.insert(
            base,
            json!({
                "parameters": params,
                "patch": {
                    "operationId": format!("patch{}", d.kind),
                    "parameters": params,
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                }
            }),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": paths, "components": {"schemas": {}}}),
    )
}
