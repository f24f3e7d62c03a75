//! Waiting for a condition with a deadline, the one way tests wait (never a fixed sleep).

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// How often [`eventually`] re-checks.
const POLL: Duration = Duration::from_millis(100);

/// Calls `check` until it returns `Some`, an error, or `timeout` passes (then fails naming
/// `what`). A request the API server never answered (the connection dropped under it: a
/// pooled keep-alive connection the server closed, a busy machine) is asked again, as any
/// client retries it; every other error ends the wait at once.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) if unanswered(&e) && Instant::now() <= deadline => {
                eprintln!("waiting for {what}: asking again after {e:#}");
            }
            Err(e) => return Err(e),
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A Kubernetes request that got no answer at all: the transport failed before a status
/// came back (an answer, even an error one, is never retried here).
fn unanswered(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<kube::Error>(),
            Some(kube::Error::Service(_) | kube::Error::HyperError(_))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unanswered_request_is_asked_again_and_an_answer_is_not() {
        let mut calls = 0;
        let got = eventually("a value", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move {
                if n == 1 {
                    let dropped = kube::Error::Service("connection closed".into());
                    return Err(anyhow::Error::new(dropped));
                }
                Ok(Some(n))
            }
        })
        .await;
        assert_eq!(got.ok(), Some(2));
        let refused = eventually("a value", Duration::from_secs(5), || async {
            let status = kube::core::Status::failure("no", "Forbidden").with_code(403);
            Err::<Option<()>, _>(anyhow::Error::new(kube::Error::Api(Box::new(status))))
        })
        .await;
        assert!(refused.is_err());
    }
}
