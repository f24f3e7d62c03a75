//! The Go temporal-worker-controller's users' YAML is accepted unchanged (issue 25).
//!
//! **Acceptance.** Every complete manifest (`apiVersion`, `kind`, `metadata` and `spec`) of the
//! downloaded Go module v1.8.1 — its `examples/` files and the YAML code blocks of its
//! `docs/*.md` and `README.md` — is read at test time (never copied into this repository).
//! Documents with `...` elisions or templating are skipped, as are kinds outside `temporal.io`
//! (Deployments, Secrets, Flux objects: counted, not applied). As a control, each manifest is
//! first dry-run on a control plane that has only the Go controller's own CRDs; each one they
//! accept must then be accepted by ours (`crds/` of this repository, on the binary's shared
//! control plane), except the documented deliberate refusals ([`REFUSALS`], also listed in
//! `docs/migrating-from-go-controller.md`). A dry run is both a create (`kubectl apply`,
//! Argo CD's default) and a server-side apply (Flux, `kubectl apply --server-side`), each with
//! strict field validation, as `kubectl` sends it: an unknown field is a refusal, not a silent
//! prune. Only `metadata.namespace` is changed, to the test's namespace (the API server refuses
//! an object whose namespace differs from the request's). Each deliberate refusal is also probed:
//! a Go-accepted `WorkerDeployment` of the docs, changed to hit it, must be accepted by the Go
//! CRDs and refused by ours on both kind sets with the documented message.
//!
//! **Rollout.** A `WorkerDeployment` + `Connection` pair as the Go docs write them (taken from
//! the module at test time) rolls out with our controller and real workers: v1 becomes Current,
//! then v2 starts the docs' Progressive rollout at its first step (1 %; the docs' pauses are
//! minutes long). The same YAML with the seed kinds (`TemporalWorkerDeployment` +
//! `TemporalConnection`) does the same. Changed from the docs: the image (the kubelet
//! stand-in's), the Connection's address (the dev server's, which is plaintext, so its TLS and
//! credential fields go) and the worker's `TEMPORAL_TASK_QUEUE` env (what a real image carries).
//! The controller runs as the chart's ServiceAccount, so the chart's RBAC must cover both kind
//! sets.
//!
//! **v1.10.** The Go controller v1.10 cannot be built here, so its private CA
//! (`spec.tls.caCertSecretRef`, PR #546) is checked with manifests written from its type: a
//! Connection (API key, and no credentials) and a ClusterConnection with the field are accepted
//! by ours, and its admission rule against combining it with `mutualTLSSecretRef` is ours too.
//!
//! The Go CRDs share the group `temporal.io` with ours, so the control runs on a short-lived
//! control plane of its own; everything else uses the binary's shared one, isolated by
//! namespaces.

#[path = "common/controller.rs"]
mod controller;

use std::path::Path;
use std::time::Duration;
use test_harness::manifests::Kinds;

use anyhow::{Context as _, Result, bail, ensure};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_harness::control_plane::{self, ControlPlane};
use test_harness::go_controller::{self, GoControllerBuild};
use test_harness::{manifests, names, temporal_server, wait, world};

/// An extraction below these counts means the module's layout changed, not that all is well.
const MIN_FOUND: usize = 12;
const MIN_GO_ACCEPTED: usize = 8;
/// The kinds that must be among the Go-accepted manifests.
const REQUIRED_KINDS: &[&str] = &["WorkerDeployment", "Connection", "WorkerResourceTemplate"];
const MANAGER: &str = "go-yaml-acceptance";
const GROUP_PREFIX: &str = "temporal.io/";

/// A difference from the Go controller's schema that we refuse on purpose, on both kind sets,
/// with a message that says why: each one saves a user from an object that could never work.
struct DeliberateRefusal {
    what: &'static str,
    why: &'static str,
    /// A fragment of the API server's refusal message (the CRD's CEL message).
    message: &'static str,
    /// Whether a manifest hits it.
    applies: fn(&Value) -> bool,
    /// Changes a valid `WorkerDeployment` so that it hits it.
    probe: fn(&mut Value),
}

const REFUSALS: &[DeliberateRefusal] = &[
    DeliberateRefusal {
        what: "spec.replicas: 0",
        why: "the Current version would have no workers while Temporal keeps routing new \
              workflows to it; delete the object to stop workers, or leave replicas unset for \
              an autoscaler",
        message: "spec.replicas must be at least 1",
        applies: |m| is_worker_deployment(m) && m["spec"]["replicas"] == json!(0),
        probe: |m| m["spec"]["replicas"] = json!(0),
    },
    DeliberateRefusal {
        what: "a name containing '.'",
        why: "Temporal refuses '.' in worker deployment names (<namespace>/<name>), so the \
              object could never roll out",
        message: "name must not contain '.'",
        applies: |m| is_worker_deployment(m) && name_of(m).contains('.'),
        probe: |m| {
            let dotted = format!("{}.v2", name_of(m));
            m["metadata"]["name"] = json!(dotted);
        },
    },
];

fn is_worker_deployment(m: &Value) -> bool {
    matches!(
        m["kind"].as_str(),
        Some("WorkerDeployment" | "TemporalWorkerDeployment")
    )
}

fn name_of(m: &Value) -> &str {
    m["metadata"]["name"].as_str().unwrap_or_default()
}

fn kind_of(m: &Value) -> &str {
    m["kind"].as_str().unwrap_or_default()
}

// --- Extraction ------------------------------------------------------------------------------

/// One complete manifest and where it came from.
#[derive(Clone, Debug)]
struct Found {
    source: String,
    manifest: Value,
}

