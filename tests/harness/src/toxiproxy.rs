//! Toxiproxy (`tools/toxiproxy`, built from the Go module proxy): a real TCP proxy whose links
//! the chaos suite slows down, resets or cuts through its HTTP API, between the controller (a
//! child process) and kube-apiserver or Temporal. Nothing here runs inside the controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::supervise::{Supervised, free_port};

/// How long the server may take to answer its API after spawning.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// A running `toxiproxy-server`; stopped on drop.
pub struct Toxiproxy {
    api: SocketAddr,
    _server: Supervised,
}

/// A fault on one proxy (Toxiproxy's toxics; `stream` is `downstream` unless said).
#[derive(Clone, Debug)]
pub enum Toxic {
    /// Adds `latency_ms` ± `jitter_ms` to every chunk of data.
    Latency { latency_ms: u64, jitter_ms: u64 },
    /// Closes connections with a TCP RST after `timeout_ms` (0: at once).
    ResetPeer { timeout_ms: u64 },
    /// Stops all data and closes the connection after `timeout_ms` (0: never closes).
    Timeout { timeout_ms: u64 },
}

impl Toxic {
    fn body(&self, name: &str, toxicity: f64) -> Value {
        let (kind, attributes) = match self {
            Toxic::Latency {
                latency_ms,
                jitter_ms,
            } => (
                "latency",
                json!({"latency": latency_ms, "jitter": jitter_ms}),
            ),
            Toxic::ResetPeer { timeout_ms } => ("reset_peer", json!({"timeout": timeout_ms})),
            Toxic::Timeout { timeout_ms } => ("timeout", json!({"timeout": timeout_ms})),
        };
        json!({"name": name, "type": kind, "stream": "downstream",
               "toxicity": toxicity, "attributes": attributes})
    }

    /// The toxic's type name, as the summary counts faults.
    pub fn kind(&self) -> &'static str {
        match self {
            Toxic::Latency { .. } => "latency",
            Toxic::ResetPeer { .. } => "reset_peer",
            Toxic::Timeout { .. } => "timeout",
        }
    }
}

impl Toxiproxy {
    /// Builds (once, cached) and starts `toxiproxy-server` on a free loopback port.
    pub async fn start() -> Result<Toxiproxy> {
        let bin = tokio::task::spawn_blocking(|| crate::cached_build("toxiproxy")).await??;
        let port = free_port()?;
        let log: PathBuf =
            std::env::temp_dir().join(format!("toxiproxy-{}-{port}.log", std::process::id()));
        let server = Supervised::spawn(
            "toxiproxy",
            &bin,
            [
                "-host".to_string(),
                "127.0.0.1".into(),
                "-port".into(),
                port.to_string(),
            ],
            &log,
        )?;
        let proxy = Toxiproxy {
            api: SocketAddr::from(([127, 0, 0, 1], port)),
            _server: server,
        };
        let begin = Instant::now();
        while proxy.request("GET", "/version", None).await.is_err() {
            if begin.elapsed() > START_DEADLINE {
                bail!(
                    "toxiproxy did not answer within {START_DEADLINE:?}; log: {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(proxy)
    }

    /// Creates proxy `name` listening on a free loopback port and forwarding to `upstream`
    /// (`host:port`); returns the address to connect to instead of `upstream`.
    pub async fn proxy(&self, name: &str, upstream: &str) -> Result<SocketAddr> {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let body = json!({"name": name, "listen": listen.to_string(), "upstream": upstream,
                          "enabled": true});
        self.request("POST", "/proxies", Some(body)).await?;
        Ok(listen)
    }

    /// Enables or disables proxy `name`: disabled, it closes every connection and refuses new
    /// ones (the link is cut).
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<()> {
        self.request(
            "POST",
            &format!("/proxies/{name}"),
            Some(json!({"enabled": enabled})),
        )
        .await
        .map(drop)
    }

    /// Adds `toxic` as `toxic_name` to proxy `name`, applied to a `toxicity` share (0–1) of the
    /// connections.
    pub async fn add_toxic(
        &self,
        name: &str,
        toxic_name: &str,
        toxic: &Toxic,
        toxicity: f64,
    ) -> Result<()> {
        self.request(
            "POST",
            &format!("/proxies/{name}/toxics"),
            Some(toxic.body(toxic_name, toxicity)),
        )
        .await
        .map(drop)
    }

    /// Removes toxic `toxic_name` from proxy `name`.
    pub async fn remove_toxic(&self, name: &str, toxic_name: &str) -> Result<()> {
        self.request(
            "DELETE",
            &format!("/proxies/{name}/toxics/{toxic_name}"),
            None,
        )
        .await
        .map(drop)
    }

    /// Enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<()> {
        self.request("POST", "/reset", None).await.map(drop)
    }

    /// One HTTP/1.0 request to the API (the body ends when the server closes); fails on a
    /// status outside 2xx.
    async fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<String> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut stream = tokio::net::TcpStream::connect(self.api).await?;
        let head = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.api,
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
            .await
            .with_context(|| format!("toxiproxy {method} {path} timed out"))??;
        let text = String::from_utf8_lossy(&raw).to_string();
        let (status_line, rest) = text.split_once("\r\n").context("no status line")?;
        let code: u16 = status_line
            .split_whitespace()
            .nth(1)
            .context("no status code")?
            .parse()?;
        let body = rest.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        if !(200..300).contains(&code) {
            bail!("toxiproxy {method} {path}: {code} {body}");
        }
        Ok(body.to_string())
    }
}
