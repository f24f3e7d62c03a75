//! kube-runtime's watcher against the emulator: add/update/delete events, recovery after the
//! server drops every watch, streaming lists, and 410 Gone for compacted history.

mod common;

use std::time::Duration;

use anyhow::{Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::mpsc;

/// What the test sees: (kind, name, data.v).
type Seen = (String, String, Option<String>);

fn describe(ev: Event<ConfigMap>) -> Option<Seen> {
    let f = |k: &str, cm: ConfigMap| {
        let v = cm.data.as_ref().and_then(|d| d.get("v").cloned());
        Some((k.to_string(), cm.metadata.name.unwrap_or_default(), v))
    };
    match ev {
        Event::Apply(cm) => f("apply", cm),
        Event::InitApply(cm) => f("init", cm),
        Event::Delete(cm) => f("delete", cm),
        Event::Init | Event::InitDone => None,
    }
}

fn start_watcher(api: Api<ConfigMap>, cfg: watcher::Config) -> mpsc::UnboundedReceiver<Seen> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, cfg).boxed();
        while let Some(ev) = s.next().await {
            // Errors are retried by the caller in real code; here the stream just keeps going.
            if let Ok(ev) = ev
                && let Some(seen) = describe(ev)
                && tx.send(seen).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// Waits for an event matching `pred`, skipping others.
async fn expect(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    what: &str,
    pred: impl Fn(&Seen) -> bool,
) -> Result<Seen> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(s)) if pred(&s) => return Ok(s),
            Ok(Some(_)) => continue,
            Ok(None) => bail!("watcher ended while waiting for {what}"),
            Err(_) => bail!("timed out waiting for {what}"),
        }
    }
}

fn cm(name: &str, v: &str) -> Result<ConfigMap> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name}, "data": {"v": v}}),
    )?)
}

async fn exercise(cfg: watcher::Config, prefix: &str) -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, prefix).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &cm("pre", "0")?).await?;
    let mut rx = start_watcher(api.clone(), cfg);
    expect(&mut rx, "initial object", |s| s.0 == "init" && s.1 == "pre").await?;

    api.create(&PostParams::default(), &cm("a", "1")?).await?;
    expect(&mut rx, "add", |s| {
        s.0 == "apply" && s.1 == "a" && s.2.as_deref() == Some("1")
    })
    .await?;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await?;
    expect(&mut rx, "update", |s| {
        s.0 == "apply" && s.1 == "a" && s.2.as_deref() == Some("2")
    })
    .await?;
    api.delete("a", &DeleteParams::default()).await?;
    expect(&mut rx, "delete", |s| s.0 == "delete" && s.1 == "a").await?;

    // The server closes every watch; the watcher re-watches and keeps delivering.
    emu.faults().drop_watches();
    api.create(&PostParams::default(), &cm("b", "1")?).await?;
    expect(&mut rx, "add after drop", |s| {
        (s.0 == "apply" || s.0 == "init") && s.1 == "b"
    })
    .await?;
    emu.faults().drop_watches();
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "3"}})),
    )
    .await?;
    expect(&mut rx, "update after second drop", |s| {
        s.1 == "b" && s.2.as_deref() == Some("3")
    })
    .await?;
    api.delete("b", &DeleteParams::default()).await?;
    expect(&mut rx, "delete after drops", |s| {
        s.0 == "delete" && s.1 == "b"
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn watcher_list_then_watch_survives_dropped_watches() -> Result<()> {
    exercise(watcher::Config::default(), "watch-lw").await
}

#[tokio::test]
async fn watcher_streaming_lists_survive_dropped_watches() -> Result<()> {
    exercise(watcher::Config::default().streaming_lists(), "watch-stream").await
}

#[tokio::test]
async fn label_selector_watch_sees_objects_enter_and_leave() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "watch-sel").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut rx = start_watcher(api.clone(), watcher::Config::default().labels("team=a"));
    api.create(&PostParams::default(), &cm("x", "1")?).await?;
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await?;
    expect(&mut rx, "object entering the selector", |s| {
        s.0 == "apply" && s.1 == "x"
    })
    .await?;
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})),
    )
    .await?;
    expect(&mut rx, "object leaving the selector", |s| {
        s.0 == "delete" && s.1 == "x"
    })
    .await?;
    Ok(())
}

/// A watch from a resourceVersion older than the kept history gets a 410 Gone ERROR event.
#[tokio::test]
async fn watch_from_compacted_version_is_gone() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "watch-gone").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let first = api.create(&PostParams::default(), &cm("c", "0")?).await?;
    let old_rv = first.metadata.resource_version.unwrap_or_default();
    for i in 0..(kube_emulator::store::HISTORY_LIMIT + 5) {
        api.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": i.to_string()}})),
        )
        .await?;
    }
    let wp = kube::api::WatchParams::default().timeout(5);
    let mut s = api.watch(&wp, &old_rv).await?.boxed();
    match s.next().await {
        Some(Ok(kube::api::WatchEvent::Error(e))) => {
            assert_eq!(e.code, 410);
            Ok(())
        }
        other => bail!("expected a 410 ERROR event, got {other:?}"),
    }
}
