//! The bad-input table of `tests/bad_inputs.rs` (issue 28), shared with `tests/cli.rs`, whose
//! `lint` must agree with the API server on every refused row. Each row is one of:
//! - [`Expect::Refused`]: the API server refuses the object (its schema, a CEL rule, the webhook,
//!   or its own size limits), with a message naming the field; nothing is stored. With a
//!   `before`, it is an update: the good object is stored first.
//! - [`Expect::Reported`]: admitted where only the controller can know (or the webhook is off);
//!   the controller reports it in a condition with a clear message and applies nothing.
//! - [`Expect::Http`]: a request to the status API answered with the documented error.

use serde_json::{Value, json};
use test_harness::manifests;

/// Who refuses an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum By {
    /// The CRD's OpenAPI schema (types, patterns, ranges, sizes).
    Schema,
    /// A CEL rule of the CRD (`x-kubernetes-validations`).
    Cel,
    /// The controller's admission webhook.
    Webhook,
    /// The API server's own limits on every object.
    ApiServer,
}

#[derive(Clone, Debug)]
pub(crate) enum Expect {
    Refused {
        by: By,
        fragment: &'static str,
    },
    Reported {
        condition: &'static str,
        status: &'static str,
        reason: &'static str,
        fragment: &'static str,
    },
    Http {
        path: String,
        method: &'static str,
        code: u16,
        fragment: &'static str,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) id: &'static str,
    /// Objects created first in the case's namespace (Secrets, ConfigMaps).
    pub(crate) given: Vec<Value>,
    /// For an update: the good object, stored first.
    pub(crate) before: Option<Value>,
    /// The bad object (unused by [`Expect::Http`]).
    pub(crate) bad: Value,
    pub(crate) expect: Expect,
}

pub(crate) fn refused(id: &'static str, by: By, bad: Value, fragment: &'static str) -> Case {
    Case {
        id,
        given: Vec::new(),
        before: None,
        bad,
        expect: Expect::Refused { by, fragment },
    }
}

pub(crate) fn refused_update(
    id: &'static str,
    by: By,
    good: Value,
    bad: Value,
    fragment: &'static str,
) -> Case {
    Case {
        before: Some(good),
        ..refused(id, by, bad, fragment)
    }
}

pub(crate) fn given(mut case: Case, objects: Vec<Value>) -> Case {
    case.given = objects;
    case
}

/// A TWD the controller must report `Stalled=True/InvalidSpec` for.
pub(crate) fn stalls(id: &'static str, bad: Value, fragment: &'static str) -> Case {
    reported(id, bad, ("Stalled", "True", "InvalidSpec"), fragment)
}

pub(crate) fn reported(
    id: &'static str,
    bad: Value,
    (condition, status, reason): (&'static str, &'static str, &'static str),
    fragment: &'static str,
) -> Case {
    Case {
        id,
        given: Vec::new(),
        before: None,
        bad,
        expect: Expect::Reported {
            condition,
            status,
            reason,
            fragment,
        },
    }
}

pub(crate) fn http(
    id: &'static str,
    method: &'static str,
    path: &str,
    code: u16,
    fragment: &'static str,
) -> Case {
    Case {
        id,
        given: Vec::new(),
        before: None,
        bad: Value::Null,
        expect: Expect::Http {
            path: path.to_string(),
            method,
            code,
            fragment,
        },
    }
}

/// Every row.
pub(crate) fn table() -> Vec<Case> {
    [
        worker_schema_cases(),
        worker_schema_cases_more(),
        worker_cel_cases(),
        worker_cel_cases_more(),
        worker_webhook_cases(),
        worker_webhook_cases_more(),
        worker_field_cases(),
        worker_reported_cases(),
        connection_cases(),
        connection_cases_more(),
        connection_tls_cases(),
        template_cases(),
        template_cases_more(),
        status_api_cases(),
    ]
    .concat()
}

/// The smallest valid TWD named `name` (AllAtOnce, one replica) with `spec` merged in.
pub(crate) fn twd(name: &str, spec: Value) -> Value {
    manifests::twd(name)
        .replicas(1)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .spec(spec)
        .build()
}

/// A Progressive TWD `name` with canary analysis `analysis`.
pub(crate) fn with_analysis(name: &str, analysis: Value) -> Value {
    let mut t = twd(name, progressive(json!([step(json!(10), "1m")])));
    t["spec"]["rollout"]["analysis"] = analysis;
    t
}

/// Whether `message` holds `fragment`: its parts between ` … ` in that order.
pub(crate) fn holds(message: &str, fragment: &str) -> bool {
    let mut rest = message;
    fragment.split(" … ").all(|part| match rest.find(part) {
        Some(at) => {
            rest = &rest[at + part.len()..];
            true
        }
        None => false,
    })
}

pub(crate) fn rollout(rollout: Value) -> Value {
    json!({"rollout": rollout})
}

pub(crate) fn progressive(steps: Value) -> Value {
    rollout(json!({"strategy": "Progressive", "steps": steps}))
}

pub(crate) fn step(pct: Value, pause: &str) -> Value {
    json!({"rampPercentage": pct, "pauseDuration": pause})
}

/// The pod template's only container, `worker`, with `extra` merged in.
pub(crate) fn container(extra: Value) -> Value {
    let mut c = json!({"name": "worker", "image": manifests::worker_image("v1")});
    manifests::merge(&mut c, extra);
    json!({"template": {"spec": {"containers": [c]}}})
}

pub(crate) fn gate_from(source: &str, name: &str, key: &str) -> Value {
    rollout(
        json!({"strategy": "AllAtOnce", "gate": {"workflowType": "check",
        "inputFrom": {(source): {"name": name, "key": key}}}}),
    )
}

pub(crate) fn secret(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data})
}

