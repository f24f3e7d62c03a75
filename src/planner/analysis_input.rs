//! The canary analysis as the planner gets it: its settings from the spec and the samples
//! the reconciler counted (re-exported by [`super::model`]; the rules are [`super::analysis`]).

use std::time::Duration;

use jiff::Timestamp;

/// Canary analysis settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    pub interval: Duration,
    /// Percent.
    pub max_failure_rate: Option<f64>,
    /// Percentage points above the current version's rate.
    pub max_failure_rate_increase: Option<f64>,
    pub min_sample_size: u64,
    pub workflow_types: Vec<String>,
    pub max_inconclusive: Duration,
    /// The verdict after `max_inconclusive`: true = pass.
    pub inconclusive_passes: bool,
    pub dry_run: bool,
}

/// Closed workflows of one version in the analysis window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub closed: u64,
    /// Failed or timed out.
    pub failed: u64,
}

/// What the reconciler counted for a due analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalysisObservation {
    /// The step the window belongs to (zero-based).
    pub step: usize,
    pub target: Sample,
    /// The current version's sample over the same window (zero when nothing is Current).
    pub current: Sample,
    pub at: Timestamp,
}
