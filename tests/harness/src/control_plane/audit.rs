//! The API server's audit log (JSON lines, one event per completed request).

use std::path::Path;

use anyhow::{Context as _, Result};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub verb: String,
    pub user: AuditUser,
    #[serde(default)]
    pub impersonated_user: Option<AuditUser>,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    #[serde(default)]
    pub stage: String,
    /// When the stage was reached (RFC 3339, microseconds): the server's clock.
    #[serde(default)]
    pub stage_timestamp: Option<String>,
    /// The request body, for requests the policy logs at `Request` level.
    #[serde(default)]
    pub request_object: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct AuditUser {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub subresource: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: u16,
}

impl AuditEvent {
    /// The user the request acted as (the impersonated one, if any).
    pub fn acting_user(&self) -> &str {
        self.impersonated_user
            .as_ref()
            .map(|u| u.username.as_str())
            .unwrap_or(&self.user.username)
    }

    /// True for verbs that change state.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// The `fieldManager` query parameter of the request, if any.
    pub fn field_manager(&self) -> Option<String> {
        let query = self.request_uri.split_once('?')?.1;
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "fieldManager")
            .map(|(_, v)| v.into_owned())
    }

    /// The resource as `resource[/subresource]`.
    pub fn resource(&self) -> String {
        match &self.object_ref {
            Some(o) if !o.subresource.is_empty() => format!("{}/{}", o.resource, o.subresource),
            Some(o) => o.resource.clone(),
            None => String::new(),
        }
    }

    /// `spec.replicas` the request asked for: a Deployment update or patch, or a `scale`
    /// write, logged with its body.
    pub fn requested_replicas(&self) -> Option<i64> {
        let body = self.request_object.as_ref()?;
        let scale = self
            .object_ref
            .as_ref()
            .is_some_and(|o| o.subresource == "scale");
        match body["spec"]["replicas"].as_i64() {
            Some(n) => Some(n),
            // `Scale.spec.replicas` is `omitempty`: a Go client's scale to zero omits it.
            None if scale && body["kind"] == "Scale" => Some(0),
            None => None,
        }
    }

    /// [`AuditEvent::stage_timestamp`] in milliseconds since the Unix epoch.
    pub fn stage_ms(&self) -> Option<f64> {
        let t: jiff::Timestamp = self.stage_timestamp.as_deref()?.parse().ok()?;
        Some(t.as_microsecond() as f64 / 1e3)
    }

    /// The HTTP status the request got (0 if unknown).
    pub fn code(&self) -> u16 {
        self.response_status.as_ref().map(|s| s.code).unwrap_or(0)
    }
}

pub fn read(path: &Path) -> Result<Vec<AuditEvent>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    // The last line may be half-written while the server is running.
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<AuditEvent>(line).ok())
        .collect())
}
