//! Watch streams: newline-delimited JSON events, resumable from a resourceVersion within the
//! bounded history, with bookmarks, streaming lists (`sendInitialEvents`), timeouts, and
//! forced closure by fault injection.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::Shared;
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{EventKind, WatchEvent};

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_EVERY: Duration = Duration::from_secs(3);
/// Server-side cap when the client gives no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

pub struct WatchParams {
    pub ns: Option<String>,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub send_initial_events: bool,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

struct Filter {
    def: Arc<ResourceDef>,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        let ns_ok = match &self.ns {
            Some(n) => {
                obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(n.as_str())
            }
            None => true,
        };
        ns_ok && self.labels.matches_obj(obj) && self.fields.matches(obj)
    }

    fn render(&self, kind: &str, obj: &Value) -> Bytes {
        let mut o = obj.clone();
        o["apiVersion"] = json!(self.def.api_version());
        let line = json!({"type": kind, "object": o}).to_string() + "\n";
        Bytes::from(line)
    }

    /// Translates a store event into what this watcher sees (selectors can turn a MODIFIED
    /// into ADDED or DELETED).
    fn translate(&self, ev: &WatchEvent) -> Option<Bytes> {
        if ev.key != self.def.key() {
            return None;
        }
        let now = self.matches(&ev.obj);
        let kind = match ev.kind {
            EventKind::Added if now => "ADDED",
            EventKind::Deleted if now => "DELETED",
            EventKind::Modified => {
                let before = ev.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => "MODIFIED",
                    (false, true) => "ADDED",
                    (true, false) => "DELETED",
                    (false, false) => return None,
                }
            }
            _ => return None,
        };
        Some(self.render(kind, &ev.obj))
    }
}

fn bookmark(def: &ResourceDef, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let line = json!({"type": "BOOKMARK", "object": {"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta}})
        .to_string()
        + "\n";
    Bytes::from(line)
}

fn gone_event(requested: u64, oldest: u64) -> Bytes {
    let status = ApiError::Gone {
        message: format!("too old resource version: {requested} ({oldest})"),
    }
    .status_body();
    Bytes::from(json!({"type": "ERROR", "object": status}).to_string() + "\n")
}

pub fn start(shared: Arc<Shared>, def: Arc<ResourceDef>, p: WatchParams) -> ApiResult<Response> {
    if p.send_initial_events && !p.bookmarks {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::error::Cause {
                reason: "FieldValueForbidden",
                message: "Forbidden: sendInitialEvents requires setting allowWatchBookmarks=true"
                    .into(),
                field: "allowWatchBookmarks".into(),
            }],
        ));
    }
    let filter = Filter {
        def: def.clone(),
        ns: p.ns.clone(),
        labels: p.labels,
        fields: p.fields,
    };
    let key = def.key();
    let mut first: Vec<Bytes> = Vec::new();
    let (rx, start_rv) = {
        let st = shared.lock();
        let current = st.rv;
        let requested = match p.resource_version.as_deref() {
            None | Some("") | Some("0") => None,
            Some(s) => Some(
                s.parse::<u64>()
                    .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s}")))?,
            ),
        };
        if p.send_initial_events || requested.is_none() {
            for o in st.list(&key, p.ns.as_deref()) {
                if filter.matches(o) {
                    first.push(filter.render("ADDED", o));
                }
            }
            if p.send_initial_events {
                first.push(bookmark(&def, current, true));
            }
        } else if let Some(r) = requested {
            let compacted = st.history.get(&key).map(|h| h.compacted).unwrap_or(0);
            if r < compacted {
                first.push(gone_event(r, compacted + 1));
                let rx = st.tx.subscribe();
                drop(st);
                return Ok(stream_response(
                    shared,
                    def,
                    filter,
                    rx,
                    first,
                    current,
                    true,
                    p.bookmarks,
                    p.timeout,
                ));
            }
            if let Some(h) = st.history.get(&key) {
                for ev in h.events.iter().filter(|e| e.rv > r) {
                    if let Some(b) = filter.translate(ev) {
                        first.push(b);
                    }
                }
            }
        }
        (st.tx.subscribe(), current)
    };
    // The receiver was created under the lock, so no event falls between `first` and the stream.
    Ok(stream_response(
        shared,
        def,
        filter,
        rx,
        first,
        start_rv,
        false,
        p.bookmarks,
        p.timeout,
    ))
}

#[allow(clippy::too_many_arguments)]
fn stream_response(
    shared: Arc<Shared>,
    def: Arc<ResourceDef>,
    filter: Filter,
    mut rx: broadcast::Receiver<Arc<WatchEvent>>,
    first: Vec<Bytes>,
    start_rv: u64,
    close_after_first: bool,
    bookmarks: bool,
    timeout: Option<Duration>,
) -> Response {
    let (tx, out) = mpsc::channel::<Bytes>(256);
    let mut drops = shared.faults.drop_signal();
    drops.mark_unchanged();
    let mut shutdown = shared.shutdown.subscribe();
    tokio::spawn(async move {
        for b in first {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        if close_after_first {
            return;
        }
        let deadline = tokio::time::sleep(timeout.unwrap_or(DEFAULT_TIMEOUT));
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        // Highest resourceVersion this stream has fully processed (safe to bookmark).
        let mut seen = start_rv;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        seen = seen.max(ev.rv);
                        if let Some(b) = filter.translate(&ev)
                            && tx.send(b).await.is_err()
                        {
                            return;
                        }
                    }
                    // A lagging watcher is closed; the client re-watches from its last rv.
                    Err(_) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    if tx.send(bookmark(&def, seen, false)).await.is_err() {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = drops.changed() => return,
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let stream = ReceiverStream::new(out).map(Ok::<Bytes, Infallible>);
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}
