//! Least privilege, proven from the API server's audit log: every grant the Helm chart gives the
//! controller was used by the controller during the e2e suite (which runs it as the chart's
//! ServiceAccount). Cargo runs this binary after `tests/e2e/main.rs` (targets run in name order);
//! run `cargo test --test e2e` first when running it alone.

use test_harness::chart::{
    E2E_NAMESPACE, e2e_audit_log, e2e_values, expand, rendered_grants, unused_grants,
};

#[test]
fn every_grant_of_the_chart_is_used_by_the_controller() {
    let log = e2e_audit_log(env!("CARGO_TARGET_TMPDIR"));
    let events = test_harness::control_plane::audit::read(&log).unwrap_or_else(|e| {
        panic!(
            "no e2e audit log at {} ({e:#}): run `cargo test --test e2e` first",
            log.display()
        )
    });
    let (user, rules) = rendered_grants(&e2e_values(), E2E_NAMESPACE).expect("render the chart");
    let used = events.iter().filter(|e| e.acting_user() == user).count();
    let denied: Vec<String> = events
        .iter()
        .filter(|e| e.acting_user() == user && e.code() == 403)
        .map(|e| format!("{} {} ({})", e.verb, e.resource(), e.request_uri))
        .collect();
    // Checked by an admission plugin inside the API server (OwnerReferencesPermissionEnforcement),
    // not requested: it leaves no audit event, but without the first the e2e suite cannot create
    // a single versioned Deployment, and without the second no TWD can become the controller
    // owner of a TemporalWorkerOwnedResource.
    // Likewise, a server-side apply that creates an object is authorized as `create` but
    // audited as `patch` (every copy of a TemporalWorkerOwnedResource starts that way).
    let by_admission = |g: &test_harness::chart::Grant| {
        // Both kind sets (the e2e suite runs both: tests/e2e/kind_sets.rs).
        ([
            "workerdeployments/finalizers",
            "temporalworkerdeployments/finalizers",
        ]
        .contains(&g.resource.as_str())
            && g.verb == "update")
            || (["workerresourcetemplates", "temporalworkerownedresources"]
                .contains(&g.resource.as_str())
                && g.verb == "delete")
            || (g.verb == "create"
                && [
                    "horizontalpodautoscalers",
                    "poddisruptionbudgets",
                    "scaledobjects",
                ]
                .contains(&g.resource.as_str()))
    };
    let grants: Vec<_> = rules
        .iter()
        .flat_map(expand)
        .filter(|g| !by_admission(g))
        .collect();
    let unused = unused_grants(&grants, &events, &user);
    println!(
        "{used} requests by {user}; {} grants; unused:",
        grants.len()
    );
    for g in &unused {
        println!("  {:>16} {:<45} {}", g.api_group, g.resource, g.verb);
    }
    assert!(
        used > 100,
        "the e2e audit log has only {used} requests by {user}"
    );
    assert!(
        denied.is_empty(),
        "the API server denied the controller: {denied:#?}"
    );
    assert!(
        unused.is_empty(),
        "the chart grants what the controller never used: {unused:#?}"
    );
}
