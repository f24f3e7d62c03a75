//! The read-only status API during a live rollout (issue 6): its JSON equals the CR status,
//! and a server-sent-events client receives each transition.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use crate::support::*;

const T: Duration = Duration::from_secs(120);

async fn get_json(addr: std::net::SocketAddr, path: &str) -> Result<(u16, Value)> {
    let (code, body) = crate::loopback_http::get(addr, path, "application/json").await?;
    Ok((
        code,
        serde_json::from_str(&body).with_context(|| format!("body of {path}: {body}"))?,
    ))
}

/// Collects the JSON `data:` of every SSE event in the background.
fn collect_sse(
    addr: std::net::SocketAddr,
    path: String,
) -> (Arc<Mutex<Vec<Value>>>, tokio::task::JoinHandle<()>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let out = events.clone();
    let task = tokio::spawn(async move {
        let Ok(mut stream) = crate::loopback_http::open(addr, &path, "text/event-stream").await
        else {
            return;
        };
        let mut buf = String::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
            // Complete events end with a blank line.
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                for line in event.lines() {
                    if let Some(data) = line.strip_prefix("data:")
                        && let Ok(v) = serde_json::from_str::<Value>(data.trim())
                    {
                        out.lock().expect("events").push(v);
                    }
                }
            }
        }
    });
    (events, task)
}

/// Waits until the API serves exactly the CR's current status (the API reads a cache that
/// may trail the API server by a few milliseconds).
async fn api_matches_cr(c: &Case, name: &str) -> Result<Value> {
    let path = format!("/api/v1/namespaces/{}/rollouts/{name}", c.ns);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cr = serde_json::to_value(c.get_twd(name).await?.status)?;
        let (code, view) = get_json(c.env.http_addr, &path).await?;
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

    let (events, sse) = collect_sse(
        c.env.http_addr,
        format!("/api/v1/namespaces/{}/rollouts/web/watch", c.ns),
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
    let saw = |pred: &dyn Fn(&Value) -> bool| events.lock().expect("events").iter().any(pred);
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
            events.lock().expect("events").len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sse.abort();

    // Unknown rollouts are a JSON 404.
    let (code, body) = get_json(
        c.env.http_addr,
        &format!("/api/v1/namespaces/{}/rollouts/nope", c.ns),
    )
    .await?;
    ensure!(code == 404 && body.is_object(), "{code} {body}");
    Ok(())
}
