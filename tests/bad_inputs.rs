//! The bad-input table (issue 28): every input the controller is known to refuse, for every
//! kind it serves, on the real kube-apiserver, each with the message fragment it must give.
//!
//! One environment for the whole table: the local control plane, the shared Temporal dev
//! server, the kubelet stand-in (real workers), and the controller in-process as the chart's
//! ServiceAccount with its admission webhook on, reached through the chart's own
//! ValidatingWebhookConfiguration. The webhook is off (the chart's `excludeNamespaces`) in the
//! `off` namespaces: there a bad object is admitted and the controller must report it.
//!
//! Each row of [`table`] is one of:
//! - [`Expect::Refused`]: the API server refuses the object (its schema, a CEL rule, the webhook,
//!   or its own size limits), with a message naming the field; nothing is stored. With a
//!   `before`, it is an update: the good object is stored first, and after the refusal the
//!   stored spec is the good one, unchanged.
//! - [`Expect::Reported`]: admitted where only the controller can know (or the webhook is off);
//!   the controller reports it in a condition with a clear message and applies nothing. With a
//!   `before`, the good spec is rolled out first (real workers): the bad update must leave the
//!   good version Current and running, and the good spec once restored completes again.
//! - [`Expect::Http`]: a request to the status API (docs/openapi.yaml) answered with the
//!   documented error code and body (what schemathesis checks in tests/status_api.rs).
//!
//! Every row of our kinds runs under both kind sets (canonical `WorkerDeployment`,
//! `Connection`, `WorkerResourceTemplate` and the seed `Temporal*` kinds), each in namespaces of
//! its own.

#[path = "common/controller.rs"]
mod controller;
#[path = "common/webhook.rs"]
mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::kinds::Model;
use test_harness::manifests;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::OnceCell;

/// Where the chart is "installed".
const CONTROLLER_NS: &str = "twc-bad-inputs-system";
const TWD_WEBHOOK: &str = "temporalworkerdeployments.webhook.temporal.io";
const TWOR_WEBHOOK: &str = "temporalworkerownedresources.webhook.temporal.io";
/// How long the controller may take to report a case (a rollout with a real worker included).
const T: Duration = Duration::from_secs(90);
/// Cases run at once.
const PARALLEL: usize = 8;

// ---------------------------------------------------------------------------------------------
// The table.

