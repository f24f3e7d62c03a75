//! The bad-input table (issue 28): every input the controller is known to refuse, for every
//! kind it serves, on the real kube-apiserver, each with the message fragment it must give.
//!
//! One environment for the whole table: the local control plane, the shared Temporal dev
//! server, the kubelet stand-in (real workers), and the controller in-process as the chart's
//! ServiceAccount with its admission webhook on, reached through the chart's own
//! ValidatingWebhookConfiguration. The webhook is off (the chart's `excludeNamespaces`) in the
//! `off` namespaces: there a bad object is admitted and the controller must report it.
//!
//! Each row of [`table`] is one of:
//! - [`Expect::Refused`]: the API server refuses the object (its schema, a CEL rule, the webhook,
//!   or its own size limits), with a message naming the field; nothing is stored. With a
//!   `before`, it is an update: the good object is stored first, and after the refusal the
//!   stored spec is the good one, unchanged.
//! - [`Expect::Reported`]: admitted where only the controller can know (or the webhook is off);
//!   the controller reports it in a condition with a clear message and applies nothing. With a
//!   `before`, the good spec is rolled out first (real workers): the bad update must leave the
//!   good version Current and running, and the good spec once restored completes again.
//! - [`Expect::Http`]: a request to the status API (docs/openapi.yaml) answered with the
//!   documented error code and body (what schemathesis checks in tests/status_api.rs).
//!
//! Every row of our kinds runs under both kind sets (canonical `WorkerDeployment`,
//! `Connection`, `WorkerResourceTemplate` and the seed `Temporal*` kinds), each in namespaces of
//! its own.

#[path = "common/controller.rs"]
mod controller;
#[path = "common/bad_inputs_table.rs"]
mod table;
#[path = "common/webhook.rs"]
mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::kinds::Model;
use test_harness::manifests;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::OnceCell;

use table::*;

/// Where the chart is "installed".
const CONTROLLER_NS: &str = "twc-bad-inputs-system";
const TWD_WEBHOOK: &str = "temporalworkerdeployments.webhook.temporal.io";
const TWOR_WEBHOOK: &str = "temporalworkerownedresources.webhook.temporal.io";
/// How long the controller may take to report a case (a rollout with a real worker included).
const T: Duration = Duration::from_secs(90);
/// Cases run at once.
const PARALLEL: usize = 8;

// ---------------------------------------------------------------------------------------------
// The environment.

struct Env {
    client: kube::Client,
    http_addr: SocketAddr,
    _kubelet: Option<test_harness::kubelet::Kubelet>,
    _controller: temporal_worker_controller::run::Running,
}

static ENV: OnceCell<Arc<Env>> = OnceCell::const_new();

/// Panics in the controller's own code (`src/`), wherever they happened: a bad input must
/// never make the controller panic, even in a task whose panic nobody joins.
static CONTROLLER_PANICS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn record_controller_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(at) = info.location().filter(|l| l.file().starts_with("src/"))
            && let Ok(mut panics) = CONTROLLER_PANICS.lock()
        {
            panics.push(format!("{at}: {info}"));
        }
        previous(info);
    }));
}

async fn env() -> Arc<Env> {
    ENV.get_or_init(|| async {
        test_harness::runtime::on_infra(start_env())
            .await
            .expect("start the bad-input environment")
    })
    .await
    .clone()
}

/// The namespace of kind set `set`'s cases; `off`: where the webhook is off.
fn namespace(set: KindSet, off: bool) -> String {
    let set = match set {
        KindSet::Canonical => "canonical",
        KindSet::Seed => "seed",
    };
    if off {
        format!("bad-inputs-off-{set}")
    } else {
        format!("bad-inputs-{set}")
    }
}

fn values(url: &str) -> Value {
    json!({
        "controller": {"identity": "twc-bad-inputs"},
        "webhook": {
            "enabled": true,
            "url": url,
            "excludeNamespaces": ["kube-system", namespace(KindSet::Seed, true), namespace(KindSet::Canonical, true)],
        },
    })
}

