//! The Helm chart, linted and rendered by the real `helm` CLI (Helm 4 at the version pinned in
//! `tools/helm/versions.env`) for several value sets, with assertions on what it renders.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Value, json};
use test_harness::gitops::repo_root;

const CHART: &str = "charts/temporal-worker-controller";
const CRD_CHART: &str = "charts/temporal-worker-controller-crds";
const NS: &str = "temporal-system";
const RELEASE: &str = "twc";
const FULLNAME: &str = "twc-temporal-worker-controller";
/// Where releases publish the image (README, "Releases"); the chart's default repository.
const DEFAULT_IMAGE: &str = "ghcr.io/temporalio/temporal-worker-controller-rs";

#[derive(Deserialize)]
struct HelmOutput {
    helm_version: String,
    crds: Vec<String>,
    results: Vec<CaseResult>,
}

#[derive(Deserialize)]
struct CaseResult {
    name: String,
    lint: Value,
    manifests: Option<BTreeMap<String, String>>,
    error: Option<String>,
}

/// Value sets under test, by name.
fn cases() -> Vec<(&'static str, Value)> {
    vec![
        ("default", json!({})),
        (
            "predecessors",
            json!({"controller": {"identityNamespaceUID": false, "predecessorIdentities": ["go-prod/*/<uuid>", "temporal-worker-controller"]}}),
        ),
        (
            "ha",
            json!({"replicas": 3, "leaderElection": {"enabled": true}, "serviceMonitor": {"enabled": true, "labels": {"release": "prom"}}}),
        ),
        (
            "custom",
            json!({
                "image": {"repository": "registry.example.com/platform/twc", "tag": "v9.1.0", "pullPolicy": "Always", "pullSecrets": [{"name": "regcred"}]},
                "ownedResourceKinds": [
                    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"]},
                    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"]}
                ],
                "watchNamespaces": ["team-a", "team-b"],
                "controller": {"identity": "prod-east", "installID": "cluster-east/twc", "idleInterval": "2m", "restInterval": "90s", "logFormat": "text", "maxVersionsIneligibleForDeletion": 50}
            }),
        ),
        (
            "digest",
            json!({"image": {"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}),
        ),
        ("webhook", json!({"webhook": {"enabled": true}})),
        ("webhook-off", json!({"webhook": {"enabled": false}})),
        (
            "webhook-off-unchecked",
            json!({"webhook": {"enabled": false, "kindsWithoutAccessCheck": ["PodDisruptionBudget", "ScaledObject"]}}),
        ),
        (
            "webhook-cert-manager",
            json!({"webhook": {"enabled": true, "certManager": {"enabled": true}}}),
        ),
        (
            "webhook-url",
            json!({
                "webhook": {"enabled": true, "url": "https://127.0.0.1:9443", "timeoutSeconds": 10,
                    "failurePolicy": {"ownedResources": "Ignore"}},
                "watchNamespaces": ["team-a"],
                "ownedResourceAllowedKinds": ["HorizontalPodAutoscaler", "ConfigMap"]
            }),
        ),
        (
            "webhook-url-with-path",
            json!({"webhook": {"enabled": true, "url": "https://127.0.0.1:9443/x"}}),
        ),
        (
            "single-no-lease",
            json!({"replicas": 1, "leaderElection": {"enabled": false}}),
        ),
        (
            "lease-off-default-replicas",
            json!({"leaderElection": {"enabled": false}}),
        ),
        (
            "own-affinity",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}}}),
        ),
        (
            "unsafe-replicas",
            json!({"replicas": 2, "leaderElection": {"enabled": false}}),
        ),
        (
            "wildcard-kind",
            json!({"ownedResourceKinds": [{"apiGroups": ["*"], "resources": ["*"]}]}),
        ),
        ("typo", json!({"replica": 3})),
        ("sharded", json!({"sharding": {"shards": ["a", "b"]}})),
        (
            "shard-named-default",
            json!({"sharding": {"shards": ["a", "default"]}}),
        ),
        (
            "token-review",
            json!({
                "statusApi": {"auth": {"mode": "token-review", "audiences": ["twc", "ops"], "protectMetrics": true}},
                "serviceMonitor": {"enabled": true},
                "watchNamespaces": ["team-a"]
            }),
        ),
        (
            "auth-options-without-mode",
            json!({"statusApi": {"auth": {"protectMetrics": true}}}),
        ),
        (
            "unknown-auth-mode",
            json!({"statusApi": {"auth": {"mode": "oidc"}}}),
        ),
        (
            "prometheus-rule",
            json!({"prometheusRule": {"enabled": true}}),
        ),
        (
            "prometheus-rule-custom",
            json!({"prometheusRule": {
                "enabled": true,
                "namespace": "monitoring",
                "labels": {"release": "kube-prometheus-stack"},
                "annotations": {"owner": "platform"},
                "alertLabels": {"team": "platform", "severity": "critical"},
                "alertAnnotations": {"runbook_url": "https://runbooks.example/twc"},
                "disabledAlerts": ["TemporalWorkerRolloutStepOverdue"],
                "interval": "30s",
                "additionalGroups": [{"name": "mine", "rules": [
                    {"alert": "TwcDown", "expr": "up{job=\"twc\"} == 0", "for": "5m"}]}]
            }}),
        ),
        (
            "prometheus-rule-unknown-alert",
            json!({"prometheusRule": {"enabled": true, "disabledAlerts": ["TemporalWorkerRolloutStuck"]}}),
        ),
        (
            "prometheus-rule-bad-label",
            json!({"prometheusRule": {"enabled": true, "alertLabels": {"team-name": "x"}}}),
        ),
        (
            "network-policy",
            test_harness::chart::network_policy_values(),
        ),
        (
            "network-policy-defaults",
            json!({"networkPolicy": {"enabled": true}}),
        ),
        (
            "production",
            json!({
                "commonLabels": {"team": "platform", "cost-centre": "42"},
                "revisionHistoryLimit": 3,
                "podDisruptionBudget": {"maxUnavailable": "50%"},
                "tests": {"enabled": false},
                "rbac": {"aggregateToDefaultRoles": false}
            }),
        ),
        (
            "pdb-off",
            json!({"podDisruptionBudget": {"enabled": false}}),
        ),
        (
            "dashboards",
            json!({"dashboards": {"enabled": true, "namespace": "monitoring",
                "annotations": {"grafana_folder": "Temporal"}}}),
        ),
        (
            "metrics-own-token",
            json!({
                "statusApi": {"auth": {"mode": "token-review", "protectMetrics": true}},
                "serviceMonitor": {"enabled": true, "tokenSecret": "prometheus-twc-token"}
            }),
        ),
        (
            "cert-secret-cert-manager",
            json!({"webhook": {"certSecretName": "webhook-server-cert", "certManager": {"enabled": true}}}),
        ),
    ]
}

fn helm() -> &'static HelmOutput {
    static OUT: OnceLock<HelmOutput> = OnceLock::new();
    OUT.get_or_init(|| run_helm(CHART, cases()))
}

/// The CRD chart, rendered with no values (it has none).
fn crd_chart() -> &'static HelmOutput {
    static OUT: OnceLock<HelmOutput> = OnceLock::new();
    OUT.get_or_init(|| run_helm(CRD_CHART, vec![("default", json!({}))]))
}

fn run_helm(chart: &str, cases: Vec<(&'static str, Value)>) -> HelmOutput {
    let root = repo_root();
    let request = json!({
        "chart": root.join(chart),
        "cases": cases.into_iter().map(|(name, values)| json!({"name": name, "values": values, "release": RELEASE, "namespace": NS})).collect::<Vec<_>>(),
    });
    let doc = test_harness::chart::helm_driver("helm_chart.py", &request).expect("helm driver");
    serde_json::from_value(doc).expect("driver JSON")
}

fn result(name: &str) -> &'static CaseResult {
    case_of(helm(), name)
}

/// Case `name` of one Helm run.
fn case_of(out: &'static HelmOutput, name: &str) -> &'static CaseResult {
    out.results
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

/// Every rendered Kubernetes object of a case (NOTES.txt and empty documents skipped).
fn objects(name: &str) -> Vec<Value> {
    objects_of(result(name))
}

/// [`objects`] of a case of any Helm run.
fn objects_of(r: &CaseResult) -> Vec<Value> {
    let name = &r.name;
    let manifests = r
        .manifests
        .as_ref()
        .unwrap_or_else(|| panic!("{name} did not render: {:?}", r.error));
    let mut objs = Vec::new();
    for (template, text) in manifests {
        if !template.ends_with(".yaml") {
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v = Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{name}: {template} is not YAML: {e}\n{text}"));
            if !v.is_null() {
                objs.push(v);
            }
        }
    }
    objs
}

fn of_kind<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objs, kind);
    assert_eq!(found.len(), 1, "expected one {kind}, got {}", found.len());
    found[0]
}

/// The controller's ServiceAccount (with protected metrics, the scraper has one of its own).
fn controller_service_account(objs: &[Value]) -> &Value {
    let found: Vec<&Value> = of_kind(objs, "ServiceAccount")
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["app.kubernetes.io/component"] != "metrics")
        .collect();
    assert_eq!(found.len(), 1, "expected one controller ServiceAccount");
    found[0]
}

/// The controller's own Service (the webhook, on by default, has one of its own).
fn controller_service(objs: &[Value]) -> &Value {
    let found: Vec<&Value> = of_kind(objs, "Service")
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["app.kubernetes.io/component"] == "controller")
        .collect();
    assert_eq!(found.len(), 1, "expected one controller Service");
    found[0]
}

fn manager(objs: &[Value]) -> &Value {
    let containers = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    containers
        .iter()
        .find(|c| c["name"] == "manager")
        .expect("manager container")
}

