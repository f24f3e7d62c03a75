//! The Temporal connect sequence, in one place for every reconciler that talks to Temporal
//! (the worker-deployment observe stage, its deletion cleanup, the owned-resource task-queue
//! lookup): the worker's Connection → its auth Secret → credentials → a pooled client for the
//! worker's Temporal namespace. Read-only (the pool dials at most once per key).

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use crate::api::{ClusterConnection, TemporalConnection, TemporalWorkerDeployment};
use crate::caches::Caches;
use crate::temporal::{self, AuthError, ClientPool, ConnectionKey, TemporalClient, TemporalError};

/// Why no client could be had. Messages are user-facing (they land in conditions) and never
/// include secret material.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// `kind`: `Connection` for a WorkerDeployment, `TemporalConnection` for a
    /// TemporalWorkerDeployment.
    #[error("{kind} {name:?} not found in namespace {namespace:?}")]
    ConnectionNotFound {
        kind: &'static str,
        name: String,
        namespace: String,
    },
    /// A namespaced install (`--watch-namespaces`) neither watches nor may read
    /// cluster-scoped objects (the Go controller's reason and message).
    #[error(
        "ClusterConnection {name:?} cannot be used because the controller is namespace-scoped (it watches only the namespaces of --watch-namespaces, Helm value watchNamespaces): name a Connection in this namespace, or install the controller cluster-wide"
    )]
    ClusterConnectionUnsupported { name: String },
    #[error("ClusterConnection {name:?} not found")]
    ClusterConnectionNotFound { name: String },
    #[error("reading {kind} {name:?}: {source}")]
    ConnectionUnreadable {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {name:?} referenced by the Connection not found in namespace {namespace:?}")]
    SecretNotFound { name: String, namespace: String },
    #[error("reading Secret {name:?}: {source}")]
    SecretUnreadable {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    AuthInvalid(#[from] AuthError),
    /// A Secret of another field than the controller's credentials (`field`): the CA of
    /// `tls.caCertSecretRef`, or `workerCredentials`.
    #[error("{field}: {source}")]
    NamedSecretInvalid {
        field: &'static str,
        #[source]
        source: AuthError,
    },
    #[error(transparent)]
    Claim(#[from] crate::shard::ClaimError),
    #[error("connecting to Temporal at {address}: {source}")]
    ClientCreationFailed {
        address: String,
        #[source]
        source: TemporalError,
    },
}

impl ConnectError {
    /// True when the Connection's credentials are at fault (not the Connection, not Temporal).
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            ConnectError::SecretNotFound { .. }
                | ConnectError::SecretUnreadable { .. }
                | ConnectError::AuthInvalid(_)
                | ConnectError::NamedSecretInvalid { .. }
        )
    }
}

/// Who is connecting, and through which pool.
pub struct Connector<'a> {
    pub kube: &'a kube::Client,
    pub pool: &'a ClientPool,
    pub identity: &'a str,
    pub install_id: &'a str,
    /// Where the Connection and its Secret are read from; `None` reads the API server.
    pub caches: Option<&'a Caches>,
    /// ClusterConnections may be read (a cluster install); a namespaced install refuses them.
    pub cluster_connections: bool,
    /// A sharded install's claims: a Temporal namespace another shard serves is refused
    /// before any call to it (its request budget lives in that shard).
    pub claims: Option<&'a crate::shard::Claims>,
}

/// A connected client and the pool key it came from (to evict it when credentials rotate).
pub struct Connected {
    pub connection: TemporalConnection,
    pub client: TemporalClient,
    pub key: ConnectionKey,
}

impl Connector<'_> {
    /// The whole sequence for `twd`.
    pub async fn connect(&self, twd: &TemporalWorkerDeployment) -> Result<Connected, ConnectError> {
        let ns = twd.namespace().unwrap_or_default();
        let reference = &twd.spec.worker_options.connection_ref;
        if reference.is_cluster() && !self.cluster_connections {
            return Err(ConnectError::ClusterConnectionUnsupported {
                name: reference.name.clone(),
            });
        }
        let cached = match self.caches {
            Some(caches) if caches.ready().await.is_ok() => caches.connection_of(twd),
            _ => None,
        };
        // Not cached (yet): the API server decides whether it exists.
        let connection = match cached {
            Some(c) => c,
            None => connection(self.kube, &ns, twd).await?,
        };
        self.client_for(&ns, connection, twd).await
    }

    /// The sequence from a Connection already read.
    pub async fn client_for(
        &self,
        ns: &str,
        connection: TemporalConnection,
        twd: &TemporalWorkerDeployment,
    ) -> Result<Connected, ConnectError> {
        let secrets: Vec<String> = connection
            .spec
            .secrets()
            .into_iter()
            .map(str::to_string)
            .collect();
        let result = self.dial(ns, connection, twd).await;
        // Credentials (or a CA) that could not connect are read again next time, so that the
        // user's fix of the Secret is seen at once rather than after the reuse period.
        if let (Err(ConnectError::ClientCreationFailed { .. }), Some(caches)) =
            (&result, self.caches)
        {
            for secret in &secrets {
                caches.forget_secret(ns, secret);
            }
        }
        result
    }

    async fn dial(
        &self,
        ns: &str,
        connection: TemporalConnection,
        twd: &TemporalWorkerDeployment,
    ) -> Result<Connected, ConnectError> {
        let temporal_namespace = &twd.spec.worker_options.temporal_namespace;
        if let Some(claims) = self.claims {
            claims
                .check(&connection.spec.host_port, temporal_namespace)
                .await?;
        }
        let key = credentials(self.kube, self.caches, ns, &connection).await?;
        let client = self
            .pool
            .get_or_connect(key.clone(), temporal_namespace, self.identity)
            .await
            .map_err(|source| ConnectError::ClientCreationFailed {
                address: connection.spec.host_port.clone(),
                source,
            })?
            .with_install_id(self.install_id);
        Ok(Connected {
            connection,
            client,
            key,
        })
    }
}