async fn start_env() -> Result<Arc<Env>> {
    record_controller_panics();
    controller::init_tracing("warn");
    let infra =
        test_harness::world::Infra::start(test_harness::world::InfraOptions::default()).await?;
    let plane = infra
        .plane
        .context("the table runs on the local control plane")?;
    let hook = webhook::prepare(plane, values, CONTROLLER_NS).await?;
    let mut flags = vec![
        "--leader-elect".to_string(),
        format!("--lease-namespace={CONTROLLER_NS}"),
        "--identity=twc-bad-inputs".into(),
        "--idle-interval=10s".into(),
        "--fast-poll=300ms".into(),
        "--backlog-poll-interval=0s".into(),
    ];
    flags.extend(hook.flags);
    let controller = controller::start(hook.client, &flags).await?;
    let addr = controller.webhook_addr.context("no webhook")?;
    webhook::register(&infra.client, values, CONTROLLER_NS, addr).await?;
    for set in KindSet::ALL {
        for off in [false, true] {
            let ns = namespace(set, off);
            test_harness::world::enter(&infra, &ns, &format!("e2e-{ns}"), "bad-inputs").await?;
            if set == KindSet::Canonical {
                // `enter` makes a `temporal` TemporalConnection; a WorkerDeployment needs a Connection.
                let c = manifests::connection_in(
                    manifests::Kinds::Canonical,
                    "temporal",
                    &infra.temporal_address,
                );
                test_harness::world::apply(&infra.client, &ns, "bad-inputs", c).await?;
            }
        }
    }
    // The webhook answers once the controller has set caBundle and serves its certificate.
    let probe = in_set(wrt("probe", hpa(json!({"minReplicas": 0}))), KindSet::Seed);
    webhook::wait_for_refusal(
        &infra.client,
        CONTROLLER_NS,
        &probe,
        &[TWOR_WEBHOOK, "denied the request"],
    )
    .await?;
    Ok(Arc::new(Env {
        client: infra.client,
        http_addr: controller.http_addr,
        _kubelet: infra.kubelet,
        _controller: controller,
    }))
}

// ---------------------------------------------------------------------------------------------
// The runner.

/// `manifest` with our kinds renamed to kind set `set`'s.
fn in_set(manifest: Value, set: KindSet) -> Value {
    let kinds = match set {
        KindSet::Seed => manifests::Kinds::Seed,
        KindSet::Canonical => manifests::Kinds::Canonical,
    };
    manifests::in_kinds(manifest, kinds)
}

fn model_of(manifest: &Value) -> Option<Model> {
    manifest["kind"]
        .as_str()
        .and_then(KindSet::of_kind)
        .map(|(_, m)| m)
}

fn dynamic_api(client: &kube::Client, ns: &str, manifest: &Value) -> Result<Api<DynamicObject>> {
    let kind = manifest["kind"]
        .as_str()
        .context("a manifest without kind")?;
    let resource = match manifest["apiVersion"].as_str() {
        Some(manifests::API_VERSION) => test_harness::world::api_resource(kind),
        Some("v1") => {
            kube::api::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("", "v1", kind))
        }
        other => bail!("no API for {other:?}"),
    };
    Ok(Api::namespaced_with(client.clone(), ns, &resource))
}

fn name_of(manifest: &Value) -> Result<String> {
    manifest["metadata"]["name"]
        .as_str()
        .map(str::to_string)
        .context("a manifest without name")
}

