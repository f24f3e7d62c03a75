//! CRD schema validation, CEL rules, pruning, defaulting, built-in validation and malformed
//! requests, all over HTTP with the real server's Status bodies.

mod common;

use anyhow::{Result, bail};
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

async fn create_twd(ns: &str, body: Value) -> Result<kube::Result<DynamicObject>> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let obj: DynamicObject = serde_json::from_value(body)?;
    Ok(common::twds(&client, ns)
        .create(&PostParams::default(), &obj)
        .await)
}

async fn ns() -> Result<String> {
    let emu = common::auto().await;
    common::namespace(&emu.client().await?, "valid").await
}

/// Mutates a valid TWD and expects a 422 whose message and causes name `field`.
async fn rejected(
    ns: &str,
    name: &str,
    mutate: impl FnOnce(&mut Value),
    field: &str,
    text: &str,
) -> Result<()> {
    let mut body = common::twd(name);
    mutate(&mut body);
    let status = common::api_error(create_twd(ns, body).await?)?;
    assert_eq!(status.code, 422, "{status:?}");
    assert_eq!(status.reason, "Invalid");
    assert!(
        status.message.starts_with(&format!(
            "TemporalWorkerDeployment.temporal.io \"{name}\" is invalid: "
        )),
        "{}",
        status.message
    );
    assert!(
        status.message.contains(text),
        "expected {text:?} in {}",
        status.message
    );
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    if !causes.iter().any(|c| c.field == field) {
        bail!("no cause for field {field}: {causes:?}");
    }
    Ok(())
}

#[tokio::test]
async fn schema_violations_are_422_naming_the_field() -> Result<()> {
    let ns = ns().await?;
    rejected(
        &ns,
        "wrong-type",
        |b| b["spec"]["replicas"] = json!("two"),
        "spec.replicas",
        "spec.replicas in body must be of type integer: \"string\"",
    )
    .await?;
    rejected(
        &ns,
        "missing-required",
        |b| {
            if let Some(r) = b["spec"]["rollout"].as_object_mut() {
                r.remove("strategy");
            }
        },
        "spec.rollout.strategy",
        "spec.rollout.strategy: Required value",
    )
    .await?;
    rejected(&ns, "negative", |b| b["spec"]["replicas"] = json!(-1), "spec.replicas", "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0").await?;
    rejected(
        &ns,
        "out-of-range",
        |b| b["spec"]["rollout"]["steps"][0]["rampPercentage"] = json!(0),
        "spec.rollout.steps[0].rampPercentage",
        "should be greater than or equal to 1",
    )
    .await?;
    rejected(
        &ns,
        "bad-pattern",
        |b| b["spec"]["rollout"]["steps"][0]["pauseDuration"] = json!("5 minutes"),
        "spec.rollout.steps[0].pauseDuration",
        "in body should match",
    )
    .await?;
    rejected(
        &ns,
        "bad-enum",
        |b| b["spec"]["rollout"]["strategy"] = json!("Sometimes"),
        "spec.rollout.strategy",
        "spec.rollout.strategy: Unsupported value: \"Sometimes\": supported values: \"Manual\", \"AllAtOnce\", \"Progressive\"",
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn cel_rules_are_enforced() -> Result<()> {
    let ns = ns().await?;
    rejected(&ns, "my.twd", |_| {}, "<nil>", "name must not contain '.'").await?;
    rejected(
        &ns,
        "no-steps",
        |b| {
            if let Some(r) = b["spec"]["rollout"].as_object_mut() {
                r.remove("steps");
            }
        },
        "spec.rollout",
        "steps are required for Progressive rollout",
    )
    .await?;
    rejected(
        &ns,
        "unsorted",
        |b| {
            b["spec"]["rollout"]["steps"] =
                json!([{"rampPercentage": 50, "pauseDuration": "1m"}, {"rampPercentage": 10, "pauseDuration": "1m"}])
        },
        "spec.rollout",
        "rampPercentage must increase between each step",
    )
    .await?;
    rejected(
        &ns,
        "short-pause",
        |b| b["spec"]["rollout"]["steps"][0]["pauseDuration"] = json!("500ms"),
        "spec.rollout.steps[0].pauseDuration",
        "pause duration must be at least 1s",
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_defaults_applied() -> Result<()> {
    let ns = ns().await?;
    let mut body = common::twd("pruned");
    body["spec"]["notAField"] = json!(true);
    body["status"] = json!({"versionCount": 7});
    let created = create_twd(&ns, body).await??;
    let data = &created.data;
    assert!(data.pointer("/spec/notAField").is_none(), "{data}");
    assert_eq!(
        data.pointer("/spec/sunset/deleteDelay"),
        Some(&json!("24h"))
    );
    // Create ignores status on a kind with a status subresource: the object reads back with the
    // CRD's status default (Ready=Unknown, WaitingForController), as on the real API server.
    assert_eq!(
        data.pointer("/status/versionCount"),
        Some(&json!(0)),
        "{data}"
    );
    assert_eq!(
        data.pointer("/status/conditions/0/reason"),
        Some(&json!("WaitingForController")),
        "{data}"
    );
    Ok(())
}

#[tokio::test]
async fn deployment_validation_and_missing_namespace() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "valid-deploy").await?;
    let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client.clone(), &ns);
    let mut d = common::deployment("mismatch", 1);
    d["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let status = common::api_error(
        api.create(&PostParams::default(), &serde_json::from_value(d)?)
            .await,
    )?;
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.template.metadata.labels"),
        "{}",
        status.message
    );
    assert!(
        status
            .message
            .contains("`selector` does not match template `labels`"),
        "{}",
        status.message
    );

    let mut d = common::deployment("no-selector", 1);
    if let Some(spec) = d["spec"].as_object_mut() {
        spec.remove("selector");
    }
    let status = common::api_error(
        api.create(&PostParams::default(), &serde_json::from_value(d)?)
            .await,
    )?;
    // The typed client sends `selector: {}`, which the server calls an empty selector.
    assert!(
        status.message.contains("spec.selector: Invalid value"),
        "{}",
        status.message
    );

    let missing: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client, "does-not-exist");
    let status = common::api_error(
        missing
            .create(
                &PostParams::default(),
                &serde_json::from_value(common::deployment("x", 1))?,
            )
            .await,
    )?;
    assert_eq!(status.code, 404);
    assert_eq!(status.message, "namespaces \"does-not-exist\" not found");
    assert_eq!(
        status.details.map(|d| d.kind),
        Some("namespaces".to_string())
    );
    Ok(())
}

