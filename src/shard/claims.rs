//! Which shard spends a Temporal namespace's request budget (one budget per Temporal
//! namespace per install). Two shards talking to one namespace would each take the
//! full budget, so the first shard to need a namespace claims it on a Lease in the install's
//! namespace (holder: the shard's name, so any replica of that shard that leads may use it),
//! renews it while one of its worker deployments uses the namespace, and releases it as soon as
//! none does (the worker deployments moved to another shard, or were deleted). Another shard
//! asking for a claimed namespace is refused, and its worker deployment reports
//! `TemporalNamespaceInOtherShard` until the claim is released or expires.
//!
//! A Lease rather than a coordinator of our own: the API server's optimistic concurrency
//! (resourceVersion) decides a race between two shards, and a shard that stops (or loses its
//! leader) stops renewing, so its claims expire after [`CLAIM_DURATION`].

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use sha2::{Digest, Sha256};

/// How long a claim stands without renewal.
pub const CLAIM_DURATION: Duration = Duration::from_secs(60);
/// How often the leader renews its claims (and releases unused ones).
pub const RENEW_EVERY: Duration = Duration::from_secs(15);
/// A refusal stands this long before the Lease is read again (many worker deployments of one
/// refused namespace cost one read, not one each).
const REFUSAL_REUSE: Duration = Duration::from_secs(5);
/// Annotations naming what a claim Lease is for (its name is a hash).
pub const ANNOTATION_ADDRESS: &str = "temporal.io/temporal-address";
pub const ANNOTATION_NAMESPACE: &str = "temporal.io/temporal-namespace";

/// A Temporal namespace: (server address, namespace), the key of its request budget.
pub type Key = (String, String);

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(
        "Temporal namespace {namespace:?} (at {address}) is served by shard {holder:?} of this install, which holds its request budget: label this worker deployment for that shard, or move all of the namespace's worker deployments to one shard together (docs/sharding.md)"
    )]
    OtherShard {
        address: String,
        namespace: String,
        holder: String,
    },
    #[error("claiming Temporal namespace {namespace:?} for this shard: {source}")]
    Unreadable {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// What to do with a claim Lease as read.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Create,
    /// Ours already: write a renewal.
    Renew,
    /// Another shard's, but expired or released.
    TakeOver,
    Refuse(String),
}

/// The step for `lease` (as read, `None`: absent) for shard `me` at `now`.
pub fn decide(lease: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Step {
    let Some(spec) = lease else {
        return Step::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == me {
        return Step::Renew;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or_default());
    let expired = spec
        .renew_time
        .as_ref()
        .is_none_or(|t| t.0 + jiff::SignedDuration::from_secs(duration) < now);
    if holder.is_empty() || expired {
        Step::TakeOver
    } else {
        Step::Refuse(holder.to_string())
    }
}

/// The claims of one shard.
pub struct Claims {
    api: Api<Lease>,
    base: String,
    shard: String,
    /// Held claims: until when (by our clock) the last write confirms them.
    held: Mutex<HashMap<Key, Instant>>,
    refused: Mutex<HashMap<Key, (Instant, String)>>,
}

impl Claims {
    /// Claims on Leases named after `base` (the install's lease name) in `namespace`.
    pub fn new(client: kube::Client, namespace: &str, base: &str, shard: &str) -> Claims {
        Claims {
            api: Api::namespaced(client, namespace),
            base: base.to_string(),
            shard: shard.to_string(),
            held: Mutex::default(),
            refused: Mutex::default(),
        }
    }

    /// The Lease holding `key`'s claim.
    pub fn lease_name(&self, key: &Key) -> String {
        let digest = Sha256::digest(format!("{}/{}", key.0, key.1).as_bytes());
        format!("{}-ns-{}", self.base, &hex::encode(digest)[..12])
    }

    /// Ok when this shard may spend `namespace`'s budget (claiming it if nobody does).
    pub async fn check(&self, address: &str, namespace: &str) -> Result<(), ClaimError> {
        let key = (address.to_string(), namespace.to_string());
        let now = Instant::now();
        if lock(&self.held)
            .get(&key)
            .is_some_and(|until| *until > now + RENEW_EVERY)
        {
            return Ok(());
        }
        if let Some((at, holder)) = lock(&self.refused).get(&key)
            && now.duration_since(*at) < REFUSAL_REUSE
        {
            return Err(other(&key, holder));
        }
        self.claim(&key).await
    }

    async fn claim(&self, key: &Key) -> Result<(), ClaimError> {
        let name = self.lease_name(key);
        let unreadable = |source| ClaimError::Unreadable {
            namespace: key.1.clone(),
            source,
        };
        let read = self.api.get_opt(&name).await.map_err(unreadable)?;
        let step = decide(
            read.as_ref().and_then(|l| l.spec.as_ref()),
            &self.shard,
            Timestamp::now(),
        );
        let written = match step {
            Step::Refuse(holder) => {
                lock(&self.refused).insert(key.clone(), (Instant::now(), holder.clone()));
                return Err(other(key, &holder));
            }
            Step::Create => {
                let lease = self.lease(key, None);
                self.api.create(&PostParams::default(), &lease).await
            }
            Step::Renew | Step::TakeOver => {
                tracing::debug!(lease = %name, ?step, "writing a Temporal namespace claim");
                // A merge patch carrying the resourceVersion read: a concurrent writer's change
                // makes it fail (409), as a replace would, with the `patch` the leader Lease
                // already needs (no `update` granted).
                let lease = self.lease(key, read.as_ref());
                self.api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&lease))
                    .await
            }
        };
        self.settle(key, written.map(|_| ()))
    }

    /// Records a claim write: held on success; a lost race (409) reads as another shard's.
    fn settle(&self, key: &Key, written: Result<(), kube::Error>) -> Result<(), ClaimError> {
        match written {
            Ok(()) => {
                lock(&self.refused).remove(key);
                lock(&self.held).insert(key.clone(), Instant::now() + CLAIM_DURATION);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let holder = "another shard".to_string();
                lock(&self.refused).insert(key.clone(), (Instant::now(), holder.clone()));
                Err(other(key, &holder))
            }
            Err(source) => Err(ClaimError::Unreadable {
                namespace: key.1.clone(),
                source,
            }),
        }
    }

    /// The claim Lease for `key`, held by this shard from now on (over `existing`'s
    /// resourceVersion, so that a concurrent writer's change makes this write fail).
    fn lease(&self, key: &Key, existing: Option<&Lease>) -> Lease {
        let now = MicroTime(Timestamp::now());
        let previous = existing.and_then(|l| l.spec.clone()).unwrap_or_default();
        let taking = previous.holder_identity.as_deref() != Some(self.shard.as_str());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.lease_name(key)),
                resource_version: existing.and_then(|l| l.resource_version()),
                annotations: Some(
                    [
                        (ANNOTATION_ADDRESS.to_string(), key.0.clone()),
                        (ANNOTATION_NAMESPACE.to_string(), key.1.clone()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.shard.clone()),
                lease_duration_seconds: Some(CLAIM_DURATION.as_secs() as i32),
                acquire_time: if taking {
                    Some(now.clone())
                } else {
                    previous.acquire_time
                },
                renew_time: Some(now),
                lease_transitions: Some(
                    previous.lease_transitions.unwrap_or_default() + i32::from(taking),
                ),
                ..Default::default()
            }),
        }
    }

    /// Renews the claims `in_use` still needs and releases the others (called by the
    /// leader every [`RENEW_EVERY`]).
    pub async fn keep(&self, in_use: &HashSet<Key>) {
        let held: Vec<Key> = lock(&self.held).keys().cloned().collect();
        for key in held {
            let result = if in_use.contains(&key) {
                self.claim(&key).await
            } else {
                self.release(&key).await
            };
            if let Err(e) = result {
                tracing::warn!(namespace = %key.1, error = %e, "keeping a Temporal namespace claim");
            }
        }
    }

    /// Gives `key` up at once, so another shard need not wait for it to expire.
    async fn release(&self, key: &Key) -> Result<(), ClaimError> {
        lock(&self.held).remove(key);
        let name = self.lease_name(key);
        let unreadable = |source| ClaimError::Unreadable {
            namespace: key.1.clone(),
            source,
        };
        let Some(lease) = self.api.get_opt(&name).await.map_err(unreadable)? else {
            return Ok(());
        };
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref());
        if holder != Some(self.shard.as_str()) {
            return Ok(());
        }
        tracing::info!(namespace = %key.1, "releasing the Temporal namespace claim: no worker deployment of this shard uses it");
        let release = serde_json::json!({
            "metadata": {"resourceVersion": lease.resource_version()},
            "spec": {"holderIdentity": null},
        });
        self.api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&release))
            .await
            .map(|_| ())
            .map_err(unreadable)
    }

    /// Forgets every claim (leadership was lost: the next leader confirms them again).
    pub fn forget(&self) {
        lock(&self.held).clear();
    }
}

