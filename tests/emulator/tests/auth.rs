//! TokenRequest (`serviceaccounts/<name>/token`, also through the real `kubectl create token`)
//! and TokenReview, reviewed the way the controller's status API does it with kube-rs.

mod common;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{
    TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec, TokenReviewStatus,
};
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube_emulator::auth::DEFAULT_AUDIENCE;
use kube_emulator::{Emulator, EmulatorOptions};
use serde_json::{Value, json};

async fn service_account(client: &kube::Client, ns: &str, name: &str) -> Result<ServiceAccount> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    Ok(api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await?)
}

fn token_request(audiences: &[&str], seconds: Option<i64>) -> TokenRequest {
    TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            expiration_seconds: seconds,
            bound_object_ref: None,
        },
        ..Default::default()
    }
}

async fn mint(
    client: &kube::Client,
    ns: &str,
    sa: &str,
    req: &TokenRequest,
) -> kube::Result<TokenRequest> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    api.create_subresource("token", sa, &PostParams::default(), req)
        .await
}

/// What the controller does: `Api::<TokenReview>::all(client).create(...)`.
async fn review(
    client: &kube::Client,
    token: &str,
    audiences: Option<&[&str]>,
) -> Result<TokenReviewStatus> {
    let api: Api<TokenReview> = Api::all(client.clone());
    let done = api
        .create(
            &PostParams::default(),
            &TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_string()),
                    audiences: audiences.map(|a| a.iter().map(|s| s.to_string()).collect()),
                },
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(done.spec.token.as_deref(), Some(token), "spec is echoed");
    done.status.context("TokenReview without status")
}

fn assert_sa_user(s: &TokenReviewStatus, ns: &str, sa: &ServiceAccount) {
    assert_eq!(s.authenticated, Some(true), "{s:?}");
    assert_eq!(s.error, None);
    let user = s.user.clone().unwrap_or_default();
    let name = sa.metadata.name.clone().unwrap_or_default();
    assert_eq!(
        user.username.as_deref(),
        Some(format!("system:serviceaccount:{ns}:{name}").as_str())
    );
    assert_eq!(user.uid, sa.metadata.uid);
    assert_eq!(
        user.groups.unwrap_or_default(),
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".to_string(),
        ]
    );
    let extra = user.extra.unwrap_or_default();
    let cred = extra
        .get("authentication.kubernetes.io/credential-id")
        .cloned()
        .unwrap_or_default();
    assert!(
        cred.len() == 1 && cred[0].starts_with("JTI="),
        "credential id: {cred:?}"
    );
}

fn assert_rejected(s: &TokenReviewStatus, error_part: &str) {
    assert_ne!(s.authenticated, Some(true), "{s:?}");
    let user = s.user.clone().unwrap_or_default();
    assert_eq!(user.username, None);
    assert_eq!(user.groups, None);
    let err = s.error.clone().unwrap_or_default();
    assert!(
        err.contains(error_part),
        "error {err:?} should mention {error_part:?}"
    );
}

#[tokio::test]
async fn minted_token_authenticates_as_the_service_account() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auth").await?;
    let sa = service_account(&client, &ns, "reader").await?;

    let before = jiff::Timestamp::now();
    let tr = mint(&client, &ns, "reader", &token_request(&[], None)).await?;
    let status = tr.status.clone().context("TokenRequest without status")?;
    assert!(status.token.len() >= 32, "token {:?}", status.token);
    assert_eq!(tr.spec.audiences, vec![DEFAULT_AUDIENCE.to_string()]);
    assert_eq!(tr.spec.expiration_seconds, Some(3600));
    assert_eq!(tr.metadata.name.as_deref(), Some("reader"));
    assert_eq!(tr.metadata.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(tr.metadata.uid, sa.metadata.uid);
    let lifetime = status.expiration_timestamp.0.as_second() - before.as_second();
    assert!((3599..=3601).contains(&lifetime), "lifetime {lifetime}");

    // A second token is a different, equally valid one.
    let other = mint(&client, &ns, "reader", &token_request(&[], None)).await?;
    let other = other.status.context("status")?.token;
    assert_ne!(other, status.token);

    for auds in [None, Some(&[DEFAULT_AUDIENCE][..])] {
        let s = review(&client, &status.token, auds).await?;
        assert_sa_user(&s, &ns, &sa);
        assert_eq!(s.audiences, Some(vec![DEFAULT_AUDIENCE.to_string()]));
    }
    assert_sa_user(&review(&client, &other, None).await?, &ns, &sa);

    // Valid for the API server only: another audience is refused.
    let s = review(&client, &status.token, Some(&["https://status.example"])).await?;
    assert_rejected(&s, "token audiences");
    assert!(!s.error.unwrap_or_default().contains(&status.token));
    Ok(())
}

