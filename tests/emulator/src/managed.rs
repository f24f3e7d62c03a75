//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Ownership is tracked per leaf field. Apply merges the applied configuration into the live
//! object, removes fields the same manager applied before but no longer applies (unless another
//! manager also owns them), and reports conflicts with other managers unless `force` is set.
//! Non-apply writes take ownership of the fields they change, as the real server does.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::schema;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    Field(String),
    /// An element of an associative list, identified by its key fields (canonical JSON).
    Key(String),
    /// An element of a set list (canonical JSON of the value).
    Val(String),
}

pub type Path = Vec<Pe>;

#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    Atomic,
    Map(Vec<&'static str>, Vec<String>),
    Set,
}

/// Merge keys of built-in associative lists, by field name (the `patchMergeKey`s of the Go types).
pub fn builtin_list_kind(field: &str) -> ListKind {
    let keys: &[&'static str] = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => &["name"],
        "volumeMounts" | "volumeDevices" => &["mountPath"],
        "ports" => &["containerPort", "port", "protocol"],
        "conditions" => &["type"],
        "ownerReferences" => &["uid"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "hostAliases" => &["ip"],
        "finalizers" => return ListKind::Set,
        _ => return ListKind::Atomic,
    };
    ListKind::Map(keys.to_vec(), Vec::new())
}

/// Describes list semantics of one object (built-in tables, or a CRD's schema).
#[derive(Clone, Copy)]
pub struct Shape<'a> {
    pub schema: Option<&'a Value>,
}

impl Shape<'_> {
    pub fn list_kind(&self, path: &[Pe]) -> ListKind {
        let segs: Vec<&str> = path
            .iter()
            .map(|p| match p {
                Pe::Field(f) => f.as_str(),
                _ => "[]",
            })
            .collect();
        let last_field = segs
            .iter()
            .rev()
            .find(|s| **s != "[]")
            .copied()
            .unwrap_or_default();
        match self.schema {
            Some(s) if segs.first() != Some(&"metadata") => {
                let Some(node) = schema::schema_at(s, &segs) else {
                    return ListKind::Atomic;
                };
                match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("map") => ListKind::Map(
                        Vec::new(),
                        node.get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .filter_map(|k| k.as_str().map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    ),
                    Some("set") => ListKind::Set,
                    _ => ListKind::Atomic,
                }
            }
            _ => builtin_list_kind(last_field),
        }
    }
}

impl ListKind {
    /// The key of a list item, or None when the item has none of the key fields.
    pub fn key_of(&self, item: &Value) -> Option<String> {
        let ListKind::Map(st, dy) = self else {
            return None;
        };
        let mut m = Map::new();
        for k in st.iter().copied().chain(dy.iter().map(String::as_str)) {
            if let Some(v) = item.get(k) {
                m.insert(k.to_string(), v.clone());
            }
        }
        if m.is_empty() {
            None
        } else {
            Some(Value::Object(m).to_string())
        }
    }
}

/// Fields that the server owns itself and never attributes to a manager.
fn ignored(path: &[Pe]) -> bool {
    match path {
        [Pe::Field(a)] if a == "apiVersion" || a == "kind" => true,
        [Pe::Field(m), Pe::Field(f), ..] if m == "metadata" => matches!(
            f.as_str(),
            "managedFields"
                | "resourceVersion"
                | "generation"
                | "uid"
                | "creationTimestamp"
                | "name"
                | "namespace"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "selfLink"
                | "generateName"
        ),
        _ => false,
    }
}

