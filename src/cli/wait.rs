//! `temporal-worker-controller wait NAME --for ready|current|stalled`: blocks until the rollout
//! reaches the condition, for scripts and CD pipelines.
//!
//! [`verdict`] is pure (the status of one generation in, a decision out); [`run`] follows the
//! rollout ([`crate::cli::follow`]) and applies it to every change until a decision or the
//! timeout.

use std::process::ExitCode;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::conditions as cond;
use crate::api::twd::{TemporalWorkerDeploymentStatus, VersionStatus};
use crate::cli::follow::{self, Source, Update};
use crate::cli::status::CliError;
use crate::summary::RolloutView;

/// What `wait` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    /// `Ready=True`: the target version is Current and its workers poll.
    Ready,
    /// The target build is Current in Temporal (status.targetVersion.status).
    Current,
    /// `Stalled=True`: the rollout needs a spec change or a human.
    Stalled,
}

/// Exit codes of `wait`, documented in its `--help` and in README.md.
pub mod exit {
    /// The condition was reached.
    pub const REACHED: u8 = 0;
    /// The rollout stalled (`Stalled=True`), was deleted, or could not be read.
    pub const FAILED: u8 = 1;
    /// The timeout passed first (also: a usage error, as clap reports it).
    pub const TIMEOUT: u8 = 2;
}

/// The decision about one observed state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Reached,
    /// The rollout cannot get there without a spec change or a human: `Stalled=True`.
    Stalled {
        reason: String,
        message: String,
    },
    /// Not yet; says what it waits for.
    Pending(String),
}

fn find<'a>(status: &'a TemporalWorkerDeploymentStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Decides about a rollout of `generation` whose status is `status`. Nothing in a status the
/// controller wrote for an older generation counts, neither a `Ready=True` nor a `Stalled=True`:
/// the spec changed since (a new build, or the fix of an invalid spec).
pub fn verdict(
    generation: Option<i64>,
    status: Option<&TemporalWorkerDeploymentStatus>,
    wait_for: WaitFor,
) -> Verdict {
    let Some(status) = status else {
        return Verdict::Pending("the controller has not written a status yet".into());
    };
    let observed = status.observed_generation;
    if let Some(generation) = generation
        && observed.is_none_or(|o| o < generation)
    {
        return Verdict::Pending(format!(
            "the controller has not observed generation {generation} yet (observed: {})",
            observed.map_or_else(|| "none".to_string(), |o| o.to_string())
        ));
    }
    // A condition may carry its own observedGeneration; an older one is stale too.
    let current = |c: &&Condition| match (c.observed_generation, generation) {
        (Some(o), Some(g)) => o >= g,
        _ => true,
    };
    let is_true = |type_: &str| {
        find(status, type_)
            .filter(current)
            .filter(|c| c.status == "True")
    };
    if let Some(stalled) = is_true(cond::STALLED) {
        return match wait_for {
            WaitFor::Stalled => Verdict::Reached,
            _ => Verdict::Stalled {
                reason: stalled.reason.clone(),
                message: stalled.message.clone(),
            },
        };
    }
    let why_not = || {
        find(status, cond::READY)
            .map(|c| format!("{}: {}", c.reason, c.message))
            .unwrap_or_else(|| "no Ready condition yet".into())
    };
    match wait_for {
        WaitFor::Ready if is_true(cond::READY).is_some() => Verdict::Reached,
        WaitFor::Current => match &status.target_version {
            Some(t) if t.version.status == VersionStatus::Current => Verdict::Reached,
            Some(t) => Verdict::Pending(format!(
                "target {} is {:?} ({})",
                t.version.build_id,
                t.version.status,
                why_not()
            )),
            None => Verdict::Pending(format!("no target version yet ({})", why_not())),
        },
        WaitFor::Ready | WaitFor::Stalled => Verdict::Pending(why_not()),
    }
}

/// The verdict about one view of the status API.
pub fn verdict_of(view: &RolloutView, wait_for: WaitFor) -> Verdict {
    verdict(view.generation, view.status.as_ref(), wait_for)
}

pub struct WaitArgs {
    pub source: Source,
    pub namespace: Option<String>,
    pub name: String,
    pub wait_for: WaitFor,
    pub timeout: Duration,
}

/// Waits, printing the outcome; returns the exit code ([`exit`]).
pub async fn run(args: WaitArgs) -> ExitCode {
    let what = match args.wait_for {
        WaitFor::Ready => "Ready",
        WaitFor::Current => "target Current",
        WaitFor::Stalled => "Stalled",
    };
    let outcome = tokio::time::timeout(args.timeout, watch_until(&args)).await;
    match outcome {
        Ok(Ok(view)) => {
            println!("{}/{}: {what}", view.namespace, view.name);
            ExitCode::from(exit::REACHED)
        }
        Ok(Err(Failure::Stalled { reason, message })) => {
            eprintln!("error: {}: Stalled ({reason}): {message}", args.name);
            ExitCode::from(exit::FAILED)
        }
        Ok(Err(Failure::Other(e))) => {
            eprintln!("error: {e}");
            ExitCode::from(exit::FAILED)
        }
        Err(_) => {
            eprintln!(
                "error: timed out after {} waiting for {} to be {what}",
                crate::api::duration::format(args.timeout),
                args.name
            );
            ExitCode::from(exit::TIMEOUT)
        }
    }
}

enum Failure {
    Stalled { reason: String, message: String },
    Other(String),
}

