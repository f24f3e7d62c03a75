fn main() {
    print!("{}", temporal_worker_controller::crdgen::all_yaml());
}
