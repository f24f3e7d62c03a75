//! Errors from the Temporal access layer and their classification (not-found, conflict,
//! manager ownership, auth) so callers never have to parse gRPC messages themselves.

use std::time::Duration;

use temporalio_client::tonic::{Code, Status};

#[derive(thiserror::Error, Debug)]
pub enum TemporalError {
    /// The connection spec cannot be turned into a client configuration.
    #[error("invalid Temporal address {address:?}: {message}")]
    InvalidAddress { address: String, message: String },
    /// Dialling or the first `GetSystemInfo` failed. `code` is set when the server answered.
    #[error("connecting to Temporal at {target}: {message}")]
    Connect {
        target: String,
        code: Option<Code>,
        message: String,
    },
    #[error("connecting to Temporal at {target} timed out after {timeout:?}")]
    ConnectTimeout { target: String, timeout: Duration },
    /// The server (or the transport) answered an RPC with a non-OK status.
    #[error("{method} failed with {}: {message}", code_label(*code))]
    Rpc {
        method: &'static str,
        code: Code,
        message: String,
    },
    #[error("{method} timed out after {timeout:?}")]
    Timeout {
        method: &'static str,
        timeout: Duration,
    },
    /// We refused to send a request that the server would reject anyway.
    #[error("{method}: {message}")]
    InvalidRequest {
        method: &'static str,
        message: String,
    },
}

