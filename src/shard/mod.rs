//! Static shards (`--shard`, `--shard-selector`): one install split across several controller
//! Deployments, each reconciling the worker deployments its label selector matches, as Flux's
//! sharding and Argo CD's manual shards do. Nothing coordinates the shards but Kubernetes:
//!
//! - each shard watches only the worker deployments its selector matches, and only the
//!   versioned Deployments carrying the same labels (they are copied from the worker
//!   deployment onto its Deployments, [`Shard::dress`]);
//! - each shard elects its leader on a Lease of its own ([`Shard::lease_name`]); the Temporal
//!   identity and the install ID stay the install's, shared by all shards;
//! - a Temporal namespace's request budget lives in one shard: the first shard to talk to it
//!   claims it on a Lease ([`claims`]), and another shard's worker deployment on that namespace
//!   is refused (`TemporalNamespaceInOtherShard`) until the claim is released;
//! - Connections are read by every shard (any shard's worker may name any Connection) and
//!   reconciled by the one whose selector matches the Connection's labels; which worker
//!   deployments use a Connection is asked of the API server, across shards;
//! - an owned-resource template follows its worker deployment's shard.
//!
//! `docs/sharding.md` says when to shard and how to move an object between shards.

pub mod claims;
mod selector;

use std::collections::BTreeMap;

use kube::core::{Selector, SelectorExt};

use crate::api::TemporalWorkerDeployment;

pub use claims::{ClaimError, Claims};

/// Why a shard's flags are refused at start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    #[error("--shard {0:?}: a shard name is 1 to 40 lowercase letters, digits and '-'")]
    BadName(String),
    #[error("--shard-selector {selector:?}: {why}")]
    BadSelector { selector: String, why: String },
    #[error("--shard and --shard-selector go together (one is set, the other is not)")]
    Incomplete,
}

/// This replica's shard: its name and label selector.
#[derive(Clone, Debug)]
pub struct Shard {
    name: String,
    text: String,
    selector: Selector,
    keys: Vec<String>,
}

