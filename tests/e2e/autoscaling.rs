//! Autoscaling proven with a real scaler (issue 40): kube-controller-manager's HPA controller
//! scales a versioned Deployment by that version's Temporal backlog, read through the real
//! prometheus-adapter from the real Prometheus that scrapes the controller, exactly as
//! docs/autoscaling.md's recipe says (both of its YAML blocks are read from the doc).
//!
//! The workers run at most [`ACTIVITIES_PER_SECOND`] activities each, so a `fanout` burst of
//! [`BURST`] activities waits in the version's activity queue; the recipe's target (10 tasks per
//! replica) then asks for more replicas, which drain it faster.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::Api;
use serde_json::{Value, json};
use test_harness::control_plane::{AuditEvent, ControlPlane};
use test_harness::manifests::{Kinds, connection_in};
use test_harness::metrics_adapter::{MetricsAdapter, Prometheus};

use crate::support::*;

const T: Duration = Duration::from_secs(120);
/// What each worker of these cases may run per second.
const ACTIVITIES_PER_SECOND: u32 = 1;
/// The activities one `fanout` workflow schedules at once: 30 s of work for one replica, three
/// replicas at the recipe's target of 10 per replica.
const BURST: u32 = 30;
/// The recipe's scale-down window (60 s) shortened so that the case ends within a minute.
const SCALE_DOWN_WINDOW_SECONDS: i64 = 5;
/// How often the adapter re-lists the series (finds a new version's series).
const ADAPTER_RELIST: Duration = Duration::from_secs(1);
const METRIC: &str = "temporal_worker_controller_version_backlog_tasks";
const HPA_CONTROLLER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";

/// The recipe of docs/autoscaling.md: the adapter rule and the WorkerResourceTemplate.
struct Recipe {
    adapter_config: String,
    template: Value,
}

impl Recipe {
    fn from_doc() -> Result<Recipe> {
        let path = test_harness::repo_root().join("docs/autoscaling.md");
        let doc = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let blocks = yaml_blocks(&doc);
        let adapter_config = blocks
            .iter()
            .find(|b| b.contains("externalRules:") && b.contains(METRIC))
            .context("docs/autoscaling.md has no prometheus-adapter rule for the backlog")?
            .clone();
        let template_text = blocks
            .iter()
            .find(|b| b.contains("kind: WorkerResourceTemplate") && b.contains(METRIC))
            .context("docs/autoscaling.md has no WorkerResourceTemplate on the backlog metric")?;
        let mut template: Value = serde_yaml::from_str(template_text)?;
        let window = &mut template["spec"]["template"]["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"];
        ensure!(
            window.is_number(),
            "the recipe's HPA has no behavior.scaleDown.stabilizationWindowSeconds to shorten"
        );
        *window = json!(SCALE_DOWN_WINDOW_SECONDS);
        Ok(Recipe {
            adapter_config,
            template,
        })
    }

    /// The name of the WorkerDeployment the template names.
    fn worker(&self) -> Result<String> {
        self.template["spec"]["workerDeploymentRef"]["name"]
            .as_str()
            .map(str::to_string)
            .context("the recipe's template names no WorkerDeployment")
    }

