//! Argo CD health-check generation: `lua/*.lua` is the one source of every health script; the
//! copies Argo CD reads are generated from it, as the CRDs are by [`crate::generate::crds`]:
//! `argocd/resource_customizations/temporal.io/<Kind>/health.lua` (Argo CD's built-in layout,
//! one copy per kind of both kind sets) and the `argocd/argocd-cm.yaml` snippet (each script
//! written once, the alias kind's key a YAML alias of it). The resource actions of the worker
//! deployment kinds (`lua/actions/`, [`ACTIONS`]) are generated the same way, into Argo CD's
//! `actions/discovery.lua` and `actions/<name>/action.lua` layout and the snippet's
//! `resource.customizations.actions.*` keys. `tests/crds.rs` fails when a copy drifts and
//! rewrites them all with `UPDATE_CRDS=1 cargo test --test crds`.

/// The directory of Argo CD's built-in layout for our group, relative to the repository root.
pub const CUSTOMIZATIONS_DIR: &str = "argocd/resource_customizations/temporal.io";
/// The argocd-cm snippet, relative to the repository root.
pub const ARGOCD_CM: &str = "argocd/argocd-cm.yaml";
/// The command that regenerates every generated copy (CRDs and Lua alike).
pub const REGENERATE: &str = "UPDATE_CRDS=1 cargo test --test crds";

/// One health script (one status shape) and the kinds it is installed under.
#[derive(Debug, Clone, Copy)]
pub struct HealthScript {
    /// The source file, relative to the repository root.
    pub source: &'static str,
    /// Its text.
    pub text: &'static str,
    /// The kind users write today (the Go controller's name).
    pub canonical: &'static str,
    /// The other kinds of the same status shape: the seed kind, and for the Connection shape the
    /// cluster-scoped `ClusterConnection` too.
    pub aliases: &'static [&'static str],
}

impl HealthScript {
    /// Every kind the script is installed under, the canonical one first.
    pub fn kinds(&self) -> impl Iterator<Item = &'static str> + use<> {
        std::iter::once(self.canonical).chain(self.aliases.iter().copied())
    }
}

/// Every health script, in the order `argocd-cm.yaml` lists them.
pub const SCRIPTS: [HealthScript; 3] = [
    HealthScript {
        source: "lua/temporalworkerdeployment-health.lua",
        text: include_str!("../../lua/temporalworkerdeployment-health.lua"),
        canonical: "WorkerDeployment",
        aliases: &["TemporalWorkerDeployment"],
    },
    HealthScript {
        source: "lua/temporalworkerownedresource-health.lua",
        text: include_str!("../../lua/temporalworkerownedresource-health.lua"),
        canonical: "WorkerResourceTemplate",
        aliases: &["TemporalWorkerOwnedResource"],
    },
    HealthScript {
        source: "lua/temporalconnection-health.lua",
        text: include_str!("../../lua/temporalconnection-health.lua"),
        canonical: "Connection",
        aliases: &["TemporalConnection", "ClusterConnection"],
    },
];

/// One resource action of the worker deployment kinds: its name in Argo CD and its script.
#[derive(Debug, Clone, Copy)]
pub struct Action {
    pub name: &'static str,
    pub text: &'static str,
}

/// The worker deployment kinds' action discovery (which actions apply to an object's state).
pub const ACTION_DISCOVERY: &str = include_str!("../../lua/actions/discovery.lua");

/// The action named `$name`, its script read from `lua/actions/$name.lua`.
macro_rules! action {
    ($name:literal) => {
        Action {
            name: $name,
            text: include_str!(concat!("../../lua/actions/", $name, ".lua")),
        }
    };
}

/// Every resource action of the worker deployment kinds (`docs/argocd.md`, "Resource actions").
pub const ACTIONS: [Action; 9] = [
    action!("promote"),
    action!("skip-step"),
    action!("pause"),
    action!("resume"),
    action!("abort"),
    action!("clear-abort"),
    action!("retry"),
    action!("restart"),
    action!("restart-target"),
];

/// The kinds the actions are installed under: the worker deployment script's kinds.
pub fn action_kinds() -> impl Iterator<Item = &'static str> {
    SCRIPTS[0].kinds()
}

/// The argocd-cm key of a kind's resource actions.
pub fn cm_actions_key(kind: &str) -> String {
    format!("resource.customizations.actions.temporal.io_{kind}")
}

/// The value of a kind's actions key: Argo CD's `discovery.lua` + `definitions` document.
pub fn actions_document() -> String {
    let indent = |text: &str, by: &str| -> String {
        text.lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_string()
                } else {
                    format!("{by}{l}\n")
                }
            })
            .collect()
    };
    let mut out = format!(
        "discovery.lua: |\n{}definitions:\n",
        indent(ACTION_DISCOVERY, "  ")
    );
    for a in &ACTIONS {
        out.push_str(&format!("- name: {}\n  action.lua: |\n", a.name));
        out.push_str(&indent(a.text, "    "));
    }
    out
}

