//! `/api/v1/...rollouts` handlers: list, get and an SSE watch.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use kube::ResourceExt;
use tokio::sync::broadcast::error::RecvError;

use super::{ApiError, AppState, StreamShutdown};
use crate::api::TemporalWorkerDeployment;
use crate::api::twd::TemporalWorkerDeploymentStatus;
use crate::summary::{RolloutList, RolloutSummary, RolloutView};

/// How often a watch re-reads the store: catches status written by another replica (the
/// feed only carries this process's writes) and deletions.
const STORE_RECHECK: Duration = Duration::from_secs(1);

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// DNS-1123 label: what Kubernetes accepts as a namespace name.
fn valid_label(s: &str) -> bool {
    s.len() <= 63 && label_chars(s)
}

/// DNS-1123 subdomain: what Kubernetes accepts as an object name. Like Kubernetes (and the
/// `name` pattern of docs/openapi.yaml), only the whole is bounded, not each dot-separated
/// part: a 64-character part is a valid name (schemathesis found the server refusing it).
fn valid_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(label_chars)
}

fn check_names(namespace: &str, name: Option<&str>) -> Result<(), ApiError> {
    if !valid_label(namespace) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid namespace name {namespace:?}"),
        ));
    }
    if let Some(name) = name.filter(|n| !valid_subdomain(n)) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid name {name:?}"),
        ));
    }
    Ok(())
}

/// Until the first list completes the store is empty: answering "no rollouts" would lie.
fn require_synced(state: &AppState) -> Result<(), ApiError> {
    if state.readiness.caches_synced() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "caches not synced yet",
        ))
    }
}

fn summaries(state: &AppState, namespace: Option<&str>) -> RolloutList {
    let mut items: Vec<RolloutSummary> = state
        .store
        .state()
        .iter()
        .filter(|t| namespace.is_none() || t.namespace().as_deref() == namespace)
        .map(|t| RolloutSummary::from_twd(t))
        .collect();
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    RolloutList { items }
}

pub(super) async fn list_all(State(state): State<AppState>) -> Result<Json<RolloutList>, ApiError> {
    require_synced(&state)?;
    Ok(Json(summaries(&state, None)))
}

pub(super) async fn list_namespace(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
) -> Result<Json<RolloutList>, ApiError> {
    check_names(&namespace, None)?;
    require_synced(&state)?;
    Ok(Json(summaries(&state, Some(&namespace))))
}

fn lookup(
    state: &AppState,
    namespace: &str,
    name: &str,
) -> Result<Arc<TemporalWorkerDeployment>, ApiError> {
    check_names(namespace, Some(name))?;
    require_synced(state)?;
    state.store.find(namespace, name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("worker deployment {namespace}/{name} not found"),
        )
    })
}

fn full_view(state: &AppState, twd: &TemporalWorkerDeployment) -> RolloutView {
    let milestones = state
        .milestones
        .recent(&twd.namespace().unwrap_or_default(), &twd.name_any());
    RolloutView::from_twd(twd, milestones)
}

