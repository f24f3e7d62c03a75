//! The burst scenario (issue 27 item 5): N objects rolled out at v1 with live workers, then all
//! changed to v2 at once (AllAtOnce). Measured: first apply → every object's status shows v2
//! Current, the controller's peak RSS over that span (its high-water mark is reset when the
//! burst starts), and the peak rate of its Temporal requests (the dev server's counters read
//! once a second).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use kube::api::ListParams;

use crate::ground::{Scenario, reached_state};
use crate::measure;
use crate::measure::controller_methods;
use crate::promote::promoted_past;
use crate::rig::Rig;
use crate::rollout;

/// Every object must promote v2 within this.
const DEADLINE: Duration = Duration::from_secs(900);
/// How often the Temporal counters are read for the peak rate.
const SAMPLE: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Default)]
pub struct BurstTimes {
    /// First apply → the last object showed v2 Current (s).
    pub all_current_s: f64,
    /// The highest Temporal request rate of the controller over one [`SAMPLE`] (req/s).
    pub peak_temporal_per_s: f64,
}

/// Changes every object to v2 at once and waits until all show it Current.
pub async fn run(rig: &mut Rig) -> Result<BurstTimes> {
    let v1 = rollout::current_builds(&rig.client, "fleet").await?;
    reset_peak_rss(rig.controller.pid())?;
    let metrics: SocketAddr = rig.temporal.metrics_address().parse()?;
    let api = crate::ground::worker_deployments(&rig.client);
    let begin = Instant::now();
    crate::ground::apply_all(
        &rig.client,
        (0..v1.len()).map(|i| crate::ground::manifest_at(i, "v2")),
    )
    .await?;
    let mut peak = 0.0f64;
    let (mut last, _) = measure::temporal_counts(metrics).await?;
    let mut last_at = Instant::now();
    loop {
        tokio::time::sleep(SAMPLE).await;
        rig.controller.check_alive()?;
        let (now, _) = measure::temporal_counts(metrics).await?;
        let sum = |c| controller_methods(c).values().sum::<f64>();
        let rate = sum(measure::grown(&last, &now)) / last_at.elapsed().as_secs_f64();
        peak = peak.max(rate);
        (last, last_at) = (now, Instant::now());
        let items = api.list(&ListParams::default()).await?.items;
        let done = items
            .iter()
            .filter(|o| {
                let status = &o.data["status"];
                let v1 = v1.get(o.metadata.name.as_deref().unwrap_or(""));
                // Its target is Current, and that is not v1 any more.
                reached_state(Scenario::Burst, status) && promoted_past(status, v1)
            })
            .count();
        if done >= v1.len() {
            return Ok(BurstTimes {
                all_current_s: begin.elapsed().as_secs_f64(),
                peak_temporal_per_s: peak,
            });
        }
        if begin.elapsed() > DEADLINE {
            bail!(
                "{done} of {} objects promoted v2 within {DEADLINE:?}",
                v1.len()
            );
        }
    }
}

/// Resets the process's RSS high-water mark (`VmHWM`), so that the next sample's peak is the
/// burst's own (Linux: writing 5 to `clear_refs`).
fn reset_peak_rss(pid: u32) -> Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("resetting the peak RSS of {pid}"))
}