fn args(objs: &[Value]) -> Vec<String> {
    manager(objs)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn chart_lints_clean_for_every_valid_value_set() {
    // The real helm CLI at the pinned version (tools/helm/versions.env), which is Helm 4.
    let pinned = test_harness::helm::pinned_version();
    assert!(pinned.starts_with("v4."), "the pin is not Helm 4: {pinned}");
    assert_eq!(helm().helm_version, pinned, "not the pinned helm");
    for name in [
        "default",
        "ha",
        "custom",
        "digest",
        "webhook",
        "webhook-cert-manager",
        "webhook-url",
        "webhook-off",
        "webhook-off-unchecked",
        "single-no-lease",
        "token-review",
        "predecessors",
        "own-affinity",
        "prometheus-rule",
        "prometheus-rule-custom",
        "sharded",
        "network-policy",
        "network-policy-defaults",
        "production",
        "pdb-off",
        "dashboards",
        "metrics-own-token",
        "cert-secret-cert-manager",
    ] {
        let lint = &result(name).lint;
        assert_eq!(lint["total_charts_linted"], 1, "{name}: {lint}");
        assert!(strings(&lint["errors"]).is_empty(), "{name}: {lint}");
        // severity 2 = warning, 3 = error; info (1) such as "icon is recommended" is fine.
        let serious: Vec<&Value> = lint["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["severity"].as_i64().unwrap_or(0) >= 2)
            .collect();
        assert!(serious.is_empty(), "{name}: {serious:?}");
        assert!(
            result(name).error.is_none(),
            "{name}: {:?}",
            result(name).error
        );
    }
}

/// `sharding.shards: [a, b]`: the default shard keeps the unsharded Deployment (name and
/// selector), each named shard gets its own with a selector of its own; every Deployment's
/// flags parse as the binary parses them, and their shard selectors give every object exactly
/// one shard.
#[test]
fn sharded_install_renders_one_deployment_per_shard_and_a_default() {
    use temporal_worker_controller::run::args::RunArgs;
    let objs = objects("sharded");
    let deployments = of_kind(&objs, "Deployment");
    let names: Vec<&str> = deployments
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    let unsharded = objects("default");
    let unsharded = one(&unsharded, "Deployment");
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(
        names[0], unsharded["metadata"]["name"],
        "the default shard keeps the Deployment"
    );
    assert_eq!(
        deployments[0]["spec"]["selector"],
        unsharded["spec"]["selector"]
    );
    let selectors: std::collections::BTreeSet<String> = deployments
        .iter()
        .map(|d| d["spec"]["selector"].to_string())
        .collect();
    assert_eq!(selectors.len(), 3, "two Deployments select alike");
    let shards: Vec<temporal_worker_controller::shard::Shard> = deployments
        .iter()
        .map(|d| {
            let container = &d["spec"]["template"]["spec"]["containers"][0];
            let argv: Vec<String> = strings(&container["args"])[1..]
                .iter()
                .map(|a| a.to_string())
                .collect();
            let opts = RunArgs::from_flags(&argv)
                .expect("flags parse")
                .options()
                .expect("options");
            opts.shard.expect("a shard")
        })
        .collect();
    let shard_names: Vec<&str> = shards.iter().map(|s| s.name()).collect();
    assert_eq!(shard_names, ["default", "a", "b"]);
    for (labels, owner) in [
        (json!({"sharding.temporal.io/key": "a"}), "a"),
        (json!({"sharding.temporal.io/key": "b"}), "b"),
        (json!({}), "default"),
        (
            json!({"sharding.temporal.io/key": "c", "team": "x"}),
            "default",
        ),
    ] {
        let labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(labels.clone()).expect("labels");
        let owners: Vec<&str> = shards
            .iter()
            .filter(|s| s.matches(&labels))
            .map(|s| s.name())
            .collect();
        assert_eq!(owners, [owner], "{labels:?}");
    }
    let refused = result("shard-named-default");
    assert!(
        refused
            .error
            .as_deref()
            .is_some_and(|e| e.contains("is not a shard name")),
        "{:?}",
        refused.error
    );
}

#[test]
fn bad_values_are_refused_by_schema_or_template() {
    let unsafe_ha = result("unsafe-replicas");
    assert!(
        unsafe_ha
            .error
            .as_deref()
            .is_some_and(|e| e.contains("leader election")),
        "{:?}",
        unsafe_ha.error
    );
    let wildcard = result("wildcard-kind");
    assert!(wildcard.error.is_some(), "a wildcard owned kind rendered");
    assert!(
        !strings(&wildcard.lint["errors"]).is_empty(),
        "lint accepted a wildcard owned kind"
    );
    let half_auth = result("auth-options-without-mode");
    assert!(
        half_auth
            .error
            .as_deref()
            .is_some_and(|e| e.contains("statusApi.auth.mode=token-review")),
        "{:?}",
        half_auth.error
    );
    assert!(
        result("unknown-auth-mode").error.is_some(),
        "an unknown auth mode rendered"
    );
    let with_path = result("webhook-url-with-path");
    assert!(
        with_path.error.is_some(),
        "a webhook.url with a path rendered (the chart appends the paths)"
    );
    // Two replicas are the default, so turning leader election off needs `replicas: 1`.
    let lease_off = result("lease-off-default-replicas");
    assert!(
        lease_off
            .error
            .as_deref()
            .is_some_and(|e| e.contains("leader election")),
        "{:?}",
        lease_off.error
    );
    let typo = result("typo");
    assert!(
        typo.error.as_deref().is_some_and(|e| e.contains("replica")),
        "{:?}",
        typo.error
    );
}

#[test]
fn default_install_renders_the_expected_objects_and_args() {
    let objs = objects("default");
    assert_default_kinds_namespace_and_labels(&objs);
    let deploy = one(&objs, "Deployment");
    assert_eq!(deploy["metadata"]["name"], FULLNAME);
    // Two replicas by default (as the Go chart), on different nodes where possible.
    assert_eq!(deploy["spec"]["replicas"], 2);
    let anti = &deploy["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
    for (k, v) in anti["labelSelector"]["matchLabels"]
        .as_object()
        .expect("anti-affinity selector")
    {
        assert_eq!(
            &deploy["spec"]["template"]["metadata"]["labels"][k], v,
            "anti-affinity label {k}"
        );
    }
    assert_default_args_are_the_binarys_defaults(&objs);
    let m = manager(&objs);
    // The default tag is the chart's appVersion, which the release command keeps equal to Cargo's.
    let image = format!("{DEFAULT_IMAGE}:{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(m["image"], image.as_str());
    let env: BTreeMap<&str, &str> = m["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?,
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str()?,
            ))
        })
        .collect();
    assert_eq!(env.get("POD_NAMESPACE"), Some(&"metadata.namespace"));
    assert_eq!(env.get("POD_NAME"), Some(&"metadata.name"));
    let sa = one(&objs, "ServiceAccount");
    assert_eq!(
        deploy["spec"]["template"]["spec"]["serviceAccountName"],
        sa["metadata"]["name"]
    );
    // The selector must match the pod labels, and the Service must select the pods.
    let pod_labels = &deploy["spec"]["template"]["metadata"]["labels"];
    for (k, v) in deploy["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector")
    {
        assert_eq!(&pod_labels[k], v, "selector label {k}");
    }
    let svc = controller_service(&objs);
    for (k, v) in svc["spec"]["selector"]
        .as_object()
        .expect("service selector")
    {
        assert_eq!(&pod_labels[k], v, "service selector label {k}");
    }
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
}

/// The default install renders the controller's kinds and no optional ones, all in the
/// release namespace (but cluster-wide RBAC) and labelled with the release.
fn assert_default_kinds_namespace_and_labels(objs: &[Value]) {
    for kind in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
    ] {
        assert!(
            !of_kind(objs, kind).is_empty(),
            "default install lacks a {kind}"
        );
    }
    for kind in ["ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"] {
        assert!(
            of_kind(objs, kind).is_empty(),
            "default install renders a {kind}"
        );
    }
    for o in objs {
        let cluster_scoped = [
            "ClusterRole",
            "ClusterRoleBinding",
            "ValidatingWebhookConfiguration",
        ];
        if !cluster_scoped.contains(&o["kind"].as_str().unwrap_or_default()) {
            assert_eq!(
                o["metadata"]["namespace"], NS,
                "{} {}",
                o["kind"], o["metadata"]["name"]
            );
        }
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/instance"],
            RELEASE
        );
    }
}

/// The default arguments, and among them the binary's own defaults (docs/temporal-budget.md).
fn assert_default_args_are_the_binarys_defaults(objs: &[Value]) {
    assert_eq!(
        args(objs),
        [
            "run",
            "--http-addr=0.0.0.0:8080",
            "--leader-elect",
            "--lease-name=temporal-worker-controller",
            &format!("--lease-namespace={NS}"),
            &format!("--identity={FULLNAME}"),
            // Not the binary's default: a chart install knows its namespace (issue 26 item 7).
            "--identity-namespace-uid",
            "--idle-interval=60s",
            "--rest-interval=5m",
            // The Kubernetes Deployment default, as the binary's (`--default-progress-deadline`).
            "--default-progress-deadline=10m",
            "--poller-live-threshold=2m",
            "--poller-check-interval=5m",
            "--max-versions-ineligible-for-deletion=75",
            "--log-format=json",
            "--temporal-qps=50",
            "--temporal-visibility-qps=8",
            "--temporal-routing-qps=20",
            "--temporal-deployment-qps=10",
            "--max-concurrent-reconciles=16",
            "--certificate-expiry-warning=14d",
            "--owned-resource-kinds=HorizontalPodAutoscaler,PodDisruptionBudget,ScaledObject",
            // The webhook, on by default, with self-managed certificates.
            "--webhook-port=9443",
            &format!("--webhook-service-name={FULLNAME}-webhook"),
            "--webhook-cert-mode=self-managed",
            &format!("--webhook-secret-name={FULLNAME}-webhook-tls"),
            &format!("--webhook-configuration-name={FULLNAME}-{NS}"),
            "--webhook-cert-validity=8760h",
            "--webhook-cert-renew-before=720h",
            "--webhook-cert-check-interval=30s",
        ]
    );
    // The chart installs the binary's own defaults (docs/temporal-budget.md).
    let budget = temporal_worker_controller::temporal::BudgetConfig::DEFAULT;
    let rendered = args(objs);
    for (flag, value) in [
        ("--temporal-qps", budget.shared),
        ("--temporal-visibility-qps", budget.visibility),
        ("--temporal-routing-qps", budget.routing),
        ("--temporal-deployment-qps", budget.per_deployment),
    ] {
        assert!(
            rendered.contains(&format!("{flag}={value}")),
            "{flag} is not the binary's default {value}: {rendered:?}"
        );
    }
    // The poller health flags above are the binary's defaults too.
    use temporal_worker_controller::planner::poller_health;
    assert_eq!(poller_health::DEFAULT_LIVE_WITHIN.as_secs(), 2 * 60);
    assert_eq!(poller_health::DEFAULT_INTERVAL.as_secs(), 5 * 60);
    assert!(rendered.contains(&format!(
        "--max-concurrent-reconciles={}",
        temporal_worker_controller::run::defaults::MAX_CONCURRENT_RECONCILES
    )));
}

