//! Optional bearer-token authentication for the status API (and, if asked, `/metrics`).
//!
//! A token is checked with a Kubernetes `TokenReview` (authentication.k8s.io/v1): any token
//! the API server accepts (a ServiceAccount token, an OIDC token…) is let in. This is
//! authentication only; the data served is read-only and free of secrets, so we do not also
//! run a `SubjectAccessReview`. Results are cached briefly, keyed by a SHA-256 of the token so
//! raw tokens are never kept in memory after the request.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

pub type ReviewFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ReviewOutcome, ReviewError>> + Send + 'a>>;

/// Answer of the token reviewer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReviewOutcome {
    Authenticated { username: String },
    Rejected,
}

/// The reviewer could not decide (API server unreachable, RBAC missing…).
#[derive(Clone, Debug, thiserror::Error)]
#[error("token review failed: {0}")]
pub struct ReviewError(pub String);

/// Something that can verify a bearer token. [`KubeTokenReviewer`] in production; tests plug
/// in a fake.
pub trait TokenReviewer: Send + Sync + 'static {
    fn review<'a>(&'a self, token: &'a str) -> ReviewFuture<'a>;
}

/// Reviews tokens with `POST /apis/authentication.k8s.io/v1/tokenreviews`.
/// The controller's ServiceAccount needs `create` on `tokenreviews`.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: kube::Client,
    audiences: Vec<String>,
}

impl KubeTokenReviewer {
    /// `audiences`: if non-empty, the token must be valid for one of them.
    pub fn new(client: kube::Client, audiences: Vec<String>) -> Self {
        Self { client, audiences }
    }
}

impl TokenReviewer for KubeTokenReviewer {
    fn review<'a>(&'a self, token: &'a str) -> ReviewFuture<'a> {
        Box::pin(async move {
            let api: Api<TokenReview> = Api::all(self.client.clone());
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_string(),
                    audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
                },
                ..Default::default()
            };
            let done = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| ReviewError(e.to_string()))?;
            let status = done.status.unwrap_or_default();
            if status.authenticated == Some(true) {
                let username = status.user.and_then(|u| u.username).unwrap_or_default();
                Ok(ReviewOutcome::Authenticated { username })
            } else {
                Ok(ReviewOutcome::Rejected)
            }
        })
    }
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid bearer token")]
    Invalid,
    #[error("cannot verify token: {0}")]
    Unavailable(String),
}

const CACHE_MAX: usize = 1024;

struct Cached {
    outcome: ReviewOutcome,
    expires: Instant,
}

/// Bearer-token check with a small cache. Cheap to clone.
#[derive(Clone)]
pub struct TokenAuth {
    reviewer: Arc<dyn TokenReviewer>,
    cache: Arc<Mutex<HashMap<[u8; 32], Cached>>>,
    accepted_ttl: Duration,
    rejected_ttl: Duration,
    protect_metrics: bool,
}

impl std::fmt::Debug for TokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuth")
            .field("protect_metrics", &self.protect_metrics)
            .finish_non_exhaustive()
    }
}

impl TokenAuth {
    /// TokenReview against the cluster of `client`.
    pub fn new(client: kube::Client) -> Self {
        Self::with_reviewer(Arc::new(KubeTokenReviewer::new(client, Vec::new())))
    }

    pub fn with_reviewer(reviewer: Arc<dyn TokenReviewer>) -> Self {
        Self {
            reviewer,
            cache: Arc::new(Mutex::new(HashMap::new())),
            accepted_ttl: Duration::from_secs(60),
            rejected_ttl: Duration::from_secs(10),
            protect_metrics: false,
        }
    }

    /// Also require a token on `/metrics` (Prometheus then needs `authorization` settings).
    pub fn protect_metrics(mut self, yes: bool) -> Self {
        self.protect_metrics = yes;
        self
    }

    pub fn protects_metrics(&self) -> bool {
        self.protect_metrics
    }

    /// How long verdicts are cached (accepted, rejected).
    pub fn cache_ttl(mut self, accepted: Duration, rejected: Duration) -> Self {
        self.accepted_ttl = accepted;
        self.rejected_ttl = rejected;
        self
    }

