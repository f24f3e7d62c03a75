//! The Connection families, read at each scrape from the Connection reconciler's caches (so a
//! deleted Connection leaves no series): whether Temporal could be reached through each
//! Connection (its `Ready` condition), when each mTLS client certificate expires, and whether
//! it is within the controller's warning window (`--certificate-expiry-warning`).

use std::sync::Mutex;

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::labels::KindObjLabels;
use crate::api::TemporalConnection;
use crate::api::kinds::Model;

/// The Connection caches of both kind sets, added as the reconcilers are built.
#[derive(Default)]
pub struct ConnectionStores(Mutex<Vec<Store<TemporalConnection>>>);

impl std::fmt::Debug for ConnectionStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectionStores")
    }
}

impl ConnectionStores {
    pub fn add(&self, store: Store<TemporalConnection>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(store);
    }

    fn all(&self) -> Vec<std::sync::Arc<TemporalConnection>> {
        let stores = self.0.lock().unwrap_or_else(|p| p.into_inner());
        stores.iter().flat_map(|s| s.state()).collect()
    }
}

/// Registers the Connection families into `reg` (already prefixed).
pub(super) fn register(reg: &mut Registry, stores: &ConnectionStores) {
    let expiry = Family::<KindObjLabels, Gauge>::default();
    let soon = Family::<KindObjLabels, Gauge>::default();
    let reachable = Family::<KindObjLabels, Gauge>::default();
    for conn in stores.all() {
        let labels = KindObjLabels {
            namespace: conn.namespace().unwrap_or_default(),
            name: conn.name_any(),
            kind: conn.kind_set().kind(Model::Connection).to_string(),
        };
        if let Some(ready) = ready(&conn) {
            reachable.get_or_create(&labels).set(i64::from(ready));
        }
        let Some(cert) = conn
            .status
            .as_ref()
            .and_then(|s| s.client_certificate.as_ref())
        else {
            continue;
        };
        expiry
            .get_or_create(&labels)
            .set(cert.not_after.0.as_second());
        soon.get_or_create(&labels)
            .set(i64::from(cert.expiring_soon));
    }
    reg.register_with_unit(
        "connection_certificate_expiry_timestamp",
        "When the mTLS client certificate of a Connection expires (its notAfter)",
        Unit::Seconds,
        expiry,
    );
    reg.register(
        "connection_reachable",
        "1 while Temporal answers through a Connection with valid credentials (its Ready condition), 0 while it does not; absent before the Connection's first status",
        reachable,
    );
    reg.register(
        "connection_certificate_expiring_soon",
        "1 while a Connection's mTLS client certificate is within the warning window (--certificate-expiry-warning) or expired",
        soon,
    );
}

/// The Connection's `Ready` condition as a bool, if it has one. `Ready` is True exactly when
/// the Secret is valid and the frontend answered the last check (`connection::status`).
fn ready(conn: &TemporalConnection) -> Option<bool> {
    conn.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == crate::api::conditions::READY)
        .map(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::api::KindSet;

    fn conn(name: &str, not_after: Option<(i64, bool)>) -> TemporalConnection {
        let mut c: TemporalConnection = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"hostPort": "temporal:7233"},
        }))
        .expect("connection");
        c.status = not_after.map(|(secs, soon)| {
            serde_json::from_value(serde_json::json!({
                "clientCertificate": {
                    "notAfter": jiff::Timestamp::from_second(secs).expect("time").to_string(),
                    "expiringSoon": soon,
                }
            }))
            .expect("status")
        });
        c
    }

    fn exposition(stores: &ConnectionStores) -> String {
        let mut reg = Registry::default();
        register(&mut reg, stores);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).expect("encode");
        out
    }

    #[test]
    fn one_series_per_connection_with_a_certificate_and_none_once_it_is_gone() {
        let mut writer = Writer::<TemporalConnection>::new(KindSet::Seed);
        let stores = ConnectionStores::default();
        stores.add(writer.as_reader());
        writer.apply_watcher_event(&Event::Apply(conn("prod", Some((1_900_000_000, true)))));
        writer.apply_watcher_event(&Event::Apply(conn("plain", None)));
        let text = exposition(&stores);
        let labels = r#"{namespace="shop",name="prod",kind="TemporalConnection"}"#;
        assert!(
            text.contains(&format!(
                "connection_certificate_expiry_timestamp_seconds{labels} 1900000000"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("connection_certificate_expiring_soon{labels} 1")),
            "{text}"
        );
        assert!(!text.contains(r#"name="plain""#), "{text}");
        writer.apply_watcher_event(&Event::Delete(conn("prod", Some((1_900_000_000, true)))));
        assert!(!exposition(&stores).contains(r#"name="prod""#));
    }

    fn with_ready(name: &str, status: &str) -> TemporalConnection {
        let mut c = conn(name, None);
        c.status = Some(
            serde_json::from_value(serde_json::json!({"conditions": [{
                "type": "Ready", "status": status, "reason": "x", "message": "",
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }]}))
            .expect("status"),
        );
        c
    }

    #[test]
    fn reachability_follows_the_ready_condition_and_needs_a_status() {
        let mut writer = Writer::<TemporalConnection>::new(KindSet::Seed);
        let stores = ConnectionStores::default();
        stores.add(writer.as_reader());
        writer.apply_watcher_event(&Event::Apply(with_ready("up", "True")));
        writer.apply_watcher_event(&Event::Apply(with_ready("down", "False")));
        writer.apply_watcher_event(&Event::Apply(conn("new", None)));
        let text = exposition(&stores);
        for (name, value) in [("up", 1), ("down", 0)] {
            let line = format!(
                "connection_reachable{{namespace=\"shop\",name=\"{name}\",kind=\"TemporalConnection\"}} {value}"
            );
            assert!(text.contains(&line), "missing {line:?} in:\n{text}");
        }
        assert!(!text.contains(r#"name="new""#), "{text}");
    }
}
