//! The owned-resource reconciler's settings, typed once from the command line in
//! `run::RunOptions`: which kinds a template may carry, and who checked its author's rights on
//! them. What every reconciler shares is in `crate::reconciler::services`.

use crate::owned::validate::{AccessCheck, DEFAULT_ALLOWED_KINDS};

/// The owned-resource reconciler's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedSettings {
    /// Kinds a TWOR may carry.
    pub allowed_kinds: Vec<String>,
    /// Whether the webhook checked each TWOR's author, or TWORs of unchecked kinds are refused.
    pub access_check: AccessCheck,
}

impl Default for OwnedSettings {
    /// The default kinds, checked at admission (the default install).
    fn default() -> Self {
        Self {
            allowed_kinds: DEFAULT_ALLOWED_KINDS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            access_check: AccessCheck::default(),
        }
    }
}

impl OwnedSettings {
    /// From the flags: `kinds` a TWOR may carry (empty: the default list), and
    /// `unchecked_kinds`, `None` when the webhook checks each TWOR author's rights on its
    /// kind, `Some(kinds)` without a webhook (TWORs of other kinds are then refused).
    pub fn new(kinds: &[String], unchecked_kinds: Option<Vec<String>>) -> Self {
        let allowed_kinds = match kinds {
            [] => Self::default().allowed_kinds,
            given => given.to_vec(),
        };
        let access_check = match unchecked_kinds {
            None => AccessCheck::AtAdmission,
            Some(unchecked_kinds) => AccessCheck::Refused { unchecked_kinds },
        };
        Self {
            allowed_kinds,
            access_check,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_kinds_given_means_the_default_list_and_no_webhook_means_refused() {
        assert_eq!(OwnedSettings::new(&[], None), OwnedSettings::default());
        let given = OwnedSettings::new(&["ConfigMap".into()], Some(vec!["Secret".into()]));
        assert_eq!(given.allowed_kinds, ["ConfigMap"]);
        assert_eq!(
            given.access_check,
            AccessCheck::Refused {
                unchecked_kinds: vec!["Secret".into()]
            }
        );
    }
}
