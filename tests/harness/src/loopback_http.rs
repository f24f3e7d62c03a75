//! A minimal HTTP/1.0 client for tests against loopback servers (the controller's HTTP
//! server, Prometheus). HTTP/1.0 keeps bodies raw (no chunked framing): a body ends when the
//! server closes the connection, which also suits server-sent-event streams.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Connects and sends `GET target` with the given `Accept` header and, if given, a bearer
/// token.
pub async fn open(
    addr: SocketAddr,
    target: &str,
    accept: &str,
    bearer: Option<&str>,
) -> Result<tokio::net::TcpStream> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {target} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).await?;
    Ok(stream)
}

/// Status code and body of `GET target`.
pub async fn get(
    addr: SocketAddr,
    target: &str,
    accept: &str,
    bearer: Option<&str>,
) -> Result<(u16, String)> {
    let mut stream = open(addr, target, accept, bearer).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .with_context(|| format!("GET {target} timed out"))??;
    let text = String::from_utf8(raw)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("no header/body split")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .context("status line")?
        .parse()?;
    Ok((code, body.to_string()))
}

/// Reads a long-lived response (an event stream) into a buffer in the background until the
/// task is aborted or the server closes.
pub fn stream_into_buffer(
    addr: SocketAddr,
    target: String,
    bearer: Option<String>,
) -> (Arc<Mutex<Vec<u8>>>, tokio::task::JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let out = buf.clone();
    let task = tokio::spawn(async move {
        let opened = open(addr, &target, "text/event-stream", bearer.as_deref()).await;
        let Ok(mut stream) = opened else {
            return;
        };
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            if let Ok(mut b) = out.lock() {
                b.extend_from_slice(&chunk[..n]);
            }
        }
    });
    (buf, task)
}