pub(crate) fn worker_schema_cases() -> Vec<Case> {
    use By::Schema;
    vec![
        refused(
            "pause-pattern",
            Schema,
            twd(
                "pause-pattern",
                progressive(json!([step(json!(10), "5 minutes")])),
            ),
            "spec.rollout.steps[0].pauseDuration: Invalid value: \"5 minutes\"",
        ),
        refused(
            "sunset-pattern",
            Schema,
            twd(
                "sunset-pattern",
                json!({"sunset": {"scaledownDelay": "1 hour"}}),
            ),
            "spec.sunset.scaledownDelay: Invalid value: \"1 hour\"",
        ),
        refused(
            "ramp-zero",
            Schema,
            twd("ramp-zero", progressive(json!([step(json!(0), "1m")]))),
            "spec.rollout.steps[0].rampPercentage: Invalid value: 0",
        ),
        refused(
            "ramp-hundred",
            Schema,
            twd("ramp-hundred", progressive(json!([step(json!(100), "1m")]))),
            "spec.rollout.steps[0].rampPercentage: Invalid value: 100",
        ),
        refused(
            "ramp-not-a-number",
            Schema,
            twd(
                "ramp-not-a-number",
                progressive(json!([step(json!("ten"), "1m")])),
            ),
            "spec.rollout.steps[0].rampPercentage: Invalid value: \"string\"",
        ),
        refused(
            "unknown-strategy",
            Schema,
            twd("unknown-strategy", rollout(json!({"strategy": "Canary"}))),
            "spec.rollout.strategy: Unsupported value: \"Canary\"",
        ),
        refused(
            "too-many-steps",
            Schema,
            twd(
                "too-many-steps",
                progressive(Value::Array(
                    (1..=21).map(|p| step(json!(p), "1m")).collect(),
                )),
            ),
            "spec.rollout.steps: Too many: 21: must have at most 20 items",
        ),
        refused(
            "negative-replicas",
            Schema,
            twd("negative-replicas", json!({"replicas": -1})),
            "spec.replicas: Invalid value: -1",
        ),
    ]
}

pub(crate) fn worker_schema_cases_more() -> Vec<Case> {
    use By::Schema;
    vec![
        refused(
            "custom-build-id-pattern",
            Schema,
            twd(
                "custom-build-id-pattern",
                json!({"workerOptions": {"customBuildID": "v1/beta"}}),
            ),
            "spec.workerOptions.customBuildID: Invalid value: \"v1/beta\"",
        ),
        refused(
            "connection-ref-pattern",
            Schema,
            twd(
                "connection-ref-pattern",
                json!({"workerOptions": {"connectionRef": {"name": "Prod_Temporal"}}}),
            ),
            "spec.workerOptions.connectionRef.name: Invalid value: \"Prod_Temporal\"",
        ),
        refused(
            "temporal-namespace-empty",
            Schema,
            twd(
                "temporal-namespace-empty",
                json!({"workerOptions": {"temporalNamespace": ""}}),
            ),
            "spec.workerOptions.temporalNamespace: Invalid value: \"\"",
        ),
        refused(
            "gate-workflow-type-empty",
            Schema,
            twd(
                "gate-workflow-type-empty",
                rollout(json!({"strategy": "AllAtOnce", "gate": {"workflowType": ""}})),
            ),
            "spec.rollout.gate.workflowType: Invalid value: \"\"",
        ),
        refused(
            "no-worker-options",
            Schema,
            {
                let mut t = twd("no-worker-options", json!({}));
                t["spec"].as_object_mut().map(|s| s.remove("workerOptions"));
                t
            },
            "spec.workerOptions: Required value",
        ),
        refused(
            "annotations-oversize",
            By::ApiServer,
            merged(
                twd("annotations-oversize", json!({})),
                json!({"metadata": {"annotations": {"example.com/blob": "x".repeat(300 * 1024)}}}),
            ),
            "metadata.annotations: Too long: may not be more than 262144 bytes",
        ),
        refused(
            "object-oversize",
            By::ApiServer,
            twd(
                "object-oversize",
                rollout(
                    json!({"strategy": "AllAtOnce", "gate": {"workflowType": "check", "input": {"blob": "x".repeat(4 * 1024 * 1024)}}}),
                ),
            ),
            "too large",
        ),
    ]
}