/// What the module's YAML holds.
#[derive(Debug, Default)]
struct Extraction {
    /// Complete manifests of kinds in `temporal.io`.
    found: Vec<Found>,
    elided: usize,
    templated: usize,
    /// Parts of a spec, values files, Lua, comments: not a whole object.
    fragments: usize,
    /// Complete manifests of other groups (`kind (source)`).
    other_groups: Vec<String>,
}

/// Reads `examples/**.y[a]ml` whole and the `yaml`/`yml` fenced blocks of `docs/*.md` and
/// `README.md` of the module.
fn yaml_sources(module: &Path) -> Result<Vec<(String, String)>> {
    let mut sources = Vec::new();
    let mut examples = Vec::new();
    collect_files(&module.join("examples"), &mut examples)?;
    for path in examples {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        if matches!(ext, "yaml" | "yml") {
            let label = path
                .strip_prefix(module)
                .unwrap_or(&path)
                .display()
                .to_string();
            sources.push((label, std::fs::read_to_string(&path)?));
        }
    }
    let mut docs: Vec<_> = std::fs::read_dir(module.join("docs"))
        .context("reading the module's docs/")?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.push(module.join("README.md"));
    for path in docs {
        let label = path
            .strip_prefix(module)
            .unwrap_or(&path)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&path)?;
        for (i, block) in yaml_blocks(&text).into_iter().enumerate() {
            sources.push((format!("{label} (YAML block {})", i + 1), block));
        }
    }
    Ok(sources)
}

fn collect_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_files(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The bodies of the fenced code blocks whose info string starts with `yaml` or `yml`.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    enum In {
        Text,
        Yaml(String),
        Other,
    }
    let mut blocks = Vec::new();
    let mut state = In::Text;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        state = match (state, fence) {
            (In::Text, Some(info)) => {
                let info = info.trim().to_ascii_lowercase();
                if info.starts_with("yaml") || info.starts_with("yml") {
                    In::Yaml(String::new())
                } else {
                    In::Other
                }
            }
            (In::Yaml(body), Some(_)) => {
                blocks.push(body);
                In::Text
            }
            (In::Other, Some(_)) => In::Text,
            (In::Yaml(mut body), None) => {
                body.push_str(line);
                body.push('\n');
                In::Yaml(body)
            }
            (other, None) => other,
        };
    }
    blocks
}

/// The documents of a YAML stream (split at `---` lines).
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else if let Some(doc) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs.into_iter().filter(|d| !d.trim().is_empty()).collect()
}

/// Whether a document leaves something out: `...` in YAML itself (`tls.crt: LS0t...`), or a
/// comment that starts with it (`# ... rest of config`). An ellipsis inside a comment's prose
/// (`sum(...)`) leaves nothing out.
fn is_elided(doc: &str) -> bool {
    doc.lines().any(|line| {
        let (code, comment) = match line
            .find(" #")
            .or_else(|| line.trim_start().starts_with('#').then_some(0))
        {
            Some(at) => line.split_at(at),
            None => (line, ""),
        };
        code.contains("...") || comment.trim_start_matches([' ', '#']).starts_with("...")
    })
}

fn extract(module: &Path) -> Result<Extraction> {
    let mut ex = Extraction::default();
    for (label, text) in yaml_sources(module)? {
        let docs = documents(&text);
        let many = docs.len() > 1;
        for (i, doc) in docs.into_iter().enumerate() {
            let source = if many {
                format!("{label} doc {}", i + 1)
            } else {
                label.clone()
            };
            if is_elided(&doc) {
                ex.elided += 1;
                continue;
            }
            if doc.contains("{{") {
                ex.templated += 1;
                continue;
            }
            let complete = serde_yaml::from_str::<Value>(&doc).ok().filter(|v| {
                ["apiVersion", "kind", "metadata", "spec"]
                    .iter()
                    .all(|k| !v[*k].is_null())
            });
            let Some(manifest) = complete else {
                ex.fragments += 1;
                continue;
            };
            if manifest["apiVersion"]
                .as_str()
                .is_some_and(|a| a.starts_with(GROUP_PREFIX))
            {
                ex.found.push(Found { source, manifest });
            } else {
                ex.other_groups
                    .push(format!("{} ({source})", kind_of(&manifest)));
            }
        }
    }
    Ok(ex)
}

// --- Dry runs --------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Verdict {
    Accepted,
    Refused(String),
}

impl Verdict {
    fn accepted(&self) -> bool {
        *self == Verdict::Accepted
    }

    fn text(&self) -> String {
        match self {
            Verdict::Accepted => "accepted".into(),
            Verdict::Refused(m) => format!("REFUSED: {m}"),
        }
    }
}

fn api_resource(kind: &str) -> ApiResource {
    go_controller::api_resource(kind)
}

/// A refusal by the API server (4xx) is a verdict; anything else is an error of the test.
fn verdict<T>(how: &str, result: kube::Result<T>) -> Result<Verdict> {
    match result {
        Ok(_) => Ok(Verdict::Accepted),
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) => Ok(Verdict::Refused(format!(
            "{how}: {} ({})",
            s.message, s.code
        ))),
        Err(e) => Err(e).context(how.to_string()),
    }
}

