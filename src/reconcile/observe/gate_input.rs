//! Observe: the input of a gate workflow (inline, or a ConfigMap or Secret key).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use crate::api::TemporalWorkerDeployment;

/// Resolves the gate workflow input (inline, ConfigMap or Secret key).
pub async fn gate_input(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<Option<serde_json::Value>, String> {
    match &twd.spec.rollout.gate {
        Some(gate) => resolve_gate_input(client, ns, gate).await,
        None => Ok(None),
    }
}

/// Resolves one gate's input (the rollout gate's or a step gate's).
pub async fn resolve_gate_input(
    client: &kube::Client,
    ns: &str,
    gate: &crate::api::twd::GateSpec,
) -> Result<Option<serde_json::Value>, String> {
    if let Some(input) = &gate.input {
        return Ok(Some(input.clone()));
    }
    let Some(from) = &gate.input_from else {
        return Ok(None);
    };
    let raw: Vec<u8> = if let Some(r) = &from.config_map_key_ref {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm = api
            .get_opt(&r.name)
            .await
            .map_err(|e| format!("reading ConfigMap {:?} for gate input: {e}", r.name))?
            .ok_or_else(|| format!("ConfigMap {:?} for gate input not found", r.name))?;
        if let Some(v) = cm.data.as_ref().and_then(|d| d.get(&r.key)) {
            v.clone().into_bytes()
        } else if let Some(v) = cm.binary_data.as_ref().and_then(|d| d.get(&r.key)) {
            v.0.clone()
        } else {
            return Err(format!(
                "key {:?} not found in ConfigMap {:?} for gate input",
                r.key, r.name
            ));
        }
    } else if let Some(r) = &from.secret_key_ref {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let secret = api
            .get_opt(&r.name)
            .await
            .map_err(|e| format!("reading Secret {:?} for gate input: {e}", r.name))?
            .ok_or_else(|| format!("Secret {:?} for gate input not found", r.name))?;
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(&r.key))
            .map(|v| v.0.clone())
            .ok_or_else(|| {
                format!(
                    "key {:?} not found in Secret {:?} for gate input",
                    r.key, r.name
                )
            })?
    } else {
        return Ok(None);
    };
    // Never echo the value: it may be secret. Only say it is not JSON.
    serde_json::from_slice(&raw)
        .map(Some)
        .map_err(|_| "gate input is not valid JSON".to_string())
}