pub(crate) fn worker_cel_cases() -> Vec<Case> {
    use By::Cel;
    vec![
        refused(
            "steps-decrease",
            Cel,
            twd(
                "steps-decrease",
                progressive(json!([step(json!(50), "1s"), step(json!(25), "1s")])),
            ),
            "rampPercentage must increase between each step",
        ),
        refused(
            "steps-repeat",
            Cel,
            twd(
                "steps-repeat",
                progressive(json!([step(json!(25), "1m"), step(json!(25), "2m")])),
            ),
            "rampPercentage must increase between each step",
        ),
        refused(
            "pause-too-short",
            Cel,
            twd(
                "pause-too-short",
                progressive(json!([step(json!(10), "500ms")])),
            ),
            "pause duration must be at least 1s",
        ),
        refused(
            "progressive-without-steps",
            Cel,
            twd(
                "progressive-without-steps",
                rollout(json!({"strategy": "Progressive"})),
            ),
            "steps are required for Progressive rollout",
        ),
        refused(
            "replicas-zero",
            Cel,
            twd("replicas-zero", json!({"replicas": 0})),
            "spec.replicas must be at least 1: with 0 the Current version has no workers while \
             Temporal keeps routing new workflows to it, so they would wait forever … to let an \
             autoscaler own replicas, leave spec.replicas unset",
        ),
        refused(
            "name-with-dot",
            Cel,
            twd("orders.v1", json!({})),
            "name must not contain '.': Temporal rejects '.' in worker deployment names",
        ),
        refused(
            "name-too-long",
            Cel,
            twd(&"n".repeat(64), json!({})),
            "name cannot be more than 63 characters",
        ),
        refused(
            "manual-paused",
            Cel,
            twd(
                "manual-paused",
                rollout(json!({"strategy": "Manual", "paused": true})),
            ),
            "with the Manual strategy it makes none",
        ),
    ]
}

pub(crate) fn worker_cel_cases_more() -> Vec<Case> {
    use By::Cel;
    let good = || {
        twd(
            "update-steps",
            progressive(json!([step(json!(10), "1m"), step(json!(50), "1m")])),
        )
    };
    vec![
        refused(
            "manual-abort",
            Cel,
            twd(
                "manual-abort",
                rollout(json!({"strategy": "Manual", "abort": true})),
            ),
            "with the Manual strategy it makes none",
        ),
        refused(
            "both-build-id-names",
            Cel,
            twd(
                "both-build-id-names",
                json!({"workerOptions": {"customBuildID": "a", "unsafeCustomBuildID": "b"}}),
            ),
            "set workerOptions.customBuildID or its alias unsafeCustomBuildID, not both",
        ),
        refused(
            "adopt-bad-name",
            Cel,
            twd(
                "adopt-bad-name",
                json!({"adopt": {"deploymentName": "Orders_Worker"}}),
            ),
            "spec.adopt.deploymentName must be the name of a Deployment in this namespace",
        ),
        refused(
            "analysis-without-threshold",
            Cel,
            with_analysis("analysis-without-threshold", json!({"interval": "30s"})),
            "set maxFailureRate, maxFailureRateIncrease or both",
        ),
        refused(
            "analysis-interval-too-short",
            Cel,
            with_analysis(
                "analysis-interval-too-short",
                json!({"interval": "100ms", "maxFailureRate": 5}),
            ),
            "interval must be at least 1s",
        ),
        refused(
            "terminate-before-cancel",
            Cel,
            twd(
                "terminate-before-cancel",
                json!({"sunset": {"cancelPinnedAfter": "2h", "terminatePinnedAfter": "1h"}}),
            ),
            "terminatePinnedAfter must be longer than cancelPinnedAfter",
        ),
        refused(
            "gate-input-from-both",
            Cel,
            twd(
                "gate-input-from-both",
                rollout(
                    json!({"strategy": "AllAtOnce", "gate": {"workflowType": "check",
                "inputFrom": {"secretKeyRef": {"name": "s", "key": "k"}, "configMapKeyRef": {"name": "c", "key": "k"}}}}),
                ),
            ),
            "exactly one of configMapKeyRef or secretKeyRef must be set",
        ),
        refused_update(
            "update-steps-decrease",
            Cel,
            good(),
            twd(
                "update-steps",
                progressive(json!([step(json!(50), "1m"), step(json!(10), "1m")])),
            ),
            "rampPercentage must increase between each step",
        ),
    ]
}