const CM_HEADER: &str = "\
# Argo CD health checks for temporal-worker-controller's kinds, as argocd-cm customizations: one
# script per status shape (lua/), each installed under the kind users write today and under its
# alias kinds (WorkerDeployment and TemporalWorkerDeployment, WorkerResourceTemplate and
# TemporalWorkerOwnedResource, Connection, TemporalConnection and ClusterConnection). The alias keys reuse the script
# through a YAML alias (`*name`), which kubectl resolves, so each script is written here once.
# The worker deployment kinds' resource actions (promote, skip-step, pause, resume, abort,
# clear-abort, retry, restart, restart-target; docs/argocd.md) follow the health checks.
# Merge it into the existing ConfigMap rather than replacing it, e.g.
#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file argocd/argocd-cm.yaml
# The scripts need no `resource.customizations.useOpenLibs.*` key: they run in the default sandbox.
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
";

/// The argocd-cm key of a kind's health customization.
pub fn cm_key(kind: &str) -> String {
    format!("resource.customizations.health.temporal.io_{kind}")
}

/// A script as the body of a YAML literal block (`|`, clip chomping) indented by four spaces;
/// empty lines stay empty so the block's value is the script byte for byte.
fn literal_block(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("    {l}\n")
            }
        })
        .collect()
}

/// The whole `argocd/argocd-cm.yaml`.
pub fn argocd_cm() -> String {
    let mut out = CM_HEADER.to_string();
    for s in &SCRIPTS {
        let anchor = s.canonical.to_ascii_lowercase();
        out.push_str(&format!("  {}: &{anchor} |\n", cm_key(s.canonical)));
        out.push_str(&literal_block(s.text));
        for alias in s.aliases {
            out.push_str(&format!("  {}: *{anchor}\n", cm_key(alias)));
        }
    }
    let mut kinds = action_kinds();
    if let Some(canonical) = kinds.next() {
        out.push_str(&format!("  {}: &actions |\n", cm_actions_key(canonical)));
        out.push_str(&literal_block(&actions_document()));
        for alias in kinds {
            out.push_str(&format!("  {}: *actions\n", cm_actions_key(alias)));
        }
    }
    out
}

/// `(path relative to the repository root, content)` of every generated Lua copy.
pub fn outputs() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = SCRIPTS
        .iter()
        .flat_map(|s| {
            s.kinds().map(|kind| {
                (
                    format!("{CUSTOMIZATIONS_DIR}/{kind}/health.lua"),
                    s.text.to_string(),
                )
            })
        })
        .collect();
    for kind in action_kinds() {
        let dir = format!("{CUSTOMIZATIONS_DIR}/{kind}/actions");
        out.push((format!("{dir}/discovery.lua"), ACTION_DISCOVERY.to_string()));
        for a in &ACTIONS {
            out.push((format!("{dir}/{}/action.lua", a.name), a.text.to_string()));
        }
    }
    out.push((ARGOCD_CM.to_string(), argocd_cm()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cm_snippet_holds_each_script_verbatim() {
        let cm: serde_json::Value = serde_yaml::from_str(&argocd_cm()).expect("YAML");
        for s in &SCRIPTS {
            for kind in s.kinds() {
                assert_eq!(cm["data"][cm_key(kind)], s.text, "{kind}");
            }
        }
    }

    #[test]
    fn the_cm_snippet_holds_every_action_verbatim_under_both_kinds() {
        let cm: serde_json::Value = serde_yaml::from_str(&argocd_cm()).expect("YAML");
        for kind in action_kinds() {
            let doc = cm["data"][cm_actions_key(kind)]
                .as_str()
                .expect("actions key");
            let doc: serde_json::Value = serde_yaml::from_str(doc).expect("actions YAML");
            assert_eq!(doc["discovery.lua"], ACTION_DISCOVERY, "{kind}");
            let defs = doc["definitions"].as_array().expect("definitions");
            assert_eq!(defs.len(), ACTIONS.len());
            for (d, a) in defs.iter().zip(&ACTIONS) {
                assert_eq!(
                    (&d["name"], &d["action.lua"]),
                    (&a.name.into(), &a.text.into())
                );
            }
        }
    }

    #[test]
    fn scripts_end_with_one_newline_so_the_literal_block_keeps_them_exact() {
        let texts = SCRIPTS
            .iter()
            .map(|s| (s.source, s.text))
            .chain(ACTIONS.iter().map(|a| (a.name, a.text)))
            .chain([("discovery", ACTION_DISCOVERY)]);
        for (name, text) in texts {
            assert!(text.ends_with('\n') && !text.ends_with("\n\n"), "{name}");
        }
    }
}
