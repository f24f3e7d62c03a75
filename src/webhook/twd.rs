//! Admission of a TemporalWorkerDeployment: what the CRD's CEL rules cannot check.
//!
//! - the controller's own validation ([`crate::worker_deployment::validate::desired`]: reserved env
//!   vars, reserved volume and mount, step order, durations, …), word for word what the
//!   controller writes to status when the webhook is off;
//! - a gate input (`inputFrom`) whose Secret or ConfigMap key does not exist;
//! - a pod template Kubernetes would refuse as a Deployment: the Deployment the controller
//!   would create ([`crate::render::versioned_deployment`]) is created with `dryRun=All`, and
//!   the API server's field errors (whose `spec.template…` paths are the TWD's too) are
//!   returned.
//!
//! Every message starts with its field path.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};

use super::State;
use super::review::Verdict;
use crate::api::twd::{GateSpec, TemporalWorkerDeployment};
use crate::api::{TemporalConnection, TemporalConnectionSpec};
use crate::worker_deployment::validate::{self, ControllerSettings};

/// Where a gate's input comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputRef {
    /// e.g. `spec.rollout.steps[1].gate.inputFrom.secretKeyRef`
    pub path: String,
    pub source: Source,
    pub name: String,
    pub key: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Secret,
    ConfigMap,
}

impl Source {
    fn kind(self) -> &'static str {
        match self {
            Source::Secret => "Secret",
            Source::ConfigMap => "ConfigMap",
        }
    }
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Key,
    NoKey,
    NoObject,
    /// The key holds something the controller cannot pass as the workflow's JSON input.
    NotJson,
}

/// What a gate input value is: the controller passes it to the gate workflow as JSON, so a
/// value that does not parse would only fail once the rollout reaches the gate.
pub fn found_value(value: &[u8]) -> Found {
    if serde_json::from_slice::<serde::de::IgnoredAny>(value).is_ok() {
        Found::Key
    } else {
        Found::NotJson
    }
}

/// The controller's validation of `twd`, as it would report it in status (`None`: valid).
pub fn problems(twd: &TemporalWorkerDeployment) -> Option<String> {
    validate::desired(twd, &ControllerSettings::default())
        .err()
        .map(|e| e.message)
}

/// Every gate input read from a Secret or ConfigMap, with its field path.
pub fn input_refs(twd: &TemporalWorkerDeployment) -> Vec<InputRef> {
    let rollout = &twd.spec.rollout;
    let gates = rollout
        .gate
        .iter()
        .map(|g| ("spec.rollout.gate".to_string(), g))
        .chain(rollout.steps.iter().enumerate().filter_map(|(i, s)| {
            s.gate
                .as_ref()
                .map(|g| (format!("spec.rollout.steps[{i}].gate"), g))
        }));
    let mut out = Vec::new();
    for (path, gate) in gates {
        out.extend(gate_refs(&path, gate));
    }
    out
}

fn gate_refs(path: &str, gate: &GateSpec) -> Vec<InputRef> {
    let Some(from) = &gate.input_from else {
        return Vec::new();
    };
    [
        ("secretKeyRef", Source::Secret, from.secret_key_ref.as_ref()),
        (
            "configMapKeyRef",
            Source::ConfigMap,
            from.config_map_key_ref.as_ref(),
        ),
    ]
    .into_iter()
    .filter_map(|(field, source, r)| {
        r.map(|r| InputRef {
            path: format!("{path}.inputFrom.{field}"),
            source,
            name: r.name.clone(),
            key: r.key.clone(),
        })
    })
    .collect()
}

/// The refusal for a missing gate input (`None` when the key is there): the field path, then
/// the words the controller uses when it reads the input for the gate.
pub fn missing_input(r: &InputRef, found: Found) -> Option<String> {
    let kind = r.source.kind();
    match found {
        Found::Key => None,
        Found::NoKey => Some(format!(
            "{}.key: key {:?} not found in {kind} {:?} for gate input",
            r.path, r.key, r.name
        )),
        Found::NoObject => Some(format!(
            "{}.name: {kind} {:?} for gate input not found (create it before the \
             TemporalWorkerDeployment that reads it)",
            r.path, r.name
        )),
        // The value itself is never echoed: it may be secret.
        Found::NotJson => Some(format!(
            "{}.key: the value of key {:?} in {kind} {:?} is not valid JSON (it is the gate \
             workflow's input)",
            r.path, r.key, r.name
        )),
    }
}