    /// The HPA target (tasks per replica).
    fn target(&self) -> Result<f64> {
        let metric = &self.template["spec"]["template"]["spec"]["metrics"][0]["external"];
        metric["target"]["averageValue"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .context("the recipe's HPA has no AverageValue target")
    }

    /// The labels the recipe's selector adds to the version's own.
    fn selector(&self) -> Vec<(String, String)> {
        let labels = &self.template["spec"]["template"]["spec"]["metrics"][0]["external"]["metric"]
            ["selector"]["matchLabels"];
        labels
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect()
    }
}

/// The bodies of the fenced code blocks whose info string is `yaml`.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    let mut in_other = false;
    for line in markdown.lines() {
        match (line.trim_start().strip_prefix("```"), current.as_mut()) {
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some(_), None) if in_other => in_other = false,
            (Some(info), None) if info.trim().starts_with("yaml") => current = Some(String::new()),
            (Some(_), None) => in_other = true,
            (None, Some(body)) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// Prometheus and the adapter of one case, and the case's turn. Dropped in this order: the
/// adapter (unregistered first), Prometheus, then the turn, so the next case starts its own on
/// a clean slate and nothing keeps scraping the controller once the cases are done.
struct Rig {
    adapter: MetricsAdapter,
    _prometheus: Prometheus,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// The cases take turns (one APIService per cluster), and their workers, Prometheus and the
/// adapter do not crowd the timing-sensitive cases running beside them for longer than a case.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn rig(plane: &ControlPlane, controller: SocketAddr, config: &str) -> Result<Rig> {
    let turn = ONE_AT_A_TIME.lock().await;
    let dir = plane.dir().join(format!(
        "autoscaling-{}",
        test_harness::names::unique("rig")
    ));
    let prometheus = Prometheus::start(&dir.join("prometheus"), controller).await?;
    let adapter = MetricsAdapter::start(
        plane,
        &dir.join("adapter"),
        &prometheus.url(),
        config,
        ADAPTER_RELIST,
    )
    .await?;
    Ok(Rig {
        adapter,
        _prometheus: prometheus,
        _turn: turn,
    })
}

/// WorkerDeployment `name` at `tag` without `spec.replicas` (the autoscaler owns them), whose
/// workers run at most [`ACTIVITIES_PER_SECOND`] activities each.
fn worker_deployment(c: &Case, name: &str, tag: &str, rollout: Value) -> Value {
    let mut wd = test_harness::manifests::twd(name)
        .kinds(Kinds::Canonical)
        .pod_labels(json!({"app": name}))
        .tag(tag)
        .task_queue(&c.task_queue)
        .rollout(rollout)
        .sunset("1s", "1h")
        .temporal_namespace(&c.temporal_ns)
        .build();
    if let Some(env) = wd["spec"]["template"]["spec"]["containers"][0]["env"].as_array_mut() {
        env.push(
            json!({"name": test_harness::worker::ENV_ACTIVITIES_PER_SECOND,
                        "value": ACTIVITIES_PER_SECOND.to_string()}),
        );
    }
    wd
}

/// The label selector an HPA copy of `build` sends: the recipe's labels plus the version's.
fn version_selector(c: &Case, recipe: &Recipe, name: &str, build: &str) -> String {
    let mut labels = recipe.selector();
    labels.extend([
        (
            "temporal_worker_deployment_name".to_string(),
            format!("{}_{name}", c.ns),
        ),
        ("temporal_worker_build_id".to_string(), build.to_string()),
        ("temporal_namespace".to_string(), c.temporal_ns.clone()),
    ]);
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

async fn replicas(c: &Case, deployment: &str) -> Result<i32> {
    let d = c.deployments().get(deployment).await?;
    d.spec
        .replicas
        .with_context(|| format!("{deployment} has no spec.replicas"))
}

/// Waits until `deployment`'s `spec.replicas` satisfies `pred`; returns when that was seen.
async fn wait_replicas(
    c: &Case,
    deployment: &str,
    what: &str,
    pred: impl Fn(i32) -> bool,
) -> Result<Instant> {
    eventually(what, T, || async {
        Ok(pred(replicas(c, deployment).await?).then(Instant::now))
    })
    .await
}

/// The HPA copies in the case's namespace: (the Deployment each scales, its name).
async fn hpas(c: &Case) -> Result<Vec<(String, String)>> {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(c.client.clone(), &c.ns);
    Ok(hpas
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|h| Some((h.spec.scale_target_ref.name, h.metadata.name?)))
        .collect())
}

/// The Deployments the case's HPA copies scale.
async fn hpa_targets(c: &Case) -> Result<Vec<String>> {
    Ok(hpas(c)
        .await?
        .into_iter()
        .map(|(target, _)| target)
        .collect())
}

/// Writes of `user` to Deployment `name` (itself or its scale) that set `spec.replicas`, as
/// `(replicas, audit position)`.
fn replica_writes(events: &[AuditEvent], user: &str, ns: &str, name: &str) -> Vec<(i64, usize)> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.acting_user() == user && matches!(e.verb.as_str(), "update" | "patch"))
        .filter(|(_, e)| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| o.resource == "deployments" && o.namespace == ns && o.name == name)
        })
        .filter_map(|(i, e)| e.requested_replicas().map(|r| (r, i)))
        .collect()
}

/// A case with the rig up, the recipe applied and v1 of its WorkerDeployment Current.
struct Scaled {
    /// When the case got its turn.
    begin: Instant,
    c: Case,
    plane: &'static ControlPlane,
    recipe: Recipe,
    rig: Rig,
    name: String,
    v1: String,
}

