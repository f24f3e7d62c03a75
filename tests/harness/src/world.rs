//! The one environment bootstrap of the integration tests: a Kubernetes API with the
//! controller's CRDs (the local control plane, or a user's cluster), the shared Temporal dev
//! server, and the kubelet stand-in running real workers ([`Infra`]); and per test a
//! Kubernetes namespace with a `temporal` Connection and a Temporal namespace ([`World`]).
//!
//! The controller itself is started by each test (this crate does not depend on it): its
//! options are what the tests differ in.

use std::fmt::Debug;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::control_plane::{self, ControlPlane, StartOptions};
use crate::kubelet::Kubelet;
use crate::{manifests, temporal_server};

/// How long a [`wait`] waits.
pub const T: Duration = Duration::from_secs(120);

/// Where the tests run: the API, the Temporal dev server, the kubelet stand-in.
pub struct Infra {
    /// The local control plane (None on a user's cluster).
    pub plane: Option<&'static ControlPlane>,
    pub kubeconfig: PathBuf,
    /// An admin client, for the runtime that started the infrastructure.
    pub client: kube::Client,
    pub temporal_address: String,
    /// The stand-in (None on a user's cluster, where real Pods run the workers).
    pub kubelet: Option<Kubelet>,
}

/// How to start the [`Infra`]; the default is the binary's shared control plane.
#[derive(Default)]
pub struct InfraOptions {
    /// A control plane of its own writing this audit log, instead of the shared one.
    pub audit_log: Option<PathBuf>,
    /// CRDs to install besides the controller's (directories of YAML files).
    pub extra_crds: Vec<PathBuf>,
    /// A user's cluster instead of a local control plane.
    pub kubeconfig: Option<PathBuf>,
}

/// The control plane with an audit log (one per binary, like the shared one).
static AUDITED: OnceCell<ControlPlane> = OnceCell::const_new();

impl Infra {
    /// The shared control plane with the CRDs, the shared dev server and a new stand-in.
    pub async fn shared() -> Result<Infra> {
        Infra::start(InfraOptions::default()).await
    }

    pub async fn start(options: InfraOptions) -> Result<Infra> {
        let plane = match (&options.kubeconfig, options.audit_log) {
            (Some(_), _) => None,
            (None, Some(audit_log)) => Some(
                AUDITED
                    .get_or_try_init(|| {
                        ControlPlane::start_with(StartOptions {
                            audit_log: Some(audit_log),
                        })
                    })
                    .await?,
            ),
            (None, None) => Some(control_plane::shared().await?),
        };
        let kubeconfig = match (options.kubeconfig, plane) {
            (Some(path), _) => path,
            (None, Some(plane)) => plane.kubeconfig_path().to_path_buf(),
            (None, None) => bail!("neither a kubeconfig nor a control plane"),
        };
        let client = control_plane::client_from(&kubeconfig).await?;
        control_plane::install_crds(&client, &control_plane::repo_crds_dir()).await?;
        for dir in &options.extra_crds {
            control_plane::install_crds(&client, dir).await?;
        }
        let temporal = temporal_server::shared().await?;
        let kubelet = match plane {
            Some(_) => Some(Kubelet::start(client.clone()).await?),
            None => None,
        };
        Ok(Infra {
            plane,
            kubeconfig,
            client,
            temporal_address: temporal.address(),
            kubelet,
        })
    }
}

/// One test's world: its Kubernetes namespace (with a `temporal` Connection), its Temporal
/// namespace, the dev server's address, and a kubelet stand-in running the workers.
pub struct World {
    pub client: kube::Client,
    pub ns: String,
    pub temporal_ns: String,
    pub address: String,
    _infra: Infra,
}

impl World {
    /// A world on the shared control plane, its namespaces named after `prefix`.
    pub async fn new(prefix: &str) -> Result<World> {
        let infra = Infra::shared().await?;
        let ns = format!("{prefix}-{}", std::process::id() % 10000);
        let temporal_ns = format!("e2e-{ns}");
        enter(&infra, &ns, &temporal_ns, prefix).await?;
        Ok(World {
            client: infra.client.clone(),
            ns,
            temporal_ns,
            address: infra.temporal_address.clone(),
            _infra: infra,
        })
    }

    /// The API of kind `K` in this world's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }
}

/// Creates namespace `ns` with a `temporal` Connection to the dev server, and Temporal
/// namespace `temporal_ns`; `field_manager` applies the Connection.
pub async fn enter(infra: &Infra, ns: &str, temporal_ns: &str, field_manager: &str) -> Result<()> {
    temporal_server::shared()
        .await?
        .create_namespace(temporal_ns)
        .await?;
    create_namespace(&infra.client, ns).await?;
    apply(
        &infra.client,
        ns,
        field_manager,
        manifests::connection("temporal", &infra.temporal_address),
    )
    .await
}

/// Creates namespace `name`.
pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("create namespace {name}"))?;
    Ok(())
}

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<()> {
    match create_namespace(client, name).await {
        Err(e)
            if e.downcast_ref::<kube::Error>()
                .is_some_and(|e| matches!(e, kube::Error::Api(s) if s.code == 409)) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The API resource of one of the controller's kinds (`TemporalWorkerDeployment`, …).
pub fn api_resource(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("temporal.io", "v1alpha1", kind);
    ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
}

/// Server-side applies `manifest` (one of the controller's kinds, from [`manifests`]) in
/// namespace `ns` as `field_manager`, taking over fields other managers own.
pub async fn apply(
    client: &kube::Client,
    ns: &str,
    field_manager: &str,
    manifest: Value,
) -> Result<()> {
    let obj = manifests::in_namespace(manifest, ns);
    let name = obj["metadata"]["name"]
        .as_str()
        .context("manifest without a name")?
        .to_string();
    let kind = obj["kind"].as_str().context("manifest without a kind")?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource(kind));
    api.patch(
        &name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&obj),
    )
    .await
    .with_context(|| format!("apply {kind} {ns}/{name}"))?;
    Ok(())
}

/// Polls object `name` until `pred` holds, for at most [`T`].
pub async fn wait<K>(api: &Api<K>, name: &str, what: &str, pred: impl Fn(&K) -> bool) -> Result<K>
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    let deadline = Instant::now() + T;
    loop {
        let obj = api.get(name).await?;
        if pred(&obj) {
            return Ok(obj);
        }
        if Instant::now() > deadline {
            bail!(
                "timed out waiting for {what}: {}",
                serde_json::to_value(&obj)?["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until object `name` is gone (finalizers done), for at most [`T`].
pub async fn wait_gone<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Clone + Debug + DeserializeOwned,
{
    let deadline = Instant::now() + T;
    while api.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            bail!("{name} still exists {T:?} after its deletion");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_resources_of_our_kinds_match_the_crds() {
        for (kind, plural) in [
            ("TemporalWorkerDeployment", "temporalworkerdeployments"),
            ("TemporalConnection", "temporalconnections"),
            (
                "TemporalWorkerOwnedResource",
                "temporalworkerownedresources",
            ),
        ] {
            let ar = api_resource(kind);
            assert_eq!(
                (ar.group.as_str(), ar.version.as_str(), ar.plural.as_str()),
                ("temporal.io", "v1alpha1", plural)
            );
            let crd = control_plane::repo_crds_dir().join(format!("{plural}.temporal.io.yaml"));
            assert!(crd.exists(), "no CRD at {}", crd.display());
        }
    }
}
