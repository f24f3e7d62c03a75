//! Take-over: starting where another controller ran (the Go temporal-worker-controller v1.8.1,
//! or this controller under an earlier identity) without restarting a worker or creating a
//! Temporal version. See "Take-over" in `docs/architecture.md`.
//!
//! Three problems, three rules, all pure:
//!
//! 1. **Build IDs.** The predecessor named its versions with its own scheme (v1.8.1: image tag
//!    plus four characters of an FNV hash of Go's JSON of the pod template). We never recompute
//!    it. A WorkerDeployment's spec is *unchanged* since the predecessor last rendered it when
//!    the predecessor's own status says so: its conditions carry the `metadata.generation` they
//!    were computed for, and [`predecessor_target`] trusts `status.targetVersion.buildID` only
//!    when that generation is the current one and the condition's reason is one the predecessor
//!    writes after computing the target from the spec. The take-over then records, on that
//!    version's Deployment (metadata only: no Pod is touched), our own hash of the spec's pod
//!    template ([`template_adoption`]); from then on [`adopted_target`] finds the version from
//!    that record, across our restarts, and a spec change gets a new build ID our way.
//! 2. **Spec hashes.** Both controllers annotate the pod template with
//!    `temporal.io/pod-template-spec-hash` and `temporal.io/connection-spec-hash`, hashed
//!    differently, and our drift rules compare them. Rather than rewrite the annotation (which
//!    rolls every Pod), a Deployment-level annotation records our hash and the pod-template
//!    value it stands for ([`HashRecord`]); [`effective`] reads the pair, and the record lapses
//!    by itself once anything re-renders the pod template. The predecessor's connection hash
//!    is simple enough to compute exactly ([`crate::build_id::go_connection_hash`]), so a
//!    Deployment whose Pods carry the current Connection the predecessor's way is adopted by the
//!    drift rules at any time, and one whose Connection changed is rolled as usual.
//! 3. **Identity.** Temporal's routing manager is the predecessor's identity. [`manager_role`]
//!    tells a predecessor (taken over: the manager identity is claimed) from a human or another
//!    live install of this controller (yielded to).

use crate::api::twd::TemporalWorkerDeploymentStatus;
pub use crate::planner::model::{Adoption, HashRecord, Succession};
use crate::planner::model::{Desired, ObservedDeployment};
use crate::temporal::state::RoutingInstall;

/// Deployment annotation: our hash of the user's pod template, standing for the pod-template
/// annotation written by the controller we took over from (see [`HashRecord`]).
pub const ANNOTATION_ADOPTED_POD_TEMPLATE_HASH: &str = "temporal.io/adopted-pod-template-spec-hash";
/// Deployment annotation: our hash of the Connection, standing for the predecessor's.
pub const ANNOTATION_ADOPTED_CONNECTION_HASH: &str = "temporal.io/adopted-connection-spec-hash";

/// Reasons of the Go controller's `Ready` condition that it writes only after computing
/// `status.targetVersion` from the spec of the generation in `observedGeneration`. Its other
/// blocking reasons (`InvalidSpec`, `ConnectionNotFound`, `AuthSecretInvalid`,
/// `TemporalClientCreationFailed`, `TemporalStateFetchFailed`) are written with the current
/// generation on top of an older `targetVersion`.
pub const PREDECESSOR_FRESH_REASONS: &[&str] = &[
    "RolloutComplete",
    "Ramping",
    "WaitingForPromotion",
    "WaitingForPollers",
    "PlanGenerationFailed",
    "PlanExecutionFailed",
];

/// The Go controller's default identity before v1.x appended its namespace's UID, and this
/// controller's own default before it did the same: a predecessor by default.
pub const LEGACY_IDENTITY: &str = "temporal-worker-controller";

/// Default predecessor identity patterns: the legacy bare identity and the Go controller's
/// `$CONTROLLER_IDENTITY/<UID of its namespace>`.
pub const DEFAULT_PREDECESSORS: &[&str] = &[LEGACY_IDENTITY, "*/<uuid>"];

