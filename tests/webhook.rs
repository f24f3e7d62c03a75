//! The admission webhook (issue 15) end to end: the real kube-apiserver calls the controller's
//! webhook, which runs in-process as the chart's ServiceAccount with exactly the chart's RBAC
//! (`webhook.enabled`, self-managed certificates) and is reached through the chart's own
//! ValidatingWebhookConfiguration, rendered with `webhook.url` pointing at the loopback
//! address. Everything is driven with the real `kubectl apply`, as a user would.
//!
//! - a user without RBAC on HPAs cannot create a TWOR holding one (the message names user,
//!   verb and resource); a user with it can;
//! - the certificate is valid for 30 s and renewed 15 s before its end, so it rotates all along
//!   this binary; one test watches two rotations of the Secret and of the caBundle while
//!   admission calls keep being answered, and both replicas (two controllers on one Lease;
//!   only the holder writes) keep serving a certificate the current caBundle trusts.
//!
//! What the webhook refuses, and what the controller reports where the chart's
//! `webhook.excludeNamespaces` turns it off, is in the bad-input table (tests/bad_inputs.rs).

#[path = "common/controller.rs"]
mod controller;
#[path = "common/webhook.rs"]
mod webhook;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerOwnedResource;
use test_harness::manifests;
use tokio::sync::OnceCell;

/// Where the chart is "installed".
const CONTROLLER_NS: &str = "twc-webhook-system";
/// The webhook configuration's TWOR webhook, as kubectl names it in a denial.
const TWOR_WEBHOOK: &str = "temporalworkerownedresources.webhook.temporal.io";
/// Certificate lifetime in this binary: short, so that it rotates while the tests run.
const VALID_FOR: Duration = Duration::from_secs(30);
const RENEW_BEFORE: Duration = Duration::from_secs(15);

struct Env {
    plane: &'static test_harness::control_plane::ControlPlane,
    admin: PathBuf,
    secret_name: String,
    configuration_name: String,
    /// The webhook addresses of both replicas (the API server calls the first).
    replicas: [std::net::SocketAddr; 2],
    /// Their HTTP addresses (`/readyz`).
    http: [std::net::SocketAddr; 2],
    _controllers: [temporal_worker_controller::run::Running; 2],
}

static ENV: OnceCell<Arc<Env>> = OnceCell::const_new();

async fn env() -> Arc<Env> {
    ENV.get_or_init(|| async {
        test_harness::runtime::on_infra(start_env())
            .await
            .expect("start the webhook environment")
    })
    .await
    .clone()
}

/// The chart's values here: the webhook on, called by URL (the controller is a local process).
fn values(url: &str) -> Value {
    json!({
        "controller": {"identity": "twc-webhook-e2e"},
        "webhook": {
            "enabled": true,
            "url": url,
            "excludeNamespaces": ["kube-system"],
        },
    })
}

