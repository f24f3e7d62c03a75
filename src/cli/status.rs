//! `temporal-worker-controller status`: a human summary of rollouts, read from the
//! controller's status API (`--api-url`) or straight from the Kubernetes API.
//!
//! Fetching lives here; the text is `crate::cli::render`'s (pure, so the layout is unit-tested).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, Uri, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

use crate::cli::kubeconfig::{KubeClientError, KubeOptions};
use crate::summary::{RolloutList, RolloutSummary, RolloutView};

pub use crate::cli::render::{StatusView, render};

/// Bearer token sent to the status API when it requires one.
pub const TOKEN_ENV: &str = "TEMPORAL_WORKER_CONTROLLER_TOKEN";
const HTTP_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusArgs {
    /// Namespace; the kube context's when unset (with `name` and `api_url`: the one rollout of
    /// that name).
    pub namespace: Option<String>,
    /// `-A`: list every namespace's rollouts.
    pub all_namespaces: bool,
    /// One rollout by name.
    pub name: Option<String>,
    /// Base URL of the status API, e.g. `http://localhost:8080`.
    pub api_url: Option<String>,
    /// The kubeconfig and context (without `api_url`).
    pub kube: KubeOptions,
    /// Print the status API's JSON shape (as JSON or YAML) instead of the human view.
    pub output: Option<OutputFormat>,
}

/// `-o json|yaml`: the status API's own shapes (docs/openapi.yaml): a `RolloutList` for a
/// listing, a `Rollout` for one rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Json,
    Yaml,
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    KubeClient(#[from] KubeClientError),
    #[error("encoding the output: {0}")]
    Encode(String),
    #[error("invalid API URL {url:?}: {why}")]
    BadUrl { url: String, why: String },
    #[error("request to {url} failed: {message}")]
    Request { url: String, message: String },
    #[error("{url} answered HTTP {code}: {message}")]
    Api {
        url: String,
        code: u16,
        message: String,
    },
    #[error("unexpected response from {url}: {source}")]
    Decode {
        url: String,
        source: serde_json::Error,
    },
    #[error("TemporalWorkerDeployment {0} not found")]
    NotFound(String),
    #[error("{name} exists in several namespaces ({namespaces}); pass --namespace")]
    Ambiguous { name: String, namespaces: String },
}

pub async fn run(args: StatusArgs) -> Result<(), CliError> {
    let view = fetch(&args).await?;
    match args.output {
        Some(format) => print!("{}", structured(&view, format)?),
        None => print!("{}", render(&view, jiff::Timestamp::now())),
    }
    Ok(())
}

/// `view` in the status API's shape: a `RolloutList` (`{"items": [...]}`) or one `Rollout`.
pub fn structured(view: &StatusView, format: OutputFormat) -> Result<String, CliError> {
    let value = match view {
        StatusView::List(items) => serde_json::to_value(RolloutList {
            items: items.clone(),
        }),
        StatusView::One(one) => serde_json::to_value(one),
    }
    .map_err(|e| CliError::Encode(e.to_string()))?;
    encode(&value, format)
}

/// One JSON document (pretty, newline-terminated) or one YAML document.
pub(crate) fn encode(value: &serde_json::Value, format: OutputFormat) -> Result<String, CliError> {
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| CliError::Encode(e.to_string())),
        OutputFormat::Yaml => {
            serde_yaml::to_string(value).map_err(|e| CliError::Encode(e.to_string()))
        }
    }
}

/// Reads the data `render` needs, from the status API or the Kubernetes API.
pub async fn fetch(args: &StatusArgs) -> Result<StatusView, CliError> {
    match &args.api_url {
        Some(url) => fetch_api(url, args).await,
        None => fetch_kube(args).await,
    }
}

async fn fetch_kube(args: &StatusArgs) -> Result<StatusView, CliError> {
    let client = args.kube.client().await?;
    match &args.name {
        Some(name) => {
            let ns = args
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            let twd = crate::workers::fetch(&client, &ns, name)
                .await?
                .ok_or_else(|| CliError::NotFound(format!("{ns}/{name}")))?;
            // Milestones live in the controller's memory; `kubectl get events` has them too.
            Ok(StatusView::One(Box::new(RolloutView::from_twd(
                &twd,
                Vec::new(),
            ))))
        }
        None => {
            let ns = (!args.all_namespaces).then(|| {
                args.namespace
                    .clone()
                    .unwrap_or_else(|| client.default_namespace().to_string())
            });
            let list = crate::workers::list(&client, ns.as_deref()).await?;
            let mut items: Vec<RolloutSummary> =
                list.iter().map(RolloutSummary::from_twd).collect();
            items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            Ok(StatusView::List(items))
        }
    }
}

