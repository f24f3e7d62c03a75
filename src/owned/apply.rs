//! The writes of the TemporalWorkerOwnedResource controller, thin: server-side apply of one
//! rendered copy, delete of one copy, and the TWOR's own metadata and status.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use serde_json::json;

use crate::api::{FINALIZER, TemporalWorkerOwnedResource};
use crate::owned::render::Rendered;

/// Kubernetes limits a field manager name to 128 bytes.
const MAX_FIELD_MANAGER: usize = 128;

/// `(apiVersion, kind)` → API resource, resolved once per kind by discovery.
#[derive(Default)]
pub struct Resources(Mutex<HashMap<(String, String), ApiResource>>);

impl Resources {
    async fn resolve(
        &self,
        client: &kube::Client,
        api_version: &str,
        kind: &str,
    ) -> Result<ApiResource, kube::Error> {
        let key = (api_version.to_string(), kind.to_string());
        // A poisoned lock only means another reconcile panicked mid-insert; the map is intact.
        if let Some(ar) = self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(ar.clone());
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await?;
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, ar.clone());
        Ok(ar)
    }
}

/// The field manager of one TWOR's copies: each TWOR owns exactly the fields it renders.
pub fn field_manager(twor: &str) -> String {
    let mut m = format!("temporal-worker-controller/twor/{twor}");
    m.truncate(MAX_FIELD_MANAGER);
    m
}

/// The API server's own words for a refused request.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Server-side apply of one copy (forced: the TWOR is the source of truth for its fields).
pub async fn apply_copy(
    client: &kube::Client,
    resources: &Resources,
    namespace: &str,
    twor: &str,
    copy: &Rendered,
) -> Result<(), kube::Error> {
    let ar = resources
        .resolve(client, &copy.api_version, &copy.kind)
        .await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let params = PatchParams::apply(&field_manager(twor)).force();
    api.patch(&copy.name, &params, &Patch::Apply(&copy.object))
        .await?;
    Ok(())
}

/// Deletes one copy; an absent copy (or kind) counts as deleted.
pub async fn delete_copy(
    client: &kube::Client,
    resources: &Resources,
    namespace: &str,
    (api_version, kind, name): (&str, &str, &str),
) -> Result<(), kube::Error> {
    let ar = match resources.resolve(client, api_version, kind).await {
        Ok(ar) => ar,
        Err(e) if is_status(&e, 404) => return Ok(()),
        Err(e) => return Err(e),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    match api.delete(name, &DeleteParams::background()).await {
        Err(e) if !is_status(&e, 404) => Err(e),
        _ => Ok(()),
    }
}

/// Writes the metadata patch the plan made ([`crate::owned::plan::metadata_patch`]).
pub async fn patch_metadata(
    client: &kube::Client,
    twor: &TemporalWorkerOwnedResource,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    api_of(client, twor)
        .patch(
            &twor.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    Ok(())
}

/// Drops our finalizer: the last write of a TWOR's deletion.
pub async fn remove_finalizer(
    client: &kube::Client,
    twor: &TemporalWorkerOwnedResource,
) -> Result<(), kube::Error> {
    let finalizers: Vec<&String> = twor
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .collect();
    let patch =
        json!({"metadata": {"resourceVersion": twor.resource_version(), "finalizers": finalizers}});
    match api_of(client, twor)
        .patch(
            &twor.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Err(e) if !is_status(&e, 404) => Err(e),
        _ => Ok(()),
    }
}

pub(super) fn api_of(
    client: &kube::Client,
    twor: &TemporalWorkerOwnedResource,
) -> Api<TemporalWorkerOwnedResource> {
    twor.own_api(client.clone())
}