/// Server-side dry runs of `manifest` in `ns`: a create and a server-side apply, both with
/// strict field validation. Accepted only if both are.
async fn dry_run(client: &kube::Client, ns: &str, manifest: &Value) -> Result<Verdict> {
    let mut obj = manifest.clone();
    // The Go controller v1.10's ClusterConnection is cluster-scoped.
    let cluster = kind_of(&obj) == "ClusterConnection";
    if !cluster {
        obj["metadata"]["namespace"] = json!(ns);
    }
    let ar = api_resource(kind_of(&obj));
    let url = <DynamicObject as kube::Resource>::url_path(&ar, (!cluster).then_some(ns));
    let pp = PostParams {
        dry_run: true,
        field_manager: Some(MANAGER.into()),
    };
    let mut req = kube::core::Request::new(url).create(&pp, serde_json::to_vec(&obj)?)?;
    // PostParams has no field validation; kubectl sends Strict.
    let uri = format!("{}&fieldValidation=Strict", req.uri());
    *req.uri_mut() = uri.parse()?;
    let created = verdict("create", client.request::<Value>(req).await)?;
    if !created.accepted() {
        return Ok(created);
    }
    let api: Api<DynamicObject> = if cluster {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), ns, &ar)
    };
    let mut ssa = PatchParams::apply(MANAGER).force().validation_strict();
    ssa.dry_run = true;
    let applied = api.patch(name_of(&obj), &ssa, &Patch::Apply(&obj)).await;
    verdict("server-side apply", applied)
}

/// One manifest under test and what each set of CRDs said.
struct Case {
    found: Found,
    /// Set for the probes of [`REFUSALS`]: the refusal it must hit.
    probe_of: Option<usize>,
    go: Option<Verdict>,
    ours: Option<Verdict>,
}

/// The probes: the first docs `WorkerDeployment` with a pod template, changed to hit each
/// deliberate refusal, in the canonical and in the seed kind.
fn probes(found: &[Found]) -> Result<Vec<Case>> {
    let base = found
        .iter()
        .find(|f| kind_of(&f.manifest) == "WorkerDeployment" && has_template(&f.manifest))
        .context("no WorkerDeployment with a pod template in the module's YAML")?;
    let mut cases = Vec::new();
    for (i, refusal) in REFUSALS.iter().enumerate() {
        for kinds in [Kinds::Canonical, Kinds::Seed] {
            let mut manifest = base.manifest.clone();
            (refusal.probe)(&mut manifest);
            let manifest = manifests::in_kinds(manifest, kinds);
            let kind = kinds.worker();
            cases.push(Case {
                found: Found {
                    source: format!("probe `{}` of {} as {kind}", refusal.what, base.source),
                    manifest,
                },
                probe_of: Some(i),
                go: None,
                ours: None,
            });
        }
    }
    Ok(cases)
}

