//! Static shards on the real control plane (issue 41): two named shards (`a` with two
//! replicas, `b`) and the default shard, each a controller process of its own with its own
//! credentials, so that the audit log tells their writes apart.
//!
//! - every worker deployment is written by exactly one shard, the one its label names;
//! - each shard elects its leader on a Lease of its own, and a killed leader's standby takes
//!   over within the lease time and carries on (it rolls out a new image);
//! - one Temporal namespace's request budget lives in one shard: a worker deployment of shard
//!   `b` on shard `a`'s Temporal namespace is refused (`TemporalNamespaceInOtherShard`) and
//!   nothing of it reaches Temporal, until it is labelled for `a`;
//! - a worker deployment relabelled to another shard (with every worker deployment of its
//!   Temporal namespace, as docs/sharding.md says) is handed over without a double write: after
//!   the relabel, the old shard writes nothing of it, the new one relabels its versioned
//!   Deployments and rolls out its next image;
//! - the chaos checker's invariants hold throughout (no routing to a version without running
//!   workers, no live version scaled down).

#[path = "chaos/support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::{Controller, Rig, complete, condition, current_build, twds};
use temporal_worker_controller::api::{KindSet, TemporalConnection, TemporalWorkerDeployment};
use test_harness::control_plane::AuditEvent;
use test_harness::{names, world};

const KEY: &str = "sharding.temporal.io/key";
const LEASE: &str = "twc-shards";
/// The leader Lease's duration (`src/run/leadership.rs`).
const LEASE_TIME: Duration = Duration::from_secs(15);
const T: Duration = Duration::from_secs(150);

/// The shards: name, selector, and the users (one per replica) they act as.
const SHARDS: [(&str, &str, &[&str]); 3] = [
    (
        "a",
        "sharding.temporal.io/key=a",
        &["shard-a-0", "shard-a-1"],
    ),
    ("b", "sharding.temporal.io/key=b", &["shard-b-0"]),
    (
        "default",
        "sharding.temporal.io/key notin (a,b)",
        &["shard-default-0"],
    ),
];

struct Fleet {
    rig: Rig,
    ns: String,
    lease_ns: String,
    /// Temporal namespaces: shard a's, shard b's, the default shard's.
    tns: [String; 3],
    controllers: Vec<Controller>,
}

impl Fleet {
    async fn start() -> Result<Fleet> {
        let rig = Rig::start().await?;
        let ns = names::unique("shards");
        let lease_ns = names::unique("shards-system");
        let pid = std::process::id();
        let tns = ["a", "b", "d"].map(|s| format!("shards-{s}-{pid}"));
        rig.namespace(&ns, &tns[0], &rig.temporal.address()).await?;
        for t in &tns[1..] {
            rig.temporal.create_namespace(t).await?;
        }
        world::create_namespace(&rig.admin, &lease_ns).await?;
        let mut controllers = Vec::new();
        for (shard, selector, users) in SHARDS {
            for user in users {
                let kubeconfig = rig.plane.user_kubeconfig(user, Some("system:masters"))?;
                let flags = vec![
                    "--shard".to_string(),
                    shard.to_string(),
                    "--shard-selector".to_string(),
                    selector.to_string(),
                ];
                let mut c =
                    Controller::start_with(user, user, &kubeconfig, (&lease_ns, LEASE), flags)?;
                c.wait_serving().await?;
                controllers.push(c);
            }
        }
        Ok(Fleet {
            rig,
            ns,
            lease_ns,
            tns,
            controllers,
        })
    }

    fn api(&self) -> Api<TemporalWorkerDeployment> {
        twds(&self.rig.admin, &self.ns)
    }

    /// Creates (or replaces) worker deployment `name` at `tag` on Temporal namespace `tns`,
    /// labelled for `shard` (`None`: unlabelled).
    async fn apply(&self, name: &str, tag: &str, tns: &str, shard: Option<&str>) -> Result<()> {
        let mut manifest = support::twd(name, tag, tns, json!({"strategy": "AllAtOnce"}));
        if let Some(shard) = shard {
            manifest["metadata"]["labels"] = json!({KEY: shard});
        }
        world::apply(&self.rig.admin, &self.ns, "shards-test", manifest).await
    }

