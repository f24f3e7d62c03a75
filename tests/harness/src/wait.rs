//! Waiting for a condition with a deadline, the one way tests wait (never a fixed sleep).

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// How often [`eventually`] re-checks.
const POLL: Duration = Duration::from_millis(100);

/// Calls `check` until it returns `Some`, an error, or `timeout` passes (then fails naming
/// `what`).
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}
