//! The controller's error type. Variants double as metric labels via [`Error::metric_label`].

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("serialization error: {0}")]
    Serde(#[from] serde_json::Error),
    #[error("object has no namespace or name")]
    MissingObjectKey,
    #[error("finalizer error: {0}")]
    Finalizer(String),
    #[error("Temporal error: {0}")]
    Temporal(#[from] crate::temporal::TemporalError),
}

impl Error {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Serde(_) => "serde",
            Error::MissingObjectKey => "missing_key",
            Error::Finalizer(_) => "finalizer",
            Error::Temporal(_) => "temporal",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