async fn fetch_api(base: &str, args: &StatusArgs) -> Result<StatusView, CliError> {
    let http = Http::new(base)?;
    match (&args.namespace, &args.name) {
        (Some(ns), Some(name)) => {
            let one: RolloutView = http
                .get_json(&format!("/api/v1/namespaces/{ns}/rollouts/{name}"))
                .await?;
            Ok(StatusView::One(Box::new(one)))
        }
        (None, Some(name)) => {
            let ns = namespace_of(&http, name).await?;
            let path = format!("/api/v1/namespaces/{ns}/rollouts/{name}");
            Ok(StatusView::One(Box::new(http.get_json(&path).await?)))
        }
        (Some(ns), None) => {
            let list: RolloutList = http
                .get_json(&format!("/api/v1/namespaces/{ns}/rollouts"))
                .await?;
            Ok(StatusView::List(list.items))
        }
        (None, None) if args.all_namespaces => {
            let list: RolloutList = http.get_json("/api/v1/rollouts").await?;
            Ok(StatusView::List(list.items))
        }
        (None, None) => {
            let ns = context_namespace(&args.kube).await;
            let list: RolloutList = http
                .get_json(&format!("/api/v1/namespaces/{ns}/rollouts"))
                .await?;
            Ok(StatusView::List(list.items))
        }
    }
}

/// The kube context's namespace, as kubectl takes it: `default` when the kubeconfig names none
/// or there is no kubeconfig (the status API needs none).
async fn context_namespace(kube: &KubeOptions) -> String {
    kube.config()
        .await
        .map_or_else(|_| "default".to_string(), |c| c.default_namespace)
}

/// The namespace of the one rollout called `name` the status API lists.
pub(crate) async fn namespace_of(http: &Http, name: &str) -> Result<String, CliError> {
    let all: RolloutList = http.get_json("/api/v1/rollouts").await?;
    let matches: Vec<&RolloutSummary> = all.items.iter().filter(|s| s.name == name).collect();
    match matches.as_slice() {
        [] => Err(CliError::NotFound(name.to_string())),
        [one] => Ok(one.namespace.clone()),
        many => Err(CliError::Ambiguous {
            name: name.to_string(),
            namespaces: many
                .iter()
                .map(|s| s.namespace.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Minimal plain-HTTP JSON client (reach the in-cluster API with `kubectl port-forward`).
pub(crate) struct Http {
    base: String,
    client: HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    token: Option<String>,
}

impl Http {
    pub(crate) fn new(base: &str) -> Result<Self, CliError> {
        let base = base.trim_end_matches('/');
        let uri: Uri = base
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| CliError::BadUrl {
                url: base.to_string(),
                why: e.to_string(),
            })?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(CliError::BadUrl {
                url: base.to_string(),
                why: "expected http://host:port (use kubectl port-forward to reach the cluster)"
                    .into(),
            });
        }
        let client = HttpClient::builder(TokioExecutor::new()).build_http();
        let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        Ok(Self {
            base: base.to_string(),
            client,
            token,
        })
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        let url = format!("{}{}", self.base, path);
        let resp = self.open(path, "application/json").await?;
        let body = tokio::time::timeout(HTTP_TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| CliError::Request {
                url: url.clone(),
                message: "timed out reading body".into(),
            })?
            .map_err(|e| CliError::Request {
                url: url.clone(),
                message: e.to_string(),
            })?
            .to_bytes();
        serde_json::from_slice(&body).map_err(|source| CliError::Decode { url, source })
    }

    /// Sends `GET path` and returns the response once its head arrived, its body unread (an
    /// event stream's body never ends); an error status is read and returned as
    /// [`CliError::Api`].
    pub(crate) async fn open(
        &self,
        path: &str,
        accept: &str,
    ) -> Result<axum::http::Response<hyper::body::Incoming>, CliError> {
        let url = format!("{}{}", self.base, path);
        let request_err = |message: String| CliError::Request {
            url: url.clone(),
            message,
        };
        let mut req = Request::get(&url).header(header::ACCEPT, accept);
        if let Some(token) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| request_err(e.to_string()))?;
        let resp = tokio::time::timeout(HTTP_TIMEOUT, self.client.request(req))
            .await
            .map_err(|_| request_err("timed out".into()))?
            .map_err(|e| request_err(e.to_string()))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let body = tokio::time::timeout(HTTP_TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| request_err("timed out reading body".into()))?
            .map_err(|e| request_err(e.to_string()))?
            .to_bytes();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
        Err(CliError::Api {
            url,
            code: status.as_u16(),
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_http_urls() {
        assert!(matches!(
            Http::new("https://x:1"),
            Err(CliError::BadUrl { .. })
        ));
        assert!(matches!(
            Http::new("not a url"),
            Err(CliError::BadUrl { .. })
        ));
    }
}
