//! The operator's CLI as a user runs it (issue 43): the built binary against a real control
//! plane, a real Temporal dev server and real workers (kubelet stand-in), with the controller
//! in-process. `status --watch` in a pseudo-terminal (`script`) and on a pipe during a live
//! Progressive rollout; `wait` on a completed and on an aborted (Stalled) rollout; `status -o
//! json|yaml` checked against docs/openapi.yaml; bash completion in a real bash; the kubectl
//! plugin through the real `kubectl`; `retry`, `undo`, `restart` on live rollouts; `lint` against
//! the API server's own dry run on every refused row of the bad-input table
//! (`tests/common/bad_inputs_table.rs`); rollout names completed in a real bash; the context's
//! namespace by default and `-A`.

#[path = "common/controller.rs"]
mod controller;
#[allow(dead_code)]
#[path = "common/bad_inputs_table.rs"]
mod table;
#[path = "common/webhook.rs"]
mod webhook;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::{KindSet, TemporalWorkerDeployment};
use temporal_worker_controller::run::Running;
use test_harness::manifests;
use test_harness::world::{World, wait};
use tokio::sync::OnceCell;

const BIN: &str = env!("CARGO_BIN_EXE_temporal-worker-controller");
const IDENTITY: &str = "twc-cli-test";
/// Where the chart's identity (ServiceAccount, RBAC) and the webhook's Secret live.
const CONTROLLER_NS: &str = "twc-cli-system";
/// How long a watching process may take to show a state the API server already has.
const T_SHOW: Duration = Duration::from_secs(90);

struct Env {
    world: World,
    kubeconfig: PathBuf,
    /// The in-process controller's status API.
    api_url: String,
    _controller: Running,
}

static ENV: OnceCell<Arc<Env>> = OnceCell::const_new();

async fn env() -> Arc<Env> {
    ENV.get_or_init(|| async {
        test_harness::runtime::on_infra(start())
            .await
            .expect("start the CLI test environment")
    })
    .await
    .clone()
}

/// The chart's values here: its admission webhook on, called by URL (the controller is a
/// local process), so that `lint` is compared with the API server on the webhook's rows too.
fn values(url: &str) -> Value {
    json!({
        "controller": {"identity": IDENTITY},
        "webhook": {"enabled": true, "url": url, "excludeNamespaces": ["kube-system"]},
    })
}

async fn start() -> Result<Arc<Env>> {
    let world = World::new("cli").await?;
    let plane = test_harness::control_plane::shared().await?;
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    let hook = webhook::prepare(plane, values, CONTROLLER_NS).await?;
    let mut flags = controller::watching(&world.ns, IDENTITY);
    flags.extend(hook.flags);
    let controller = controller::start(hook.client, &flags).await?;
    let addr = controller
        .webhook_addr
        .context("the controller serves no webhook")?;
    webhook::register(&world.client, values, CONTROLLER_NS, addr).await?;
    let env = Arc::new(Env {
        api_url: format!("http://{}", controller.http_addr),
        world,
        kubeconfig,
        _controller: controller,
    });
    let probe = webhook_probe()?;
    webhook::wait_for_refusal(
        &env.world.client,
        &env.world.ns,
        &probe,
        &["denied the request"],
    )
    .await?;
    Ok(env)
}

/// The first webhook row of the table that `lint` can decide offline: the controller's webhook
/// answers once the API server refuses it through the webhook.
fn webhook_probe() -> Result<Value> {
    table::table()
        .into_iter()
        .find(|c| {
            matches!(
                c.expect,
                table::Expect::Refused {
                    by: table::By::Webhook,
                    ..
                }
            ) && c.before.is_none()
                && !needs_the_cluster(c)
        })
        .map(|c| c.bad)
        .context("the table has no webhook row")
}

impl Env {
    fn twd(&self, name: &str, tag: &str, rollout: Value) -> Value {
        manifests::twd(name)
            .replicas(1)
            .tag(tag)
            .task_queue(&format!("cli-{name}"))
            .temporal_namespace(&self.world.temporal_ns)
            .rollout(rollout)
            .build()
    }

    fn api(&self) -> kube::Api<TemporalWorkerDeployment> {
        TemporalWorkerDeployment::api(self.world.client.clone(), &self.world.ns, KindSet::Seed)
    }

    async fn apply(&self, name: &str, tag: &str, rollout: Value) -> Result<()> {
        self.api()
            .patch(
                name,
                &PatchParams::apply("cli-test").force(),
                &Patch::Apply(self.twd(name, tag, rollout)),
            )
            .await?;
        Ok(())
    }

    /// The binary with `args`, then `-n <ns> --kubeconfig <k>`.
    fn cli(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .args(["-n", &self.world.ns])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null());
        cmd
    }
}

fn target_status(t: &TemporalWorkerDeployment) -> Option<String> {
    let s = t.status.as_ref()?.target_version.as_ref()?.version.status;
    Some(format!("{s:?}"))
}

