//! Errors that stop a reconcile before it starts. Everything that can go wrong inside a
//! reconcile is a `worker_deployment::Failure`, reported in the status and counted there.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("object has no namespace or name")]
    MissingObjectKey,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
