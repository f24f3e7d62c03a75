//! The real control plane (etcd + kube-apiserver + kube-controller-manager built from pinned Go
//! modules) answers like Kubernetes: real version, kubectl's everyday commands, RBAC for test
//! identities, TokenRequest, an audit log of every write, and Deployments that get ReplicaSets
//! and Pods from kube-controller-manager.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use test_harness::control_plane::{self, ControlPlane};
use test_harness::kubectl::kubectl;
use test_harness::names::unique;
use test_harness::wait::eventually;

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let (ok, text) = kubectl(kubeconfig, args)?;
    ensure!(ok, "kubectl {args:?} failed: {text}");
    Ok(text)
}

async fn plane() -> &'static ControlPlane {
    control_plane::shared()
        .await
        .expect("start the control plane")
}

#[tokio::test]
async fn kubectl_reports_the_pinned_kubernetes_version() -> Result<()> {
    let plane = plane().await;
    let out = kubectl_ok(plane.kubeconfig_path(), &["version", "-o", "json"])?;
    // The first JSON value only: a kubectl more than one minor from the server (a machine's own,
    // e.g. the Cloud SDK's 1.32) prints a version-skew warning after it.
    let v: serde_json::Value =
        serde_json::Deserializer::from_str(&out[out.find('{').unwrap_or(0)..])
            .into_iter()
            .next()
            .context("no JSON in `kubectl version -o json`")??;
    let pinned = include_str!("../../../tools/control-plane/versions.env")
        .lines()
        .find_map(|l| l.strip_prefix("KUBERNETES_VERSION="))
        .context("KUBERNETES_VERSION in versions.env")?;
    assert_eq!(v["serverVersion"]["gitVersion"], json!(pinned), "{out}");
    let minor = pinned
        .split('.')
        .nth(1)
        .context("a minor in KUBERNETES_VERSION")?;
    assert_eq!(v["serverVersion"]["minor"], json!(minor), "{out}");
    println!("control plane started in {:?}", plane.started_in());
    Ok(())
}

/// The aggregation layer is configured as in a real cluster: the API server publishes the
/// front-proxy CA and the request-header names that aggregated API servers (the e2e suite's
/// prometheus-adapter) read to trust the user it names.
#[tokio::test]
async fn the_aggregation_layer_publishes_its_request_header_settings() -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let plane = plane().await;
    let cms: Api<ConfigMap> = Api::namespaced(plane.client().await?, "kube-system");
    let data = eventually(
        "extension-apiserver-authentication published",
        Duration::from_secs(30),
        || async {
            let cm = cms.get_opt("extension-apiserver-authentication").await?;
            Ok(cm
                .and_then(|c| c.data)
                .filter(|d| d.contains_key("requestheader-client-ca-file")))
        },
    )
    .await?;
    let ca = data["requestheader-client-ca-file"].trim();
    ensure!(
        ca == plane.pki().front_proxy_ca_pem.trim(),
        "the published request-header CA is not the front-proxy CA"
    );
    ensure!(
        ca != plane.ca_pem().trim(),
        "the front-proxy CA must not be the cluster CA"
    );
    let names: Vec<String> = serde_json::from_str(&data["requestheader-allowed-names"])?;
    ensure!(names == ["front-proxy-client"], "allowed names {names:?}");
    let users: Vec<String> = serde_json::from_str(&data["requestheader-username-headers"])?;
    ensure!(users == ["X-Remote-User"], "username headers {users:?}");
    Ok(())
}

/// The three commands the old emulator failed (`couldn't get version/kind; json parse error`
/// for the first two, NotFound for `auth can-i`), plus `create serviceaccount`.
#[tokio::test]
async fn kubectl_everyday_commands_work() -> Result<()> {
    let plane = plane().await;
    let kc = plane.kubeconfig_path();
    let ns = unique("kubectl");
    kubectl_ok(kc, &["create", "namespace", &ns])?;
    kubectl_ok(
        kc,
        &["-n", &ns, "create", "configmap", "y", "--from-literal=a=b"],
    )?;
    let data = kubectl_ok(
        kc,
        &[
            "-n",
            &ns,
            "get",
            "configmap",
            "y",
            "-o",
            "jsonpath={.data.a}",
        ],
    )?;
    assert_eq!(data.trim(), "b");
    kubectl_ok(kc, &["-n", &ns, "create", "serviceaccount", "robot"])?;
    let yes = kubectl_ok(kc, &["-n", &ns, "auth", "can-i", "create", "pods"])?;
    assert_eq!(yes.trim(), "yes");
    // An unprivileged identity is told "no" (exit 1), not NotFound.
    let user = plane.user_kubeconfig(&unique("nobody"), None)?;
    let (ok, no) = kubectl(&user, &["-n", &ns, "auth", "can-i", "create", "pods"])?;
    assert!(!ok && no.trim() == "no", "{no}");
    Ok(())
}

