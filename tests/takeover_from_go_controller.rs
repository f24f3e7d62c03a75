//! Take-over from the Go temporal-worker-controller v1.8.1 (issue 25): our controller starts
//! where the Go controller ran, on the same objects, and nothing restarts.
//!
//! Real control plane, real Temporal dev server, real workers (the kubelet stand-in), the real
//! Go controller ([`test_harness::go_controller`]):
//! 1. the Go controller rolls out v1 (AllAtOnce); a pinned `wait` workflow opens on v1;
//! 2. a Progressive v2 starts under the Go controller (first step 25 %);
//! 3. the Go controller is stopped; its CRDs are replaced by ours (`crds/*.yaml`, server-side
//!    apply with force, as the migration guide says); our controller starts;
//! 4. at every observation until the end: the same build IDs (no new version in Temporal, no
//!    new Deployment), the same Deployments (UID, generation) and Pods (UID, restart count),
//!    our status and conditions true (target v2, never Stalled, Ready only once Temporal
//!    routes to v2);
//! 5. v2 finishes its ramp under our controller, continuing the step the Go controller began
//!    (its start time in Temporal is kept) and taking over the routing manager identity;
//! 6. v1 drains and keeps its worker while the pinned workflow is open, and is sunset only
//!    after the workflow completes.

#[path = "common/controller.rs"]
mod controller;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use temporalio_client::Connection;
use test_harness::go_controller::{self, GoRig, RigCase};
use test_harness::observe::describe_deployment;

const NAME: &str = "orders";
const QUEUE: &str = "takeover-tq";
/// Each Progressive step's pause: long enough to stop one controller and start the other
/// inside the first step, short enough for the test.
const STEP_PAUSE: Duration = Duration::from_secs(45);
const FIRST_RAMP: f32 = 25.0;
const SECOND_RAMP: f32 = 60.0;
/// Our controller's identity in Temporal.
const IDENTITY: &str = "twc-takeover";
/// Generous: cold starts on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(240);
const POLL: Duration = Duration::from_millis(300);