/// The refusal for a Deployment the API server would not accept.
pub fn refused_template(api_message: &str) -> String {
    format!(
        "spec.template: Kubernetes would refuse the versioned Deployment made from this pod \
         template (server-side dry run): {api_message}"
    )
}

/// Whether a request needs checking: a write that changes neither the spec nor the
/// annotations (finalizers, labels, deletion) is let through, so the controller's own
/// metadata patches are never refused.
pub fn needs_review(
    new: &TemporalWorkerDeployment,
    old: Option<&TemporalWorkerDeployment>,
) -> bool {
    if new.metadata.deletion_timestamp.is_some() {
        return false;
    }
    old.is_none_or(|o| o.spec != new.spec || o.metadata.annotations != new.metadata.annotations)
}

/// True on create, and on an update that changes the spec.
pub fn spec_changed(
    new: &TemporalWorkerDeployment,
    old: Option<&TemporalWorkerDeployment>,
) -> bool {
    old.is_none_or(|o| o.spec != new.spec)
}

/// The whole admission decision for one TWD request.
pub async fn admit(
    state: &State,
    namespace: &str,
    new: &TemporalWorkerDeployment,
    old: Option<&TemporalWorkerDeployment>,
) -> Verdict {
    if !needs_review(new, old) {
        return Verdict::Allow;
    }
    if let Some(message) = problems(new) {
        return Verdict::Invalid(message.split("; ").map(str::to_string).collect());
    }
    if !spec_changed(new, old) {
        // An annotation change (promote, skip a step) is never held back by a lookup: a gate
        // Secret deleted since must not block steering the rollout.
        return Verdict::Allow;
    }
    let mut refusals = Vec::new();
    let mut warnings = Vec::new();
    for r in input_refs(new) {
        match lookup(&state.client, namespace, &r).await {
            Ok(found) => refusals.extend(missing_input(&r, found)),
            Err(e) => warnings.push(format!("{}: not checked: {e}", r.path)),
        }
    }
    match dry_run(&state.client, namespace, new).await {
        Ok(None) => {}
        Ok(Some(message)) => refusals.push(refused_template(&message)),
        Err(e) => warnings.push(format!("spec.template: not checked with a dry run: {e}")),
    }
    if refusals.is_empty() {
        Verdict::AllowWithWarnings(warnings)
    } else {
        Verdict::Invalid(refusals)
    }
}

async fn lookup(client: &kube::Client, ns: &str, r: &InputRef) -> Result<Found, kube::Error> {
    let value: Option<Option<Vec<u8>>> = match r.source {
        Source::Secret => Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(&r.name)
            .await?
            .map(|s| s.data.and_then(|mut d| d.remove(&r.key)).map(|v| v.0)),
        Source::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt(&r.name)
            .await?
            .map(|c| {
                c.data
                    .and_then(|mut d| d.remove(&r.key))
                    .map(String::into_bytes)
                    .or_else(|| {
                        c.binary_data
                            .and_then(|mut d| d.remove(&r.key))
                            .map(|v| v.0)
                    })
            }),
    };
    Ok(match value {
        None => Found::NoObject,
        Some(None) => Found::NoKey,
        Some(Some(v)) => found_value(&v),
    })
}