/// Starts a case `prefix`: the rig, a `Connection`, v1 (AllAtOnce) of the WorkerDeployment the
/// recipe names, and the recipe's template; waits until v1 is Ready. `None` off the local
/// control plane (the rig registers an APIService of its own).
async fn first_version(prefix: &str) -> Result<Option<Scaled>> {
    let c = case(prefix).await?;
    let Some(plane) = c.env.plane else {
        eprintln!("skipped: needs the local control plane (an APIService of the test's own)");
        return Ok(None);
    };
    let recipe = Recipe::from_doc()?;
    let rig = rig(plane, c.env.http_addr, &recipe.adapter_config).await?;
    let begin = Instant::now();
    let name = recipe.worker()?;
    c.apply(connection_in(
        Kinds::Canonical,
        "temporal",
        &c.env.temporal_address,
    ))
    .await?;
    c.apply(worker_deployment(
        &c,
        &name,
        "v1",
        json!({"strategy": "AllAtOnce"}),
    ))
    .await?;
    c.apply(recipe.template.clone()).await?;
    let v1 =
        current_build(&c.wait_wd(&name, "v1 Ready", T, is_ready).await?).context("v1 current")?;
    Ok(Some(Scaled {
        begin,
        c,
        plane,
        recipe,
        rig,
        name,
        v1,
    }))
}

/// Deletes the WorkerDeployment once a case has passed: its versions' Deployments, and with them
/// their workers and HPA copies, go, so that nothing of the case keeps polling Temporal or the
/// adapter while the rest of the suite runs (a failed case keeps them for a look).
async fn stop_workers(c: &Case, name: &str) -> Result<()> {
    c.wds().delete(name, &Default::default()).await?;
    Ok(())
}