fn ready_reason(t: &TemporalWorkerDeployment) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

/// Runs `cmd` to its end off the async runtime.
async fn output(mut cmd: Command) -> Result<Output> {
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A process whose stdout is collected as it comes.
struct Running_ {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Running_ {
    fn spawn(mut cmd: Command) -> Result<Self> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawn")?;
        let mut stdout = child.stdout.take().context("stdout")?;
        let out = Arc::new(Mutex::new(String::new()));
        let sink = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Ok(Self { child, out })
    }

    fn text(&self) -> String {
        self.out.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until `pred` holds on the output so far.
    async fn until(&self, what: &str, pred: impl Fn(&str) -> bool) -> Result<String> {
        let deadline = Instant::now() + T_SHOW;
        loop {
            let text = self.text();
            if pred(&text) {
                return Ok(text);
            }
            if Instant::now() > deadline {
                bail!("timed out waiting for {what}; output so far:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Running_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The target row (the first row after the header) of a watch table.
fn target_row(table: &str) -> Option<&str> {
    let mut lines = table.lines().skip_while(|l| !l.starts_with("BUILD "));
    lines.next()?;
    lines.next()
}

fn ramping_frame(t: &str) -> bool {
    target_row(t)
        .is_some_and(|r| r.contains(" target ") && r.contains(" Ramping ") && r.contains("25%"))
}

fn current_frame(t: &str) -> bool {
    target_row(t).is_some_and(|r| {
        r.contains("target, current") && r.contains(" Current ") && r.contains("100%")
    })
}

/// On a terminal: frames after screen clears; one shows the target ramping at 25 %, a later
/// one the target Current at 100 %.
fn tty_saw_ramp_then_current(out: &str) -> bool {
    let out = out.replace('\r', "");
    let frames: Vec<&str> = out
        .split(temporal_worker_controller::cli::watch::CLEAR)
        .collect();
    frames
        .iter()
        .position(|f| ramping_frame(f))
        .is_some_and(|i| frames[i..].iter().any(|f| current_frame(f)))
}

/// On a pipe: tables separated by blank lines, no escape sequence.
fn pipe_saw_ramp_then_current(out: &str) -> bool {
    let tables: Vec<&str> = out.split("\n\n").collect();
    tables
        .iter()
        .position(|t| ramping_frame(t))
        .is_some_and(|i| tables[i..].iter().any(|t| current_frame(t)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_wait_follow_a_progressive_rollout() -> Result<()> {
    let env = env().await;
    let name = "orders";
    env.apply(name, "v1", json!({"strategy": "AllAtOnce"}))
        .await?;
    let done = output(env.cli(&["wait", name, "--for", "current", "--timeout", "100s"])).await?;
    ensure!(done.status.code() == Some(0), "{}", text(&done));
    ensure!(
        String::from_utf8_lossy(&done.stdout).contains("target Current"),
        "{}",
        text(&done)
    );

    // A terminal (`script` gives the watch a pseudo-terminal) following the status API's event
    // stream, and a pipe following a Kubernetes watch.
    let watch = format!(
        "{BIN} status {name} --watch -n {} --api-url {}",
        env.world.ns, env.api_url
    );
    let mut tty_cmd = Command::new("script");
    tty_cmd
        .args(["-q", "-e", "-c", &watch, "/dev/null"])
        .stdin(Stdio::null());
    let tty = Running_::spawn(tty_cmd)?;
    let pipe = Running_::spawn(env.cli(&["status", name, "--watch"]))?;
    tty.until("the first frame", |t| t.contains("RolloutComplete"))
        .await?;
    pipe.until("the first table", |t| t.contains("RolloutComplete"))
        .await?;

    let steps = json!({"strategy": "Progressive", "steps": [
        {"rampPercentage": 25, "pauseDuration": "6s"},
        {"rampPercentage": 50, "pauseDuration": "3s"}]});
    env.apply(name, "v2", steps).await?;
    let seen = tty
        .until(
            "ramping then current on the terminal",
            tty_saw_ramp_then_current,
        )
        .await?;
    ensure!(
        seen.contains("NEXT STEP") && seen.contains("POLLERS"),
        "{seen}"
    );
    let piped = pipe
        .until(
            "ramping then current on the pipe",
            pipe_saw_ramp_then_current,
        )
        .await?;
    ensure!(
        !piped.contains('\x1b'),
        "escape sequences on a pipe:\n{piped}"
    );
    println!(
        "on the pipe:\n{piped}\nlast frame on the terminal:\n{}",
        seen.rsplit(temporal_worker_controller::cli::watch::CLEAR)
            .next()
            .unwrap_or_default()
    );
    ensure!(
        piped.lines().any(|l| l.contains("step 2/2 (50%)")),
        "the next step was never shown:\n{piped}"
    );

    let done = output(env.cli(&["wait", name, "--for", "ready", "--timeout", "60s"])).await?;
    ensure!(done.status.code() == Some(0), "{}", text(&done));
    let twd = env.api().get(name).await?;
    ensure!(target_status(&twd).as_deref() == Some("Current"));

    check_structured_output(&env, name).await
}

/// `status -o json|yaml` prints what the status API serves, valid against docs/openapi.yaml.
async fn check_structured_output(env: &Env, name: &str) -> Result<()> {
    let one = output(env.cli(&["status", name, "-o", "json"])).await?;
    ensure!(one.status.success(), "{}", text(&one));
    let one: Value = serde_json::from_slice(&one.stdout)?;
    validate("Rollout", &one)?;
    ensure!(one["summary"]["phase"] == "Completed", "{one}");
    ensure!(one["name"] == name);

    let list = output(env.cli(&["status", "-o", "json"])).await?;
    ensure!(list.status.success(), "{}", text(&list));
    let list: Value = serde_json::from_slice(&list.stdout)?;
    validate("RolloutList", &list)?;
    ensure!(
        list["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i["name"] == name)),
        "{list}"
    );

    // The same from the status API; YAML is the same document.
    let api = output(env.cli(&["status", name, "-o", "json", "--api-url", &env.api_url])).await?;
    ensure!(api.status.success(), "{}", text(&api));
    let api: Value = serde_json::from_slice(&api.stdout)?;
    validate("Rollout", &api)?;
    ensure!(
        api["summary"] == one["summary"],
        "API {api}\nKubernetes {one}"
    );
    let yaml = output(env.cli(&["status", "-o", "yaml"])).await?;
    ensure!(yaml.status.success(), "{}", text(&yaml));
    let yaml: Value = serde_yaml::from_slice(&yaml.stdout)?;
    validate("RolloutList", &yaml)?;
    // A document that breaks the schema is refused (the check can fail).
    let mut broken = one.clone();
    broken["summary"]["phase"] = json!("Sleeping");
    ensure!(validate("Rollout", &broken).is_err(), "a bad phase passed");
    let mut extra = list.clone();
    extra["items"][0]["surprise"] = json!(1);
    ensure!(
        validate("RolloutList", &extra).is_err(),
        "an undeclared field passed"
    );
    Ok(())
}

/// Checks `doc` against `components.schemas.<schema>` of docs/openapi.yaml, read as JSON
/// Schema: `nullable` becomes a `null` alternative, and the named schemas allow no undeclared
/// field (the API serves exactly what the document declares).
fn validate(schema: &str, doc: &Value) -> Result<()> {
    let path = test_harness::repo_root().join("docs/openapi.yaml");
    let openapi: Value = serde_yaml::from_str(&std::fs::read_to_string(&path)?)?;
    let mut components = openapi["components"].clone();
    if let Some(schemas) = components["schemas"].as_object_mut() {
        for s in schemas.values_mut() {
            if s.get("properties").is_some() && s.get("additionalProperties").is_none() {
                s["additionalProperties"] = json!(false);
            }
        }
    }
    let root = json!({
        "$ref": format!("#/components/schemas/{schema}"),
        "components": to_json_schema(components),
    });
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&root)
        .map_err(|e| anyhow::anyhow!("schema: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    ensure!(errors.is_empty(), "{schema}: {}", errors.join("; "));
    Ok(())
}

/// OpenAPI 3.0's `nullable: true` as JSON Schema.
fn to_json_schema(v: Value) -> Value {
    match v {
        Value::Object(mut map) => {
            let nullable = map.remove("nullable") == Some(Value::Bool(true));
            let map: serde_json::Map<String, Value> = map
                .into_iter()
                .map(|(k, v)| (k, to_json_schema(v)))
                .collect();
            if nullable {
                json!({"anyOf": [Value::Object(map), {"type": "null"}]})
            } else {
                Value::Object(map)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(to_json_schema).collect()),
        other => other,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_fails_with_the_reason_of_a_stalled_rollout() -> Result<()> {
    let env = env().await;
    let name = "stuck";
    env.apply(name, "v1", json!({"strategy": "AllAtOnce"}))
        .await?;
    wait(&env.api(), name, "v1 complete", |t| {
        ready_reason(t) == "RolloutComplete"
    })
    .await?;
    let long = |abort: bool| {
        json!({"strategy": "Progressive", "abort": abort,
               "steps": [{"rampPercentage": 20, "pauseDuration": "10m"}]})
    };
    env.apply(name, "v2", long(false)).await?;
    wait(&env.api(), name, "v2 ramping", |t| {
        target_status(t).as_deref() == Some("Ramping")
    })
    .await?;

    // Ramping for ten minutes: a short wait times out (exit 2), naming what it waited for.
    let slow = output(env.cli(&["wait", name, "--for", "current", "--timeout", "2s"])).await?;
    ensure!(slow.status.code() == Some(2), "{}", text(&slow));
    ensure!(
        String::from_utf8_lossy(&slow.stderr).contains("timed out"),
        "{}",
        text(&slow)
    );

    // Aborted: Stalled=True/RolloutAborted ends the wait at once with exit 1 and the reason.
    env.apply(name, "v2", long(true)).await?;
    let started = Instant::now();
    let stalled = output(env.cli(&["wait", name, "--for", "current", "--timeout", "90s"])).await?;
    ensure!(stalled.status.code() == Some(1), "{}", text(&stalled));
    let stderr = String::from_utf8_lossy(&stalled.stderr);
    ensure!(
        stderr.contains("Stalled (RolloutAborted)"),
        "{}",
        text(&stalled)
    );
    ensure!(
        started.elapsed() < Duration::from_secs(80),
        "did not stop at the stall"
    );
    let twd = env.api().get(name).await?;
    ensure!(twd.status.as_ref().and_then(|s| s.observed_generation) == twd.metadata.generation);

    // Waiting for the stall itself succeeds, also through the status API.
    let for_stalled = output(env.cli(&[
        "wait",
        name,
        "--for",
        "stalled",
        "--timeout",
        "60s",
        "--api-url",
        &env.api_url,
    ]))
    .await?;
    ensure!(
        for_stalled.status.code() == Some(0),
        "{}",
        text(&for_stalled)
    );
    let via_api = output(env.cli(&[
        "wait",
        name,
        "--for",
        "ready",
        "--timeout",
        "60s",
        "--api-url",
        &env.api_url,
    ]))
    .await?;
    ensure!(via_api.status.code() == Some(1), "{}", text(&via_api));
    ensure!(
        String::from_utf8_lossy(&via_api.stderr).contains("RolloutAborted"),
        "{}",
        text(&via_api)
    );
    Ok(())
}

/// Completing `sta` after sourcing `completion bash` in a real bash gives `status`.
#[test]
fn bash_completion_completes_subcommands_and_flags() -> Result<()> {
    let complete = |words: &[&str]| complete_in_bash(words, None);
    assert_eq!(
        complete(&["temporal-worker-controller", "sta"])?,
        ["status"]
    );
    assert_eq!(
        complete(&["temporal-worker-controller", "wait", "orders", "--fo"])?,
        ["--for"]
    );
    let shells = complete(&["temporal-worker-controller", "completion", ""])?;
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|s| s == shell), "{shells:?}");
    }
    Ok(())
}

/// `kubectl temporal-workers status` runs this binary as a kubectl plugin (a symlink named
/// `kubectl-temporal_workers` on PATH), with `--kubeconfig` and `--context` honoured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_as_a_kubectl_plugin() -> Result<()> {
    let env = env().await;
    env.apply("plugged", "v1", json!({"strategy": "AllAtOnce"}))
        .await?;
    let dir = tempdir("plugin")?;
    std::os::unix::fs::symlink(BIN, dir.join("kubectl-temporal_workers"))?;
    // The real kubeconfig with a current context that leads nowhere: only `--context` works.
    let (kubeconfig, real_context) = with_bogus_current_context(&env.kubeconfig, &dir)?;
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = |args: &[&str]| {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .env("PATH", &path)
            .env("HOME", &dir)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null());
        cmd
    };
    let listed = output(kubectl(&["plugin", "list"])).await?;
    ensure!(
        String::from_utf8_lossy(&listed.stdout).contains("kubectl-temporal_workers"),
        "{}",
        text(&listed)
    );
    let kc = kubeconfig.to_string_lossy().to_string();
    let status = output(kubectl(&[
        "temporal-workers",
        "status",
        "-n",
        &env.world.ns,
        "--kubeconfig",
        &kc,
        "--context",
        &real_context,
    ]))
    .await?;
    ensure!(status.status.success(), "{}", text(&status));
    let stdout = String::from_utf8_lossy(&status.stdout);
    ensure!(
        stdout.starts_with("NAME ") && stdout.lines().any(|l| l.starts_with("plugged ")),
        "{}",
        text(&status)
    );
    // Without `--context` the kubeconfig's current context is used, which cannot connect.
    let wrong = output(kubectl(&[
        "temporal-workers",
        "status",
        "-n",
        &env.world.ns,
        "--kubeconfig",
        &kc,
    ]))
    .await?;
    ensure!(!wrong.status.success(), "{}", text(&wrong));
    let help = output(kubectl(&["temporal-workers", "--help"])).await?;
    ensure!(
        String::from_utf8_lossy(&help.stdout).contains("Usage: kubectl temporal-workers"),
        "{}",
        text(&help)
    );
    Ok(())
}

/// A copy of `kubeconfig` in `dir` whose current context points at a closed port; returns its
/// path and the name of the original (working) context.
fn with_bogus_current_context(kubeconfig: &Path, dir: &Path) -> Result<(PathBuf, String)> {
    let mut kc: Value = serde_yaml::from_str(&std::fs::read_to_string(kubeconfig)?)?;
    let real = kc["current-context"]
        .as_str()
        .context("no current context")?
        .to_string();
    let user = kc["contexts"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == real.as_str()))
        .context("the current context is not listed")?["context"]["user"]
        .clone();
    kc["clusters"]
        .as_array_mut()
        .context("clusters")?
        .push(json!({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true}}));
    kc["contexts"]
        .as_array_mut()
        .context("contexts")?
        .push(json!({"name": "nowhere", "context": {"cluster": "nowhere", "user": user}}));
    kc["current-context"] = json!("nowhere");
    let path = dir.join("kubeconfig.yaml");
    std::fs::write(&path, serde_yaml::to_string(&kc)?)?;
    Ok((path, real))
}

fn tempdir(tag: &str) -> Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A copy of the test kubeconfig whose current context's namespace is `ns` (as `kubectl config
/// set-context --current --namespace` leaves it).
fn kubeconfig_in(env: &Env, ns: &str, tag: &str) -> Result<PathBuf> {
    let mut kc: Value = serde_yaml::from_str(&std::fs::read_to_string(&env.kubeconfig)?)?;
    let current = kc["current-context"]
        .as_str()
        .context("no current context")?
        .to_string();
    let context = kc["contexts"]
        .as_array_mut()
        .and_then(|cs| cs.iter_mut().find(|c| c["name"] == current.as_str()))
        .context("the current context is not listed")?;
    context["context"]["namespace"] = json!(ns);
    let path = tempdir(tag)?.join("kubeconfig.yaml");
    std::fs::write(&path, serde_yaml::to_string(&kc)?)?;
    Ok(path)
}

/// The binary with `args` and `kubeconfig`, and no `-n`.
fn cli_with(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    cmd
}

/// The NAME column of a `status` listing (with `-A` the second, after NAMESPACE).
fn names_listed(out: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let column = header.iter().position(|h| *h == "NAME").unwrap_or(0);
    lines
        .filter_map(|l| l.split_whitespace().nth(column).map(str::to_string))
        .collect()
}

/// `status` without `-n` lists the kube context's namespace, as kubectl does; `-A` lists
/// every namespace; `-n` and `-A` together are a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_the_context_namespace_and_all_with_a() -> Result<()> {
    let env = env().await;
    env.apply("ns-here", "v1", json!({"strategy": "AllAtOnce"}))
        .await?;
    let other = format!("cli-other-{}", std::process::id() % 10000);
    test_harness::world::ensure_namespace(&env.world.client, &other).await?;
    let elsewhere = manifests::in_namespace(
        env.twd("ns-elsewhere", "v1", json!({"strategy": "AllAtOnce"})),
        &other,
    );
    TemporalWorkerDeployment::api(env.world.client.clone(), &other, KindSet::Seed)
        .patch(
            "ns-elsewhere",
            &PatchParams::apply("cli-test").force(),
            &Patch::Apply(elsewhere),
        )
        .await?;
    let kubeconfig = kubeconfig_in(&env, &env.world.ns, "ctx-ns")?;
    let here = output(cli_with(&kubeconfig, &["status"])).await?;
    ensure!(here.status.success(), "{}", text(&here));
    let listed = names_listed(&here);
    ensure!(
        listed.iter().any(|n| n == "ns-here") && !listed.iter().any(|n| n == "ns-elsewhere"),
        "{}",
        text(&here)
    );
    let all = output(cli_with(&kubeconfig, &["status", "-A"])).await?;
    ensure!(all.status.success(), "{}", text(&all));
    let listed = names_listed(&all);
    ensure!(
        listed.iter().any(|n| n == "ns-here") && listed.iter().any(|n| n == "ns-elsewhere"),
        "{}",
        text(&all)
    );
    let there = output(cli_with(
        &kubeconfig,
        &["status", "-n", &other, "-o", "json"],
    ))
    .await?;
    let there: Value = serde_json::from_slice(&there.stdout)?;
    ensure!(
        there["items"]
            .as_array()
            .is_some_and(|i| i.len() == 1 && i[0]["name"] == "ns-elsewhere"),
        "{there}"
    );
    // The status API follows the same rule.
    let api = output(cli_with(
        &kubeconfig,
        &["status", "-o", "json", "--api-url", &env.api_url],
    ))
    .await?;
    let api: Value = serde_json::from_slice(&api.stdout)?;
    ensure!(
        api["items"]
            .as_array()
            .is_some_and(|i| i.iter().all(|r| r["namespace"] == env.world.ns.as_str())),
        "{api}"
    );
    let both = output(cli_with(&kubeconfig, &["status", "-A", "-n", &other])).await?;
    ensure!(both.status.code() == Some(2), "{}", text(&both));
    Ok(())
}

/// Runs bash's completion for `words` (the last one being completed) with `path` first on
/// PATH, after sourcing `completion bash`; returns COMPREPLY.
fn complete_in_bash(words: &[&str], kubeconfig: Option<&Path>) -> Result<Vec<String>> {
    let words_list = words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        r#"set -e
source <("{BIN}" completion bash)
spec=$(complete -p temporal-worker-controller)
fn=${{spec#*-F }}; fn=${{fn%% *}}
COMP_WORDS=({words_list})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
"$fn" temporal-worker-controller "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#
    );
    let bin_dir = Path::new(BIN).parent().context("bin dir")?;
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["--norc", "--noprofile", "-c", &script])
        .env("PATH", path)
        .env_remove("KUBECONFIG");
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let out = cmd.output()?;
    ensure!(out.status.success(), "{}", text(&out));
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// In a real bash, a rollout's name completes from the cluster (the binary called back), in
/// the context's namespace or the one `-n` names; flags and flag values do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_completes_rollout_names_from_the_cluster() -> Result<()> {
    let env = env().await;
    for name in ["compl-alpha", "compl-beta"] {
        env.apply(name, "v1", json!({"strategy": "AllAtOnce"}))
            .await?;
    }
    let kubeconfig = kubeconfig_in(&env, &env.world.ns, "compl")?;
    let names = |words: Vec<&str>| {
        let k = kubeconfig.clone();
        let words: Vec<String> = words.into_iter().map(str::to_string).collect();
        tokio::task::spawn_blocking(move || {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            complete_in_bash(&words, Some(&k))
        })
    };
    let bin = "temporal-worker-controller";
    ensure!(names(vec![bin, "pause", "compl-"]).await?? == ["compl-alpha", "compl-beta"]);
    ensure!(names(vec![bin, "undo", "compl-b"]).await?? == ["compl-beta"]);
    let ns = env.world.ns.as_str();
    // `-n` typed before the name is honoured: the other namespace has none of them.
    ensure!(
        names(vec![bin, "status", "-n", "default", "compl-"])
            .await??
            .is_empty()
    );
    ensure!(names(vec![bin, "wait", "-n", ns, "compl-a"]).await?? == ["compl-alpha"]);
    // A flag's value and a second positional are not names.
    ensure!(
        names(vec![bin, "wait", "compl-alpha", "--for", "compl-"])
            .await??
            .is_empty()
    );
    let flags = names(vec![bin, "pause", "--"]).await??;
    ensure!(flags.iter().any(|f| f == "--namespace"), "{flags:?}");
    Ok(())
}

fn current_build(t: &TemporalWorkerDeployment) -> Option<String> {
    Some(
        t.status
            .as_ref()?
            .current_version
            .as_ref()?
            .build_id
            .clone(),
    )
}

/// Whether the status records when `build` left routing (what `undo` goes by).
fn left_routing(t: &TemporalWorkerDeployment, build: &str) -> bool {
    t.status.as_ref().is_some_and(|s| {
        s.deprecated_versions.iter().any(|d| {
            d.version.build_id == build && (d.draining_since.is_some() || d.drained_since.is_some())
        })
    })
}

fn image_of(t: &TemporalWorkerDeployment) -> Option<String> {
    t.spec
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

/// `undo` puts the earlier version's template back and the controller promotes it at once (a
/// rollback: `RolledBack` event); on an object a GitOps tool manages it prints the change to
/// commit and patches nothing; with no earlier version it refuses (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_rolls_back_to_the_build_that_was_current_before() -> Result<()> {
    let env = env().await;
    let name = "undone";
    let all = json!({"strategy": "AllAtOnce"});
    env.apply(name, "v1", all.clone()).await?;
    let v1 = wait(&env.api(), name, "v1 Current", |t| {
        ready_reason(t) == "RolloutComplete"
    })
    .await
    .map(|t| current_build(&t))?
    .context("v1")?;
    let nothing = output(env.cli(&["undo", name])).await?;
    ensure!(nothing.status.code() == Some(1), "{}", text(&nothing));
    ensure!(
        String::from_utf8_lossy(&nothing.stderr).contains("no earlier version"),
        "{}",
        text(&nothing)
    );
    env.apply(name, "v2", all).await?;
    let v2 = wait(&env.api(), name, "v2 Current, v1 left routing", |t| {
        ready_reason(t) == "RolloutComplete"
            && current_build(t).is_some_and(|b| b != v1)
            && left_routing(t, &v1)
    })
    .await
    .map(|t| current_build(&t))?
    .context("v2")?;

    let undo = output(env.cli(&["undo", name])).await?;
    if !undo.status.success() {
        let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> = env.world.api();
        let d = deployments
            .get(&format!("{name}-{v1}"))
            .await
            .map(|d| serde_json::to_string(&d.spec.template).unwrap_or_default());
        bail!("{}\nv1's template: {d:?}", text(&undo));
    }
    let back = wait(&env.api(), name, "v1 Current again", |t| {
        current_build(t).as_deref() == Some(v1.as_str()) && ready_reason(t) == "RolloutComplete"
    })
    .await?;
    ensure!(
        image_of(&back).is_some_and(|i| i.ends_with(":v1")),
        "{:?}",
        image_of(&back)
    );
    let target = back.status.as_ref().and_then(|s| s.target_version.as_ref());
    ensure!(
        target.is_some_and(|t| t.version.build_id == v1),
        "not the same build ID"
    );
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = env.world.api();
    let rolled_back = events
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .any(|e| {
            e.reason.as_deref() == Some("RolledBack") && e.note.is_some_and(|n| n.contains(&v1))
        });
    ensure!(rolled_back, "no RolledBack event for {v1}");

    wait(&env.api(), name, "v2 left routing", |t| {
        left_routing(t, &v2)
    })
    .await?;
    // Managed by Flux (its label): the change to commit is printed, nothing is patched.
    let label = json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "apps"}}});
    env.api()
        .patch(name, &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    let generation = env.api().get(name).await?.metadata.generation;
    let printed = output(env.cli(&["undo", name])).await?;
    ensure!(printed.status.success(), "{}", text(&printed));
    let stdout = String::from_utf8_lossy(&printed.stdout);
    ensure!(
        stdout.contains("managed by Flux") && stdout.contains(&v2) && stdout.contains("image: "),
        "{}",
        text(&printed)
    );
    let yaml = stdout.split("\n---\n").nth(1).context("no YAML")?;
    let change: Value = serde_yaml::from_str(yaml)?;
    ensure!(
        change["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .is_some_and(|i| i.ends_with(":v2")),
        "{change}"
    );
    ensure!(
        env.api().get(name).await?.metadata.generation == generation,
        "patched"
    );
    Ok(())
}

async fn pod_uids(env: &Env, build: &str) -> Result<Vec<String>> {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = env.world.api();
    let lp = kube::api::ListParams::default().labels(&format!("temporal.io/build-id={build}"));
    Ok(pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| p.metadata.uid)
        .collect())
}

/// `restart` replaces the Current version's Pods, same build ID; `retry` on a build that
/// missed its progress deadline (no node fits its Pods) starts a new wait, and once a node
/// fits, that build rolls out; `retry` with nothing failed refuses (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_and_retry_act_on_the_rollout() -> Result<()> {
    let env = env().await;
    let name = "requests";
    env.apply(name, "v1", json!({"strategy": "AllAtOnce"}))
        .await?;
    let v1 = wait(&env.api(), name, "v1 Current", |t| {
        ready_reason(t) == "RolloutComplete"
    })
    .await
    .map(|t| current_build(&t))?
    .context("v1")?;
    let before = pod_uids(&env, &v1).await?;
    ensure!(!before.is_empty(), "no Ready Pods of {v1}");
    let restart = output(env.cli(&["restart", name])).await?;
    ensure!(restart.status.success(), "{}", text(&restart));
    let deadline = Instant::now() + T_SHOW;
    loop {
        let now = pod_uids(&env, &v1).await?;
        if !now.is_empty() && now.iter().all(|u| !before.contains(u)) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "Pods not replaced: {before:?} → {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    ensure!(current_build(&env.api().get(name).await?).as_deref() == Some(v1.as_str()));

    let refused = output(env.cli(&["retry", name])).await?;
    ensure!(refused.status.code() == Some(1), "{}", text(&refused));
    ensure!(
        String::from_utf8_lossy(&refused.stderr).contains("progress deadline"),
        "{}",
        text(&refused)
    );

    // v2's worker reads an env var from a Secret that does not exist yet: its Pods wait in
    // CreateContainerConfigError and it misses its 15 s deadline.
    let secret = "retry-token";
    let mut stuck = env.twd(name, "v2", json!({"strategy": "AllAtOnce"}));
    let from_secret = json!({"name": "RETRY_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}});
    let env_list = &mut stuck["spec"]["template"]["spec"]["containers"][0]["env"];
    env_list.as_array_mut().context("env")?.push(from_secret);
    stuck["spec"]["progressDeadlineSeconds"] = json!(15);
    env.api()
        .patch(
            name,
            &PatchParams::apply("cli-test").force(),
            &Patch::Apply(stuck),
        )
        .await?;
    let failed = wait(&env.api(), name, "v2 stalled", |t| {
        t.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Stalled" && c.status == "True" && c.reason == "ProgressDeadlineExceeded"
            })
        })
    })
    .await?;
    let v2 = failed
        .status
        .as_ref()
        .and_then(|s| s.target_version.as_ref())
        .map(|t| t.version.build_id.clone())
        .context("target")?;
    // The missing Secret appears: the Pods start, but the recorded failure holds until retried.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = env.world.api();
    let object = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret},
                        "stringData": {"token": "t"}});
    secrets
        .patch(
            secret,
            &PatchParams::apply("cli-test"),
            &Patch::Apply(object),
        )
        .await?;
    let retry = output(env.cli(&["retry", name])).await?;
    ensure!(retry.status.success(), "{}", text(&retry));
    ensure!(
        String::from_utf8_lossy(&retry.stdout).contains(&v2),
        "{}",
        text(&retry)
    );
    wait(&env.api(), name, "the retried build Current", |t| {
        current_build(t).as_deref() == Some(v2.as_str()) && ready_reason(t) == "RolloutComplete"
    })
    .await?;
    Ok(())
}