/// The gate-input Secret of the gate cases: one JSON value, one that is not.
pub(crate) fn gate_secret() -> Vec<Value> {
    vec![secret(
        "gate-input",
        json!({"other": "{}", "garbled": "{\"a\": 1"}),
    )]
}

pub(crate) fn worker_webhook_cases() -> Vec<Case> {
    use By::Webhook;
    vec![
        refused(
            "reserved-env",
            Webhook,
            twd(
                "reserved-env",
                container(
                    json!({"env": [{"name": "TEMPORAL_ADDRESS", "value": "elsewhere:7233"}]}),
                ),
            ),
            "spec.template.spec.containers[0].env[0]: container \"worker\" sets TEMPORAL_ADDRESS",
        ),
        refused(
            "reserved-env-build-id",
            Webhook,
            twd(
                "reserved-env-build-id",
                container(
                    json!({"env": [{"name": "A", "value": "1"}, {"name": "TEMPORAL_WORKER_BUILD_ID", "value": "mine"}]}),
                ),
            ),
            "spec.template.spec.containers[0].env[1]: container \"worker\" sets TEMPORAL_WORKER_BUILD_ID",
        ),
        refused(
            "reserved-volume",
            Webhook,
            twd(
                "reserved-volume",
                json!({"template": {"spec": {"volumes": [{"name": "temporal-tls", "emptyDir": {}}]}}}),
            ),
            "spec.template.spec.volumes[0].name: \"temporal-tls\" is reserved",
        ),
        given(
            refused(
                "gate-input-key-missing",
                Webhook,
                twd(
                    "gate-input-key-missing",
                    gate_from("secretKeyRef", "gate-input", "input"),
                ),
                "spec.rollout.gate.inputFrom.secretKeyRef.key: key \"input\" not found in Secret \"gate-input\"",
            ),
            gate_secret(),
        ),
        refused(
            "gate-input-secret-missing",
            Webhook,
            twd(
                "gate-input-secret-missing",
                gate_from("secretKeyRef", "absent", "input"),
            ),
            "spec.rollout.gate.inputFrom.secretKeyRef.name: Secret \"absent\" for gate input not found",
        ),
    ]
}

pub(crate) fn worker_webhook_cases_more() -> Vec<Case> {
    use By::Webhook;
    vec![
        refused(
            "gate-input-configmap-missing",
            Webhook,
            twd(
                "gate-input-configmap-missing",
                gate_from("configMapKeyRef", "absent", "input"),
            ),
            "spec.rollout.gate.inputFrom.configMapKeyRef.name: ConfigMap \"absent\" for gate input not found",
        ),
        given(
            refused(
                "gate-input-not-json",
                Webhook,
                twd(
                    "gate-input-not-json",
                    gate_from("secretKeyRef", "gate-input", "garbled"),
                ),
                "spec.rollout.gate.inputFrom.secretKeyRef.key: the value of key \"garbled\" in Secret \"gate-input\" is not valid JSON",
            ),
            gate_secret(),
        ),
        refused(
            "gate-input-inline-and-from",
            Webhook,
            twd(
                "gate-input-inline-and-from",
                rollout(
                    json!({"strategy": "AllAtOnce", "gate": {"workflowType": "check", "input": {"a": 1},
                "inputFrom": {"secretKeyRef": {"name": "gate-input", "key": "other"}}}}),
                ),
            ),
            "only one of input or inputFrom",
        ),
        refused(
            "template-kubernetes-refuses",
            Webhook,
            twd(
                "template-kubernetes-refuses",
                container(json!({"name": "Bad_Name"})),
            ),
            "(server-side dry run) … spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\"",
        ),
        refused_update(
            "update-reserved-env",
            Webhook,
            twd("update-env", json!({})),
            twd(
                "update-env",
                container(json!({"env": [{"name": "TEMPORAL_NAMESPACE", "value": "other"}]})),
            ),
            "container \"worker\" sets TEMPORAL_NAMESPACE",
        ),
    ]
}