/// Who refuses an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum By {
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
enum Expect {
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
struct Case {
    id: &'static str,
    /// Objects created first in the case's namespace (Secrets, ConfigMaps).
    given: Vec<Value>,
    /// For an update: the good object, stored first.
    before: Option<Value>,
    /// The bad object (unused by [`Expect::Http`]).
    bad: Value,
    expect: Expect,
}

fn refused(id: &'static str, by: By, bad: Value, fragment: &'static str) -> Case {
    Case {
        id,
        given: Vec::new(),
        before: None,
        bad,
        expect: Expect::Refused { by, fragment },
    }
}

fn refused_update(
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

fn given(mut case: Case, objects: Vec<Value>) -> Case {
    case.given = objects;
    case
}

/// A TWD the controller must report `Stalled=True/InvalidSpec` for.
fn stalls(id: &'static str, bad: Value, fragment: &'static str) -> Case {
    reported(id, bad, ("Stalled", "True", "InvalidSpec"), fragment)
}

fn reported(
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

fn http(
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
fn table() -> Vec<Case> {
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
fn twd(name: &str, spec: Value) -> Value {
    manifests::twd(name)
        .replicas(1)
        .rollout(json!({"strategy": "AllAtOnce"}))
        .spec(spec)
        .build()
}

/// A Progressive TWD `name` with canary analysis `analysis`.
fn with_analysis(name: &str, analysis: Value) -> Value {
    let mut t = twd(name, progressive(json!([step(json!(10), "1m")])));
    t["spec"]["rollout"]["analysis"] = analysis;
    t
}

/// Whether `message` holds `fragment`: its parts between ` … ` in that order.
fn holds(message: &str, fragment: &str) -> bool {
    let mut rest = message;
    fragment.split(" … ").all(|part| match rest.find(part) {
        Some(at) => {
            rest = &rest[at + part.len()..];
            true
        }
        None => false,
    })
}

fn rollout(rollout: Value) -> Value {
    json!({"rollout": rollout})
}

fn progressive(steps: Value) -> Value {
    rollout(json!({"strategy": "Progressive", "steps": steps}))
}

fn step(pct: Value, pause: &str) -> Value {
    json!({"rampPercentage": pct, "pauseDuration": pause})
}

/// The pod template's only container, `worker`, with `extra` merged in.
fn container(extra: Value) -> Value {
    let mut c = json!({"name": "worker", "image": manifests::worker_image("v1")});
    manifests::merge(&mut c, extra);
    json!({"template": {"spec": {"containers": [c]}}})
}

fn gate_from(source: &str, name: &str, key: &str) -> Value {
    rollout(
        json!({"strategy": "AllAtOnce", "gate": {"workflowType": "check",
        "inputFrom": {(source): {"name": name, "key": key}}}}),
    )
}

fn secret(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data})
}

fn worker_schema_cases() -> Vec<Case> {
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

fn worker_schema_cases_more() -> Vec<Case> {
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

fn worker_cel_cases() -> Vec<Case> {
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

fn worker_cel_cases_more() -> Vec<Case> {
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
fn gate_secret() -> Vec<Value> {
    vec![secret(
        "gate-input",
        json!({"other": "{}", "garbled": "{\"a\": 1"}),
    )]
}

fn worker_webhook_cases() -> Vec<Case> {
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

fn worker_webhook_cases_more() -> Vec<Case> {
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
fn worker_field_cases() -> Vec<Case> {
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
fn worker_reported_cases() -> Vec<Case> {
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
fn queue() -> Value {
    json!({"name": "TEMPORAL_TASK_QUEUE", "value": "bad-inputs"})
}

fn connection(name: &str, spec: Value) -> Value {
    let mut c = manifests::connection(name, "temporal.example:7233");
    manifests::merge(&mut c["spec"], spec);
    c
}

/// A Connection whose credentials are refused: `Ready=False/AuthSecretInvalid`.
fn auth_invalid(id: &'static str, spec: Value, secret: Value, fragment: &'static str) -> Case {
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

fn tls_secret(name: &str, cert: &str, key: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "kubernetes.io/tls",
           "stringData": {"tls.crt": cert, "tls.key": key}})
}

fn connection_cases() -> Vec<Case> {
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

fn connection_cases_more() -> Vec<Case> {
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
fn connection_tls_cases() -> Vec<Case> {
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

fn hpa(extra: Value) -> Value {
    let mut spec = json!({"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3});
    manifests::merge(&mut spec, extra);
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": spec})
}

fn wrt(name: &str, object: Value) -> Value {
    manifests::owned_resource(name, "worker", object)
}

fn template_cases() -> Vec<Case> {
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

fn template_cases_more() -> Vec<Case> {
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
fn status_api_cases() -> Vec<Case> {
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

// ---------------------------------------------------------------------------------------------
// The environment.

struct Env {
    client: kube::Client,
    http_addr: SocketAddr,
    _kubelet: Option<test_harness::kubelet::Kubelet>,
    _controller: temporal_worker_controller::run::Running,
}

static ENV: OnceCell<Arc<Env>> = OnceCell::const_new();

/// Panics in the controller's own code (`src/`), wherever they happened: a bad input must
/// never make the controller panic, even in a task whose panic nobody joins.
static CONTROLLER_PANICS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn record_controller_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(at) = info.location().filter(|l| l.file().starts_with("src/"))
            && let Ok(mut panics) = CONTROLLER_PANICS.lock()
        {
            panics.push(format!("{at}: {info}"));
        }
        previous(info);
    }));
}

async fn env() -> Arc<Env> {
    ENV.get_or_init(|| async {
        test_harness::runtime::on_infra(start_env())
            .await
            .expect("start the bad-input environment")
    })
    .await
    .clone()
}

/// The namespace of kind set `set`'s cases; `off`: where the webhook is off.
fn namespace(set: KindSet, off: bool) -> String {
    let set = match set {
        KindSet::Canonical => "canonical",
        KindSet::Seed => "seed",
    };
    if off {
        format!("bad-inputs-off-{set}")
    } else {
        format!("bad-inputs-{set}")
    }
}

fn values(url: &str) -> Value {
    json!({
        "controller": {"identity": "twc-bad-inputs"},
        "webhook": {
            "enabled": true,
            "url": url,
            "excludeNamespaces": ["kube-system", namespace(KindSet::Seed, true), namespace(KindSet::Canonical, true)],
        },
    })
}

async fn start_env() -> Result<Arc<Env>> {
    record_controller_panics();
    controller::init_tracing("warn");
    let infra =
        test_harness::world::Infra::start(test_harness::world::InfraOptions::default()).await?;
    let plane = infra
        .plane
        .context("the table runs on the local control plane")?;
    let hook = webhook::prepare(plane, values, CONTROLLER_NS).await?;
    let mut flags = vec![
        "--leader-elect".to_string(),
        format!("--lease-namespace={CONTROLLER_NS}"),
        "--identity=twc-bad-inputs".into(),
        "--idle-interval=10s".into(),
        "--fast-poll=300ms".into(),
        "--backlog-poll-interval=0s".into(),
    ];
    flags.extend(hook.flags);
    let controller = controller::start(hook.client, &flags).await?;
    let addr = controller.webhook_addr.context("no webhook")?;
    webhook::register(&infra.client, values, CONTROLLER_NS, addr).await?;
    for set in KindSet::ALL {
        for off in [false, true] {
            let ns = namespace(set, off);
            test_harness::world::enter(&infra, &ns, &format!("e2e-{ns}"), "bad-inputs").await?;
            if set == KindSet::Canonical {
                // `enter` makes a `temporal` TemporalConnection; a WorkerDeployment needs a Connection.
                let c = manifests::connection_in(
                    manifests::Kinds::Canonical,
                    "temporal",
                    &infra.temporal_address,
                );
                test_harness::world::apply(&infra.client, &ns, "bad-inputs", c).await?;
            }
        }
    }
    wait_for_the_webhook(&infra.client).await?;
    Ok(Arc::new(Env {
        client: infra.client,
        http_addr: controller.http_addr,
        _kubelet: infra.kubelet,
        _controller: controller,
    }))
}

/// Until the controller has set caBundle and serves its certificate, writes fail (failurePolicy
/// Fail); waits for the first refusal by the webhook itself.
async fn wait_for_the_webhook(client: &kube::Client) -> Result<()> {
    let probe = in_set(wrt("probe", hpa(json!({"minReplicas": 0}))), KindSet::Seed);
    let api = dynamic_api(client, CONTROLLER_NS, &probe)?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = api
            .create(&dry_run, &serde_json::from_value(probe.clone())?)
            .await;
        match out {
            Err(kube::Error::Api(s))
                if s.message.contains(TWOR_WEBHOOK) && s.message.contains("denied the request") =>
            {
                return Ok(());
            }
            other if Instant::now() > deadline => {
                bail!("the webhook did not answer within 60 s: {other:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The runner.

/// `manifest` with our kinds renamed to kind set `set`'s.
fn in_set(manifest: Value, set: KindSet) -> Value {
    let kinds = match set {
        KindSet::Seed => manifests::Kinds::Seed,
        KindSet::Canonical => manifests::Kinds::Canonical,
    };
    manifests::in_kinds(manifest, kinds)
}

fn model_of(manifest: &Value) -> Option<Model> {
    manifest["kind"]
        .as_str()
        .and_then(KindSet::of_kind)
        .map(|(_, m)| m)
}

fn dynamic_api(client: &kube::Client, ns: &str, manifest: &Value) -> Result<Api<DynamicObject>> {
    let kind = manifest["kind"]
        .as_str()
        .context("a manifest without kind")?;
    let resource = match manifest["apiVersion"].as_str() {
        Some(manifests::API_VERSION) => test_harness::world::api_resource(kind),
        Some("v1") => {
            kube::api::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("", "v1", kind))
        }
        other => bail!("no API for {other:?}"),
    };
    Ok(Api::namespaced_with(client.clone(), ns, &resource))
}

fn name_of(manifest: &Value) -> Result<String> {
    manifest["metadata"]["name"]
        .as_str()
        .map(str::to_string)
        .context("a manifest without name")
}

/// Runs one row under kind set `set`; `Ok(line)` says what happened.
async fn run(env: &Env, case: &Case, set: KindSet) -> Result<String> {
    let off = matches!(case.expect, Expect::Reported { .. });
    let ns = namespace(set, off);
    for object in &case.given {
        let api = dynamic_api(&env.client, &ns, object)?;
        match api
            .create(
                &PostParams::default(),
                &serde_json::from_value(object.clone())?,
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).context("creating what the case needs"),
        }
    }
    // Where the controller acts, its workers poll the Temporal namespace made for this one.
    let place = |m: Value| {
        let mut m = in_set(m, set);
        if m["spec"]["workerOptions"]["temporalNamespace"] == "default" {
            m["spec"]["workerOptions"]["temporalNamespace"] = json!(format!("e2e-{ns}"));
        }
        m
    };
    let bad = place(case.bad.clone());
    let before = case.before.clone().map(place);
    match &case.expect {
        Expect::Refused { by, fragment } => refuse(env, &ns, before, &bad, *by, fragment).await,
        Expect::Reported {
            condition,
            status,
            reason,
            fragment,
        } => {
            report(
                env,
                set,
                before,
                &bad,
                (condition, status, reason),
                fragment,
            )
            .await
        }
        Expect::Http { .. } => bail!("not a row of our kinds"),
    }
}

/// A refusal by `by` whose message holds `fragment`; nothing stored, or (update) the stored
/// spec unchanged.
async fn refuse(
    env: &Env,
    ns: &str,
    before: Option<Value>,
    bad: &Value,
    by: By,
    fragment: &str,
) -> Result<String> {
    let api = dynamic_api(&env.client, ns, bad)?;
    let name = name_of(bad)?;
    let stored = match &before {
        Some(good) => Some(
            api.create(
                &PostParams::default(),
                &serde_json::from_value(good.clone())?,
            )
            .await
            .context("the good spec")?,
        ),
        None => None,
    };
    let answer = match &stored {
        Some(_) => update_spec(&api, &name, bad).await,
        None => {
            api.create(
                &PostParams::default(),
                &serde_json::from_value(bad.clone())?,
            )
            .await
        }
    };
    let status = match answer {
        Err(kube::Error::Api(status)) => status,
        Ok(_) => bail!("admitted"),
        Err(e) => bail!("not an API server answer: {e}"),
    };
    let message = &status.message;
    ensure!(holds(message, fragment), "{fragment:?} not in: {message}");
    let webhook = message.contains("denied the request");
    match by {
        By::Webhook => ensure!(
            webhook && (message.contains(TWD_WEBHOOK) || message.contains(TWOR_WEBHOOK)),
            "not refused by the webhook: {message}"
        ),
        By::Schema | By::Cel => ensure!(
            status.code == 422 && !webhook,
            "not refused by the CRD ({}): {message}",
            status.code
        ),
        By::ApiServer => ensure!(
            !webhook,
            "refused by the webhook, not the API server: {message}"
        ),
    }
    if model_of(bad) == Some(Model::Worker) {
        let made = versioned_deployments(env, ns, &name).await?;
        // An update's good spec may have its Deployment by now; a refused create has none.
        ensure!(
            stored.is_some() || made.is_empty(),
            "{} Deployments made",
            made.len()
        );
    }
    match stored {
        None => ensure!(
            api.get_opt(&name).await?.is_none(),
            "a refused object was stored"
        ),
        Some(good) => {
            let now = api.get(&name).await?;
            ensure!(
                now.data["spec"] == good.data["spec"],
                "the stored spec changed: {}",
                now.data["spec"]
            );
        }
    }
    Ok(format!(
        "refused ({by:?}, {}): {}",
        status.code,
        short(message)
    ))
}

/// Sets the spec of `name` to `manifest`'s (a merge patch: no conflict with the controller's
/// own writes in between, and lists such as steps and env are replaced whole).
async fn update_spec(
    api: &Api<DynamicObject>,
    name: &str,
    manifest: &Value,
) -> kube::Result<DynamicObject> {
    let patch = json!({"spec": manifest["spec"]});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn short(message: &str) -> String {
    message.chars().take(160).collect()
}

/// `base` with `patch` merged in.
fn merged(mut base: Value, patch: Value) -> Value {
    manifests::merge(&mut base, patch);
    base
}

/// The condition `type_` of a stored object: `(status, reason, message)`.
fn condition(object: &DynamicObject, type_: &str) -> Option<Condition> {
    let conditions = object.data["status"]["conditions"].as_array()?;
    conditions
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| serde_json::from_value(c.clone()).ok())
}

fn observed(object: &DynamicObject) -> bool {
    object.data["status"]["observedGeneration"].as_i64() == object.metadata.generation
}

fn has(object: &DynamicObject, (type_, status, reason): (&str, &str, &str)) -> bool {
    condition(object, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

/// Polls `name` until `pred` holds, for at most [`T`].
async fn wait_for(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    pred: impl Fn(&DynamicObject) -> bool,
) -> Result<DynamicObject> {
    let deadline = Instant::now() + T;
    loop {
        let object = api.get(name).await?;
        if pred(&object) {
            return Ok(object);
        }
        ensure!(
            Instant::now() < deadline,
            "{what}: not within {T:?}; status: {}",
            object.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the webhook says about `bad` where it is on (a dry run), after the name of the object
/// the API server refused (the controller's own Deployment has another name).
async fn webhook_says(env: &Env, set: KindSet, bad: &Value) -> Result<String> {
    let ns = namespace(set, false);
    let api = dynamic_api(&env.client, &ns, bad)?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let message = match api
        .create(&dry_run, &serde_json::from_value(bad.clone())?)
        .await
    {
        Err(kube::Error::Api(s)) => s.message,
        other => bail!("the webhook admitted it: {other:?}"),
    };
    let said = message
        .split_once("denied the request: ")
        .map(|(_, m)| m)
        .context("not the webhook")?;
    Ok(said
        .split_once("is invalid: ")
        .map_or(said, |(_, e)| e)
        .trim()
        .to_string())
}

/// A report by the controller (the webhook off): `condition` with `fragment`; nothing applied;
/// after a good `before` the good version stays Current and running, and the good spec
/// restored completes again.
async fn report(
    env: &Env,
    set: KindSet,
    before: Option<Value>,
    bad: &Value,
    want: (&str, &str, &str),
    fragment: &str,
) -> Result<String> {
    let ns = namespace(set, true);
    let api = dynamic_api(&env.client, &ns, bad)?;
    let name = name_of(bad)?;
    let current = match &before {
        Some(good) => Some(roll_out(&api, good, &name).await?),
        None => {
            api.create(
                &PostParams::default(),
                &serde_json::from_value(bad.clone())?,
            )
            .await?;
            None
        }
    };
    if let Some(good) = &current {
        update_spec(&api, &name, bad)
            .await
            .context("the bad update")?;
        ensure!(good.0.is_some(), "the good spec has no Current version");
    }
    let what = format!("{}={}/{}", want.0, want.1, want.2);
    let object = wait_for(&api, &name, &what, |o| observed(o) && has(o, want)).await?;
    let message = condition(&object, want.0)
        .map(|c| c.message)
        .unwrap_or_default();
    ensure!(
        holds(&message, fragment),
        "{fragment:?} not in {what}: {message}"
    );
    if want.2 == "InvalidSpec" {
        ensure!(
            has(&object, ("Progressing", "False", "InvalidSpec")),
            "{}",
            object.data["status"]
        );
    }
    if want.2 == "InvalidSpec" || want.2 == "ApplyFailed" {
        let said = webhook_says(env, set, bad).await?;
        let same = if want.2 == "ApplyFailed" {
            message == said
        } else {
            message.contains(&said)
        };
        ensure!(
            same,
            "status {message:?} does not say what the webhook says: {said:?}"
        );
    }
    nothing_applied(env, &ns, bad, current.as_ref()).await?;
    if let (Some(good), Some(_)) = (before, &current) {
        update_spec(&api, &name, &good).await?;
        wait_for(&api, &name, "Ready again once fixed", |o| {
            observed(o)
                && has(o, ("Ready", "True", "RolloutComplete"))
                && condition(o, "Stalled").is_some_and(|c| c.status == "False")
        })
        .await?;
    }
    Ok(format!("{what}: {}", short(&message)))
}

/// The Current build ID once `good` is rolled out (real workers).
struct Rolled(Option<String>);

async fn roll_out(api: &Api<DynamicObject>, good: &Value, name: &str) -> Result<Rolled> {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(good.clone())?,
    )
    .await?;
    let done = wait_for(api, name, "the good spec rolled out", |o| {
        observed(o) && has(o, ("Ready", "True", "RolloutComplete"))
    })
    .await?;
    let build = done.data["status"]["currentVersion"]["buildID"]
        .as_str()
        .map(str::to_string);
    Ok(Rolled(build))
}

/// Nothing of a reported object was applied: no versioned Deployment but the good version's
/// (unchanged: still running, still Current), no owned-resource copy.
async fn nothing_applied(env: &Env, ns: &str, bad: &Value, good: Option<&Rolled>) -> Result<()> {
    let name = name_of(bad)?;
    match model_of(bad) {
        Some(Model::Worker) => {
            let live = versioned_deployments(env, ns, &name).await?;
            match good {
                None => ensure!(
                    live.is_empty(),
                    "acted on an invalid spec: {} Deployments",
                    live.len()
                ),
                Some(Rolled(build)) => {
                    ensure!(
                        live.len() == 1,
                        "{} Deployments after a refused update",
                        live.len()
                    );
                    let ready = live[0]
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_replicas)
                        .unwrap_or(0);
                    ensure!(ready >= 1, "the good version was scaled down");
                    let api = dynamic_api(&env.client, ns, bad)?;
                    let now = api.get(&name).await?;
                    ensure!(
                        now.data["status"]["currentVersion"]["buildID"].as_str()
                            == build.as_deref(),
                        "the Current version changed: {}",
                        now.data["status"]["currentVersion"]
                    );
                }
            }
        }
        Some(Model::Template) => {
            let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(env.client.clone(), ns);
            let copies = hpas.list(&ListParams::default()).await?.items;
            ensure!(copies.is_empty(), "{} copies applied", copies.len());
        }
        Some(Model::Connection) | None => {}
    }
    Ok(())
}

/// The versioned Deployments of worker `name`.
async fn versioned_deployments(env: &Env, ns: &str, name: &str) -> Result<Vec<Deployment>> {
    let label = format!(
        "{}={}",
        temporal_worker_controller::api::LABEL_DEPLOYMENT_NAME,
        temporal_worker_controller::render::label_value(name)
    );
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), ns);
    Ok(deployments
        .list(&ListParams::default().labels(&label))
        .await?
        .items)
}

/// One request to the status API over plain HTTP/1.1: `(code, body)`.
async fn request(addr: SocketAddr, method: &str, path: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await??;
    let text = String::from_utf8_lossy(&raw).to_string();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status line")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The documented error: `code`, and the body `{"error": {"code", "message"}}` of
/// docs/openapi.yaml holding `fragment`.
async fn answer(env: &Env, method: &str, path: &str, code: u16, fragment: &str) -> Result<String> {
    let (got, body) = request(env.http_addr, method, path).await?;
    ensure!(got == code, "{method} {path}: {got}, want {code}: {body}");
    let error: Value = serde_json::from_str(&body).with_context(|| format!("not JSON: {body}"))?;
    ensure!(error["error"]["code"] == code, "{body}");
    let message = error["error"]["message"]
        .as_str()
        .context("no error.message")?;
    ensure!(holds(&body, fragment), "{fragment:?} not in {body}");
    Ok(format!("{code}: {}", short(message)))
}

/// Runs every row of `rows` (each of our kinds under both kind sets), at most [`PARALLEL`] at
/// once, and fails listing every row that did not hold.
async fn run_rows(rows: Vec<Case>) -> Result<()> {
    let env = env().await;
    let runs: Vec<(Case, Option<KindSet>)> = rows
        .into_iter()
        .flat_map(|case| match model_of(&case.bad) {
            Some(_) => KindSet::ALL
                .iter()
                .map(|s| (case.clone(), Some(*s)))
                .collect::<Vec<_>>(),
            None => vec![(case, None)],
        })
        .collect();
    let total = runs.len();
    let results: Vec<(String, Result<String>)> = futures::stream::iter(runs)
        .map(|(case, set)| {
            let env = env.clone();
            async move {
                let label = format!(
                    "{} [{}]",
                    case.id,
                    set.map_or("status API", |s| s.kind(Model::Worker))
                );
                let result = tokio::time::timeout(T * 2, run_one(&env, &case, set))
                    .await
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {:?}", T * 2)));
                (label, result)
            }
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let mut failed = Vec::new();
    for (label, result) in results {
        match result {
            Ok(line) => println!("ok   {label}: {line}"),
            Err(e) => {
                println!("FAIL {label}: {e:#}");
                failed.push(label);
            }
        }
    }
    println!("bad inputs: {} of {total} held", total - failed.len());
    let panics = CONTROLLER_PANICS
        .lock()
        .map(|p| p.clone())
        .unwrap_or_default();
    ensure!(panics.is_empty(), "the controller panicked: {panics:?}");
    ensure!(
        failed.is_empty(),
        "{} rows did not hold: {failed:?}",
        failed.len()
    );
    Ok(())
}

async fn run_one(env: &Env, case: &Case, set: Option<KindSet>) -> Result<String> {
    if let Expect::Http {
        path,
        method,
        code,
        fragment,
    } = &case.expect
    {
        return answer(env, method, path, *code, fragment).await;
    }
    let set = set.context("a row of our kinds without a kind set")?;
    run(env, case, set).await
}

// ---------------------------------------------------------------------------------------------
// The tests.

fn rows(reported: bool) -> Vec<Case> {
    table()
        .into_iter()
        .filter(|c| matches!(c.expect, Expect::Reported { .. }) == reported)
        .collect()
}

#[test]
fn every_bad_input_is_refused_with_a_message_naming_the_field() -> Result<()> {
    test_harness::runtime::block_on(run_rows(rows(false)))
}

#[test]
fn every_bad_input_admitted_without_the_webhook_is_reported_and_never_applied() -> Result<()> {
    test_harness::runtime::block_on(run_rows(rows(true)))
}

/// What each refusal above leaves open is admitted: one replica or none (an autoscaler owns
/// them), pausing or aborting a Progressive rollout, and a Deployment name to adopt.
#[test]
fn the_good_neighbours_of_the_bad_inputs_are_admitted() -> Result<()> {
    test_harness::runtime::block_on(async {
        let env = env().await;
        let steps = json!([step(json!(10), "1m")]);
        let good = [
            twd("one-replica", json!({})),
            manifests::twd("no-replicas")
                .rollout(json!({"strategy": "AllAtOnce"}))
                .build(),
            twd(
                "progressive-paused",
                rollout(json!({"strategy": "Progressive", "steps": steps, "paused": true})),
            ),
            twd(
                "progressive-abort",
                rollout(json!({"strategy": "Progressive", "steps": steps, "abort": true})),
            ),
            twd(
                "adopt-good-name",
                json!({"adopt": {"deploymentName": "orders-worker.v1", "afterAdoption": "Delete"}}),
            ),
        ];
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        for set in KindSet::ALL {
            let ns = namespace(set, false);
            let input = secret("gate-input", json!({"other": "{}", "garbled": "{\"a\": 1"}));
            match dynamic_api(&env.client, &ns, &input)?
                .create(&PostParams::default(), &serde_json::from_value(input)?)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            // The gate rows' Secret holds this key.
            let gated = twd(
                "gate-input-present",
                gate_from("secretKeyRef", "gate-input", "other"),
            );
            for object in good.iter().chain([&gated]) {
                let object = in_set(object.clone(), set);
                let api = dynamic_api(&env.client, &ns, &object)?;
                api.create(&dry_run, &serde_json::from_value(object.clone())?)
                    .await
                    .with_context(|| format!("refused: {object}"))?;
            }
        }
        Ok(())
    })
}

/// The table holds at least 40 cases, each id once, every model, every way of refusing.
#[test]
fn the_table_covers_every_kind_and_every_way_of_refusing() {
    let table = table();
    assert!(table.len() >= 40, "only {} cases", table.len());
    let mut ids: Vec<&str> = table.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), table.len(), "an id is used twice");
    for model in Model::ALL {
        assert!(
            table.iter().any(|c| model_of(&c.bad) == Some(model)),
            "no case for {model:?}"
        );
    }
    for by in [By::Schema, By::Cel, By::Webhook, By::ApiServer] {
        assert!(
            table
                .iter()
                .any(|c| matches!(c.expect, Expect::Refused { by: b, .. } if b == by)),
            "no case refused by {by:?}"
        );
    }
    assert!(
        table
            .iter()
            .any(|c| matches!(c.expect, Expect::Reported { .. }))
    );
    assert!(
        table
            .iter()
            .any(|c| matches!(c.expect, Expect::Http { .. }))
    );
    assert!(
        table
            .iter()
            .any(|c| c.before.is_some() && matches!(c.expect, Expect::Reported { .. }))
    );
}

/// Every Connection kind (ClusterConnection too) bounds `hostPort` (its length, and its port by a CEL rule the rows above
/// run on the real API server).
#[test]
fn the_port_rule_is_in_both_connection_schemas() {
    use temporal_worker_controller::api::connection::{HOST_PORT_MESSAGE, HOST_PORT_RULE};
    let files = temporal_worker_controller::generate::crds::files();
    let connections: Vec<&String> = files
        .iter()
        .filter(|(f, _)| f.contains("connections"))
        .map(|(_, yaml)| yaml)
        .collect();
    assert_eq!(
        connections.len(),
        3,
        "Connection, TemporalConnection, ClusterConnection"
    );
    for yaml in connections {
        let crd: Value = serde_yaml::from_str(yaml).expect("crd yaml");
        let host_port = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["hostPort"];
        assert_eq!(host_port["maxLength"], 260, "{host_port}");
        assert_eq!(
            host_port["x-kubernetes-validations"][0]["rule"],
            HOST_PORT_RULE
        );
        assert_eq!(
            host_port["x-kubernetes-validations"][0]["message"],
            HOST_PORT_MESSAGE
        );
    }
}

/// The controller refuses `spec.replicas: 0` too (an object stored before the CEL rule keeps its
/// 0 through CEL ratcheting), with the same message as admission.
#[test]
fn zero_replicas_are_refused_by_the_controller_with_the_admission_message() {
    use temporal_worker_controller::api::TemporalWorkerDeployment;
    use temporal_worker_controller::worker_deployment::validate::{self, REPLICAS_ZERO};

    let files = temporal_worker_controller::generate::crds::files();
    let (_, yaml) = files
        .iter()
        .find(|(f, _)| f.starts_with("temporalworkerdeployments"))
        .expect("twd crd");
    let crd: serde_json::Value = serde_yaml::from_str(yaml).expect("crd yaml");
    let rules = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["replicas"]["x-kubernetes-validations"];
    assert_eq!(rules[0]["rule"], "self >= 1", "{rules}");
    assert_eq!(rules[0]["message"], REPLICAS_ZERO, "{rules}");

    let twd = |replicas: i32| -> TemporalWorkerDeployment {
        let twd = manifests::twd("orders")
            .namespace("shop")
            .replicas(replicas.into())
            .image("orders:v1")
            .rollout(serde_json::json!({"strategy": "AllAtOnce"}))
            .connection("prod");
        serde_json::from_value(twd.build()).expect("a TWD")
    };
    let settings = validate::ControllerSettings::default();
    let refused = validate::desired(&twd(0), &settings).expect_err("replicas 0 accepted");
    assert_eq!(refused.message, REPLICAS_ZERO);
    assert_eq!(
        validate::desired(&twd(1), &settings).map(|d| d.replicas),
        Ok(Some(1))
    );
}