#[test]
fn a_status_difference_is_found_unless_documented() {
    let go = json!({"targetVersion": {"deployment": {"name": "a"}, "taskQueues": [{"name": "q"}]},
                    "conditions": [{"type": "Ready", "reason": "x"}], "versionConflictToken": "t1"});
    let mut ours = go.clone();
    ours["conditions"][0]["reason"] = json!("y");
    ours["versionConflictToken"] = json!("t2");
    assert!(undocumented_differences(&go, &ours).is_empty());
    ours["targetVersion"]["taskQueues"] = json!([]);
    let found = undocumented_differences(&go, &ours);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("/targetVersion/taskQueues/0/name"),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_controller_takes_over_a_go_controller_rollout_without_restarting_anything()
-> Result<()> {
    controller::init_tracing("warn");
    let mut rig = GoRig::start().await?;
    let result = take_over(&mut rig).await;
    if result.is_err() {
        eprintln!("Go controller log tail:\n{}", rig.controller_log_tail());
    }
    result
}

async fn take_over(rig: &mut GoRig) -> Result<()> {
    let case = rig.case("takeover").await?;
    let world = Observer::new(rig, &case).await?;

    // 1. The Go controller rolls out v1 (AllAtOnce); a pinned workflow opens on it.
    apply(rig, &case, "v1", json!({"strategy": "AllAtOnce"})).await?;
    let v1 =
        go_controller::wait_current_in_status(&rig.client, &case.namespace, NAME, None, DEADLINE)
            .await?;
    ensure!(
        go_controller::is_go_build_id_for_tag(&v1, "v1"),
        "v1 is {v1:?}"
    );
    go_controller::wait_current_in_temporal(
        &world.temporal,
        &case.temporal_namespace,
        &world.deployment,
        &v1,
        DEADLINE,
    )
    .await?;
    let workflow = format!("pinned-{}", case.namespace);
    start_wait_workflow_on(rig, &case, &workflow, &v1).await?;

    // 2. A Progressive v2 under the Go controller: its first step, seen in Temporal and in its
    //    status for the current generation.
    let steps = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": FIRST_RAMP, "pauseDuration": format!("{}s", STEP_PAUSE.as_secs())},
        {"rampPercentage": SECOND_RAMP, "pauseDuration": format!("{}s", STEP_PAUSE.as_secs())},
    ]});
    apply(rig, &case, "v2", steps).await?;
    let ramp = world.wait_ramp(&v1, FIRST_RAMP).await?;
    let v2 = ramp.ramping.clone().context("ramping build")?;
    ensure!(
        go_controller::is_go_build_id_for_tag(&v2, "v2"),
        "v2 is {v2:?}"
    );
    world.wait_go_status_ramping(&v2).await?;

    // 3. Stop it, replace its CRDs with ours, start ours on the same objects.
    let before = world.snapshot(&[&v1, &v2]).await?;
    // What a Go user's jsonpath reads from the Go controller's status: the same values must
    // come out of ours (`src/reconcile/report/go_status.rs`).
    let go_status = world.worker_deployment().await?["status"].clone();
    let go_target = go_status["targetVersion"].clone();
    let queues = go_target["taskQueues"].as_array();
    ensure!(
        go_target["deployment"]["name"].is_string() && queues.is_some_and(|q| !q.is_empty()),
        "the Go controller's target has no deployment.name or taskQueues: {go_target}"
    );
    let found = &before.deployments;
    ensure!(
        found.len() == 2,
        "expected v1 and v2 Deployments, found {found:?}"
    );
    let mut controller = rig.controller.take().context("Go controller not running")?;
    controller.stop();
    test_harness::control_plane::install_crds(&rig.client, &test_harness::repo_root().join("crds"))
        .await
        .context("replacing the Go controller's CRDs with ours")?;
    let ours = controller::start(
        rig.client.clone(),
        &controller::watching(&case.namespace, IDENTITY),
    )
    .await?;
    let started = Instant::now();

    // 4–5. v2 completes its ramp under our controller; nothing restarts meanwhile.
    let finished = world
        .watch_until_promoted(&before, &v1, &v2, &ramp, &go_target)
        .await;
    let promoted = match finished {
        Ok(p) => p,
        Err(e) => {
            ours.stop().await;
            return Err(e);
        }
    };
    // Then the Go status at the take-over moment against our first status of the same object:
    // a difference only where the migration guide documents one.
    let checked = (world.wait_conflict_token_in_status().await)
        .and_then(|()| check_status_diff(&go_status, &promoted.first_ours));
    if let Err(e) = checked {
        ours.stop().await;
        return Err(e);
    }
    println!(
        "take-over: v1 {v1}, v2 {v2}; second step {:?} and promotion {:?} after our start",
        promoted.second_step_at.map(|t| t.duration_since(started)),
        started.elapsed()
    );

    // 6. v1 drains, keeps its worker while the workflow is open, and is sunset after it.
    let sunset = world
        .drain_then_sunset(&before, &v1, &v2, &workflow, rig, &case)
        .await;
    ours.stop().await;
    sunset?;
    let routing = world.routing().await?;
    ensure!(
        routing.manager == IDENTITY,
        "routing manager is {:?}, expected ours ({IDENTITY:?}) after the take-over",
        routing.manager
    );
    Ok(())
}

/// The Go controller's `WorkerDeployment` with image tag `tag` and `rollout`.
async fn apply(rig: &GoRig, case: &RigCase, tag: &str, rollout: Value) -> Result<()> {
    let wd = go_controller::worker_deployment_manifest(
        NAME,
        &case.connection,
        &case.temporal_namespace,
        &format!("registry.example/worker:{tag}"),
        QUEUE,
        rollout,
    );
    go_controller::apply(&rig.client, &case.namespace, &wd).await
}