#[test]
fn probes_ports_security_and_resources() {
    for name in ["default", "ha", "custom", "webhook"] {
        let objs = objects(name);
        let m = manager(&objs);
        let ports = m["ports"].as_array().expect("ports");
        assert!(
            ports
                .iter()
                .any(|p| p["name"] == "http" && p["containerPort"] == 8080),
            "{name}: {ports:?}"
        );
        assert_eq!(m["livenessProbe"]["httpGet"]["path"], "/healthz", "{name}");
        assert_eq!(m["livenessProbe"]["httpGet"]["port"], "http", "{name}");
        assert_eq!(m["readinessProbe"]["httpGet"]["path"], "/readyz", "{name}");
        assert_eq!(m["readinessProbe"]["httpGet"]["port"], "http", "{name}");
        let sc = &m["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(sc["runAsNonRoot"], true, "{name}");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{name}");
        let pod = &one(&objs, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
        assert!(
            pod["securityContext"]["runAsUser"]
                .as_i64()
                .is_some_and(|u| u > 0),
            "{name}"
        );
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{name}"
        );
        for k in ["requests", "limits"] {
            assert!(
                m["resources"][k]["memory"].is_string() && m["resources"][k]["cpu"].is_string(),
                "{name}: resources.{k}"
            );
        }
        // A read-only root filesystem still needs a writable /tmp.
        assert!(
            m["volumeMounts"]
                .as_array()
                .expect("mounts")
                .iter()
                .any(|v| v["mountPath"] == "/tmp"),
            "{name}"
        );
    }
}

/// Every Role and ClusterRole rendered for the controller (not the end users' roles).
fn rules(objs: &[Value]) -> Vec<(&Value, &Value)> {
    objs.iter()
        .filter(|o| test_harness::chart::is_controller_role(o))
        .flat_map(|o| {
            o["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |r| (o, r))
        })
        .collect()
}

fn grants(objs: &[Value], group: &str, resource: &str, verb: &str) -> bool {
    rules(objs).iter().any(|(_, r)| {
        strings(&r["apiGroups"]).contains(&group)
            && strings(&r["resources"]).contains(&resource)
            && strings(&r["verbs"]).contains(&verb)
    })
}

#[test]
fn rbac_is_least_privilege_without_wildcards() {
    for name in [
        "default",
        "ha",
        "custom",
        "webhook",
        "webhook-off",
        "single-no-lease",
        "token-review",
    ] {
        let objs = objects(name);
        let all = rules(&objs);
        assert!(!all.is_empty(), "{name}: no RBAC rules");
        assert_no_wildcards_or_escalation(name, &all);
        assert_grants_exactly_what_the_controller_uses(name, &objs);
        let webhook_on = !of_kind(&objs, "ValidatingWebhookConfiguration").is_empty();
        assert_secret_writes_only_for_the_webhook_certificate(name, webhook_on, &all);
        assert_no_other_secret_or_twd_writes(name, &objs);
        assert_leases_only_in_the_release_namespace(name, &objs, &all);
        assert_bindings_point_at_the_charts_account_and_roles(name, &objs);
    }
}

fn assert_no_wildcards_or_escalation(name: &str, all: &[(&Value, &Value)]) {
    for (role, rule) in all {
        for field in [
            "apiGroups",
            "resources",
            "verbs",
            "resourceNames",
            "nonResourceURLs",
        ] {
            assert!(
                !strings(&rule[field]).iter().any(|s| s.contains('*')),
                "{name}: {} {} has a wildcard in {field}: {rule}",
                role["kind"],
                role["metadata"]["name"]
            );
        }
        // Nothing escalates: no RBAC, no impersonation, no pods/exec.
        assert!(
            !strings(&rule["verbs"])
                .iter()
                .any(|v| ["escalate", "bind", "impersonate"].contains(v)),
            "{name}: {rule}"
        );
        assert!(
            !strings(&rule["apiGroups"]).contains(&"rbac.authorization.k8s.io"),
            "{name}: {rule}"
        );
    }
}

/// Exactly what the controller uses (tests/rbac_grants.rs proves each from the e2e suite's
/// audit log); Secrets and ConfigMaps by name only.
fn assert_grants_exactly_what_the_controller_uses(name: &str, objs: &[Value]) {
    for (group, resource, verbs) in [
        (
            "temporal.io",
            "temporalworkerdeployments",
            &["list", "watch", "patch"][..],
        ),
        (
            "temporal.io",
            "temporalconnections",
            &["get", "list", "watch", "patch"],
        ),
        (
            "temporal.io",
            "temporalworkerdeployments/status",
            &["update"],
        ),
        (
            "temporal.io",
            "temporalworkerdeployments/finalizers",
            &["update"],
        ),
        (
            "apps",
            "deployments",
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        ("apps", "deployments/scale", &["patch"]),
        ("", "secrets", &["get"]),
        ("", "configmaps", &["get"]),
        ("events.k8s.io", "events", &["create", "patch"]),
    ] {
        for verb in verbs {
            assert!(
                grants(objs, group, resource, verb),
                "{name}: missing {verb} on {group}/{resource}"
            );
        }
    }
    // Secrets and ConfigMaps by name only, and no deletes of its own CRs.
    for verb in ["list", "watch", "create", "update", "patch", "delete"] {
        assert!(
            !grants(objs, "", "configmaps", verb),
            "{name}: {verb} on configmaps"
        );
    }
}

/// The only Secret writes: the webhook's own certificate Secret (self-managed certificates),
/// in the release namespace, changed by name only.
fn assert_secret_writes_only_for_the_webhook_certificate(
    name: &str,
    webhook_on: bool,
    all: &[(&Value, &Value)],
) {
    for (role, rule) in all {
        if !strings(&rule["resources"]).contains(&"secrets") {
            continue;
        }
        let verbs = strings(&rule["verbs"]);
        let writes: Vec<&&str> = verbs.iter().filter(|v| **v != "get").collect();
        if writes.is_empty() {
            continue;
        }
        assert!(webhook_on, "{name}: {writes:?} on secrets: {rule}");
        assert_eq!(role["kind"], "Role", "{rule}");
        assert_eq!(
            role["metadata"]["name"],
            format!("{FULLNAME}-webhook-certs")
        );
        assert_eq!(role["metadata"]["namespace"], NS);
        assert!(
            writes.iter().all(|v| ["create", "update"].contains(*v)),
            "{rule}"
        );
        if verbs.contains(&"update") {
            assert_eq!(
                strings(&rule["resourceNames"]),
                [format!("{FULLNAME}-webhook-tls").as_str()],
                "{rule}"
            );
        }
    }
}

/// No listing or changing Secrets, and no deletes or creates of its own CRs.
fn assert_no_other_secret_or_twd_writes(name: &str, objs: &[Value]) {
    for verb in ["list", "watch", "patch", "delete"] {
        assert!(
            !grants(objs, "", "secrets", verb),
            "{name}: {verb} on secrets"
        );
    }
    assert!(
        !grants(objs, "temporal.io", "temporalworkerdeployments", "delete"),
        "{name}"
    );
    assert!(
        !grants(objs, "temporal.io", "temporalworkerdeployments", "create"),
        "{name}"
    );
}

/// Leases: exactly what the lease manager uses, and only in the release namespace.
fn assert_leases_only_in_the_release_namespace(
    name: &str,
    objs: &[Value],
    all: &[(&Value, &Value)],
) {
    let lease_roles: Vec<&Value> = all
        .iter()
        .filter(|(_, r)| strings(&r["resources"]).contains(&"leases"))
        .map(|(o, _)| *o)
        .collect();
    if name == "single-no-lease" {
        assert!(
            lease_roles.is_empty(),
            "{name}: lease RBAC without leader election"
        );
        assert!(
            !args(objs)
                .iter()
                .any(|a| a.starts_with("--lease") || a == "--leader-elect"),
            "{name}"
        );
    } else {
        assert!(
            grants(objs, "coordination.k8s.io", "leases", "get")
                && grants(objs, "coordination.k8s.io", "leases", "create")
        );
        assert!(
            grants(objs, "coordination.k8s.io", "leases", "patch")
                && !grants(objs, "coordination.k8s.io", "leases", "update")
        );
        // A standby watches the Lease rather than polling it (src/run/leadership.rs).
        assert!(
            grants(objs, "coordination.k8s.io", "leases", "list")
                && grants(objs, "coordination.k8s.io", "leases", "watch")
        );
        assert!(
            lease_roles
                .iter()
                .all(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == NS),
            "{name}"
        );
    }
}

/// Every binding points at the chart's ServiceAccount and at a role it renders.
fn assert_bindings_point_at_the_charts_account_and_roles(name: &str, objs: &[Value]) {
    let sa = controller_service_account(objs)["metadata"]["name"].clone();
    for b in objs
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        assert_eq!(b["subjects"][0]["name"], sa, "{name}");
        assert_eq!(b["subjects"][0]["namespace"], NS, "{name}");
        let role_kind = b["roleRef"]["kind"].as_str().expect("roleRef.kind");
        assert!(
            objs.iter().any(|o| o["kind"] == role_kind
                && o["metadata"]["name"] == b["roleRef"]["name"]
                && o["metadata"]["namespace"] == b["metadata"]["namespace"]),
            "{name}: binding {} refers to a role the chart does not render",
            b["metadata"]["name"]
        );
    }
}

#[test]
fn leader_election_replicas_and_service_monitor() {
    let objs = objects("ha");
    assert_eq!(one(&objs, "Deployment")["spec"]["replicas"], 3);
    assert!(args(&objs).contains(&"--leader-elect".to_string()));
    let sm = one(&objs, "ServiceMonitor");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["metadata"]["labels"]["release"], "prom");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "http");
    assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
    // The ServiceMonitor must select the controller's Service, and that Service has the port.
    let svc = controller_service(&objs);
    for (k, v) in sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(
            &svc["metadata"]["labels"][k], v,
            "ServiceMonitor selector {k}"
        );
    }
    assert!(
        svc["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["name"] == "http")
    );
    assert_eq!(
        strings(&sm["spec"]["namespaceSelector"]["matchNames"]),
        [NS]
    );
}

/// The chart's alert rules as a Prometheus rule file: `files/alerts.yaml`, the one source.
fn chart_alert_file() -> Value {
    let path = repo_root().join(CHART).join("files/alerts.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).expect("files/alerts.yaml"))
        .expect("files/alerts.yaml is YAML")
}

/// `(alert, rule)` of every rule in `groups`.
fn alert_rules(groups: &Value) -> Vec<(String, Value)> {
    groups
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| Some((r["alert"].as_str()?.to_string(), r)))
        .collect()
}