const REPLACES: &str = ";replaces=";

impl HashRecord {
    pub fn parse(value: &str) -> Option<HashRecord> {
        let (ours, replaces) = value.split_once(REPLACES)?;
        (!ours.is_empty()).then(|| HashRecord {
            ours: ours.to_string(),
            replaces: replaces.to_string(),
        })
    }

    pub fn annotation_value(&self) -> String {
        format!("{}{REPLACES}{}", self.ours, self.replaces)
    }
}

/// The hash the drift rules compare, and whether it comes from a record: the record's own
/// hash while the pod template still carries the value it replaced (a missing annotation
/// counts as empty), else the pod template's annotation.
pub fn effective(pod_annotation: Option<&str>, record: Option<&str>) -> (Option<String>, bool) {
    match record.and_then(HashRecord::parse) {
        Some(r) if r.replaces == pod_annotation.unwrap_or("") => (Some(r.ours), true),
        _ => (pod_annotation.map(str::to_string), false),
    }
}

/// The predecessor's build ID for the current spec, when its status can be trusted to say so:
/// written by the predecessor (no top-level `observedGeneration`, which this controller always
/// writes), with a `Ready` condition computed for `generation` after the target was (see
/// [`PREDECESSOR_FRESH_REASONS`]).
pub fn predecessor_target(
    generation: Option<i64>,
    status: Option<&TemporalWorkerDeploymentStatus>,
) -> Option<String> {
    let status = status?;
    if status.observed_generation.is_some() {
        return None;
    }
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
    let fresh = ready.observed_generation.is_some()
        && ready.observed_generation == generation
        && PREDECESSOR_FRESH_REASONS.contains(&ready.reason.as_str());
    let build = &status.target_version.as_ref()?.version.build_id;
    (fresh && !build.is_empty()).then(|| build.clone())
}

fn live(deployments: &[ObservedDeployment]) -> impl Iterator<Item = &ObservedDeployment> {
    deployments.iter().filter(|d| !d.deleting)
}

/// The target when a version was adopted for this very pod template (rule 1): the newest live
/// Deployment whose template record matches the spec's hash. `None` under a custom build ID
/// (the ID is the spec's) or when the computed build ID already has a Deployment.
pub fn adopted_target(desired: &Desired, deployments: &[ObservedDeployment]) -> Option<String> {
    if desired.custom_build_id || live(deployments).any(|d| d.build_id == desired.build_id) {
        return None;
    }
    live(deployments)
        .filter(|d| {
            d.template_adopted
                && d.pod_template_hash.as_deref() == Some(desired.pod_template_hash.as_str())
        })
        .max_by(|a, b| a.created_at.cmp(&b.created_at))
        .map(|d| d.build_id.clone())
}

/// The template record to write on the predecessor's target (rule 1), given the build ID its
/// trusted status names ([`predecessor_target`]): only while that Deployment exists and does
/// not already read as this spec, and, without a custom build ID, while our computed build ID
/// has no Deployment of its own (it would be the target).
pub fn template_adoption(
    desired: &Desired,
    deployments: &[ObservedDeployment],
    predecessor: &str,
) -> Option<Adoption> {
    if desired.custom_build_id && predecessor != desired.build_id {
        return None;
    }
    if !desired.custom_build_id && live(deployments).any(|d| d.build_id == desired.build_id) {
        return None;
    }
    let d = live(deployments)
        .filter(|d| d.build_id == predecessor)
        .max_by(|a, b| a.created_at.cmp(&b.created_at))?;
    if d.pod_template_hash.as_deref() == Some(desired.pod_template_hash.as_str()) {
        return None;
    }
    Some(Adoption {
        name: d.name.clone(),
        build_id: d.build_id.clone(),
        template: Some(HashRecord {
            ours: desired.pod_template_hash.clone(),
            replaces: d.pod_template_hash.clone().unwrap_or_default(),
        }),
        connection: None,
    })
}

