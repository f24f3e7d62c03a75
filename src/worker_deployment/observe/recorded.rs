//! The other Connections old versions keep (`planner::drift`): each Connection a versioned
//! Deployment records (`temporal.io/connection-ref`) that is not the spec's `connectionRef`,
//! read (from the caches when they hold it) so that an edit of it reaches the versions on it,
//! and so that they are re-rendered with it and never with the spec's.

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::connection::{CLUSTER_CONNECTION_KIND, ConnectionRef, ConnectionRefKind};
use crate::api::{TemporalConnectionSpec, TemporalWorkerDeployment};
use crate::planner::model::ObservedDeployment;
use crate::worker_deployment::context::Context;

/// The settings of every other recorded Connection, by record. One that is gone, cannot be
/// read, or that this install may not read (a ClusterConnection under a namespaced install)
/// is left out: the versions on it keep what their Pods carry.
pub async fn connections(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    spec_record: &str,
    deployments: &[ObservedDeployment],
) -> BTreeMap<String, TemporalConnectionSpec> {
    let mut out = BTreeMap::new();
    let records = deployments
        .iter()
        .filter_map(|d| d.connection_ref.as_deref())
        .filter(|r| *r != spec_record);
    for record in records {
        if out.contains_key(record) {
            continue;
        }
        let Some(reference) = parse(record) else {
            continue;
        };
        if let Some(spec) = read(ctx, twd, &reference).await {
            out.insert(record.to_string(), spec);
        }
    }
    out
}

/// `<Kind>/<name>` → the reference it stands for.
fn parse(record: &str) -> Option<ConnectionRef> {
    let (kind, name) = record.split_once('/')?;
    let kind = match kind {
        CLUSTER_CONNECTION_KIND => ConnectionRefKind::ClusterConnection,
        "Connection" => ConnectionRefKind::Connection,
        "TemporalConnection" => ConnectionRefKind::TemporalConnection,
        _ => return None,
    };
    (!name.is_empty()).then(|| ConnectionRef {
        name: name.to_string(),
        kind: Some(kind),
    })
}

async fn read(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    reference: &ConnectionRef,
) -> Option<TemporalConnectionSpec> {
    let cluster_allowed = ctx.services.watch_namespaces.is_empty();
    if reference.is_cluster() && !cluster_allowed {
        return None;
    }
    let ns = twd.namespace().unwrap_or_default();
    let set = twd.kind_set();
    if let Some(caches) = ctx.services.ready_caches().await {
        let cached = if reference.is_cluster() {
            caches.cluster_connection(&reference.name)
        } else {
            caches.connection(set, &ns, &reference.name)
        };
        if let Some(c) = cached {
            return Some(c.spec);
        }
    }
    match crate::reconciler::connect::connection_named(&ctx.services.client, &ns, set, reference)
        .await
    {
        Ok(found) => found.map(|c| c.spec),
        Err(e) => {
            tracing::warn!(connection = %reference.name, error = %e, "reading a Connection old versions keep");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_back_to_their_reference() {
        let r = parse("ClusterConnection/shared").expect("cluster");
        assert!(r.is_cluster());
        assert_eq!(r.name, "shared");
        let r = parse("Connection/prod").expect("namespaced");
        assert_eq!(r.kind, Some(ConnectionRefKind::Connection));
        assert_eq!(
            parse("TemporalConnection/x").map(|r| r.name),
            Some("x".into())
        );
        for bad in ["", "Connection", "Connection/", "Secret/x"] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }
}
