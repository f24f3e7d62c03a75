//! One test per take-over rule ([`super`]), and the plan a take-over produces.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::*;
use crate::api::twd::{TargetVersion, VersionInfo, VersionStatus};
use crate::planner::model::{PlanInput, RoutingChange, UpdateReason};
use crate::planner::plan;
use crate::temporal::state::RoutingInstall;

const GO_ID: &str = "twc/temporal-system/5f0c2a4e-8b1d-4c3e-9a7f-0123456789ab";
const UID: &str = "5f0c2a4e-8b1d-4c3e-9a7f-0123456789ab";

fn ready(reason: &str, observed: Option<i64>) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: observed,
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
    }
}

/// The Go controller's status: target `build`, `Ready` for generation `observed`.
fn go_status(build: &str, reason: &str, observed: Option<i64>) -> TemporalWorkerDeploymentStatus {
    TemporalWorkerDeploymentStatus {
        target_version: Some(TargetVersion {
            version: VersionInfo {
                build_id: build.into(),
                status: VersionStatus::Ramping,
                deployment: None,
                deployment_name: None,
                task_queues: Vec::new(),
                managed_by: None,
                healthy_since: None,
                replicas: None,
                ready_replicas: None,
            },
            ramp_percentage: None,
            ramping_since: None,
            ramp_last_modified_at: None,
            current_step: None,
            step_started_at: None,
            next_step_at: None,
            gate_workflows: vec![],
            test_workflows: vec![],
        }),
        conditions: vec![ready(reason, observed)],
        ..Default::default()
    }
}

const OURS: &str = "536fd32289b71d95f4ed7c4e68ca84c0503088132aa85ef8874c6b173b9950ad";
const GO: &str = "d89c40533e9f98534c6dc6ef1572d487bac7b27d0f9fc3fdf22d6d189db23bd7";

