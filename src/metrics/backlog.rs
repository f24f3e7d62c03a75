//! The per-version task-queue families, from the last backlog poll (`crate::backlog`).

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::labels::QueueLabels;

/// A gauge of a fractional value.
type GaugeF = Gauge<f64, AtomicU64>;

/// Registers the backlog families of `queues` into `reg` (already prefixed).
pub(super) fn register(reg: &mut Registry, queues: &[crate::backlog::VersionQueue]) {
    let count = Family::<QueueLabels, Gauge>::default();
    let age = Family::<QueueLabels, GaugeF>::default();
    let added = Family::<QueueLabels, GaugeF>::default();
    let dispatched = Family::<QueueLabels, GaugeF>::default();
    for q in queues {
        let labels = QueueLabels {
            namespace: q.namespace.clone(),
            name: q.name.clone(),
            build_id: q.build_id.clone(),
            task_queue: q.stats.task_queue.clone(),
            task_queue_type: q.stats.queue_type,
            temporal_worker_deployment_name: format!("{}_{}", q.namespace, q.name),
            temporal_worker_build_id: q.build_id.clone(),
            temporal_namespace: q.temporal_namespace.clone(),
        };
        count.get_or_create(&labels).set(q.stats.backlog_count);
        age.get_or_create(&labels).set(q.stats.backlog_age_seconds);
        added.get_or_create(&labels).set(q.stats.add_rate);
        dispatched.get_or_create(&labels).set(q.stats.dispatch_rate);
    }
    reg.register(
        "version_backlog_tasks",
        "Approximate tasks waiting in a live version's task queue (Temporal's per-version task-queue stats)",
        count,
    );
    reg.register_with_unit(
        "version_backlog_age",
        "Age of the oldest task waiting in a live version's task queue",
        Unit::Seconds,
        age,
    );
    reg.register(
        "version_task_add_rate",
        "Tasks added per second to a live version's task queue (Temporal's 30 s average)",
        added,
    );
    reg.register(
        "version_task_dispatch_rate",
        "Tasks dispatched per second from a live version's task queue (Temporal's 30 s average)",
        dispatched,
    );
}

#[cfg(test)]
mod tests {

    use crate::metrics::Metrics;

    #[test]
    fn the_backlog_of_each_live_version_is_exported_with_its_build_id() {
        use crate::backlog::VersionQueue;
        use crate::temporal::task_queue_stats::QueueStats;
        let m = Metrics::new();
        let store = crate::workers::Workers::of(vec![]);
        assert!(
            !m.encode(&store).contains("version_backlog_tasks{"),
            "no poll yet"
        );
        let queue = |build: &str, count| VersionQueue {
            namespace: "shop".into(),
            name: "orders".into(),
            build_id: build.into(),
            temporal_namespace: "prod".into(),
            stats: QueueStats {
                task_queue: "orders".into(),
                queue_type: "workflow",
                backlog_count: count,
                backlog_age_seconds: 1.5,
                add_rate: 2.0,
                dispatch_rate: 0.5,
            },
        };
        m.backlog.replace(vec![queue("v1", 0), queue("v2", 7)]);
        let text = m.encode(&store);
        let labels = "namespace=\"shop\",name=\"orders\",build_id=\"v2\",task_queue=\"orders\",task_queue_type=\"workflow\",temporal_worker_deployment_name=\"shop_orders\",temporal_worker_build_id=\"v2\",temporal_namespace=\"prod\"";
        for line in [
            format!("temporal_worker_controller_version_backlog_tasks{{{labels}}} 7"),
            format!("temporal_worker_controller_version_backlog_age_seconds{{{labels}}} 1.5"),
            format!("temporal_worker_controller_version_task_add_rate{{{labels}}} 2.0"),
            format!("temporal_worker_controller_version_task_dispatch_rate{{{labels}}} 0.5"),
            "# UNIT temporal_worker_controller_version_backlog_age_seconds seconds".to_string(),
        ] {
            assert!(text.contains(&line), "missing {line:?} in:\n{text}");
        }
        assert!(text.contains(
            "build_id=\"v1\",task_queue=\"orders\",task_queue_type=\"workflow\",temporal_worker_deployment_name=\"shop_orders\",temporal_worker_build_id=\"v1\",temporal_namespace=\"prod\"} 0"
        ));
    }
}
