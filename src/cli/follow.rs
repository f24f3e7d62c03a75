//! Follows one rollout for `status --watch` and `wait`: the status API's server-sent events
//! (`--api-url`) or a Kubernetes watch. Either way the consumer gets the status API's
//! `Rollout` view on every change, so both commands judge and draw one shape.
//!
//! Only the SSE framing ([`SseParser`]) is logic; the rest moves bytes.

use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::mpsc;

use crate::api::TemporalWorkerDeployment;
use crate::cli::kubeconfig::KubeOptions;
use crate::cli::status::{CliError, Http, namespace_of};
use crate::summary::RolloutView;

/// Where to read the rollout from.
#[derive(Clone, Debug)]
pub enum Source {
    /// The controller's status API at this base URL.
    Api(String),
    /// The Kubernetes API.
    Kube(KubeOptions),
}

/// What happened to the followed rollout.
#[derive(Debug)]
pub enum Update {
    /// Its state now (first the state at the start, then once per change).
    Rollout(Box<RolloutView>),
    /// It was deleted; nothing follows.
    Deleted,
    /// A transient problem (connection lost, watch error): the follower retries.
    Trouble(String),
    /// The follower gave up; nothing follows.
    Fatal(CliError),
}

/// Pause before reconnecting after the stream or the connection ended.
const RECONNECT: Duration = Duration::from_secs(1);

/// Starts following `namespace/name` (the namespace: for the status API, the one rollout of
/// that name; for Kubernetes, the context's). Errors that need no retry (no such rollout, a
/// bad URL) are returned at once; the rest arrive as [`Update`]s.
pub async fn follow(
    source: &Source,
    namespace: Option<&str>,
    name: &str,
) -> Result<mpsc::Receiver<Update>, CliError> {
    let (tx, rx) = mpsc::channel(16);
    match source {
        Source::Api(base) => {
            let http = Http::new(base)?;
            let ns = match namespace {
                Some(ns) => ns.to_string(),
                None => namespace_of(&http, name).await?,
            };
            let path = format!("/api/v1/namespaces/{ns}/rollouts/{name}/watch");
            // The first connection answers "not found" and "unauthorized" before anything runs.
            let first = http.open(&path, "text/event-stream").await?;
            tokio::spawn(follow_api(http, path, first, tx));
        }
        Source::Kube(opts) => {
            let client = opts.client().await?;
            let ns =
                namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string);
            let twd = crate::workers::fetch(&client, &ns, name)
                .await?
                .ok_or_else(|| CliError::NotFound(format!("{ns}/{name}")))?;
            let api = TemporalWorkerDeployment::api(client, &ns, twd.kind_set());
            tokio::spawn(follow_kube(api, twd.kind_set(), name.to_string(), tx));
        }
    }
    Ok(rx)
}

async fn follow_api(
    http: Http,
    path: String,
    first: axum::http::Response<hyper::body::Incoming>,
    tx: mpsc::Sender<Update>,
) {
    let mut response = Some(first);
    loop {
        let resp = match response.take() {
            Some(r) => r,
            None => match http.open(&path, "text/event-stream").await {
                Ok(r) => r,
                Err(
                    e @ CliError::Api {
                        code: 400..=499, ..
                    },
                ) => {
                    let _ = tx.send(Update::Fatal(e)).await;
                    return;
                }
                Err(e) => {
                    if tx.send(Update::Trouble(e.to_string())).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(RECONNECT).await;
                    continue;
                }
            },
        };
        let mut body = resp.into_body();
        let mut parser = SseParser::default();
        let ended = loop {
            match body.frame().await {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    for event in parser.push(&data) {
                        let update = match event.event.as_str() {
                            "rollout" => match serde_json::from_str::<RolloutView>(&event.data) {
                                Ok(view) => Update::Rollout(Box::new(view)),
                                Err(e) => Update::Trouble(format!("unreadable event: {e}")),
                            },
                            "deleted" => Update::Deleted,
                            _ => continue,
                        };
                        let deleted = matches!(update, Update::Deleted);
                        if tx.send(update).await.is_err() || deleted {
                            return;
                        }
                    }
                }
                Some(Err(e)) => break format!("event stream broke: {e}"),
                None => break "event stream ended".to_string(),
            }
        };
        if tx.send(Update::Trouble(ended)).await.is_err() {
            return;
        }
        tokio::time::sleep(RECONNECT).await;
    }
}

async fn follow_kube(
    api: kube::Api<TemporalWorkerDeployment>,
    set: crate::api::KindSet,
    name: String,
    tx: mpsc::Sender<Update>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    while let Some(event) = events.next().await {
        let update = match event {
            Ok(watcher::Event::Apply(twd) | watcher::Event::InitApply(twd)) => Update::Rollout(
                Box::new(RolloutView::from_twd(&twd.stamped(set), Vec::new())),
            ),
            Ok(watcher::Event::Delete(_)) => Update::Deleted,
            Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
            Err(e) => Update::Trouble(format!("watch: {e}")),
        };
        let deleted = matches!(update, Update::Deleted);
        if tx.send(update).await.is_err() || deleted {
            return;
        }
    }
}

/// One server-sent event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`message` when absent, as the SSE standard says).
    pub event: String,
    /// The `data:` lines, joined with newlines.
    pub data: String,
}

/// Splits an event stream into events, whatever the chunking of the bytes.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line not complete yet (a chunk may end inside a UTF-8 character).
    partial: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

impl SseParser {
    /// The events completed by `chunk`.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.partial.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches('\n').trim_end_matches('\r');
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(SseEvent {
                        event: self.event.take().unwrap_or_else(|| "message".into()),
                        data: std::mem::take(&mut self.data).join("\n"),
                    });
                }
                self.event = None;
                continue;
            }
            if line.starts_with(':') {
                continue; // a comment (keep-alive)
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.event = Some(value.to_string()),
                "data" => self.data.push(value.to_string()),
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_whole_whatever_the_chunks() {
        let stream = "event: rollout\ndata: {\"a\":\"é\"}\n\n: keep-alive\n\nevent: deleted\r\ndata: {}\r\n\r\ndata: x\ndata: y\n\n";
        let want = vec![
            SseEvent {
                event: "rollout".into(),
                data: "{\"a\":\"é\"}".into(),
            },
            SseEvent {
                event: "deleted".into(),
                data: "{}".into(),
            },
            SseEvent {
                event: "message".into(),
                data: "x\ny".into(),
            },
        ];
        // In one piece, and byte by byte (splitting the two bytes of `é`).
        assert_eq!(SseParser::default().push(stream.as_bytes()), want);
        let mut parser = SseParser::default();
        let mut got = Vec::new();
        for b in stream.as_bytes() {
            got.extend(parser.push(std::slice::from_ref(b)));
        }
        assert_eq!(got, want);
        // An event is not complete before its blank line.
        let mut parser = SseParser::default();
        assert!(parser.push(b"event: rollout\ndata: 1\n").is_empty());
        assert_eq!(parser.push(b"\n").len(), 1);
    }
}