fn has_template(m: &Value) -> bool {
    m["spec"]["template"]["spec"]["containers"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
}

/// The control: dry runs against the Go controller's CRDs on a control plane of their own
/// (stopped on return). The seed kinds are skipped there: the Go controller's deprecated stubs
/// refuse every new object.
async fn run_go_control(build: &GoControllerBuild, cases: &mut [Case]) -> Result<()> {
    let plane = ControlPlane::start().await?;
    let client = plane.client().await?;
    go_controller::install_crds(&client, build).await?;
    let ns = names::unique("go-yaml");
    world::create_namespace(&client, &ns).await?;
    for case in cases.iter_mut() {
        if kind_of(&case.found.manifest).starts_with("Temporal") {
            continue;
        }
        case.go = Some(dry_run(&client, &ns, &case.found.manifest).await?);
    }
    plane.stop();
    Ok(())
}

/// Dry runs against our CRDs on the binary's shared control plane.
async fn run_ours(cases: &mut [Case]) -> Result<()> {
    let (_, client) = control_plane::shared_with_crds().await?;
    let ns = names::unique("our-yaml");
    world::create_namespace(&client, &ns).await?;
    for case in cases.iter_mut() {
        case.ours = Some(dry_run(&client, &ns, &case.found.manifest).await?);
    }
    Ok(())
}

/// The deliberate refusal that explains `verdict` of `manifest`, if one does.
fn deliberate(manifest: &Value, verdict: &Verdict) -> Option<usize> {
    let Verdict::Refused(message) = verdict else {
        return None;
    };
    REFUSALS
        .iter()
        .position(|r| (r.applies)(manifest) && message.contains(r.message))
}

/// Counts of [`judge`].
#[derive(Debug, Default)]
struct Tally {
    go_accepted: usize,
    ours_accepted: usize,
    deliberate: usize,
    probes_ok: usize,
    failures: Vec<String>,
}

fn judge(cases: &[Case]) -> Tally {
    let mut t = Tally::default();
    for case in cases {
        let (source, m) = (&case.found.source, &case.found.manifest);
        let ours = case
            .ours
            .clone()
            .unwrap_or(Verdict::Refused("not run".into()));
        if let Some(i) = case.probe_of {
            let r = &REFUSALS[i];
            if let Some(go) = case.go.as_ref().filter(|v| !v.accepted()) {
                t.failures.push(format!(
                    "{source}: the Go CRDs refuse it too ({}), so `{}` is no difference",
                    go.text(),
                    r.what
                ));
            } else if deliberate(m, &ours) == Some(i) {
                t.probes_ok += 1;
            } else {
                t.failures.push(format!(
                    "{source}: ours must refuse it with {:?}; got {}",
                    r.message,
                    ours.text()
                ));
            }
            continue;
        }
        if !case.go.as_ref().is_some_and(Verdict::accepted) {
            continue;
        }
        t.go_accepted += 1;
        if ours.accepted() {
            t.ours_accepted += 1;
        } else if deliberate(m, &ours).is_some() {
            t.deliberate += 1;
        } else {
            t.failures.push(format!(
                "{source}: {} {} accepted by the Go CRDs, {}",
                kind_of(m),
                name_of(m),
                ours.text()
            ));
        }
    }
    t
}

fn print_report(ex: &Extraction, cases: &[Case], t: &Tally) {
    println!("deliberate refusals (also in docs/migrating-from-go-controller.md):");
    for r in REFUSALS {
        println!("  - {}: {} (message: {:?})", r.what, r.why, r.message);
    }
    for case in cases {
        let show = |v: &Option<Verdict>| v.as_ref().map_or("-".into(), Verdict::text);
        println!(
            "{} {}/{}\n    Go CRDs: {}\n    ours:    {}",
            case.found.source,
            kind_of(&case.found.manifest),
            name_of(&case.found.manifest),
            show(&case.go),
            show(&case.ours)
        );
    }
    println!(
        "go-yaml: found {} complete temporal.io manifests; skipped {} with `...` elisions, {} \
         templated, {} fragments, {} of other groups ({}); accepted by the Go CRDs {}, by ours \
         {}, deliberate refusals {}; refusal probes passed {} of {}",
        ex.found.len(),
        ex.elided,
        ex.templated,
        ex.fragments,
        ex.other_groups.len(),
        ex.other_groups.join(", "),
        t.go_accepted,
        t.ours_accepted,
        t.deliberate,
        t.probes_ok,
        REFUSALS.len() * 2,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_manifest_the_go_crds_accept_is_accepted_by_ours() -> Result<()> {
    let build = GoControllerBuild::locate_async().await?;
    let ex = extract(&build.module_dir)?;
    ensure!(
        ex.found.len() >= MIN_FOUND,
        "only {} complete temporal.io manifests in {} (expected at least {MIN_FOUND}): {ex:?}",
        ex.found.len(),
        build.module_dir.display()
    );
    let mut cases: Vec<Case> = ex
        .found
        .iter()
        .cloned()
        .map(|found| Case {
            found,
            probe_of: None,
            go: None,
            ours: None,
        })
        .collect();
    cases.extend(probes(&ex.found)?);

    run_go_control(&build, &mut cases).await?;
    let go_kinds: Vec<String> = cases
        .iter()
        .filter(|c| c.probe_of.is_none() && c.go.as_ref().is_some_and(Verdict::accepted))
        .map(|c| kind_of(&c.found.manifest).to_string())
        .collect();
    run_ours(&mut cases).await?;
    let tally = judge(&cases);
    print_report(&ex, &cases, &tally);

    ensure!(
        tally.go_accepted >= MIN_GO_ACCEPTED,
        "the Go CRDs accepted only {} manifests (expected at least {MIN_GO_ACCEPTED}): the \
         control is not exercising them",
        tally.go_accepted
    );
    for kind in REQUIRED_KINDS {
        ensure!(
            go_kinds.iter().any(|k| k == kind),
            "no {kind} among the manifests the Go CRDs accepted"
        );
    }
    if !tally.failures.is_empty() {
        bail!(
            "{} of the Go controller's manifests are not handled as documented:\n{}",
            tally.failures.len(),
            tally.failures.join("\n")
        );
    }
    Ok(())
}

/// The Go controller v1.10's private CA (its PR #546, `ConnectionTLSConfig.CACertSecretRef` in
/// `api/v1alpha1/connection_types.go`; v1.10 cannot be built here, so the manifests are written
/// from that type): a `Connection` with an API key and one without credentials, and a
/// `ClusterConnection`, each with `spec.tls.caCertSecretRef`, are accepted by our CRDs with
/// strict field validation (nothing pruned); its CEL rule against combining the field with
/// `mutualTLSSecretRef` is ours too, with its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_10_connections_with_a_private_ca_are_accepted() -> Result<()> {
    let (_, client) = control_plane::shared_with_crds().await?;
    let ns = names::unique("v110-ca");
    world::create_namespace(&client, &ns).await?;
    let manifest = |kind: &str, name: &str, spec: Value| {
        json!({"apiVersion": "temporal.io/v1alpha1", "kind": kind,
               "metadata": {"name": name}, "spec": spec})
    };
    let tls = json!({"serverName": "temporal.internal.example",
                     "caCertSecretRef": {"name": "internal-ca"}});
    let accepted = [
        manifest(
            "Connection",
            "private-ca-api-key",
            json!({"hostPort": "temporal.internal.example:7233", "tls": tls,
                   "apiKeySecretRef": {"name": "temporal-api-key", "key": "api-key"}}),
        ),
        manifest(
            "Connection",
            "private-ca-no-credentials",
            json!({"hostPort": "temporal.internal.example:7233",
                   "tls": {"caCertSecretRef": {"name": "internal-ca"}}}),
        ),
        manifest(
            "ClusterConnection",
            &names::unique("v110-private-ca"),
            json!({"hostPort": "temporal.internal.example:7233", "tls": tls,
                   "apiKeySecretRef": {"name": "temporal-api-key", "key": "api-key"}}),
        ),
    ];
    for m in &accepted {
        let verdict = dry_run(&client, &ns, m).await?;
        ensure!(verdict.accepted(), "{m}: {}", verdict.text());
    }
    let combined = manifest(
        "Connection",
        "private-ca-and-mtls",
        json!({"hostPort": "temporal.internal.example:7233", "tls": tls,
               "mutualTLSSecretRef": {"name": "client-tls"}}),
    );
    let verdict = dry_run(&client, &ns, &combined).await?;
    ensure!(
        matches!(&verdict, Verdict::Refused(m) if m.contains(
            "tls.caCertSecretRef cannot be combined with mutualTLSSecretRef; bundle the CA into \
             that secret's own ca.crt key instead"
        )),
        "{}",
        verdict.text()
    );
    Ok(())
}

// --- Rollout ---------------------------------------------------------------------------------

/// How long each rollout phase may take on a loaded 2-core machine.
const T_ROLLOUT: Duration = Duration::from_secs(180);
/// Where the chart's ServiceAccount and RBAC are installed for this binary's controller.
const CONTROLLER_NS: &str = "twc-go-yaml";
const IDENTITY: &str = "twc-go-yaml-test";

/// The docs' `WorkerDeployment` (the first complete one with a pod template) and the
/// `Connection` it names.
fn docs_pair(module: &Path) -> Result<(Found, Found)> {
    let ex = extract(module)?;
    let wd = ex
        .found
        .iter()
        .find(|f| {
            kind_of(&f.manifest) == "WorkerDeployment"
                && has_template(&f.manifest)
                && f.manifest["spec"]["workerOptions"]["connectionRef"]["name"].is_string()
        })
        .context("no complete WorkerDeployment with a template in the module's YAML")?;
    let conn_name = &wd.manifest["spec"]["workerOptions"]["connectionRef"]["name"];
    let conn = ex
        .found
        .iter()
        .find(|f| {
            kind_of(&f.manifest) == "Connection" && f.manifest["metadata"]["name"] == *conn_name
        })
        .with_context(|| format!("no Connection {conn_name} in the module's YAML"))?;
    Ok((wd.clone(), conn.clone()))
}

/// The docs' Connection with the dev server's address; its TLS and credentials go (the dev
/// server is plaintext).
fn adapt_connection(doc: &Value, kinds: Kinds, address: &str) -> Value {
    let mut conn = manifests::in_kinds(doc.clone(), kinds);
    conn["spec"]["hostPort"] = json!(address);
    if let Some(spec) = conn["spec"].as_object_mut() {
        for field in ["tls", "mutualTLSSecretRef", "apiKeySecretRef"] {
            spec.remove(field);
        }
    }
    conn
}

/// The docs' WorkerDeployment running the stand-in's image at `tag`, polling `task_queue`.
fn adapt_deployment(doc: &Value, kinds: Kinds, tag: &str, task_queue: &str) -> Result<Value> {
    let mut wd = manifests::in_kinds(doc.clone(), kinds);
    let containers = wd["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .context("no containers")?;
    for c in containers {
        c["image"] = json!(manifests::worker_image(tag));
        let env = c["env"].as_array().cloned().unwrap_or_default();
        let mut env: Vec<Value> = env
            .into_iter()
            .filter(|e| e["name"] != "TEMPORAL_TASK_QUEUE")
            .collect();
        env.push(json!({"name": "TEMPORAL_TASK_QUEUE", "value": task_queue}));
        c["env"] = json!(env);
    }
    Ok(wd)
}

/// The object as JSON (any of the kinds).
async fn get(client: &kube::Client, ns: &str, kind: &str, name: &str) -> Result<Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource(kind));
    Ok(serde_json::to_value(api.get(name).await?)?)
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn observed(obj: &Value) -> bool {
    !obj["metadata"]["generation"].is_null()
        && obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
}

/// Temporal's current and ramping build IDs and the ramp percentage.
async fn routing(
    conn: &temporalio_client::Connection,
    temporal_ns: &str,
    deployment: &str,
) -> Result<(Option<String>, Option<String>, f32)> {
    let resp = test_harness::observe::describe_deployment(conn, temporal_ns, deployment).await?;
    let rc = resp
        .and_then(|r| r.worker_deployment_info)
        .and_then(|i| i.routing_config)
        .unwrap_or_default();
    let build = |v: Option<
        &temporalio_common::protos::temporal::api::deployment::v1::WorkerDeploymentVersion,
    >| { v.map(|v| v.build_id.clone()).filter(|b| !b.is_empty()) };
    Ok((
        build(rc.current_deployment_version.as_ref()),
        build(rc.ramping_deployment_version.as_ref()),
        rc.ramping_version_percentage,
    ))
}

/// Everything one pair's rollout needs.
struct Rollout<'a> {
    client: &'a kube::Client,
    kubelet: &'a test_harness::kubelet::Kubelet,
    temporal: &'a temporalio_client::Connection,
    ns: String,
    kinds: Kinds,
    wd: Value,
    conn: Value,
    task_queue: String,
    /// The last status read, for a timeout's message.
    last: std::sync::Mutex<Value>,
}

impl Rollout<'_> {
    fn name(&self) -> &str {
        name_of(&self.wd)
    }

    fn temporal_ns(&self) -> String {
        self.wd["spec"]["workerOptions"]["temporalNamespace"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    async fn apply(&self, tag: &str) -> Result<()> {
        let wd = adapt_deployment(&self.wd, self.kinds, tag, &self.task_queue)?;
        world::apply(self.client, &self.ns, MANAGER, wd).await
    }

    async fn status(&self) -> Result<Value> {
        let obj = get(self.client, &self.ns, self.kinds.worker(), self.name()).await?;
        if let Ok(mut last) = self.last.lock() {
            *last = obj["status"].clone();
        }
        Ok(obj)
    }

    fn last_status(&self) -> String {
        self.last
            .lock()
            .map(|v| v.to_string())
            .unwrap_or_else(|_| "(poisoned)".into())
    }

    /// v1 rolls out until Ready (RolloutComplete), Current in Temporal, with its replicas'
    /// workers running; returns its build ID.
    async fn first_version(&self) -> Result<String> {
        let address = self.conn["spec"]["hostPort"].clone();
        world::apply(self.client, &self.ns, MANAGER, self.conn.clone()).await?;
        ensure!(address.is_string(), "Connection without an address");
        self.apply("v1").await?;
        let what = format!(
            "{} {}/{} v1 Ready",
            self.kinds.worker(),
            self.ns,
            self.name()
        );
        let build = wait::eventually(&what, T_ROLLOUT, || async {
            let obj = self.status().await?;
            let ready = condition(&obj, "Ready")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "RolloutComplete");
            Ok((ready && observed(&obj))
                .then(|| {
                    obj["status"]["currentVersion"]["buildID"]
                        .as_str()
                        .map(String::from)
                })
                .flatten())
        })
        .await
        .with_context(|| format!("last status: {}", self.last_status()))?;
        let deployment = format!("{}/{}", self.ns, self.name());
        let (current, _, _) = routing(self.temporal, &self.temporal_ns(), &deployment).await?;
        ensure!(
            current.as_deref() == Some(build.as_str()),
            "status says {build} is Current, Temporal routes to {current:?}"
        );
        self.check_workers(&build).await?;
        Ok(build)
    }

    /// The versioned Deployment of `build` runs as many workers as the spec asks for.
    async fn check_workers(&self, build: &str) -> Result<()> {
        let replicas = self.wd["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
        let dep = temporal_worker_controller::build_id::deployment_name(self.name(), build);
        wait::eventually(
            &format!("{replicas} workers of {}/{dep}", self.ns),
            T_ROLLOUT,
            || async {
                Ok((self.kubelet.running_workers(&self.ns, &dep) == replicas).then_some(()))
            },
        )
        .await
    }

    /// v2 starts the docs' Progressive rollout: Temporal ramps it at the first step's
    /// percentage, the status says so, and v1 stays Current.
    async fn second_version(&self, v1: &str) -> Result<String> {
        self.apply("v2").await?;
        let first_step = self.wd["spec"]["rollout"]["steps"][0]["rampPercentage"]
            .as_f64()
            .context("the docs' WorkerDeployment has no Progressive steps")?;
        let deployment = format!("{}/{}", self.ns, self.name());
        let what = format!("{deployment} v2 ramping at {first_step} %");
        let v2 = wait::eventually(&what, T_ROLLOUT, || async {
            let (current, ramping, pct) =
                routing(self.temporal, &self.temporal_ns(), &deployment).await?;
            Ok(ramping
                .filter(|r| r != v1 && current.as_deref() == Some(v1))
                .filter(|_| (f64::from(pct) - first_step).abs() < 0.01))
        })
        .await?;
        let what = format!("{deployment} status: target {v2} ramping");
        wait::eventually(&what, T_ROLLOUT, || async {
            let obj = self.status().await?;
            let target = &obj["status"]["targetVersion"];
            let ramping = target["buildID"] == json!(v2)
                && target["rampPercentage"]
                    .as_f64()
                    .is_some_and(|p| (p - first_step).abs() < 0.01)
                && obj["status"]["currentVersion"]["buildID"] == json!(v1)
                && condition(&obj, "Ready").is_some_and(|c| c["reason"] == "Ramping");
            Ok((ramping && observed(&obj)).then_some(()))
        })
        .await
        .with_context(|| format!("last status: {}", self.last_status()))?;
        self.check_workers(&v2).await?;
        Ok(v2)
    }
}

async fn roll_out(r: Rollout<'_>) -> Result<String> {
    let v1 = r.first_version().await?;
    let v2 = r.second_version(&v1).await?;
    Ok(format!(
        "{} {}/{}: v1 {v1} Current, v2 {v2} ramping at the docs' first step",
        r.kinds.worker(),
        r.ns,
        r.name()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_docs_pair_and_the_seed_kind_pair_roll_out_with_our_controller() -> Result<()> {
    controller::init_tracing("warn,temporal_worker_controller=info");
    let build = GoControllerBuild::locate_async().await?;
    let (wd_doc, conn_doc) = docs_pair(&build.module_dir)?;
    println!(
        "docs pair: {} {} ({}) and Connection {} ({})",
        kind_of(&wd_doc.manifest),
        name_of(&wd_doc.manifest),
        wd_doc.source,
        name_of(&conn_doc.manifest),
        conn_doc.source
    );
    let (plane, client) = control_plane::shared_with_crds().await?;
    let dev = temporal_server::shared().await?;
    let temporal_ns = wd_doc.manifest["spec"]["workerOptions"]["temporalNamespace"]
        .as_str()
        .context("the docs' WorkerDeployment names no Temporal namespace")?;
    // The docs' Temporal namespace as written (this process's own dev server).
    dev.create_namespace(temporal_ns).await?;
    let kubelet = test_harness::kubelet::Kubelet::start(client.clone()).await?;
    let namespaces = [names::unique("go-docs"), names::unique("seed-kinds")];
    for ns in &namespaces {
        world::create_namespace(&client, ns).await?;
    }
    let id = test_harness::chart::install_identity(plane, &json!({}), CONTROLLER_NS).await?;
    let controller = controller::start(
        control_plane::client_from(&id.kubeconfig).await?,
        &controller::watching(&namespaces.join(","), IDENTITY),
    )
    .await?;
    let observer = dev.connect("go-yaml-observer").await?;
    let pair = |ns: &str, kinds: Kinds, queue: &str| Rollout {
        client: &client,
        kubelet: &kubelet,
        temporal: &observer,
        ns: ns.to_string(),
        kinds,
        wd: wd_doc.manifest.clone(),
        conn: adapt_connection(&conn_doc.manifest, kinds, &dev.address()),
        task_queue: queue.to_string(),
        last: std::sync::Mutex::new(Value::Null),
    };
    let (docs, seed) = tokio::join!(
        roll_out(pair(&namespaces[0], Kinds::Canonical, "go-docs-tq")),
        roll_out(pair(&namespaces[1], Kinds::Seed, "seed-kinds-tq")),
    );
    controller.stop().await;
    println!(
        "{}",
        docs.as_ref()
            .map_or_else(|e| format!("{e:#}"), Clone::clone)
    );
    println!(
        "{}",
        seed.as_ref()
            .map_or_else(|e| format!("{e:#}"), Clone::clone)
    );
    docs.context("the Go docs' WorkerDeployment + Connection")?;
    seed.context("the seed kinds' TemporalWorkerDeployment + TemporalConnection")?;
    Ok(())
}

// --- The migration guide's CRD hand-over ------------------------------------------------------

/// The Go CRD chart's release, as the Go docs install it.
const CRD_RELEASE: &str = "temporal-worker-controller-crds";
const RELEASE_NS: &str = "temporal-system";
const GUIDE: &str = "docs/migrating-from-go-controller.md";
const HANDOVER_HEADING: &str = "### 2. Hand the CRDs over";

/// The first `sh` block after the hand-over heading of the migration guide, run as written.
fn handover_script() -> Result<String> {
    let guide = std::fs::read_to_string(test_harness::repo_root().join(GUIDE))?;
    let section = guide
        .split(HANDOVER_HEADING)
        .nth(1)
        .with_context(|| format!("{GUIDE} has no heading {HANDOVER_HEADING:?}"))?;
    let body = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .with_context(|| format!("no sh block after {HANDOVER_HEADING:?} in {GUIDE}"))?;
    Ok(body.to_string())
}

/// `helm install` of the Go module's CRD chart with the real `helm` CLI (pinned Helm 4).
fn helm_install_go_crds(kubeconfig: &Path, chart: &Path) -> Result<()> {
    let request = json!({
        "action": "install", "kubeconfig": kubeconfig, "chart": chart, "release": CRD_RELEASE,
        "namespace": RELEASE_NS, "timeout": 120,
    });
    let result = test_harness::helm::helm_release(&request)?;
    ensure!(
        result["ok"] == true,
        "helm install of {CRD_RELEASE}: {result}"
    );
    Ok(())
}

/// Creates the Go docs' manifests its CRDs accept (skipping any they refuse) in `ns`;
/// returns `(kind, name, uid)` of each object.
async fn create_go_objects(
    client: &kube::Client,
    ns: &str,
    found: &[Found],
) -> Result<Vec<(String, String, String)>> {
    let mut made = Vec::new();
    for f in found {
        let kind = kind_of(&f.manifest).to_string();
        let name = name_of(&f.manifest).to_string();
        if made.iter().any(|(k, n, _)| *k == kind && *n == name) {
            continue;
        }
        let mut obj = f.manifest.clone();
        obj["metadata"]["namespace"] = json!(ns);
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &api_resource(&kind));
        let data: DynamicObject = serde_json::from_value(obj)?;
        match api.create(&PostParams::default(), &data).await {
            Ok(created) => made.push((kind, name, created.metadata.uid.unwrap_or_default())),
            Err(kube::Error::Api(e)) if (400..500).contains(&e.code) => {}
            Err(e) => return Err(e).context(format!("creating {kind} {name}")),
        }
    }
    Ok(made)
}

/// The CRDs of `dir`, by name.
fn crds_in(dir: &Path) -> Result<std::collections::BTreeMap<String, Value>> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(&path)?)?;
            out.insert(name_of(&crd).to_string(), crd);
        }
    }
    Ok(out)
}

