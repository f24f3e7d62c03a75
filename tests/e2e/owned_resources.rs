//! TemporalWorkerOwnedResource end to end (issue 14): per-version copies applied by the
//! controller, garbage-collected by kube-controller-manager with their versioned Deployment,
//! removed with their TWOR, and reported per version.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use temporal_worker_controller::api::KindSet;
use temporal_worker_controller::api::TemporalWorkerOwnedResource;
use temporal_worker_controller::api::twor::OwnedVersionStatus;

use crate::support::*;

const T: Duration = Duration::from_secs(120);

fn twors(c: &Case) -> Api<TemporalWorkerOwnedResource> {
    TemporalWorkerOwnedResource::api(c.client.clone(), &c.ns, KindSet::Seed)
}

async fn apply_twor(c: &Case, name: &str, worker: &str, object: Value) -> Result<()> {
    c.apply(test_harness::manifests::owned_resource(
        name, worker, object,
    ))
    .await
}

fn copies_api(
    c: &Case,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(c.client.clone(), &c.ns, &ar)
}

fn hpas(c: &Case) -> Api<DynamicObject> {
    copies_api(
        c,
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
    )
}

fn pdbs(c: &Case) -> Api<DynamicObject> {
    copies_api(
        c,
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    )
}

/// The copies a TWOR made, as `(build ID label, object)`, sorted by build ID.
async fn copies_of(api: &Api<DynamicObject>, twor: &str) -> Result<Vec<(String, Value)>> {
    let list = api
        .list(&ListParams::default().labels(&format!("temporal.io/owned-resource={twor}")))
        .await?;
    let mut out: Vec<(String, Value)> = list
        .items
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .map(|o| {
            let build = o
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("temporal.io/build-id"))
                .cloned()
                .unwrap_or_default();
            (build, serde_json::to_value(&o).unwrap_or_default())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn versions(t: &TemporalWorkerOwnedResource) -> Vec<OwnedVersionStatus> {
    t.status
        .as_ref()
        .map(|s| s.versions.clone())
        .unwrap_or_default()
}

fn twor_condition<'a>(
    t: &'a TemporalWorkerOwnedResource,
    type_: &str,
) -> Option<(&'a str, &'a str, &'a str)> {
    t.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Polls the TWOR until `pred` holds for the status of its current generation.
async fn wait_twor(
    c: &Case,
    name: &str,
    what: &str,
    pred: impl Fn(&TemporalWorkerOwnedResource) -> bool,
) -> Result<TemporalWorkerOwnedResource> {
    eventually(what, T, || async {
        let t = twors(c).get(name).await?;
        let current =
            t.status.as_ref().and_then(|s| s.observed_generation) == t.metadata.generation;
        Ok((current && pred(&t)).then_some(t))
    })
    .await
    .with_context(|| format!("{name}: {what}"))
}

/// Build IDs whose status entry is applied, sorted.
fn applied(t: &TemporalWorkerOwnedResource) -> Vec<String> {
    let mut v: Vec<String> = versions(t)
        .into_iter()
        .filter(|v| v.applied)
        .map(|v| v.build_id)
        .collect();
    v.sort();
    v
}

/// Deploys `tag` and waits until it is the TWD's Current version; returns its build ID.
async fn roll_to(c: &Case, twd: &str, tag: &str) -> Result<String> {
    let long_sunset = json!({"sunset": {"scaledownDelay": "1h", "deleteDelay": "1h"}});
    c.apply_twd(twd, tag, json!({"strategy": "AllAtOnce"}), long_sunset)
        .await?;
    let before = c.get_twd(twd).await?.metadata.generation;
    let t = c
        .wait_twd(twd, &format!("{tag} current"), T, |t| {
            is_ready(t) && t.metadata.generation == before
        })
        .await?;
    current_build(&t).context("Ready without a current version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_per_live_version_collected_with_its_deployment_and_removed_with_its_twor()
-> Result<()> {
    let c = case("twor-hpa").await?;
    let v1 = roll_to(&c, "pay", "v1").await?;
    attach_an_hpa_to_v1(&c, &v1).await?;
    let v2 = a_new_version_gets_its_own_hpa(&c, &v1).await?;
    the_garbage_collector_takes_v1s_hpa_with_its_deployment(&c, &v1, &v2).await?;
    a_rollback_to_v1_gets_its_hpa_again(&c, &v1).await?;

    // Deleting the TWOR removes every copy, then the TWOR itself.
    twors(&c).delete("scaler", &DeleteParams::default()).await?;
    eventually("TWOR and its HPAs gone", T, || async {
        let left = copies_of(&hpas(&c), "scaler").await?;
        let gone = twors(&c).get_opt("scaler").await?.is_none();
        Ok((left.is_empty() && gone).then_some(()))
    })
    .await?;
    Ok(())
}

/// The TWOR applies one HPA for v1, targeting v1's Deployment, and the TWD controls the TWOR.
async fn attach_an_hpa_to_v1(c: &Case, v1: &str) -> Result<()> {
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": null, "minReplicas": 1, "maxReplicas": 3}});
    apply_twor(c, "scaler", "pay", hpa).await?;
    let t = wait_twor(c, "scaler", "v1 applied", |t| {
        applied(t) == [v1.to_string()]
            && twor_condition(t, "Ready")
                .is_some_and(|(s, r, _)| s == "True" && r == "AllVersionsApplied")
    })
    .await?;
    let twd_uid = c.get_twd("pay").await?.metadata.uid;
    ensure!(
        t.metadata.owner_references.iter().flatten().any(|o| {
            o.kind == "TemporalWorkerDeployment"
                && o.controller == Some(true)
                && Some(&o.uid) == twd_uid.as_ref()
        }),
        "the TWD is the TWOR's controller: {:?}",
        t.metadata.owner_references
    );
    let copies = copies_of(&hpas(c), "scaler").await?;
    ensure!(copies.len() == 1, "one HPA for one version: {copies:?}");
    ensure!(
        copies[0].1["spec"]["scaleTargetRef"]
            == json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment_of("pay", v1)})
    );
    ensure!(copies[0].1["metadata"]["name"] == json!(versions(&t)[0].resource_name));
    Ok(())
}

/// A new version gets its own copy; the old one keeps its own. Returns v2.
async fn a_new_version_gets_its_own_hpa(c: &Case, v1: &str) -> Result<String> {
    let v2 = roll_to(c, "pay", "v2").await?;
    let t = wait_twor(c, "scaler", "both versions applied", |t| {
        applied(t).len() == 2
    })
    .await?;
    let copies = eventually("two HPAs", T, || async {
        let copies = copies_of(&hpas(c), "scaler").await?;
        Ok((copies.len() == 2).then_some(copies))
    })
    .await?;
    for (build, hpa) in &copies {
        ensure!(
            hpa["spec"]["scaleTargetRef"]["name"] == json!(deployment_of("pay", build)),
            "{hpa}"
        );
        ensure!(hpa["metadata"]["ownerReferences"][0]["kind"] == "Deployment");
    }
    let mut builds: Vec<&String> = copies.iter().map(|(b, _)| b).collect();
    builds.sort();
    let mut want = vec![v1, v2.as_str()];
    want.sort();
    ensure!(builds == want && applied(&t).len() == 2);
    Ok(v2)
}

/// The version's Deployment goes: kube-controller-manager's garbage collector takes its HPA.
async fn the_garbage_collector_takes_v1s_hpa_with_its_deployment(
    c: &Case,
    v1: &str,
    v2: &str,
) -> Result<()> {
    let _ = c
        .deployments()
        .delete(&deployment_of("pay", v1), &DeleteParams::background())
        .await;
    eventually("v1's HPA collected", T, || async {
        let copies = copies_of(&hpas(c), "scaler").await?;
        Ok((copies.len() == 1 && copies[0].0 == v2).then_some(()))
    })
    .await?;
    wait_twor(c, "scaler", "status lists only v2", |t| {
        applied(t) == [v2.to_string()]
    })
    .await?;
    Ok(())
}

/// Rolled back to v1: its new Deployment gets a copy again.
async fn a_rollback_to_v1_gets_its_hpa_again(c: &Case, v1: &str) -> Result<()> {
    ensure!(
        roll_to(c, "pay", "v1").await? == v1,
        "rolled back to another build"
    );
    eventually("v1's HPA back", T, || async {
        let copies = copies_of(&hpas(c), "scaler").await?;
        let builds: Vec<&str> = copies.iter().map(|(b, _)| b.as_str()).collect();
        Ok((builds.len() == 2 && builds.contains(&v1)).then_some(()))
    })
    .await?;
    Ok(())
}

/// A ValidatingAdmissionPolicy in the case's namespace that lets only `allowed`'s PDB in.
async fn allow_pdb_only_for(c: &Case, allowed: &str) -> Result<()> {
    let name = format!("pdb-only-{}", c.ns);
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["policy"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["poddisruptionbudgets"]}]},
            "validations": [{
                "expression": format!("has(object.metadata.labels) && object.metadata.labels[?'temporal.io/build-id'].orValue('') == '{allowed}'"),
                "message": format!("only build {allowed} may have a PodDisruptionBudget here")
            }]
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": c.ns}}}}
    });
    for (obj, plural, kind) in [
        (
            policy,
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
        ),
        (
            binding,
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
        ),
    ] {
        let ar = ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(c.client.clone(), &ar);
        api.create(&PostParams::default(), &serde_json::from_value(obj)?)
            .await?;
    }
    // The policy takes effect asynchronously: probe with a dry-run until it denies.
    let pdbs = pdbs(c);
    let probe: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "probe", "labels": {"temporal.io/build-id": "other"}},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"x": "y"}}}}),
    )?;
    eventually("the admission policy enforced", T, || async {
        let res = pdbs
            .create(
                &PostParams {
                    dry_run: true,
                    ..Default::default()
                },
                &probe,
            )
            .await;
        Ok(res.is_err().then_some(()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_and_keda_copies_get_version_values_and_a_refused_version_is_reported() -> Result<()> {
    let c = case("twor-pdb").await?;
    let v1 = roll_to(&c, "pay", "v1").await?;
    allow_pdb_only_for(&c, &v1).await?;
    let v2 = roll_to(&c, "pay", "v2").await?;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "spec": {"minAvailable": 1, "selector": {"matchLabels": null}}});
    apply_twor(&c, "budget", "pay", pdb).await?;
    let so = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "spec": {"scaleTargetRef": {}, "minReplicaCount": 1, "maxReplicaCount": 4, "triggers": [{"type": "temporal",
            "metadata": {"workerDeploymentName": "", "workerDeploymentBuildId": "", "namespace": "",
                "taskQueue": "", "endpoint": "temporal:7233", "targetQueueSize": "5"}}]}});
    apply_twor(&c, "keda", "pay", so).await?;
    check_v2s_pdb_is_refused_and_named(&c, &v1, &v2).await?;
    let pdbs = pdbs(&c);
    check_v1s_pdb_selects_its_pods(&c, &pdbs, &v1).await?;
    let sos = copies_api(&c, "keda.sh", "v1alpha1", "ScaledObject", "scaledobjects");
    check_scaled_objects_get_version_values(&c, &sos).await?;
    for (name, api) in [("budget", &pdbs), ("keda", &sos)] {
        twors(&c).delete(name, &DeleteParams::default()).await?;
        eventually("copies removed with their TWOR", T, || async {
            Ok(copies_of(api, name).await?.is_empty().then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// v2's PDB is refused by the API server; v1's is applied; Ready=False/ApplyFailed names v2.
async fn check_v2s_pdb_is_refused_and_named(c: &Case, v1: &str, v2: &str) -> Result<()> {
    let t = wait_twor(c, "budget", "v1 applied, v2 refused", |t| {
        let v = versions(t);
        v.len() == 2 && applied(t) == [v1.to_string()]
    })
    .await?;
    let refused = versions(&t)
        .into_iter()
        .find(|v| v.build_id == v2)
        .context("v2 entry")?;
    ensure!(
        refused
            .message
            .contains(&format!("only build {v1} may have a PodDisruptionBudget")),
        "{refused:?}"
    );
    let (status, reason, message) = twor_condition(&t, "Ready").context("Ready")?;
    ensure!(
        status == "False"
            && reason == "ApplyFailed"
            && message.contains(v2)
            && !message.contains(&format!("{v1}:")),
        "{message}"
    );
    ensure!(twor_condition(&t, "Stalled").is_some_and(|(s, _, _)| s == "True"));
    Ok(())
}

/// Only v1's PDB exists, selecting v1's Pods.
async fn check_v1s_pdb_selects_its_pods(
    c: &Case,
    pdbs: &Api<DynamicObject>,
    v1: &str,
) -> Result<()> {
    let copies = copies_of(pdbs, "budget").await?;
    ensure!(copies.len() == 1 && copies[0].0 == v1, "{copies:?}");
    let dep = c.deployments().get(&deployment_of("pay", v1)).await?;
    let selector = dep.spec.selector.match_labels.context("selector")?;
    ensure!(
        copies[0].1["spec"]["selector"]["matchLabels"] == json!(selector),
        "{}",
        copies[0].1
    );
    Ok(())
}

/// The real API server stores the ScaledObjects with the trigger metadata filled per version.
async fn check_scaled_objects_get_version_values(c: &Case, sos: &Api<DynamicObject>) -> Result<()> {
    wait_twor(c, "keda", "both ScaledObjects applied", |t| {
        applied(t).len() == 2
    })
    .await?;
    let copies = copies_of(sos, "keda").await?;
    ensure!(copies.len() == 2, "{copies:?}");
    for (build, so) in &copies {
        let meta = &so["spec"]["triggers"][0]["metadata"];
        ensure!(
            meta["workerDeploymentName"] == json!(c.temporal_deployment_name("pay")),
            "{meta}"
        );
        ensure!(
            meta["workerDeploymentBuildId"] == json!(build)
                && meta["namespace"] == json!(c.temporal_ns),
            "{meta}"
        );
        ensure!(meta["taskQueue"] == json!(c.task_queue) && meta["targetQueueSize"] == "5");
        ensure!(so["spec"]["scaleTargetRef"]["name"] == json!(deployment_of("pay", build)));
    }
    Ok(())
}

/// The controller's writes to Deployment `name` (spec or scale) among `events`.
fn controller_writes_to(
    events: &[test_harness::control_plane::AuditEvent],
    user: &str,
    ns: &str,
    name: &str,
) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.acting_user() == user && e.is_write())
        .filter(|e| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| o.resource == "deployments" && o.namespace == ns && o.name == name)
        })
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_above_spec_replicas_scales_the_version_and_the_controller_leaves_it() -> Result<()>
{
    let c = case("twor-up").await?;
    let v1 = roll_to(&c, "pay", "v1").await?;
    let dep = deployment_of("pay", &v1);
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": {}, "minReplicas": 2, "maxReplicas": 3}});
    apply_twor(&c, "scaler", "pay", hpa).await?;
    // kube-controller-manager's HPA controller raises the Deployment to minReplicas.
    eventually("the HPA scales v1 to 2 ready pods", T, || async {
        let d = c.deployments().get(&dep).await?;
        let want = d.spec.replicas == Some(2)
            && d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2);
        Ok(want.then_some(()))
    })
    .await?;
    let log = test_harness::chart::e2e_audit_log(env!("CARGO_TARGET_TMPDIR"));
    let (user, _) =
        test_harness::chart::rendered_grants(&test_harness::chart::e2e_values(), CONTROLLER_NS)?;
    let seen = test_harness::control_plane::audit::read(&log)?.len();

    // A new generation makes the controller reconcile (and report) again; its writes come
    // before its status write in the audit log.
    c.apply_twd(
        "pay",
        "v1",
        json!({"strategy": "AllAtOnce"}),
        json!({"sunset": {"scaledownDelay": "2h", "deleteDelay": "1h"}}),
    )
    .await?;
    c.wait_twd("pay", "the new generation reported", T, is_ready)
        .await?;
    let events = eventually(
        "the controller's status write in the audit log",
        T,
        || async {
            let events = test_harness::control_plane::audit::read(&log)?;
            let reported = events[seen.min(events.len())..].iter().any(|e| {
                e.acting_user() == user
                    && e.object_ref.as_ref().is_some_and(|o| {
                        o.resource == "temporalworkerdeployments"
                            && o.subresource == "status"
                            && o.namespace == c.ns
                    })
            });
            Ok(reported.then_some(events))
        },
    )
    .await?;
    let writes = controller_writes_to(&events[seen..], &user, &c.ns, &dep);
    ensure!(
        writes.is_empty(),
        "the controller wrote v1's Deployment after the HPA took over: {writes:?}"
    );
    let d = c.deployments().get(&dep).await?;
    ensure!(d.spec.replicas == Some(2), "replicas left to the HPA");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_object_is_reported_and_a_kind_change_replaces_the_copies() -> Result<()> {
    let c = case("twor-kind").await?;
    let v1 = roll_to(&c, "pay", "v1").await?;
    // Scale-to-zero is refused by the controller's own rules, with the webhook's message
    // (word for word), before any version is tried.
    let zero = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": {}, "minReplicas": 0, "maxReplicas": 3}});
    let rules_say = temporal_worker_controller::owned::validate::check(
        &zero,
        temporal_worker_controller::owned::validate::DEFAULT_ALLOWED_KINDS,
    )
    .err()
    .context("the rules refuse scale-to-zero")?
    .to_string();
    apply_twor(&c, "guard", "pay", zero).await?;
    let t = wait_twor(&c, "guard", "refused by the rules", |t| {
        twor_condition(t, "Ready").is_some_and(|(s, r, _)| s == "False" && r == "ApplyFailed")
    })
    .await?;
    let (_, _, message) = twor_condition(&t, "Ready").context("Ready")?;
    ensure!(
        message == rules_say && message.contains("minReplicas must not be 0"),
        "{message}"
    );
    ensure!(twor_condition(&t, "Stalled").is_some_and(|(s, _, _)| s == "True"));
    ensure!(copies_of(&hpas(&c), "guard").await?.is_empty());

    // Fixed, it is applied; then its kind changes: the HPA goes, a PDB takes its place.
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3}});
    apply_twor(&c, "guard", "pay", hpa).await?;
    wait_twor(&c, "guard", "the HPA applied", |t| {
        applied(t) == [v1.clone()]
    })
    .await?;
    ensure!(copies_of(&hpas(&c), "guard").await?.len() == 1);
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {}}}});
    apply_twor(&c, "guard", "pay", pdb).await?;
    wait_twor(&c, "guard", "the PDB applied", |t| {
        versions(t).iter().all(|v| v.kind == "PodDisruptionBudget") && applied(t) == [v1.clone()]
    })
    .await?;
    let pdbs = pdbs(&c);
    eventually("the HPA replaced by a PDB", T, || async {
        let hpa_left = copies_of(&hpas(&c), "guard").await?.len();
        let pdb_made = copies_of(&pdbs, "guard").await?.len();
        Ok((hpa_left == 0 && pdb_made == 1).then_some(()))
    })
    .await?;
    twors(&c).delete("guard", &DeleteParams::default()).await?;
    eventually("the PDB removed with its TWOR", T, || async {
        Ok(copies_of(&pdbs, "guard").await?.is_empty().then_some(()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_a_named_object_and_a_new_worker_ref() -> Result<()> {
    let c = case("twor-cel").await?;
    // In progress from the first read: the API server fills the status default.
    let fresh: TemporalWorkerOwnedResource =
        serde_json::from_value(test_harness::manifests::owned_resource(
            "fresh",
            "pay",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"}),
        ))?;
    let created = twors(&c)
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &fresh,
        )
        .await?;
    ensure!(
        twor_condition(&created, "Ready")
            .is_some_and(|(s, r, _)| s == "Unknown" && r == "WaitingForController"),
        "{:?}",
        created.status
    );
    let named = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "mine"}, "spec": {"maxUnavailable": 1}});
    let err = apply_twor(&c, "named", "pay", named)
        .await
        .err()
        .context("a named object was admitted")?;
    ensure!(
        format!("{err:#}").contains("metadata.name must not be set"),
        "{err:#}"
    );
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": {"maxUnavailable": 1}});
    apply_twor(&c, "budget", "pay", pdb.clone()).await?;
    let err = apply_twor(&c, "budget", "other", pdb)
        .await
        .err()
        .context("workerRef.name changed")?;
    ensure!(
        format!("{err:#}").contains("the worker reference is immutable"),
        "{err:#}"
    );
    // The TWOR without its worker reads as waiting, not failed.
    let t = wait_twor(&c, "budget", "waiting for its worker", |t| {
        twor_condition(t, "Ready").is_some_and(|(_, r, _)| r == "WorkerDeploymentNotFound")
    })
    .await?;
    ensure!(twor_condition(&t, "Reconciling").is_some_and(|(s, _, _)| s == "True"));
    twors(&c).delete("budget", &DeleteParams::default()).await?;
    eventually("the TWOR deleted", T, || async {
        Ok(twors(&c).get_opt("budget").await?.is_none().then_some(()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sunset_removes_the_autoscaler_copy_before_scaling_the_version_to_zero() -> Result<()> {
    let c = case("twor-sunset").await?;
    let v1 = roll_to(&c, "pay", "v1").await?;
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": {}, "minReplicas": 1, "maxReplicas": 3}});
    apply_twor(&c, "scaler", "pay", hpa).await?;
    wait_twor(&c, "scaler", "v1 applied", |t| applied(t) == [v1.clone()]).await?;
    let copy = copies_of(&hpas(&c), "scaler")
        .await?
        .into_iter()
        .find(|(b, _)| *b == v1)
        .and_then(|(_, h)| h["metadata"]["name"].as_str().map(str::to_string))
        .context("v1's HPA")?;

    // v2 replaces v1, whose sunset is short: v1 drains and is scaled to 0 a second later.
    let short = json!({"sunset": {"scaledownDelay": "1s", "deleteDelay": "1h"}});
    c.apply_twd("pay", "v2", json!({"strategy": "AllAtOnce"}), short)
        .await?;
    let dep = deployment_of("pay", &v1);
    eventually("v1 scaled to 0 at its sunset", T, || async {
        let d = c.deployments().get(&dep).await?;
        Ok((d.spec.replicas == Some(0)).then_some(()))
    })
    .await?;

    // The audit log orders the controller's writes: v1's HPA went before v1's scale to 0.
    let log = test_harness::chart::e2e_audit_log(env!("CARGO_TARGET_TMPDIR"));
    let (user, _) =
        test_harness::chart::rendered_grants(&test_harness::chart::e2e_values(), CONTROLLER_NS)?;
    let events = test_harness::control_plane::audit::read(&log)?;
    let position = |pred: &dyn Fn(&test_harness::control_plane::AuditEvent) -> bool| {
        events
            .iter()
            .position(|e| e.acting_user() == user && e.is_write() && pred(e))
    };
    let copy_deleted = position(&|e| {
        e.verb == "delete"
            && e.object_ref.as_ref().is_some_and(|o| {
                o.resource == "horizontalpodautoscalers" && o.namespace == c.ns && o.name == copy
            })
    })
    .context("no delete of v1's HPA copy by the controller")?;
    // The sunset scale-down is an update of the Deployment itself (it records the time of the
    // scale-down in the same write); other scalings use the scale subresource.
    let scaled_down = position(&|e| {
        e.object_ref.as_ref().is_some_and(|o| {
            // A sunset scale-down is a replace of the Deployment (it records when it
            // happened, see planner/sunset.rs); other scalings use the scale subresource.
            o.resource == "deployments"
                && (o.subresource == "scale" || (e.verb == "update" && o.subresource.is_empty()))
                && o.namespace == c.ns
                && o.name == dep
        })
    })
    .context("no scale of v1 by the controller")?;
    ensure!(
        copy_deleted < scaled_down,
        "v1 was scaled to 0 (audit #{scaled_down}) before its HPA was removed (#{copy_deleted})"
    );
    Ok(())
}
