//! `TemporalConnection` (`tconn`): how to reach a Temporal frontend.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(
    CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema,
)]
#[kube(
    group = "temporal.io",
    version = "v1alpha1",
    kind = "TemporalConnection",
    root = "TemporalConnectionCrd",
    plural = "temporalconnections",
    shortname = "tconn",
    category = "temporal",
    namespaced,
    status = "TemporalConnectionStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Host","type":"string","jsonPath":".spec.hostPort"}"#,
    // A string, not a date: kubectl shows a date as an age, and a future one as `<invalid>`.
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".status.clientCertificate.notAfter"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!(has(self.mutualTLSSecretRef) && has(self.apiKeySecretRef))", "message": "Only one of mutualTLSSecretRef or apiKeySecretRef may be set"},
    // The Go controller v1.10's rule and message (its PR #546).
    {"rule": "!(has(self.mutualTLSSecretRef) && has(self.tls) && has(self.tls.caCertSecretRef))", "message": "tls.caCertSecretRef cannot be combined with mutualTLSSecretRef; bundle the CA into that secret's own ca.crt key instead"},
    {"rule": WORKERS_CA_NEEDS_MTLS_RULE, "message": WORKERS_CA_NEEDS_MTLS_MESSAGE},
    {"rule": "!(has(self.tls) && has(self.tls.caCertSecretRef) && has(self.tls.workersTrustMutualTLSCA) && self.tls.workersTrustMutualTLSCA)", "message": "set tls.caCertSecretRef or tls.workersTrustMutualTLSCA, not both: a worker takes one server CA file"}
]))]
pub struct TemporalConnectionSpec {
    /// Temporal frontend `host:port`, without scheme.
    // The pattern is the Go controller's; the rule adds what it lets through (a port over
    // 65535 or 0), which would otherwise only fail, and be retried forever, at connect time.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9.-]+:[0-9]+$"), length(max = 260))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": HOST_PORT_RULE, "message": HOST_PORT_MESSAGE}]))]
    pub host_port: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsOptions>,
    /// Secret of type `kubernetes.io/tls` with the client certificate (and optional `ca.crt`).
    #[serde(
        default,
        rename = "mutualTLSSecretRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub mutual_tls_secret_ref: Option<SecretRef>,
    /// Secret key holding a Temporal API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretKeyRef>,
    /// Credentials of the worker Pods, when they must not be the controller's (Go issue #578):
    /// the worker Pods get this Secret instead of `mutualTLSSecretRef` / `apiKeySecretRef`,
    /// which then reach the controller only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_credentials: Option<WorkerCredentials>,
}

/// CEL: `tls.workersTrustMutualTLSCA` needs an mTLS Secret mounted into the worker Pods.
pub const WORKERS_CA_NEEDS_MTLS_RULE: &str = "!(has(self.tls) && has(self.tls.workersTrustMutualTLSCA) && self.tls.workersTrustMutualTLSCA) || (has(self.workerCredentials) ? has(self.workerCredentials.mutualTLSSecretRef) : has(self.mutualTLSSecretRef))";
pub const WORKERS_CA_NEEDS_MTLS_MESSAGE: &str = "tls.workersTrustMutualTLSCA gives the workers the ca.crt of their mTLS Secret, so the workers need one: mutualTLSSecretRef, or workerCredentials.mutualTLSSecretRef when workerCredentials is set";

/// The worker Pods' own credentials: exactly one of an mTLS Secret or an API key.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.mutualTLSSecretRef) != has(self.apiKeySecretRef)", "message": "workerCredentials needs exactly one of mutualTLSSecretRef or apiKeySecretRef"}
]))]
pub struct WorkerCredentials {
    /// Secret (`kubernetes.io/tls` or Opaque) with the workers' client certificate.
    #[serde(
        default,
        rename = "mutualTLSSecretRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub mutual_tls_secret_ref: Option<SecretRef>,
    /// Secret key holding the workers' Temporal API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretKeyRef>,
}