pub(super) async fn get_one(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<RolloutView>, ApiError> {
    let twd = lookup(&state, &namespace, &name)?;
    Ok(Json(full_view(&state, &twd)))
}

fn resource_version(twd: &TemporalWorkerDeployment) -> Option<u64> {
    twd.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
}

struct WatchState {
    state: AppState,
    namespace: String,
    name: String,
    feed: tokio::sync::broadcast::Receiver<Arc<TemporalWorkerDeployment>>,
    shutdown: Option<tokio::sync::watch::Receiver<bool>>,
    recheck: tokio::time::Interval,
    /// Status last sent; events are sent only when it changes.
    last: Option<Option<TemporalWorkerDeploymentStatus>>,
    /// Newest resourceVersion seen, when numeric (etcd revisions are, in practice). The store
    /// lags behind the feed, so an older copy read from it must not be sent again.
    newest_rv: Option<u64>,
    done: bool,
}

enum Step {
    Send(Arc<TemporalWorkerDeployment>),
    Deleted,
    End,
    Nothing,
}

impl WatchState {
    fn is_ours(&self, twd: &TemporalWorkerDeployment) -> bool {
        twd.name_any() == self.name && twd.namespace().as_deref() == Some(self.namespace.as_str())
    }

    fn changed(&self, twd: &TemporalWorkerDeployment) -> bool {
        self.last.as_ref() != Some(&twd.status)
    }

    fn consider(&mut self, twd: Arc<TemporalWorkerDeployment>) -> Step {
        let rv = resource_version(&twd);
        if let (Some(new), Some(seen)) = (rv, self.newest_rv)
            && new <= seen
        {
            return Step::Nothing;
        }
        self.newest_rv = rv.or(self.newest_rv);
        if self.changed(&twd) {
            Step::Send(twd)
        } else {
            Step::Nothing
        }
    }

    fn reread_store(&mut self) -> Step {
        match self.state.store.find(&self.namespace, &self.name) {
            Some(twd) => self.consider(twd),
            None => Step::Deleted,
        }
    }

    async fn next_step(&mut self) -> Step {
        enum Woke {
            Stop,
            Feed(Result<Arc<TemporalWorkerDeployment>, RecvError>),
            Tick,
        }
        let shutdown_rx = &mut self.shutdown;
        let shutdown = async move {
            match shutdown_rx {
                Some(rx) => {
                    let _ = rx.wait_for(|stop| *stop).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let woke = tokio::select! {
            _ = shutdown => Woke::Stop,
            msg = self.feed.recv() => Woke::Feed(msg),
            _ = self.recheck.tick() => Woke::Tick,
        };
        match woke {
            Woke::Stop | Woke::Feed(Err(RecvError::Closed)) => Step::End,
            Woke::Feed(Ok(twd)) if self.is_ours(&twd) => self.consider(twd),
            Woke::Feed(Ok(_)) => Step::Nothing,
            // Missed messages: the store catches up with them.
            Woke::Feed(Err(RecvError::Lagged(_))) | Woke::Tick => self.reread_store(),
        }
    }

    fn event_for(&mut self, twd: &TemporalWorkerDeployment) -> Option<Event> {
        self.last = Some(twd.status.clone());
        self.newest_rv = resource_version(twd).or(self.newest_rv);
        Event::default()
            .event("rollout")
            .json_data(full_view(&self.state, twd))
            .ok()
    }
}

/// SSE: an `rollout` event with the current state, then one per status change; a `deleted`
/// event (and end of stream) when the object goes away.
pub(super) async fn watch(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    shutdown: Option<Extension<StreamShutdown>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Subscribe before reading the store so that no change between the two is lost.
    let feed = state.feed.subscribe();
    let initial = lookup(&state, &namespace, &name)?;
    let mut recheck = tokio::time::interval(STORE_RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ws = WatchState {
        state,
        namespace,
        name,
        feed,
        shutdown: shutdown.map(|Extension(s)| s.0),
        recheck,
        last: None,
        newest_rv: None,
        done: false,
    };
    let first = ws.event_for(&initial);
    let stream = futures::stream::unfold((ws, first), |(mut ws, mut pending)| async move {
        loop {
            if let Some(ev) = pending.take() {
                return Some((Ok(ev), (ws, None)));
            }
            if ws.done {
                return None;
            }
            match ws.next_step().await {
                Step::Send(twd) => pending = ws.event_for(&twd),
                Step::Deleted => {
                    ws.done = true;
                    let body = serde_json::json!({ "namespace": ws.namespace, "name": ws.name });
                    pending = Event::default().event("deleted").json_data(body).ok();
                }
                Step::End => return None,
                Step::Nothing => {}
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        assert!(valid_label("team-a"));
        assert!(!valid_label("Team"));
        assert!(!valid_label("-a"));
        assert!(!valid_label(&"a".repeat(64)));
        assert!(valid_subdomain("a.b-c"));
        assert!(!valid_subdomain("a..b"));
        assert!(!valid_subdomain("a_b"));
        assert!(valid_subdomain(&format!("0.{}", "0".repeat(251))));
        assert!(valid_subdomain(&"a".repeat(253)));
        assert!(!valid_subdomain(&"a".repeat(254)));
        assert!(!valid_subdomain("a.-b"));
        assert!(check_names("ns", Some("ok")).is_ok());
        assert_eq!(
            check_names("NS", None).unwrap_err().code,
            StatusCode::BAD_REQUEST
        );
    }
}