/// The Temporal namespaces the cached worker deployments use (through their Connection's
/// address), deleting ones included: their cleanup still talks to Temporal.
pub fn in_use(workers: &crate::workers::Workers, caches: &crate::caches::Caches) -> HashSet<Key> {
    workers
        .state()
        .iter()
        .filter_map(|twd| {
            let connection = caches.connection_of(twd)?;
            Some((
                connection.spec.host_port,
                twd.spec.worker_options.temporal_namespace.clone(),
            ))
        })
        .collect()
}

fn other(key: &Key, holder: &str) -> ClaimError {
    ClaimError::OtherShard {
        address: key.0.clone(),
        namespace: key.1.clone(),
        holder: holder.to_string(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned map only means another task panicked mid-insert; the data is usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed_secs_ago: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(60),
            renew_time: Some(MicroTime(
                Timestamp::now() - jiff::SignedDuration::from_secs(renewed_secs_ago),
            )),
            ..Default::default()
        }
    }

    #[test]
    fn a_claim_is_created_renewed_taken_over_once_stale_and_otherwise_refused() {
        let now = Timestamp::now();
        assert_eq!(decide(None, "a", now), Step::Create);
        assert_eq!(decide(Some(&spec(Some("a"), 5)), "a", now), Step::Renew);
        // Our own claim is ours even when it lapsed (a restart of the shard's leader).
        assert_eq!(decide(Some(&spec(Some("a"), 500)), "a", now), Step::Renew);
        assert_eq!(
            decide(Some(&spec(Some("b"), 5)), "a", now),
            Step::Refuse("b".into())
        );
        assert_eq!(decide(Some(&spec(Some("b"), 61)), "a", now), Step::TakeOver);
        // Released (no holder): taken at once.
        assert_eq!(decide(Some(&spec(None, 1)), "a", now), Step::TakeOver);
    }

    #[tokio::test]
    async fn claims_of_different_namespaces_have_different_leases() {
        let client = crate::fixtures::offline_client();
        let claims = Claims::new(client, "system", "twc", "a");
        let one = claims.lease_name(&("temporal:7233".into(), "orders".into()));
        let two = claims.lease_name(&("temporal:7233".into(), "billing".into()));
        assert_ne!(one, two);
        assert!(one.starts_with("twc-ns-") && one.len() == "twc-ns-".len() + 12);
        // The same namespace at another address is another budget.
        assert_ne!(
            one,
            claims.lease_name(&("other:7233".into(), "orders".into()))
        );
    }
}