/// `v` with every whole float written as an integer, as the API server returns YAML's `0.0`.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
            _ => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), normalized(v))).collect())
        }
        _ => v.clone(),
    }
}

/// What must be true of a live CRD once ours took it over: our schema, CEL rules and printer
/// columns, no deprecation, and no claim of Helm ownership.
fn check_taken_over(live: &Value, ours: &Value) -> Vec<String> {
    let name = name_of(live);
    let mut problems = Vec::new();
    let schema = |crd: &Value| normalized(&crd["spec"]["versions"][0]["schema"]);
    if schema(live) != schema(ours) {
        problems.push(format!("{name}: the served schema is not ours"));
    }
    let rules = |crd: &Value| -> Vec<Value> {
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
            .as_array()
            .map(|a| a.iter().map(|r| r["rule"].clone()).collect())
            .unwrap_or_default()
    };
    let columns = |crd: &Value| -> Vec<Value> {
        crd["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .map(|a| a.iter().map(|c| c["name"].clone()).collect())
            .unwrap_or_default()
    };
    if rules(live) != rules(ours) {
        problems.push(format!(
            "{name}: CEL rules {:?}, ours {:?}",
            rules(live),
            rules(ours)
        ));
    }
    if columns(live) != columns(ours) {
        problems.push(format!(
            "{name}: printer columns {:?}, ours {:?}",
            columns(live),
            columns(ours)
        ));
    }
    if live["spec"]["versions"][0]["deprecated"] == true {
        problems.push(format!("{name}: still deprecated"));
    }
    let helm_marks = !live["metadata"]["annotations"]["meta.helm.sh/release-name"].is_null()
        || !live["metadata"]["labels"]["app.kubernetes.io/managed-by"].is_null();
    if helm_marks {
        problems.push(format!("{name}: still marked as Helm's"));
    }
    problems
}

/// After the guide's commands: every object kept its UID, Helm has no record of the CRD
/// release, and every CRD of the Go chart is ours.
async fn check_handover(
    client: &kube::Client,
    ns: &str,
    objects: &[(String, String, String)],
    go_crds: &[String],
) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (kind, name, uid) in objects {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource(kind));
        match api.get_opt(name).await? {
            Some(o) if o.metadata.uid.as_deref() == Some(uid.as_str()) => {}
            Some(_) => problems.push(format!("{kind} {name} was re-created (new UID)")),
            None => problems.push(format!("{kind} {name} is gone")),
        }
    }
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), RELEASE_NS);
    let lp = kube::api::ListParams::default().labels(&format!("owner=helm,name={CRD_RELEASE}"));
    let records = secrets.list(&lp).await?.items.len();
    if records > 0 {
        problems.push(format!("Helm still has {records} records of {CRD_RELEASE}"));
    }
    let ours = crds_in(&control_plane::repo_crds_dir())?;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&()),
    );
    for name in go_crds {
        let Some(our) = ours.get(name) else {
            problems.push(format!(
                "{name} (a Go CRD) is not in crds/: the Go CRD would stay"
            ));
            continue;
        };
        let live = serde_json::to_value(crds.get(name).await?)?;
        problems.extend(check_taken_over(&live, our));
    }
    Ok(problems)
}