#[test]
fn a_record_fits_a_label_and_reads_back_cut() {
    let r = HashRecord {
        ours: OURS.into(),
        replaces: GO.into(),
    };
    let label = r.label_value();
    assert_eq!(
        label,
        format!("{}.{}", &OURS[..RECORD_HEX], &GO[..RECORD_HEX])
    );
    assert!(
        label.len() <= 63 && crate::build_id::is_label_safe(&label),
        "{label}"
    );
    assert_eq!(
        HashRecord::parse(&label),
        Some(HashRecord {
            ours: OURS[..RECORD_HEX].into(),
            replaces: GO[..RECORD_HEX].into(),
        })
    );
    // A Deployment without the annotation, adopted as such.
    let absent = HashRecord {
        ours: OURS.into(),
        replaces: String::new(),
    };
    assert_eq!(
        absent.label_value(),
        format!("{}.none", &OURS[..RECORD_HEX])
    );
    assert_eq!(
        HashRecord::parse(&absent.label_value()).map(|r| r.replaces),
        Some(String::new())
    );
    for bad in [
        "",
        "abc",
        ".abc",
        "abc.",
        "xyz.abc",
        "abc.xyz",
        "abc;replaces=def",
    ] {
        assert_eq!(HashRecord::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn a_record_stands_for_the_annotation_it_replaced_and_lapses_with_it() {
    let label = HashRecord {
        ours: OURS.into(),
        replaces: GO.into(),
    }
    .label_value();
    let cut = Some(OURS[..RECORD_HEX].to_string());
    assert_eq!(record_for(Some(GO), Some(&label)), cut);
    // Re-rendered since (by us or by the predecessor): the pod template speaks for itself.
    assert_eq!(record_for(Some(OURS), Some(&label)), None);
    assert_eq!(record_for(None, Some(&label)), None);
    assert_eq!(record_for(Some(GO), None), None);
    assert_eq!(record_for(Some(GO), Some("garbage")), None);
    let absent = HashRecord {
        ours: OURS.into(),
        replaces: String::new(),
    }
    .label_value();
    assert_eq!(record_for(None, Some(&absent)), cut);
    assert_eq!(record_for(Some(GO), Some(&absent)), None);

    // What the drift rules then see.
    let d = ObservedDeployment {
        pod_template_hash: Some(GO.into()),
        template_record: record_for(Some(GO), Some(&label)),
        ..ObservedDeployment::test("v1-f645", 1)
    };
    assert!(d.template_reads_as(OURS));
    assert!(
        !d.template_reads_as(GO),
        "the record speaks for the annotation"
    );
    assert!(!d.template_reads_as(&OURS.replace('5', "6")));
    let plain = ObservedDeployment {
        pod_template_hash: Some(OURS.into()),
        ..ObservedDeployment::test("v1", 1)
    };
    assert!(plain.template_reads_as(OURS));
    assert!(
        !plain.template_reads_as(&OURS[..RECORD_HEX]),
        "full hashes compare whole"
    );
}

#[test]
fn the_predecessors_target_is_trusted_only_for_the_current_generation() {
    let s = go_status("v2-b4c5", "Ramping", Some(7));
    assert_eq!(
        predecessor_target(Some(7), Some(&s)),
        Some("v2-b4c5".into())
    );
    for reason in PREDECESSOR_FRESH_REASONS {
        let s = go_status("v2-b4c5", reason, Some(7));
        assert_eq!(
            predecessor_target(Some(7), Some(&s)).as_deref(),
            Some("v2-b4c5")
        );
    }
    // The spec changed after the predecessor last looked.
    assert_eq!(predecessor_target(Some(8), Some(&s)), None);
    // Written with the current generation over an older target.
    for reason in [
        "InvalidSpec",
        "ConnectionNotFound",
        "AuthSecretInvalid",
        "TemporalClientCreationFailed",
        "TemporalStateFetchFailed",
    ] {
        let s = go_status("v2-b4c5", reason, Some(7));
        assert_eq!(predecessor_target(Some(7), Some(&s)), None, "{reason}");
    }
    // No generation on the condition (not the Go controller v1.8.1), none on the object.
    let s = go_status("v2-b4c5", "Ramping", None);
    assert_eq!(predecessor_target(Some(7), Some(&s)), None);
    assert_eq!(predecessor_target(None, Some(&s)), None);
    // Our own status (it carries a top-level observedGeneration) is never a predecessor's.
    let mut ours = go_status("v2-b4c5", "Ramping", Some(7));
    ours.observed_generation = Some(7);
    assert_eq!(predecessor_target(Some(7), Some(&ours)), None);
    // Nothing to go by.
    assert_eq!(predecessor_target(Some(7), None), None);
    let mut no_ready = go_status("v2-b4c5", "Ramping", Some(7));
    no_ready.conditions[0].type_ = "Progressing".into();
    assert_eq!(predecessor_target(Some(7), Some(&no_ready)), None);
    let empty = go_status("", "Ramping", Some(7));
    assert_eq!(predecessor_target(Some(7), Some(&empty)), None);
}

/// Desired: our computed build `ours-0123456789`, template hash `tpl`; the predecessor's v1
/// (`v1-f645`, Current) and v2 (`v2-b4c5`, its target) with its own hashes.
fn taken_over() -> PlanInput {
    let mut i = PlanInput::test();
    i.desired.build_id = "ours-0123456789".into();
    let go = |build: &str| ObservedDeployment {
        pod_template_hash: Some(format!("go-tpl-{build}")),
        connection_hash: Some("go-conn".into()),
        ..ObservedDeployment::test(build, 3)
    };
    i.deployments = vec![go("v1-f645"), go("v2-b4c5")];
    i
}

fn adopted(mut d: ObservedDeployment) -> ObservedDeployment {
    d.template_record = Some("tpl".into());
    d
}

#[test]
fn the_predecessors_target_is_adopted_with_our_template_hash() {
    let i = taken_over();
    let a = template_adoption(&i.desired, &i.deployments, "v2-b4c5").expect("adoption");
    assert_eq!(
        a,
        Adoption {
            name: "w-v2-b4c5".into(),
            build_id: "v2-b4c5".into(),
            template: Some(HashRecord {
                ours: "tpl".into(),
                replaces: "go-tpl-v2-b4c5".into(),
            }),
            connection: None,
        }
    );
    // No Deployment for the named build (deleted, or never created): nothing to adopt.
    assert_eq!(
        template_adoption(&i.desired, &i.deployments, "v3-zzzz"),
        None
    );
    let mut deleting = taken_over();
    deleting.deployments[1].deleting = true;
    assert_eq!(
        template_adoption(&deleting.desired, &deleting.deployments, "v2-b4c5"),
        None
    );
    // Already adopted (or ours): nothing to write.
    let mut again = taken_over();
    again.deployments[1] = adopted(again.deployments[1].clone());
    assert_eq!(
        template_adoption(&again.desired, &again.deployments, "v2-b4c5"),
        None
    );
    // Our computed build already runs: it is the target, nothing is adopted.
    let mut ours = taken_over();
    ours.deployments
        .push(ObservedDeployment::test("ours-0123456789", 1));
    assert_eq!(
        template_adoption(&ours.desired, &ours.deployments, "v2-b4c5"),
        None
    );
}

#[test]
fn under_a_custom_build_id_only_that_build_is_adopted() {
    let mut i = taken_over();
    i.desired.custom_build_id = true;
    i.desired.build_id = "v2-b4c5".into();
    let a = template_adoption(&i.desired, &i.deployments, "v2-b4c5").expect("adoption");
    assert_eq!(a.template.map(|t| t.ours), Some("tpl".into()));
    // The predecessor named another build: the custom ID is the target, not adopted.
    i.desired.build_id = "release-7".into();
    assert_eq!(
        template_adoption(&i.desired, &i.deployments, "v2-b4c5"),
        None
    );
}

#[test]
fn an_adopted_version_stays_the_target_until_the_template_changes() {
    let mut i = taken_over();
    assert_eq!(adopted_target(&i.desired, &i.deployments), None);
    i.deployments[1] = adopted(i.deployments[1].clone());
    assert_eq!(
        adopted_target(&i.desired, &i.deployments).as_deref(),
        Some("v2-b4c5")
    );
    // A spec change: our hash differs, our computed build ID wins (a new version our way).
    // (Records keep the first 28 hex characters of a 64-character hash: "other" shares none.)
    let mut changed = i.clone();
    changed.desired.pod_template_hash = "other".into();
    assert_eq!(adopted_target(&changed.desired, &changed.deployments), None);
    // Our computed build has a Deployment (a rollout under us already started): ours.
    let mut ours = i.clone();
    ours.deployments
        .push(ObservedDeployment::test("ours-0123456789", 1));
    assert_eq!(adopted_target(&ours.desired, &ours.deployments), None);
    // A custom build ID is the target whatever was adopted.
    let mut custom = i.clone();
    custom.desired.custom_build_id = true;
    assert_eq!(adopted_target(&custom.desired, &custom.deployments), None);
    // Being deleted: not a target.
    let mut deleting = i.clone();
    deleting.deployments[1].deleting = true;
    assert_eq!(
        adopted_target(&deleting.desired, &deleting.deployments),
        None
    );
    // The same hash without a record (a Deployment of ours): rule 1 is about adoptions only.
    let mut unrecorded = i;
    unrecorded.deployments[1].template_record = None;
    unrecorded.deployments[1].pod_template_hash = Some("tpl".into());
    assert_eq!(
        adopted_target(&unrecorded.desired, &unrecorded.deployments),
        None
    );
}

#[test]
fn pods_with_the_predecessors_hash_of_this_connection_are_adopted_not_rolled() {
    // Input as after resolution: the adopted v2 is the target, v1 Current.
    let mut i = taken_over();
    i.desired.build_id = "v2-b4c5".into();
    i.deployments[1] = adopted(i.deployments[1].clone());
    i.temporal.versions[0].build_id = "v1-f645".into();
    i.temporal.versions[1].build_id = "v2-b4c5".into();
    i.temporal.routing.current_build_id = Some("v1-f645".into());
    let p = plan(&i);
    assert_eq!(p.update, vec![], "no Pod is rolled");
    assert_eq!(p.create, None, "no new version");
    let records: Vec<_> = p
        .adopt
        .iter()
        .map(|a| {
            (
                a.build_id.as_str(),
                a.connection.clone(),
                a.template.clone(),
            )
        })
        .collect();
    let conn = Some(HashRecord {
        ours: "conn".into(),
        replaces: "go-conn".into(),
    });
    assert_eq!(
        records,
        vec![("v1-f645", conn.clone(), None), ("v2-b4c5", conn, None)]
    );
    assert!(matches!(p.routing, Some(RoutingChange::SetCurrent { .. })));

    // The Connection changed since the predecessor rendered the Pods: a real change, rolled.
    let mut changed = i.clone();
    changed.predecessor_connection_hash = "go-conn-2".into();
    let p = plan(&changed);
    assert_eq!(p.adopt, vec![]);
    assert!(
        p.update
            .iter()
            .all(|u| u.reason == UpdateReason::ConnectionDrift)
            && p.update.len() == 2,
        "{:?}",
        p.update
    );

    // Once recorded, the Deployments read as ours: nothing more to write.
    let mut recorded = i;
    for d in &mut recorded.deployments {
        d.connection_record = Some("conn".into());
    }
    let p = plan(&recorded);
    assert_eq!((p.adopt, p.update), (vec![], vec![]));
}

#[test]
fn identity_patterns() {
    for (pattern, identity, want) in [
        ("*/<uuid>", GO_ID, true),
        ("*/<uuid>", &format!("twc/{UID}") as &str, true),
        ("*/<uuid>", "twc/temporal-system", false),
        ("*/<uuid>", "twc/5f0c2a4e-8b1d-4c3e-9a7f-0123456789a", false),
        (
            "*/<uuid>",
            "twc/5f0c2a4e-8b1d-4c3e-9a7f-0123456789abc",
            false,
        ),
        ("*/<uuid>", &format!("/{UID}") as &str, true),
        ("*/<uuid>", UID, false),
        (
            "temporal-worker-controller",
            "temporal-worker-controller",
            true,
        ),
        (
            "temporal-worker-controller",
            "temporal-worker-controller/x",
            false,
        ),
        ("twc-*", "twc-east", true),
        ("twc-*", "twc", false),
        ("prod/*/<uuid>", GO_ID, false),
        ("twc/*/<uuid>", GO_ID, true),
        ("", "", true),
        ("", "x", false),
    ] {
        assert_eq!(
            matches(pattern, identity),
            want,
            "{pattern:?} vs {identity:?}"
        );
    }
}

fn role(manager: &str, last_modifier: &str, recorded: Option<&str>) -> ManagerRole {
    let succession = Succession {
        earlier_own: vec!["twc".into()],
        ..Succession::default()
    };
    let record = recorded.map(|install| RoutingInstall {
        build_id: "v1".into(),
        install_id: install.into(),
    });
    manager_role(
        manager,
        &format!("twc/{UID}"),
        "twc-system/twc",
        &succession,
        last_modifier,
        record.as_ref(),
    )
}

#[test]
fn a_predecessor_is_taken_over_and_anyone_else_yielded_to() {
    let me = format!("twc/{UID}");
    assert_eq!(role("", "", None), ManagerRole::Unclaimed);
    assert_eq!(role(&me, &me, None), ManagerRole::Us);
    // The Go controller: its shape, and nothing of ours recorded on its versions.
    assert_eq!(role(GO_ID, GO_ID, None), ManagerRole::Predecessor);
    // Its legacy default, and our own default before the cluster-unique part.
    assert_eq!(
        role(
            "temporal-worker-controller",
            "temporal-worker-controller",
            None
        ),
        ManagerRole::Predecessor
    );
    assert_eq!(role("twc", "twc", None), ManagerRole::Predecessor);
    // A human.
    assert_eq!(
        role("alice@example.com", "alice@example.com", None),
        ManagerRole::Elsewhere
    );
    // Another live install of this controller (also `<identity>/<uuid>`): it recorded its
    // install on the version it routed to.
    let other = "twc/0f0c2a4e-8b1d-4c3e-9a7f-0123456789ab";
    assert_eq!(role(other, other, Some("east/twc")), ManagerRole::Elsewhere);
    assert_eq!(role("twc", "twc", Some("east/twc")), ManagerRole::Elsewhere);
    // This very install under an earlier identity.
    assert_eq!(
        role(other, other, Some("twc-system/twc")),
        ManagerRole::Predecessor
    );
    // A record written by someone else's last change says nothing about the manager.
    assert_eq!(
        role(GO_ID, "alice", Some("east/twc")),
        ManagerRole::Predecessor
    );
    // Predecessors can be turned off: then the Go controller is yielded to like a human.
    let none = Succession {
        earlier_own: vec![],
        predecessors: vec![],
    };
    assert_eq!(
        manager_role(GO_ID, &me, "i", &none, GO_ID, None),
        ManagerRole::Elsewhere
    );
}

#[test]
fn routing_a_predecessor_manages_is_claimed_and_continued() {
    let mut i = PlanInput::test();
    i.temporal.manager_identity = GO_ID.into();
    i.temporal.last_modifier_identity = GO_ID.into();
    let p = plan(&i);
    assert!(p.claim_manager, "claims the manager identity first");
    assert!(matches!(p.routing, Some(RoutingChange::SetCurrent { .. })));

    // A human holds it: yielded (RoutingManagedElsewhere), as before.
    i.temporal.manager_identity = "alice".into();
    let p = plan(&i);
    assert!(!p.claim_manager);
    assert_eq!(p.routing, None);
}