async fn start_env() -> Result<Arc<Env>> {
    controller::init_tracing("warn,temporal_worker_controller=info");
    let (plane, admin_client) = test_harness::control_plane::shared_with_crds().await?;
    let admin = plane.kubeconfig_path().to_path_buf();
    let hook = webhook::prepare(plane, values, CONTROLLER_NS).await?;
    let mut flags = vec![
        "--leader-elect".to_string(),
        format!("--lease-namespace={CONTROLLER_NS}"),
        "--identity=twc-webhook-e2e".into(),
        "--backlog-poll-interval=0s".into(),
        format!("--webhook-cert-validity={}s", VALID_FOR.as_secs()),
        format!("--webhook-cert-renew-before={}s", RENEW_BEFORE.as_secs()),
    ];
    flags.extend(hook.flags);
    let controller = controller::start(hook.client.clone(), &flags).await?;
    let addr = controller
        .webhook_addr
        .context("the controller serves no webhook")?;
    // A second replica on the same Lease: whichever does not hold it only reads the Secret.
    let second = controller::start(hook.client, &flags).await?;
    let second_addr = second
        .webhook_addr
        .context("the second replica serves no webhook")?;
    webhook::register(&admin_client, values, CONTROLLER_NS, addr).await?;
    let (secret_name, configuration_name) = (hook.secret_name, hook.configuration_name);

    let env = Arc::new(Env {
        plane,
        admin,
        secret_name,
        configuration_name,
        replicas: [addr, second_addr],
        http: [controller.http_addr, second.http_addr],
        _controllers: [controller, second],
    });
    // Until the controller has set caBundle and serves its certificate, TWOR writes fail
    // (failurePolicy Fail); wait for the first answer of the webhook itself.
    let probe = twor_manifest("probe", hpa(json!({"minReplicas": 0})));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (path, object) = (env.admin.clone(), probe.clone());
        let out = blocking(move || dry_run(&path, CONTROLLER_NS, &object)).await?;
        if out.contains(TWOR_WEBHOOK) && out.contains("denied the request") {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the webhook did not answer within 60 s; last kubectl output: {out}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(env)
}

/// Runs blocking work (a child process) off the runtime's workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await?
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let out = test_harness::kubectl::run(kubeconfig, args, stdin)?;
    ensure!(out.success, "kubectl {args:?} failed: {}", out.text);
    Ok(out.text)
}

/// `kubectl apply` of one object; `(success, stdout + stderr)`.
fn apply(kubeconfig: &Path, ns: &str, object: &Value) -> Result<(bool, String)> {
    let out = test_harness::kubectl::run(
        kubeconfig,
        &["apply", "-n", ns, "-f", "-"],
        Some(&object.to_string()),
    )?;
    Ok((out.success, out.text))
}

/// A server-side dry-run apply (admission runs, nothing is stored); kubectl's output.
fn dry_run(kubeconfig: &Path, ns: &str, object: &Value) -> Result<String> {
    let out = test_harness::kubectl::run(
        kubeconfig,
        &["apply", "--dry-run=server", "-n", ns, "-f", "-"],
        Some(&object.to_string()),
    )?;
    Ok(out.text)
}

/// A namespace of its own for one test.
fn namespace(env: &Env, prefix: &str) -> Result<String> {
    let name = format!("{prefix}-{}", std::process::id());
    kubectl_ok(&env.admin, &["create", "namespace", &name], None).ok();
    Ok(name)
}

fn hpa(spec: Value) -> Value {
    let mut base = json!({"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3});
    if let (Some(b), Some(extra)) = (base.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            b.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": base})
}

fn twor_manifest(name: &str, object: Value) -> Value {
    manifests::owned_resource(name, "worker", object)
}

/// Asserts kubectl was refused by `webhook` with a message containing `want`.
fn assert_denied(case: &str, (ok, out): (bool, String), webhook: &str, want: &str) {
    assert!(!ok, "{case}: admitted: {out}");
    assert!(
        out.contains(&format!(
            "admission webhook \"{webhook}\" denied the request"
        )),
        "{case}: not refused by {webhook}: {out}"
    );
    assert!(out.contains(want), "{case}: {want:?} not in: {out}");
}

/// RBAC for a test user: TWORs in `ns`, and optionally create/update/delete on HPAs.
fn grant(env: &Env, ns: &str, user: &str, hpas: bool) -> Result<()> {
    let mut rules = vec![
        json!({"apiGroups": ["temporal.io"], "resources": ["temporalworkerownedresources"],
        "verbs": ["get", "list", "create", "update", "patch"]}),
    ];
    if hpas {
        rules.push(
            json!({"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"],
            "verbs": ["get", "create", "update", "delete"]}),
        );
    }
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": user, "namespace": ns}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": user, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}
    ]});
    kubectl_ok(
        &env.admin,
        &["apply", "-f", "-"],
        Some(&objects.to_string()),
    )?;
    Ok(())
}