/// `lint` on one file: its exit code and the refusal message of its one document.
async fn lint_file(file: &Path) -> Result<(Option<i32>, Option<String>)> {
    let mut cmd = Command::new(BIN);
    cmd.arg("lint").arg(file).stdin(Stdio::null());
    let out = output(cmd).await?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let refusal = stdout
        .lines()
        .find_map(|l| l.split_once(": refused: ").map(|(_, m)| m.to_string()));
    Ok((out.status.code(), refusal))
}

/// The API server's answer to a dry-run create of `object`: None when it would be admitted,
/// else its message.
async fn dry_run(env: &Env, object: &Value) -> Result<Option<String>> {
    let kind = object["kind"].as_str().context("kind")?;
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.world.client.clone(),
        &env.world.ns,
        &test_harness::world::api_resource(kind),
    );
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api
        .create(&params, &serde_json::from_value(object.clone())?)
        .await
    {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(status)) => Ok(Some(status.message)),
        Err(e) => bail!("not an API server answer: {e}"),
    }
}

/// A webhook row `lint` cannot decide offline: it needs a Secret or ConfigMap, or the pod
/// template's dry run against the cluster.
fn needs_the_cluster(case: &table::Case) -> bool {
    !case.given.is_empty()
        || case.id.starts_with("gate-input-") && case.id.ends_with("-missing")
        || case.id == "template-kubernetes-refuses"
}

