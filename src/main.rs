use kube::CustomResourceExt;
fn main() {
    let crds = [
        temporal_worker_controller::api::TemporalWorkerDeployment::crd(),
        temporal_worker_controller::api::TemporalConnection::crd(),
    ];
    for c in crds {
        println!("---\n{}", serde_yaml::to_string(&c).unwrap());
    }
}
