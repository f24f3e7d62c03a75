//! The controller's own admission webhook for an in-process controller, wired as the chart
//! wires it (self-managed certificates, the chart's ValidatingWebhookConfiguration called by
//! URL, since the controller is a local process): one bootstrap for the suites that need the
//! webhook in front of the API server. Included by path (`#[path = "common/webhook.rs"]`) next
//! to `common/controller.rs`.

#![allow(dead_code)] // each test binary uses part of it

use anyhow::{Context as _, Result};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use test_harness::control_plane::ControlPlane;

/// The chart's values for a webhook called at `url`.
pub type Values = fn(&str) -> Value;

/// What a suite needs before it starts the controller.
pub struct Prepared {
    /// A client acting as the chart's ServiceAccount, with exactly the chart's RBAC.
    pub client: kube::Client,
    /// The webhook flags the chart passes (names read from its render), serving on a free
    /// loopback port; the suite adds its own (identity, Lease, intervals).
    pub flags: Vec<String>,
    pub secret_name: String,
    pub configuration_name: String,
}

/// Installs the chart's identity for `values` in `namespace` and reads the webhook's names
/// from the chart's render. The port is known only once the controller listens; neither the
/// identity nor the names depend on it.
pub async fn prepare(plane: &ControlPlane, values: Values, namespace: &str) -> Result<Prepared> {
    let placeholder = values("https://127.0.0.1:1");
    let id = test_harness::chart::install_identity(plane, &placeholder, namespace).await?;
    let objects = test_harness::chart::render(&placeholder, namespace)?;
    let secret_name = test_harness::chart::chart_arg(&objects, "webhook-secret-name")?;
    let configuration_name =
        test_harness::chart::chart_arg(&objects, "webhook-configuration-name")?;
    let flags = vec![
        "--webhook-port=0".to_string(),
        "--webhook-bind=127.0.0.1".into(),
        "--webhook-cert-mode=self-managed".into(),
        format!("--webhook-secret-name={secret_name}"),
        format!("--webhook-configuration-name={configuration_name}"),
        format!("--webhook-namespace={namespace}"),
        "--webhook-hosts=127.0.0.1".into(),
        "--webhook-cert-check-interval=1s".into(),
    ];
    Ok(Prepared {
        client: test_harness::control_plane::client_from(&id.kubeconfig).await?,
        flags,
        secret_name,
        configuration_name,
    })
}

/// Applies the chart's ValidatingWebhookConfiguration, pointed at the controller's webhook
/// `addr`, as Helm would (server-side apply, field manager `helm`). The controller sets its
/// `caBundle` afterwards; callers wait for the webhook's first answer.
pub async fn register(
    admin: &kube::Client,
    values: Values,
    namespace: &str,
    addr: std::net::SocketAddr,
) -> Result<()> {
    let (url, ns) = (format!("https://{addr}"), namespace.to_string());
    // Helm runs off the runtime's workers: the webhook's accept loop must not wait behind it.
    let objects =
        tokio::task::spawn_blocking(move || test_harness::chart::render(&values(&url), &ns))
            .await??;
    let vwc = objects
        .into_iter()
        .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
        .context("the chart renders no ValidatingWebhookConfiguration")?;
    let vwc: ValidatingWebhookConfiguration = serde_json::from_value(vwc)?;
    let name = vwc.metadata.name.clone().unwrap_or_default();
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .patch(
            &name,
            &PatchParams::apply("helm").force(),
            &Patch::Apply(&vwc),
        )
        .await?;
    Ok(())
}

/// Dry-run creates `probe` (one of our kinds) in `namespace` until the API server's refusal
/// holds every one of `fragments`: until then the controller has not set the configuration's
/// `caBundle` or does not serve its certificate yet (failurePolicy Fail). At most 60 s.
pub async fn wait_for_refusal(
    client: &kube::Client,
    namespace: &str,
    probe: &Value,
    fragments: &[&str],
) -> Result<()> {
    let kind = probe["kind"].as_str().context("the probe has no kind")?;
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &test_harness::world::api_resource(kind),
    );
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = api
            .create(&dry_run, &serde_json::from_value(probe.clone())?)
            .await;
        match out {
            Err(kube::Error::Api(s)) if fragments.iter().all(|f| s.message.contains(f)) => {
                return Ok(());
            }
            other if std::time::Instant::now() > deadline => {
                anyhow::bail!("the webhook did not answer within 60 s: {other:?}")
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(300)).await,
        }
    }
}
