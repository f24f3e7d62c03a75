//! Unique names, so that tests sharing one control plane and one Temporal server never collide.

use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// `<prefix>-<pid>-<n>`: unique within this test process and across concurrent test processes.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id() % 100_000,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}