/// `lint` agrees with the API server's server-side dry run on every refused row of the
/// bad-input table, in both kind sets, the webhook's rows included (the chart's webhook is
/// installed here): the same verdict and the same message, exit 1. The webhook rows that need
/// the cluster (a Secret or ConfigMap, the pod template's dry run) are not refused offline.
/// Updates (rows with `before`) need the stored object: not linted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lint_agrees_with_a_server_side_dry_run_on_every_bad_input() -> Result<()> {
    let env = env().await;
    let dir = tempdir("lint")?;
    let mut checked = 0;
    let mut disagreements: Vec<String> = Vec::new();
    for case in table::table() {
        let table::Expect::Refused { by, fragment } = case.expect.clone() else {
            continue;
        };
        if case.before.is_some() {
            continue;
        }
        for kinds in [manifests::Kinds::Seed, manifests::Kinds::Canonical] {
            let bad = manifests::in_kinds(case.bad.clone(), kinds);
            let file = dir.join(format!("{}-{kinds:?}.yaml", case.id));
            std::fs::write(&file, serde_yaml::to_string(&bad)?)?;
            let (code, linted) = lint_file(&file).await?;
            let id = format!("{} ({kinds:?})", case.id);
            if by == table::By::Webhook && needs_the_cluster(&case) {
                ensure!(code == Some(0), "{id}: refused offline: {linted:?}");
                checked += 1;
                continue;
            }
            if let Some(m) = &linted {
                ensure!(table::holds(m, fragment), "{id}: {m}");
            }
            let server = dry_run(&env, &bad).await?;
            if code != Some(1) || linted != server || server.is_none() {
                disagreements.push(format!(
                    "{id}: exit {code:?}\n  lint:   {linted:?}\n  server: {server:?}"
                ));
            }
            checked += 1;
        }
    }
    ensure!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    ensure!(checked > 50, "only {checked} rows checked");
    // Good objects: admitted by both, exit 0, several documents in one file.
    let good = [
        env.twd(
            "lint-good",
            "v1",
            json!({"strategy": "Progressive", "steps": [
            {"rampPercentage": 10, "pauseDuration": "1m"}]}),
        ),
        manifests::connection("lint-good", "temporal.example:7233"),
        manifests::owned_resource(
            "lint-good",
            "worker",
            json!({"apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget", "spec": {"minAvailable": 1}}),
        ),
    ];
    let mut docs = String::new();
    for g in &good {
        ensure!(
            dry_run(&env, g).await?.is_none(),
            "the API server refuses {g}"
        );
        docs.push_str(&format!("---\n{}", serde_yaml::to_string(g)?));
    }
    let file = dir.join("good.yaml");
    std::fs::write(&file, docs)?;
    let mut cmd = Command::new(BIN);
    cmd.arg("lint").arg(&file).stdin(Stdio::null());
    let out = output(cmd).await?;
    ensure!(out.status.code() == Some(0), "{}", text(&out));
    ensure!(
        String::from_utf8_lossy(&out.stdout).matches(": ok").count() == 3,
        "{}",
        text(&out)
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["lint", "/nonexistent.yaml"]).stdin(Stdio::null());
    let missing = output(cmd).await?;
    ensure!(missing.status.code() == Some(2), "{}", text(&missing));
    Ok(())
}