/// `promtool check rules` on the `spec` of a rendered PrometheusRule, as a rule file.
fn promtool_check_rules(name: &str, rule: &Value) {
    let path = std::env::temp_dir().join(format!(
        "twc-helm-chart-rules-{name}-{}.yml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        serde_yaml::to_string(&json!({"groups": rule["spec"]["groups"]})).expect("YAML"),
    )
    .expect("writing the rule file");
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("running promtool (Debian package `prometheus`; run .ci/setup)");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{name}: promtool check rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn prometheus_rule_renders_the_charts_alerts_only_when_enabled() {
    assert!(of_kind(&objects("default"), "PrometheusRule").is_empty());
    let objs = objects("prometheus-rule");
    let rule = one(&objs, "PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["namespace"], NS);
    assert_eq!(rule["metadata"]["name"], FULLNAME);
    assert_eq!(
        rule["metadata"]["labels"]["app.kubernetes.io/instance"],
        RELEASE
    );
    // Exactly the rule file's groups: the file is the single source of the alerts.
    assert_eq!(rule["spec"]["groups"], chart_alert_file()["groups"]);
    let names: Vec<String> = alert_rules(&rule["spec"]["groups"])
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, SHIPPED_ALERTS);
    promtool_check_rules("prometheus-rule", rule);
}

/// Every alert the chart ships, in the file's order.
const SHIPPED_ALERTS: [&str; 12] = [
    "TemporalWorkerRolloutBlocked",
    "TemporalWorkerRolloutStepOverdue",
    "TemporalConnectionCertificateExpiring",
    "TemporalWorkerControllerAbsent",
    "TemporalWorkerControllerNoLeader",
    "TemporalWorkerControllerReconcileErrors",
    "TemporalWorkerControllerWorkQueueBehind",
    "TemporalConnectionUnreachable",
    "TemporalWorkerControllerWebhookErrors",
    "TemporalWorkerControllerWebhookSlow",
    "TemporalWorkerControllerWebhookCertificateExpiring",
    "TemporalWorkerControllerTemporalBudgetExhausted",
];

/// Where every alert's `runbook_url` points: its section of docs/runbooks.md.
const RUNBOOKS: &str =
    "https://github.com/temporalio/temporal-worker-controller-rs/blob/main/docs/runbooks.md";

/// The `## ` headings of a Markdown text.
fn sections(markdown: &str) -> Vec<&str> {
    markdown
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::trim)
        .collect()
}

/// Each alert links its own runbook section, the runbooks have a section for every alert and
/// nothing else, and the status API page's alert table lists every alert.
#[test]
fn every_alert_has_a_runbook_section_and_a_row_in_the_docs() {
    let file = alert_rules(&chart_alert_file()["groups"]);
    let runbooks = std::fs::read_to_string(repo_root().join("docs/runbooks.md")).expect("runbooks");
    let table = std::fs::read_to_string(repo_root().join("docs/status-api.md")).expect("docs");
    for (name, rule) in &file {
        // GitHub's anchor of a heading made of one word is that word in lower case.
        let want = format!("{RUNBOOKS}#{}", name.to_lowercase());
        assert_eq!(rule["annotations"]["runbook_url"], want.as_str(), "{name}");
        assert!(
            table.contains(&format!("| `{name}` |")),
            "{name} is not in docs/status-api.md's alert table"
        );
    }
    let names: Vec<&str> = file.iter().map(|(n, _)| n.as_str()).collect();
    let mut headings = sections(&runbooks);
    headings.sort_unstable();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        headings, sorted,
        "docs/runbooks.md sections against the alerts"
    );
}

#[test]
fn the_runbook_checker_reads_sections_only() {
    let md = "# Runbooks\n\n## A\ntext ## not\n### B\n## C \n";
    assert_eq!(sections(md), ["A", "C"]);
}

#[test]
fn prometheus_rule_values_label_place_and_trim_the_alerts() {
    let objs = objects("prometheus-rule-custom");
    let rule = one(&objs, "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "monitoring");
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    assert_eq!(rule["metadata"]["annotations"]["owner"], "platform");
    let groups = &rule["spec"]["groups"];
    assert_eq!(groups[0]["interval"], "30s");
    let alerts = alert_rules(groups);
    let names: Vec<&str> = alerts.iter().map(|(n, _)| n.as_str()).collect();
    let mut want: Vec<&str> = SHIPPED_ALERTS
        .into_iter()
        .filter(|n| *n != "TemporalWorkerRolloutStepOverdue")
        .collect();
    want.push("TwcDown");
    assert_eq!(names, want);
    let file = alert_rules(&chart_alert_file()["groups"]);
    for (name, r) in alerts.iter().filter(|(n, _)| n.starts_with("Temporal")) {
        // The user's alert labels win over the chart's; the rest is the file's.
        assert_eq!(r["labels"]["severity"], "critical", "{name}");
        assert_eq!(r["labels"]["team"], "platform", "{name}");
        assert_eq!(
            r["annotations"]["runbook_url"],
            "https://runbooks.example/twc"
        );
        let (_, original) = file.iter().find(|(n, _)| n == name).expect("in the file");
        assert_eq!(r["expr"], original["expr"], "{name}");
        assert_eq!(
            r["annotations"]["summary"], original["annotations"]["summary"],
            "{name}"
        );
    }
    promtool_check_rules("prometheus-rule-custom", rule);
    let unknown = result("prometheus-rule-unknown-alert");
    assert!(
        unknown
            .error
            .as_deref()
            .is_some_and(|e| e.contains("TemporalWorkerRolloutStuck")
                && e.contains("TemporalWorkerRolloutBlocked")),
        "a misspelt disabled alert must fail the render: {:?}",
        unknown.error
    );
    assert!(
        result("prometheus-rule-bad-label").error.is_some(),
        "an alert label Prometheus cannot take rendered"
    );
}

#[test]
fn own_affinity_replaces_the_default_anti_affinity() {
    let own =
        one(&objects("own-affinity"), "Deployment")["spec"]["template"]["spec"]["affinity"].clone();
    assert!(own["podAntiAffinity"].is_null(), "{own}");
    assert_eq!(
        own["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "pool"
    );
    // One replica has nobody to spread from.
    let objs = objects("single-no-lease");
    let single = one(&objs, "Deployment");
    assert_eq!(single["spec"]["replicas"], 1);
    assert!(single["spec"]["template"]["spec"]["affinity"].is_null());
}

#[test]
fn status_api_token_review_auth() {
    // Off by default: no flag, no TokenReview grant.
    let objs = objects("default");
    assert!(!args(&objs).iter().any(|a| a.starts_with("--api-auth")));
    assert!(!grants(
        &objs,
        "authentication.k8s.io",
        "tokenreviews",
        "create"
    ));

    let objs = objects("token-review");
    let a = args(&objs);
    for flag in [
        "--api-auth=token-review",
        "--api-auth-audiences=twc,ops",
        "--api-auth-metrics",
    ] {
        assert!(a.contains(&flag.to_string()), "{flag} missing from {a:?}");
    }
    // TokenReview is cluster-scoped: granted by a ClusterRole even for a namespaced install.
    let cluster_rule = rules(&objs).into_iter().any(|(role, r)| {
        role["kind"] == "ClusterRole"
            && strings(&r["apiGroups"]) == ["authentication.k8s.io"]
            && strings(&r["resources"]) == ["tokenreviews"]
            && strings(&r["verbs"]) == ["create"]
    });
    assert!(cluster_rule, "no ClusterRole for tokenreviews");
    let binding = of_kind(&objs, "ClusterRoleBinding")
        .into_iter()
        .find(|b| {
            b["roleRef"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-token-review"))
        })
        .expect("token-review ClusterRoleBinding");
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    // Prometheus must authenticate when /metrics is protected: with a token from a Secret
    // (`authorization`), not the deprecated `bearerTokenFile`.
    let sm = one(&objs, "ServiceMonitor");
    let endpoint = &sm["spec"]["endpoints"][0];
    assert!(endpoint.get("bearerTokenFile").is_none(), "{endpoint}");
    let token_secret = format!("{FULLNAME}-metrics-token");
    assert_eq!(
        endpoint["authorization"],
        json!({"type": "Bearer", "credentials": {"name": token_secret, "key": "token"}})
    );
    // The chart arranges the token: a ServiceAccount bound to nothing and its long-lived token
    // Secret, which Kubernetes fills and the controller's TokenReview authenticates.
    let secret = one(&objs, "Secret");
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    assert_eq!(secret["metadata"]["name"], token_secret.as_str());
    let reader = format!("{FULLNAME}-metrics-reader");
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.name"],
        reader.as_str()
    );
    let reader_sa = of_kind(&objs, "ServiceAccount")
        .into_iter()
        .find(|s| s["metadata"]["name"] == reader.as_str())
        .expect("the scraper's ServiceAccount");
    assert_eq!(reader_sa["automountServiceAccountToken"], false);
    assert!(
        objs.iter()
            .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
            .all(|b| b["subjects"][0]["name"] != reader.as_str()),
        "the scraper's ServiceAccount is granted something"
    );
    // A Secret of the user's own: used as is, nothing created.
    let objs = objects("metrics-own-token");
    let sm = one(&objs, "ServiceMonitor");
    assert_eq!(
        sm["spec"]["endpoints"][0]["authorization"]["credentials"]["name"],
        "prometheus-twc-token"
    );
    assert!(of_kind(&objs, "Secret").is_empty());
    assert_eq!(of_kind(&objs, "ServiceAccount").len(), 1);
    // /metrics open: no authorization.
    let objs = objects("ha");
    assert!(one(&objs, "ServiceMonitor")["spec"]["endpoints"][0]["authorization"].is_null());
}

#[test]
fn the_default_identity_is_cluster_unique_and_an_explicit_one_is_kept() {
    // Default: `--identity-namespace-uid`, and `get` on exactly the release Namespace.
    let objs = objects("default");
    let identity_rules: Vec<_> = rules(&objs)
        .into_iter()
        .filter(|(_, r)| strings(&r["resources"]) == ["namespaces"])
        .collect();
    assert_eq!(identity_rules.len(), 1, "{identity_rules:?}");
    let (role, rule) = identity_rules[0];
    assert_eq!(role["kind"], "ClusterRole");
    assert_eq!(strings(&rule["verbs"]), ["get"]);
    assert_eq!(strings(&rule["resourceNames"]), [NS]);
    let binding = of_kind(&objs, "ClusterRoleBinding")
        .into_iter()
        .find(|b| b["roleRef"]["name"] == role["metadata"]["name"])
        .expect("identity ClusterRoleBinding");
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    // An explicit identity is used as given (and namespaced installs grant nothing
    // cluster-wide): no suffix, no grant.
    let objs = objects("custom");
    assert!(!args(&objs).iter().any(|a| a == "--identity-namespace-uid"));
    assert!(
        rules(&objs)
            .into_iter()
            .all(|(_, r)| strings(&r["resources"]) != ["namespaces"])
    );
    // Predecessor identities pass through.
    let objs = objects("predecessors");
    assert!(
        args(&objs)
            .iter()
            .any(|a| a == "--predecessor-identities=go-prod/*/<uuid>,temporal-worker-controller"),
        "{:?}",
        args(&objs)
    );
    assert!(!args(&objs).iter().any(|a| a == "--identity-namespace-uid"));
}

#[test]
fn custom_image_owned_kinds_and_watch_namespaces() {
    let objs = objects("custom");
    let m = manager(&objs);
    assert_eq!(m["image"], "registry.example.com/platform/twc:v9.1.0");
    assert_eq!(m["imagePullPolicy"], "Always");
    assert_eq!(
        one(&objs, "Deployment")["spec"]["template"]["spec"]["imagePullSecrets"][0]["name"],
        "regcred"
    );
    let a = args(&objs);
    for want in [
        "--watch-namespaces=team-a,team-b",
        "--identity=prod-east",
        "--install-id=cluster-east/twc",
        "--idle-interval=2m",
        "--rest-interval=90s",
        "--log-format=text",
        "--max-versions-ineligible-for-deletion=50",
    ] {
        assert!(a.iter().any(|x| x == want), "missing {want} in {a:?}");
    }
    // Namespaced mode: one Role + RoleBinding per watched namespace; nothing cluster-wide for
    // the controller but the webhook's grant on its own (cluster-scoped)
    // ValidatingWebhookConfiguration. (The end users' roles aggregated into `edit` and `view`
    // grant the controller nothing.)
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        for o in of_kind(&objs, kind)
            .into_iter()
            .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] != "rbac")
        {
            assert_eq!(
                o["metadata"]["name"],
                format!("{FULLNAME}-{NS}-webhook"),
                "a cluster-wide {kind} in a namespaced install"
            );
        }
    }
    let manager_roles: Vec<&str> = of_kind(&objs, "Role")
        .into_iter()
        .filter(|r| {
            r["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-manager"))
        })
        .filter_map(|r| r["metadata"]["namespace"].as_str())
        .collect();
    assert_eq!(manager_roles, ["team-a", "team-b"]);
    for ns in ["team-a", "team-b"] {
        assert!(
            of_kind(&objs, "RoleBinding")
                .iter()
                .any(|b| b["metadata"]["namespace"] == ns)
        );
    }
    for (group, resource) in [
        ("autoscaling", "horizontalpodautoscalers"),
        ("policy", "poddisruptionbudgets"),
    ] {
        // Server-side apply (create + patch) and removal; nothing the controller never does.
        for (verb, granted) in [
            ("create", true),
            ("patch", true),
            ("delete", true),
            ("get", false),
            ("update", false),
        ] {
            assert_eq!(
                grants(&objs, group, resource, verb),
                granted,
                "{verb} on {group}/{resource}"
            );
        }
    }
    // The default kinds are HPAs and PDBs; KEDA is opt-in.
    let default = objects("default");
    assert!(grants(
        &default,
        "autoscaling",
        "horizontalpodautoscalers",
        "patch"
    ));
    assert!(grants(&default, "policy", "poddisruptionbudgets", "patch"));
    assert!(!grants(&default, "keda.sh", "scaledobjects", "patch"));

    let digest = objects("digest");
    assert_eq!(
        manager(&digest)["image"],
        format!(
            "{DEFAULT_IMAGE}@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        )
        .as_str()
    );
}