#[tokio::test]
async fn audiences_must_intersect() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auth-aud").await?;
    let sa = service_account(&client, &ns, "scraper").await?;
    let tr = mint(
        &client,
        &ns,
        "scraper",
        &token_request(&["https://status.example", "other"], Some(600)),
    )
    .await?;
    assert_eq!(tr.spec.expiration_seconds, Some(600));
    let token = tr.status.context("status")?.token;

    // No audiences in the review means the API server's: not in the token.
    let s = review(&client, &token, None).await?;
    assert_rejected(
        &s,
        &format!(
            "[invalid bearer token, token audiences [\"https://status.example\" \"other\"] is invalid for the target audiences [\"{DEFAULT_AUDIENCE}\"]]"
        ),
    );
    let s = review(&client, &token, Some(&["nope", "https://status.example"])).await?;
    assert_sa_user(&s, &ns, &sa);
    assert_eq!(
        s.audiences,
        Some(vec!["https://status.example".to_string()])
    );
    Ok(())
}

#[tokio::test]
async fn unknown_and_malformed_reviews() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;

    let s = review(&client, "not-a-real-token", None).await?;
    assert_rejected(&s, "invalid bearer token");

    // Raw: the unauthenticated status has `user: {}` and no `authenticated`.
    let (code, body) = common::raw(
        &emu.base_url(),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "application/json",
        br#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"abc"}}"#,
    )
    .await?;
    assert_eq!(code, 201);
    assert_eq!(body["kind"], json!("TokenReview"));
    assert_eq!(body["apiVersion"], json!("authentication.k8s.io/v1"));
    assert_eq!(body["spec"], json!({"token": "abc"}));
    assert_eq!(
        body["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );

    // Empty or missing token: 400 like kube-apiserver.
    for spec in [json!({"token": ""}), json!({})] {
        let api: Api<TokenReview> = Api::all(client.clone());
        let r = api
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"spec": spec}))?,
            )
            .await;
        let status = common::api_error(r)?;
        assert_eq!(status.code, 400);
        assert_eq!(status.reason, "BadRequest");
        assert_eq!(
            status.message,
            "token is required for TokenReview in authentication"
        );
    }

    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let (code, body) = common::raw(
        &emu.base_url(),
        "POST",
        path,
        "application/json",
        b"{not json",
    )
    .await?;
    assert_eq!((code, body["reason"].clone()), (400, json!("BadRequest")));
    let (code, _) = common::raw(
        &emu.base_url(),
        "POST",
        path,
        "application/json",
        br#"{"spec":{"token":5}}"#,
    )
    .await?;
    assert_eq!(code, 400);
    let (code, _) = common::raw(
        &emu.base_url(),
        "POST",
        path,
        "application/json",
        br#"{"apiVersion":"v1","kind":"ConfigMap","spec":{"token":"x"}}"#,
    )
    .await?;
    assert_eq!(code, 400);
    // Create-only and cluster-scoped.
    let (code, body) = common::raw(&emu.base_url(), "GET", path, "application/json", b"").await?;
    assert_eq!(
        (code, body["reason"].clone()),
        (405, json!("MethodNotAllowed"))
    );
    let (code, _) = common::raw(
        &emu.base_url(),
        "POST",
        "/apis/authentication.k8s.io/v1/namespaces/default/tokenreviews",
        "application/json",
        br#"{"spec":{"token":"x"}}"#,
    )
    .await?;
    assert_eq!(code, 404);
    Ok(())
}

