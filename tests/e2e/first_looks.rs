//! Issue 52: objects created while the controller runs get exactly one first look each, and so
//! one set of the first look's events, when a burst of them arrives at once. The first look
//! goes through the lane (`src/lane/`) or through the object's own reconcile, whichever comes
//! first; the per-object slot both take (`src/lane/slots.rs`) makes a second one impossible.
//! Its first version of the lane was reverted because both wrote a first look: each object
//! then had two `MutableImageReference` and two `DeprecatedField` Warnings, which this test
//! counts (a repeated Warning is a series: its count is read too).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::json;

use crate::support::*;

/// Objects created at once.
const BURST: usize = 40;
const T: Duration = Duration::from_secs(240);

/// The first look's status message (`src/planner/first_look.rs`): the full pass replaces it.
const FIRST_LOOK: &str = "is looking up the worker deployment in Temporal";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_new_objects_gets_one_first_look_and_one_set_of_events_each() -> Result<()> {
    let c = case("burst").await?;
    let names: Vec<String> = (0..BURST).map(|i| format!("burst-{i}")).collect();
    // `:latest` and a deprecated alias: each first look emits one Warning of each. No
    // scheduler by that name runs, so the Pods stay Pending and no worker runs: the first look
    // and the pass after it are what is tested.
    let applies = names.iter().map(|name| {
        let twd = test_harness::manifests::twd(name)
            .replicas(1)
            .pod_labels(json!({"app": name}))
            .tag("latest")
            .task_queue(&c.task_queue)
            .rollout(json!({"strategy": "AllAtOnce"}))
            .temporal_namespace(&c.temporal_ns)
            .spec(json!({
                "deployment": {"labels": {"team": "payments"}},
                "template": {"spec": {"schedulerName": "nobody"}}
            }))
            .build();
        c.apply(twd)
    });
    futures::future::try_join_all(applies).await?;
    eventually("every object past its first look", T, || async {
        let list = c.twds().list(&Default::default()).await?;
        let past = list.items.iter().filter(|t| past_first_look(t)).count();
        Ok((past == BURST).then_some(()))
    })
    .await?;
    let mut counts = BTreeMap::new();
    let mut seen = BTreeMap::new();
    for name in &names {
        let events = c.events_of(name).await?;
        let count = |reason: &str| -> i32 {
            events
                .iter()
                .filter(|e| e.reason == reason)
                .map(|e| e.count)
                .sum()
        };
        counts.insert(
            name.as_str(),
            (count("MutableImageReference"), count("DeprecatedField")),
        );
        seen.insert(name.as_str(), events);
    }
    let wrong: Vec<_> = counts.iter().filter(|(_, n)| **n != (1, 1)).collect();
    ensure!(
        wrong.is_empty(),
        "objects without exactly one set of first-look Warnings (MutableImageReference, \
         DeprecatedField): {wrong:?}; the events of the first: {:?}",
        wrong.first().and_then(|(name, _)| seen.get(*name))
    );
    Ok(())
}

/// Reported on, and by a pass after the first look (its message is gone).
fn past_first_look(twd: &temporal_worker_controller::api::TemporalWorkerDeployment) -> bool {
    let Some(status) = &twd.status else {
        return false;
    };
    status.reported()
        && status
            .conditions
            .iter()
            .all(|c| !c.message.contains(FIRST_LOOK))
}