/// Waits until Helm's CRDs are Established (objects of their kinds can be created).
async fn wait_established(client: &kube::Client, names: &[String]) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        wait::eventually(
            &format!("CRD {name} Established"),
            Duration::from_secs(60),
            || async {
                let crd = api.get_opt(name).await?;
                let established = crd
                    .and_then(|c| c.status)
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                Ok(established.then_some(()))
            },
        )
        .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_crd_handover_keeps_every_object_and_leaves_only_our_crds() -> Result<()> {
    let build = GoControllerBuild::locate_async().await?;
    let script = handover_script()?;
    let plane = ControlPlane::start().await?;
    let client = plane.client().await?;
    world::create_namespace(&client, RELEASE_NS).await?;
    let chart = build.module_dir.join("helm").join(CRD_RELEASE);
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    tokio::task::spawn_blocking(move || helm_install_go_crds(&kubeconfig, &chart)).await??;
    let go_crds: Vec<String> = crds_in(&build.crds_dir)?.into_keys().collect();
    wait_established(&client, &go_crds).await?;
    let ns = names::unique("handover");
    world::create_namespace(&client, &ns).await?;
    let objects = create_go_objects(&client, &ns, &extract(&build.module_dir)?.found).await?;
    ensure!(
        objects.len() >= 5,
        "only {} objects created from the Go docs: {objects:?}",
        objects.len()
    );

    let out = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .env("KUBECONFIG", plane.kubeconfig_path())
        .current_dir(test_harness::repo_root())
        .output()
        .await?;
    ensure!(
        out.status.success(),
        "the guide's hand-over commands failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let problems = check_handover(&client, &ns, &objects, &go_crds).await?;
    println!(
        "hand-over: {} objects of the Go docs kept their UIDs; {} Go CRDs checked; problems: {}",
        objects.len()
            - problems
                .iter()
                .filter(|p| p.contains("UID") || p.contains("gone"))
                .count(),
        go_crds.len(),
        problems.len()
    );
    plane.stop();
    ensure!(
        problems.is_empty(),
        "after the guide's hand-over:\n{}",
        problems.join("\n")
    );
    Ok(())
}

#[test]
fn yaml_blocks_and_documents_are_split_as_written() {
    let md = "text\n```yaml\na: 1\n---\nb: 2\n```\n```bash\nkubectl x\n```\n```yml\nc: 3\n```\n";
    let blocks = yaml_blocks(md);
    assert_eq!(
        blocks,
        vec!["a: 1\n---\nb: 2\n".to_string(), "c: 3\n".to_string()]
    );
    assert_eq!(documents(&blocks[0]), vec!["a: 1\n", "b: 2\n"]);
}

#[test]
fn elisions_are_told_from_prose() {
    assert!(is_elided("data:\n  tls.crt: LS0tLS1CRUdJTi...\n"));
    assert!(is_elided("spec:\n  # ... rest of config\n"));
    assert!(is_elided("spec:\n  a: 1  # ... more\n"));
    assert!(!is_elided(
        "# the rule wraps it in sum(...) to collapse labels\nspec: {}\n"
    ));
    assert!(!is_elided("spec:\n  a: 1  # wraps it in sum(...)\n"));
}

#[test]
fn deliberate_refusals_match_only_their_manifests() {
    let wd =
        json!({"kind": "WorkerDeployment", "metadata": {"name": "a"}, "spec": {"replicas": 0}});
    let refused = Verdict::Refused("create: spec.replicas must be at least 1: ...".into());
    assert_eq!(deliberate(&wd, &refused), Some(0));
    // The same message for a manifest that does not hit it is no excuse.
    let ok =
        json!({"kind": "WorkerDeployment", "metadata": {"name": "a"}, "spec": {"replicas": 2}});
    assert_eq!(deliberate(&ok, &refused), None);
    assert_eq!(deliberate(&wd, &Verdict::Accepted), None);
    let mut probe = ok.clone();
    (REFUSALS[1].probe)(&mut probe);
    assert!((REFUSALS[1].applies)(&probe));
}
