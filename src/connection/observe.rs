//! Observe stage of the Connection reconciler: which worker deployments use the Connection
//! (from the worker-deployment reconciler's cache), what its auth Secret says (the same
//! read and checks as the worker deployments' connect sequence, `src/worker_deployment/connect.rs`),
//! and whether the Temporal frontend answers, asked through the shared client pool only when
//! [`status::check_due`] says so.
//!
//! A cache that has not listed yet is never read: it would look empty, and every Connection
//! would look unused. The pass fails instead and is retried with backoff; it does not wait
//! inside the reconcile (a reconcile waiting on a cache would hold up a graceful shutdown,
//! which waits for in-flight reconciles).

use futures::FutureExt as _;
use jiff::Timestamp;
use kube::ResourceExt;

use crate::api::{KindSet, TemporalConnection, TemporalWorkerDeployment};
use crate::connection::context::ConnectionContext;
use crate::connection::outcome::ConnectionFailure;
use crate::connection::status::{self, Auth, LastCheck, Reach};
use crate::reconciler::connect::{self, ConnectError};
use crate::temporal::{AuthError, ConnectionKey};

/// The Temporal namespace a Connection nobody uses yet is checked under: `GetSystemInfo`
/// names no namespace, this only keys the pooled connection and its budget.
const UNUSED_TEMPORAL_NAMESPACE: &str = "default";

/// What the plan needs.
pub struct Observed {
    /// Names of the worker deployments (of the Connection's kind set, in its namespace) that
    /// name it, being deleted or not.
    pub users: Vec<String>,
    pub auth: Auth,
    /// The reachability check in effect for these credentials: made in this pass
    /// (`fresh`) or remembered from an earlier one. `None` when the credentials are invalid.
    pub check: Option<LastCheck>,
    pub fresh: bool,
    pub now: Timestamp,
}

pub async fn observe(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
) -> Result<Observed, ConnectionFailure> {
    // Set before any Connection reconciler runs (`controller::build`): without them (never in
    // a running controller) the users cannot be known, as before the cache has listed.
    let Some(workers) = ctx.services.workers() else {
        return Err(ConnectionFailure::CacheNotReady);
    };
    match workers.wait_until_ready().now_or_never() {
        Some(Ok(())) => {}
        Some(Err(dropped)) => return Err(ConnectionFailure::CacheUnavailable(dropped)),
        None => return Err(ConnectionFailure::CacheNotReady),
    }
    let candidates = match &ctx.services.shard {
        None => workers.state(),
        Some(_) => every_shards_workers(ctx, conn)
            .await
            .map_err(ConnectionFailure::UsersUnreadable)?,
    };
    let (users, first) = users(&candidates, conn);
    let now = Timestamp::now();
    let unchecked = |auth| Observed {
        users: users.clone(),
        auth,
        check: None,
        fresh: false,
        now,
    };
    let Some(ns) = secrets_namespace(conn, first.as_ref()) else {
        return Ok(unchecked(Auth::Invalid {
            message: NO_USER_FOR_SECRETS.to_string(),
            not_after: None,
        }));
    };
    let temporal_ns = first.map(|u| u.temporal_namespace);
    let key =
        match connect::credentials(&ctx.services.client, ctx.services.caches(), &ns, conn).await {
            Ok(key) => key,
            Err(e) => return Ok(unchecked(invalid(&e))),
        };
    let auth = Auth::Valid {
        fingerprint: key.fingerprint().to_string(),
        not_after: key.auth().cert_not_after(),
    };
    let last = ctx.last_check(conn);
    if !status::check_due(last.as_ref(), key.fingerprint(), now) {
        return Ok(Observed {
            check: last,
            ..unchecked(auth)
        });
    }
    let reach = ask(ctx, conn, key.clone(), temporal_ns.as_deref()).await;
    Ok(Observed {
        check: Some(LastCheck {
            fingerprint: key.fingerprint().to_string(),
            at: now,
            reach,
        }),
        fresh: true,
        ..unchecked(auth)
    })
}

/// Where the Connection's Secrets are read: a Connection's own namespace; a ClusterConnection's
/// in each user's namespace (as the Go controller does), so its own check uses those of its
/// first user. `None`: a ClusterConnection that names Secrets and has no user yet.
fn secrets_namespace(conn: &TemporalConnection, first: Option<&FirstUser>) -> Option<String> {
    match (conn.is_cluster(), first) {
        (false, _) => Some(conn.namespace().unwrap_or_default()),
        (true, Some(user)) => Some(user.namespace.clone()),
        (true, None) if !conn.spec.secrets().is_empty() => None,
        (true, None) => Some(String::new()),
    }
}

/// The message of a ClusterConnection with a Secret that no worker deployment uses yet.
pub const NO_USER_FOR_SECRETS: &str = "no worker deployment uses this ClusterConnection yet: the Secrets it names are read in the namespace of each worker deployment that uses it, so its credentials are checked once one does";