impl TemporalError {
    pub(crate) fn from_status(method: &'static str, status: &Status) -> Self {
        TemporalError::Rpc {
            method,
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    /// The gRPC code, when the server (or transport) produced one.
    pub fn code(&self) -> Option<Code> {
        match self {
            TemporalError::Rpc { code, .. } => Some(*code),
            TemporalError::Connect { code, .. } => *code,
            TemporalError::Timeout { .. } | TemporalError::ConnectTimeout { .. } => {
                Some(Code::DeadlineExceeded)
            }
            TemporalError::InvalidAddress { .. } | TemporalError::InvalidRequest { .. } => None,
        }
    }

    fn rpc_message(&self) -> Option<(Code, &str)> {
        match self {
            TemporalError::Rpc { code, message, .. } => Some((*code, message.as_str())),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self.rpc_message(), Some((Code::NotFound, _)))
    }

    /// What a create with a fixed ID answers when it was created before.
    pub fn is_already_exists(&self) -> bool {
        matches!(self.rpc_message(), Some((Code::AlreadyExists, _)))
    }

    /// The conflict token we sent is stale: someone changed routing since we described it.
    pub fn is_conflict(&self) -> bool {
        matches!(self.rpc_message(), Some((Code::FailedPrecondition, m)) if m.contains("conflict token mismatch"))
    }

    /// The identity that owns routing changes when Temporal refused ours because of it.
    pub fn manager_conflict(&self) -> Option<String> {
        match self.rpc_message() {
            Some((Code::FailedPrecondition, m)) => parse_manager_owner(m),
            _ => None,
        }
    }

    /// A version delete was refused because the server still remembers pollers for it (live
    /// workers, or stopped ones within `matching.PollerHistoryTTL`, 5 min by default).
    pub fn has_active_pollers(&self) -> bool {
        matches!(self.rpc_message(), Some((Code::FailedPrecondition, m)) if m.contains("has active pollers"))
    }

    /// Credentials were rejected; the pooled connection must not be reused.
    pub fn is_auth(&self) -> bool {
        matches!(
            self.code(),
            Some(Code::Unauthenticated | Code::PermissionDenied)
        )
    }

    /// ResourceExhausted: the namespace or server is rate limiting us.
    pub fn is_resource_exhausted(&self) -> bool {
        self.code() == Some(Code::ResourceExhausted)
    }

    /// Metric label: the gRPC code name as grpc-go spells it, or a small fixed word.
    pub fn code_label(&self) -> &'static str {
        match self {
            TemporalError::InvalidAddress { .. } | TemporalError::InvalidRequest { .. } => {
                "InvalidArgument"
            }
            TemporalError::Connect { code: None, .. } => "Unavailable",
            other => other.code().map(code_label).unwrap_or("Unknown"),
        }
    }
}

/// grpc-go's `codes.Code.String()` names, so dashboards read the same as for Go services.
pub fn code_label(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// Extracts `X` from the server's "ManagerIdentity 'X' is set and does not match user identity
/// 'Y'; ..." refusal. The terminator is searched as a whole phrase so quotes inside X survive.
pub(crate) fn parse_manager_owner(message: &str) -> Option<String> {
    const START: &str = "ManagerIdentity '";
    const END: &str = "' is set and does not match";
    let begin = message.find(START)? + START.len();
    let len = message[begin..].find(END)?;
    Some(message[begin..begin + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(status: Status) -> TemporalError {
        TemporalError::from_status("SetWorkerDeploymentCurrentVersion", &status)
    }

    #[test]
    fn not_found_is_classified_by_code_only() {
        let e = rpc(Status::not_found(
            "no Worker Deployment found with name 'ns/x'; does your Worker Deployment have pollers?",
        ));
        assert!(e.is_not_found());
        assert!(!e.is_conflict());
        assert!(!e.is_auth());
        assert_eq!(e.manager_conflict(), None);
        assert_eq!(e.code_label(), "NotFound");
        assert!(!rpc(Status::failed_precondition("not found")).is_not_found());
    }

    #[test]
    fn stale_token_is_a_conflict() {
        let e = rpc(Status::failed_precondition("conflict token mismatch"));
        assert!(e.is_conflict());
        assert_eq!(e.manager_conflict(), None);
        assert_eq!(e.code_label(), "FailedPrecondition");
        // Same words under another code are not the optimistic-concurrency failure.
        assert!(!rpc(Status::internal("conflict token mismatch")).is_conflict());
    }

    #[test]
    fn manager_owner_is_parsed_from_the_refusal() {
        let e = rpc(Status::failed_precondition(
            "ManagerIdentity 'release/ns/1234' is set and does not match user identity 'intruder'; to proceed, \
             set your own identity as the ManagerIdentity, remove the ManagerIdentity, or wait for the other client to do so",
        ));
        assert_eq!(e.manager_conflict().as_deref(), Some("release/ns/1234"));
        assert!(!e.is_conflict());
        // An owner with a quote in its name is kept whole.
        assert_eq!(
            parse_manager_owner(
                "ManagerIdentity 'o'brien' is set and does not match user identity 'x'"
            )
            .as_deref(),
            Some("o'brien")
        );
        assert_eq!(
            parse_manager_owner("ManagerIdentity 'x' something else"),
            None
        );
        // Only FailedPrecondition carries this meaning.
        let other = rpc(Status::internal(
            "ManagerIdentity 'a' is set and does not match user identity 'b'",
        ));
        assert_eq!(other.manager_conflict(), None);
    }

    #[test]
    fn version_with_pollers_is_recognised() {
        let e = rpc(Status::failed_precondition(
            "version 'ns/app:v1' cannot be deleted since it has active pollers",
        ));
        assert!(e.has_active_pollers());
        assert!(!e.is_conflict());
        assert!(!rpc(Status::failed_precondition("conflict token mismatch")).has_active_pollers());
    }

    #[test]
    fn auth_errors_from_rpcs_and_connects() {
        assert!(rpc(Status::unauthenticated("bad key")).is_auth());
        assert!(rpc(Status::permission_denied("no")).is_auth());
        assert!(!rpc(Status::unavailable("down")).is_auth());
        let connect = TemporalError::Connect {
            target: "https://x:7233".into(),
            code: Some(Code::Unauthenticated),
            message: "`get_system_info` call error".into(),
        };
        assert!(connect.is_auth());
        assert_eq!(connect.code_label(), "Unauthenticated");
        let transport = TemporalError::Connect {
            target: "http://x:1".into(),
            code: None,
            message: "refused".into(),
        };
        assert!(!transport.is_auth());
        assert_eq!(transport.code_label(), "Unavailable");
    }

    #[test]
    fn labels_for_non_rpc_errors() {
        let t = TemporalError::Timeout {
            method: "DescribeWorkerDeployment",
            timeout: Duration::from_secs(1),
        };
        assert_eq!(t.code_label(), "DeadlineExceeded");
        assert!(!t.is_not_found());
        let bad = TemporalError::InvalidRequest {
            method: "x",
            message: "empty build id".into(),
        };
        assert_eq!(bad.code_label(), "InvalidArgument");
        assert!(rpc(Status::resource_exhausted("slow down")).is_resource_exhausted());
        assert_eq!(code_label(Code::Ok), "OK");
        assert_eq!(code_label(Code::Cancelled), "Canceled");
    }

    #[test]
    fn display_names_method_and_code() {
        let e = rpc(Status::failed_precondition("conflict token mismatch"));
        assert_eq!(
            e.to_string(),
            "SetWorkerDeploymentCurrentVersion failed with FailedPrecondition: conflict token mismatch"
        );
    }
}