/// CEL: the port of `hostPort` is 1 to 65535 (its digits are checked by the pattern first).
pub const HOST_PORT_RULE: &str = "self.matches('^[^:]+:0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$')";
pub const HOST_PORT_MESSAGE: &str = "hostPort must end in a port from 1 to 65535";

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-zA-Z0-9.-]+$"))]
    pub server_name: Option<String>,
    /// The Go controller v1.10's private CA (its PR #546): a Secret (Opaque or
    /// `kubernetes.io/tls`) whose `ca.crt` the controller adds to the system roots, and which
    /// the worker Pods get as their server CA (`TEMPORAL_TLS_SERVER_CA_CERT_PATH`, which
    /// replaces their system roots). For API-key and no-credential connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert_secret_ref: Option<SecretRef>,
    /// Opt-in: the worker Pods also get the `ca.crt` of the mTLS Secret they mount as their
    /// server CA. Off by default: that CA replaces their system roots, and cert-manager writes
    /// the client certificate's issuer there, which would make workers refuse Temporal Cloud.
    #[serde(
        default,
        rename = "workersTrustMutualTLSCA",
        skip_serializing_if = "Option::is_none"
    )]
    pub workers_trust_mutual_tls_ca: Option<bool>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub struct SecretRef {
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub struct SecretKeyRef {
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub key: String,
}

/// Status: written by the Connection reconciler (`src/connection/`) only when it changes. A
/// Connection without status (not yet looked at) has nothing to wait for: kstatus and the Argo
/// CD check read it as Current/Healthy, unlike a worker deployment.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemporalConnectionStatus {
    /// The generation the conditions were computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (the Secret is valid and the Temporal frontend answers), `Reconciling` and
    /// `Stalled`, the kstatus pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The mTLS client certificate, when the Connection uses one and it can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<ClientCertificateStatus>,
    /// Names of the worker deployments (of this kind set, in this namespace) that use this
    /// Connection, sorted; at most [`MAX_LISTED_WORKERS`], `workerDeploymentCount` has them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_deployments: Vec<String>,
    /// How many worker deployments use this Connection.
    #[serde(default)]
    pub worker_deployment_count: i32,
}

/// The most worker deployment names a Connection's status lists (the count has them all), so
/// that a Connection shared by thousands of workers keeps a small status.
pub const MAX_LISTED_WORKERS: usize = 50;

/// What the controller read from the client certificate in the mTLS Secret.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientCertificateStatus {
    /// `notAfter` of the client certificate (`tls.crt`), RFC 3339.
    pub not_after: Time,
    /// The certificate expires within the controller's warning window
    /// (`--certificate-expiry-warning`, 14 days by default).
    #[serde(default)]
    pub expiring_soon: bool,
}

/// A connection, served as `Connection` and as `TemporalConnection` (see
/// [`crate::api::kinds`]); `TemporalConnectionCrd` exists only to generate the schema.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TemporalConnection {
    // Read without them (a manifest built in code), an object is of the seed kind.
    #[serde(default = "crate::api::kinds::default_api_version")]
    pub api_version: String,
    #[serde(default = "crate::api::kinds::default_connection_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub spec: TemporalConnectionSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TemporalConnectionStatus>,
}

crate::api::kinds::served_model!(
    TemporalConnection,
    TemporalConnectionSpec,
    TemporalConnectionStatus,
    crate::api::kinds::Model::Connection
);

/// How workers and the controller authenticate to Temporal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthMode<'a> {
    Plain,
    MutualTls { secret: &'a str },
    ApiKey { secret: &'a str, key: &'a str },
}

impl<'a> AuthMode<'a> {
    /// The Secret the credentials come from, if any.
    pub fn secret(&self) -> Option<&'a str> {
        match self {
            AuthMode::Plain => None,
            AuthMode::MutualTls { secret } | AuthMode::ApiKey { secret, .. } => Some(secret),
        }
    }
}

