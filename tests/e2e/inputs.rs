//! Missing or unreachable dependencies end to end (issue 3): each gives a clear condition,
//! nothing panics, and the rollout completes once it is fixed. Specs that are wrong in
//! themselves are in the bad-input table (tests/bad_inputs.rs).

use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::json;
use temporal_worker_controller::api::TemporalWorkerDeployment;

use crate::support::*;

const T: Duration = Duration::from_secs(120);

fn observed(t: &TemporalWorkerDeployment) -> bool {
    t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation
}

fn message(t: &TemporalWorkerDeployment, type_: &str) -> String {
    condition(t, type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_connection_is_reported_then_the_rollout_completes() -> Result<()> {
    let c = case("noconn").await?;
    c.apply_twd(
        "api",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"workerOptions": {"connectionRef": {"name": "later"}}}),
    )
    .await?;
    let twd = c
        .wait_twd("api", "ConnectionNotFound", T, |t| {
            observed(t) && condition_is(t, "Progressing", "False", "ConnectionNotFound")
        })
        .await?;
    ensure!(
        message(&twd, "Progressing").contains("\"later\""),
        "message does not name the Connection: {}",
        message(&twd, "Progressing")
    );
    ensure!(
        condition_is(&twd, "Ready", "False", "ConnectionNotFound"),
        "{:?}",
        twd.status
    );
    ensure!(
        c.deployments()
            .list(&Default::default())
            .await?
            .items
            .is_empty(),
        "created workers without a Connection"
    );

    c.apply_connection("later", &c.env.temporal_address.clone())
        .await?;
    c.wait_twd("api", "Ready after the Connection appears", T, is_ready)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_temporal_is_reported_then_the_rollout_completes() -> Result<()> {
    let c = case("unreach").await?;
    // Port 1 on loopback: connection refused at once.
    c.apply_connection("temporal", "127.0.0.1:1").await?;
    let rec = c.record("api").await?;
    c.apply_twd("api", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c
        .wait_twd("api", "TemporalClientCreationFailed", T, |t| {
            observed(t) && condition_is(t, "Progressing", "False", "TemporalClientCreationFailed")
        })
        .await?;
    // The first look: the target build is reported before Temporal is asked (issue 41), so
    // even a Temporal that cannot be reached leaves the status saying what rolls out.
    let (_, history) = rec.finish().await?;
    let first_look = history.iter().any(|v| {
        v["status"]["targetVersion"]["buildID"].is_string()
            && v["status"]["observedGeneration"] == v["metadata"]["generation"]
    });
    ensure!(
        first_look,
        "no status named the target build before Temporal was reached: {history:#?}"
    );
    ensure!(
        message(&twd, "Progressing").contains("127.0.0.1:1"),
        "message does not name the address: {}",
        message(&twd, "Progressing")
    );

    c.apply_connection("temporal", &c.env.temporal_address.clone())
        .await?;
    c.wait_twd("api", "Ready after Temporal is reachable", T, is_ready)
        .await?;

    // Broken the same way again: the same Warning again is one event with a series (a patch),
    // not a second event.
    c.apply_connection("temporal", "127.0.0.1:1").await?;
    let series = eventually("the Warning to repeat as a series", T, || async {
        let warnings: Vec<_> = c
            .events_of("api")
            .await?
            .into_iter()
            .filter(|e| e.reason == "TemporalClientCreationFailed")
            .collect();
        Ok((warnings.iter().any(|e| e.count >= 2)).then_some(warnings))
    })
    .await?;
    ensure!(
        series.len() == 1,
        "want one event with a series: {series:?}"
    );
    ensure!(series[0].type_ == "Warning", "{series:?}");
    Ok(())
}