#[test]
fn only_a_user_with_rbac_on_the_kind_can_create_a_twor_holding_it() -> Result<()> {
    test_harness::runtime::block_on(async {
        let env = env().await;
        let ns = namespace(&env, "twor-access")?;
        grant(&env, &ns, "alice", false)?;
        grant(&env, &ns, "bob", true)?;
        let alice = env.plane.user_kubeconfig("alice", None)?;
        let bob = env.plane.user_kubeconfig("bob", None)?;
        let scaler = twor_manifest("scaler", hpa(json!({})));

        let (ok, out) = apply(&alice, &ns, &scaler)?;
        assert_denied(
            "alice",
            (ok, out.clone()),
            TWOR_WEBHOOK,
            &format!(
                "user \"alice\" may not create autoscaling/horizontalpodautoscalers in namespace \"{ns}\""
            ),
        );
        for verb in ["update", "delete"] {
            assert!(
                out.contains(&format!(
                    "user \"alice\" may not {verb} autoscaling/horizontalpodautoscalers"
                )),
                "{verb}: {out}"
            );
        }
        // Alice may create a TWOR of a kind she holds (she is refused for the kind, not TWORs):
        // a PDB is refused too, naming policy/poddisruptionbudgets.
        let pdb = twor_manifest(
            "budget",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "spec": {"selector": {"matchLabels": {}}, "minAvailable": 1}}),
        );
        assert_denied(
            "alice pdb",
            apply(&alice, &ns, &pdb)?,
            TWOR_WEBHOOK,
            "user \"alice\" may not create policy/poddisruptionbudgets",
        );

        let (ok, out) = apply(&bob, &ns, &scaler)?;
        assert!(ok, "bob holds the rights: {out}");
        let client = test_harness::control_plane::client_from(&env.admin).await?;
        let twors: Api<TemporalWorkerOwnedResource> =
            TemporalWorkerOwnedResource::api(client, &ns, KindSet::Seed);
        assert!(twors.get_opt("scaler").await?.is_some());
        Ok(())
    })
}

async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("{what}: not within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The caBundle of the configuration's first webhook, and the Secret's serving certificate.
async fn current(env: &Env, client: &kube::Client) -> Result<(Vec<u8>, Vec<u8>)> {
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let vwc = vwcs.get(&env.configuration_name).await?;
    let bundle = vwc
        .webhooks
        .unwrap_or_default()
        .first()
        .and_then(|w| w.client_config.ca_bundle.clone())
        .map(|b| b.0)
        .unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), CONTROLLER_NS);
    let cert = secrets
        .get(&env.secret_name)
        .await?
        .data
        .and_then(|d| d.get("tls.crt").cloned())
        .map(|c| c.0)
        .unwrap_or_default();
    Ok((bundle, cert))
}

/// Calls one replica's TWOR webhook directly, trusting only `ca_bundle` (curl), with a review
/// the rules refuse; Ok when it answers with that refusal.
fn call_replica(addr: std::net::SocketAddr, ca_bundle: &[u8]) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("twc-webhook-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ca = dir.join(format!("ca-{}.pem", addr.port()));
    std::fs::write(&ca, ca_bundle)?;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "direct-1",
            "kind": {"group": "temporal.io", "version": "v1alpha1", "kind": "TemporalWorkerOwnedResource"},
            "resource": {"group": "temporal.io", "version": "v1alpha1", "resource": "temporalworkerownedresources"},
            "name": "probe", "namespace": CONTROLLER_NS, "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": twor_manifest("probe", hpa(json!({"minReplicas": 0}))),
            "dryRun": true
        }
    });
    let out = std::process::Command::new("curl")
        .args(["-sS", "-m", "5", "--cacert"])
        .arg(&ca)
        .args(["-H", "Content-Type: application/json", "-d"])
        .arg(review.to_string())
        .arg(format!(
            "https://{addr}{}",
            temporal_worker_controller::webhook::PATH_TWOR
        ))
        .output()
        .context("running curl")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("no AdmissionReview from {addr}: {text}"))?;
    ensure!(
        answer["response"]["uid"] == "direct-1"
            && answer["response"]["allowed"] == false
            && answer["response"]["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("minReplicas must not be 0")),
        "unexpected answer from {addr}: {text}"
    );
    Ok(())
}