    /// Checks an `Authorization` header value; returns the username on success.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<String, AuthError> {
        let token = authorization
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Missing)?;
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(outcome) = self.cached(&key, now) {
            return verdict(outcome);
        }
        // Errors are not cached: the next request retries the review.
        let outcome = self
            .reviewer
            .review(token)
            .await
            .map_err(|e| AuthError::Unavailable(e.0))?;
        let ttl = match outcome {
            ReviewOutcome::Authenticated { .. } => self.accepted_ttl,
            ReviewOutcome::Rejected => self.rejected_ttl,
        };
        self.store(key, outcome.clone(), now + ttl);
        verdict(outcome)
    }

    fn cached(&self, key: &[u8; 32], now: Instant) -> Option<ReviewOutcome> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|c| c.expires > now)
            .map(|c| c.outcome.clone())
    }

    fn store(&self, key: [u8; 32], outcome: ReviewOutcome, expires: Instant) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_MAX {
            let now = Instant::now();
            cache.retain(|_, c| c.expires > now);
            if cache.len() >= CACHE_MAX {
                // Many distinct live tokens: start over rather than track recency.
                cache.clear();
            }
        }
        cache.insert(key, Cached { outcome, expires });
    }
}

fn verdict(outcome: ReviewOutcome) -> Result<String, AuthError> {
    match outcome {
        ReviewOutcome::Authenticated { username } => Ok(username),
        ReviewOutcome::Rejected => Err(AuthError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Fake {
        calls: AtomicUsize,
        fail: bool,
    }

    impl TokenReviewer for Fake {
        fn review<'a>(&'a self, token: &'a str) -> ReviewFuture<'a> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let fail = self.fail;
            Box::pin(async move {
                if fail {
                    return Err(ReviewError("apiserver down".into()));
                }
                Ok(if token == "good" {
                    ReviewOutcome::Authenticated {
                        username: "system:serviceaccount:mon:prom".into(),
                    }
                } else {
                    ReviewOutcome::Rejected
                })
            })
        }
    }

    #[tokio::test]
    async fn accepts_rejects_and_caches() {
        let fake = Arc::new(Fake {
            calls: AtomicUsize::new(0),
            fail: false,
        });
        let auth = TokenAuth::with_reviewer(fake.clone());
        assert_eq!(auth.authenticate(None).await, Err(AuthError::Missing));
        assert_eq!(
            auth.authenticate(Some("Basic abc")).await,
            Err(AuthError::Missing)
        );
        assert_eq!(
            auth.authenticate(Some("Bearer good")).await.as_deref(),
            Ok("system:serviceaccount:mon:prom")
        );
        assert_eq!(
            auth.authenticate(Some("Bearer good")).await.as_deref(),
            Ok("system:serviceaccount:mon:prom")
        );
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            1,
            "second call must hit the cache"
        );
        assert_eq!(
            auth.authenticate(Some("Bearer bad")).await,
            Err(AuthError::Invalid)
        );
        assert_eq!(
            auth.authenticate(Some("Bearer bad")).await,
            Err(AuthError::Invalid)
        );
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn expired_entries_are_reviewed_again() {
        let fake = Arc::new(Fake {
            calls: AtomicUsize::new(0),
            fail: false,
        });
        let auth = TokenAuth::with_reviewer(fake.clone()).cache_ttl(Duration::ZERO, Duration::ZERO);
        auth.authenticate(Some("Bearer good")).await.unwrap();
        auth.authenticate(Some("Bearer good")).await.unwrap();
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn review_errors_are_not_cached() {
        let fake = Arc::new(Fake {
            calls: AtomicUsize::new(0),
            fail: true,
        });
        let auth = TokenAuth::with_reviewer(fake.clone());
        assert!(matches!(
            auth.authenticate(Some("Bearer good")).await,
            Err(AuthError::Unavailable(_))
        ));
        assert!(matches!(
            auth.authenticate(Some("Bearer good")).await,
            Err(AuthError::Unavailable(_))
        ));
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    }
}
