//! What the kubelet stand-in's test binaries share.

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

/// The Pods labelled `app=<app>`, by name, terminating ones included.
pub async fn pods_of(pods: &Api<Pod>, app: &str) -> Result<Vec<Pod>> {
    let mut list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?
        .items;
    list.sort_by_key(|p| p.metadata.name.clone());
    Ok(list)
}
