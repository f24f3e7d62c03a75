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
    let (raw, source) = if let Some(r) = &from.config_map_key_ref {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm = api
            .get_opt(&r.name)
            .await
            .map_err(|e| format!("reading ConfigMap {:?} for gate input: {e}", r.name))?
            .ok_or_else(|| format!("ConfigMap {:?} for gate input not found", r.name))?;
        let source = format!("key {:?} of ConfigMap {:?}", r.key, r.name);
        if let Some(v) = cm.data.as_ref().and_then(|d| d.get(&r.key)) {
            (v.clone().into_bytes(), source)
        } else if let Some(v) = cm.binary_data.as_ref().and_then(|d| d.get(&r.key)) {
            (v.0.clone(), source)
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
        let raw = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&r.key))
            .map(|v| v.0.clone())
            .ok_or_else(|| {
                format!(
                    "key {:?} not found in Secret {:?} for gate input",
                    r.key, r.name
                )
            })?;
        (raw, format!("key {:?} of Secret {:?}", r.key, r.name))
    } else {
        return Ok(None);
    };
    parse_input(&raw, &source).map(Some)
}

/// The gate input read from `source` (e.g. `key "k" of Secret "s"`), which names where to fix
/// it. Never echoes the value: it may be secret. Only says it is not JSON.
fn parse_input(raw: &[u8], source: &str) -> Result<serde_json::Value, String> {
    serde_json::from_slice(raw).map_err(|_| format!("gate input ({source}) is not valid JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_that_is_not_json_names_its_source_and_never_its_value() {
        let source = "key \"input\" of Secret \"gate\"";
        assert_eq!(
            parse_input(b"{\"a\": 1}", source),
            Ok(serde_json::json!({"a": 1}))
        );
        let e = parse_input(b"hunter2 {", source).expect_err("not JSON");
        assert_eq!(
            e,
            "gate input (key \"input\" of Secret \"gate\") is not valid JSON"
        );
        assert!(!e.contains("hunter2"), "{e}");
    }
}
