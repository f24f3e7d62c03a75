//! The Connection reconciler's settings, typed once from the command line in
//! `run::RunOptions`. What every reconciler shares is in `crate::reconciler::services`.

use std::time::Duration;

use crate::connection::status::DEFAULT_EXPIRY_WARNING;

/// The Connection reconciler's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// A Connection's client certificate this close to expiry is reported (Warning event,
    /// `expiringSoon`, metric).
    pub expiry_warning: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            expiry_warning: DEFAULT_EXPIRY_WARNING,
        }
    }
}