impl TemporalConnectionSpec {
    pub fn auth_mode(&self) -> AuthMode<'_> {
        if let Some(r) = &self.mutual_tls_secret_ref {
            AuthMode::MutualTls { secret: &r.name }
        } else if let Some(r) = &self.api_key_secret_ref {
            AuthMode::ApiKey {
                secret: &r.name,
                key: &r.key,
            }
        } else {
            AuthMode::Plain
        }
    }

    pub fn server_name(&self) -> Option<&str> {
        self.tls.as_ref().and_then(|t| t.server_name.as_deref())
    }

    /// The Secret of `tls.caCertSecretRef`, if set.
    pub fn ca_cert_secret(&self) -> Option<&str> {
        self.tls
            .as_ref()
            .and_then(|t| t.ca_cert_secret_ref.as_ref())
            .map(|r| r.name.as_str())
    }

    /// The credentials the worker Pods get: `workerCredentials` when set, else the
    /// controller's own.
    pub fn worker_auth_mode(&self) -> AuthMode<'_> {
        let Some(w) = &self.worker_credentials else {
            return self.auth_mode();
        };
        if let Some(r) = &w.mutual_tls_secret_ref {
            AuthMode::MutualTls { secret: &r.name }
        } else if let Some(r) = &w.api_key_secret_ref {
            AuthMode::ApiKey {
                secret: &r.name,
                key: &r.key,
            }
        } else {
            AuthMode::Plain
        }
    }

    /// The Secret whose `ca.crt` the worker Pods verify the frontend with, and how they reach
    /// it: `tls.caCertSecretRef`, else (opt-in) their own mTLS Secret.
    pub fn worker_server_ca(&self) -> Option<WorkerServerCa<'_>> {
        if let Some(name) = self.ca_cert_secret() {
            return Some(WorkerServerCa::CaSecret(name));
        }
        let opted_in = self
            .tls
            .as_ref()
            .and_then(|t| t.workers_trust_mutual_tls_ca)
            .unwrap_or(false);
        match self.worker_auth_mode() {
            AuthMode::MutualTls { secret } if opted_in => {
                Some(WorkerServerCa::MutualTlsSecret(secret))
            }
            _ => None,
        }
    }

    /// Every Secret this connection names (credentials, CA, the workers' credentials), each
    /// once.
    pub fn secrets(&self) -> Vec<&str> {
        let mut out: Vec<&str> = [
            self.auth_mode().secret(),
            self.ca_cert_secret(),
            self.worker_credentials
                .as_ref()
                .and_then(|_| self.worker_auth_mode().secret()),
        ]
        .into_iter()
        .flatten()
        .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Where a worker Pod's server CA comes from ([`TemporalConnectionSpec::worker_server_ca`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerServerCa<'a> {
    /// The Secret of `tls.caCertSecretRef`, mounted on its own.
    CaSecret(&'a str),
    /// The `ca.crt` of the worker's mTLS Secret, already mounted with the client certificate.
    MutualTlsSecret(&'a str),
}

/// The kind name of the cluster-scoped connection.
pub const CLUSTER_CONNECTION_KIND: &str = "ClusterConnection";
/// Its resource (plural) name.
pub const CLUSTER_CONNECTIONS: &str = "clusterconnections";

/// `ClusterConnection`: the Go controller v1.10's cluster-scoped connection (its
/// `api/v1alpha1/clusterconnection_types.go`): the spec and status of a Connection, usable by
/// worker deployments of both kind sets in every namespace (`connectionRef.kind:
/// ClusterConnection`). As in the Go controller, every Secret it names is read in the
/// namespace of the worker deployment that uses it (worker Pods can mount only Secrets of their
/// own namespace). Its CRD is made from the Connection CRD ([`cluster_connection_crd`]).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConnection {
    #[serde(default = "crate::api::kinds::default_api_version")]
    pub api_version: String,
    #[serde(default = "default_cluster_connection_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub spec: TemporalConnectionSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TemporalConnectionStatus>,
}

fn default_cluster_connection_kind() -> String {
    CLUSTER_CONNECTION_KIND.to_string()
}

impl ClusterConnection {
    pub fn new(name: &str, spec: TemporalConnectionSpec) -> Self {
        Self {
            api_version: crate::api::kinds::default_api_version(),
            kind: default_cluster_connection_kind(),
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }

    /// The same object as the Connection model reads it: one plan, one status, one set of
    /// rules for both scopes. The view has no namespace and keeps the kind
    /// `ClusterConnection` ([`TemporalConnection::is_cluster`]).
    pub fn as_connection(&self) -> TemporalConnection {
        TemporalConnection {
            api_version: self.api_version.clone(),
            kind: CLUSTER_CONNECTION_KIND.to_string(),
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
            status: self.status.clone(),
        }
    }
}

impl kube::Resource for ClusterConnection {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(CLUSTER_CONNECTION_KIND)
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(crate::api::GROUP)
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(crate::api::VERSION)
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(CLUSTER_CONNECTIONS)
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

impl TemporalConnection {
    /// True for the view of a `ClusterConnection` ([`ClusterConnection::as_connection`]).
    pub fn is_cluster(&self) -> bool {
        self.kind == CLUSTER_CONNECTION_KIND
    }

    /// The object reference events use: the `ClusterConnection` itself for a view of one.
    pub fn event_reference(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        if self.is_cluster() {
            k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some(self.api_version.clone()),
                kind: Some(CLUSTER_CONNECTION_KIND.to_string()),
                name: self.metadata.name.clone(),
                uid: self.metadata.uid.clone(),
                resource_version: self.metadata.resource_version.clone(),
                ..Default::default()
            }
        } else {
            self.reference()
        }
    }
}

/// The `ClusterConnection` CRD: the canonical Connection CRD (`connection`) under the cluster
/// kind's names, cluster-scoped, so that the schema is the same by construction.
pub fn cluster_connection_crd(
    connection: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let mut crd = connection.clone();
    crd.metadata.name = Some(format!("{CLUSTER_CONNECTIONS}.{}", crate::api::GROUP));
    crd.spec.scope = "Cluster".to_string();
    let names = &mut crd.spec.names;
    names.kind = CLUSTER_CONNECTION_KIND.to_string();
    names.list_kind = Some(format!("{CLUSTER_CONNECTION_KIND}List"));
    names.plural = CLUSTER_CONNECTIONS.to_string();
    names.singular = Some(CLUSTER_CONNECTION_KIND.to_lowercase());
    names.short_names = None;
    crd
}

/// `workerOptions.connectionRef`: the Go controller v1.10's `{name, kind}` (its PR #549).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ConnectionRef {
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 253))]
    pub name: String,
    /// `TemporalConnection` (the default) or `ClusterConnection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "connection_ref_kind_schema")]
    pub kind: Option<ConnectionRefKind>,
}

