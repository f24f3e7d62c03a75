//! kube-runtime wiring: what the controller watches, how it maps events to TWDs, the error
//! policy; the Connection reconcilers ([`connections`]) and the owned-resource controllers
//! ([`owned`]), each reporting to its mirrored work queue ([`queued`]). One reconcile lives in
//! [`crate::worker_deployment`].

use std::sync::Arc;

use futures::{FutureExt as _, Stream, StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tracing::warn;

use crate::api::KindSet;
use crate::api::{
    ClusterConnection, LABEL_DEPLOYMENT_NAME, TemporalConnection, TemporalWorkerDeployment,
    TemporalWorkerOwnedResource,
};
use crate::caches::reflect::{
    Watched, api_in_set, listing, reflect_builtin, reflect_scopes, scopes,
};
use crate::caches::{Caches, Listing};
use crate::connection::{ConnectionContext, ConnectionSettings};
use crate::error::Error;
use crate::metrics::ControllerKind;
use crate::owned::{OwnedContext, OwnedSettings};
use crate::worker_deployment::Context;
use crate::workers::Workers;

mod connections;
mod lane;
mod owned;
mod queued;

/// Builds the controllers: for each kind set (see [`crate::api::kinds`]) a worker-deployment
/// controller, a Connection reconciler and an owned-resource controller, all running the same
/// reconcile code. Returns the worker-deployment caches (for the status API and metrics) and a
/// future that runs everything until `shutdown` resolves.
///
/// With `watch_namespaces` set, every kind is watched with one watch per namespace, so a
/// namespaced install needs only the Roles the chart renders in those namespaces (a
/// cluster-wide watch would be refused with 403).
pub fn build(
    ctx: Arc<Context>,
    (owned, connection): (OwnedSettings, ConnectionSettings),
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> (Workers, impl std::future::Future<Output = ()>) {
    let client = ctx.services.client.clone();
    let scopes = scopes(&ctx.services.watch_namespaces);
    let shard = ctx.services.shard.as_deref();
    let shutdown = shutdown.shared();
    let (kinds, feeds): (Vec<_>, Vec<_>) = KindSet::ALL
        .into_iter()
        .map(|set| watch_kind(&client, &scopes, set, shard))
        .unzip();
    let workers = Workers::new(kinds.iter().map(|k| (k.set, listing(&k.workers))).collect());
    // ClusterConnections are watched by cluster installs only: a namespaced one may not read
    // cluster-scoped objects, and reports a worker deployment naming one instead.
    let cluster_connections = ctx
        .services
        .watch_namespaces
        .is_empty()
        .then(|| connections::reflect_cluster_connections(&client));
    let (caches, feed) = caches(
        &client,
        (&scopes, shard),
        listings(&kinds, |k| &k.templates),
        listings(&kinds, |k| &k.connections),
        feeds.into_iter().flatten().collect(),
    );
    let caches = match &cluster_connections {
        Some(watched) => caches.with_cluster_connections(listing(watched)),
        None => caches,
    };
    ctx.services.set_caches(caches, workers.clone());
    let until = shutdown.clone();
    let mut running = vec![
        async move {
            futures::future::select(Box::pin(feed), until).await;
        }
        .boxed(),
    ];
    // The other two reconcilers' contexts carry the worker deployments' services, caches
    // included, beside settings of their own.
    let owned_ctx = Arc::new(OwnedContext::new(ctx.services.clone(), owned));
    let connection_ctx = Arc::new(ConnectionContext::new(ctx.services.clone(), connection));
    let cluster = cluster_connections.is_some();
    if let Some(watched) = cluster_connections {
        let janitor = connections::build_cluster_connection_janitor(
            watched,
            connection_ctx.clone(),
            shutdown.clone(),
        );
        running.push(janitor.boxed());
    }
    for k in kinds {
        running.extend(kind_controllers(
            k,
            (&scopes, cluster),
            &ctx,
            (&owned_ctx, &connection_ctx),
            shutdown.clone(),
        ));
    }
    (workers, async move {
        futures::future::join_all(running).await;
    })
}

/// One listing per kind set, of the watch `pick` takes from each.
fn listings<K>(
    kinds: &[KindWatches],
    pick: impl Fn(&KindWatches) -> &Watched<K>,
) -> Vec<(KindSet, Listing<K>)>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    kinds.iter().map(|k| (k.set, listing(pick(k)))).collect()
}

/// The three controllers of one kind set: worker deployments, templates, Connections.
fn kind_controllers(
    k: KindWatches,
    (scopes, cluster): (&[Option<String>], bool),
    ctx: &Arc<Context>,
    (owned_ctx, connection_ctx): (&Arc<OwnedContext>, &Arc<ConnectionContext>),
    shutdown: impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static,
) -> [futures::future::BoxFuture<'static, ()>; 3] {
    let (store, _, twds) = k.workers;
    let workers = worker_controller(
        k.set,
        store,
        twds,
        (scopes.to_vec(), cluster),
        k.worker_changes,
        ctx.clone(),
        shutdown.clone(),
    );
    let owned = owned::build_owned_controller(
        ctx.services.client.clone(),
        scopes.to_vec(),
        k.set,
        k.templates,
        k.template_changes,
        owned_ctx.clone(),
        shutdown.clone(),
    );
    let janitor = connections::build_connection_janitor(
        scopes.to_vec(),
        k.set,
        k.connections,
        connection_ctx.clone(),
        shutdown,
    );
    [workers.boxed(), owned.boxed(), janitor.boxed()]
}

/// What one kind set watches, for its three controllers, and the Deployment changes each of
/// the two that look at Deployments receives (see [`DeploymentFeed`]).
struct KindWatches {
    set: KindSet,
    workers: Watched<TemporalWorkerDeployment>,
    worker_changes: DeploymentChanges,
    templates: Watched<TemporalWorkerOwnedResource>,
    template_changes: DeploymentChanges,
    connections: Watched<TemporalConnection>,
}

/// The watches of `set` and the two feeds the Deployment cache sends its changes into. A
/// shard watches only its worker deployments; templates and Connections are watched whole
/// (a template follows its worker deployment's shard, and any worker may name any Connection).
fn watch_kind(
    client: &kube::Client,
    scopes: &[Option<String>],
    set: KindSet,
    shard: Option<&crate::shard::Shard>,
) -> (KindWatches, [DeploymentFeed; 2]) {
    let workers = match shard {
        Some(shard) => watcher::Config::default().labels(shard.selector()),
        None => watcher::Config::default(),
    };
    let (to_workers, worker_changes) = futures::channel::mpsc::unbounded();
    let (to_templates, template_changes) = futures::channel::mpsc::unbounded();
    let watches = KindWatches {
        set,
        workers: reflect_scopes(client, scopes, set, workers),
        worker_changes,
        templates: reflect_scopes(client, scopes, set, Default::default()),
        template_changes,
        connections: reflect_scopes(client, scopes, set, Default::default()),
    };
    (watches, [to_workers, to_templates])
}

/// The shared caches of [`crate::caches`]: the versioned Deployments and autoscalers watched
/// here, the templates' and Connections' stores of their controllers. The future feeds the
/// two watches of its own; it runs for as long as the controllers do.
fn caches(
    client: &kube::Client,
    (scopes, shard): (&[Option<String>], Option<&crate::shard::Shard>),
    templates: Vec<(KindSet, Listing<TemporalWorkerOwnedResource>)>,
    connections: Vec<(KindSet, Listing<TemporalConnection>)>,
    subscribers: Vec<DeploymentFeed>,
) -> (
    Caches,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    // A shard's versioned Deployments carry its labels (`Shard::dress`). Autoscalers are
    // watched whole: a user's own HPA carries no shard label, and missing it would make the
    // controller fight it over replicas.
    let labelled = watcher::Config::default().labels(&match shard {
        Some(shard) => format!("{LABEL_DEPLOYMENT_NAME},{}", shard.selector()),
        None => LABEL_DEPLOYMENT_NAME.to_string(),
    });
    let (deployments, deployments_listed, deployment_events) =
        reflect_builtin::<Deployment>(client, scopes, labelled, crate::caches::slim_deployment);
    let (autoscalers, autoscalers_listed, autoscaler_events) =
        reflect_builtin::<HorizontalPodAutoscaler>(
            client,
            scopes,
            watcher::Config::default(),
            crate::caches::slim_autoscaler,
        );
    let feed = async move {
        let deployments = deployment_events.for_each(move |e| {
            match e {
                Ok(d) => {
                    let d = Arc::new(d);
                    for s in &subscribers {
                        // A stopped controller has dropped its receiver: nothing to tell it.
                        let _ = s.unbounded_send(d.clone());
                    }
                }
                Err(e) => log_watch_error(Some(e)),
            }
            std::future::ready(())
        });
        let autoscalers = autoscaler_events.for_each(|e| async move { log_watch_error(e.err()) });
        futures::future::join(deployments, autoscalers).await;
    };
    let mut caches = Caches::new(
        (deployments, deployments_listed),
        (autoscalers, autoscalers_listed),
        connections,
        templates,
    );
    caches.sharded = shard.is_some();
    (caches, feed)
}

/// Versioned Deployments the cache has applied (or seen deleted), for a controller to look at
/// the objects they concern. The cache's own watch drives the controllers, so a reconcile
/// triggered by a Deployment change always finds that change in the cache (a watch of its own
/// could run ahead of the cache, and the reconcile would see the Pods not Ready yet and wait
/// for the next idle look).
type DeploymentFeed = futures::channel::mpsc::UnboundedSender<Arc<Deployment>>;
type DeploymentChanges = futures::channel::mpsc::UnboundedReceiver<Arc<Deployment>>;

/// The worker deployment of `set` that controls `d`, if any.
fn owner(set: KindSet, d: &Deployment) -> Option<ObjectRef<TemporalWorkerDeployment>> {
    let ns = d.namespace()?;
    let kind = set.kind(crate::api::Model::Worker);
    d.owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == kind)
        .map(|o| ObjectRef::new_with(&o.name, set).within(&ns))
}

