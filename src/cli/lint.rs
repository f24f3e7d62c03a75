//! `temporal-worker-controller lint FILE…`: the API server's and the admission webhook's
//! refusals of our objects, offline, for a pre-merge check. For each document of a kind this
//! controller serves (both kind sets, and the Go controller's shapes, which are the seed kinds),
//! in the API server's order: its size limits, the CRD's schema (`crate::cli::lint_schema`), the
//! CRD's CEL rules (`crate::cli::lint_cel`; skipped after a type or enum error, as the API
//! server does), then the webhook's rules that need no cluster. Each refusal is printed as the
//! API server words it; what needs the cluster (a gate input's Secret or ConfigMap, the pod
//! template's dry run, transition rules against the stored object) is left to it.

use std::path::Path;

use serde::Deserialize as _;
use serde_json::Value;

use crate::api::kinds::Model;
use crate::api::{KindSet, TemporalWorkerDeployment, TemporalWorkerOwnedResource};
use crate::cli::lint_schema::{ErrorKind, FieldError};

/// The API server's limit on one object's annotations (keys and values).
const ANNOTATIONS_LIMIT: usize = 256 * 1024;
/// The API server's limit on a request body.
const REQUEST_LIMIT: usize = 3 * 1024 * 1024;
const TWD_WEBHOOK: &str = "temporalworkerdeployments.webhook.temporal.io";
const TWOR_WEBHOOK: &str = "temporalworkerownedresources.webhook.temporal.io";

#[derive(Debug, thiserror::Error)]
pub enum LintError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not YAML: {source}")]
    Yaml {
        path: String,
        source: serde_yaml::Error,
    },
}

/// One document's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// `Kind/name`.
    pub object: String,
    /// The API server's message, when it would refuse the object.
    pub refusal: Option<String>,
}

/// The verdicts on every document of ours in `text`; other kinds are left out.
pub fn lint_text(path: &str, text: &str) -> Result<Vec<Verdict>, LintError> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(doc).map_err(|source| LintError::Yaml {
            path: path.to_string(),
            source,
        })?;
        if let Some(v) = lint(&value) {
            out.push(v);
        }
    }
    Ok(out)
}

/// The verdict on `object`, or None when it is not a kind this controller serves.
pub fn lint(object: &Value) -> Option<Verdict> {
    let kind = object.get("kind")?.as_str()?;
    let model = KindSet::ALL.into_iter().find_map(|set| {
        [Model::Worker, Model::Connection, Model::Template]
            .into_iter()
            .find(|m| set.kind(*m) == kind)
    })?;
    let crd = crd_of(kind)?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let refusal = refusal(object, &crd)
        .map(|r| r.message(kind, name))
        .or_else(|| webhook_refusal(object, model));
    Some(Verdict {
        object: format!("{kind}/{name}"),
        refusal,
    })
}

/// Why the API server itself refuses `object`.
enum Refusal {
    TooLarge,
    Invalid(Vec<FieldError>),
}

impl Refusal {
    fn message(&self, kind: &str, name: &str) -> String {
        match self {
            Refusal::TooLarge => format!("Request entity too large: limit is {REQUEST_LIMIT}"),
            Refusal::Invalid(errors) => {
                let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
                let list = match shown.as_slice() {
                    [one] => one.clone(),
                    many => format!("[{}]", many.join(", ")),
                };
                format!("{kind}.{} {name:?} is invalid: {list}", crate::api::GROUP)
            }
        }
    }
}

fn refusal(object: &Value, crd: &Value) -> Option<Refusal> {
    if serde_json::to_vec(object).map_or(0, |b| b.len()) > REQUEST_LIMIT {
        return Some(Refusal::TooLarge);
    }
    let mut errors = Vec::new();
    let annotations = object["metadata"]["annotations"].as_object();
    let size: usize = annotations
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > ANNOTATIONS_LIMIT {
        errors.push(FieldError {
            path: "metadata.annotations".into(),
            kind: ErrorKind::TooLong,
            value: None,
            detail: format!("may not be more than {ANNOTATIONS_LIMIT} bytes"),
        });
    }
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut body = object.clone();
    if let Some(map) = body.as_object_mut() {
        // The API server checks metadata itself; the schema only declares it.
        map.remove("metadata");
    }
    let mut schema_errors = Vec::new();
    crate::cli::lint_schema::validate(schema, &body, "", &mut schema_errors);
    errors.extend(schema_errors);
    // The API server runs no CEL rule after an error that could make its types or its cost
    // wrong: a type or enum error, a missing field, too many items, too long a value (a
    // pattern or range error does not stop them).
    let blocking = errors.iter().any(|e| {
        matches!(
            e.kind,
            ErrorKind::Unsupported | ErrorKind::Required | ErrorKind::TooMany | ErrorKind::TooLong
        ) || e.detail.contains(" in body must be of type ")
    });
    if blocking {
        errors.push(FieldError {
            path: String::new(),
            kind: ErrorKind::Invalid,
            value: Some("null".into()),
            detail: "some validation rules were not checked because the object was invalid; \
                     correct the existing errors to complete validation"
                .into(),
        });
    } else {
        crate::cli::lint_cel::validate(schema, object, "", &mut errors);
    }
    (!errors.is_empty()).then_some(Refusal::Invalid(errors))
}

/// The webhook's refusal, for the rules it checks without the cluster.
fn webhook_refusal(object: &Value, model: Model) -> Option<String> {
    let (webhook, problems) = match model {
        Model::Worker => {
            let twd: TemporalWorkerDeployment = serde_json::from_value(object.clone()).ok()?;
            (TWD_WEBHOOK, crate::webhook::twd::problems(&twd)?)
        }
        Model::Template => {
            let twor: TemporalWorkerOwnedResource = serde_json::from_value(object.clone()).ok()?;
            let allowed = crate::owned::validate::DEFAULT_ALLOWED_KINDS;
            let problems = crate::webhook::twor::problems(&twor, None, allowed);
            (
                TWOR_WEBHOOK,
                Some(problems.join("; ")).filter(|p| !p.is_empty())?,
            )
        }
        Model::Connection => return None,
    };
    Some(format!(
        "admission webhook {webhook:?} denied the request: {problems}"
    ))
}

/// The CRD (as JSON) that serves `kind`.
fn crd_of(kind: &str) -> Option<Value> {
    crate::generate::crds::files()
        .into_iter()
        .find_map(|(_, yaml)| {
            let crd: Value = serde_yaml::from_str(&yaml).ok()?;
            (crd["spec"]["names"]["kind"] == kind).then_some(crd)
        })
}

/// `lint FILE…`: prints each verdict; true when nothing is refused. `-` reads stdin.
pub fn run(files: &[std::path::PathBuf]) -> Result<bool, LintError> {
    let mut clean = true;
    for path in files {
        let shown = path.display().to_string();
        let text = read(path).map_err(|source| LintError::Read {
            path: shown.clone(),
            source,
        })?;
        for v in lint_text(&shown, &text)? {
            match &v.refusal {
                None => println!("{shown}: {}: ok", v.object),
                Some(message) => {
                    clean = false;
                    println!("{shown}: {}: refused: {message}", v.object);
                }
            }
        }
    }
    Ok(clean)
}

fn read(path: &Path) -> std::io::Result<String> {
    if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
}
