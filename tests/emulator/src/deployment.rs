//! A stand-in for the Deployment controller: observes spec changes and reports replica counts
//! and conditions through `/status`.
//!
//! It acts only when `status.observedGeneration` lags `metadata.generation` (or after
//! `set_deployment_ready`), so a client that writes `/status` itself (a kubelet stand-in) is
//! never overwritten between spec changes.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::store::{EventKind, Sub, WriteOpts, now_rfc3339};
use crate::{DeploymentMode, Shared};

const MANAGER: &str = "kube-controller-manager";

pub fn spawn(shared: Arc<Shared>, mut kicks: mpsc::UnboundedReceiver<(String, String)>) {
    let mut rx = shared.lock().tx.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    tokio::spawn(async move {
        loop {
            let (ns, name, forced) = tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) if ev.key.group == "apps" && ev.key.plural == "deployments" && ev.kind != EventKind::Deleted => {
                        let ns = ev.obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
                        let name = ev.obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
                        (ns, name, false)
                    }
                    Ok(_) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        reconcile_all(&shared);
                        continue;
                    }
                    Err(_) => return,
                },
                k = kicks.recv() => match k {
                    Some((ns, name)) => (ns, name, true),
                    None => return,
                },
                _ = shutdown.changed() => return,
            };
            reconcile(&shared, &ns, &name, forced);
        }
    });
}

fn reconcile_all(shared: &Shared) {
    let keys: Vec<(String, String)> = {
        let st = shared.lock();
        let key = crate::registry::ResKey {
            group: "apps".into(),
            plural: "deployments".into(),
        };
        st.list(&key, None)
            .iter()
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
            .collect()
    };
    for (ns, name) in keys {
        reconcile(shared, &ns, &name, false);
    }
}

/// Sets a condition, moving lastTransitionTime only when the status flips.
fn set_condition(
    status: &mut Value,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    if !status.get("conditions").is_some_and(Value::is_array) {
        status["conditions"] = json!([]);
    }
    let Some(Value::Array(conds)) = status.get_mut("conditions") else {
        return;
    };
    let cond = json!({
        "type": type_, "status": value, "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    });
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
    {
        Some(c) => {
            let same = c.get("status").and_then(Value::as_str) == Some(value);
            let ltt = c.get("lastTransitionTime").cloned();
            let unchanged = same && c.get("reason").and_then(Value::as_str) == Some(reason);
            let old_update = c.get("lastUpdateTime").cloned();
            *c = cond;
            if same && let Some(t) = ltt {
                c["lastTransitionTime"] = t;
            }
            if unchanged && let Some(t) = old_update {
                c["lastUpdateTime"] = t;
            }
        }
        None => conds.push(cond),
    }
}

fn reconcile(shared: &Shared, ns: &str, name: &str, forced: bool) {
    let ready_override = shared.ready_for(ns, name);
    let mode = shared.mode;
    let mut st = shared.lock();
    let Some(def) = st.registry.get("apps", "v1", "deployments") else {
        return;
    };
    let Some(cur) = st.get(&def.key(), ns, name) else {
        return;
    };
    let obj = &cur.obj;
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let observed = obj
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    if observed == Some(generation) && !forced {
        return;
    }
    let want = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let rs_name = format!(
        "{name}-{}",
        short_hash(obj.pointer("/spec/template").unwrap_or(&Value::Null))
    );
    let now = now_rfc3339();
    let _ = st.mutate(
        &def,
        ns,
        name,
        &WriteOpts::internal(MANAGER, Sub::Status),
        |o| {
            let mut status = o
                .get("status")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or(json!({}));
            status["observedGeneration"] = json!(generation);
            status["replicas"] = json!(want);
            status["updatedReplicas"] = json!(want);
            let ready = match (mode, ready_override) {
                (DeploymentMode::AutoReady, _) => Some(want),
                (DeploymentMode::Manual, Some(r)) => Some(i64::from(r)),
                (DeploymentMode::Manual, None) => None,
            };
            match ready {
                Some(r) => {
                    status["readyReplicas"] = json!(r);
                    status["availableReplicas"] = json!(r);
                    status["unavailableReplicas"] = json!((want - r).max(0));
                    let available = r >= want;
                    if available {
                        set_condition(
                            &mut status,
                            "Available",
                            "True",
                            "MinimumReplicasAvailable",
                            "Deployment has minimum availability.",
                            &now,
                        );
                        set_condition(
                            &mut status,
                            "Progressing",
                            "True",
                            "NewReplicaSetAvailable",
                            &format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
                            &now,
                        );
                    } else {
                        set_condition(
                            &mut status,
                            "Available",
                            "False",
                            "MinimumReplicasUnavailable",
                            "Deployment does not have minimum availability.",
                            &now,
                        );
                        set_condition(
                            &mut status,
                            "Progressing",
                            "True",
                            "ReplicaSetUpdated",
                            &format!("ReplicaSet \"{rs_name}\" is progressing."),
                            &now,
                        );
                    }
                }
                None => {
                    // Readiness belongs to whoever writes /status; only seed a missing condition.
                    let has_available = status
                        .get("conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|c| {
                            c.iter()
                                .any(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
                        });
                    if !has_available {
                        let r = status
                            .get("readyReplicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(0);
                        if r >= want {
                            set_condition(
                                &mut status,
                                "Available",
                                "True",
                                "MinimumReplicasAvailable",
                                "Deployment has minimum availability.",
                                &now,
                            );
                        } else {
                            set_condition(
                                &mut status,
                                "Available",
                                "False",
                                "MinimumReplicasUnavailable",
                                "Deployment does not have minimum availability.",
                                &now,
                            );
                        }
                    }
                }
            }
            o["status"] = status;
            Ok(())
        },
    );
}

/// A stable short hash standing in for the pod-template-hash (FNV-1a over canonical JSON).
fn short_hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in v.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 6)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}