#[tokio::test]
async fn malformed_requests_get_status_bodies() -> Result<()> {
    let emu = common::auto().await;
    let base = emu.base_url();
    let (code, body) = common::raw(
        &base,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        b"{not json",
    )
    .await?;
    assert_eq!(code, 400);
    assert_eq!(body["kind"], json!("Status"));
    assert_eq!(body["reason"], json!("BadRequest"));
    let (code, body) = common::raw(
        &base,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        b"[1,2]",
    )
    .await?;
    assert_eq!(code, 400, "{body}");
    let (code, body) = common::raw(
        &base,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/nope",
        "application/merge-patch+json",
        b"{}",
    )
    .await?;
    assert_eq!(code, 404);
    assert_eq!(body["message"], json!("configmaps \"nope\" not found"));
    assert_eq!(
        body["details"],
        json!({"name": "nope", "kind": "configmaps"})
    );
    let (code, _) = common::raw(
        &base,
        "GET",
        "/apis/nope.example/v1/things",
        "application/json",
        b"",
    )
    .await?;
    assert_eq!(code, 404);
    // Strategic merge patch is not accepted for custom resources.
    let (code, body) = common::raw(
        &base,
        "PATCH",
        "/apis/temporal.io/v1alpha1/namespaces/default/temporalworkerdeployments/x",
        "application/strategic-merge-patch+json",
        b"{}",
    )
    .await?;
    assert!(code == 415 || code == 404, "{code} {body}");
    // Apply without a field manager is rejected.
    let (code, body) = common::raw(
        &base,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/applied",
        "application/apply-patch+yaml",
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"}}"#,
    )
    .await?;
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("fieldManager")),
        "{body}"
    );
    Ok(())
}
