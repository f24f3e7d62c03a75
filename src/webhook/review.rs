//! AdmissionReview in and out (`kube::core::admission`): decoding a request into our typed
//! objects, and encoding a [`Verdict`] as the response the API server shows the user.

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, Status};
use serde::de::DeserializeOwned;

/// What admission decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Allowed; each warning is shown by kubectl (`Warning: …`).
    AllowWithWarnings(Vec<String>),
    /// The object is wrong (422, `Invalid`); one entry per problem, each naming its field.
    Invalid(Vec<String>),
    /// The requester (or the controller) lacks rights (403, `Forbidden`).
    Forbidden(Vec<String>),
    /// The decision could not be made (500); the request is refused.
    Error(String),
}

/// The API server joins nothing for us: problems go out as one message, `; `-separated, the
/// same way the controller writes them to status.
pub fn respond(request_uid: AdmissionResponse, verdict: Verdict) -> AdmissionResponse {
    let mut response = request_uid;
    let (code, reason, message) = match verdict {
        Verdict::Allow => return response,
        Verdict::AllowWithWarnings(w) => {
            if !w.is_empty() {
                response.warnings = Some(w);
            }
            return response;
        }
        Verdict::Invalid(p) => (422, "Invalid", p.join("; ")),
        Verdict::Forbidden(p) => (403, "Forbidden", p.join("; ")),
        Verdict::Error(m) => (500, "InternalError", m),
    };
    response = response.deny(message.clone());
    let mut status = Status::failure(&message, reason);
    status.code = code;
    response.result = status;
    response
}

/// One decoded request: the operation, the new and old objects (typed), the requester.
pub struct Decoded<T> {
    pub request: AdmissionRequest<DynamicObject>,
    pub object: Option<T>,
    pub old: Option<T>,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the AdmissionReview holds no request")]
    NoRequest,
    #[error("the {which} object is not a valid {kind}: {source}")]
    Object {
        which: &'static str,
        kind: &'static str,
        source: serde_json::Error,
    },
}

/// Decodes `review` and converts its objects into `T` (`kind` names `T` in errors).
pub fn decode<T: DeserializeOwned>(
    review: AdmissionReview<DynamicObject>,
    kind: &'static str,
) -> Result<Decoded<T>, DecodeError> {
    let request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| DecodeError::NoRequest)?;
    let typed =
        |o: &Option<DynamicObject>, which: &'static str| -> Result<Option<T>, DecodeError> {
            o.as_ref()
                .map(|o| {
                    serde_json::to_value(o)
                        .and_then(serde_json::from_value)
                        .map_err(|source| DecodeError::Object {
                            which,
                            kind,
                            source,
                        })
                })
                .transpose()
        };
    let object = typed(&request.object, "new")?;
    // DELETE carries the object being deleted as the old object only.
    let old = if matches!(request.operation, Operation::Update | Operation::Delete) {
        typed(&request.old_object, "old")?
    } else {
        None
    };
    Ok(Decoded {
        request,
        object,
        old,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TemporalWorkerOwnedResource;
    use serde_json::json;

    fn review(operation: &str, object: serde_json::Value) -> AdmissionReview<DynamicObject> {
        serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "req-1",
                "kind": {"group": "temporal.io", "version": "v1alpha1", "kind": "TemporalWorkerOwnedResource"},
                "resource": {"group": "temporal.io", "version": "v1alpha1", "resource": "temporalworkerownedresources"},
                "name": "scaler",
                "namespace": "team-a",
                "operation": operation,
                "userInfo": {"username": "alice", "groups": ["devs"]},
                "object": object,
                "oldObject": null,
                "dryRun": false
            }
        }))
        .expect("review")
    }

    fn twor() -> serde_json::Value {
        json!({"apiVersion": "temporal.io/v1alpha1", "kind": "TemporalWorkerOwnedResource",
            "metadata": {"name": "scaler", "namespace": "team-a"},
            "spec": {"workerRef": {"name": "w"}, "object": {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"}}})
    }

    #[test]
    fn a_request_decodes_into_the_typed_object_and_the_user() {
        let d: Decoded<TemporalWorkerOwnedResource> =
            decode(review("CREATE", twor()), "TemporalWorkerOwnedResource").expect("decoded");
        assert_eq!(d.request.uid, "req-1");
        assert_eq!(d.request.user_info.username.as_deref(), Some("alice"));
        assert_eq!(d.object.expect("object").spec.worker_name(), "w");
        assert!(d.old.is_none());
        let bad = json!({"apiVersion": "temporal.io/v1alpha1", "kind": "TemporalWorkerOwnedResource",
            "metadata": {"name": "x"}, "spec": {"workerRef": 5}});
        let e = decode::<TemporalWorkerOwnedResource>(
            review("CREATE", bad),
            "TemporalWorkerOwnedResource",
        );
        assert!(matches!(e, Err(DecodeError::Object { which: "new", .. })));
    }

    #[test]
    fn verdicts_become_responses_with_the_joined_message_and_a_code() {
        let d: Decoded<TemporalWorkerOwnedResource> =
            decode(review("CREATE", twor()), "TemporalWorkerOwnedResource").expect("decoded");
        let base = AdmissionResponse::from(&d.request);
        let ok = respond(base.clone(), Verdict::Allow);
        assert!(ok.allowed);
        assert_eq!(ok.uid, "req-1");
        let warned = respond(base.clone(), Verdict::AllowWithWarnings(vec!["w".into()]));
        assert!(warned.allowed);
        assert_eq!(warned.warnings, Some(vec!["w".to_string()]));
        let no = respond(
            base.clone(),
            Verdict::Invalid(vec!["a: x".into(), "b: y".into()]),
        );
        assert!(!no.allowed);
        assert_eq!(no.result.message, "a: x; b: y");
        assert_eq!(no.result.code, 422);
        let forbidden = respond(
            base,
            Verdict::Forbidden(vec!["user \"alice\" may not".into()]),
        );
        assert_eq!(forbidden.result.code, 403);
        assert_eq!(forbidden.result.reason, "Forbidden");
        let json = serde_json::to_value(forbidden.into_review()).expect("json");
        assert_eq!(json["response"]["uid"], "req-1");
        assert_eq!(json["response"]["allowed"], false);
        assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
    }
}