    async fn relabel(&self, name: &str, shard: &str) -> Result<()> {
        self.api()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {KEY: shard}}})),
            )
            .await?;
        Ok(())
    }

    async fn wait_complete(
        &mut self,
        name: &str,
        build_of: &str,
    ) -> Result<TemporalWorkerDeployment> {
        let api = self.api();
        let begin = Instant::now();
        loop {
            let t = api.get(name).await?;
            let target = support::target_build(&t).unwrap_or_default();
            if complete(&t, None) && target.contains(build_of) && current_build(&t) == Some(target)
            {
                return Ok(t);
            }
            if begin.elapsed() > T {
                bail!(
                    "{name} not rolled out to {build_of} after {T:?}: {:?}",
                    t.status.as_ref().map(|s| &s.conditions)
                );
            }
            self.alive()?;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    fn alive(&mut self) -> Result<()> {
        self.controllers
            .iter_mut()
            .try_for_each(Controller::check_alive)
    }

    fn shard_of(user: &str) -> Option<&'static str> {
        SHARDS
            .iter()
            .find(|(_, _, users)| users.contains(&user))
            .map(|(shard, _, _)| *shard)
    }

    /// Successful writes of the shards' users to the objects of worker deployment `name` (the
    /// object itself, its versioned Deployments `name-…`, its Events `name.…`), with the
    /// writing shard and when the write took effect.
    fn writes_of(&self, name: &str) -> Result<Vec<(String, &'static str, f64)>> {
        let mut out = Vec::new();
        for e in self.rig.plane.audit_events()? {
            let Some(shard) = Fleet::shard_of(e.acting_user()) else {
                continue;
            };
            if !(e.is_write() && (200..300).contains(&e.code()) && concerns(&e, name)) {
                continue;
            }
            out.push((
                e.acting_user().to_string(),
                shard,
                e.stage_ms().unwrap_or(0.0),
            ));
        }
        Ok(out)
    }

    async fn leader_of(&self, shard: &str) -> Result<String> {
        let lease = Api::<Lease>::namespaced(self.rig.admin.clone(), &self.lease_ns)
            .get(&format!("{LEASE}-shard-{shard}"))
            .await?;
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .context("the shard's Lease has no holder")
    }

    async fn claim_holder(&self, tns: &str) -> Result<Option<String>> {
        let leases = Api::<Lease>::namespaced(self.rig.admin.clone(), &self.lease_ns)
            .list(&ListParams::default())
            .await?;
        Ok(leases
            .items
            .into_iter()
            .find(|l| {
                l.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("temporal.io/temporal-namespace"))
                    .is_some_and(|n| n == tns)
            })
            .and_then(|l| l.spec?.holder_identity))
    }
}

/// Whether audit event `e` writes an object of worker deployment `name`.
fn concerns(e: &AuditEvent, name: &str) -> bool {
    let Some(o) = &e.object_ref else {
        return false;
    };
    let own = o.resource == "temporalworkerdeployments" && o.name == name;
    let deployment = o.resource == "deployments" && o.name.starts_with(&format!("{name}-"));
    let event = o.resource == "events" && o.name.starts_with(&format!("{name}."));
    own || deployment || event
}