/// A failed watch of a cache is retried by the watcher (with backoff); the store keeps its
/// last state meanwhile.
fn log_watch_error(e: Option<watcher::Error>) {
    if let Some(e) = e {
        tracing::warn!(error = %e, "cache watch failed; retrying");
    }
}

/// The worker-deployment controller of one kind set.
fn worker_controller(
    set: KindSet,
    store: Store<TemporalWorkerDeployment>,
    twds: impl Stream<Item = Result<TemporalWorkerDeployment, watcher::Error>> + Send + 'static,
    (scopes, cluster): (Vec<Option<String>>, bool),
    deployments: DeploymentChanges,
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> {
    // The lane (`crate::lane`): first looks of new objects, and passes on the clock.
    let (twds, handbacks, lane, lane_runs) = lane::wire(ctx.clone(), store.clone(), twds);
    let owners = deployments.filter_map(move |d| std::future::ready(owner(set, &d)));
    let (connections, cluster_connections) =
        connection_changes(&ctx.services.client, &scopes, set, cluster);
    let users = store.clone();
    let q = ctx
        .services
        .metrics
        .queues
        .of(ControllerKind::WorkerDeployment);
    let won = queued::all_of(
        q.clone(),
        store.clone(),
        set,
        leadership_won(ctx.services.leader.clone()),
    );
    let config = controller::Config::default().concurrency(ctx.settings.max_concurrent_reconciles);
    let reconcile = queued::tracked(q.clone(), set, lane.reconciler());
    let controller = Controller::for_stream_with(queued::objects(q.clone(), set, twds), store, set)
        .with_config(config)
        .reconcile_on(queued::refs(q.clone(), owners))
        // Ordinary work a lane pass asked for, at its time.
        .reconcile_on(queued::refs(q.clone(), handbacks))
        // A Connection change requeues every worker deployment (of its kind set) naming it.
        .watches_stream_with(
            connections,
            queued::mapper(q.clone(), users_of_connection(&users, set)),
            set,
        )
        // A ClusterConnection change requeues every worker deployment, in any namespace,
        // naming it.
        .watches_stream_with(
            cluster_connections,
            queued::mapper(q.clone(), users_of_cluster_connection(&users, set)),
            (),
        )
        // Followers do nothing and wait; the replica that wins the Lease looks at everything.
        .reconcile_all_on(won)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            queued::settle(&q, &res);
            if let Err(e) = res {
                tracing::debug!(error = %e, "reconcile stream error");
            }
            async {}
        });
    // The lane ends when the controller, which holds its handles, stops.
    futures::future::join(controller, lane_runs).map(|_| ())
}