/// The connection record for a Deployment whose Pods carry `wanted` (our hash of the current
/// Connection) the predecessor's way (`predecessor_hash`, its hash of the same Connection):
/// `None` when it already reads as `wanted`, or carries anything else (a real change: rolled).
pub fn connection_adoption(
    d: &ObservedDeployment,
    wanted: &str,
    predecessor_hash: &str,
) -> Option<HashRecord> {
    let current = d.connection_hash.as_deref()?;
    if wanted.is_empty() || predecessor_hash.is_empty() || current == wanted {
        return None;
    }
    (current == predecessor_hash).then(|| HashRecord {
        ours: wanted.to_string(),
        replaces: current.to_string(),
    })
}

// --- Identity ---------------------------------------------------------------------------------

impl Default for Succession {
    fn default() -> Self {
        Succession {
            earlier_own: Vec::new(),
            predecessors: DEFAULT_PREDECESSORS.iter().map(|p| p.to_string()).collect(),
        }
    }
}

impl Succession {
    /// Whether `identity` is one this controller may take routing over from (before looking at
    /// what it recorded in Temporal).
    pub fn may_succeed(&self, identity: &str) -> bool {
        !identity.is_empty()
            && (self.earlier_own.iter().any(|e| e == identity)
                || self.predecessors.iter().any(|p| matches(p, identity)))
    }
}

/// What the routing manager in Temporal is to this controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagerRole {
    /// Nobody manages routing: claim it.
    Unclaimed,
    /// This controller, under its identity.
    Us,
    /// A predecessor, or this controller under an earlier identity: claim it and go on.
    Predecessor,
    /// A human or another live install of this controller: yield.
    Elsewhere,
}

/// Classifies Temporal's `manager`. `last_modifier` and `recorded` tell a predecessor from
/// another install of this controller that happens to match a predecessor pattern (ours is
/// `<identity>/<uuid>` too): only this controller records its install ID on the versions it
/// routes to, so a record by the manager's own last write that is not ours means another
/// install, which is yielded to.
pub fn manager_role(
    manager: &str,
    identity: &str,
    install_id: &str,
    succession: &Succession,
    last_modifier: &str,
    recorded: Option<&RoutingInstall>,
) -> ManagerRole {
    if manager.is_empty() {
        return ManagerRole::Unclaimed;
    }
    if manager == identity {
        return ManagerRole::Us;
    }
    if !succession.may_succeed(manager) {
        return ManagerRole::Elsewhere;
    }
    match recorded.filter(|_| last_modifier == manager) {
        Some(r) if r.install_id != install_id => ManagerRole::Elsewhere,
        _ => ManagerRole::Predecessor,
    }
}

/// Whether `identity` matches `pattern` (see [`Succession::predecessors`]).
pub fn matches(pattern: &str, identity: &str) -> bool {
    match_from(pattern.as_bytes(), identity.as_bytes())
}

const UUID_TOKEN: &[u8] = b"<uuid>";
const UUID_LEN: usize = 36;

fn match_from(p: &[u8], s: &[u8]) -> bool {
    if p.is_empty() {
        return s.is_empty();
    }
    if p[0] == b'*' {
        return (0..=s.len()).any(|i| match_from(&p[1..], &s[i..]));
    }
    if p.starts_with(UUID_TOKEN) {
        return s.len() >= UUID_LEN
            && is_uuid(&s[..UUID_LEN])
            && match_from(&p[UUID_TOKEN.len()..], &s[UUID_LEN..]);
    }
    !s.is_empty() && p[0] == s[0] && match_from(&p[1..], &s[1..])
}

/// `8-4-4-4-12` hex digits, as Kubernetes writes UIDs.
fn is_uuid(s: &[u8]) -> bool {
    s.len() == UUID_LEN
        && s.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
#[path = "takeover_tests.rs"]
mod tests;