/// The shards that wrote `name`'s objects (after `since`, in ms since the epoch).
fn writers(writes: &[(String, &'static str, f64)], since: f64) -> BTreeSet<&'static str> {
    writes
        .iter()
        .filter(|(_, _, at)| *at > since)
        .map(|(_, shard, _)| *shard)
        .collect()
}

fn now_ms() -> f64 {
    jiff::Timestamp::now().as_microsecond() as f64 / 1e3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shards_split_the_fleet_hand_over_and_keep_one_budget_per_temporal_namespace() -> Result<()>
{
    let mut fleet = Fleet::start().await?;
    let [ta, tb, td] = fleet.tns.clone();
    // One worker deployment per shard, each on its shard's Temporal namespace.
    fleet.apply("alpha", "v1", &ta, Some("a")).await?;
    fleet.apply("bravo", "v1", &tb, Some("b")).await?;
    fleet.apply("delta", "v1", &td, None).await?;
    for name in ["alpha", "bravo", "delta"] {
        fleet.wait_complete(name, "v1").await?;
    }
    each_object_is_written_by_its_own_shard(&fleet)?;
    the_connection_sees_every_shards_users(&fleet).await?;
    for (shard, _, users) in SHARDS {
        let holder = fleet.leader_of(shard).await?;
        ensure!(
            users.contains(&holder.as_str()),
            "shard {shard}'s Lease is held by {holder}"
        );
    }
    ensure!(fleet.claim_holder(&ta).await?.as_deref() == Some("a"));
    ensure!(fleet.claim_holder(&tb).await?.as_deref() == Some("b"));
    ensure!(fleet.claim_holder(&td).await?.as_deref() == Some("default"));

    standby_takes_over(&mut fleet).await?;
    one_budget_per_temporal_namespace(&mut fleet, &ta).await?;
    handover_without_a_double_write(&mut fleet).await?;

    for name in ["alpha", "bravo", "delta", "bravo-on-a"] {
        fleet.api().delete(name, &DeleteParams::default()).await?;
    }
    for name in ["alpha", "bravo", "delta", "bravo-on-a"] {
        world::wait_gone(&fleet.api(), name).await?;
    }
    let violations = fleet.rig.checker.violations();
    ensure!(violations.is_empty(), "invariants violated: {violations:?}");
    Ok(())
}

fn each_object_is_written_by_its_own_shard(fleet: &Fleet) -> Result<()> {
    for (name, shard) in [("alpha", "a"), ("bravo", "b"), ("delta", "default")] {
        let writes = fleet.writes_of(name)?;
        ensure!(!writes.is_empty(), "no shard wrote {name}");
        let by = writers(&writes, 0.0);
        ensure!(
            by == BTreeSet::from([shard]),
            "{name} (shard {shard}) was written by shards {by:?}"
        );
        println!("{name}: {} writes, all by shard {shard}", writes.len());
    }
    Ok(())
}

/// The Connection (unlabelled: the default shard's) lists the worker deployments of every
/// shard, and only the default shard writes it.
async fn the_connection_sees_every_shards_users(fleet: &Fleet) -> Result<()> {
    let connections: Api<TemporalConnection> =
        TemporalConnection::api(fleet.rig.admin.clone(), &fleet.ns, KindSet::Seed);
    world::wait(&connections, "temporal", "users of every shard", |c| {
        c.status.as_ref().is_some_and(|s| {
            ["alpha", "bravo", "delta"]
                .iter()
                .all(|u| s.worker_deployments.iter().any(|w| w == u))
        })
    })
    .await?;
    let writers: BTreeSet<&str> = fleet
        .rig
        .plane
        .audit_events()?
        .iter()
        .filter(|e| e.is_write() && (200..300).contains(&e.code()))
        .filter(|e| {
            e.object_ref.as_ref().is_some_and(|o| {
                o.resource == "temporalconnections"
                    && o.name == "temporal"
                    && o.subresource == "status"
            })
        })
        .filter_map(|e| Fleet::shard_of(e.acting_user()))
        .collect();
    ensure!(
        writers == BTreeSet::from(["default"]),
        "the Connection's status was written by shards {writers:?}"
    );
    Ok(())
}

/// Kills shard `a`'s leader: the other replica leads within the lease time and rolls out
/// alpha's next image.
async fn standby_takes_over(fleet: &mut Fleet) -> Result<()> {
    let leader = fleet.leader_of("a").await?;
    let standby = ["shard-a-0", "shard-a-1"]
        .into_iter()
        .find(|u| *u != leader)
        .context("two replicas of shard a")?;
    let killed = Instant::now();
    fleet
        .controllers
        .iter_mut()
        .find(|c| c.user == leader)
        .context("the leader's process")?
        .kill();
    let new = fleet
        .controllers
        .iter()
        .find(|c| c.user == standby)
        .context("the standby's process")?;
    while !new.is_leader().await {
        ensure!(
            killed.elapsed() < LEASE_TIME + Duration::from_secs(15),
            "shard a's standby does not lead {:?} after its leader was killed",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = killed.elapsed();
    println!("shard a: standby {standby} leads {took:?} after {leader} was killed");
    // The Lease lasts 15 s from its last renewal; the standby re-reads it every second and
    // then says so on /metrics: a few seconds of slack for a loaded machine.
    ensure!(
        took <= LEASE_TIME + Duration::from_secs(5),
        "takeover took {took:?}"
    );
    let since = now_ms();
    let tns = fleet.tns[0].clone();
    fleet.apply("alpha", "v2", &tns, Some("a")).await?;
    fleet.wait_complete("alpha", "v2").await?;
    let after: BTreeSet<String> = fleet
        .writes_of("alpha")?
        .into_iter()
        .filter(|(_, _, at)| *at > since)
        .map(|(user, _, _)| user)
        .collect();
    ensure!(
        after == BTreeSet::from([standby.to_string()]),
        "alpha's v2 rollout was written by {after:?}, not by the standby alone"
    );
    Ok(())
}

/// A worker deployment of shard b on shard a's Temporal namespace is refused, then served
/// once labelled for shard a.
async fn one_budget_per_temporal_namespace(fleet: &mut Fleet, ta: &str) -> Result<()> {
    fleet.apply("bravo-on-a", "v1", ta, Some("b")).await?;
    let refused = world::wait(&fleet.api(), "bravo-on-a", "refused", |t| {
        condition(t, "Progressing")
            .is_some_and(|(_, reason, _)| reason == "TemporalNamespaceInOtherShard")
    })
    .await?;
    let (_, _, message) = condition(&refused, "Progressing").unwrap_or_default();
    println!("bravo-on-a: {message}");
    ensure!(message.contains("shard \"a\""), "{message}");
    ensure!(fleet.claim_holder(ta).await?.as_deref() == Some("a"));
    let deployments: Api<Deployment> = Api::namespaced(fleet.rig.admin.clone(), &fleet.ns);
    let made = deployments
        .list(&ListParams::default().labels("temporal.io/deployment-name=bravo-on-a"))
        .await?;
    ensure!(
        made.items.is_empty(),
        "a refused worker deployment got Deployments"
    );
    fleet.relabel("bravo-on-a", "a").await?;
    fleet.wait_complete("bravo-on-a", "v1").await?;
    Ok(())
}

/// Moves every worker deployment of shard a's Temporal namespace to shard b: after the
/// relabel shard a writes none of their objects, shard b relabels their Deployments and
/// rolls out alpha's next image.
async fn handover_without_a_double_write(fleet: &mut Fleet) -> Result<()> {
    let begin = Instant::now();
    for name in ["alpha", "bravo-on-a"] {
        fleet.relabel(name, "b").await?;
    }
    let relabelled = now_ms();
    let tns = fleet.tns[0].clone();
    fleet.apply("alpha", "v3", &tns, Some("b")).await?;
    fleet.wait_complete("alpha", "v3").await?;
    println!(
        "alpha: handed over to shard b and rolled out v3 in {:?}",
        begin.elapsed()
    );
    for name in ["alpha", "bravo-on-a"] {
        let writes = fleet.writes_of(name)?;
        let after = writers(&writes, relabelled);
        ensure!(
            after == BTreeSet::from(["b"]),
            "after the relabel, {name} was written by shards {after:?}"
        );
    }
    let deployments: Api<Deployment> = Api::namespaced(fleet.rig.admin.clone(), &fleet.ns);
    let alpha = deployments
        .list(&ListParams::default().labels("temporal.io/deployment-name=alpha"))
        .await?;
    let labels: BTreeMap<String, Option<String>> = alpha
        .items
        .iter()
        .map(|d| {
            let name = d.metadata.name.clone().unwrap_or_default();
            let shard = d.metadata.labels.as_ref().and_then(|l| l.get(KEY).cloned());
            (name, shard)
        })
        .collect();
    ensure!(
        !labels.is_empty() && labels.values().all(|s| s.as_deref() == Some("b")),
        "alpha's Deployments are not all labelled for shard b: {labels:?}"
    );
    ensure!(fleet.claim_holder(&tns).await?.as_deref() == Some("b"));
    Ok(())
}
