//! Garbage collection like kube-controller-manager's: dependents whose owners are all gone are
//! deleted (background cascade), foreground deletions wait for their dependents, and
//! terminating namespaces are emptied and then removed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Shared;
use crate::registry::{Builtin, ResourceDef};
use crate::store::{DeleteOpts, EventKind, State, Sub, WriteOpts};

const MANAGER: &str = "kube-controller-manager";
/// Safety net for dangling owners that no delete event announces (e.g. created after the owner died).
const SWEEP_EVERY: Duration = Duration::from_millis(500);

pub fn spawn(shared: Arc<Shared>) {
    let mut rx = shared.lock().tx.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) if ev.kind == EventKind::Deleted || ev.obj.pointer("/metadata/deletionTimestamp").is_some() => {}
                    Ok(_) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                },
                _ = shared.gc_kick.notified() => {}
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            // Several passes settle chains (owner → dependent → its dependents) promptly.
            for _ in 0..8 {
                if !sweep(&mut shared.lock()) {
                    break;
                }
            }
        }
    });
}

fn background() -> DeleteOpts {
    DeleteOpts {
        propagation: Some(crate::store::Propagation::Background),
        precondition_uid: None,
        precondition_rv: None,
        dry_run: false,
    }
}

struct Item {
    def: ResourceDef,
    ns: String,
    name: String,
    obj: Value,
}

fn snapshot(st: &State) -> Vec<Item> {
    let mut out = Vec::new();
    for (key, objs) in &st.objects {
        let Some(def) = st.registry.any_version(key) else {
            continue;
        };
        for ((ns, name), s) in objs {
            out.push(Item {
                def: (*def).clone(),
                ns: ns.clone(),
                name: name.clone(),
                obj: s.obj.clone(),
            });
        }
    }
    out
}

fn uid(v: &Value) -> &str {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
}

/// One pass; returns whether anything changed.
pub fn sweep(st: &mut State) -> bool {
    let items = snapshot(st);
    let uids: HashSet<String> = items.iter().map(|i| uid(&i.obj).to_string()).collect();
    let mut changed = false;
    for it in &items {
        let refs: Vec<Value> = it
            .obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if refs.is_empty() || deleting(&it.obj) {
            continue;
        }
        let live: Vec<&Value> = refs
            .iter()
            .filter(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|u| uids.contains(u))
            })
            .collect();
        if live.is_empty() {
            changed |= st.delete(&it.def, &it.ns, &it.name, &background()).is_ok();
        } else if live.len() < refs.len() {
            let keep: Vec<Value> = live.into_iter().cloned().collect();
            changed |= st
                .mutate(
                    &it.def,
                    &it.ns,
                    &it.name,
                    &WriteOpts::internal(MANAGER, Sub::Main),
                    |o| {
                        o["metadata"]["ownerReferences"] = Value::Array(keep);
                        Ok(())
                    },
                )
                .is_ok();
        }
    }
    for it in items.iter().filter(|i| deleting(&i.obj)) {
        let fins: Vec<Value> = it
            .obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if fins.contains(&json!("foregroundDeletion")) {
            let deps = st.dependents_of(uid(&it.obj));
            if deps.is_empty() {
                changed |= st
                    .mutate(
                        &it.def,
                        &it.ns,
                        &it.name,
                        &WriteOpts::internal(MANAGER, Sub::Main),
                        |o| {
                            if let Some(Value::Array(f)) = o.pointer_mut("/metadata/finalizers") {
                                f.retain(|x| x != "foregroundDeletion");
                            }
                            Ok(())
                        },
                    )
                    .is_ok();
            } else {
                for (d, ns, name) in deps {
                    let already = st
                        .get(&d.key(), &ns, &name)
                        .is_some_and(|s| deleting(&s.obj));
                    if !already {
                        changed |= st.delete(&d, &ns, &name, &background()).is_ok();
                    }
                }
            }
        }
        if it.def.builtin == Builtin::Namespace {
            let contents: Vec<&Item> = items
                .iter()
                .filter(|c| c.def.namespaced && c.ns == it.name)
                .collect();
            if contents.is_empty() {
                changed |= st
                    .mutate(
                        &it.def,
                        "",
                        &it.name,
                        &WriteOpts::internal(MANAGER, Sub::Main),
                        |o| {
                            o["spec"]["finalizers"] = json!([]);
                            Ok(())
                        },
                    )
                    .is_ok();
            } else {
                for c in contents.into_iter().filter(|c| !deleting(&c.obj)) {
                    changed |= st.delete(&c.def, &c.ns, &c.name, &background()).is_ok();
                }
            }
        }
    }
    changed
}