/// The Deployment the controller would create, for a dry run: named by the API server
/// (`generateName`, so an existing version never makes it a conflict) and without the owner
/// reference (the TWD may not exist yet).
pub fn dry_run_deployment(
    twd: &TemporalWorkerDeployment,
    namespace: &str,
    connection: &TemporalConnectionSpec,
) -> Result<Deployment, String> {
    let mut twd = twd.clone();
    twd.metadata.namespace = Some(namespace.to_string());
    // A CREATE's object has its uid before validating admission; default it anyway.
    if twd.metadata.uid.is_none() {
        twd.metadata.uid = Some("00000000-0000-0000-0000-000000000000".into());
    }
    let custom = twd.spec.worker_options.build_id_pin();
    let build_id =
        crate::build_id::compute(&twd.spec.template, custom).map_err(|e| e.to_string())?;
    let input = crate::render::VersionedDeploymentInput {
        connection_ref: None,
        twd: &twd,
        connection,
        build_id: &build_id,
        replicas: Some(1),
    };
    let mut d = crate::render::versioned_deployment(&input).map_err(|e| e.to_string())?;
    let name = d.metadata.name.take().unwrap_or_default();
    d.metadata.generate_name = Some(format!("{}-", name.chars().take(40).collect::<String>()));
    d.metadata.owner_references = None;
    Ok(d)
}

