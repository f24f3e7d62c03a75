//! The read-only status API during a live rollout (issue 6): its JSON equals the CR status,
//! and a server-sent-events client receives each transition.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;

use crate::support::*;

const T: Duration = Duration::from_secs(120);

/// `GET path` on the status API with the environment's reader token.
async fn get_json(env: &Env, path: &str) -> Result<(u16, Value)> {
    let (code, body) = test_harness::loopback_http::get(
        env.http_addr,
        path,
        "application/json",
        Some(&env.api_token),
    )
    .await?;
    Ok((
        code,
        serde_json::from_str(&body).with_context(|| format!("body of {path}: {body}"))?,
    ))
}

/// The JSON `data:` of every complete server-sent event received so far (an event ends with
/// a blank line).
fn sse_events(raw: &Mutex<Vec<u8>>) -> Vec<Value> {
    let bytes = raw.lock().expect("sse buffer").clone();
    let text = String::from_utf8_lossy(&bytes);
    let complete = text.rfind("\n\n").map_or("", |end| &text[..end]);
    complete
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .collect()
}

/// Waits until the API serves exactly the CR's current status (the API reads a cache that
/// may trail the API server by a few milliseconds).
async fn api_matches_cr(c: &Case, name: &str) -> Result<Value> {
    let path = format!("/api/v1/namespaces/{}/rollouts/{name}", c.ns);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cr = serde_json::to_value(c.get_twd(name).await?.status)?;
        let (code, view) = get_json(&c.env, &path).await?;
        ensure!(code == 200, "status API answered {code}: {view}");
        if view["status"] == cr {
            return Ok(view);
        }
        ensure!(
            Instant::now() < deadline,
            "status API never matched the CR:\nAPI {:#}\nCR  {cr:#}",
            view["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_api_and_its_event_stream_follow_the_rollout() -> Result<()> {
    let c = case("api").await?;
    c.apply_twd("web", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c.wait_twd("web", "v1 Ready", T, is_ready).await?;
    let v1 = current_build(&twd).context("current")?;
    let view = api_matches_cr(&c, "web").await?;
    ensure!(view["summary"]["ready"] == true, "{view:#}");

    let (events, sse) = test_harness::loopback_http::stream_into_buffer(
        c.env.http_addr,
        format!("/api/v1/namespaces/{}/rollouts/web/watch", c.ns),
        Some(c.env.api_token.clone()),
    );
    c.apply_twd("web", "v2", json!({"strategy": "Progressive", "steps": [{"rampPercentage": 30, "pauseDuration": "3s"}]}), json!({}))
        .await?;
    c.wait_twd("web", "ramping 30%", T, |t| {
        t.status
            .as_ref()
            .and_then(|s| s.target_version.as_ref())
            .and_then(|tv| tv.ramp_percentage)
            == Some(30.0)
    })
    .await?;
    api_matches_cr(&c, "web").await?;
    let twd = c
        .wait_twd("web", "v2 Current", T, |t| {
            is_ready(t) && current_build(t).is_some_and(|b| b != v1)
        })
        .await?;
    let v2 = current_build(&twd).context("current")?;
    let view = api_matches_cr(&c, "web").await?;
    ensure!(
        view["summary"]["currentBuildId"] == v2.as_str()
            || view["summary"]["currentBuildID"] == v2.as_str(),
        "{:#}",
        view["summary"]
    );

    // The SSE client saw the ramp and the promotion.
    let saw = |pred: &dyn Fn(&Value) -> bool| sse_events(&events).iter().any(pred);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ramp = saw(&|e| {
            e.pointer("/status/targetVersion/rampPercentage")
                .and_then(Value::as_f64)
                == Some(30.0)
        });
        let promoted = saw(&|e| {
            e.pointer("/status/currentVersion/buildID")
                .and_then(Value::as_str)
                == Some(v2.as_str())
        });
        if ramp && promoted {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "SSE missed transitions (ramp {ramp}, promoted {promoted}); got {} events",
            sse_events(&events).len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sse.abort();

    // Unknown rollouts are a JSON 404.
    let (code, body) = get_json(
        &c.env,
        &format!("/api/v1/namespaces/{}/rollouts/nope", c.ns),
    )
    .await?;
    ensure!(code == 404 && body.is_object(), "{code} {body}");
    Ok(())
}

/// The status API runs with TokenReview auth: tokens are minted by the API server
/// (TokenRequest, as `kubectl create token` does) and checked by it (TokenReview).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_api_accepts_only_tokens_the_api_server_vouches_for() -> Result<()> {
    let c = case("auth").await?;
    c.apply_twd("web", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    c.wait_twd("web", "v1 Ready", T, is_ready).await?;
    let addr = c.env.http_addr;
    let path = format!("/api/v1/namespaces/{}/rollouts/web", c.ns);
    let status = |token: Option<String>| {
        let path = path.clone();
        async move {
            let (code, body) =
                test_harness::loopback_http::get(addr, &path, "application/json", token.as_deref())
                    .await?;
            anyhow::Ok((code, body))
        }
    };

    // A token from the real kubectl, for the accepted audience.
    let out = c
        .kubectl()
        .args(["-n", READER_NS, "create", "token", READER_SA])
        .args(["--audience", API_AUDIENCE, "--duration", "1h"])
        .output()
        .await?;
    ensure!(
        out.status.success(),
        "kubectl create token: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kubectl_token = String::from_utf8(out.stdout)?.trim().to_string();
    let (code, body) = status(Some(kubectl_token)).await?;
    ensure!(code == 200, "kubectl token refused: {code} {body}");
    let view: Value = serde_json::from_str(&body)?;
    ensure!(view["summary"]["ready"] == true, "{view:#}");

    // No token, a made-up token, and a real token for another audience: 401.
    let (code, body) = status(None).await?;
    ensure!(code == 401, "no token: {code} {body}");
    let (code, _) = status(Some("not-a-token".into())).await?;
    ensure!(code == 401, "made-up token: {code}");
    let other = mint_token(&c.client, READER_NS, READER_SA, "some-other-service").await?;
    let (code, _) = status(Some(other)).await?;
    ensure!(code == 401, "token for another audience: {code}");

    // A token whose ServiceAccount is gone is refused (it was never cached as valid).
    let sa = format!("gone-{}", c.ns);
    let orphan = mint_token(&c.client, READER_NS, &sa, API_AUDIENCE).await?;
    Api::<ServiceAccount>::namespaced(c.client.clone(), READER_NS)
        .delete(&sa, &Default::default())
        .await?;
    eventually("deleted ServiceAccount gone", T, || async {
        let gone = Api::<ServiceAccount>::namespaced(c.client.clone(), READER_NS)
            .get_opt(&sa)
            .await?
            .is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    let (code, _) = status(Some(orphan)).await?;
    ensure!(code == 401, "token of a deleted ServiceAccount: {code}");

    // Probes and /metrics stay open (no --api-auth-metrics here).
    for open in ["/healthz", "/readyz", "/metrics"] {
        let (code, _) = test_harness::loopback_http::get(addr, open, "text/plain", None).await?;
        ensure!(code == 200, "{open} answered {code} without a token");
    }
    Ok(())
}

/// Runs the real binary's `status` command.
async fn status_cli(env: &Env, args: &[&str], token: Option<&str>) -> Result<(bool, String)> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_temporal-worker-controller"));
    cmd.arg("status")
        .args(args)
        .env("KUBECONFIG", &env.kubeconfig)
        .env_remove("TEMPORAL_WORKER_CONTROLLER_TOKEN");
    if let Some(t) = token {
        cmd.env("TEMPORAL_WORKER_CONTROLLER_TOKEN", t);
    }
    let out = cmd.output().await?;
    Ok((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

/// `temporal-worker-controller status` mid-ramp, from the Kubernetes API and from the status
/// API (with a token; without one it fails and says why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_command_summarises_a_live_ramp() -> Result<()> {
    let c = case("cli").await?;
    c.apply_twd("web", "v1", json!({"strategy": "AllAtOnce"}), json!({}))
        .await?;
    let twd = c.wait_twd("web", "v1 Ready", T, is_ready).await?;
    let v1 = current_build(&twd).context("v1")?;
    c.apply_twd(
        "web",
        "v2",
        json!({"strategy": "Progressive", "steps": [
            {"rampPercentage": 30, "pauseDuration": "60s"},
            {"rampPercentage": 60, "pauseDuration": "60s"}]}),
        json!({}),
    )
    .await?;
    let twd = c
        .wait_twd("web", "ramping 30%", T, |t| {
            t.status
                .as_ref()
                .and_then(|s| s.target_version.as_ref())
                .and_then(|tv| tv.ramp_percentage)
                == Some(30.0)
        })
        .await?;
    let v2 = target_build(&twd).context("v2")?;
    let api_url = format!("http://{}", c.env.http_addr);

    // From the Kubernetes API (the user's kubeconfig).
    let (ok, text) = status_cli(&c.env, &["-n", &c.ns, "web"], None).await?;
    ensure!(ok, "status from the Kubernetes API failed:\n{text}");
    for want in [v1.as_str(), v2.as_str(), "30%", "1/2", "Progressive"] {
        ensure!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // The next step is due in about a minute, not overdue.
    let next = text
        .lines()
        .find(|l| l.starts_with("Next step:"))
        .context("no Next step line")?;
    ensure!(next.contains("in "), "ETA should be in the future: {next}");

    // From the status API with a token: the same facts plus the milestones.
    let (ok, text) = status_cli(
        &c.env,
        &["-n", &c.ns, "web", "--api-url", &api_url],
        Some(&c.env.api_token),
    )
    .await?;
    ensure!(ok, "status from the status API failed:\n{text}");
    for want in [v1.as_str(), v2.as_str(), "30%", "1/2", "RampStepStarted"] {
        ensure!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // The list form shows the rollout as a table row.
    let (ok, text) = status_cli(&c.env, &["-n", &c.ns], None).await?;
    ensure!(
        ok && text
            .lines()
            .any(|l| l.starts_with("web ") && l.contains("30%")),
        "list:\n{text}"
    );

    // Without a token the status API refuses, and the command says so.
    let (ok, text) = status_cli(&c.env, &["-n", &c.ns, "web", "--api-url", &api_url], None).await?;
    ensure!(
        !ok && text.contains("401"),
        "expected a 401 failure:\n{text}"
    );
    Ok(())
}

/// Helm 4 `install --wait` (kstatus through Flux's fork) of a chart holding a TWD returns only
/// once the rollout is Ready: Temporal routes to the new version and the status says so. (With
/// no controller the same install times out: `tests/gitops_live.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_wait_returns_only_once_the_rollout_is_ready() -> Result<()> {
    let c = case("helm").await?;
    let values = json!({
        "hostPort": c.env.temporal_address,
        "temporalNamespace": c.temporal_ns,
        "env": [{"name": "TEMPORAL_TASK_QUEUE", "value": c.task_queue}],
    });
    let kubeconfig = c.env.kubeconfig.clone();
    let ns = c.ns.clone();
    let rec = c.record("orders").await?;
    let install = tokio::task::spawn_blocking(move || {
        test_harness::gitops::helm_install(&kubeconfig, "orders", &ns, &values, 150)
    })
    .await??;
    ensure!(install.ok, "helm install --wait failed: {install:?}");
    ensure!(
        install.helm_version == test_harness::helm::pinned_version(),
        "not the pinned helm: {install:?}"
    );
    // The install returned: the rollout must already be complete.
    let twd = c.get_twd("orders").await?;
    ensure!(
        is_ready(&twd),
        "helm returned before Ready: {:?}",
        twd.status
    );
    let current = current_build(&twd).context("no current version")?;
    let state = describe_soon(&c.temporal().await?, &c.temporal_deployment_name("orders")).await?;
    ensure!(
        state.routing.current_build_id.as_deref() == Some(current.as_str()),
        "Temporal routes to {:?}, status says {current}",
        state.routing.current_build_id
    );
    let (_, history) = rec.finish().await?;
    ensure!(
        history.iter().any(|v| !v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")),
        "the recorder never saw the rollout in progress"
    );
    println!(
        "helm install --wait returned after {:.1}s with the rollout Ready",
        install.finished - install.started
    );
    Ok(())
}