/// The first user of a Connection: whose namespace a ClusterConnection's Secrets are checked
/// in, and whose Temporal namespace the check's pooled connection shares.
pub struct FirstUser {
    pub namespace: String,
    pub temporal_namespace: String,
}

/// A sharded install's view across shards: the worker deployments that may name `conn`, from
/// the API server (the shard's own cache holds only its own). A Connection is checked rarely
/// (its changes, its users' spec changes, the periodic recheck), so this read is too.
async fn every_shards_workers(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
) -> Result<Vec<std::sync::Arc<TemporalWorkerDeployment>>, kube::Error> {
    let sets = if conn.is_cluster() {
        KindSet::ALL.to_vec()
    } else {
        vec![conn.kind_set()]
    };
    let ns = (!conn.is_cluster()).then(|| conn.namespace()).flatten();
    let mut out = Vec::new();
    for set in sets {
        let api = crate::caches::reflect::api_in_set::<TemporalWorkerDeployment>(
            &ctx.services.client,
            &ns,
            set,
        );
        out.extend(
            api.list(&Default::default())
                .await?
                .items
                .into_iter()
                .map(|mut t| {
                    crate::api::kinds::Stamped::stamp(&mut t, set);
                    std::sync::Arc::new(t)
                }),
        );
    }
    Ok(out)
}

/// The users' names (`namespace/name` for a ClusterConnection, used from every namespace and
/// both kind sets), sorted, and the first of them.
fn users(
    candidates: &[std::sync::Arc<TemporalWorkerDeployment>],
    conn: &TemporalConnection,
) -> (Vec<String>, Option<FirstUser>) {
    let cluster = conn.is_cluster();
    // References resolve within a kind set: a Connection is used by WorkerDeployments, a
    // TemporalConnection by TemporalWorkerDeployments.
    let mut users: Vec<(String, FirstUser)> = candidates
        .iter()
        .filter(|t| crate::reconciler::finalizers::uses(t, conn))
        .map(|t| {
            let namespace = t.namespace().unwrap_or_default();
            let name = if cluster {
                format!("{namespace}/{}", t.name_any())
            } else {
                t.name_any()
            };
            let first = FirstUser {
                namespace,
                temporal_namespace: t.spec.worker_options.temporal_namespace.clone(),
            };
            (name, first)
        })
        .collect();
    users.sort_by(|a, b| a.0.cmp(&b.0));
    users.dedup_by(|a, b| a.0 == b.0);
    let mut names = Vec::with_capacity(users.len());
    let mut first = None;
    for (name, user) in users {
        if first.is_none() {
            first = Some(user);
        }
        names.push(name);
    }
    (names, first)
}

/// The credentials' failure as the status shows it; an expired certificate keeps its expiry.
fn invalid(e: &ConnectError) -> Auth {
    let not_after = match e {
        ConnectError::AuthInvalid(AuthError::CertExpiring { not_after, .. }) => Some(*not_after),
        _ => None,
    };
    Auth::Invalid {
        message: e.to_string(),
        not_after,
    }
}

/// One `GetSystemInfo` through the pooled connection (dialled once per credentials and
/// Temporal namespace, shared with the worker deployments' reconciles).
async fn ask(
    ctx: &ConnectionContext,
    conn: &TemporalConnection,
    key: ConnectionKey,
    temporal_ns: Option<&str>,
) -> Reach {
    let address = conn.spec.host_port.clone();
    let temporal_ns = temporal_ns.unwrap_or(UNUSED_TEMPORAL_NAMESPACE);
    let client = match ctx
        .services
        .pool
        .get_or_connect(key, temporal_ns, &ctx.services.identity)
        .await
    {
        Ok(c) => c,
        Err(source) => {
            return Reach::Failed(
                ConnectError::ClientCreationFailed { address, source }.to_string(),
            );
        }
    };
    match client.system_info().await {
        Ok(()) => Reach::Answered,
        Err(e) => Reach::Failed(format!("asking Temporal at {address}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_certificate_keeps_its_expiry_and_other_failures_have_none() {
        let t = Timestamp::from_second(1_600_000_000).expect("time");
        let expired = ConnectError::AuthInvalid(AuthError::CertExpiring {
            name: "m".into(),
            not_after: t,
        });
        assert!(
            matches!(invalid(&expired), Auth::Invalid { not_after: Some(n), message } if n == t && message.contains("expires at"))
        );
        let missing = ConnectError::AuthInvalid(AuthError::MissingKey {
            name: "m".into(),
            key: "tls.key".into(),
        });
        assert!(matches!(
            invalid(&missing),
            Auth::Invalid { not_after: None, message } if message.contains("tls.key")
        ));
    }
}
