//! API semantics: optimistic concurrency, generation, status subresource, garbage collection,
//! selectors, server-side apply, fault injection and the Deployment controller modes.

mod common;

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn cm(name: &str, labels: Value) -> Result<ConfigMap> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )?)
}

#[tokio::test]
async fn stale_resource_version_conflicts() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "occ").await?;
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let created = api
        .create(&PostParams::default(), &cm("c", json!({}))?)
        .await?;
    let mut first = created.clone();
    first.data = Some([("k".to_string(), "1".to_string())].into());
    let updated = api.replace("c", &PostParams::default(), &first).await?;
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let mut stale = created.clone();
    stale.data = Some([("k".to_string(), "2".to_string())].into());
    let status = common::api_error(api.replace("c", &PostParams::default(), &stale).await)?;
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    // A merge patch carrying a stale resourceVersion conflicts too.
    let rv = created.metadata.resource_version.unwrap_or_default();
    let status = common::api_error(
        api.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "data": {"k": "3"}})),
        )
        .await,
    )?;
    assert_eq!(status.code, 409);
    // Creating it again is AlreadyExists.
    let status = common::api_error(
        api.create(&PostParams::default(), &cm("c", json!({}))?)
            .await,
    )?;
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    // generateName yields a fresh name.
    let template: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}}))?;
    let made = api.create(&PostParams::default(), &template).await?;
    assert!(
        made.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("gen-") && n.len() == 9)
    );
    Ok(())
}