/// The one ValidatingWebhookConfiguration of a case, and its webhooks by resource.
fn webhooks(objs: &[Value]) -> (&Value, Value, Value) {
    let vwc = one(objs, "ValidatingWebhookConfiguration");
    // Each webhook covers the canonical kind and its seed alias.
    let by = |resources: [&str; 2]| {
        vwc["webhooks"]
            .as_array()
            .expect("webhooks")
            .iter()
            .find(|w| strings(&w["rules"][0]["resources"]) == resources)
            .unwrap_or_else(|| panic!("no webhook for {resources:?}"))
            .clone()
    };
    (
        vwc,
        by(["workerresourcetemplates", "temporalworkerownedresources"]),
        by(["workerdeployments", "temporalworkerdeployments"]),
    )
}

#[test]
fn webhook_is_on_by_default_with_self_managed_certificates() {
    // Issue 26 item 6: secure by default; the defaults render what the "webhook" case does.
    let objs = objects("default");
    let svc_name = format!("{FULLNAME}-webhook");
    let vwc_name = format!("{FULLNAME}-{NS}");
    assert_webhook_service_and_no_mounted_certificate(&objs, &svc_name);
    assert_webhook_configuration(&objs, &svc_name, &vwc_name);
    assert_webhook_args_and_grants(&objs, &svc_name, &vwc_name);
    assert!(
        args(&objs).contains(
            &"--owned-resource-kinds=HorizontalPodAutoscaler,PodDisruptionBudget,ScaledObject"
                .to_string()
        )
    );
    assert!(
        !args(&objs)
            .iter()
            .any(|a| a.starts_with("--owned-resource-kinds-without-access-check")),
        "the opt-out list is for the webhook-off install only"
    );
}

#[test]
fn the_webhook_opt_out_renders_no_webhook_and_names_the_unchecked_kinds() {
    for name in ["webhook-off", "webhook-off-unchecked"] {
        let objs = objects(name);
        assert!(
            of_kind(&objs, "ValidatingWebhookConfiguration").is_empty(),
            "{name}"
        );
        assert!(
            !args(&objs).iter().any(|a| a.starts_with("--webhook")),
            "{name}"
        );
        assert!(!grants(
            &objs,
            "authorization.k8s.io",
            "localsubjectaccessreviews",
            "create"
        ));
    }
    // Without a list the controller refuses every TWOR (its flag's default: none unchecked).
    assert!(
        !args(&objects("webhook-off"))
            .iter()
            .any(|a| a.starts_with("--owned-resource-kinds-without-access-check"))
    );
    assert!(args(&objects("webhook-off-unchecked")).contains(
        &"--owned-resource-kinds-without-access-check=PodDisruptionBudget,ScaledObject".to_string()
    ));
}

#[test]
fn webhook_manages_its_own_certificates_by_default() {
    let objs = objects("webhook");
    let svc_name = format!("{FULLNAME}-webhook");
    let vwc_name = format!("{FULLNAME}-{NS}");
    assert_webhook_service_and_no_mounted_certificate(&objs, &svc_name);
    assert_webhook_configuration(&objs, &svc_name, &vwc_name);
    assert_webhook_args_and_grants(&objs, &svc_name, &vwc_name);
}