#[tokio::test]
async fn token_request_errors() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auth-err").await?;
    service_account(&client, &ns, "sa").await?;

    let status = common::api_error(mint(&client, &ns, "missing", &token_request(&[], None)).await)?;
    assert_eq!(status.code, 404);
    assert_eq!(status.message, "serviceaccounts \"missing\" not found");
    let status =
        common::api_error(mint(&client, "no-such-ns", "sa", &token_request(&[], None)).await)?;
    assert_eq!(status.code, 404);

    let status = common::api_error(mint(&client, &ns, "sa", &token_request(&[], Some(599))).await)?;
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(
        status.message,
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
    );
    let status = common::api_error(
        mint(&client, &ns, "sa", &token_request(&[], Some((1 << 32) + 1))).await,
    )?;
    assert_eq!(status.code, 422);

    let mut named = token_request(&[], None);
    named.metadata.name = Some("someone-else".into());
    let status = common::api_error(mint(&client, &ns, "sa", &named).await)?;
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("must match the service account name")
    );

    let mut wrong_uid = token_request(&[], None);
    wrong_uid.metadata.uid = Some("not-the-uid".into());
    let status = common::api_error(mint(&client, &ns, "sa", &wrong_uid).await)?;
    assert_eq!(status.code, 409);

    let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/sa/token");
    let (code, _) =
        common::raw(&emu.base_url(), "POST", &path, "application/json", b"{oops").await?;
    assert_eq!(code, 400);
    let (code, _) = common::raw(&emu.base_url(), "GET", &path, "application/json", b"").await?;
    assert_eq!(code, 405);
    Ok(())
}

#[tokio::test]
async fn deleting_the_service_account_invalidates_its_tokens() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auth-del").await?;
    let sa = service_account(&client, &ns, "gone").await?;
    let token = mint(&client, &ns, "gone", &token_request(&[], None))
        .await?
        .status
        .context("status")?
        .token;
    assert_sa_user(&review(&client, &token, None).await?, &ns, &sa);

    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    api.delete("gone", &DeleteParams::default()).await?;
    assert_rejected(
        &review(&client, &token, None).await?,
        "[invalid bearer token, service account token has been invalidated]",
    );
    // A new ServiceAccount of the same name has another UID: the old token stays dead.
    let again = service_account(&client, &ns, "gone").await?;
    assert_ne!(again.metadata.uid, sa.metadata.uid);
    assert_rejected(
        &review(&client, &token, None).await?,
        "service account token has been invalidated",
    );
    Ok(())
}

