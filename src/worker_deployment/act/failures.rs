//! How a refused write of the act stage becomes a [`Failure`]: which ones no retry can fix,
//! which ones a quiet retry is right for.

use crate::temporal::TemporalError;
use crate::worker_deployment::outcome::{Failure, WriteError};
use crate::worker_deployment::step::WriteStep;

pub(super) fn fail(step: WriteStep, source: impl Into<WriteError>) -> Failure {
    Failure::ExecutionFailed {
        step,
        source: source.into(),
    }
}

/// A refused Kubernetes write of a rendered versioned Deployment. 422 means the pod template
/// itself is unacceptable (for example a container name that is not a DNS label), which no
/// retry can fix.
pub(super) fn render_write_fail(step: WriteStep, e: kube::Error) -> Failure {
    match &e {
        kube::Error::Api(s) if s.code == 422 => Failure::RenderedInvalid { step, source: e },
        _ if namespace_terminating(&e) => Failure::NamespaceTerminating { step, source: e },
        _ => fail(step, e),
    }
}

/// The API server's NamespaceLifecycle refusal (403 with cause `NamespaceTerminating`): no
/// new object may be created in a namespace being deleted.
fn namespace_terminating(e: &kube::Error) -> bool {
    let kube::Error::Api(s) = e else { return false };
    s.code == 403
        && s.details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
}

/// Which retry a refused Temporal write deserves is decided by [`super::super::verdict`].
pub(super) fn temporal_fail(step: WriteStep, source: TemporalError) -> Failure {
    if source.is_conflict() {
        Failure::WriteRaced { step, source }
    } else if source.is_resource_exhausted() {
        Failure::WriteThrottled { step, source }
    } else if let Some(owner) = source.manager_conflict() {
        Failure::ManagedElsewhere { owner }
    } else {
        fail(step, source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temporalio_client::tonic::Code;

    fn rpc(code: Code, message: &str) -> TemporalError {
        TemporalError::Rpc {
            method: "SetWorkerDeploymentRampingVersion",
            code,
            message: message.into(),
        }
    }

    #[test]
    fn temporal_failures_say_whether_a_quiet_retry_is_right() {
        let f = temporal_fail(
            WriteStep::ChangeRouting,
            rpc(Code::ResourceExhausted, "too many requests"),
        );
        assert!(
            matches!(&f, Failure::WriteThrottled { .. } if f.to_string().starts_with("change routing: ")),
            "{f:?}"
        );

        let f = temporal_fail(WriteStep::ChangeRouting, rpc(Code::Internal, "boom"));
        assert!(matches!(f, Failure::ExecutionFailed { .. }), "{f:?}");

        let f = temporal_fail(
            WriteStep::ChangeRouting,
            rpc(Code::FailedPrecondition, "conflict token mismatch"),
        );
        assert!(matches!(f, Failure::WriteRaced { .. }), "{f:?}");

        let f = fail(WriteStep::CreateDeployment, api_error(403, "forbidden"));
        assert!(matches!(f, Failure::ExecutionFailed { .. }), "{f:?}");
    }

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Invalid")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn an_invalid_rendered_deployment_is_a_spec_problem() {
        let msg = r#"Deployment.apps "w-v1" is invalid: spec.template.spec.containers[0].name: Invalid value: "Bad_Name""#;
        let f = render_write_fail(WriteStep::CreateDeployment, api_error(422, msg));
        let Failure::RenderedInvalid { .. } = &f else {
            panic!("{f:?}")
        };
        let message = f.to_string();
        assert!(message.contains("fix the TWD's pod template"), "{message}");
        assert!(message.contains("Bad_Name"), "{message}");
        // The namespace is being deleted: not a plan failure (the TWD's deletion follows).
        let mut refused = kube::core::Status::failure(
            "unable to create new content in namespace shop because it is being terminated",
            "Forbidden",
        )
        .with_code(403);
        refused.details = serde_json::from_value(serde_json::json!({
            "causes": [{"reason": "NamespaceTerminating", "message": "namespace is terminating"}]
        }))
        .ok();
        let f = render_write_fail(
            WriteStep::CreateDeployment,
            kube::Error::Api(refused.boxed()),
        );
        assert!(matches!(f, Failure::NamespaceTerminating { .. }), "{f:?}");
        // Anything else (forbidden by a policy webhook, server trouble) may pass on retry.
        for code in [403, 409, 500] {
            let f = render_write_fail(WriteStep::CreateDeployment, api_error(code, "nope"));
            assert!(
                matches!(f, Failure::ExecutionFailed { .. }),
                "{code}: {f:?}"
            );
        }
    }
}