#[tokio::test]
async fn generation_and_status_subresource() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "gen").await?;
    let api = common::twds(&client, &ns);
    let pp = PatchParams::default();
    api.create(
        &PostParams::default(),
        &serde_json::from_value(common::twd("g"))?,
    )
    .await?;
    let generation = |o: &kube::api::DynamicObject| o.metadata.generation;
    // Metadata-only change: generation stays.
    let o = api
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await?;
    assert_eq!(generation(&o), Some(1));
    // Status through /status: stored, generation stays.
    let o = api
        .patch_status(
            "g",
            &pp,
            &Patch::Merge(json!({"status": {"versionCount": 3}})),
        )
        .await?;
    assert_eq!(generation(&o), Some(1));
    assert_eq!(o.data.pointer("/status/versionCount"), Some(&json!(3)));
    // Status through the main resource is ignored.
    let o = api
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"status": {"versionCount": 9}})),
        )
        .await?;
    assert_eq!(o.data.pointer("/status/versionCount"), Some(&json!(3)));
    // Spec through /status is ignored.
    let o = api
        .patch_status("g", &pp, &Patch::Merge(json!({"spec": {"replicas": 7}})))
        .await?;
    assert_eq!(o.data.pointer("/spec/replicas"), Some(&json!(2)));
    assert_eq!(generation(&o), Some(1));
    // Spec change bumps generation; a no-op patch changes nothing (not even resourceVersion).
    let o = api
        .patch("g", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await?;
    assert_eq!(generation(&o), Some(2));
    let again = api
        .patch("g", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await?;
    assert_eq!(again.metadata.resource_version, o.metadata.resource_version);
    Ok(())
}

#[tokio::test]
async fn owner_references_are_garbage_collected() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "gc").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({}))?)
        .await?;
    let uid = owner.metadata.uid.clone().unwrap_or_default();
    let dep = |name: &str, uid: &str| -> Result<Secret> {
        Ok(serde_json::from_value(
            json!({"metadata": {"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "controller": true}]}}),
        )?)
    };
    secrets
        .create(&PostParams::default(), &dep("child", &uid)?)
        .await?;
    secrets
        .create(
            &PostParams::default(),
            &dep("orphan-ref", "00000000-dead-beef-0000-000000000000")?,
        )
        .await?;
    // A dependent of a missing owner goes away; the live owner's dependent stays.
    common::eventually(
        Duration::from_secs(10),
        "dangling dependent deleted",
        || async { Ok(secrets.get_opt("orphan-ref").await?.is_none().then_some(())) },
    )
    .await?;
    assert!(secrets.get_opt("child").await?.is_some());
    cms.delete("owner", &DeleteParams::default()).await?;
    common::eventually(
        Duration::from_secs(10),
        "dependent deleted after owner",
        || async { Ok(secrets.get_opt("child").await?.is_none().then_some(())) },
    )
    .await?;
    // Orphan propagation keeps dependents and strips the reference.
    let owner = cms
        .create(&PostParams::default(), &cm("owner2", json!({}))?)
        .await?;
    let uid = owner.metadata.uid.clone().unwrap_or_default();
    secrets
        .create(&PostParams::default(), &dep("kept", &uid)?)
        .await?;
    cms.delete("owner2", &DeleteParams::orphan()).await?;
    let kept = secrets.get("kept").await?;
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    Ok(())
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "fg").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({}))?)
        .await?;
    let uid = owner.metadata.uid.clone().unwrap_or_default();
    let held: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}),
    )?;
    cms.create(&PostParams::default(), &held).await?;
    cms.delete("owner", &DeleteParams::foreground()).await?;
    // The owner waits (foregroundDeletion finalizer) while its dependent is held.
    let o = common::eventually(
        Duration::from_secs(10),
        "dependent marked for deletion",
        || async {
            let d = cms.get("held").await?;
            Ok(d.metadata.deletion_timestamp.is_some().then_some(d))
        },
    )
    .await?;
    assert!(o.metadata.deletion_timestamp.is_some());
    let owner_now = cms.get("owner").await?;
    assert!(
        owner_now
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_string())
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    common::eventually(Duration::from_secs(10), "owner gone", || async {
        Ok(cms.get_opt("owner").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn label_and_field_selectors() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "sel").await?;
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    api.create(
        &PostParams::default(),
        &cm("a", json!({"app": "web", "tier": "fe"}))?,
    )
    .await?;
    api.create(&PostParams::default(), &cm("b", json!({"app": "api"}))?)
        .await?;
    api.create(&PostParams::default(), &cm("c", json!({}))?)
        .await?;
    let names = |sel: &str| {
        let api = api.clone();
        let sel = sel.to_string();
        async move {
            let l = api.list(&ListParams::default().labels(&sel)).await?;
            let mut n: Vec<String> = l
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            n.sort();
            anyhow::Ok(n)
        }
    };
    assert_eq!(names("app=web").await?, vec!["a"]);
    assert_eq!(names("app!=web").await?, vec!["b", "c"]);
    assert_eq!(names("app in (web,api)").await?, vec!["a", "b"]);
    assert_eq!(names("app notin (web)").await?, vec!["b", "c"]);
    assert_eq!(names("tier").await?, vec!["a"]);
    assert_eq!(names("!app").await?, vec!["c"]);
    let l = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await?;
    assert_eq!(l.items.len(), 1);
    let status = common::api_error(api.list(&ListParams::default().fields("data.k=v")).await)?;
    assert_eq!(status.code, 400);
    let status = common::api_error(api.list(&ListParams::default().labels("a in ()")).await)?;
    assert_eq!(status.code, 400);
    Ok(())
}

#[tokio::test]
async fn server_side_apply_creates_merges_and_conflicts() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "ssa").await?;
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let body = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": data});
    let a = PatchParams::apply("alpha");
    let o = api
        .patch("s", &a, &Patch::Apply(body(json!({"x": "1", "y": "2"}))))
        .await?;
    assert_eq!(o.data.clone().unwrap_or_default().len(), 2);
    let mf = o.metadata.managed_fields.clone().unwrap_or_default();
    assert!(
        mf.iter()
            .any(|m| m.manager.as_deref() == Some("alpha")
                && m.operation.as_deref() == Some("Apply"))
    );
    // Another manager adds a key; the first drops `y`, which disappears, while `z` stays.
    api.patch(
        "s",
        &PatchParams::apply("beta"),
        &Patch::Apply(body(json!({"z": "3"}))),
    )
    .await?;
    let o = api
        .patch("s", &a, &Patch::Apply(body(json!({"x": "1"}))))
        .await?;
    let data = o.data.unwrap_or_default();
    assert_eq!(data.get("y"), None);
    assert_eq!(data.get("z").map(String::as_str), Some("3"));
    // Changing a field owned by someone else conflicts unless forced.
    let status = common::api_error(
        api.patch(
            "s",
            &PatchParams::apply("beta"),
            &Patch::Apply(body(json!({"x": "9"}))),
        )
        .await,
    )?;
    assert_eq!(status.code, 409);
    assert!(
        status.message.contains("conflict with \"alpha\""),
        "{}",
        status.message
    );
    let o = api
        .patch(
            "s",
            &PatchParams::apply("beta").force(),
            &Patch::Apply(body(json!({"x": "9", "z": "3"}))),
        )
        .await?;
    assert_eq!(
        o.data.unwrap_or_default().get("x").map(String::as_str),
        Some("9")
    );
    // A merge patch by another writer takes ownership, so the applier now conflicts with it.
    api.patch(
        "s",
        &PatchParams {
            field_manager: Some("gamma".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"data": {"x": "10"}})),
    )
    .await?;
    let status = common::api_error(
        api.patch(
            "s",
            &PatchParams::apply("beta"),
            &Patch::Apply(body(json!({"x": "11", "z": "3"}))),
        )
        .await,
    )?;
    assert!(
        status.message.contains("conflict with \"gamma\""),
        "{}",
        status.message
    );
    Ok(())
}

#[tokio::test]
async fn fault_injection() -> Result<()> {
    // Faults are server-wide, so this test gets an emulator of its own.
    let emu = kube_emulator::Emulator::start(kube_emulator::EmulatorOptions::default()).await?;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "faults").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &cm("f", json!({}))?)
        .await?;
    // 500 rather than 503: kube-rs retries 503s by itself.
    emu.faults().fail_next("get", "configmaps", 2, 500);
    for _ in 0..2 {
        let status = common::api_error(api.get("f").await)?;
        assert_eq!(status.code, 500);
        assert!(status.message.contains("injected"), "{}", status.message);
    }
    api.get("f").await?;
    // Subresources are addressed separately.
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deps.create(
        &PostParams::default(),
        &serde_json::from_value(common::deployment("fd", 1))?,
    )
    .await?;
    emu.faults()
        .fail_next("patch", "deployments/status", 1, 500);
    deps.patch(
        "fd",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await?;
    let status = common::api_error(
        deps.patch_status(
            "fd",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {}})),
        )
        .await,
    )?;
    assert_eq!(status.code, 500);
    // Latency applies to every request.
    emu.faults().set_latency(Duration::from_millis(300));
    let t = Instant::now();
    api.get("f").await?;
    let took = t.elapsed();
    emu.faults().set_latency(Duration::ZERO);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    emu.shutdown().await;
    Ok(())
}

