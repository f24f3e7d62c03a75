//! The binary: the command line and everything it does are the library's [`command`] module,
//! so the tests reach the same parsing and checks a user's flags do.
//!
//! [`command`]: temporal_worker_controller::command

fn main() -> std::process::ExitCode {
    temporal_worker_controller::cli::command::main()
}