/// The webhook's Service; no cert-manager objects, nothing mounted: the controller reads its
/// Secret via the API, so a missing Secret never keeps the pod from starting.
fn assert_webhook_service_and_no_mounted_certificate(objs: &[Value], svc_name: &str) {
    let svc = of_kind(objs, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == svc_name)
        .expect("webhook service");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "webhook");
    // No cert-manager objects, nothing mounted: the controller reads its Secret via the API,
    // so a missing Secret never keeps the pod from starting.
    assert!(of_kind(objs, "Certificate").is_empty());
    assert!(of_kind(objs, "Issuer").is_empty());
    assert!(
        manager(objs)["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .all(|m| m["name"] != "webhook-cert")
    );
    assert!(
        manager(objs)["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["name"] == "webhook" && p["containerPort"] == 9443)
    );
}

/// One configuration, named after the release namespace, its webhooks calling the Service
/// with a caBundle the controller sets.
fn assert_webhook_configuration(objs: &[Value], svc_name: &str, vwc_name: &str) {
    use temporal_worker_controller::webhook::{PATH_TWD, PATH_TWOR};
    let (vwc, twor, twd) = webhooks(objs);
    assert_eq!(vwc["metadata"]["name"], vwc_name);
    assert!(vwc["metadata"]["annotations"].is_null(), "{vwc}");
    for (w, path, policy) in [(&twor, PATH_TWOR, "Fail"), (&twd, PATH_TWD, "Ignore")] {
        assert_eq!(w["failurePolicy"], policy, "{w}");
        assert_eq!(w["sideEffects"], "None");
        assert_eq!(w["timeoutSeconds"], 5);
        assert_eq!(strings(&w["admissionReviewVersions"]), ["v1"]);
        // DELETE only where rights matter: deleting a TWOR deletes copies of its kind.
        let ops: &[&str] = if path == PATH_TWOR {
            &["CREATE", "UPDATE", "DELETE"]
        } else {
            &["CREATE", "UPDATE"]
        };
        assert_eq!(strings(&w["rules"][0]["operations"]), ops);
        assert_eq!(strings(&w["rules"][0]["apiGroups"]), ["temporal.io"]);
        let client = &w["clientConfig"]["service"];
        assert_eq!(client["name"], svc_name);
        assert_eq!(client["namespace"], NS);
        assert_eq!(client["path"], path);
        assert!(
            w["clientConfig"]["caBundle"].is_null(),
            "the controller sets it"
        );
        let sel = &w["namespaceSelector"]["matchExpressions"][0];
        assert_eq!(sel["key"], "kubernetes.io/metadata.name");
        assert_eq!(sel["operator"], "NotIn");
        assert_eq!(strings(&sel["values"]), ["kube-system"]);
    }
}

/// The webhook's flags; RBAC for the caBundle of this configuration only, and the
/// SubjectAccessReviews of the TWOR webhook.
fn assert_webhook_args_and_grants(objs: &[Value], svc_name: &str, vwc_name: &str) {
    let a = args(objs);
    for flag in [
        "--webhook-port=9443".to_string(),
        "--webhook-cert-mode=self-managed".to_string(),
        format!("--webhook-service-name={svc_name}"),
        format!("--webhook-secret-name={FULLNAME}-webhook-tls"),
        format!("--webhook-configuration-name={vwc_name}"),
        "--webhook-cert-validity=8760h".to_string(),
        "--webhook-cert-renew-before=720h".to_string(),
    ] {
        assert!(a.contains(&flag), "{flag} missing from {a:?}");
    }
    // caBundle of this configuration only, and the SubjectAccessReviews of the TWOR webhook.
    let vwc_rules: Vec<&Value> = rules(objs)
        .into_iter()
        .filter(|(_, r)| strings(&r["resources"]).contains(&"validatingwebhookconfigurations"))
        .map(|(_, r)| r)
        .collect();
    assert_eq!(vwc_rules.len(), 1);
    assert_eq!(strings(&vwc_rules[0]["verbs"]), ["get", "patch"]);
    assert_eq!(strings(&vwc_rules[0]["resourceNames"]), [vwc_name]);
    assert!(grants(
        objs,
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "create"
    ));
    assert!(!grants(
        objs,
        "authorization.k8s.io",
        "subjectaccessreviews",
        "create"
    ));
}

#[test]
fn webhook_with_cert_manager_mounts_its_certificate() {
    let objs = objects("webhook-cert-manager");
    let cert = one(&objs, "Certificate");
    let dns = strings(&cert["spec"]["dnsNames"]);
    assert!(
        dns.contains(&format!("{FULLNAME}-webhook.{NS}.svc").as_str()),
        "{dns:?}"
    );
    assert_eq!(
        cert["spec"]["issuerRef"]["name"],
        one(&objs, "Issuer")["metadata"]["name"]
    );
    let (vwc, _, _) = webhooks(&objs);
    assert_eq!(
        vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{NS}/{FULLNAME}-webhook")
    );
    let secret = cert["spec"]["secretName"].as_str().expect("secretName");
    let m = manager(&objs);
    let pod = &one(&objs, "Deployment")["spec"]["template"]["spec"];
    let vol = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .expect("cert volume");
    assert!(
        m["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .any(|vm| vm["name"] == vol["name"] && vm["readOnly"] == true),
        "certificate secret is not mounted"
    );
    let a = args(&objs);
    assert!(
        a.contains(&"--webhook-cert-mode=files".to_string()),
        "{a:?}"
    );
    // cert-manager writes the Secret and the caBundle: no grants for either.
    assert!(!grants(
        &objs,
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "patch"
    ));
    assert!(!grants(&objs, "", "secrets", "create"));
}

#[test]
fn webhook_by_url_for_a_controller_outside_the_cluster() {
    let objs = objects("webhook-url");
    assert!(
        !of_kind(&objs, "Service")
            .iter()
            .any(|s| s["metadata"]["name"] == format!("{FULLNAME}-webhook")),
        "no Service when the API server calls a URL"
    );
    let (_, twor, twd) = webhooks(&objs);
    assert_eq!(
        twor["clientConfig"]["url"],
        "https://127.0.0.1:9443/validate/temporalworkerownedresources"
    );
    assert_eq!(
        twd["clientConfig"]["url"],
        "https://127.0.0.1:9443/validate/temporalworkerdeployments"
    );
    assert_eq!(twor["failurePolicy"], "Ignore");
    assert_eq!(twor["timeoutSeconds"], 10);
    // watchNamespaces narrows what is sent to the webhook.
    let sel = &twd["namespaceSelector"]["matchExpressions"][0];
    assert_eq!(sel["operator"], "In");
    assert_eq!(strings(&sel["values"]), ["team-a"]);
    let a = args(&objs);
    assert!(
        a.contains(&"--webhook-hosts=127.0.0.1".to_string()),
        "{a:?}"
    );
    assert!(!a.iter().any(|x| x.starts_with("--webhook-service-name")));
    assert!(a.contains(&"--owned-resource-kinds=HorizontalPodAutoscaler,ConfigMap".to_string()));
}

#[test]
fn rendered_flags_exist_in_the_controller_binary() {
    // Catches drift between the chart and the CLI: every flag the chart passes must parse.
    let help = Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"))
        .args(["run", "--help"])
        .output()
        .expect("run binary");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success(),
        "`run --help` failed: {}{}",
        text,
        String::from_utf8_lossy(&help.stderr)
    );
    for name in [
        "default",
        "custom",
        "token-review",
        "webhook",
        "webhook-cert-manager",
        "webhook-url",
        "webhook-off-unchecked",
    ] {
        for arg in args(&objects(name)).iter().skip(1) {
            let flag = arg.split('=').next().unwrap_or_default();
            let listed = text.lines().any(|l| {
                l.split_whitespace()
                    .any(|w| w.trim_end_matches(',') == flag)
            });
            assert!(listed, "{name}: the binary does not accept {flag}:\n{text}");
        }
    }
}

/// The controller chart ships no CRDs (Helm would install a `crds/` directory once and never
/// upgrade it); the CRD chart renders exactly the generated CRDs, each kept on uninstall, lints
/// clean, and is released with the same version as the controller chart.
#[test]
fn the_crd_chart_renders_the_generated_crds_and_keeps_them() {
    assert!(
        helm().crds.is_empty() && !repo_root().join(CHART).join("crds").exists(),
        "the controller chart must not carry CRDs: {:?}",
        helm().crds
    );
    let out = crd_chart();
    assert!(
        out.crds.is_empty(),
        "CRDs must be templates: {:?}",
        out.crds
    );
    let r = &out.results[0];
    assert!(strings(&r.lint["errors"]).is_empty(), "{}", r.lint);
    let serious = r.lint["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["severity"].as_i64().unwrap_or(0) >= 2)
        .count();
    assert_eq!(serious, 0, "CRD chart lint: {}", r.lint);
    let mut rendered: Vec<Value> = Vec::new();
    for (template, text) in r.manifests.as_ref().expect("CRD chart renders") {
        if !template.ends_with(".yaml") {
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v = Value::deserialize(doc).expect("rendered CRD YAML");
            if !v.is_null() {
                rendered.push(v);
            }
        }
    }
    rendered.sort_by_key(|c| c["metadata"]["name"].as_str().map(str::to_string));
    let mut generated: Vec<Value> = temporal_worker_controller::generate::crds::files()
        .into_iter()
        .map(|(_, y)| serde_yaml::from_str(&y).expect("generated CRD"))
        .collect();
    generated.sort_by_key(|c| c["metadata"]["name"].as_str().map(str::to_string));
    assert_eq!(rendered.len(), generated.len());
    for (mut got, want) in rendered.into_iter().zip(generated) {
        let name = want["metadata"]["name"].clone();
        assert_eq!(
            got["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{name}"
        );
        got["metadata"]["annotations"]
            .as_object_mut()
            .expect("annotations")
            .remove("helm.sh/resource-policy");
        if got["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| a.is_empty())
        {
            got["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("annotations");
        }
        assert!(
            got == want,
            "the CRD chart renders {name} differently from crdgen"
        );
    }
    let chart_yaml = |chart: &str| -> Value {
        let text = std::fs::read_to_string(repo_root().join(chart).join("Chart.yaml"))
            .expect("Chart.yaml");
        serde_yaml::from_str(&text).expect("Chart.yaml YAML")
    };
    let (crds, controller) = (chart_yaml(CRD_CHART), chart_yaml(CHART));
    assert_eq!(
        crds["version"], controller["version"],
        "chart versions differ"
    );
    assert_eq!(crds["appVersion"], controller["appVersion"]);
}

#[test]
fn chart_readme_documents_the_crd_upgrade_story() {
    let readme =
        std::fs::read_to_string(repo_root().join(CHART).join("README.md")).expect("chart README");
    for needle in [
        "temporal-worker-controller-crds",
        "helm.sh/resource-policy: keep",
        "helm rollback",
        "meta.helm.sh/release-name",
    ] {
        assert!(
            readme.contains(needle),
            "chart README must mention {needle}"
        );
    }
}

/// The Go temporal-worker-controller chart's own default `values.yaml` (the pinned v1.8.1, read
/// from the module `tools/go-controller/build.sh` downloaded), as its users hand it to us.
fn go_default_values() -> Value {
    let build = test_harness::go_controller::GoControllerBuild::locate()
        .expect("the Go controller's module (tools/go-controller/build.sh)");
    let path = build
        .module_dir
        .join("helm/temporal-worker-controller/values.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn merged(mut base: Value, patch: Value) -> Value {
    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }
    merge(&mut base, patch);
    base
}

/// Our chart rendered with Go-shaped values.
fn go_helm() -> &'static HelmOutput {
    static OUT: OnceLock<HelmOutput> = OnceLock::new();
    OUT.get_or_init(|| {
        let go = go_default_values();
        run_helm(
            CHART,
            vec![
                ("go-defaults", go.clone()),
                (
                    "go-typo",
                    merged(go.clone(), json!({"metrics": {"disabelAuth": true}})),
                ),
                // The Go chart's main branch after v1.8.1 adds `kubeRBACProxy` (the sidecar's
                // image, arguments, security context, resources and mounts); written here with
                // those keys, values of our own.
                (
                    "go-later",
                    merged(
                        go.clone(),
                        json!({"kubeRBACProxy": {
                            "image": {"repository": "kube-rbac-proxy", "tag": "v0.14.1"},
                            "extraArgs": [], "containerSecurityContext": {},
                            "resources": {"requests": {"cpu": "5m"}}, "volumeMounts": []
                        }}),
                    ),
                ),
                // Its keys after v1.8.1: extraEnv, extraVolumes, extraVolumeMounts (PR #532) and
                // webhook.certSecretName (PR #574), top level as there.
                ("go-later-keys", merged(go.clone(), go_later_keys())),
                (
                    "go-neither",
                    merged(
                        go.clone(),
                        json!({"extraVolumesMounts": [{"name": "x", "mountPath": "/x"}]}),
                    ),
                ),
                (
                    "go-mapped",
                    merged(
                        go,
                        json!({
                            "rbac": {"restrictWatchNamespaces": ["team-a", "team-b"], "createEndUserRoles": false},
                            "workerResourceTemplate": {"allowedResources": [
                                {"kinds": ["HorizontalPodAutoscaler"], "apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"]},
                                {"kinds": ["PodDisruptionBudget"], "apiGroups": ["policy"], "resources": ["poddisruptionbudgets"]}
                            ]},
                            "prometheus": {"enabled": true},
                            "metrics": {"disableAuth": false},
                            "statusApi": {"auth": {"mode": "token-review"}},
                            "priority": 1000
                        }),
                    ),
                ),
            ],
        )
    })
}

fn go_result(name: &str) -> &'static CaseResult {
    case_of(go_helm(), name)
}

fn go_objects(name: &str) -> Vec<Value> {
    objects_of(go_result(name))
}

fn go_notes(name: &str) -> String {
    go_result(name)
        .manifests
        .as_ref()
        .and_then(|m| m.iter().find(|(t, _)| t.ends_with("NOTES.txt")))
        .map(|(_, text)| text.clone())
        .unwrap_or_default()
}

/// Each key of the Go chart's values: where ours reads it (`Some`) or the NOTES line that says
/// it has no effect here (`None`). A Go key missing from this table fails the test, so a new Go
/// default is never accepted silently.
fn go_key_mapping(key: &str) -> Option<Option<&'static str>> {
    Some(match key {
        // Same key, same meaning in both charts.
        "image"
        | "podAnnotations"
        | "podLabels"
        | "resources"
        | "terminationGracePeriodSeconds"
        | "priorityClassName"
        | "serviceAccount"
        | "podSecurityContext"
        | "containerSecurityContext"
        | "affinity"
        | "replicas"
        | "nodeSelector"
        | "tolerations"
        | "rbac.create"
        | "priority" => Some("same"),
        "rbac.restrictWatchNamespaces" => Some("watchNamespaces"),
        "rbac.createEndUserRoles" => Some("end-user ClusterRoles"),
        "workerResourceTemplate" => Some("ownedResourceKinds + ownedResourceAllowedKinds"),
        "prometheus" => Some("serviceMonitor.enabled"),
        "webhook" => Some("webhook (WorkerResourceTemplate check kept on)"),
        "authProxy" => None,
        // After v1.8.1 (its main branch): the sidecar's settings.
        "kubeRBACProxy" => None,
        "metrics" => None,
        "namespace" => None,
        "securityContext" => None,
        "certmanager" => None,
        _ => return None,
    })
}

#[test]
fn the_go_charts_default_values_render_and_notes_name_every_key_without_effect() {
    let go = go_default_values();
    let lint = &go_result("go-defaults").lint;
    assert!(strings(&lint["errors"]).is_empty(), "{lint}");
    assert!(
        go_result("go-defaults").error.is_none(),
        "{:?}",
        go_result("go-defaults").error
    );
    let notes = go_notes("go-defaults");
    let mut keys: Vec<String> = Vec::new();
    for (k, v) in go.as_object().expect("values map") {
        match (k.as_str(), v) {
            ("rbac", Value::Object(r)) => keys.extend(r.keys().map(|sub| format!("rbac.{sub}"))),
            _ => keys.push(k.clone()),
        }
    }
    for key in &keys {
        let mapping = go_key_mapping(key)
            .unwrap_or_else(|| panic!("Go chart key {key} is neither mapped nor reported"));
        // A line of its own that says the key has no effect here (the webhook's line explains
        // how its Go meaning is kept, so it is mapped, not without effect).
        let named = notes
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("- {key}")) && l.contains("no effect"));
        match mapping {
            Some(_) => assert!(!named, "{key} is mapped but NOTES call it without effect"),
            None => assert!(named, "NOTES do not name {key}:\n{notes}"),
        }
    }
    // The webhook stays on with self-managed certificates: cert-manager is never required.
    let objs = go_objects("go-defaults");
    assert!(of_kind(&objs, "Certificate").is_empty());
    assert_eq!(of_kind(&objs, "ValidatingWebhookConfiguration").len(), 1);
    assert!(notes.contains("- webhook.enabled=false"), "{notes}");
    let a = args(&objs);
    assert!(
        a.contains(&"--owned-resource-kinds=HorizontalPodAutoscaler".to_string()),
        "{a:?}"
    );
    assert_eq!(one(&objs, "Deployment")["spec"]["replicas"], go["replicas"]);
    // rbac.createEndUserRoles (the Go default: true): an editor and a viewer role per kind,
    // under the Go chart's names.
    let roles: Vec<&str> = of_kind(&objs, "ClusterRole")
        .into_iter()
        .filter_map(|r| r["metadata"]["name"].as_str())
        .filter(|n| n.ends_with("-editor-role") || n.ends_with("-viewer-role"))
        .collect();
    assert_eq!(roles.len(), 12, "{roles:?}");
    assert!(roles.contains(&format!("{RELEASE}-{NS}-workerdeployment-editor-role").as_str()));
}