/// Fields the schema bounds that a user rarely sets.
pub(crate) fn worker_field_cases() -> Vec<Case> {
    use By::{Schema, Webhook};
    vec![
        refused(
            "analysis-workflow-type-quote",
            Schema,
            with_analysis(
                "analysis-quote",
                json!({"maxFailureRate": 5, "workflowTypes": ["it's"]}),
            ),
            "spec.rollout.analysis.workflowTypes[0]: Invalid value: \"it's\"",
        ),
        refused(
            "analysis-failure-rate-over-100",
            Schema,
            with_analysis("analysis-rate", json!({"maxFailureRate": 150})),
            "spec.rollout.analysis.maxFailureRate: Invalid value: 150",
        ),
        refused(
            "upgrade-signal-too-long",
            Schema,
            twd(
                "upgrade-signal",
                json!({"sunset": {"upgradeSignal": "s".repeat(201)}}),
            ),
            "spec.sunset.upgradeSignal: Too long",
        ),
        refused(
            "min-ready-seconds-negative",
            Schema,
            twd("min-ready", json!({"minReadySeconds": -5})),
            "spec.minReadySeconds: Invalid value: -5",
        ),
        refused(
            "no-containers",
            Webhook,
            twd(
                "no-containers",
                json!({"template": {"spec": {"containers": []}}}),
            ),
            "spec.template.spec.containers: at least one container is required",
        ),
    ]
}

/// Where the webhook is off: the controller must say what the webhook would have said.
pub(crate) fn worker_reported_cases() -> Vec<Case> {
    vec![
        stalls(
            "off-reserved-env",
            twd(
                "off-reserved-env",
                container(
                    json!({"env": [{"name": "TEMPORAL_ADDRESS", "value": "elsewhere:7233"}]}),
                ),
            ),
            "spec.template.spec.containers[0].env[0]: container \"worker\" sets TEMPORAL_ADDRESS",
        ),
        stalls(
            "off-gate-input-inline-and-from",
            twd(
                "off-gate-both",
                rollout(
                    json!({"strategy": "AllAtOnce", "gate": {"workflowType": "check",
                "input": {"a": 1}, "inputFrom": {"secretKeyRef": {"name": "gate-input", "key": "k"}}}}),
                ),
            ),
            "spec.rollout.gate: only one of input or inputFrom",
        ),
        stalls(
            "off-template-kubernetes-refuses",
            twd("off-template", container(json!({"name": "Bad_Name"}))),
            "spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\"",
        ),
        given(
            reported(
                "off-gate-input-not-json",
                twd(
                    "off-gate-not-json",
                    gate_from("secretKeyRef", "gate-input", "garbled"),
                ),
                ("Progressing", "False", "PlanGenerationFailed"),
                "gate input (key \"garbled\" of Secret \"gate-input\") is not valid JSON",
            ),
            vec![secret("gate-input", json!({"garbled": "{\"a\": 1"}))],
        ),
        Case {
            before: Some(twd("off-update", container(json!({"env": [queue()]})))),
            ..stalls(
                "off-update-reserved-env",
                twd(
                    "off-update",
                    container(
                        json!({"env": [queue(), {"name": "TEMPORAL_DEPLOYMENT_NAME", "value": "x"}]}),
                    ),
                ),
                "spec.template.spec.containers[0].env[1]: container \"worker\" sets TEMPORAL_DEPLOYMENT_NAME",
            )
        },
    ]
}

/// The task queue the kubelet stand-in's worker polls.
pub(crate) fn queue() -> Value {
    json!({"name": "TEMPORAL_TASK_QUEUE", "value": "bad-inputs"})
}

pub(crate) fn connection(name: &str, spec: Value) -> Value {
    let mut c = manifests::connection(name, "temporal.example:7233");
    manifests::merge(&mut c["spec"], spec);
    c
}

/// A Connection whose credentials are refused: `Ready=False/AuthSecretInvalid`.
pub(crate) fn auth_invalid(
    id: &'static str,
    spec: Value,
    secret: Value,
    fragment: &'static str,
) -> Case {
    given(
        reported(
            id,
            connection(id, spec),
            ("Ready", "False", "AuthSecretInvalid"),
            fragment,
        ),
        vec![secret],
    )
}

pub(crate) fn tls_secret(name: &str, cert: &str, key: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "kubernetes.io/tls",
           "stringData": {"tls.crt": cert, "tls.key": key}})
}

