//! Act stage of the owned-resource reconciler: carries out the plan with the Kubernetes writes
//! of [`apply`] (server-side apply of changed copies, one field manager per TWOR; removals; our
//! finalizer). The only stage that writes, apart from the status write of the report stage.
//! Every write is made only while this replica leads.

use kube::ResourceExt;

use crate::api::TemporalWorkerOwnedResource;
use crate::api::twor::OwnedVersionStatus;
use crate::owned::apply;
use crate::owned::context::OwnedContext;
use crate::owned::outcome::OwnedFailure;
use crate::owned::plan::{Plan, Sync, VersionWork, Work};
use crate::owned::status::Pass;

/// What the act stage did: `None` after a deletion (nothing left to report on), else what
/// the pass reports.
pub async fn act(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    plan: Plan,
) -> Result<Option<Pass>, OwnedFailure> {
    match plan {
        Plan::Delete { copies } => {
            delete(ctx, twor, ns, &copies).await?;
            Ok(None)
        }
        Plan::Sync(sync) => self::sync(ctx, twor, ns, sync).await.map(Some),
    }
}

async fn delete(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    copies: &[OwnedVersionStatus],
) -> Result<(), OwnedFailure> {
    for copy in copies {
        if !ctx.services.leads() {
            return Ok(());
        }
        remove(ctx, ns, copy)
            .await
            .map_err(|source| OwnedFailure::CopyRemovalFailed {
                name: copy.resource_name.clone(),
                source,
            })?;
    }
    if !ctx.services.leads() {
        return Ok(());
    }
    apply::remove_finalizer(&ctx.services.client, twor)
        .await
        .map_err(OwnedFailure::FinalizerRemovalFailed)
}

async fn sync(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    sync: Sync,
) -> Result<Pass, OwnedFailure> {
    for entry in &sync.remove_asleep {
        if !ctx.services.leads() {
            break;
        }
        if let Err(e) = remove(ctx, ns, entry).await {
            // Only logged: the copy goes with its Deployment at the end of the sunset anyway.
            tracing::warn!(error = %e, copy = %entry.resource_name, "removing the copy of a version at 0");
        }
    }
    if let Some(patch) = &sync.metadata_patch
        && ctx.services.leads()
    {
        apply::patch_metadata(&ctx.services.client, twor, patch)
            .await
            .map_err(OwnedFailure::MetadataWriteFailed)?;
    }
    Ok(match sync.work {
        Work::Report(pass) => pass,
        Work::Versions(versions) => {
            let mut out = Vec::with_capacity(versions.len());
            for v in versions {
                out.push(version(ctx, twor, ns, v).await);
            }
            Pass::Applied(out)
        }
    })
}

/// Applies one version's copy unless unchanged; one failure never stops the others, it goes
/// into that version's status entry.
async fn version(
    ctx: &OwnedContext,
    twor: &TemporalWorkerOwnedResource,
    ns: &str,
    work: VersionWork,
) -> OwnedVersionStatus {
    if let Some(old) = &work.replaced
        && ctx.services.leads()
        && let Err(e) = remove(ctx, ns, old).await
    {
        // Only logged: the status keeps the new kind's entry, and the old copy goes with
        // its Deployment.
        tracing::warn!(error = %e, copy = %old.resource_name, "removing the copy of a replaced kind");
    }
    let copy = match work.copy {
        Ok(copy) => copy,
        Err(refused) => return refused,
    };
    let result = if work.unchanged || !ctx.services.leads() {
        Ok(())
    } else {
        apply::apply_copy(
            &ctx.services.client,
            &ctx.resources,
            ns,
            &twor.name_any(),
            &copy,
        )
        .await
    };
    let (applied, message, applied_hash) = match result {
        Ok(()) if work.unchanged || ctx.services.leads() => (true, String::new(), copy.hash),
        Ok(()) => (
            false,
            "not applied: this replica lost leadership".into(),
            String::new(),
        ),
        Err(e) => (false, apply::message(&e), String::new()),
    };
    OwnedVersionStatus {
        build_id: work.build_id,
        resource_name: copy.name,
        api_version: copy.api_version,
        kind: copy.kind,
        applied,
        message,
        applied_hash,
    }
}

async fn remove(
    ctx: &OwnedContext,
    ns: &str,
    entry: &OwnedVersionStatus,
) -> Result<(), kube::Error> {
    let key = (
        entry.api_version.as_str(),
        entry.kind.as_str(),
        entry.resource_name.as_str(),
    );
    apply::delete_copy(&ctx.services.client, &ctx.resources, ns, key).await
}
