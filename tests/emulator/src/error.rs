//! API errors rendered as `metav1.Status` bodies, the way kube-apiserver reports them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One entry of `details.causes[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

impl Cause {
    /// The text Kubernetes shows for one field error, e.g. `spec.x: Required value`.
    pub fn display(&self) -> String {
        let field = if self.field.is_empty() {
            "<nil>"
        } else {
            &self.field
        };
        format!("{field}: {}", self.message)
    }
}

/// Identifies the object an error is about (`details` of the Status).
#[derive(Debug, Clone, Default)]
pub struct Details {
    pub name: String,
    pub group: String,
    /// The resource plural for most errors, the Kind for `Invalid` (like the real server).
    pub kind: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    NotFound { message: String, details: Details },
    #[error("{message}")]
    AlreadyExists { message: String, details: Details },
    #[error("{message}")]
    Conflict { message: String, details: Details },
    /// Server-side apply conflicts (409 with `FieldManagerConflict` causes).
    #[error("{message}")]
    ApplyConflict {
        message: String,
        details: Details,
        causes: Vec<Cause>,
    },
    #[error("{message}")]
    Invalid {
        message: String,
        details: Details,
        causes: Vec<Cause>,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    NotAcceptable(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{message}")]
    Gone { message: String },
    #[error("{0}")]
    Internal(String),
    /// Produced by fault injection: any status code with a generic reason.
    #[error("{message}")]
    Injected { code: u16, message: String },
}

impl ApiError {
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let gr = qualified(plural, group);
        ApiError::NotFound {
            message: format!("{gr} \"{name}\" not found"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: plural.into(),
            },
        }
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let gr = qualified(plural, group);
        ApiError::AlreadyExists {
            message: format!("{gr} \"{name}\" already exists"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: plural.into(),
            },
        }
    }

    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let gr = qualified(plural, group);
        ApiError::Conflict {
            message: format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: plural.into(),
            },
        }
    }

    /// 422 with the real server's message layout: `Kind.group "name" is invalid: a, b`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let gk = qualified(kind, group);
        let list: Vec<String> = causes.iter().map(Cause::display).collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        ApiError::Invalid {
            message: format!("{gk} \"{name}\" is invalid: {joined}"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: kind.into(),
            },
            causes,
        }
    }

    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } => 404,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::NotAcceptable(_) => 406,
            ApiError::Forbidden(_) => 403,
            ApiError::Gone { .. } => 410,
            ApiError::Internal(_) => 500,
            ApiError::Injected { code, .. } => *code,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::Gone { .. } => "Expired",
            ApiError::Internal(_) => "InternalError",
            ApiError::Injected { code, .. } => reason_for_code(*code),
        }
    }

    /// The `metav1.Status` body.
    pub fn status_body(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            ApiError::NotFound { details, .. }
            | ApiError::AlreadyExists { details, .. }
            | ApiError::Conflict { details, .. } => Some((details, Vec::new())),
            ApiError::Invalid {
                details, causes, ..
            }
            | ApiError::ApplyConflict {
                details, causes, ..
            } => Some((details, causes.clone())),
            _ => None,
        };
        if let Some((d, causes)) = details {
            let mut det = json!({"name": d.name, "kind": d.kind});
            if !d.group.is_empty() {
                det["group"] = json!(d.group);
            }
            if !causes.is_empty() {
                det["causes"] = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
            status["details"] = det;
        }
        status
    }
}

fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// `deployments.apps`, or just `configmaps` for the core group.
pub fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_string()
    } else {
        format!("{name}.{group}")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.status_body().to_string();
        (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