/// What a `connectionRef.kind` names. On a `WorkerDeployment` the schema admits `Connection`
/// and `ClusterConnection`, on a `TemporalWorkerDeployment` `TemporalConnection` and
/// `ClusterConnection` (the canonical CRD is made from the seed one by renaming the seed
/// kinds); either way an unset kind is the namespaced connection kind of the object's set,
/// as in the Go controller, which treats an empty kind as `Connection`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnectionRefKind {
    /// The namespaced connection of the referrer's kind set, by its canonical name.
    Connection,
    /// The same, by its seed name.
    TemporalConnection,
    /// The cluster-scoped `ClusterConnection`.
    ClusterConnection,
}

fn connection_ref_kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "description": "TemporalConnection (the default: in this namespace) or ClusterConnection (cluster-scoped; its Secrets are read in this namespace).",
        "enum": ["TemporalConnection", "ClusterConnection"]
    })
}

impl ConnectionRef {
    /// A reference to the namespaced connection `name`.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            kind: None,
        }
    }

    /// True when it names a cluster-scoped `ClusterConnection`.
    pub fn is_cluster(&self) -> bool {
        self.kind == Some(ConnectionRefKind::ClusterConnection)
    }

    /// The kind it names, for a referrer of `set`: the set's connection kind or
    /// `ClusterConnection`.
    pub fn kind_name(&self, set: crate::api::KindSet) -> &'static str {
        if self.is_cluster() {
            crate::api::connection::CLUSTER_CONNECTION_KIND
        } else {
            set.kind(crate::api::Model::Connection)
        }
    }
}