/// The changes of Connections (of `set`, in `scopes`) and, in a cluster install, of
/// ClusterConnections that worker deployments read ([`what_users_read`]).
fn connection_changes(
    client: &kube::Client,
    scopes: &[Option<String>],
    set: KindSet,
    cluster: bool,
) -> (
    impl Stream<Item = Result<TemporalConnection, watcher::Error>> + Send + 'static,
    impl Stream<Item = Result<ClusterConnection, watcher::Error>> + Send + 'static,
) {
    let connections = stream::select_all(scopes.iter().map(|scope| {
        watcher(
            api_in_set::<TemporalConnection>(client, scope, set),
            watcher::Config::default(),
        )
        .touched_objects()
        .predicate_filter(what_users_read, Default::default())
        .boxed()
    }));
    let cluster_connections = if cluster {
        watcher(
            Api::<ClusterConnection>::all(client.clone()),
            watcher::Config::default(),
        )
        .touched_objects()
        .predicate_filter(what_users_read, Default::default())
        .boxed()
    } else {
        stream::empty().boxed()
    };
    (connections, cluster_connections)
}

/// What a worker deployment's reconcile reads of its Connection: the spec (its generation,
/// which deletion bumps too). Not its status, nor its finalizers: at a cold start with 1,000
/// users, the first users' finalizer patch and the Connection's own status writes each cost a
/// pass of all 1,000. A finalizer someone else removes is put back by the next pass of any
/// user (at the latest after the idle interval).
fn what_users_read<K: kube::Resource>(conn: &K) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let meta = conn.meta();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (meta.generation, meta.deletion_timestamp.is_some()).hash(&mut h);
    Some(h.finish())
}