/// `temporal` CLI against the rig's server in the case's namespace.
async fn cli(rig: &GoRig, case: &RigCase, args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::from(rig.temporal.cli())
        .args(args)
        .args([
            "--address",
            &rig.temporal.address(),
            "--namespace",
            &case.temporal_namespace,
        ])
        .output()
        .await?;
    ensure!(out.status.success(), "temporal {args:?}: {out:?}");
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Starts `wait` workflow `wf` (pinned by the workers' default) and waits until it runs on `build`.
async fn start_wait_workflow_on(rig: &GoRig, case: &RigCase, wf: &str, build: &str) -> Result<()> {
    cli(
        rig,
        case,
        &[
            "workflow",
            "start",
            "--type",
            "wait",
            "--task-queue",
            QUEUE,
            "--workflow-id",
            wf,
        ],
    )
    .await?;
    test_harness::wait::eventually(&format!("{wf} running on {build}"), DEADLINE, || async {
        let out = cli(
            rig,
            case,
            &["workflow", "describe", "--workflow-id", wf, "-o", "json"],
        )
        .await?;
        let d: Value = serde_json::from_str(&out)?;
        let on = d
            .pointer("/workflowExecutionInfo/versioningInfo/deploymentVersion/buildId")
            .and_then(Value::as_str);
        Ok((on == Some(build)).then_some(()))
    })
    .await
}

/// Temporal's routing of the worker deployment.
#[derive(Clone, Debug, Default, PartialEq)]
struct Routing {
    current: Option<String>,
    ramping: Option<String>,
    ramp: f32,
    /// `ramping_version_percentage_changed_time`, as Temporal reports it (the step's start).
    ramp_changed: Option<(i64, i32)>,
    manager: String,
    /// Every build Temporal lists, with its status (`DRAINING`, ...).
    versions: BTreeMap<String, String>,
}

/// A Deployment's identity and what would change if it were rolled or re-rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DeploymentFacts {
    uid: String,
    generation: i64,
    replicas: Option<i32>,
}

/// What must not change.
#[derive(Clone, Debug)]
struct Snapshot {
    /// Build ID → its Deployment.
    deployments: BTreeMap<String, DeploymentFacts>,
    /// Build ID → (Pod UID → restart count).
    pods: BTreeMap<String, BTreeMap<String, i32>>,
}

struct Promoted {
    second_step_at: Option<Instant>,
    /// Our first status of the object, while the rollout is where the Go controller left it.
    first_ours: Value,
}

/// Where our first status may differ from the Go controller's last one (JSON pointers, `*` for
/// an array index; a pattern covers everything under it), each documented in
/// `docs/migrating-from-go-controller.md`, "What changes in status, events and metrics".
const DOCUMENTED_STATUS_DIFFERENCES: &[(&str, &str)] = &[
    (
        "/conditions",
        "the condition set and reasons: Ready/Progressing/Reconciling/Stalled, the deprecated \
         types gone, messages of ours",
    ),
    (
        "/versionConflictToken",
        "Temporal's token after this reconcile's reads and routing writes",
    ),
];

/// Fails on a difference between the Go status and ours that nothing documents; prints what
/// was compared.
fn check_status_diff(go_status: &Value, first_ours: &Value) -> Result<()> {
    let undocumented = undocumented_differences(go_status, first_ours);
    let mut compared = Vec::new();
    leaves(go_status, String::new(), &mut compared);
    println!(
        "take-over status diff: {} leaves of the Go status compared: {:?}",
        compared.len(),
        compared.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>()
    );
    ensure!(
        undocumented.is_empty(),
        "our first status differs from the Go controller's last one where nothing documents \
         it:\n  {}\nGo: {go_status}\nours: {first_ours}",
        undocumented.join("\n  ")
    );
    Ok(())
}

/// The leaves of `v` as (JSON pointer, value).
fn leaves(v: &Value, at: String, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out)),
        _ => out.push((at, v.clone())),
    }
}