/// `Ok(Some(message))` when the API server refuses the Deployment (422), `Ok(None)` when it
/// accepts it, `Err` when it could not be asked.
async fn dry_run(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<Option<String>, String> {
    let connections = TemporalConnection::api(client.clone(), ns, twd.kind_set());
    let name = &twd.spec.worker_options.connection_ref.name;
    // A Connection created after the TWD is normal: render with a stand-in (the env vars it
    // adds are the controller's, not the user's, so they cannot make the template invalid).
    let connection = match connections.get_opt(name).await {
        Ok(Some(c)) => c.spec,
        Ok(None) | Err(_) => TemporalConnectionSpec {
            host_port: "temporal:7233".into(),
            tls: None,
            mutual_tls_secret_ref: None,
            api_key_secret_ref: None,
            worker_credentials: None,
        },
    };
    let deployment = dry_run_deployment(twd, ns, &connection)?;
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let params = PostParams {
        dry_run: true,
        field_manager: Some("temporal-worker-controller-webhook".into()),
    };
    match api.create(&params, &deployment).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 422 => Ok(Some(s.message.clone())),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::twd::{GateInputSource, KeyRef, RolloutStep, RolloutStrategy};
    use k8s_openapi::api::core::v1::EnvVar;

    fn gate(from: GateInputSource) -> GateSpec {
        GateSpec {
            workflow_type: "check".into(),
            input: None,
            input_from: Some(from),
        }
    }

    #[test]
    fn reserved_env_vars_are_refused_with_the_controllers_message() {
        let mut twd = TemporalWorkerDeployment::test();
        let pod = twd.spec.template.spec.as_mut().expect("pod spec");
        pod.containers[0].env = Some(vec![EnvVar {
            name: "TEMPORAL_ADDRESS".into(),
            value: Some("elsewhere:7233".into()),
            ..Default::default()
        }]);
        let message = problems(&twd).expect("refused");
        assert!(
            message.starts_with("spec.template.spec.containers[0].env[0]: "),
            "{message}"
        );
        assert!(message.contains("TEMPORAL_ADDRESS"), "{message}");
        let controller = validate::desired(&twd, &ControllerSettings::default())
            .expect_err("the controller refuses it too");
        assert_eq!(message, controller.message);
        assert_eq!(problems(&TemporalWorkerDeployment::test()), None);
    }

    #[test]
    fn gate_inputs_are_found_with_their_paths() {
        let mut twd = TemporalWorkerDeployment::test();
        twd.spec.rollout.strategy = RolloutStrategy::Progressive;
        twd.spec.rollout.gate = Some(gate(GateInputSource {
            config_map_key_ref: Some(KeyRef {
                name: "cm".into(),
                key: "input.json".into(),
            }),
            secret_key_ref: None,
        }));
        twd.spec.rollout.steps = vec![
            RolloutStep {
                ramp_percentage: 10,
                pause_duration: "1m".into(),
                gate: None,
            },
            RolloutStep {
                ramp_percentage: 50,
                pause_duration: "1m".into(),
                gate: Some(gate(GateInputSource {
                    config_map_key_ref: None,
                    secret_key_ref: Some(KeyRef {
                        name: "s".into(),
                        key: "k".into(),
                    }),
                })),
            },
        ];
        let refs = input_refs(&twd);
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].path, "spec.rollout.gate.inputFrom.configMapKeyRef");
        assert_eq!(refs[0].source, Source::ConfigMap);
        assert_eq!(
            refs[1].path,
            "spec.rollout.steps[1].gate.inputFrom.secretKeyRef"
        );
        assert_eq!(missing_input(&refs[1], Found::Key), None);
        let m = missing_input(&refs[1], Found::NoKey).expect("refused");
        assert!(
            m.starts_with("spec.rollout.steps[1].gate.inputFrom.secretKeyRef.key: key \"k\" not found in Secret \"s\""),
            "{m}"
        );
        let m = missing_input(&refs[0], Found::NoObject).expect("refused");
        assert!(
            m.starts_with(
                "spec.rollout.gate.inputFrom.configMapKeyRef.name: ConfigMap \"cm\" for gate input not found"
            ),
            "{m}"
        );
        assert_eq!(found_value(br#"{"a": [1, "x"]}"#), Found::Key);
        assert_eq!(found_value(b"42"), Found::Key);
        assert_eq!(found_value(b"{not json"), Found::NotJson);
        assert_eq!(found_value(b""), Found::NotJson);
        let m = missing_input(&refs[1], Found::NotJson).expect("refused");
        assert_eq!(
            m,
            "spec.rollout.steps[1].gate.inputFrom.secretKeyRef.key: the value of key \"k\" in \
             Secret \"s\" is not valid JSON (it is the gate workflow's input)"
        );
        // One problem, never split by the "; " that joins several.
        for found in [Found::NoKey, Found::NoObject, Found::NotJson] {
            let m = missing_input(&refs[0], found).expect("refused");
            assert!(!m.contains("; "), "{m}");
        }
    }

    #[test]
    fn only_spec_or_annotation_changes_are_checked() {
        let old = TemporalWorkerDeployment::test();
        let mut finalized = old.clone();
        finalized.metadata.finalizers = Some(vec!["temporal.io/x".into()]);
        assert!(!needs_review(&finalized, Some(&old)));
        let mut annotated = old.clone();
        annotated.metadata.annotations =
            Some([("temporal.io/skip-step".to_string(), "x".to_string())].into());
        assert!(needs_review(&annotated, Some(&old)));
        let mut changed = old.clone();
        changed.spec.replicas = Some(7);
        assert!(needs_review(&changed, Some(&old)));
        assert!(needs_review(&old, None));
        // Only a spec change (or a create) is worth the lookups and the dry run.
        assert!(!spec_changed(&annotated, Some(&old)));
        assert!(spec_changed(&changed, Some(&old)));
        assert!(spec_changed(&old, None));
    }

    #[test]
    fn the_dry_run_deployment_is_the_rendered_one_without_name_or_owner() {
        let twd = TemporalWorkerDeployment::test();
        let conn = TemporalConnectionSpec {
            host_port: "t:7233".into(),
            tls: None,
            mutual_tls_secret_ref: None,
            api_key_secret_ref: None,
            worker_credentials: None,
        };
        let d = dry_run_deployment(&twd, "ns", &conn).expect("rendered");
        assert_eq!(d.metadata.name, None);
        assert!(
            d.metadata
                .generate_name
                .as_deref()
                .is_some_and(|g| g.ends_with('-'))
        );
        assert_eq!(d.metadata.owner_references, None);
        assert_eq!(d.metadata.namespace.as_deref(), Some("ns"));
        let pod = d.spec.template.spec.expect("pod");
        let env: Vec<String> = pod.containers[0]
            .env
            .iter()
            .flatten()
            .map(|e| e.name.clone())
            .collect();
        assert!(env.contains(&"TEMPORAL_ADDRESS".to_string()), "{env:?}");
    }
}
