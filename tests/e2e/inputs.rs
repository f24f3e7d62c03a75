//! Bad inputs end to end (issue 3): each gives a clear condition (or an admission error),
//! nothing panics, and the rollout completes once the input is fixed.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
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
    c.apply_twd("api", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c
        .wait_twd("api", "TemporalClientCreationFailed", T, |t| {
            observed(t) && condition_is(t, "Progressing", "False", "TemporalClientCreationFailed")
        })
        .await?;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decreasing_steps_are_refused_at_admission() -> Result<()> {
    let c = case("steps").await?;
    let bad = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 50, "pauseDuration": "1s"},
        {"rampPercentage": 25, "pauseDuration": "1s"}
    ]});
    let err = c
        .apply_twd("api", "v1", bad, json!({}))
        .await
        .err()
        .context("decreasing steps were admitted")?;
    let text = format!("{err:#}");
    ensure!(
        text.contains("rampPercentage must increase"),
        "unclear admission error: {text}"
    );
    ensure!(
        c.twds().get_opt("api").await?.is_none(),
        "refused object was stored"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_the_schema_admits_but_the_controller_cannot_use_stall_with_invalid_spec()
-> Result<()> {
    let c = case("invalid").await?;
    stall_on_an_env_var_the_controller_owns(&c).await?;
    stall_on_gate_input_inline_and_from_a_secret(&c).await?;
    refuse_a_malformed_duration_at_admission(&c).await?;

    // Fixing the spec (a new generation) clears the stall and completes the rollout.
    c.apply_twd("api", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c
        .wait_twd("api", "Ready after the fix", T, is_ready)
        .await?;
    ensure!(
        condition(&twd, "Stalled").is_some_and(|c| c.status == "False"),
        "{:?}",
        twd.status
    );
    Ok(())
}

/// An env var the controller owns: the schema cannot say it, the controller refuses it.
async fn stall_on_an_env_var_the_controller_owns(c: &Case) -> Result<()> {
    c.apply_twd(
        "api",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"template": {"spec": {"containers": [{
            "name": "worker",
            "image": "registry.example/worker:v1",
            "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue}, {"name": "TEMPORAL_ADDRESS", "value": "elsewhere:7233"}]
        }]}}}),
    )
    .await?;
    let twd = c
        .wait_twd("api", "Stalled/InvalidSpec", T, |t| {
            observed(t) && condition_is(t, "Stalled", "True", "InvalidSpec")
        })
        .await?;
    let msg = message(&twd, "Stalled");
    ensure!(
        msg.contains("spec.template.spec.containers[0].env[1]") && msg.contains("TEMPORAL_ADDRESS"),
        "message must name the field: {msg}"
    );
    ensure!(
        condition_is(&twd, "Progressing", "False", "InvalidSpec"),
        "{:?}",
        twd.status
    );
    ensure!(
        c.deployments()
            .list(&Default::default())
            .await?
            .items
            .is_empty(),
        "acted on an invalid spec"
    );
    Ok(())
}

/// Gate input inline and from a Secret at once: the CRD cannot say it (kube-apiserver hides
/// schema-less `input` from CEL), so the controller does, naming the field.
async fn stall_on_gate_input_inline_and_from_a_secret(c: &Case) -> Result<()> {
    c.apply_twd(
        "api",
        "v1",
        json!({"strategy": "AllAtOnce", "gate": {"workflowType": "gate", "input": {"a": 1},
               "inputFrom": {"secretKeyRef": {"name": "gate-input", "key": "k"}}}}),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("api", "Stalled/InvalidSpec for the gate input", T, |t| {
            observed(t)
                && condition_is(t, "Stalled", "True", "InvalidSpec")
                && message(t, "Stalled").contains("inputFrom")
        })
        .await?;
    let msg = message(&twd, "Stalled");
    ensure!(
        msg.contains("spec.rollout.gate") && msg.contains("only one of input or inputFrom"),
        "message must name the field: {msg}"
    );
    Ok(())
}

/// A duration the schema can check is refused at admission, naming the field.
async fn refuse_a_malformed_duration_at_admission(c: &Case) -> Result<()> {
    let err = c
        .apply_twd(
            "api",
            "v1",
            json!({"strategy": "AllAtOnce"}),
            json!({"sunset": {"scaledownDelay": "1 hour"}}),
        )
        .await
        .err()
        .context("a malformed duration was admitted")?;
    ensure!(
        format!("{err:#}").contains("spec.sunset.scaledownDelay"),
        "{err:#}"
    );
    Ok(())
}
