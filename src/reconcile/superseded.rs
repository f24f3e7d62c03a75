//! One name, two kinds: a `TemporalWorkerDeployment` and a `WorkerDeployment` of the same
//! namespace and name would drive the same Temporal worker deployment (`<namespace>/<name>`)
//! and the same versioned Deployment names. The canonical kind wins; the seed object is
//! refused (`Stalled=True/InvalidSpec`), never acts, and its deletion cleans nothing up in
//! Temporal (that state belongs to the WorkerDeployment). A seed object the Go controller
//! labelled as migrated (`temporal.io/migrated-to-wd: "true"`) is superseded the same way.

use kube::ResourceExt;

use crate::api::{KindSet, TemporalWorkerDeployment};

/// The label the Go controller puts on a TemporalWorkerDeployment it migrated to a
/// WorkerDeployment of the same name.
pub const LABEL_MIGRATED: &str = "temporal.io/migrated-to-wd";

/// Why a seed-kind object does nothing (the message its `Ready` condition carries).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Superseded {
    #[error(
        "WorkerDeployment {ns}/{name} has the same name and drives the same Temporal worker \
         deployment; it wins and this TemporalWorkerDeployment does nothing. Delete one of \
         the two (deleting this one leaves Temporal untouched)"
    )]
    ByCanonical { ns: String, name: String },
    #[error(
        "labelled {LABEL_MIGRATED}=true: migrated to WorkerDeployment {ns}/{name}, so this \
         TemporalWorkerDeployment does nothing (deleting it leaves Temporal untouched)"
    )]
    Migrated { ns: String, name: String },
}

/// Why `twd` must stand down, given the canonical object of its name (if cached). Pure.
pub fn superseded(
    twd: &TemporalWorkerDeployment,
    canonical: Option<&TemporalWorkerDeployment>,
) -> Option<Superseded> {
    if twd.kind_set() != KindSet::Seed {
        return None;
    }
    let ns = twd.namespace().unwrap_or_default();
    let name = twd.name_any();
    if canonical.is_some() {
        return Some(Superseded::ByCanonical { ns, name });
    }
    (twd.labels().get(LABEL_MIGRATED).map(String::as_str) == Some("true"))
        .then_some(Superseded::Migrated { ns, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_object_stands_down_for_a_canonical_one_of_its_name_or_a_migration_label() {
        let seed = TemporalWorkerDeployment::test();
        let canonical = seed.clone().stamped(KindSet::Canonical);
        assert!(superseded(&seed, None).is_none());
        let why = superseded(&seed, Some(&canonical)).expect("superseded");
        assert!(
            why.to_string().contains("WorkerDeployment shop/orders"),
            "{why}"
        );
        // The canonical object itself never stands down.
        assert!(superseded(&canonical, Some(&canonical)).is_none());
        let mut migrated = seed.clone();
        migrated
            .labels_mut()
            .insert(LABEL_MIGRATED.into(), "true".into());
        assert!(superseded(&migrated, None).is_some());
        migrated
            .labels_mut()
            .insert(LABEL_MIGRATED.into(), "false".into());
        assert!(superseded(&migrated, None).is_none());
    }
}