pub(crate) fn connection_cases() -> Vec<Case> {
    use By::{Cel, Schema};
    let both = json!({"mutualTLSSecretRef": {"name": "mtls"}, "apiKeySecretRef": {"name": "key", "key": "k"}});
    vec![
        refused(
            "host-port-without-port",
            Schema,
            connection("no-port", json!({"hostPort": "temporal.example"})),
            "spec.hostPort: Invalid value: \"temporal.example\"",
        ),
        refused(
            "host-port-with-scheme",
            Schema,
            connection(
                "scheme",
                json!({"hostPort": "https://temporal.example:7233"}),
            ),
            "spec.hostPort: Invalid value: \"https://temporal.example:7233\"",
        ),
        refused(
            "host-port-out-of-range",
            Cel,
            connection("port-range", json!({"hostPort": "temporal.example:72330"})),
            "hostPort must end in a port from 1 to 65535",
        ),
        refused(
            "host-port-zero",
            Cel,
            connection("port-zero", json!({"hostPort": "temporal.example:0"})),
            "hostPort must end in a port from 1 to 65535",
        ),
        refused(
            "both-auth-refs",
            Cel,
            connection("both-auth", both),
            "Only one of mutualTLSSecretRef or apiKeySecretRef may be set",
        ),
        refused(
            "api-key-key-empty",
            Schema,
            connection(
                "key-empty",
                json!({"apiKeySecretRef": {"name": "key", "key": ""}}),
            ),
            "spec.apiKeySecretRef.key: Invalid value: \"\"",
        ),
        refused(
            "mtls-secret-name-pattern",
            Schema,
            connection(
                "mtls-name",
                json!({"mutualTLSSecretRef": {"name": "Client.Cert"}}),
            ),
            "spec.mutualTLSSecretRef.name: Invalid value: \"Client.Cert\"",
        ),
        refused(
            "server-name-pattern",
            Schema,
            connection(
                "server-name",
                json!({"tls": {"serverName": "temporal example"}}),
            ),
            "spec.tls.serverName: Invalid value: \"temporal example\"",
        ),
    ]
}

