//! What only the real API server and kube-controller-manager can show of issue 29 item 5:
//! `spec.deployment` and `spec.deploymentMetadata` (labels, annotations, rolling update) land on
//! the real versioned Deployment and a change of them updates that Deployment in place without
//! a new ReplicaSet; the earlier shape (deprecated aliases) gives a `DeprecatedField` Warning,
//! and moving to the current shape updates no Deployment;
//! a mutable image reference (`:latest`) gives one `MutableImageReference` Warning event and a
//! Ready message that says so, without holding the rollout back. The rules themselves are
//! unit-tested (`src/render/tests.rs`, `src/planner/images.rs`, `src/planner/drift_tests.rs`).

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use crate::lifecycle::events_with_reason;
use crate::support::*;

const T: Duration = Duration::from_secs(120);

fn label<'a>(d: &'a Deployment, key: &str) -> Option<&'a str> {
    d.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn revision(d: &Deployment) -> Option<&str> {
    d.metadata
        .annotations
        .as_ref()?
        .get("deployment.kubernetes.io/revision")
        .map(String::as_str)
}

/// The settings in the current shape (`DeploymentSpec` positions and `deploymentMetadata`).
fn settings(team: &str) -> serde_json::Value {
    json!({
        "deploymentMetadata": {"labels": {"team": team}, "annotations": {"owner": "payments"}},
        "deployment": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_settings_land_in_place_and_a_latest_tag_is_warned_about() -> Result<()> {
    let c = case("settings").await?;
    // The earlier shape: deprecated aliases of the same settings.
    let earlier = json!({"deployment": {
        "labels": {"team": "payments"},
        "annotations": {"owner": "payments"},
        "rollingUpdate": {"maxSurge": "50%"}
    }});
    // `:latest`: a mutable reference, warned about, never refused.
    c.apply_twd(
        "ledger",
        "latest",
        json!({"strategy": "AllAtOnce"}),
        earlier,
    )
    .await?;
    let twd = c
        .wait_twd("ledger", "first version Ready", T, is_ready)
        .await?;
    let build = current_build(&twd).context("Ready without a current version")?;
    let ready = condition(&twd, "Ready").context("no Ready")?;
    ensure!(
        ready.message.contains(
            "container worker's image registry.example/worker:latest is a mutable reference"
        ),
        "Ready does not warn about the mutable tag: {}",
        ready.message
    );
    let name = deployment_of("ledger", &build);
    let d = c.deployments().get(&name).await?;
    ensure!(
        label(&d, "team") == Some("payments"),
        "{:?}",
        d.metadata.labels
    );
    ensure!(
        label(&d, "temporal.io/build-id") == Some(build.as_str()),
        "the controller's own labels stay: {:?}",
        d.metadata.labels
    );
    let annotations = d.metadata.annotations.clone().unwrap_or_default();
    ensure!(annotations.get("owner").map(String::as_str) == Some("payments"));
    let rolling = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.clone())
        .context("no rolling update")?;
    ensure!(
        rolling.max_surge == Some(IntOrString::String("50%".into()))
            && rolling.max_unavailable == Some(IntOrString::Int(0)),
        "{rolling:?}"
    );
    let warned = events_with_reason(&c, "MutableImageReference").await?;
    ensure!(warned.len() == 1, "one Warning: {warned:?}");
    ensure!(warned[0]["type"] == "Warning", "{:?}", warned[0]);
    let deprecated = events_with_reason(&c, "DeprecatedField").await?;
    ensure!(
        deprecated.len() == 1
            && deprecated[0]["type"] == "Warning"
            && deprecated[0]["note"].as_str().is_some_and(
                |n| n.contains("spec.deployment.labels to spec.deploymentMetadata.labels")
            ),
        "one DeprecatedField Warning naming the move: {deprecated:?}"
    );
    let first_revision = revision(&d).map(str::to_string);

    the_current_shape_changes_nothing(&c, &name, &d).await?;

    // A label change: the same Deployment is updated in place, no new ReplicaSet (revision).
    c.apply_twd(
        "ledger",
        "latest",
        json!({"strategy": "AllAtOnce"}),
        settings("billing"),
    )
    .await?;
    let d = eventually("the new label on the Deployment", T, || async {
        let d = c.deployments().get(&name).await?;
        Ok((label(&d, "team") == Some("billing")).then_some(d))
    })
    .await?;
    ensure!(
        revision(&d).map(str::to_string) == first_revision,
        "a settings change rolled the Pods: revision {:?} -> {:?}",
        first_revision,
        revision(&d)
    );
    let twd = c.get_twd("ledger").await?;
    ensure!(
        current_build(&twd).as_deref() == Some(build.as_str()),
        "no new version"
    );
    ensure!(
        events_with_reason(&c, "MutableImageReference").await?.len() == 1,
        "one Warning event, not a new one per reconcile"
    );

    refused_at_admission(&c).await
}

/// The same settings moved from the deprecated aliases to the current shape: nothing on the
/// Deployment changes (the record is the same).
async fn the_current_shape_changes_nothing(c: &Case, name: &str, d: &Deployment) -> Result<()> {
    c.apply_twd(
        "ledger",
        "latest",
        json!({"strategy": "AllAtOnce"}),
        settings("payments"),
    )
    .await?;
    c.wait_twd("ledger", "the current shape observed", T, is_ready)
        .await?;
    let same = c.deployments().get(name).await?;
    ensure!(
        same.metadata.generation == d.metadata.generation
            && same.metadata.annotations == d.metadata.annotations
            && same.metadata.labels == d.metadata.labels,
        "moving to the current shape updated the Deployment: generation {:?} -> {:?}",
        d.metadata.generation,
        same.metadata.generation
    );

    Ok(())
}

/// A reserved key, a strategy that takes every Pod of a version down at once and a nested
/// deadline that disagrees with the top-level one are refused at admission (CEL), before any
/// controller sees them.
async fn refused_at_admission(c: &Case) -> Result<()> {
    let refused = c
        .apply_twd(
            "ledger",
            "latest",
            json!({"strategy": "AllAtOnce"}),
            json!({"deploymentMetadata": {"labels": {"temporal.io/build-id": "mine"}}}),
        )
        .await
        .expect_err("a reserved label key is refused");
    ensure!(
        format!("{refused:#}").contains("are reserved"),
        "{refused:#}"
    );
    for (deployment, says) in [
        (
            json!({"strategy": {"type": "Recreate"}}),
            "only RollingUpdate",
        ),
        (
            json!({"progressDeadlineSeconds": 30}),
            "are the same deadline",
        ),
    ] {
        let refused = c
            .apply_twd(
                "ledger",
                "latest",
                json!({"strategy": "AllAtOnce"}),
                json!({"deployment": deployment, "progressDeadlineSeconds": 60}),
            )
            .await
            .expect_err("refused at admission");
        ensure!(format!("{refused:#}").contains(says), "{refused:#}");
    }
    Ok(())
}