/// Runs one row under kind set `set`; `Ok(line)` says what happened.
async fn run(env: &Env, case: &Case, set: KindSet) -> Result<String> {
    let off = matches!(case.expect, Expect::Reported { .. });
    let ns = namespace(set, off);
    for object in &case.given {
        let api = dynamic_api(&env.client, &ns, object)?;
        match api
            .create(
                &PostParams::default(),
                &serde_json::from_value(object.clone())?,
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).context("creating what the case needs"),
        }
    }
    // Where the controller acts, its workers poll the Temporal namespace made for this one.
    let place = |m: Value| {
        let mut m = in_set(m, set);
        if m["spec"]["workerOptions"]["temporalNamespace"] == "default" {
            m["spec"]["workerOptions"]["temporalNamespace"] = json!(format!("e2e-{ns}"));
        }
        m
    };
    let bad = place(case.bad.clone());
    let before = case.before.clone().map(place);
    match &case.expect {
        Expect::Refused { by, fragment } => refuse(env, &ns, before, &bad, *by, fragment).await,
        Expect::Reported {
            condition,
            status,
            reason,
            fragment,
        } => {
            report(
                env,
                set,
                before,
                &bad,
                (condition, status, reason),
                fragment,
            )
            .await
        }
        Expect::Http { .. } => bail!("not a row of our kinds"),
    }
}

/// A refusal by `by` whose message holds `fragment`; nothing stored, or (update) the stored
/// spec unchanged.
async fn refuse(
    env: &Env,
    ns: &str,
    before: Option<Value>,
    bad: &Value,
    by: By,
    fragment: &str,
) -> Result<String> {
    let api = dynamic_api(&env.client, ns, bad)?;
    let name = name_of(bad)?;
    let stored = match &before {
        Some(good) => Some(
            api.create(
                &PostParams::default(),
                &serde_json::from_value(good.clone())?,
            )
            .await
            .context("the good spec")?,
        ),
        None => None,
    };
    let answer = match &stored {
        Some(_) => update_spec(&api, &name, bad).await,
        None => {
            api.create(
                &PostParams::default(),
                &serde_json::from_value(bad.clone())?,
            )
            .await
        }
    };
    let status = match answer {
        Err(kube::Error::Api(status)) => status,
        Ok(_) => bail!("admitted"),
        Err(e) => bail!("not an API server answer: {e}"),
    };
    let message = &status.message;
    ensure!(holds(message, fragment), "{fragment:?} not in: {message}");
    let webhook = message.contains("denied the request");
    match by {
        By::Webhook => ensure!(
            webhook && (message.contains(TWD_WEBHOOK) || message.contains(TWOR_WEBHOOK)),
            "not refused by the webhook: {message}"
        ),
        By::Schema | By::Cel => ensure!(
            status.code == 422 && !webhook,
            "not refused by the CRD ({}): {message}",
            status.code
        ),
        By::ApiServer => ensure!(
            !webhook,
            "refused by the webhook, not the API server: {message}"
        ),
    }
    if model_of(bad) == Some(Model::Worker) {
        let made = versioned_deployments(env, ns, &name).await?;
        // An update's good spec may have its Deployment by now; a refused create has none.
        ensure!(
            stored.is_some() || made.is_empty(),
            "{} Deployments made",
            made.len()
        );
    }
    match stored {
        None => ensure!(
            api.get_opt(&name).await?.is_none(),
            "a refused object was stored"
        ),
        Some(good) => {
            let now = api.get(&name).await?;
            ensure!(
                now.data["spec"] == good.data["spec"],
                "the stored spec changed: {}",
                now.data["spec"]
            );
        }
    }
    Ok(format!(
        "refused ({by:?}, {}): {}",
        status.code,
        short(message)
    ))
}

/// Sets the spec of `name` to `manifest`'s (a merge patch: no conflict with the controller's
/// own writes in between, and lists such as steps and env are replaced whole).
async fn update_spec(
    api: &Api<DynamicObject>,
    name: &str,
    manifest: &Value,
) -> kube::Result<DynamicObject> {
    let patch = json!({"spec": manifest["spec"]});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn short(message: &str) -> String {
    message.chars().take(160).collect()
}

/// The condition `type_` of a stored object: `(status, reason, message)`.
fn condition(object: &DynamicObject, type_: &str) -> Option<Condition> {
    let conditions = object.data["status"]["conditions"].as_array()?;
    conditions
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| serde_json::from_value(c.clone()).ok())
}