pub(crate) fn connection_cases_more() -> Vec<Case> {
    use By::Cel;
    let ca = test_harness::certs::Authority::new("bad-inputs-ca").expect("a CA");
    let usage = test_harness::certs::Usage::Client;
    let expired = ca
        .issue_valid(
            "worker",
            None,
            &[],
            usage,
            Some(((2020, 1, 1), (2021, 1, 1))),
        )
        .expect("a certificate");
    let valid = ca.issue("worker", None, &[], usage).expect("a certificate");
    let both = json!({"mutualTLSSecretRef": {"name": "mtls"}, "apiKeySecretRef": {"name": "key", "key": "k"}});
    vec![
        refused_update(
            "update-both-auth-refs",
            Cel,
            connection(
                "update-auth",
                json!({"apiKeySecretRef": {"name": "key", "key": "k"}}),
            ),
            connection("update-auth", both),
            "Only one of mutualTLSSecretRef or apiKeySecretRef may be set",
        ),
        auth_invalid(
            "api-key-missing",
            json!({"apiKeySecretRef": {"name": "api-key-a", "key": "key"}}),
            secret("api-key-a", json!({"other": "x"})),
            "Secret \"api-key-a\" has no \"key\" entry, or it is empty",
        ),
        auth_invalid(
            "mtls-key-missing",
            json!({"mutualTLSSecretRef": {"name": "mtls-a"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mtls-a"}, "type": "Opaque", "stringData": {"tls.crt": valid.cert_pem}}),
            "Secret \"mtls-a\" has no \"tls.key\" entry",
        ),
        auth_invalid(
            "mtls-malformed",
            json!({"mutualTLSSecretRef": {"name": "mtls-b"}}),
            tls_secret(
                "mtls-b",
                "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
                &valid.key_pem,
            ),
            "Secret \"mtls-b\": \"tls.crt\" is not valid PEM",
        ),
        auth_invalid(
            "mtls-expired",
            json!({"mutualTLSSecretRef": {"name": "mtls-c"}}),
            tls_secret("mtls-c", &expired.cert_pem, &expired.key_pem),
            "Secret \"mtls-c\": the certificate in tls.crt expires at 2021-01-01T00:00:00Z, which is in the past",
        ),
        auth_invalid(
            "mtls-key-of-another-cert",
            json!({"mutualTLSSecretRef": {"name": "mtls-d"}}),
            tls_secret("mtls-d", &valid.cert_pem, &expired.key_pem),
            "Secret \"mtls-d\": the private key in tls.key does not belong to the certificate in tls.crt",
        ),
    ]
}

/// A private CA (`tls.caCertSecretRef`), the workers' own credentials and the opt-in mTLS CA
/// (issue 50): their admission rules, and Secrets the controller refuses.
pub(crate) fn connection_tls_cases() -> Vec<Case> {
    use By::Cel;
    let ca = json!({"caCertSecretRef": {"name": "ca"}});
    let exactly_one =
        "workerCredentials needs exactly one of mutualTLSSecretRef or apiKeySecretRef";
    vec![
        refused(
            "ca-with-mtls",
            Cel,
            connection(
                "ca-mtls",
                json!({"mutualTLSSecretRef": {"name": "mtls"}, "tls": ca}),
            ),
            "tls.caCertSecretRef cannot be combined with mutualTLSSecretRef; bundle the CA into that secret's own ca.crt key instead",
        ),
        refused(
            "worker-credentials-both",
            Cel,
            connection(
                "workers-both",
                json!({"workerCredentials": {"mutualTLSSecretRef": {"name": "mtls"}, "apiKeySecretRef": {"name": "key", "key": "k"}}}),
            ),
            exactly_one,
        ),
        refused(
            "worker-credentials-empty",
            Cel,
            connection("workers-empty", json!({"workerCredentials": {}})),
            exactly_one,
        ),
        refused(
            "workers-mtls-ca-without-mtls",
            Cel,
            connection(
                "workers-ca",
                json!({"apiKeySecretRef": {"name": "key", "key": "k"}, "tls": {"workersTrustMutualTLSCA": true}}),
            ),
            "tls.workersTrustMutualTLSCA gives the workers the ca.crt of their mTLS Secret, so the workers need one",
        ),
        refused(
            "workers-mtls-ca-and-ca-secret",
            Cel,
            connection(
                "workers-two-cas",
                json!({"workerCredentials": {"mutualTLSSecretRef": {"name": "mtls"}}, "tls": {"caCertSecretRef": {"name": "ca"}, "workersTrustMutualTLSCA": true}}),
            ),
            "set tls.caCertSecretRef or tls.workersTrustMutualTLSCA, not both",
        ),
        auth_invalid(
            "ca-secret-without-ca-crt",
            json!({"tls": {"caCertSecretRef": {"name": "ca-a"}}}),
            secret("ca-a", json!({"other": "x"})),
            "tls.caCertSecretRef: Secret \"ca-a\" has no \"ca.crt\" entry, or it is empty",
        ),
        auth_invalid(
            "worker-api-key-missing",
            json!({"workerCredentials": {"apiKeySecretRef": {"name": "worker-key-a", "key": "key"}}}),
            secret("worker-key-a", json!({"other": "x"})),
            "workerCredentials: Secret \"worker-key-a\" has no \"key\" entry, or it is empty",
        ),
    ]
}

pub(crate) fn hpa(extra: Value) -> Value {
    let mut spec = json!({"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3});
    manifests::merge(&mut spec, extra);
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": spec})
}

pub(crate) fn wrt(name: &str, object: Value) -> Value {
    manifests::owned_resource(name, "worker", object)
}

pub(crate) fn template_cases() -> Vec<Case> {
    use By::{Cel, Schema, Webhook};
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": {"selector": {"matchLabels": {}}, "minAvailable": 1}});
    vec![
        refused(
            "forbidden-kind",
            Webhook,
            wrt(
                "forbidden-kind",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}}),
            ),
            "kind \"Deployment\" is not allowed (allowed: HorizontalPodAutoscaler, PodDisruptionBudget, ScaledObject)",
        ),
        refused(
            "other-namespace",
            Webhook,
            wrt(
                "other-namespace",
                merged(pdb.clone(), json!({"metadata": {"namespace": "elsewhere"}})),
            ),
            "spec.object.metadata.namespace must not be set",
        ),
        refused(
            "hpa-min-replicas-zero",
            Webhook,
            wrt("hpa-zero", hpa(json!({"minReplicas": 0}))),
            "spec.object.spec.minReplicas must not be 0",
        ),
        refused(
            "keda-min-replica-count-zero",
            Webhook,
            wrt(
                "keda-zero",
                json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "spec": {"scaleTargetRef": {}, "minReplicaCount": 0}}),
            ),
            "spec.object.spec.minReplicaCount must not be 0",
        ),
        refused(
            "value-at-injection-point",
            Webhook,
            wrt(
                "injection-point",
                hpa(
                    json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mine"}}),
                ),
            ),
            "spec.object.spec.scaleTargetRef is set by the controller to each version's Deployment",
        ),
        refused(
            "object-without-kind",
            Schema,
            wrt("no-kind", json!({"spec": {"minReplicas": 1}})),
            "spec.object",
        ),
        refused(
            "object-named",
            Cel,
            wrt(
                "named",
                merged(pdb.clone(), json!({"metadata": {"name": "x"}})),
            ),
            "spec.object.metadata.name must not be set",
        ),
    ]
}

