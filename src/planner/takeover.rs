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
//!    rolls every Pod), a Deployment *label* records our hash and the pod-template value it
//!    stands for ([`HashRecord`]; a label, because a Deployment's annotations are copied to its
//!    ReplicaSets and changing them bumps its generation, while labels do neither).
//!    [`record_for`] reads the pair, and the record lapses by itself once anything re-renders
//!    the pod template. The predecessor's connection hash is simple enough to compute exactly
//!    ([`crate::build_id::go_connection_hash`]), so a Deployment whose Pods carry the current
//!    Connection the predecessor's way is adopted by the drift rules at any time, and one whose
//!    Connection changed is rolled as usual.
//! 3. **Identity.** Temporal's routing manager is the predecessor's identity. [`manager_role`]
//!    tells a predecessor (taken over: the manager identity is claimed) from a human or another
//!    live install of this controller (yielded to).

use crate::api::twd::TemporalWorkerDeploymentStatus;
pub use crate::planner::model::{Adoption, HashRecord, Succession};
use crate::planner::model::{Desired, ObservedDeployment};
use crate::temporal::state::RoutingInstall;

/// Deployment label: our hash of the user's pod template, standing for the pod-template
/// annotation written by the controller we took over from (see [`HashRecord`]).
pub const LABEL_ADOPTED_POD_TEMPLATE_HASH: &str = "temporal.io/adopted-pod-template-spec-hash";
/// Deployment label: our hash of the Connection, standing for the predecessor's.
pub const LABEL_ADOPTED_CONNECTION_HASH: &str = "temporal.io/adopted-connection-spec-hash";

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

/// Hex characters of each hash kept in a record: two fit in a label value (63 characters),
/// and 112 bits tell templates apart as well as the full hash does here.
pub const RECORD_HEX: usize = 28;
/// Stands for a pod-template annotation that was not there.
const ABSENT: &str = "none";

impl HashRecord {
    /// `<ours>.<replaced>`, each cut to [`RECORD_HEX`] characters (`none` for no annotation).
    pub fn label_value(&self) -> String {
        let cut = |h: &str| h.get(..RECORD_HEX).unwrap_or(h).to_string();
        let replaces = if self.replaces.is_empty() {
            ABSENT.to_string()
        } else {
            cut(&self.replaces)
        };
        format!("{}.{replaces}", cut(&self.ours))
    }

    /// A label value back into its (cut) hashes.
    pub fn parse(value: &str) -> Option<HashRecord> {
        let (ours, replaces) = value.split_once('.')?;
        let hex = |h: &str| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit());
        (hex(ours) && (hex(replaces) || replaces == ABSENT)).then(|| HashRecord {
            ours: ours.to_string(),
            replaces: if replaces == ABSENT {
                String::new()
            } else {
                replaces.to_string()
            },
        })
    }

    /// Whether the record still stands for `annotation`: it is what the record replaced.
    fn stands_for(&self, annotation: Option<&str>) -> bool {
        match annotation.filter(|a| !a.is_empty()) {
            None => self.replaces.is_empty(),
            Some(a) => !self.replaces.is_empty() && a.starts_with(&self.replaces),
        }
    }
}

/// Our (cut) hash from a record label, while the pod template still carries the annotation
/// the record replaced; `None` without a record, or once it lapsed.
pub fn record_for(pod_annotation: Option<&str>, label: Option<&str>) -> Option<String> {
    label
        .and_then(HashRecord::parse)
        .filter(|r| r.stands_for(pod_annotation))
        .map(|r| r.ours)
}

/// Whether a Deployment's Pods carry the hash `wanted` (ours, in full): by their pod-template
/// annotation, or by a take-over record (a cut hash) standing for it.
fn reads_as(annotation: Option<&str>, record: Option<&str>, wanted: &str) -> bool {
    match record {
        Some(ours) => !ours.is_empty() && wanted.starts_with(ours),
        None => annotation == Some(wanted),
    }
}

impl ObservedDeployment {
    /// The Pods run the user's pod template that hashes to `hash`.
    pub fn template_reads_as(&self, hash: &str) -> bool {
        reads_as(
            self.pod_template_hash.as_deref(),
            self.template_record.as_deref(),
            hash,
        )
    }

    /// The Pods carry the Connection settings that hash to `hash`.
    pub fn connection_reads_as(&self, hash: &str) -> bool {
        reads_as(
            self.connection_hash.as_deref(),
            self.connection_record.as_deref(),
            hash,
        )
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
        .filter(|d| d.template_record.is_some() && d.template_reads_as(&desired.pod_template_hash))
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
    if d.template_reads_as(&desired.pod_template_hash) {
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
    if wanted.is_empty() || predecessor_hash.is_empty() || d.connection_reads_as(wanted) {
        return None;
    }
    let current = d.connection_hash.as_deref()?;
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