fn condition(d: &Deployment, t: &str) -> Option<String> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

#[tokio::test]
async fn deployments_auto_ready() -> Result<()> {
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "auto").await?;
    let api: Api<Deployment> = Api::namespaced(client, &ns);
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(common::deployment("d", 3))?,
        )
        .await?;
    // Server-side defaults are visible.
    let spec = created.spec.clone().unwrap_or_default();
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(
        spec.strategy.and_then(|s| s.type_),
        Some("RollingUpdate".into())
    );
    let ready = |want: i32, observed: i64| {
        let api = api.clone();
        async move {
            let d = api.get("d").await?;
            let st = d.status.clone().unwrap_or_default();
            let ok = st.observed_generation == Some(observed)
                && st.ready_replicas == Some(want)
                && st.available_replicas == Some(want)
                && condition(&d, "Available").as_deref() == Some("True");
            Ok(ok.then_some(d))
        }
    };
    let d = common::eventually(Duration::from_secs(10), "3 ready replicas", || ready(3, 1)).await?;
    assert_eq!(condition(&d, "Progressing").as_deref(), Some("True"));
    // Scaling through /scale bumps the generation and the controller follows.
    api.patch_scale(
        "d",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await?;
    let d = common::eventually(Duration::from_secs(10), "5 ready replicas", || ready(5, 2)).await?;
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(5));
    let scale = api.get_scale("d").await?;
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(5));
    Ok(())
}

#[tokio::test]
async fn deployments_manual_readiness() -> Result<()> {
    let emu = common::manual().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "manual").await?;
    let api: Api<Deployment> = Api::namespaced(client, &ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(common::deployment("m", 2))?,
    )
    .await?;
    let d = common::eventually(Duration::from_secs(10), "observed generation", || async {
        let d = api.get("m").await?;
        Ok((d.status.as_ref().and_then(|s| s.observed_generation) == Some(1)).then_some(d))
    })
    .await?;
    let st = d.status.clone().unwrap_or_default();
    assert_eq!(st.replicas, Some(2));
    assert_eq!(st.updated_replicas, Some(2));
    assert_eq!(st.ready_replicas, None);
    assert_eq!(condition(&d, "Available").as_deref(), Some("False"));

    emu.set_deployment_ready(&ns, "m", 2);
    common::eventually(
        Duration::from_secs(10),
        "ready after set_deployment_ready",
        || async {
            let d = api.get("m").await?;
            let ok = d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
                && condition(&d, "Available").as_deref() == Some("True");
            Ok(ok.then_some(()))
        },
    )
    .await?;

    // A client's own /status write (a kubelet stand-in) is kept, also across metadata changes.
    let patch = json!({"status": {"readyReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "False", "reason": "Kubelet", "message": "one pod down"}]}});
    api.patch_status("m", &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    api.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await?;
    let d = api.get("m").await?;
    assert_eq!(d.status.as_ref().and_then(|s| s.ready_replicas), Some(1));
    assert_eq!(condition(&d, "Available").as_deref(), Some("False"));

    // Zero replicas counts as available, like the real controller.
    api.create(
        &PostParams::default(),
        &serde_json::from_value(common::deployment("zero", 0))?,
    )
    .await?;
    common::eventually(
        Duration::from_secs(10),
        "zero-replica deployment available",
        || async {
            let d = api.get("zero").await?;
            Ok((condition(&d, "Available").as_deref() == Some("True")).then_some(()))
        },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn leases_support_optimistic_apply() -> Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let emu = common::auto().await;
    let client = emu.client().await?;
    let ns = common::namespace(&client, "lease").await?;
    let api: Api<Lease> = Api::namespaced(client, &ns);
    let body = |holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})
    };
    api.patch("l", &PatchParams::apply("a"), &Patch::Apply(body("a")))
        .await?;
    // Another identity cannot take the lease without force.
    let status = common::api_error(
        api.patch("l", &PatchParams::apply("b"), &Patch::Apply(body("b")))
            .await,
    )?;
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    // After the holder releases (strategic patch to null), it can.
    api.patch(
        "l",
        &PatchParams {
            field_manager: Some("a".into()),
            ..Default::default()
        },
        &Patch::Strategic(json!({"spec": {"holderIdentity": null, "leaseDurationSeconds": null}})),
    )
    .await?;
    let l = api
        .patch("l", &PatchParams::apply("b"), &Patch::Apply(body("b")))
        .await?;
    assert_eq!(l.spec.and_then(|s| s.holder_identity), Some("b".into()));
    Ok(())
}