/// Every leaf of the Go controller's status that ours leaves out or gives another value,
/// outside [`DOCUMENTED_STATUS_DIFFERENCES`]: what a Go user's jsonpath would read differently.
fn undocumented_differences(go: &Value, ours: &Value) -> Vec<String> {
    let mut go_leaves = Vec::new();
    leaves(go, String::new(), &mut go_leaves);
    let documented = |pointer: &str| {
        let general: Vec<&str> = pointer
            .split('/')
            .map(|seg| {
                if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                    "*"
                } else {
                    seg
                }
            })
            .collect();
        let general = general.join("/");
        DOCUMENTED_STATUS_DIFFERENCES
            .iter()
            .any(|(p, _)| general == *p || general.starts_with(&format!("{p}/")))
    };
    go_leaves
        .into_iter()
        .filter(|(pointer, value)| ours.pointer(pointer) != Some(value) && !documented(pointer))
        .map(|(pointer, value)| format!("{pointer}: Go {value}, ours {:?}", ours.pointer(&pointer)))
        .collect()
}

struct Observer {
    client: kube::Client,
    namespace: String,
    temporal_namespace: String,
    deployment: String,
    temporal: Connection,
}

impl Observer {
    async fn new(rig: &GoRig, case: &RigCase) -> Result<Observer> {
        Ok(Observer {
            client: rig.client.clone(),
            namespace: case.namespace.clone(),
            temporal_namespace: case.temporal_namespace.clone(),
            deployment: case.temporal_deployment(NAME),
            temporal: rig.temporal.connect("takeover-observer").await?,
        })
    }

    async fn routing(&self) -> Result<Routing> {
        let Some(resp) =
            describe_deployment(&self.temporal, &self.temporal_namespace, &self.deployment).await?
        else {
            return Ok(Routing::default());
        };
        let info = resp.worker_deployment_info.unwrap_or_default();
        let rc = info.routing_config.unwrap_or_default();
        let build = |v: Option<
            &temporalio_common::protos::temporal::api::deployment::v1::WorkerDeploymentVersion,
        >| { v.map(|v| v.build_id.clone()).filter(|b| !b.is_empty()) };
        let versions = info
            .version_summaries
            .iter()
            .filter_map(|s| {
                let b = s.deployment_version.as_ref()?.build_id.clone();
                let status = temporalio_common::protos::temporal::api::enums::v1::WorkerDeploymentVersionStatus::try_from(s.status)
                    .map(|s| s.as_str_name().trim_start_matches("WORKER_DEPLOYMENT_VERSION_STATUS_").to_string())
                    .unwrap_or_default();
                Some((b, status))
            })
            .collect();
        Ok(Routing {
            current: build(rc.current_deployment_version.as_ref()),
            ramping: build(rc.ramping_deployment_version.as_ref()),
            ramp: rc.ramping_version_percentage,
            ramp_changed: rc
                .ramping_version_percentage_changed_time
                .map(|t| (t.seconds, t.nanos)),
            manager: info.manager_identity,
            versions,
        })
    }

    /// Waits until Temporal ramps a build other than `current` at `percentage`.
    async fn wait_ramp(&self, current: &str, percentage: f32) -> Result<Routing> {
        test_harness::wait::eventually(
            &format!("Temporal to ramp a new build at {percentage}%"),
            DEADLINE,
            || async {
                let r = self.routing().await?;
                let ok = r.current.as_deref() == Some(current)
                    && r.ramping.as_deref().is_some_and(|b| b != current)
                    && (r.ramp - percentage).abs() < 0.01;
                Ok(ok.then_some(r))
            },
        )
        .await
    }

