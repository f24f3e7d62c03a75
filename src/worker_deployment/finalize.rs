//! Deletion of a TWD: stop its workers, clean Temporal state, release the Connection, then
//! drop our finalizer. The deletion path's driver: it observes (versioned Deployments, the
//! Connection) and acts through [`finalizers`], and ends in an [`Attempt`] like any reconcile,
//! so the report stage writes the `Deleting` status, emits the events and counts failures.

use std::sync::Arc;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};

use crate::api::{FINALIZER, TemporalConnection, TemporalWorkerDeployment};
use crate::planner::deletion::{self, CleanupFailed, DeletionInput, DeletionStep};
use crate::reconciler::connect;
use crate::worker_deployment::act::{Done, finalizers};
use crate::worker_deployment::attempt::Attempt;
use crate::worker_deployment::context::Context;
use crate::worker_deployment::observe;
use crate::worker_deployment::outcome::{CleanupError, Failure, Outcome};
use crate::worker_deployment::step::CleanupStep;

pub async fn run(ctx: &Context, twd: Arc<TemporalWorkerDeployment>) -> Attempt {
    ctx.backlog
        .forget(&(twd.namespace().unwrap_or_default(), twd.name_any()));
    let mut done = Vec::new();
    let outcome = match finalize(ctx, &twd, &mut done).await {
        Ok(()) => Outcome::Done,
        Err(ended) => ended,
    };
    Attempt {
        twd,
        planned: None,
        finalized: done,
        outcome,
    }
}

/// A failed Kubernetes step: a conflict means a newer object, anything else is retried.
fn step_failed(step: CleanupStep, source: kube::Error) -> Outcome {
    match source {
        kube::Error::Api(s) if s.code == 409 => Outcome::Stale,
        source => Outcome::Failed(Failure::CleanupStepFailed { step, source }),
    }
}

/// Every step writes: only while this replica leads (`Stale` otherwise: the new leader
/// looks again).
fn leads(ctx: &Context) -> Result<(), Outcome> {
    if ctx.services.leads() {
        Ok(())
    } else {
        Err(Outcome::Stale)
    }
}

async fn finalize(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    done: &mut Vec<Done>,
) -> Result<(), Outcome> {
    let mut input = DeletionInput {
        ours: twd.finalizers().iter().any(|f| f == FINALIZER),
        superseded: crate::worker_deployment::superseded::superseded(
            twd,
            ctx.canonical_of(twd).as_deref(),
        )
        .is_some(),
        ..Default::default()
    };
    if input.ours && !input.superseded {
        // Deletion lists afresh: what it leaves behind must not depend on a watch's lag.
        input.deployments = observe::owned_deployments(&ctx.services.client, None, twd)
            .await
            .map_err(|e| step_failed(CleanupStep::ListDeployments, e))?;
    }
    let mut connection = None;
    loop {
        match deletion::next_step(&input) {
            DeletionStep::Done => return Ok(()),
            DeletionStep::ReleaseOnly => {
                // Temporal and the workers belong to the WorkerDeployment of this name.
                leads(ctx)?;
                return finalizers::remove(ctx, twd)
                    .await
                    .map_err(|e| step_failed(CleanupStep::RemoveFinalizer, e));
            }
            DeletionStep::Stop(running) => {
                leads(ctx)?;
                finalizers::stop_workers(ctx, twd, &running, done)
                    .await
                    .map_err(|e| step_failed(CleanupStep::DeleteDeployments, e))?;
                input.deployments.clear();
            }
            DeletionStep::ReadConnection => {
                let ns = twd.namespace().unwrap_or_default();
                connection = connect::connection_opt(&ctx.services.client, &ns, twd)
                    .await
                    .map_err(|e| step_failed(CleanupStep::ReadConnection, e))?;
                input.connection_found = Some(connection.is_some());
            }
            // Without a Connection Temporal cannot be reached: keep the finalizer and say so
            // (status and Warning event) rather than leave the worker deployment in Temporal
            // for good. A person who accepts that loss removes the finalizer
            // (docs/architecture.md).
            DeletionStep::NeedsConnection => {
                return Err(Outcome::Failed(Failure::CleanupNeedsConnection {
                    name: twd.spec.worker_options.connection_ref.name.clone(),
                }));
            }
            DeletionStep::CleanAndRelease => {
                let connection = connection.take().ok_or(Outcome::Stale)?;
                return clean_and_release(ctx, twd, connection, done).await;
            }
        }
    }
}

/// Cleans Temporal, releases the Connection, drops our finalizer: each only while leading.
async fn clean_and_release(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    connection: TemporalConnection,
    done: &mut Vec<Done>,
) -> Result<(), Outcome> {
    let ns = twd.namespace().unwrap_or_default();
    leads(ctx)?;
    clean_temporal(ctx, twd, &ns, connection.clone(), done).await?;
    leads(ctx)?;
    finalizers::release_connection(ctx, twd, &connection)
        .await
        .map_err(|e| step_failed(CleanupStep::ReleaseConnection, e))?;
    leads(ctx)?;
    finalizers::remove(ctx, twd)
        .await
        .map_err(|e| step_failed(CleanupStep::RemoveFinalizer, e))
}

/// Deletes the worker deployment in Temporal; keeps the finalizer while that fails, until the
/// planner gives up (`deletion::on_cleanup_failure`).
async fn clean_temporal(
    ctx: &Context,
    twd: &TemporalWorkerDeployment,
    ns: &str,
    connection: TemporalConnection,
    done: &mut Vec<Done>,
) -> Result<(), Outcome> {
    let connected = ctx
        .services
        .connector()
        .client_for(ns, connection, twd)
        .await
        .map_err(CleanupError::from);
    let result = match connected {
        Ok(c) => finalizers::cleanup_temporal(&c.client, twd)
            .await
            .map_err(CleanupError::from),
        Err(e) => Err(e),
    };
    let Err(error) = result else { return Ok(()) };
    let since = twd.meta().deletion_timestamp.as_ref().map(|t| t.0);
    match deletion::on_cleanup_failure(since, Timestamp::now()) {
        // Keep the finalizer and retry: Temporal would otherwise keep a stale deployment.
        // Stopped workers stay "pollers" for matching.PollerHistoryTTL.
        CleanupFailed::Retry => Err(Outcome::Failed(Failure::CleanupPending(error))),
        // Never hang deletion forever: leave Temporal state behind, loudly.
        CleanupFailed::GiveUp { deleting_for } => {
            done.push(Done::CleanupAbandoned {
                message: format!(
                    "gave up cleaning worker deployment {:?} in Temporal after {}s: {error}",
                    twd.temporal_deployment_name(),
                    deleting_for.as_secs()
                ),
            });
            Ok(())
        }
    }
}
