//! Every problem of a spec at once, each prefixed with its field path, and the parsing of the
//! durations validation has already checked.

use std::time::Duration;

use crate::api::duration;

/// The spec cannot be acted on; `message` lists every problem, `; `-separated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSpec {
    pub message: String,
}

#[derive(Default)]
pub(super) struct Problems(Vec<String>);

impl Problems {
    pub(super) fn add(&mut self, path: impl std::fmt::Display, message: impl std::fmt::Display) {
        self.0.push(format!("{path}: {message}"));
    }

    /// A problem whose text already names its field.
    pub(super) fn add_whole(&mut self, message: impl std::fmt::Display) {
        self.0.push(message.to_string());
    }

    pub(super) fn into_result(self) -> Result<(), InvalidSpec> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(InvalidSpec {
                message: self.0.join("; "),
            })
        }
    }
}

/// A duration of the spec. Validation guarantees every one parses; the error path stays for
/// safety.
pub(super) fn parse(path: &str, value: &str) -> Result<Duration, InvalidSpec> {
    duration::parse(value).map_err(|e| InvalidSpec {
        message: format!("{path}: {e}"),
    })
}

/// An optional sunset duration, already validated by [`check_sunset`].
pub(super) fn optional(value: &Option<String>) -> Result<Option<std::time::Duration>, InvalidSpec> {
    value
        .as_deref()
        .map(duration::parse)
        .transpose()
        .map_err(|e| InvalidSpec {
            message: e.to_string(),
        })
}
