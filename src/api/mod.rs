//! Custom resource types served under `temporal.io/v1alpha1`.
//!
//! These are the only Kubernetes-facing types the controller defines; the planner works on
//! its own model (the planner's `model` module) so that rollout rules never depend on serde shapes.

pub mod adopt;
pub mod conditions;
pub mod connection;
pub mod duration;
pub mod kinds;
pub mod twd;
pub mod twd_status;
pub mod twor;

pub use connection::{ClusterConnection, TemporalConnection, TemporalConnectionSpec};
pub use kinds::{KindSet, Model};
pub use twd::{
    TemporalWorkerDeployment, TemporalWorkerDeploymentSpec, TemporalWorkerDeploymentStatus,
};
pub use twor::{
    TemporalWorkerOwnedResource, TemporalWorkerOwnedResourceSpec, TemporalWorkerOwnedResourceStatus,
};

/// API group of every kind we serve.
pub const GROUP: &str = "temporal.io";
/// The only served version.
pub const VERSION: &str = "v1alpha1";
/// Finalizer placed on TWDs (Temporal cleanup) and on Connections in use.
pub const FINALIZER: &str = "temporal.io/delete-protection";
/// Label carrying the TWD's Kubernetes name on versioned Deployments and pods.
pub const LABEL_DEPLOYMENT_NAME: &str = "temporal.io/deployment-name";
/// Label carrying the build ID on versioned Deployments and pods.
pub const LABEL_BUILD_ID: &str = "temporal.io/build-id";
/// Label carrying the owning TemporalWorkerOwnedResource's name on each per-version copy.
pub const LABEL_OWNED_RESOURCE: &str = "temporal.io/owned-resource";
/// Kubernetes' revision of a Deployment's pod template: `1` when created, one more per
/// template change.
pub const ANNOTATION_REVISION: &str = "deployment.kubernetes.io/revision";
/// Pod-template annotation: hash of the user's template (drift detection for custom build IDs).
pub const ANNOTATION_POD_TEMPLATE_HASH: &str = "temporal.io/pod-template-spec-hash";
/// Pod-template annotation: hash of the connection settings injected into the pods.
pub const ANNOTATION_CONNECTION_HASH: &str = "temporal.io/connection-spec-hash";
/// Pod-template annotation: the Connection the version's settings come from, `<Kind>/<name>`
/// (`Connection/prod`, `ClusterConnection/shared`). Written with the settings, so the two never
/// disagree; a `connectionRef` change moves only the target and the Current version to the new
/// Connection, the other versions keep this one (`planner::drift`).
pub const ANNOTATION_CONNECTION_REF: &str = "temporal.io/connection-ref";
/// One-shot action on the TWD: promote the build ID named in the value now, skipping the
/// remaining steps and gates (still only once it has ready pollers). Never removed by the
/// controller; `status.rolloutControl.promoted` records the value acted on.
pub const ANNOTATION_PROMOTE: &str = "temporal.io/promote";
/// One-shot action on the TWD: `<buildID>/<step>` ends that step (its number, from 1, as
/// `status.targetVersion.currentStep`) of that build now. Recorded in
/// `status.rolloutControl.skippedStep`.
pub const ANNOTATION_SKIP_STEP: &str = "temporal.io/skip-step";
/// One-shot action on the TWD: `<buildID>` (or `<buildID>/<anything>`, to retry the same build
/// again later) clears the recorded progress-deadline failure of that build and starts its
/// deadline afresh. Recorded in `status.rolloutControl.retried`.
pub const ANNOTATION_RETRY: &str = "temporal.io/retry";
/// One-shot action on the TWD: `<buildID>` (or `<buildID>/<anything>`, to restart the same
/// build again later) rolls that version's Pods in place, as `kubectl rollout restart` does,
/// keeping its build ID and routing. Recorded in `status.rolloutControl.restarted`. The same
/// key on a versioned Deployment's pod template carries the value whose restart its Pods are:
/// writing it rolls them, and writing the same value again changes nothing, so a restart
/// happens once however often a reconcile repeats. It is outside the user's template, so it
/// changes neither the build ID nor the drift hash.
pub const ANNOTATION_RESTART: &str = "temporal.io/restart";
/// Versioned Deployment annotation: when [`ANNOTATION_RESTART`] last restarted its Pods
/// (kubectl writes `kubectl.kubernetes.io/restartedAt` on the pod template instead).
pub const ANNOTATION_RESTARTED_AT: &str = "temporal.io/restartedAt";
/// WorkerDeployment annotation: `"true"` exports the per-version backlog metrics of this
/// worker even when nothing visible consumes them (an HPA on the external metric defined
/// elsewhere), `"false"` never (the backlog poller's `consumed` rule).
pub const ANNOTATION_BACKLOG_METRICS: &str = "temporal.io/backlog-metrics";
/// Version metadata key naming the controller identity that manages a version.
pub const METADATA_CONTROLLER: &str = "temporal.io/controller";
/// Version metadata key carrying the controller version.
pub const METADATA_CONTROLLER_VERSION: &str = "temporal.io/controller-version";

/// Env vars the controller injects into every container; users may not set them.
pub const ENV_ADDRESS: &str = "TEMPORAL_ADDRESS";
pub const ENV_NAMESPACE: &str = "TEMPORAL_NAMESPACE";
pub const ENV_DEPLOYMENT_NAME: &str = "TEMPORAL_DEPLOYMENT_NAME";
pub const ENV_BUILD_ID: &str = "TEMPORAL_WORKER_BUILD_ID";
pub const ENV_TLS: &str = "TEMPORAL_TLS";
pub const ENV_TLS_SERVER_NAME: &str = "TEMPORAL_TLS_SERVER_NAME";
pub const ENV_TLS_CLIENT_CERT_PATH: &str = "TEMPORAL_TLS_CLIENT_CERT_PATH";
pub const ENV_TLS_CLIENT_KEY_PATH: &str = "TEMPORAL_TLS_CLIENT_KEY_PATH";
pub const ENV_API_KEY: &str = "TEMPORAL_API_KEY";
/// All reserved env names, for validation.
pub const RESERVED_ENV: &[&str] = &[
    ENV_ADDRESS,
    ENV_NAMESPACE,
    ENV_DEPLOYMENT_NAME,
    ENV_BUILD_ID,
    ENV_TLS,
    ENV_TLS_SERVER_NAME,
    ENV_TLS_CLIENT_CERT_PATH,
    ENV_TLS_CLIENT_KEY_PATH,
    ENV_API_KEY,
];
/// Volume name and mount path for the mTLS client certificate.
pub const TLS_VOLUME: &str = "temporal-tls";
pub const TLS_MOUNT_PATH: &str = "/etc/temporal/tls";
/// The SDKs' environment configuration (temporalio-common `envconfig`): the file (or PEM) of
/// the CA a worker verifies the frontend with, instead of its system roots. Injected only when
/// the Connection gives the workers a CA, and never over a container's own setting of either
/// (a CA wired by hand before the Connection could do it keeps working), so not reserved.
pub const ENV_TLS_SERVER_CA_CERT_PATH: &str = "TEMPORAL_TLS_SERVER_CA_CERT_PATH";
pub const ENV_TLS_SERVER_CA_CERT_DATA: &str = "TEMPORAL_TLS_SERVER_CA_CERT_DATA";
/// Volume name and mount path for the `ca.crt` of `tls.caCertSecretRef` (that key only).
pub const CA_VOLUME: &str = "temporal-tls-ca";
pub const CA_MOUNT_PATH: &str = "/etc/temporal/tls-ca";