impl Shard {
    /// The shard of the flags, if any (`None`: the install is not sharded).
    pub fn from_flags(
        name: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Option<Shard>, ShardError> {
        let name = name.map(str::trim).filter(|n| !n.is_empty());
        let selector = selector.map(str::trim).filter(|s| !s.is_empty());
        match (name, selector) {
            (None, None) => Ok(None),
            (Some(name), Some(selector)) => Shard::new(name, selector).map(Some),
            _ => Err(ShardError::Incomplete),
        }
    }

    pub fn new(name: &str, selector: &str) -> Result<Shard, ShardError> {
        let valid_name = (1..=40).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if !valid_name {
            return Err(ShardError::BadName(name.to_string()));
        }
        let bad = |why: String| ShardError::BadSelector {
            selector: selector.to_string(),
            why,
        };
        let expressions = selector::parse(selector).map_err(bad)?;
        let mut keys: Vec<String> = Vec::new();
        for key in expressions.iter().map(selector::key) {
            if key.starts_with("temporal.io/") {
                return Err(bad(format!(
                    "label {key:?} is the controller's own (temporal.io/): choose a key of yours, e.g. sharding.temporal.io/key"
                )));
            }
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_string());
            }
        }
        let selector: Selector = expressions.into_iter().collect();
        Ok(Shard {
            name: name.to_string(),
            text: selector.to_string(),
            selector,
            keys,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The selector as the API server reads it (`labelSelector` of a list or watch).
    pub fn selector(&self) -> &str {
        &self.text
    }

    /// Whether an object with `labels` belongs to this shard.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }

    /// The shard's own leader Lease: every shard elects its leader apart.
    pub fn lease_name(&self, base: &str) -> String {
        format!("{base}-shard-{}", self.name)
    }

    /// The labels the selector reads, as `labels` has them: what a worker deployment passes on
    /// to its versioned Deployments so that they are watched by the same shard.
    pub fn labels_of(&self, labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        self.keys
            .iter()
            .filter_map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// `twd` with its shard labels added to the labels it puts on its versioned Deployments
    /// (`spec.deploymentMetadata.labels`, or `spec.deployment.labels` where the earlier shape is
    /// in use): they are then recorded, updated in place when the worker deployment moves to
    /// another shard, and removed with the rest of the settings.
    pub fn dress(&self, twd: &TemporalWorkerDeployment) -> TemporalWorkerDeployment {
        let mut out = twd.clone();
        let labels = self.labels_of(twd.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()));
        if labels.is_empty() {
            return out;
        }
        let earlier_shape = out
            .spec
            .deployment
            .as_ref()
            .is_some_and(|d| !d.labels.is_empty() || !d.annotations.is_empty());
        if earlier_shape {
            if let Some(d) = out.spec.deployment.as_mut() {
                d.labels.extend(labels);
            }
        } else {
            out.spec
                .deployment_metadata
                .get_or_insert_with(Default::default)
                .labels
                .extend(labels);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const KEY: &str = "sharding.temporal.io/key";

    #[test]
    fn a_named_shard_and_the_default_shard_split_every_object_between_them() {
        let a = Shard::new("a", &format!("{KEY}=a")).unwrap();
        let b = Shard::new("b", &format!("{KEY}=b")).unwrap();
        let default = Shard::new("default", &format!("{KEY} notin (a,b)")).unwrap();
        for (object, owner) in [
            (labels(&[(KEY, "a")]), "a"),
            (labels(&[(KEY, "b"), ("team", "x")]), "b"),
            (labels(&[]), "default"),
            (labels(&[(KEY, "c")]), "default"),
        ] {
            let owners: Vec<&str> = [&a, &b, &default]
                .into_iter()
                .filter(|s| s.matches(&object))
                .map(Shard::name)
                .collect();
            assert_eq!(owners, vec![owner], "{object:?}");
        }
    }

    #[test]
    fn bad_flags_are_refused_with_what_is_wrong() {
        assert_eq!(
            Shard::from_flags(Some("a"), None).unwrap_err(),
            ShardError::Incomplete
        );
        assert!(Shard::from_flags(None, None).unwrap().is_none());
        assert!(matches!(
            Shard::new("A_b", "k=v"),
            Err(ShardError::BadName(_))
        ));
        let reserved = Shard::new("a", "temporal.io/deployment-name=x").unwrap_err();
        assert!(
            reserved.to_string().contains("controller's own"),
            "{reserved}"
        );
        let unclosed = Shard::new("a", "k in (a,b").unwrap_err();
        assert!(matches!(unclosed, ShardError::BadSelector { .. }));
    }

    #[test]
    fn the_lease_is_the_shards_own() {
        let a = Shard::new("a", "k=a").unwrap();
        assert_eq!(
            a.lease_name("temporal-worker-controller"),
            "temporal-worker-controller-shard-a"
        );
    }

    #[test]
    fn dressing_puts_the_shard_labels_where_the_spec_keeps_its_settings() {
        let shard = Shard::new("a", &format!("{KEY}=a")).unwrap();
        let mut twd = TemporalWorkerDeployment::test();
        twd.metadata.labels = Some(labels(&[(KEY, "a"), ("team", "x")]));
        let dressed = shard.dress(&twd);
        let meta = dressed.spec.deployment_metadata.clone().unwrap();
        assert_eq!(meta.labels, labels(&[(KEY, "a")]));
        // The earlier shape keeps its labels there (both shapes at once would be refused).
        let mut earlier = twd.clone();
        earlier.spec.deployment =
            Some(serde_json::from_value(serde_json::json!({"labels": {"team": "x"}})).unwrap());
        let dressed = shard.dress(&earlier);
        assert!(dressed.spec.deployment_metadata.is_none());
        assert_eq!(
            dressed.spec.deployment.unwrap().labels,
            labels(&[("team", "x"), (KEY, "a")])
        );
        // No shard label: nothing to pass on.
        twd.metadata.labels = None;
        assert!(shard.dress(&twd).spec.deployment_metadata.is_none());
    }
}
