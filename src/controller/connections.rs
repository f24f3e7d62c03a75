//! The Connection reconcilers' wiring (`crate::connection`): one per kind set over the same
//! namespaces as the worker deployments, and one for ClusterConnections.

use std::sync::Arc;

use futures::{StreamExt, stream};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, predicates, watcher};

use super::{error_policy, leadership_won, queued};
use crate::api::{ClusterConnection, KindSet, TemporalConnection, TemporalWorkerDeployment};
use crate::caches::reflect::{Watched, api_in_set, reflect_apis};
use crate::metrics::ControllerKind;

/// The Connection reconciler (`crate::connection`) of one kind set, over the same namespaces.
pub(super) fn build_connection_janitor(
    scopes: Vec<Option<String>>,
    set: KindSet,
    (store, _, connections): Watched<TemporalConnection>,
    ctx: Arc<crate::connection::ConnectionContext>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> {
    // The certificate-expiry gauges are read from this cache at each scrape.
    ctx.services.metrics.connections.add(store.clone());
    // A worker deployment created, deleted or pointed at a Connection changes that
    // Connection's users: spec changes only (the generation, which deletion bumps too), never
    // its frequent status writes. Its previous Connection sees it gone at the next recheck.
    let users = stream::select_all(scopes.iter().map(|scope| {
        watcher(
            api_in_set::<TemporalWorkerDeployment>(&ctx.services.client, scope, set),
            watcher::Config::default(),
        )
        .touched_objects()
        .predicate_filter(predicates::generation, Default::default())
        .boxed()
    }));
    let queue = ctx.services.metrics.queues.of(ControllerKind::Connection);
    let won = queued::all_of(
        queue.clone(),
        store.clone(),
        set,
        leadership_won(ctx.services.leader.clone()),
    );
    // The users are read from the worker-deployment cache, fed by another watch: a second's
    // debounce lets it catch up with the event that triggered the reconcile.
    let config = controller::Config::default().debounce(std::time::Duration::from_secs(1));
    let used = move |t: TemporalWorkerDeployment| {
        let ns = t.namespace()?;
        let r = &t.spec.worker_options.connection_ref;
        (!r.is_cluster()).then(|| ObjectRef::new_with(&r.name, set).within(&ns))
    };
    let reconcile = queued::tracked(queue.clone(), set, crate::connection::reconcile);
    Controller::for_stream_with(queued::objects(queue.clone(), set, connections), store, set)
        .with_config(config)
        .watches_stream_with(users, queued::mapper(queue.clone(), used), set)
        .reconcile_all_on(won)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            queued::settle(&queue, &res);
            async {}
        })
}

/// The ClusterConnections' watch (cluster installs only), into one store.
pub(super) fn reflect_cluster_connections(client: &kube::Client) -> Watched<ClusterConnection> {
    let apis = vec![Api::<ClusterConnection>::all(client.clone())];
    let prepare = |o: &mut ClusterConnection| crate::caches::slim_own(o);
    let (store, listed, applied) = reflect_apis(
        &[None],
        apis,
        (),
        watcher::Config::default(),
        prepare,
        false,
    );
    (store, listed, applied.boxed())
}

/// The Connection reconciler (`crate::connection`) for ClusterConnections: their users are
/// worker deployments of both kind sets in every namespace.
pub(super) fn build_cluster_connection_janitor(
    (store, _, connections): Watched<ClusterConnection>,
    ctx: Arc<crate::connection::ConnectionContext>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> {
    let users = stream::select_all(KindSet::ALL.into_iter().map(|set| {
        watcher(
            api_in_set::<TemporalWorkerDeployment>(&ctx.services.client, &None, set),
            watcher::Config::default(),
        )
        .touched_objects()
        .predicate_filter(predicates::generation, Default::default())
        .boxed()
    }));
    let queue = ctx.services.metrics.queues.of(ControllerKind::Connection);
    let won = queued::all_of(
        queue.clone(),
        store.clone(),
        (),
        leadership_won(ctx.services.leader.clone()),
    );
    let config = controller::Config::default().debounce(std::time::Duration::from_secs(1));
    let used = |t: TemporalWorkerDeployment| {
        let r = &t.spec.worker_options.connection_ref;
        r.is_cluster().then(|| ObjectRef::new(&r.name))
    };
    let reconcile = queued::tracked(queue.clone(), (), crate::connection::reconcile_cluster);
    Controller::for_stream(queued::objects(queue.clone(), (), connections), store)
        .with_config(config)
        .watches_stream_with(
            users,
            queued::mapper(queue.clone(), used),
            KindSet::Canonical,
        )
        .reconcile_all_on(won)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            queued::settle(&queue, &res);
            async {}
        })
}