    /// Our status's `versionConflictToken` comes to equal Temporal's current conflict token
    /// (base64, as the Go controller writes it).
    async fn wait_conflict_token_in_status(&self) -> Result<()> {
        use base64::Engine as _;
        let last = std::sync::Mutex::new((Value::Null, String::new()));
        test_harness::wait::eventually(
            "versionConflictToken equal to Temporal's current token",
            DEADLINE,
            || async {
                let resp =
                    describe_deployment(&self.temporal, &self.temporal_namespace, &self.deployment)
                        .await?
                        .context("no worker deployment in Temporal")?;
                let token = base64::engine::general_purpose::STANDARD.encode(&resp.conflict_token);
                let wd = self.worker_deployment().await?;
                let ours = wd["status"]["versionConflictToken"].clone();
                let equal = ours == json!(token);
                if let Ok(mut l) = last.lock() {
                    *l = (ours, token);
                }
                Ok(equal.then_some(()))
            },
        )
        .await
        .with_context(|| format!("last (status, Temporal): {:?}", last.lock().ok()))
    }

    async fn worker_deployment(&self) -> Result<Value> {
        go_controller::get_worker_deployment(&self.client, &self.namespace, NAME)
            .await?
            .context("the WorkerDeployment is gone")
    }

    /// The Go controller wrote its status for the current generation with target `v2`
    /// ramping: what a take-over finds when the Go controller ran until it stopped.
    async fn wait_go_status_ramping(&self, v2: &str) -> Result<()> {
        test_harness::wait::eventually("the Go controller's status for v2", DEADLINE, || async {
            let wd = self.worker_deployment().await?;
            let generation = wd["metadata"]["generation"].as_i64();
            let status = &wd["status"];
            let ready = condition(status, "Ready");
            let ok = status["targetVersion"]["buildID"] == v2
                && ready["reason"] == "Ramping"
                && ready["observedGeneration"].as_i64() == generation
                && status.get("observedGeneration").is_none();
            Ok(ok.then_some(()))
        })
        .await
    }

    async fn snapshot(&self, builds: &[&str]) -> Result<Snapshot> {
        let mut deployments = BTreeMap::new();
        let mut pods = BTreeMap::new();
        for build in builds {
            if let Some(d) = self.deployment_of(build).await? {
                deployments.insert(build.to_string(), d);
            }
            pods.insert(build.to_string(), self.pods_of(build).await?);
        }
        Ok(Snapshot { deployments, pods })
    }