/// Every owned leaf path of a value.
pub fn leaves(v: &Value, shape: Shape, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    if ignored(prefix) {
        return;
    }
    match v {
        Value::Object(m) if !m.is_empty() || prefix.is_empty() => {
            for (k, c) in m {
                prefix.push(Pe::Field(k.clone()));
                leaves(c, shape, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => match shape.list_kind(prefix) {
            kind @ ListKind::Map(..) => {
                for it in items {
                    match kind.key_of(it) {
                        Some(key) => {
                            prefix.push(Pe::Key(key));
                            out.insert(prefix.clone());
                            if let Value::Object(m) = it {
                                for (k, c) in m {
                                    prefix.push(Pe::Field(k.clone()));
                                    leaves(c, shape, prefix, out);
                                    prefix.pop();
                                }
                            }
                            prefix.pop();
                        }
                        None => {
                            out.insert(prefix.clone());
                        }
                    }
                }
            }
            ListKind::Set => {
                for it in items {
                    prefix.push(Pe::Val(it.to_string()));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(prefix.clone());
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
}

pub fn leaf_set(v: &Value, shape: Shape) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    leaves(v, shape, &mut Vec::new(), &mut out);
    out
}

fn find_item<'a>(
    items: &'a [Value],
    shape: Shape,
    list_path: &[Pe],
    pe: &Pe,
) -> Option<(usize, &'a Value)> {
    match pe {
        Pe::Key(k) => {
            let kind = shape.list_kind(list_path);
            items
                .iter()
                .enumerate()
                .find(|(_, it)| kind.key_of(it).as_deref() == Some(k.as_str()))
        }
        Pe::Val(j) => items
            .iter()
            .enumerate()
            .find(|(_, it)| it.to_string() == *j),
        Pe::Field(_) => None,
    }
}

pub fn get_at<'a>(v: &'a Value, shape: Shape, path: &[Pe]) -> Option<&'a Value> {
    let mut cur = v;
    for (i, pe) in path.iter().enumerate() {
        cur = match (pe, cur) {
            (Pe::Field(f), Value::Object(m)) => m.get(f)?,
            (_, Value::Array(items)) => find_item(items, shape, &path[..i], pe)?.1,
            _ => return None,
        };
    }
    Some(cur)
}

fn remove_at(v: &mut Value, shape: Shape, path: &[Pe]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for (i, pe) in parent_path.iter().enumerate() {
        let next = match (pe, cur) {
            (Pe::Field(f), Value::Object(m)) => m.get_mut(f),
            (_, Value::Array(items)) => {
                let idx = find_item(items, shape, &parent_path[..i], pe).map(|(i, _)| i);
                match idx {
                    Some(idx) => items.get_mut(idx),
                    None => None,
                }
            }
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (last, cur) {
        (Pe::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (_, Value::Array(items)) => {
            if let Some((idx, _)) = find_item(items, shape, parent_path, last) {
                items.remove(idx);
            }
        }
        _ => {}
    }
}

/// Merges an applied configuration into the live object.
pub fn merge_applied(live: &mut Value, applied: &Value, shape: Shape, prefix: &mut Path) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            for (k, av) in a {
                prefix.push(Pe::Field(k.clone()));
                if av.is_null() {
                    l.remove(k);
                } else if let Some(lv) = l.get_mut(k) {
                    merge_applied(lv, av, shape, prefix);
                } else {
                    l.insert(k.clone(), av.clone());
                }
                prefix.pop();
            }
        }
        (Value::Array(l), Value::Array(a)) => match shape.list_kind(prefix) {
            kind @ ListKind::Map(..) => {
                for ai in a {
                    let key = kind.key_of(ai);
                    let pos = key
                        .as_ref()
                        .and_then(|k| l.iter().position(|li| kind.key_of(li).as_ref() == Some(k)));
                    match (pos, key) {
                        (Some(p), Some(k)) => {
                            prefix.push(Pe::Key(k));
                            merge_applied(&mut l[p], ai, shape, prefix);
                            prefix.pop();
                        }
                        _ => l.push(ai.clone()),
                    }
                }
            }
            ListKind::Set => {
                for ai in a {
                    if !l.contains(ai) {
                        l.push(ai.clone());
                    }
                }
            }
            ListKind::Atomic => *l = a.clone(),
        },
        (l, a) => *l = a.clone(),
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerEntry {
    pub manager: String,
    pub apply: bool,
    pub subresource: String,
    pub api_version: String,
    pub time: String,
    pub fields: BTreeSet<Path>,
}

pub fn display_path(p: &[Pe]) -> String {
    let mut s = String::new();
    for pe in p {
        match pe {
            Pe::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Pe::Key(k) => {
                let inner = serde_json::from_str::<Value>(k)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                s.push_str(&format!("[{inner}]"));
            }
            Pe::Val(v) => s.push_str(&format!("[={v}]")),
        }
    }
    s
}

fn insert_trie(node: &mut Map<String, Value>, p: &[Pe]) {
    let Some((first, rest)) = p.split_first() else {
        return;
    };
    let k = match first {
        Pe::Field(f) => format!("f:{f}"),
        Pe::Key(k) => format!("k:{k}"),
        Pe::Val(v) => format!("v:{v}"),
    };
    let entry = node.entry(k).or_insert_with(|| json!({}));
    if let Value::Object(child) = entry {
        if rest.is_empty() {
            if matches!(first, Pe::Key(_)) {
                child.insert(".".into(), json!({}));
            }
        } else {
            insert_trie(child, rest);
        }
    }
}

/// Renders entries as `metadata.managedFields` (FieldsV1 tries).
pub fn render(entries: &[ManagerEntry]) -> Value {
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut trie = Map::new();
            for p in &e.fields {
                insert_trie(&mut trie, p);
            }
            let mut v = json!({
                "manager": e.manager,
                "operation": if e.apply { "Apply" } else { "Update" },
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": Value::Object(trie),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    Value::Array(list)
}

/// Conflicting fields of an apply: (other manager, api version, field path).
pub type Conflicts = Vec<(String, String, Path)>;

pub struct ApplyInput<'a> {
    pub manager: &'a str,
    pub subresource: &'a str,
    pub api_version: &'a str,
    pub force: bool,
    pub now: &'a str,
}

/// Applies `applied` onto `live` (already restricted to what the endpoint may change) and
/// updates `entries`. Returns the merged object or the list of conflicts.
pub fn apply(
    live: &Value,
    applied: &Value,
    entries: &mut Vec<ManagerEntry>,
    shape: Shape,
    input: &ApplyInput,
) -> Result<Value, Conflicts> {
    let new_set = leaf_set(applied, shape);
    let is_me = |e: &ManagerEntry| {
        e.manager == input.manager && e.apply && e.subresource == input.subresource
    };
    let old_set = entries
        .iter()
        .find(|e| is_me(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut conflicts = Vec::new();
    for p in &new_set {
        let applied_v = get_at(applied, shape, p);
        let live_v = get_at(live, shape, p);
        if live_v.is_none() || live_v == applied_v {
            continue;
        }
        for e in entries.iter().filter(|e| !is_me(e)) {
            if e.fields.contains(p) {
                conflicts.push((e.manager.clone(), e.api_version.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !input.force {
        return Err(conflicts);
    }
    let mut out = live.clone();
    // Drop what this manager applied before and no longer applies, unless someone else owns it.
    for p in old_set.difference(&new_set) {
        let shared = entries
            .iter()
            .filter(|e| !is_me(e))
            .any(|e| e.fields.iter().any(|f| f.starts_with(p)));
        if !shared {
            remove_at(&mut out, shape, p);
        }
    }
    merge_applied(&mut out, applied, shape, &mut Vec::new());
    // Forced (or same-valued) fields: others lose ownership only when the value changed.
    let changed: BTreeSet<Path> = new_set
        .iter()
        .filter(|p| get_at(live, shape, p) != get_at(applied, shape, p))
        .cloned()
        .collect();
    for e in entries.iter_mut().filter(|e| !is_me(e)) {
        e.fields.retain(|f| !changed.contains(f));
    }
    match entries.iter_mut().find(|e| is_me(e)) {
        Some(e) => {
            if e.fields != new_set {
                e.time = input.now.to_string();
            }
            e.fields = new_set;
            e.api_version = input.api_version.to_string();
        }
        None => entries.push(ManagerEntry {
            manager: input.manager.into(),
            apply: true,
            subresource: input.subresource.into(),
            api_version: input.api_version.into(),
            time: input.now.into(),
            fields: new_set,
        }),
    }
    entries.retain(|e| !e.fields.is_empty());
    Ok(out)
}

/// Records a non-apply write: the writer owns what it changed; others lose those fields and
/// anything that disappeared.
#[allow(clippy::too_many_arguments)]
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    entries: &mut Vec<ManagerEntry>,
    shape: Shape,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
) {
    let new_set = leaf_set(new, shape);
    let old_set = old.map(|o| leaf_set(o, shape)).unwrap_or_default();
    let changed: BTreeSet<Path> = new_set
        .iter()
        .filter(|p| old.and_then(|o| get_at(o, shape, p)) != get_at(new, shape, p))
        .cloned()
        .collect();
    let removed: BTreeSet<Path> = old_set.difference(&new_set).cloned().collect();
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    for e in entries.iter_mut() {
        e.fields
            .retain(|f| !changed.contains(f) && !removed.iter().any(|r| f.starts_with(r)));
    }
    let mine = |e: &ManagerEntry| e.manager == manager && !e.apply && e.subresource == subresource;
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            e.fields.extend(changed);
            e.time = now.into();
            e.api_version = api_version.into();
        }
        None => entries.push(ManagerEntry {
            manager: manager.into(),
            apply: false,
            subresource: subresource.into(),
            api_version: api_version.into(),
            time: now.into(),
            fields: changed,
        }),
    }
    entries.retain(|e| !e.fields.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape { schema: None };

    fn input<'a>(manager: &'a str, force: bool) -> ApplyInput<'a> {
        ApplyInput {
            manager,
            subresource: "",
            api_version: "v1",
            force,
            now: "t",
        }
    }

    #[test]
    fn apply_merges_removes_and_conflicts() {
        let mut entries = Vec::new();
        let live = json!({});
        let a1 = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}});
        let live = apply(&live, &a1, &mut entries, SHAPE, &input("m1", false)).unwrap_or_default();
        assert_eq!(live, a1);
        // Dropping label b removes it; m2 sharing nothing.
        let a2 = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}});
        let live = apply(&live, &a2, &mut entries, SHAPE, &input("m1", false)).unwrap_or_default();
        assert_eq!(live, a2);
        // Another manager changing spec.x conflicts unless forced.
        let a3 = json!({"spec": {"x": 2}});
        let err = apply(&live, &a3, &mut entries, SHAPE, &input("m2", false));
        assert!(matches!(err, Err(ref c) if c.len() == 1 && display_path(&c[0].2) == ".spec.x"));
        let live = apply(&live, &a3, &mut entries, SHAPE, &input("m2", true)).unwrap_or_default();
        assert_eq!(live["spec"]["x"], json!(2));
        // m1 lost spec.x, so omitting it no longer deletes it.
        let a4 = json!({"metadata": {"labels": {"a": "1"}}});
        let live = apply(&live, &a4, &mut entries, SHAPE, &input("m1", false)).unwrap_or_default();
        assert_eq!(live["spec"]["x"], json!(2));
    }

    #[test]
    fn keyed_lists_merge_by_name() {
        let mut live = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        merge_applied(
            &mut live,
            &json!({"spec": {"containers": [{"name": "b", "image": "z"}]}}),
            SHAPE,
            &mut Vec::new(),
        );
        assert_eq!(live["spec"]["containers"][1]["image"], json!("z"));
        assert_eq!(live["spec"]["containers"][0]["image"], json!("x"));
    }

    #[test]
    fn updates_take_ownership() {
        let mut entries = Vec::new();
        let live = apply(
            &json!({}),
            &json!({"spec": {"h": "a"}}),
            &mut entries,
            SHAPE,
            &input("a", false),
        )
        .unwrap_or_default();
        let after = json!({"spec": {"h": "b"}});
        record_update(Some(&live), &after, &mut entries, SHAPE, "b", "", "v1", "t");
        // Now "a" applying a different value conflicts with "b".
        let err = apply(
            &after,
            &json!({"spec": {"h": "c"}}),
            &mut entries,
            SHAPE,
            &input("a", false),
        );
        assert!(matches!(err, Err(ref c) if c[0].0 == "b"));
    }
}