async fn watch_until(args: &WaitArgs) -> Result<RolloutView, Failure> {
    let mut updates = follow::follow(&args.source, args.namespace.as_deref(), &args.name)
        .await
        .map_err(|e: CliError| Failure::Other(e.to_string()))?;
    let mut last_pending = String::new();
    while let Some(update) = updates.recv().await {
        match update {
            Update::Rollout(view) => match verdict_of(&view, args.wait_for) {
                Verdict::Reached => return Ok(*view),
                Verdict::Stalled { reason, message } => {
                    return Err(Failure::Stalled { reason, message });
                }
                // Says what it waits for when that changes, on stderr (stdout stays the result).
                Verdict::Pending(why) if why != last_pending => {
                    eprintln!("waiting: {why}");
                    last_pending = why;
                }
                Verdict::Pending(_) => {}
            },
            Update::Deleted => {
                return Err(Failure::Other(format!("{} was deleted", args.name)));
            }
            Update::Trouble(t) => eprintln!("warning: {t} (retrying)"),
            Update::Fatal(e) => return Err(Failure::Other(e.to_string())),
        }
    }
    Err(Failure::Other("the watch ended".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TemporalWorkerDeployment;

    /// Generation 4; status written for `observed` with `conds`, and the target's Temporal
    /// status.
    fn status(
        observed: i64,
        target: VersionStatus,
        conds: &[(&str, &str, &str)],
    ) -> (Option<i64>, TemporalWorkerDeploymentStatus) {
        let twd = TemporalWorkerDeployment::test()
            .generation(4)
            .with_conditions(observed, conds);
        let mut status = twd.status.expect("status");
        status.target_version = Some(
            serde_json::from_value(serde_json::json!({"buildID": "v2", "status": target}))
                .expect("target"),
        );
        (twd.metadata.generation, status)
    }

    fn judge(
        observed: i64,
        target: VersionStatus,
        conds: &[(&str, &str, &str)],
        w: WaitFor,
    ) -> Verdict {
        let (generation, status) = status(observed, target, conds);
        verdict(generation, Some(&status), w)
    }

    const DONE: &[(&str, &str, &str)] = &[
        ("Ready", "True", "RolloutComplete"),
        ("Progressing", "False", "RolloutComplete"),
    ];
    const RAMPING: &[(&str, &str, &str)] = &[
        ("Ready", "False", "Ramping"),
        ("Progressing", "True", "Ramping"),
    ];
    const ABORTED: &[(&str, &str, &str)] = &[
        ("Ready", "False", "RolloutAborted"),
        ("Progressing", "False", "RolloutAborted"),
        ("Stalled", "True", "RolloutAborted"),
    ];

    #[test]
    fn ready_and_current_are_reached_on_the_observed_generation() {
        use VersionStatus::*;
        assert_eq!(judge(4, Current, DONE, WaitFor::Ready), Verdict::Reached);
        assert_eq!(judge(4, Current, DONE, WaitFor::Current), Verdict::Reached);
        assert!(matches!(
            judge(4, Current, DONE, WaitFor::Stalled),
            Verdict::Pending(_)
        ));
        assert!(matches!(
            judge(4, Ramping, RAMPING, WaitFor::Ready),
            Verdict::Pending(_)
        ));
        let Verdict::Pending(why) = judge(4, Ramping, RAMPING, WaitFor::Current) else {
            panic!("ramping is not current")
        };
        assert!(why.contains("v2") && why.contains("Ramping"), "{why}");
        // Current in Temporal while Ready is False (e.g. pollers lost, not yet stalled):
        // `--for current` is reached, `--for ready` is not.
        let lost = &[
            ("Ready", "False", "NoActivePollers"),
            ("Progressing", "True", "x"),
        ];
        assert_eq!(judge(4, Current, lost, WaitFor::Current), Verdict::Reached);
        assert!(matches!(
            judge(4, Current, lost, WaitFor::Ready),
            Verdict::Pending(_)
        ));
    }

    #[test]
    fn a_status_of_an_older_generation_decides_nothing() {
        use VersionStatus::*;
        for w in [WaitFor::Ready, WaitFor::Current, WaitFor::Stalled] {
            let Verdict::Pending(why) = judge(3, Current, DONE, w) else {
                panic!("{w:?}: a Ready of generation 3 satisfied a wait on generation 4")
            };
            assert!(why.contains("generation 4"), "{why}");
            assert!(
                matches!(judge(3, Inactive, ABORTED, w), Verdict::Pending(_)),
                "{w:?}"
            );
        }
        // A condition stamped with an older generation of its own is stale as well.
        let (generation, mut status) = status(4, Current, DONE);
        for c in &mut status.conditions {
            c.observed_generation = Some(3);
        }
        assert!(matches!(
            verdict(generation, Some(&status), WaitFor::Ready),
            Verdict::Pending(_)
        ));
        assert!(matches!(
            verdict(Some(1), None, WaitFor::Ready),
            Verdict::Pending(_)
        ));
    }

    #[test]
    fn stalled_fails_the_wait_with_its_reason_unless_waited_for() {
        use VersionStatus::*;
        let v = judge(4, Inactive, ABORTED, WaitFor::Current);
        assert_eq!(
            v,
            Verdict::Stalled {
                reason: "RolloutAborted".into(),
                message: "m".into()
            }
        );
        assert!(matches!(
            judge(4, Inactive, ABORTED, WaitFor::Ready),
            Verdict::Stalled { .. }
        ));
        assert_eq!(
            judge(4, Inactive, ABORTED, WaitFor::Stalled),
            Verdict::Reached
        );
        // Stalled=False is not stalled.
        let recovered = &[("Ready", "False", "Ramping"), ("Stalled", "False", "x")];
        assert!(matches!(
            judge(4, Ramping, recovered, WaitFor::Stalled),
            Verdict::Pending(_)
        ));
    }
}