#[tokio::test]
async fn bound_tokens_die_with_their_object() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auth-bound").await?;
    let sa = service_account(&client, &ns, "worker").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "p"},
                "spec": {"serviceAccountName": "worker", "containers": [{"name": "c", "image": "busybox"}]}
            }))?,
        )
        .await?;
    let bound = |kind: &str, name: &str, uid: Option<&str>| -> Result<TokenRequest> {
        Ok(serde_json::from_value(json!({
            "spec": {"audiences": [], "boundObjectRef": {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}}
        }))?)
    };
    let tr = mint(&client, &ns, "worker", &bound("Pod", "p", None)?).await?;
    let token = tr.status.context("status")?.token;
    let s = review(&client, &token, None).await?;
    assert_sa_user(&s, &ns, &sa);
    let extra = s.user.and_then(|u| u.extra).unwrap_or_default();
    assert_eq!(
        extra.get("authentication.kubernetes.io/pod-name"),
        Some(&vec!["p".to_string()])
    );
    assert_eq!(
        extra.get("authentication.kubernetes.io/pod-uid"),
        pod.metadata.uid.map(|u| vec![u]).as_ref()
    );
    pods.delete("p", &DeleteParams::default()).await?;
    assert_rejected(
        &review(&client, &token, None).await?,
        "service account token has been invalidated",
    );

    // Binding errors.
    let status = common::api_error(mint(&client, &ns, "worker", &bound("Pod", "p", None)?).await)?;
    assert_eq!(status.code, 404);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "q"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }))?,
    )
    .await?;
    let status = common::api_error(mint(&client, &ns, "worker", &bound("Pod", "q", None)?).await)?;
    assert_eq!(status.code, 400, "q runs as the default ServiceAccount");
    let status =
        common::api_error(mint(&client, &ns, "worker", &bound("ConfigMap", "x", None)?).await)?;
    assert_eq!(status.code, 400);
    assert_eq!(
        status.message,
        "cannot bind token to object of type /v1, Kind=ConfigMap"
    );

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}}))?,
        )
        .await?;
    let status = common::api_error(
        mint(
            &client,
            &ns,
            "worker",
            &bound("Secret", "s", Some("wrong"))?,
        )
        .await,
    )?;
    assert_eq!(status.code, 409);
    let token = mint(&client, &ns, "worker", &bound("Secret", "s", None)?)
        .await?
        .status
        .context("status")?
        .token;
    assert_sa_user(&review(&client, &token, None).await?, &ns, &sa);
    secrets.delete("s", &DeleteParams::default()).await?;
    assert_rejected(
        &review(&client, &token, None).await?,
        "service account token has been invalidated",
    );
    Ok(())
}

#[tokio::test]
async fn static_tokens() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let token = common::unique("static-token-secret");
    emu.add_static_token(&token, "alice", "uid-alice", &["devs"]);
    let s = review(&client, &token, None).await?;
    assert_eq!(s.authenticated, Some(true));
    let user = s.user.unwrap_or_default();
    assert_eq!(user.username.as_deref(), Some("alice"));
    assert_eq!(user.uid.as_deref(), Some("uid-alice"));
    assert_eq!(
        user.groups.unwrap_or_default(),
        vec!["devs".to_string(), "system:authenticated".to_string()]
    );
    assert_eq!(user.extra, None);
    assert_eq!(s.audiences, Some(vec![DEFAULT_AUDIENCE.to_string()]));
    // Token-file tokens are only good for the API server's audience.
    assert_rejected(
        &review(&client, &token, Some(&["https://status.example"])).await?,
        "invalid bearer token",
    );
    Ok(())
}