#[test]
fn the_go_charts_later_kube_rbac_proxy_key_is_accepted_and_named_without_effect() {
    let later = go_result("go-later");
    assert!(later.error.is_none(), "{:?}", later.error);
    let notes = go_notes("go-later");
    assert!(
        notes
            .lines()
            .any(|l| l.trim_start().starts_with("- kubeRBACProxy") && l.contains("no effect")),
        "{notes}"
    );
    assert!(!go_notes("go-defaults").contains("kubeRBACProxy"));
}

#[test]
fn go_values_map_onto_ours_and_a_key_in_neither_chart_is_refused() {
    let error = go_result("go-typo").error.clone().unwrap_or_default();
    assert!(error.contains("disabelAuth"), "{error}");
    let objs = go_objects("go-mapped");
    let a = args(&objs);
    assert!(
        a.iter()
            .any(|x| x.contains("team-a") && x.contains("team-b")),
        "{a:?}"
    );
    assert!(
        a.contains(
            &"--owned-resource-kinds=HorizontalPodAutoscaler,PodDisruptionBudget".to_string()
        ),
        "{a:?}"
    );
    assert!(grants(&objs, "policy", "poddisruptionbudgets", "create"));
    assert!(a.contains(&"--api-auth-metrics".to_string()), "{a:?}");
    assert_eq!(of_kind(&objs, "ServiceMonitor").len(), 1);
    assert!(of_kind(&objs, "Role").len() >= 2);
    assert_eq!(
        one(&objs, "Deployment")["spec"]["template"]["spec"]["priority"],
        json!(1000)
    );
    let notes = go_notes("go-mapped");
    assert!(!notes.contains("- metrics.disableAuth"), "{notes}");
    assert!(
        of_kind(&objs, "ClusterRole")
            .iter()
            .all(|r| !r["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .ends_with("-editor-role")),
        "createEndUserRoles=false renders none"
    );
}

/// The Go chart's keys after v1.8.1, with values as its users write them.
fn go_later_keys() -> Value {
    json!({
        "extraEnv": [
            {"name": "HTTPS_PROXY", "value": "http://proxy.corp.example:3128"},
            {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "api"}}}
        ],
        "extraVolumes": [
            {"name": "private-ca", "configMap": {"name": "corp-ca-bundle"}},
            {"name": "secrets-store", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": true,
                "volumeAttributes": {"secretProviderClass": "temporal"}}}
        ],
        "extraVolumeMounts": [
            {"name": "private-ca", "mountPath": "/etc/ssl/private-ca", "readOnly": true},
            {"name": "secrets-store", "mountPath": "/mnt/secrets", "readOnly": true}
        ],
        "webhook": {"certSecretName": "webhook-server-cert"}
    })
}

#[test]
fn the_go_charts_later_keys_reach_the_controller_pod_with_their_go_meaning() {
    let r = go_result("go-later-keys");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(strings(&r.lint["errors"]).is_empty(), "{}", r.lint);
    let objs = go_objects("go-later-keys");
    let keys = go_later_keys();
    let m = manager(&objs);
    // Appended after the chart's own variables, in order.
    let env = m["env"].as_array().expect("env");
    assert_eq!(
        &env[env.len() - 2..],
        keys["extraEnv"].as_array().expect("extraEnv")
    );
    let pod = &one(&objs, "Deployment")["spec"]["template"]["spec"];
    let volumes = pod["volumes"].as_array().expect("volumes");
    assert_eq!(
        &volumes[volumes.len() - 2..],
        keys["extraVolumes"].as_array().expect("extraVolumes")
    );
    let mounts = m["volumeMounts"].as_array().expect("mounts");
    assert_eq!(
        &mounts[mounts.len() - 2..],
        keys["extraVolumeMounts"]
            .as_array()
            .expect("extraVolumeMounts")
    );
    // webhook.certSecretName: the Secret the (self-managed) certificate lives in, and the only
    // Secret the controller may update.
    let a = args(&objs);
    assert!(
        a.contains(&"--webhook-secret-name=webhook-server-cert".to_string()),
        "{a:?}"
    );
    let cert_role = of_kind(&objs, "Role")
        .into_iter()
        .find(|r| r["metadata"]["name"] == format!("{FULLNAME}-webhook-certs").as_str())
        .expect("certificate Role");
    assert_eq!(
        strings(&cert_role["rules"][0]["resourceNames"]),
        ["webhook-server-cert"]
    );
    // With cert-manager (our own values), the Certificate writes it and the Pod mounts it.
    let objs = objects("cert-secret-cert-manager");
    assert_eq!(
        one(&objs, "Certificate")["spec"]["secretName"],
        "webhook-server-cert"
    );
    let pod = &one(&objs, "Deployment")["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .any(|v| v["name"] == "webhook-cert"
                && v["secret"]["secretName"] == "webhook-server-cert"),
        "{pod}"
    );
    // A key in neither chart, next to them, is still refused.
    let neither = go_result("go-neither").error.clone().unwrap_or_default();
    assert!(neither.contains("extraVolumesMounts"), "{neither}");
}

/// The Deployment's Pods (template labels) a PodDisruptionBudget's selector matches.
fn pdb_selects(pdb: &Value, pod_labels: &Value) -> bool {
    let sel = &pdb["spec"]["selector"];
    let labels_match = sel["matchLabels"]
        .as_object()
        .expect("matchLabels")
        .iter()
        .all(|(k, v)| &pod_labels[k] == v);
    let expressions_match = sel["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            assert_eq!(e["operator"], "DoesNotExist", "{e}");
            pod_labels[e["key"].as_str().expect("key")].is_null()
        });
    labels_match && expressions_match
}

#[test]
fn a_disruption_budget_whenever_replicas_exceed_one() {
    // Two replicas by default: one budget, over the controller's Pods, one at a time.
    let objs = objects("default");
    let pdb = one(&objs, "PodDisruptionBudget");
    assert_eq!(pdb["apiVersion"], "policy/v1");
    assert_eq!(pdb["metadata"]["name"], FULLNAME);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    let deploy = one(&objs, "Deployment");
    assert!(pdb_selects(
        pdb,
        &deploy["spec"]["template"]["metadata"]["labels"]
    ));
    assert_eq!(
        one(&objects("ha"), "PodDisruptionBudget")["spec"]["maxUnavailable"],
        1
    );
    assert_eq!(
        one(&objects("production"), "PodDisruptionBudget")["spec"]["maxUnavailable"],
        "50%"
    );
    // One replica, or turned off: none.
    for name in ["single-no-lease", "pdb-off"] {
        assert!(
            of_kind(&objects(name), "PodDisruptionBudget").is_empty(),
            "{name}"
        );
    }
    // Sharded: one per shard, each over exactly its own Deployment's Pods (a Pod under two
    // budgets could not be evicted at all).
    let objs = objects("sharded");
    let pdbs = of_kind(&objs, "PodDisruptionBudget");
    let deployments = of_kind(&objs, "Deployment");
    assert_eq!(pdbs.len(), deployments.len());
    for d in &deployments {
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let owners: Vec<&Value> = pdbs
            .iter()
            .filter(|p| pdb_selects(p, labels))
            .map(|p| &p["metadata"]["name"])
            .collect();
        assert_eq!(
            owners,
            [&d["metadata"]["name"]],
            "{}",
            d["metadata"]["name"]
        );
    }
}