    /// Every Deployment of the WorkerDeployment by build ID (there must be one per build).
    async fn deployments(&self) -> Result<BTreeMap<String, DeploymentFacts>> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = api
            .list(&ListParams::default().labels(&format!("temporal.io/deployment-name={NAME}")))
            .await?;
        let mut out = BTreeMap::new();
        for d in list.items {
            let build = d
                .labels()
                .get("temporal.io/build-id")
                .cloned()
                .unwrap_or_default();
            let facts = DeploymentFacts {
                uid: d.uid().unwrap_or_default(),
                generation: d.metadata.generation.unwrap_or_default(),
                replicas: d.spec.replicas,
            };
            if out.insert(build.clone(), facts).is_some() {
                bail!("two Deployments for build {build}");
            }
        }
        Ok(out)
    }

    /// Who wrote a build's Deployment, and when (its managed fields), for failure messages.
    async fn writers_of(&self, build: &str) -> Result<String> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = api
            .list(&ListParams::default().labels(&format!("temporal.io/build-id={build}")))
            .await?;
        let d = list.items.first().context("no Deployment")?;
        Ok(serde_json::to_string(&json!({
            "managedFields": d.metadata.managed_fields,
            "annotations": d.metadata.annotations,
            "podAnnotations": d.spec.template.metadata.as_ref().and_then(|m| m.annotations.clone()),
        }))?)
    }

    async fn deployment_of(&self, build: &str) -> Result<Option<DeploymentFacts>> {
        Ok(self.deployments().await?.remove(build))
    }

    /// Pod UID → restart count of the build's Pods.
    async fn pods_of(&self, build: &str) -> Result<BTreeMap<String, i32>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = api
            .list(&ListParams::default().labels(&format!("temporal.io/build-id={build}")))
            .await?;
        Ok(list
            .items
            .iter()
            .map(|p| {
                let restarts = p
                    .status
                    .iter()
                    .flat_map(|s| s.container_statuses.iter().flatten())
                    .map(|c| c.restart_count)
                    .sum();
                (p.uid().unwrap_or_default(), restarts)
            })
            .collect())
    }

    /// Nothing was created, replaced, re-rendered or restarted: the Deployments (of `builds`,
    /// all of them when `exact`) and their Pods are those of the snapshot.
    async fn unchanged(&self, before: &Snapshot, builds: &[&str]) -> Result<()> {
        let now = self.deployments().await?;
        for build in now.keys() {
            ensure!(
                before.deployments.contains_key(build),
                "a new Deployment appeared for build {build}: {now:?}"
            );
        }
        for build in builds {
            let was = &before.deployments[*build];
            let is = now
                .get(*build)
                .with_context(|| format!("the Deployment of {build} is gone"))?;
            if is != was {
                bail!(
                    "the Deployment of {build} changed: was {was:?}, is {is:?}; written by {}",
                    self.writers_of(build).await?
                );
            }
            let pods = self.pods_of(build).await?;
            ensure!(
                pods == before.pods[*build],
                "the Pods of {build} changed (replaced or restarted): was {:?}, are {pods:?}",
                before.pods[*build]
            );
        }
        Ok(())
    }

    /// Our status, once we wrote one (it carries `observedGeneration`), must be true: target
    /// v2, never Stalled, no reason that means the take-over failed, and Ready only once
    /// Temporal routes to v2 (`routing` is read after the status, and promotion is final).
    fn our_status_is_true(wd: &Value, v2: &str, routing: &Routing) -> Result<bool> {
        let status = &wd["status"];
        if status.get("observedGeneration").is_none() {
            return Ok(false);
        }
        ensure!(
            status["targetVersion"]["buildID"] == v2,
            "our status targets {}, not {v2}: {status}",
            status["targetVersion"]["buildID"]
        );
        let ready = condition(status, "Ready");
        let stalled = condition(status, "Stalled");
        ensure!(stalled["status"] != "True", "Stalled: {status}");
        for bad in [
            "RoutingManagedElsewhere",
            "DuplicateInstall",
            "InvalidSpec",
            "ConnectionNotFound",
            "TemporalConnectionNotFound",
        ] {
            ensure!(ready["reason"] != bad, "Ready reason {bad}: {status}");
        }
        if ready["status"] == "True" {
            ensure!(
                routing.current.as_deref() == Some(v2),
                "Ready=True while Temporal routes to {:?}: {status}",
                routing.current
            );
        }
        Ok(true)
    }

    /// Until Temporal routes to v2 and our status says so: invariants at every look; the
    /// ramp never goes back below the Go controller's first step, the first step keeps the
    /// start time the Go controller gave it, and the second step is seen.
    async fn watch_until_promoted(
        &self,
        before: &Snapshot,
        v1: &str,
        v2: &str,
        go_ramp: &Routing,
        go_target: &Value,
    ) -> Result<Promoted> {
        let deadline = Instant::now() + DEADLINE;
        let mut second_step_at = None;
        let mut ours_seen = false;
        // Our status, while v2 still ramps, with the Go controller's deployment.name and
        // taskQueues of the target.
        let mut go_fields_kept = false;
        let mut first_ours = None;
        loop {
            self.unchanged(before, &[v1, v2]).await?;
            let wd = self.worker_deployment().await?;
            let r = self.routing().await?;
            let extra: Vec<_> = r.versions.keys().filter(|b| *b != v1 && *b != v2).collect();
            ensure!(extra.is_empty(), "new Temporal versions {extra:?}: {r:?}");
            let ours_now = Self::our_status_is_true(&wd, v2, &r)?;
            ours_seen |= ours_now;
            if ours_now && first_ours.is_none() && r.current.as_deref() == Some(v1) {
                first_ours = Some(wd["status"].clone());
            }
            let target = &wd["status"]["targetVersion"];
            go_fields_kept |= ours_now
                && r.current.as_deref() == Some(v1)
                && target["deployment"]["name"] == go_target["deployment"]["name"]
                && target["taskQueues"] == go_target["taskQueues"];
            if r.current.as_deref() == Some(v2) {
                ensure!(
                    second_step_at.is_some(),
                    "promoted without the second step: {r:?}"
                );
                ensure!(
                    go_fields_kept,
                    "our status never showed the Go controller's targetVersion.deployment.name \
                     and taskQueues while v2 ramped ({go_target}); last: {target}"
                );
                if ours_seen && condition(&wd["status"], "Ready")["status"] == "True" {
                    let first_ours =
                        first_ours.context("no status of ours seen while v2 still ramped")?;
                    return Ok(Promoted {
                        second_step_at,
                        first_ours,
                    });
                }
            } else {
                ensure!(
                    r.current.as_deref() == Some(v1) && r.ramping.as_deref() == Some(v2),
                    "routing left the rollout: {r:?}"
                );
                ensure!(r.ramp >= FIRST_RAMP - 0.01, "ramp went back: {r:?}");
                if (r.ramp - FIRST_RAMP).abs() < 0.01 {
                    ensure!(
                        r.ramp_changed == go_ramp.ramp_changed,
                        "the first step was restarted (its start moved): {r:?} vs {go_ramp:?}"
                    );
                }
                if (r.ramp - SECOND_RAMP).abs() < 0.01 {
                    second_step_at.get_or_insert_with(Instant::now);
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "v2 not promoted within {DEADLINE:?}: routing {r:?}, status {}",
                    wd["status"]
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// v1 drains with its workflow open and keeps its Deployment, replicas and Pod; once the
    /// workflow completes it is sunset (its Deployment deleted). v2 stays untouched.
    async fn drain_then_sunset(
        &self,
        before: &Snapshot,
        v1: &str,
        v2: &str,
        workflow: &str,
        rig: &GoRig,
        case: &RigCase,
    ) -> Result<()> {
        // Draining in Temporal and in our status, with the pinned workflow counted.
        test_harness::wait::eventually(
            "v1 Draining with its workflow counted",
            DEADLINE,
            || async {
                self.unchanged(before, &[v1, v2]).await?;
                let r = self.routing().await?;
                let wd = self.worker_deployment().await?;
                Self::our_status_is_true(&wd, v2, &r)?;
                let ours = wd["status"]["deprecatedVersions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|d| d["buildID"] == v1)
                    .cloned()
                    .unwrap_or(Value::Null);
                let ok = r.versions.get(v1).map(String::as_str) == Some("DRAINING")
                    && ours["status"] == "Draining"
                    && ours["openPinnedWorkflows"].as_i64().unwrap_or(0) >= 1;
                Ok(ok.then_some(()))
            },
        )
        .await?;
        // Still everything as the Go controller left it, then the workflow completes.
        self.unchanged(before, &[v1, v2]).await?;
        cli(
            rig,
            case,
            &[
                "workflow",
                "signal",
                "--workflow-id",
                workflow,
                "--name",
                "finish",
            ],
        )
        .await?;
        // Sunset: drained, scaled down, deleted; v2 untouched all along.
        test_harness::wait::eventually(
            "v1's Deployment deleted after its workflow",
            DEADLINE,
            || async {
                self.unchanged(before, &[v2]).await?;
                let r = self.routing().await?;
                let wd = self.worker_deployment().await?;
                Self::our_status_is_true(&wd, v2, &r)?;
                ensure!(
                    r.current.as_deref() == Some(v2),
                    "routing moved off v2: {r:?}"
                );
                Ok(self.deployment_of(v1).await?.is_none().then_some(()))
            },
        )
        .await?;
        let wd = self.worker_deployment().await?;
        let ready = condition(&wd["status"], "Ready");
        ensure!(
            ready["status"] == "True" && ready["reason"] == "RolloutComplete",
            "{}",
            wd["status"]
        );
        Ok(())
    }
}

/// The condition of `type_` in a status, or `null`.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .unwrap_or(&Value::Null)
}