/// Needs its own emulator: moving the token clock would expire other tests' tokens.
#[tokio::test]
async fn tokens_expire() -> Result<()> {
    let emu = Emulator::start(EmulatorOptions::default()).await?;
    let client = emu.client().await?;
    let sa = service_account(&client, "default", "short").await?;
    let token = mint(&client, "default", "short", &token_request(&[], Some(600)))
        .await?
        .status
        .context("status")?
        .token;
    assert_sa_user(&review(&client, &token, None).await?, "default", &sa);
    // Within go-jose's one-minute leeway past expiry, still valid.
    emu.advance_token_clock(Duration::from_secs(630));
    assert_sa_user(&review(&client, &token, None).await?, "default", &sa);
    emu.advance_token_clock(Duration::from_secs(60));
    assert_rejected(
        &review(&client, &token, None).await?,
        "[invalid bearer token, service account token has expired]",
    );
    // New tokens are minted against the same clock.
    let fresh = mint(&client, "default", "short", &token_request(&[], None))
        .await?
        .status
        .context("status")?;
    let left = fresh.expiration_timestamp.0.as_second() - jiff::Timestamp::now().as_second();
    assert!((3600 + 689..=3600 + 691).contains(&left), "{left}");
    assert_sa_user(&review(&client, &fresh.token, None).await?, "default", &sa);

    // Fault injection reaches both endpoints.
    emu.faults().fail_next("create", "tokenreviews", 1, 500);
    let r = Api::<TokenReview>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"spec": {"token": "x"}}))?,
        )
        .await;
    assert_eq!(common::api_error(r)?.code, 500);
    emu.faults()
        .fail_next("create", "serviceaccounts/token", 1, 403);
    let r = mint(&client, "default", "short", &token_request(&[], None)).await;
    assert_eq!(common::api_error(r)?.code, 403);
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn discovery_lists_the_authentication_apis() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let core = client.list_core_api_resources("v1").await?;
    let token = core
        .resources
        .iter()
        .find(|r| r.name == "serviceaccounts/token")
        .context("serviceaccounts/token in /api/v1")?;
    assert_eq!(token.verbs, vec!["create".to_string()]);
    assert_eq!(token.kind, "TokenRequest");
    assert_eq!(token.group.as_deref(), Some("authentication.k8s.io"));
    assert_eq!(token.version.as_deref(), Some("v1"));
    assert!(token.namespaced);

    let groups = client.list_api_groups().await?;
    assert!(
        groups
            .groups
            .iter()
            .any(|g| g.name == "authentication.k8s.io")
    );
    let list = client
        .list_api_group_resources("authentication.k8s.io/v1")
        .await?;
    let tr = list
        .resources
        .iter()
        .find(|r| r.name == "tokenreviews")
        .context("tokenreviews")?;
    assert!(!tr.namespaced);
    assert_eq!(tr.verbs, vec!["create".to_string()]);
    assert_eq!(tr.kind, "TokenReview");

    let out = common::kubectl_ok(
        emu.kubeconfig_path(),
        &[
            "api-resources",
            "--api-group=authentication.k8s.io",
            "--no-headers",
        ],
    )?;
    let line = out
        .lines()
        .find(|l| l.starts_with("tokenreviews"))
        .context("kubectl api-resources lists tokenreviews")?;
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cols,
        vec![
            "tokenreviews",
            "authentication.k8s.io/v1",
            "false",
            "TokenReview"
        ]
    );
    Ok(())
}

#[tokio::test]
async fn kubectl_create_token() -> Result<()> {
    let emu = common::auto().await;
    let kc = emu.kubeconfig_path().to_path_buf();
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auth-kubectl").await?;
    let sa = service_account(&client, &ns, "status-reader").await?;

    let token = common::kubectl_ok(&kc, &["create", "token", "status-reader", "-n", &ns])?;
    let token = token.trim();
    ensure!(!token.is_empty(), "kubectl printed no token");
    assert_sa_user(&review(&client, token, None).await?, &ns, &sa);

    let out = common::kubectl_ok(
        &kc,
        &[
            "create",
            "token",
            "status-reader",
            "-n",
            &ns,
            "--audience",
            "https://status.example",
            "--duration",
            "20m",
            "-o",
            "json",
        ],
    )?;
    let tr: Value = serde_json::from_str(&out)?;
    assert_eq!(tr["kind"], json!("TokenRequest"));
    assert_eq!(tr["spec"]["expirationSeconds"], json!(1200));
    assert_eq!(tr["spec"]["audiences"], json!(["https://status.example"]));
    let token = tr["status"]["token"].as_str().context("token")?;
    assert_sa_user(
        &review(&client, token, Some(&["https://status.example"])).await?,
        &ns,
        &sa,
    );
    assert_rejected(&review(&client, token, None).await?, "token audiences");

    let out = common::kubectl(&kc, &["create", "token", "nobody", "-n", &ns])?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("serviceaccounts \"nobody\" not found"),
        "stderr: {err}"
    );
    let out = common::kubectl(
        &kc,
        &[
            "create",
            "token",
            "status-reader",
            "-n",
            &ns,
            "--duration",
            "5m",
        ],
    )?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "stderr: {err}"
    );
    Ok(())
}