pub(crate) fn template_cases_more() -> Vec<Case> {
    use By::{Cel, Schema};
    let spec_of = |name: &str, spec: Value| {
        json!({"apiVersion": manifests::API_VERSION, "kind": "TemporalWorkerOwnedResource",
        "metadata": {"name": name}, "spec": spec})
    };
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": {"selector": {"matchLabels": {}}, "minAvailable": 1}});
    vec![
        refused(
            "template-and-object",
            Cel,
            spec_of(
                "both-templates",
                json!({"workerRef": {"name": "worker"}, "object": pdb, "template": pdb}),
            ),
            "set exactly one of template or its alias object",
        ),
        refused(
            "no-worker-ref",
            Cel,
            spec_of("no-ref", json!({"object": pdb})),
            "workerDeploymentRef must be set",
        ),
        refused(
            "two-worker-refs",
            Cel,
            spec_of(
                "two-refs",
                json!({"workerRef": {"name": "a"}, "workerDeploymentRef": {"name": "a"}, "object": pdb}),
            ),
            "only one of workerDeploymentRef, workerRef or temporalWorkerDeploymentRef may be set",
        ),
        refused(
            "worker-ref-with-dot",
            Schema,
            manifests::owned_resource("dotted-ref", "orders.v1", pdb.clone()),
            "spec.workerRef.name: Invalid value: \"orders.v1\"",
        ),
        refused_update(
            "update-worker-ref",
            Cel,
            wrt("moved", hpa(json!({}))),
            manifests::owned_resource("moved", "other", hpa(json!({}))),
            "the worker reference is immutable",
        ),
        reported(
            "off-two-rules",
            wrt(
                "off-two-rules",
                hpa(json!({"minReplicas": 0, "scaleTargetRef": {"name": "mine"}})),
            ),
            ("Stalled", "True", "ApplyFailed"),
            "spec.object.spec.minReplicas must not be 0",
        ),
    ]
}

/// The status API's own bad inputs (what schemathesis generates from docs/openapi.yaml).
pub(crate) fn status_api_cases() -> Vec<Case> {
    vec![
        http(
            "api-namespace-uppercase",
            "GET",
            "/api/v1/namespaces/Shop/rollouts",
            400,
            "invalid namespace name \\\"Shop\\\"",
        ),
        http(
            "api-namespace-too-long",
            "GET",
            &format!("/api/v1/namespaces/{}/rollouts", "a".repeat(64)),
            400,
            "invalid namespace name",
        ),
        http(
            "api-name-invalid",
            "GET",
            "/api/v1/namespaces/shop/rollouts/orders_v1",
            400,
            "invalid name \\\"orders_v1\\\"",
        ),
        http(
            "api-name-too-long",
            "GET",
            &format!("/api/v1/namespaces/shop/rollouts/{}", "a".repeat(254)),
            400,
            "invalid name",
        ),
        // Found by schemathesis: a name part over 63 characters is a valid object name.
        http(
            "api-name-long-part-is-a-name",
            "GET",
            &format!("/api/v1/namespaces/shop/rollouts/0.{}", "0".repeat(251)),
            404,
            "not found",
        ),
        http(
            "api-no-such-rollout",
            "GET",
            "/api/v1/namespaces/shop/rollouts/absent",
            404,
            "worker deployment shop/absent not found",
        ),
        http(
            "api-watch-no-such-rollout",
            "GET",
            "/api/v1/namespaces/shop/rollouts/absent/watch",
            404,
            "worker deployment shop/absent not found",
        ),
        http(
            "api-no-such-route",
            "GET",
            "/api/v2/rollouts",
            404,
            "no such route",
        ),
        http(
            "api-write",
            "POST",
            "/api/v1/rollouts",
            405,
            "read-only API: only GET is supported",
        ),
        http(
            "api-delete",
            "DELETE",
            "/api/v1/namespaces/shop/rollouts/orders",
            405,
            "read-only API",
        ),
    ]
}

/// `base` with `patch` merged in.
pub(crate) fn merged(mut base: Value, patch: Value) -> Value {
    manifests::merge(&mut base, patch);
    base
}
