//! The command line: [`command`] parses the subcommands and dispatches them; one module per
//! verb family (`status`, `wait`, `watch`, `follow`, `control` for the rollout annotations,
//! `request` for one-shot requests such as retry and restart, `render`, `probe`) and `kubeconfig`
//! for the client and namespace they share.

pub mod command;
pub mod complete;
pub mod control;
pub mod follow;
pub mod kubeconfig;
pub mod lint;
pub mod lint_cel;
pub mod lint_schema;
pub mod probe;
pub mod render;
pub mod request;
pub mod status;
pub mod template;
pub mod undo;
pub mod wait;
pub mod watch;
