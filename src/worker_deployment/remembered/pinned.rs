//! The last count of pinned workflows per old version (drain visibility,
//! `crate::worker_deployment::observe`), kept between reconciles so a count is not asked again before
//! the planner says it is due.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::temporal::state::PinnedView;

/// The last count per (Temporal worker deployment, build ID).
#[derive(Debug, Default)]
pub struct PinnedCounts(Mutex<HashMap<(String, String), PinnedView>>);

impl PinnedCounts {
    pub(crate) fn get(&self, deployment: &str, build: &str) -> Option<PinnedView> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&(deployment.to_string(), build.to_string())).cloned()
    }

    /// Keeps exactly `views` for `deployment`: versions no longer shown are forgotten.
    pub(crate) fn set(&self, deployment: &str, views: Vec<(String, PinnedView)>) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|(d, _), _| d != deployment);
        for (build, view) in views {
            m.insert((deployment.to_string(), build), view);
        }
    }
}