/// The TWD's Connection, if it exists.
pub async fn connection_opt(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<Option<TemporalConnection>, kube::Error> {
    connection_named(
        client,
        ns,
        twd.kind_set(),
        &twd.spec.worker_options.connection_ref,
    )
    .await
}

/// The connection `reference` names for a referrer of kind set `set` in `ns`, if it exists.
pub async fn connection_named(
    client: &kube::Client,
    ns: &str,
    set: crate::api::KindSet,
    reference: &crate::api::connection::ConnectionRef,
) -> Result<Option<TemporalConnection>, kube::Error> {
    if reference.is_cluster() {
        return Ok(Api::<ClusterConnection>::all(client.clone())
            .get_opt(&reference.name)
            .await?
            .map(|c| c.as_connection()));
    }
    // A WorkerDeployment names a Connection, a TemporalWorkerDeployment a TemporalConnection.
    TemporalConnection::api(client.clone(), ns, set)
        .get_opt(&reference.name)
        .await
}

/// The TWD's Connection.
pub async fn connection(
    client: &kube::Client,
    ns: &str,
    twd: &TemporalWorkerDeployment,
) -> Result<TemporalConnection, ConnectError> {
    let reference = &twd.spec.worker_options.connection_ref;
    let name = &reference.name;
    let kind = reference.kind_name(twd.kind_set());
    match connection_opt(client, ns, twd).await {
        Ok(Some(c)) => Ok(c),
        Ok(None) if reference.is_cluster() => {
            Err(ConnectError::ClusterConnectionNotFound { name: name.clone() })
        }
        Ok(None) => Err(ConnectError::ConnectionNotFound {
            kind,
            name: name.clone(),
            namespace: ns.to_string(),
        }),
        Err(source) => Err(ConnectError::ConnectionUnreadable {
            kind,
            name: name.clone(),
            source,
        }),
    }
}

/// The Connection's credentials, read from its Secret in `ns` and checked (the worker
/// deployments' connect sequence and the Connection's own status both use this), with the CA
/// of `tls.caCertSecretRef`; the workers' own credentials (`workerCredentials`) are read and
/// checked too, so that a broken worker Secret is reported before any Pod needs it. For a
/// ClusterConnection `ns` is the worker deployment's namespace, as in the Go controller v1.10:
/// every Secret a ClusterConnection names is read where its user's Pods run.
pub async fn credentials(
    client: &kube::Client,
    caches: Option<&Caches>,
    ns: &str,
    connection: &TemporalConnection,
) -> Result<ConnectionKey, ConnectError> {
    let spec = &connection.spec;
    let mode = spec.auth_mode();
    let secret = read_secret(client, caches, ns, mode.secret()).await?;
    let auth = forget_if_invalid(
        caches,
        ns,
        mode.secret(),
        temporal::auth_from_secret(&mode, secret.as_ref()),
    )?;
    let server_ca = match spec.ca_cert_secret() {
        Some(name) => {
            let secret = read_secret(client, caches, ns, Some(name)).await?;
            let ca = temporal::ca_from_secret(name, secret.as_ref());
            Some(
                forget_if_invalid(caches, ns, Some(name), ca).map_err(|source| {
                    ConnectError::NamedSecretInvalid {
                        field: "tls.caCertSecretRef",
                        source,
                    }
                })?,
            )
        }
        None => None,
    };
    if spec.worker_credentials.is_some() {
        let workers = spec.worker_auth_mode();
        let secret = read_secret(client, caches, ns, workers.secret()).await?;
        let checked = temporal::auth_from_secret(&workers, secret.as_ref());
        forget_if_invalid(caches, ns, workers.secret(), checked).map_err(|source| {
            ConnectError::NamedSecretInvalid {
                field: "workerCredentials",
                source,
            }
        })?;
    }
    Ok(ConnectionKey::new(spec, auth).with_server_ca(server_ca))
}

/// `checked` as it is; when it is an error, Secret `name` is read again next time, so that
/// the user's fix is seen at once.
fn forget_if_invalid<T>(
    caches: Option<&Caches>,
    ns: &str,
    name: Option<&str>,
    checked: Result<T, AuthError>,
) -> Result<T, AuthError> {
    if let (Err(_), Some(caches), Some(name)) = (&checked, caches, name) {
        caches.forget_secret(ns, name);
    }
    checked
}

/// Secret `name` in `ns` (none without a name): an error when it does not exist.
async fn read_secret(
    client: &kube::Client,
    caches: Option<&Caches>,
    ns: &str,
    name: Option<&str>,
) -> Result<Option<Secret>, ConnectError> {
    let Some(name) = name else {
        return Ok(None);
    };
    let read = match caches {
        Some(caches) => caches.secret(client, ns, name).await,
        None => {
            Api::<Secret>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
        }
    };
    match read {
        Ok(Some(s)) => Ok(Some(s)),
        Ok(None) => Err(ConnectError::SecretNotFound {
            name: name.to_string(),
            namespace: ns.to_string(),
        }),
        Err(source) => Err(ConnectError::SecretUnreadable {
            name: name.to_string(),
            source,
        }),
    }
}