fn observed(object: &DynamicObject) -> bool {
    object.data["status"]["observedGeneration"].as_i64() == object.metadata.generation
}

fn has(object: &DynamicObject, (type_, status, reason): (&str, &str, &str)) -> bool {
    condition(object, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

/// Polls `name` until `pred` holds, for at most [`T`].
async fn wait_for(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    pred: impl Fn(&DynamicObject) -> bool,
) -> Result<DynamicObject> {
    let deadline = Instant::now() + T;
    loop {
        let object = api.get(name).await?;
        if pred(&object) {
            return Ok(object);
        }
        ensure!(
            Instant::now() < deadline,
            "{what}: not within {T:?}; status: {}",
            object.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the webhook says about `bad` where it is on (a dry run), after the name of the object
/// the API server refused (the controller's own Deployment has another name).
async fn webhook_says(env: &Env, set: KindSet, bad: &Value) -> Result<String> {
    let ns = namespace(set, false);
    let api = dynamic_api(&env.client, &ns, bad)?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let message = match api
        .create(&dry_run, &serde_json::from_value(bad.clone())?)
        .await
    {
        Err(kube::Error::Api(s)) => s.message,
        other => bail!("the webhook admitted it: {other:?}"),
    };
    let said = message
        .split_once("denied the request: ")
        .map(|(_, m)| m)
        .context("not the webhook")?;
    Ok(said
        .split_once("is invalid: ")
        .map_or(said, |(_, e)| e)
        .trim()
        .to_string())
}

/// A report by the controller (the webhook off): `condition` with `fragment`; nothing applied;
/// after a good `before` the good version stays Current and running, and the good spec
/// restored completes again.
async fn report(
    env: &Env,
    set: KindSet,
    before: Option<Value>,
    bad: &Value,
    want: (&str, &str, &str),
    fragment: &str,
) -> Result<String> {
    let ns = namespace(set, true);
    let api = dynamic_api(&env.client, &ns, bad)?;
    let name = name_of(bad)?;
    let current = match &before {
        Some(good) => Some(roll_out(&api, good, &name).await?),
        None => {
            api.create(
                &PostParams::default(),
                &serde_json::from_value(bad.clone())?,
            )
            .await?;
            None
        }
    };
    if let Some(good) = &current {
        update_spec(&api, &name, bad)
            .await
            .context("the bad update")?;
        ensure!(good.0.is_some(), "the good spec has no Current version");
    }
    let what = format!("{}={}/{}", want.0, want.1, want.2);
    let object = wait_for(&api, &name, &what, |o| observed(o) && has(o, want)).await?;
    let message = condition(&object, want.0)
        .map(|c| c.message)
        .unwrap_or_default();
    ensure!(
        holds(&message, fragment),
        "{fragment:?} not in {what}: {message}"
    );
    if want.2 == "InvalidSpec" {
        ensure!(
            has(&object, ("Progressing", "False", "InvalidSpec")),
            "{}",
            object.data["status"]
        );
    }
    if want.2 == "InvalidSpec" || want.2 == "ApplyFailed" {
        let said = webhook_says(env, set, bad).await?;
        let same = if want.2 == "ApplyFailed" {
            message == said
        } else {
            message.contains(&said)
        };
        ensure!(
            same,
            "status {message:?} does not say what the webhook says: {said:?}"
        );
    }
    nothing_applied(env, &ns, bad, current.as_ref()).await?;
    if let (Some(good), Some(_)) = (before, &current) {
        update_spec(&api, &name, &good).await?;
        wait_for(&api, &name, "Ready again once fixed", |o| {
            observed(o)
                && has(o, ("Ready", "True", "RolloutComplete"))
                && condition(o, "Stalled").is_some_and(|c| c.status == "False")
        })
        .await?;
    }
    Ok(format!("{what}: {}", short(&message)))
}

/// The Current build ID once `good` is rolled out (real workers).
struct Rolled(Option<String>);

async fn roll_out(api: &Api<DynamicObject>, good: &Value, name: &str) -> Result<Rolled> {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(good.clone())?,
    )
    .await?;
    let done = wait_for(api, name, "the good spec rolled out", |o| {
        observed(o) && has(o, ("Ready", "True", "RolloutComplete"))
    })
    .await?;
    let build = done.data["status"]["currentVersion"]["buildID"]
        .as_str()
        .map(str::to_string);
    Ok(Rolled(build))
}

/// Nothing of a reported object was applied: no versioned Deployment but the good version's
/// (unchanged: still running, still Current), no owned-resource copy.
async fn nothing_applied(env: &Env, ns: &str, bad: &Value, good: Option<&Rolled>) -> Result<()> {
    let name = name_of(bad)?;
    match model_of(bad) {
        Some(Model::Worker) => {
            let live = versioned_deployments(env, ns, &name).await?;
            match good {
                None => ensure!(
                    live.is_empty(),
                    "acted on an invalid spec: {} Deployments",
                    live.len()
                ),
                Some(Rolled(build)) => {
                    ensure!(
                        live.len() == 1,
                        "{} Deployments after a refused update",
                        live.len()
                    );
                    let ready = live[0]
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_replicas)
                        .unwrap_or(0);
                    ensure!(ready >= 1, "the good version was scaled down");
                    let api = dynamic_api(&env.client, ns, bad)?;
                    let now = api.get(&name).await?;
                    ensure!(
                        now.data["status"]["currentVersion"]["buildID"].as_str()
                            == build.as_deref(),
                        "the Current version changed: {}",
                        now.data["status"]["currentVersion"]
                    );
                }
            }
        }
        Some(Model::Template) => {
            let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(env.client.clone(), ns);
            let copies = hpas.list(&ListParams::default()).await?.items;
            ensure!(copies.is_empty(), "{} copies applied", copies.len());
        }
        Some(Model::Connection) | None => {}
    }
    Ok(())
}

/// The versioned Deployments of worker `name`.
async fn versioned_deployments(env: &Env, ns: &str, name: &str) -> Result<Vec<Deployment>> {
    let label = format!(
        "{}={}",
        temporal_worker_controller::api::LABEL_DEPLOYMENT_NAME,
        temporal_worker_controller::render::label_value(name)
    );
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), ns);
    Ok(deployments
        .list(&ListParams::default().labels(&label))
        .await?
        .items)
}

/// One request to the status API over plain HTTP/1.1: `(code, body)`.
async fn request(addr: SocketAddr, method: &str, path: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await??;
    let text = String::from_utf8_lossy(&raw).to_string();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status line")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The documented error: `code`, and the body `{"error": {"code", "message"}}` of
/// docs/openapi.yaml holding `fragment`.
async fn answer(env: &Env, method: &str, path: &str, code: u16, fragment: &str) -> Result<String> {
    let (got, body) = request(env.http_addr, method, path).await?;
    ensure!(got == code, "{method} {path}: {got}, want {code}: {body}");
    let error: Value = serde_json::from_str(&body).with_context(|| format!("not JSON: {body}"))?;
    ensure!(error["error"]["code"] == code, "{body}");
    let message = error["error"]["message"]
        .as_str()
        .context("no error.message")?;
    ensure!(holds(&body, fragment), "{fragment:?} not in {body}");
    Ok(format!("{code}: {}", short(message)))
}

/// Runs every row of `rows` (each of our kinds under both kind sets), at most [`PARALLEL`] at
/// once, and fails listing every row that did not hold.
async fn run_rows(rows: Vec<Case>) -> Result<()> {
    let env = env().await;
    let runs: Vec<(Case, Option<KindSet>)> = rows
        .into_iter()
        .flat_map(|case| match model_of(&case.bad) {
            Some(_) => KindSet::ALL
                .iter()
                .map(|s| (case.clone(), Some(*s)))
                .collect::<Vec<_>>(),
            None => vec![(case, None)],
        })
        .collect();
    let total = runs.len();
    let results: Vec<(String, Result<String>)> = futures::stream::iter(runs)
        .map(|(case, set)| {
            let env = env.clone();
            async move {
                let label = format!(
                    "{} [{}]",
                    case.id,
                    set.map_or("status API", |s| s.kind(Model::Worker))
                );
                let result = tokio::time::timeout(T * 2, run_one(&env, &case, set))
                    .await
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {:?}", T * 2)));
                (label, result)
            }
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let mut failed = Vec::new();
    for (label, result) in results {
        match result {
            Ok(line) => println!("ok   {label}: {line}"),
            Err(e) => {
                println!("FAIL {label}: {e:#}");
                failed.push(label);
            }
        }
    }
    println!("bad inputs: {} of {total} held", total - failed.len());
    let panics = CONTROLLER_PANICS
        .lock()
        .map(|p| p.clone())
        .unwrap_or_default();
    ensure!(panics.is_empty(), "the controller panicked: {panics:?}");
    ensure!(
        failed.is_empty(),
        "{} rows did not hold: {failed:?}",
        failed.len()
    );
    Ok(())
}

async fn run_one(env: &Env, case: &Case, set: Option<KindSet>) -> Result<String> {
    if let Expect::Http {
        path,
        method,
        code,
        fragment,
    } = &case.expect
    {
        return answer(env, method, path, *code, fragment).await;
    }
    let set = set.context("a row of our kinds without a kind set")?;
    run(env, case, set).await
}

// ---------------------------------------------------------------------------------------------
// The tests.

fn rows(reported: bool) -> Vec<Case> {
    table()
        .into_iter()
        .filter(|c| matches!(c.expect, Expect::Reported { .. }) == reported)
        .collect()
}

#[test]
fn every_bad_input_is_refused_with_a_message_naming_the_field() -> Result<()> {
    test_harness::runtime::block_on(run_rows(rows(false)))
}

#[test]
fn every_bad_input_admitted_without_the_webhook_is_reported_and_never_applied() -> Result<()> {
    test_harness::runtime::block_on(run_rows(rows(true)))
}

/// What each refusal above leaves open is admitted: one replica or none (an autoscaler owns
/// them), pausing or aborting a Progressive rollout, and a Deployment name to adopt.
#[test]
fn the_good_neighbours_of_the_bad_inputs_are_admitted() -> Result<()> {
    test_harness::runtime::block_on(async {
        let env = env().await;
        let steps = json!([step(json!(10), "1m")]);
        let good = [
            twd("one-replica", json!({})),
            manifests::twd("no-replicas")
                .rollout(json!({"strategy": "AllAtOnce"}))
                .build(),
            twd(
                "progressive-paused",
                rollout(json!({"strategy": "Progressive", "steps": steps, "paused": true})),
            ),
            twd(
                "progressive-abort",
                rollout(json!({"strategy": "Progressive", "steps": steps, "abort": true})),
            ),
            twd(
                "adopt-good-name",
                json!({"adopt": {"deploymentName": "orders-worker.v1", "afterAdoption": "Delete"}}),
            ),
        ];
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        for set in KindSet::ALL {
            let ns = namespace(set, false);
            let input = secret("gate-input", json!({"other": "{}", "garbled": "{\"a\": 1"}));
            match dynamic_api(&env.client, &ns, &input)?
                .create(&PostParams::default(), &serde_json::from_value(input)?)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            // The gate rows' Secret holds this key.
            let gated = twd(
                "gate-input-present",
                gate_from("secretKeyRef", "gate-input", "other"),
            );
            for object in good.iter().chain([&gated]) {
                let object = in_set(object.clone(), set);
                let api = dynamic_api(&env.client, &ns, &object)?;
                api.create(&dry_run, &serde_json::from_value(object.clone())?)
                    .await
                    .with_context(|| format!("refused: {object}"))?;
            }
        }
        Ok(())
    })
}

/// The table holds at least 40 cases, each id once, every model, every way of refusing.
#[test]
fn the_table_covers_every_kind_and_every_way_of_refusing() {
    let table = table();
    assert!(table.len() >= 40, "only {} cases", table.len());
    let mut ids: Vec<&str> = table.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), table.len(), "an id is used twice");
    for model in Model::ALL {
        assert!(
            table.iter().any(|c| model_of(&c.bad) == Some(model)),
            "no case for {model:?}"
        );
    }
    for by in [By::Schema, By::Cel, By::Webhook, By::ApiServer] {
        assert!(
            table
                .iter()
                .any(|c| matches!(c.expect, Expect::Refused { by: b, .. } if b == by)),
            "no case refused by {by:?}"
        );
    }
    assert!(
        table
            .iter()
            .any(|c| matches!(c.expect, Expect::Reported { .. }))
    );
    assert!(
        table
            .iter()
            .any(|c| matches!(c.expect, Expect::Http { .. }))
    );
    assert!(
        table
            .iter()
            .any(|c| c.before.is_some() && matches!(c.expect, Expect::Reported { .. }))
    );
}

/// Every Connection kind (ClusterConnection too) bounds `hostPort` (its length, and its port by a CEL rule the rows above
/// run on the real API server).
#[test]
fn the_port_rule_is_in_both_connection_schemas() {
    use temporal_worker_controller::api::connection::{HOST_PORT_MESSAGE, HOST_PORT_RULE};
    let files = temporal_worker_controller::generate::crds::files();
    let connections: Vec<&String> = files
        .iter()
        .filter(|(f, _)| f.contains("connections"))
        .map(|(_, yaml)| yaml)
        .collect();
    assert_eq!(
        connections.len(),
        3,
        "Connection, TemporalConnection, ClusterConnection"
    );
    for yaml in connections {
        let crd: Value = serde_yaml::from_str(yaml).expect("crd yaml");
        let host_port = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["hostPort"];
        assert_eq!(host_port["maxLength"], 260, "{host_port}");
        assert_eq!(
            host_port["x-kubernetes-validations"][0]["rule"],
            HOST_PORT_RULE
        );
        assert_eq!(
            host_port["x-kubernetes-validations"][0]["message"],
            HOST_PORT_MESSAGE
        );
    }
}

/// The controller refuses `spec.replicas: 0` too (an object stored before the CEL rule keeps its
/// 0 through CEL ratcheting), with the same message as admission.
#[test]
fn zero_replicas_are_refused_by_the_controller_with_the_admission_message() {
    use temporal_worker_controller::api::TemporalWorkerDeployment;
    use temporal_worker_controller::worker_deployment::validate::{self, REPLICAS_ZERO};

    let files = temporal_worker_controller::generate::crds::files();
    let (_, yaml) = files
        .iter()
        .find(|(f, _)| f.starts_with("temporalworkerdeployments"))
        .expect("twd crd");
    let crd: serde_json::Value = serde_yaml::from_str(yaml).expect("crd yaml");
    let rules = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["replicas"]["x-kubernetes-validations"];
    assert_eq!(rules[0]["rule"], "self >= 1", "{rules}");
    assert_eq!(rules[0]["message"], REPLICAS_ZERO, "{rules}");

    let twd = |replicas: i32| -> TemporalWorkerDeployment {
        let twd = manifests::twd("orders")
            .namespace("shop")
            .replicas(replicas.into())
            .image("orders:v1")
            .rollout(serde_json::json!({"strategy": "AllAtOnce"}))
            .connection("prod");
        serde_json::from_value(twd.build()).expect("a TWD")
    };
    let settings = validate::ControllerSettings::default();
    let refused = validate::desired(&twd(0), &settings).expect_err("replicas 0 accepted");
    assert_eq!(refused.message, REPLICAS_ZERO);
    assert_eq!(
        validate::desired(&twd(1), &settings).map(|d| d.replicas),
        Ok(Some(1))
    );
}