#[test]
fn the_network_policy_pins_its_ports_and_peers() {
    assert!(of_kind(&objects("default"), "NetworkPolicy").is_empty());
    let selector = json!({"matchLabels": {
        "app.kubernetes.io/name": "temporal-worker-controller",
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": "controller"}});
    let dns = json!({"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
        "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]});
    let temporal = json!({"ports": [{"port": 7233, "protocol": "TCP"}]});
    let api_ports = json!([{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]);
    // Every option set.
    let objs = objects("network-policy");
    let np = one(&objs, "NetworkPolicy");
    assert_eq!(np["metadata"]["namespace"], NS);
    assert_eq!(
        np["spec"],
        json!({
            "podSelector": selector,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"ports": [{"port": 8080, "protocol": "TCP"}],
                 "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                           "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]},
                {"ports": [{"port": 9443, "protocol": "TCP"}],
                 "from": [{"ipBlock": {"cidr": "172.20.0.10/32"}}, {"ipBlock": {"cidr": "fd00::1/128"}},
                          {"ipBlock": {"cidr": "10.0.0.0/8"}}]}
            ],
            "egress": [
                {"ports": api_ports,
                 "to": [{"ipBlock": {"cidr": "172.20.0.10/32"}}, {"ipBlock": {"cidr": "fd00::1/128"}}]},
                dns,
                temporal,
                {"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}], "ports": [{"port": 3128}]}
            ]
        })
    );
    // The selector is the controller Pods'.
    let pod_labels = &one(&objs, "Deployment")["spec"]["template"]["metadata"]["labels"];
    for (k, v) in selector["matchLabels"].as_object().expect("labels") {
        assert_eq!(&pod_labels[k], v, "{k}");
    }
    // Defaults: /metrics and the status API closed, the webhook port open to any caller (the
    // API server's address unknown), egress to the API server's ports anywhere, DNS, Temporal.
    let objs = objects("network-policy-defaults");
    assert_eq!(
        one(&objs, "NetworkPolicy")["spec"],
        json!({
            "podSelector": selector,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"ports": [{"port": 9443, "protocol": "TCP"}]}],
            "egress": [{"ports": api_ports}, dns, temporal]
        })
    );
}

#[test]
fn end_user_roles_aggregate_into_admin_edit_and_view() {
    let objs = objects("default");
    let role = |suffix: &str| -> Value {
        of_kind(&objs, "ClusterRole")
            .into_iter()
            .find(|r| r["metadata"]["name"] == format!("{FULLNAME}-{NS}-{suffix}").as_str())
            .unwrap_or_else(|| panic!("no {suffix} role"))
            .clone()
    };
    let kinds = [
        "workerdeployments",
        "connections",
        "workerresourcetemplates",
        "temporalworkerdeployments",
        "temporalconnections",
        "temporalworkerownedresources",
    ];
    let edit = role("edit");
    let labels = &edit["metadata"]["labels"];
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert!(labels["rbac.authorization.k8s.io/aggregate-to-view"].is_null());
    assert_eq!(edit["rules"].as_array().map(Vec::len), Some(1));
    assert_eq!(strings(&edit["rules"][0]["resources"]), kinds);
    assert_eq!(
        strings(&edit["rules"][0]["verbs"]),
        [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]
    );
    let view = role("view");
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    assert!(view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"].is_null());
    let mut readable: Vec<&str> = kinds.to_vec();
    readable.push("clusterconnections");
    assert_eq!(strings(&view["rules"][0]["resources"]), readable);
    assert_eq!(
        strings(&view["rules"][0]["verbs"]),
        ["get", "list", "watch"]
    );
    let statuses: Vec<String> = readable.iter().map(|k| format!("{k}/status")).collect();
    assert_eq!(strings(&view["rules"][1]["resources"]), statuses);
    assert_eq!(strings(&view["rules"][1]["verbs"]), ["get"]);
    // Nothing else: no status writes, no cluster-scoped writes, no wildcards.
    for r in [&edit, &view] {
        for rule in r["rules"].as_array().expect("rules") {
            assert!(!strings(&rule["resources"]).iter().any(|x| x.contains('*')));
        }
    }
    // Opt-out.
    let objs = objects("production");
    assert!(
        of_kind(&objs, "ClusterRole")
            .iter()
            .all(|r| r["metadata"]["labels"]["app.kubernetes.io/component"] != "rbac")
    );
}

#[test]
fn common_labels_and_revision_history_limit() {
    let objs = objects("production");
    for o in &objs {
        let labels = &o["metadata"]["labels"];
        assert_eq!(
            labels["team"], "platform",
            "{} {}",
            o["kind"], o["metadata"]["name"]
        );
        assert_eq!(labels["cost-centre"], "42", "{}", o["kind"]);
    }
    let deploy = one(&objs, "Deployment");
    assert_eq!(deploy["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(
        deploy["spec"]["template"]["metadata"]["labels"]["team"],
        "platform"
    );
    // Selectors stay as they were: changing commonLabels never orphans the Pods.
    assert_eq!(
        deploy["spec"]["selector"],
        one(&objects("default"), "Deployment")["spec"]["selector"]
    );
    assert_eq!(
        one(&objects("default"), "Deployment")["spec"]["revisionHistoryLimit"],
        10
    );
}

#[test]
fn the_dashboards_ship_as_config_maps_for_the_grafana_sidecar() {
    assert!(of_kind(&objects("default"), "ConfigMap").is_empty());
    let objs = objects("dashboards");
    let maps = of_kind(&objs, "ConfigMap");
    let dir = repo_root().join("dashboards");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("dashboards/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(maps.len(), files.len(), "one ConfigMap per dashboard");
    for (map, file) in maps.iter().zip(&files) {
        assert_eq!(map["metadata"]["namespace"], "monitoring");
        assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
        assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "Temporal");
        let data = map["data"].as_object().expect("data");
        assert_eq!(data.keys().collect::<Vec<_>>(), [file]);
        let want = std::fs::read_to_string(dir.join(file)).expect("dashboard");
        assert_eq!(data[file], want.as_str(), "{file} differs from dashboards/");
    }
}

#[test]
fn helm_test_asks_the_controllers_readyz_through_its_service() {
    use clap::Parser as _;
    let objs = objects("default");
    let pod = one(&objs, "Pod");
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], manager(&objs)["image"]);
    let svc = controller_service(&objs);
    let url = format!(
        "http://{}.{NS}.svc:{}/readyz",
        svc["metadata"]["name"].as_str().expect("name"),
        svc["spec"]["ports"][0]["port"]
    );
    assert_eq!(
        strings(&container["args"]),
        ["probe", format!("--url={url}").as_str()]
    );
    // The binary parses it as its `probe` subcommand.
    let mut argv = vec!["temporal-worker-controller".to_string()];
    argv.extend(strings(&container["args"]).iter().map(|a| a.to_string()));
    let cli = temporal_worker_controller::cli::command::Cli::try_parse_from(&argv).expect("parses");
    assert!(matches!(
        cli.command,
        temporal_worker_controller::cli::command::Command::Probe { url: u } if u == url
    ));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(
        of_kind(&objects("production"), "Pod").is_empty(),
        "tests.enabled: false"
    );
}

/// `[{kind, ...}]` of an Artifact Hub annotation (YAML in a string).
fn artifact_hub(chart: &Value, key: &str) -> Vec<Value> {
    let text = chart["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no annotation {key}"));
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{key}: {e}"))
}

#[test]
fn chart_yaml_carries_artifact_hub_metadata() {
    let path = repo_root().join(CHART).join("Chart.yaml");
    let chart: Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).expect("Chart.yaml")).expect("YAML");
    assert!(
        !chart["maintainers"]
            .as_array()
            .expect("maintainers")
            .is_empty()
    );
    // `home`, `sources` and `icon` name the repository the alerts' runbook links point at.
    let home = chart["home"].as_str().expect("home");
    assert_eq!(chart["sources"], json!([home]));
    assert!(chart["icon"].as_str().expect("icon").starts_with(home));
    let alerts = std::fs::read_to_string(repo_root().join(CHART).join("files/alerts.yaml"))
        .expect("alerts.yaml");
    for url in alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
    {
        assert!(url.starts_with(home), "{url} is not under {home}");
    }
    // `images`: the default image at the appVersion (the chart's default tag).
    let images = artifact_hub(&chart, "artifacthub.io/images");
    let app = chart["appVersion"].as_str().expect("appVersion");
    assert_eq!(
        images,
        [json!({"name": "temporal-worker-controller",
                "image": format!("{DEFAULT_IMAGE}:{app}")})]
    );
    // `crds`: exactly the kinds of crds/.
    let mut kinds: Vec<String> = std::fs::read_dir(repo_root().join("crds"))
        .expect("crds/")
        .filter_map(|e| {
            let crd: Value =
                serde_yaml::from_str(&std::fs::read_to_string(e.ok()?.path()).ok()?).ok()?;
            Some(crd["spec"]["names"]["kind"].as_str()?.to_string())
        })
        .collect();
    kinds.sort();
    let mut listed: Vec<String> = artifact_hub(&chart, "artifacthub.io/crds")
        .iter()
        .map(|c| {
            assert_eq!(c["version"], "v1alpha1");
            assert!(c["description"].as_str().is_some_and(|d| !d.is_empty()));
            c["kind"].as_str().expect("kind").to_string()
        })
        .collect();
    listed.sort();
    assert_eq!(listed, kinds);
    for change in artifact_hub(&chart, "artifacthub.io/changes") {
        let kind = change["kind"].as_str().expect("kind");
        assert!(
            [
                "added",
                "changed",
                "deprecated",
                "removed",
                "fixed",
                "security"
            ]
            .contains(&kind),
            "{change}"
        );
    }
}