#[test]
fn the_certificate_rotates_and_the_ca_bundle_follows_while_admission_answers() -> Result<()> {
    test_harness::runtime::block_on(async {
        let env = env().await;
        let client = test_harness::control_plane::client_from(&env.admin).await?;
        let probe = twor_manifest("probe", hpa(json!({"minReplicas": 0})));
        let (first_bundle, first_cert) = current(&env, &client).await?;
        let first_ca = String::from_utf8(first_bundle.clone())?
            .split("-----END CERTIFICATE-----")
            .next()
            .unwrap_or_default()
            .to_string();
        let (mut bundles, mut certs) = (vec![first_bundle], vec![first_cert]);
        let mut calls = 0;
        // Two rotations take about 2 × (VALID_FOR − RENEW_BEFORE) = 30 s.
        let deadline = Instant::now() + Duration::from_secs(120);
        while bundles.len() < 3 || certs.len() < 3 {
            ensure!(
                Instant::now() < deadline,
                "saw {} caBundles and {} certificates in 120 s",
                bundles.len(),
                certs.len()
            );
            // Every call in between is answered by the webhook itself.
            let out = dry_run(&env.admin, CONTROLLER_NS, &probe)?;
            calls += 1;
            ensure!(
                out.contains(&format!(
                    "admission webhook \"{TWOR_WEBHOOK}\" denied the request"
                )) && out.contains("minReplicas must not be 0"),
                "admission call {calls} not answered by the webhook: {out}"
            );
            let (bundle, cert) = current(&env, &client).await?;
            for replica in env.replicas {
                // A renewal between reading the bundle and calling can leave the bundle one
                // step behind: then it is read again, and only a second refusal counts.
                if call_replica(replica, &bundle).is_err() {
                    let (fresh, _) = current(&env, &client).await?;
                    call_replica(replica, &fresh)
                        .with_context(|| format!("replica {replica} after call {calls}"))?;
                }
            }
            if bundles.last() != Some(&bundle) {
                bundles.push(bundle);
            }
            if certs.last() != Some(&cert) {
                certs.push(cert);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Each trust bundle holds the new CA and the one before it; after two renewals the
        // first CA is gone, so the answers above came from the renewed certificates.
        let last = String::from_utf8(bundles.last().cloned().unwrap_or_default())?;
        assert_eq!(last.matches("BEGIN CERTIFICATE").count(), 2, "{last}");
        assert!(!last.contains(&first_ca), "the first CA is still trusted");
        assert!(
            calls >= 10,
            "only {calls} admission calls during the rotations"
        );
        // Both replicas serve a certificate, so both are ready for the webhook Service.
        for http in env.http {
            let out = std::process::Command::new("curl")
                .args(["-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}"])
                .arg(format!("http://{http}/readyz"))
                .output()?;
            assert_eq!(String::from_utf8_lossy(&out.stdout), "200", "{http}/readyz");
        }
        let out = dry_run(&env.admin, CONTROLLER_NS, &probe)?;
        assert!(out.contains("denied the request"), "{out}");
        Ok(())
    })
}

/// The chart's webhook grants (its certificate Role and ClusterRole, and the
/// LocalSubjectAccessReview rule): each is used by the controller, and nothing it asked was
/// refused, so the chart grants the webhook exactly what it needs.
#[test]
fn every_webhook_grant_of_the_chart_is_used_and_none_is_refused() -> Result<()> {
    test_harness::runtime::block_on(async {
        let env = env().await;
        let values = values("https://127.0.0.1:1");
        let objects = test_harness::chart::render(&values, CONTROLLER_NS)?;
        let (user, _) = test_harness::chart::rendered_grants(&values, CONTROLLER_NS)?;
        let mut rules = Vec::new();
        for o in objects
            .iter()
            .filter(|o| matches!(o["kind"].as_str(), Some("Role" | "ClusterRole")))
        {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            for rule in o["rules"].as_array().into_iter().flatten() {
                let lsar = rule["resources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|x| x == "localsubjectaccessreviews"));
                if name.ends_with("-webhook-certs") || name.ends_with("-webhook") || lsar {
                    rules.push(rule.clone());
                }
            }
        }
        let grants = test_harness::chart::expand(&Value::Array(rules));
        ensure!(
            grants.len() >= 6,
            "too few webhook grants found: {grants:?}"
        );
        // An allowed TWOR makes the webhook ask a LocalSubjectAccessReview; a renewal (every
        // 15 s here) updates the Secret and patches the caBundle.
        let allowed = twor_manifest("grants-probe", hpa(json!({})));
        let out = dry_run(&env.admin, CONTROLLER_NS, &allowed)?;
        ensure!(!out.contains("denied"), "{out}");
        let unused = eventually("every webhook grant used", Duration::from_secs(60), || {
            let events = env.plane.audit_events();
            let grants = grants.clone();
            let user = user.clone();
            async move {
                let unused = test_harness::chart::unused_grants(&grants, &events?, &user);
                Ok(unused.is_empty().then_some(unused))
            }
        })
        .await;
        if let Err(e) = unused {
            let events = env.plane.audit_events()?;
            bail!(
                "{e}: unused {:?}",
                test_harness::chart::unused_grants(&grants, &events, &user)
            );
        }
        let refused: Vec<String> = env
            .plane
            .audit_events()?
            .iter()
            .filter(|e| e.acting_user() == user && e.code() == 403)
            .map(|e| format!("{} {}", e.verb, e.request_uri))
            .collect();
        ensure!(
            refused.is_empty(),
            "the controller was refused: {refused:?}"
        );
        Ok(())
    })
}

/// The chart's in-cluster configurations (Service, self-managed or cert-manager) are valid
/// objects for the real API server (a server-side dry run; nothing calls them here).
#[test]
fn the_in_cluster_webhook_objects_of_the_chart_are_accepted_by_the_api_server() -> Result<()> {
    test_harness::runtime::block_on(async {
        let env = env().await;
        // Another release namespace, so that the configuration is not this binary's own.
        let ns = namespace(&env, "twc-in-cluster")?;
        for cert_manager in [false, true] {
            let values =
                json!({"webhook": {"enabled": true, "certManager": {"enabled": cert_manager}}});
            let objects = test_harness::chart::render(&values, &ns)?;
            let wanted: Vec<&Value> = objects
                .iter()
                .filter(|o| {
                    o["kind"] == "ValidatingWebhookConfiguration"
                        || (o["kind"] == "Service"
                            && o["metadata"]["name"]
                                .as_str()
                                .is_some_and(|n| n.ends_with("-webhook")))
                })
                .collect();
            ensure!(wanted.len() == 2, "{cert_manager}: {wanted:?}");
            let vwc = wanted
                .iter()
                .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
                .context("configuration")?;
            ensure!(
                vwc["webhooks"][0]["clientConfig"]["service"]["port"] == 443,
                "{vwc}"
            );
            let list = json!({"apiVersion": "v1", "kind": "List", "items": wanted});
            let out = test_harness::kubectl::run(
                &env.admin,
                &["apply", "--dry-run=server", "-f", "-"],
                Some(&list.to_string()),
            )?;
            ensure!(out.success, "certManager={cert_manager}: {}", out.text);
        }
        Ok(())
    })
}
