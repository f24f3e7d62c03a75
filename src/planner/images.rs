//! Mutable image references in the pod template (`:latest`, no tag, no digest; found by
//! `build_id::mutable_reference` at validation): a warning in the conditions' message for as
//! long as the spec has one, and one Warning event per reference newly reported. Never a
//! refusal: the Go controller's users run such templates today. Pure.

use crate::planner::model::{Desired, MutableImage};

/// What names one reference in a message; the report stage looks for it in the last status to
/// emit its Warning event once.
pub fn marker(m: &MutableImage) -> String {
    format!(
        "container {}'s image {} is a mutable reference",
        m.container, m.image
    )
}

/// The warning for one reference: why it matters, and what to do.
pub fn warning(m: &MutableImage, build_id: &str) -> String {
    format!(
        "{} ({}): a re-pushed image runs new code under build ID {build_id} without a new \
         version, so workflows pinned to it may replay on code they never ran; pin a tag or a \
         digest (@sha256:...)",
        marker(m),
        m.why
    )
}

/// The warnings to append to the conditions' message, if the template has mutable references.
pub fn note(desired: &Desired) -> Option<String> {
    let all: Vec<String> = desired
        .mutable_images
        .iter()
        .map(|m| warning(m, &desired.build_id))
        .collect();
    (!all.is_empty()).then(|| all.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::model::PlanInput;
    use crate::planner::plan;

    fn latest() -> MutableImage {
        MutableImage {
            container: "worker".into(),
            image: "orders:latest".into(),
            why: "the tag latest",
        }
    }

    #[test]
    fn a_mutable_reference_is_warned_about_in_the_message_and_nothing_else_changes() {
        let calm = PlanInput::test();
        let mut warned = calm.clone();
        warned.desired.mutable_images = vec![latest()];
        let (p, q) = (plan(&calm), plan(&warned));
        assert!(q.progress.message.starts_with(&p.progress.message));
        assert!(
            q.progress.message.ends_with(&format!(
                "; container worker's image orders:latest is a mutable reference (the tag \
                 latest): a re-pushed image runs new code under build ID {} without a new \
                 version, so workflows pinned to it may replay on code they never ran; pin a \
                 tag or a digest (@sha256:...)",
                warned.desired.build_id
            )),
            "{}",
            q.progress.message
        );
        assert!(q.progress.message.contains(&marker(&latest())));
        // A warning, not a block: the same phase and the same writes.
        assert_eq!(p.progress.phase, q.progress.phase);
        assert_eq!(
            (&p.routing, &p.create, &p.scale),
            (&q.routing, &q.create, &q.scale)
        );
        assert_eq!(note(&calm.desired), None);
    }
}