/// The worker deployments of `set` naming a namespaced Connection (same namespace).
fn users_of_connection(
    store: &Store<TemporalWorkerDeployment>,
    set: KindSet,
) -> impl Fn(TemporalConnection) -> Vec<ObjectRef<TemporalWorkerDeployment>> + Send + Sync + 'static
{
    let store = store.clone();
    move |conn| {
        let (ns, name) = (conn.namespace(), conn.name_any());
        store
            .state()
            .into_iter()
            .filter(|t| {
                let r = &t.spec.worker_options.connection_ref;
                t.namespace() == ns && !r.is_cluster() && r.name == name
            })
            .map(|t| ObjectRef::from_obj_with(&*t, set))
            .collect()
    }
}

/// The worker deployments of `set`, in any namespace, naming a ClusterConnection.
fn users_of_cluster_connection(
    store: &Store<TemporalWorkerDeployment>,
    set: KindSet,
) -> impl Fn(ClusterConnection) -> Vec<ObjectRef<TemporalWorkerDeployment>> + Send + Sync + 'static
{
    let store = store.clone();
    move |cc| {
        let name = cc.name_any();
        store
            .state()
            .into_iter()
            .filter(|t| {
                let r = &t.spec.worker_options.connection_ref;
                r.is_cluster() && r.name == name
            })
            .map(|t| ObjectRef::from_obj_with(&*t, set))
            .collect()
    }
}

/// One item each time this replica becomes the leader (and at once if it already is).
fn leadership_won(leader: watch::Receiver<bool>) -> impl Stream<Item = ()> + Send + 'static {
    tokio_stream::wrappers::WatchStream::new(leader)
        .filter_map(|leads| std::future::ready(leads.then_some(())))
}

/// The error policy of every reconciler. Only errors that prevent any reconcile (an object
/// without a namespace) end up here; every other failure is reported and counted by the
/// reconciler's report stage.
fn error_policy<K: ResourceExt, C>(obj: Arc<K>, err: &Error, _ctx: Arc<C>) -> Action {
    warn!(error = %err, name = %obj.name_any(), "reconcile failed");
    Action::await_change()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::what_users_read;

    fn object(generation: i64) -> ConfigMap {
        let mut o = ConfigMap::default();
        o.metadata.generation = Some(generation);
        o
    }

    #[test]
    fn users_look_again_for_a_spec_change_or_a_deletion_only() {
        let seen = what_users_read(&object(1));
        let mut finalized = object(1);
        finalized.metadata.finalizers = Some(vec![crate::api::FINALIZER.into()]);
        finalized.metadata.resource_version = Some("7".into());
        assert_eq!(
            what_users_read(&finalized),
            seen,
            "a finalizer or status write is no change to users"
        );
        assert_ne!(what_users_read(&object(2)), seen, "a spec change");
        let mut deleted = object(1);
        deleted.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        assert_ne!(what_users_read(&deleted), seen, "a deletion");
    }
}