#[tokio::test]
async fn rbac_governs_test_identities() -> Result<()> {
    let plane = plane().await;
    let admin = plane.kubeconfig_path();
    let ns = unique("rbac");
    kubectl_ok(admin, &["create", "namespace", &ns])?;
    let user = unique("alice");
    let alice = plane.user_kubeconfig(&user, Some("readers"))?;
    let (ok, denied) = kubectl(&alice, &["-n", &ns, "get", "configmaps"])?;
    assert!(
        !ok && denied.contains("Forbidden") && denied.contains(&user),
        "{denied}"
    );
    // Granting the group is enough: the certificate's O is the group.
    kubectl_ok(
        admin,
        &[
            "-n",
            &ns,
            "create",
            "role",
            "cm-reader",
            "--verb=get,list",
            "--resource=configmaps",
        ],
    )?;
    kubectl_ok(
        admin,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "cm-reader",
            "--role=cm-reader",
            "--group=readers",
        ],
    )?;
    eventually(
        "the RoleBinding to apply",
        Duration::from_secs(10),
        || async {
            Ok(kubectl(&alice, &["-n", &ns, "get", "configmaps"])?
                .0
                .then_some(()))
        },
    )
    .await?;
    let (ok, text) = kubectl(&alice, &["-n", &ns, "create", "configmap", "x"])?;
    assert!(!ok && text.to_lowercase().contains("forbidden"), "{text}");

    // Impersonation carries several groups.
    let bob = plane.impersonating_kubeconfig("bob", &["readers", "auditors"])?;
    let who = kubectl_ok(&bob, &["auth", "whoami", "-o", "json"])?;
    let who: serde_json::Value = serde_json::from_str(&who)?;
    assert_eq!(who["status"]["userInfo"]["username"], json!("bob"));
    let groups = who["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains("readers") && groups.contains("auditors"),
        "{groups}"
    );

    // A ServiceAccount token from TokenRequest authenticates as that ServiceAccount.
    let sa = plane.service_account_kubeconfig(&ns, "robot").await?;
    let who = kubectl_ok(
        &sa,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    )?;
    assert_eq!(who.trim(), format!("system:serviceaccount:{ns}:robot"));
    let (ok, text) = kubectl(&sa, &["-n", &ns, "get", "secrets"])?;
    assert!(!ok && text.to_lowercase().contains("forbidden"), "{text}");
    Ok(())
}

#[tokio::test]
async fn the_audit_log_records_the_tests_own_writes() -> Result<()> {
    let plane = plane().await;
    let ns = unique("audit");
    let user = unique("writer");
    let writer = plane.impersonating_kubeconfig(&user, &["system:masters"])?;
    kubectl_ok(&writer, &["create", "namespace", &ns])?;
    kubectl_ok(
        &writer,
        &[
            "-n",
            &ns,
            "create",
            "configmap",
            "audited",
            "--from-literal=k=v",
            "--field-manager=twc-audit-test",
        ],
    )?;
    let found = eventually("the audit events", Duration::from_secs(10), || async {
        let events = plane.audit_events()?;
        let ns_create = events.iter().any(|e| {
            e.acting_user() == user
                && e.verb == "create"
                && e.resource() == "namespaces"
                && e.code() == 201
        });
        let cm = events.iter().find(|e| {
            e.acting_user() == user
                && e.verb == "create"
                && e.resource() == "configmaps"
                && e.object_ref.as_ref().is_some_and(|o| o.namespace == ns)
        });
        Ok((ns_create && cm.is_some()).then(|| cm.cloned()).flatten())
    })
    .await?;
    assert!(found.is_write());
    assert_eq!(found.field_manager().as_deref(), Some("twc-audit-test"));
    Ok(())
}

#[tokio::test]
async fn a_deployment_gets_a_replicaset_and_pods_from_the_controller_manager() -> Result<()> {
    let plane = plane().await;
    let client = plane.client().await?;
    let ns = unique("deploy");
    kubectl_ok(plane.kubeconfig_path(), &["create", "namespace", &ns])?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}
            }
        }
    }))?;
    // The namespace's default ServiceAccount must exist before Pods are admitted; the
    // ReplicaSet controller retries until it does.
    deployments.create(&PostParams::default(), &d).await?;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let rs = eventually("a ReplicaSet", Duration::from_secs(60), || async {
        Ok(rs_api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .next())
    })
    .await?;
    let owner = rs.metadata.owner_references.unwrap_or_default();
    assert!(
        owner
            .iter()
            .any(|o| o.kind == "Deployment" && o.name == "web" && o.controller == Some(true))
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let listed = eventually("two Pods", Duration::from_secs(60), || async {
        let items = pods
            .list(&ListParams::default().labels("app=web"))
            .await?
            .items;
        Ok((items.len() == 2).then_some(items))
    })
    .await?;
    for pod in &listed {
        let rs_owner = pod.metadata.owner_references.clone().unwrap_or_default();
        assert!(rs_owner.iter().any(|o| o.kind == "ReplicaSet"));
    }
    // Deleting the Deployment: the garbage collector removes the ReplicaSet and its Pods'
    // owner chain (Pods of a removed ReplicaSet are deleted; without a kubelet they may linger
    // in Terminating, so only the ReplicaSet is checked here).
    deployments.delete("web", &Default::default()).await?;
    eventually(
        "the ReplicaSet to be collected",
        Duration::from_secs(60),
        || async {
            Ok(rs_api
                .list(&ListParams::default())
                .await?
                .items
                .is_empty()
                .then_some(()))
        },
    )
    .await?;
    Ok(())
}