/// The controller's user name (the chart's ServiceAccount).
fn controller_user() -> Result<String> {
    let (user, _) =
        test_harness::chart::rendered_grants(&test_harness::chart::e2e_values(), CONTROLLER_NS)?;
    Ok(user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hpa_scales_a_version_by_its_own_backlog_and_back_when_it_drains() -> Result<()> {
    let Some(s) = first_version("hpa").await? else {
        return Ok(());
    };
    let Scaled {
        begin,
        c,
        plane,
        recipe,
        rig,
        name,
        v1,
    } = s;
    let target = recipe.target()?;

    // v2 the target waiting for a human, v1 Current: two live versions, each with its own HPA
    // copy from the recipe's template.
    c.apply(worker_deployment(
        &c,
        &name,
        "v2",
        json!({"strategy": "Manual"}),
    ))
    .await?;
    let v2 = target_build(
        &c.wait_wd(&name, "v2 waiting for promotion", T, |wd| {
            condition_is(wd, "Progressing", "True", "WaitingForPromotion")
        })
        .await?,
    )
    .context("v2 target")?;
    let (dep1, dep2) = (deployment_of(&name, &v1), deployment_of(&name, &v2));
    eventually("an HPA copy per version", T, || async {
        let mut got = hpa_targets(&c).await?;
        got.sort();
        let mut want = vec![dep1.clone(), dep2.clone()];
        want.sort();
        Ok((got == want).then_some(()))
    })
    .await?;
    // The whole path answers before the load: controller → Prometheus → adapter → aggregator.
    let sel1 = version_selector(&c, &recipe, &name, &v1);
    eventually("v1's backlog served as an external metric", T, || async {
        let v =
            test_harness::metrics_adapter::external_metric(&c.client, &c.ns, METRIC, &sel1).await?;
        Ok((v == Some(0.0)).then_some(()))
    })
    .await
    .with_context(|| rig.adapter.log_tail())?;

    // A burst on v1, the Current version: its backlog rises above the target, and the HPA
    // controller raises v1's replicas.
    burst(&c, "burst").await?;
    let above = eventually("v1's backlog above the target on /metrics", T, || async {
        let b = c.exported_backlog::<f64>(&name, &v1, "activity").await?;
        Ok(b.is_some_and(|b| b > target).then(Instant::now))
    })
    .await?;
    let raised = wait_replicas(&c, &dep1, "the HPA raises v1's replicas", |r| r > 1).await?;
    let lag = raised - above;
    eprintln!(
        "scaling lag (backlog above target on /metrics -> v1's spec.replicas raised): {lag:?}"
    );
    ensure!(replicas(&c, &dep2).await? == 1, "v2 was scaled with v1");

    // The backlog drains and the HPA gives the replicas back after its window.
    eventually("v1's backlog drained", T, || async {
        Ok((c.exported_backlog::<f64>(&name, &v1, "activity").await? == Some(0.0)).then_some(()))
    })
    .await?;
    wait_replicas(&c, &dep1, "the HPA takes v1 back to one replica", |r| {
        r == 1
    })
    .await?;
    ensure!(replicas(&c, &dep2).await? == 1, "v2 was scaled");

    check_only_the_hpa_scaled_v1(plane, &c.ns, &dep1, &dep2).await?;
    eprintln!("autoscaling case took {:?}", begin.elapsed());
    stop_workers(&c, &name).await
}

/// The audit log: the HPA controller wrote v1's replicas up and back down and never wrote v2's;
/// the controller never wrote either's replicas after creating them.
async fn check_only_the_hpa_scaled_v1(
    plane: &ControlPlane,
    ns: &str,
    dep1: &str,
    dep2: &str,
) -> Result<()> {
    let events = eventually("the HPA's scale-down in the audit log", T, || async {
        let events = plane.audit_events()?;
        let writes = replica_writes(&events, HPA_CONTROLLER, ns, dep1);
        let up = writes.iter().any(|(r, _)| *r > 1);
        let down = writes.last().is_some_and(|(r, _)| *r == 1);
        Ok((up && down).then_some(events))
    })
    .await?;
    let hpa_on_v2 = replica_writes(&events, HPA_CONTROLLER, ns, dep2);
    ensure!(hpa_on_v2.is_empty(), "the HPA scaled v2: {hpa_on_v2:?}");
    let user = controller_user()?;
    for dep in [dep1, dep2] {
        let ours = replica_writes(&events, &user, ns, dep);
        ensure!(
            ours.is_empty(),
            "the controller wrote {dep}'s replicas: {ours:?}"
        );
    }
    Ok(())
}

/// The position of the controller's delete of the HPA copy that scaled `deployment`.
fn copy_deleted_at(events: &[AuditEvent], user: &str, ns: &str, copy: &str) -> Option<usize> {
    events.iter().position(|e| {
        e.acting_user() == user
            && e.verb == "delete"
            && e.object_ref.as_ref().is_some_and(|o| {
                o.resource == "horizontalpodautoscalers" && o.namespace == ns && o.name == copy
            })
    })
}

/// The name of the HPA copy that scales `deployment`.
async fn hpa_of(c: &Case, deployment: &str) -> Result<Option<String>> {
    Ok(hpas(c)
        .await?
        .into_iter()
        .find_map(|(target, name)| (target == deployment).then_some(name)))
}

/// Starts a `fanout` burst of [`BURST`] activities; it runs on the Current version.
async fn burst(c: &Case, id: &str) -> Result<()> {
    c.temporal_cli(&[
        "workflow",
        "start",
        "--type",
        "fanout",
        "--task-queue",
        &c.task_queue,
        "--workflow-id",
        &format!("{id}-{}", c.ns),
        "--input",
        &BURST.to_string(),
    ])
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_a_rollout_each_version_scales_on_its_own_backlog_and_sunset_removes_the_hpa_first()
-> Result<()> {
    let Some(s) = first_version("hpa-roll").await? else {
        return Ok(());
    };
    let Scaled {
        begin,
        c,
        plane,
        name,
        v1,
        ..
    } = s;
    let dep1 = deployment_of(&name, &v1);
    let copy1 = eventually("v1's HPA copy", T, || hpa_of(&c, &dep1)).await?;

    // v1 scaled up by its HPA under a burst pinned to it.
    burst(&c, "on-v1").await?;
    wait_replicas(&c, &dep1, "the HPA raises v1's replicas", |r| r > 1).await?;

    // v2 rolls out Progressive meanwhile; its HPA copy exists while v1 is still Current.
    let steps = json!({"strategy": "Progressive",
        "steps": [{"rampPercentage": 50, "pauseDuration": "8s"}]});
    c.apply(worker_deployment(&c, &name, "v2", steps)).await?;
    let v2 = eventually("v2 the target", T, || async {
        let wd = c.wds().get(&name).await?;
        Ok(target_build(&wd).filter(|b| *b != v1))
    })
    .await?;
    let dep2 = deployment_of(&name, &v2);
    eventually("v2's HPA copy", T, || hpa_of(&c, &dep2)).await?;
    let current = current_build(&c.wds().get(&name).await?);
    ensure!(
        current.as_deref() == Some(v1.as_str()),
        "v2's HPA copy came only after v2 became Current ({current:?})"
    );
    c.wait_wd(&name, "v2 Current", T, |wd| {
        is_ready(wd) && current_build(wd).as_deref() == Some(v2.as_str())
    })
    .await?;

    // New work goes to v2 now: its own backlog raises its own replicas.
    burst(&c, "on-v2").await?;
    wait_replicas(&c, &dep2, "the HPA raises v2's replicas", |r| r > 1).await?;

    // v1's pinned burst completes, v1 drains, and its sunset scales it to 0.
    wait_replicas(&c, &dep1, "v1 scaled to 0 at its sunset", |r| r == 0).await?;
    ensure!(
        hpa_of(&c, &dep1).await?.is_none(),
        "an HPA still targets v1 after its sunset"
    );
    check_sunset_order(plane, &c.ns, &copy1, &dep1, &dep2).await?;
    ensure!(replicas(&c, &dep1).await? == 0, "v1 scaled back up");
    eprintln!("autoscaling rollout case took {:?}", begin.elapsed());
    stop_workers(&c, &name).await
}

/// The audit log of the rollout case: the controller wrote v1's replicas once, the sunset's 0,
/// after it deleted v1's HPA copy `copy`; the HPA raised v1 and v2 on their own backlogs and
/// never scaled v1 after the sunset; the controller never wrote v2's replicas.
async fn check_sunset_order(
    plane: &ControlPlane,
    ns: &str,
    copy: &str,
    dep1: &str,
    dep2: &str,
) -> Result<()> {
    let user = controller_user()?;
    let events = eventually("the sunset's scale-down in the audit log", T, || async {
        let events = plane.audit_events()?;
        let zero = replica_writes(&events, &user, ns, dep1)
            .iter()
            .any(|(r, _)| *r == 0);
        Ok(zero.then_some(events))
    })
    .await?;
    // The controller wrote v1's replicas once: the sunset's 0, after it deleted v1's HPA copy.
    let ours = replica_writes(&events, &user, ns, dep1);
    ensure!(
        ours.len() == 1 && ours[0].0 == 0,
        "the controller wrote v1's replicas other than once to 0 at its sunset: {ours:?}"
    );
    let scaled_down = ours[0].1;
    let deleted = copy_deleted_at(&events, &user, ns, copy)
        .context("the controller never deleted v1's HPA copy")?;
    ensure!(
        deleted < scaled_down,
        "v1 was scaled to 0 (audit #{scaled_down}) before its HPA copy was deleted (#{deleted})"
    );
    // The HPA raised v1 under its burst and v2 under its own, and never scaled v1 after the
    // sunset.
    let hpa1 = replica_writes(&events, HPA_CONTROLLER, ns, dep1);
    ensure!(
        hpa1.iter().any(|(r, _)| *r > 1),
        "the HPA never raised v1: {hpa1:?}"
    );
    let after: Vec<_> = hpa1.iter().filter(|(_, i)| *i > scaled_down).collect();
    ensure!(
        after.is_empty(),
        "the HPA scaled v1 after its sunset: {after:?}"
    );
    let hpa2 = replica_writes(&events, HPA_CONTROLLER, ns, dep2);
    ensure!(
        hpa2.iter().any(|(r, _)| *r > 1),
        "the HPA never raised v2: {hpa2:?}"
    );
    let ours2 = replica_writes(&events, &user, ns, dep2);
    ensure!(
        ours2.is_empty(),
        "the controller wrote v2's replicas: {ours2:?}"
    );
    Ok(())
}

#[test]
fn the_docs_recipe_is_complete() {
    let recipe = Recipe::from_doc().expect("recipe");
    assert!(recipe.adapter_config.contains("metricsQuery"));
    assert_eq!(recipe.worker().expect("worker"), "orders");
    assert!(recipe.target().expect("target") > 0.0);
    assert_eq!(
        recipe.selector(),
        vec![("task_queue_type".to_string(), "activity".to_string())]
    );
}

#[test]
fn yaml_blocks_skip_other_languages() {
    let md = "text\n```sh\necho\n```\n```yaml\na: 1\n```\n```\nplain\n```\n```yaml\nb: 2\n```\n";
    assert_eq!(
        yaml_blocks(md),
        vec!["a: 1\n".to_string(), "b: 2\n".to_string()]
    );
}
