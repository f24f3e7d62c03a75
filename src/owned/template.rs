//! `{{ .Key }}` substitution in string values of an owned object. Deliberately not a template
//! engine: the only syntax is a known key between `{{` and `}}`, so a user's object can never
//! run code, loop or read anything but the four values below.

/// The values a string may refer to.
#[derive(Clone, Copy, Debug)]
pub struct Values<'a> {
    /// The versioned Deployment's name.
    pub deployment_name: &'a str,
    pub build_id: &'a str,
    pub temporal_namespace: &'a str,
    /// `None` when the version's task queue is not known; naming it is then an error.
    pub task_queue: Option<&'a str>,
}

/// Keys a template may name.
pub const KEYS: &[&str] = &[
    "DeploymentName",
    "BuildID",
    "TemporalNamespace",
    "TaskQueue",
];

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "unknown template key {key:?} in {text:?}; known keys: .DeploymentName, .BuildID, .TemporalNamespace, .TaskQueue"
    )]
    UnknownKey { key: String, text: String },
    #[error("unclosed '{{{{' in {0:?}")]
    Unclosed(String),
    #[error("{{{{ .TaskQueue }}}} is used in {0:?} but the version's task queue is not known")]
    TaskQueueUnknown(String),
}

/// `text` with every `{{ .Key }}` replaced. Text without `{{` is returned unchanged.
pub fn expand(text: &str, values: &Values) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(TemplateError::Unclosed(text.to_string()));
        };
        out.push_str(lookup(after[..end].trim(), text, values)?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn lookup<'a>(expr: &str, text: &str, values: &Values<'a>) -> Result<&'a str, TemplateError> {
    match expr {
        ".DeploymentName" => Ok(values.deployment_name),
        ".BuildID" => Ok(values.build_id),
        ".TemporalNamespace" => Ok(values.temporal_namespace),
        ".TaskQueue" => values
            .task_queue
            .ok_or_else(|| TemplateError::TaskQueueUnknown(text.to_string())),
        other => Err(TemplateError::UnknownKey {
            key: other.to_string(),
            text: text.to_string(),
        }),
    }
}

/// True when `text` names `{{ .TaskQueue }}` (the only value that may need a Temporal lookup).
pub fn mentions_task_queue(text: &str) -> bool {
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return false;
        };
        if after[..end].trim() == ".TaskQueue" {
            return true;
        }
        rest = &after[end + 2..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values<'static> {
        Values {
            deployment_name: "pay-abc",
            build_id: "abc",
            temporal_namespace: "prod",
            task_queue: Some("orders"),
        }
    }

    #[test]
    fn every_key_is_replaced_and_spacing_inside_braces_is_free() {
        let out = expand(
            "{{ .DeploymentName }}/{{.BuildID}}/{{  .TemporalNamespace }}/{{ .TaskQueue }}",
            &values(),
        );
        assert_eq!(out, Ok("pay-abc/abc/prod/orders".to_string()));
    }

    #[test]
    fn text_without_braces_is_unchanged() {
        assert_eq!(expand("plain } {", &values()), Ok("plain } {".to_string()));
    }

    #[test]
    fn an_unknown_key_or_any_other_expression_is_an_error() {
        for bad in [
            "{{ .Namespace }}",
            "{{ printf \"x\" }}",
            "{{ .BuildID | upper }}",
        ] {
            assert!(
                matches!(
                    expand(bad, &values()),
                    Err(TemplateError::UnknownKey { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_unclosed_brace_is_an_error() {
        assert!(matches!(
            expand("x {{ .BuildID", &values()),
            Err(TemplateError::Unclosed(_))
        ));
    }

    #[test]
    fn the_task_queue_must_be_known_when_named() {
        let v = Values {
            task_queue: None,
            ..values()
        };
        assert!(matches!(
            expand("{{ .TaskQueue }}", &v),
            Err(TemplateError::TaskQueueUnknown(_))
        ));
        assert_eq!(expand("{{ .BuildID }}", &v), Ok("abc".to_string()));
        assert!(mentions_task_queue("q-{{ .TaskQueue }}"));
        assert!(!mentions_task_queue("q-{{ .BuildID }}"));
    }
}
