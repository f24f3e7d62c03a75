//! The instruments, the same for both controllers: the API server's audit log (the
//! controller's requests by verb and resource), the Temporal dev server's own request counters
//! (by method), and `/proc` (RSS, CPU time) of the controller process.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context as _, Result, ensure};
use test_harness::control_plane::AuditEvent;

use crate::ground::CONTROLLER_USER;

/// Requests of the controller in a stretch of the audit log.
#[derive(Clone, Debug, Default)]
pub struct KubeTally {
    /// `verb resource` → count (Lease requests excluded).
    pub by_verb: BTreeMap<String, u64>,
    /// Requests on `leases` (leader election), any verb.
    pub lease: u64,
    /// The same by verb.
    pub lease_by_verb: BTreeMap<String, u64>,
    /// Writes answered 409 Conflict (Lease excluded).
    pub conflicts: u64,
    /// Writes to a `*/status` subresource (Lease excluded).
    pub status_writes: u64,
}

impl KubeTally {
    pub fn writes(&self) -> u64 {
        self.sum(|verb| {
            matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
    }

    /// GET and LIST (watches are counted apart: one long request each).
    pub fn reads(&self) -> u64 {
        self.sum(|verb| matches!(verb, "get" | "list"))
    }

    pub fn watches(&self) -> u64 {
        self.sum(|verb| verb == "watch")
    }

    fn sum(&self, pick: impl Fn(&str) -> bool) -> u64 {
        self.by_verb
            .iter()
            .filter(|(k, _)| pick(k.split(' ').next().unwrap_or_default()))
            .map(|(_, v)| v)
            .sum()
    }
}

/// A position in the audit log: everything logged after it is "new".
#[derive(Clone, Copy, Debug)]
pub struct AuditMark(u64);

impl AuditMark {
    /// The log's beginning.
    pub const START: AuditMark = AuditMark(0);
}

/// Where the audit log ends now (up to its last complete line).
pub fn audit_mark(path: &Path) -> Result<AuditMark> {
    let text = read_from(path, 0)?;
    Ok(AuditMark(complete_len(&text)))
}

/// The controller's requests logged between `from` and the log's current end; returns the new
/// end as well.
pub fn audit_since(path: &Path, from: AuditMark) -> Result<(KubeTally, AuditMark)> {
    let (events, end) = audit_events_since(path, from)?;
    let mut tally = KubeTally::default();
    for event in events.iter().filter(|e| by_controller(e)) {
        count(&mut tally, event);
    }
    Ok((tally, end))
}

/// Every audit event logged after `from` (up to the log's last complete line), and where
/// that is: the next call starts there, so a poll reads each line once.
pub fn audit_events_since(path: &Path, from: AuditMark) -> Result<(Vec<AuditEvent>, AuditMark)> {
    let text = read_from(path, from.0)?;
    let len = complete_len(&text);
    let events = text[..len as usize]
        .lines()
        .filter_map(|line| serde_json::from_str::<AuditEvent>(line).ok())
        .collect();
    Ok((events, AuditMark(from.0 + len)))
}

/// A completed request of the controller under test.
pub fn by_controller(event: &AuditEvent) -> bool {
    event.acting_user() == CONTROLLER_USER && event.stage == "ResponseComplete"
}

/// A completed, successful write of the controller under test.
pub fn controller_wrote(event: &AuditEvent) -> bool {
    by_controller(event) && event.is_write() && (200..300).contains(&event.code())
}

/// Stage timestamp (ms since the epoch) of the controller's first successful write to a
/// `*/status` subresource after `from`: its first reconcile that got somewhere.
pub fn first_status_write(path: &Path, from: AuditMark) -> Result<Option<f64>> {
    Ok(audit_events_since(path, from)?
        .0
        .iter()
        .filter(|e| controller_wrote(e) && e.resource().ends_with("/status"))
        .find_map(AuditEvent::stage_ms))
}

fn count(tally: &mut KubeTally, event: &AuditEvent) {
    let resource = event.resource();
    if resource.starts_with("leases") {
        tally.lease += 1;
        *tally.lease_by_verb.entry(event.verb.clone()).or_default() += 1;
        return;
    }
    if event.is_write() && event.code() == 409 {
        tally.conflicts += 1;
    }
    if event.is_write() && resource.ends_with("/status") {
        tally.status_writes += 1;
    }
    *tally
        .by_verb
        .entry(format!("{} {resource}", event.verb))
        .or_default() += 1;
}

fn read_from(path: &Path, offset: u64) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = file.metadata()?.len();
    if len < offset {
        // A rotated log: every count from here on would be silently zero.
        anyhow::bail!(
            "{} is {len} bytes, shorter than the {offset} already read: rotated",
            path.display()
        );
    }
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Length up to and including the last newline (the server may be writing the next line).
fn complete_len(text: &str) -> u64 {
    text.rfind('\n').map(|i| i as u64 + 1).unwrap_or(0)
}

/// Counters of the Temporal frontend, by method (`operation` label), summed over namespaces.
pub type TemporalCounts = BTreeMap<String, f64>;

/// Methods that workers call (long polls, task completions, heartbeats), not controllers.
pub fn is_worker_method(method: &str) -> bool {
    method.starts_with("Poll")
        || method.starts_with("Respond")
        || matches!(
            method,
            "RecordWorkerHeartbeat" | "ShutdownWorker" | "GetSystemInfo"
        )
}

/// `service_requests` of the frontend by method, and `service_errors_resource_exhausted`.
pub async fn temporal_counts(metrics: SocketAddr) -> Result<(TemporalCounts, f64)> {
    let (code, body) = test_harness::loopback_http::get(metrics, "/metrics", "text/plain", None)
        .await
        .context("scraping the Temporal dev server's metrics")?;
    ensure!(code == 200, "GET /metrics on {metrics}: {code}");
    let mut requests = TemporalCounts::new();
    let mut exhausted = 0.0;
    for (family, labels, value) in samples(&body) {
        if label(labels, "service_name") != Some("frontend") {
            continue;
        }
        match family {
            "service_requests" => {
                let method = label(labels, "operation").unwrap_or("?").to_string();
                *requests.entry(method).or_default() += value;
            }
            "service_errors_resource_exhausted" => exhausted += value,
            _ => {}
        }
    }
    ensure!(
        !requests.is_empty(),
        "the Temporal metrics endpoint counts no frontend requests: not the endpoint we think"
    );
    Ok((requests, exhausted))
}

/// `(family, labels, value)` of every sample of a Prometheus text exposition.
fn samples(body: &str) -> impl Iterator<Item = (&str, &str, f64)> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (family, labels) = series.split_once('{').unwrap_or((series, ""));
            let family = family.strip_suffix("_total").unwrap_or(family);
            Some((family, labels, value.parse().ok()?))
        })
}

/// The value of label `name` in `a="x",b="y"}`.
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let rest = &labels[start..];
    Some(&rest[..rest.find('"')?])
}

/// `after - before`, per method, dropping methods that did not grow.
pub fn grown(before: &TemporalCounts, after: &TemporalCounts) -> TemporalCounts {
    after
        .iter()
        .map(|(m, v)| (m.clone(), v - before.get(m).copied().unwrap_or_default()))
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

/// Our controller's own count of its Temporal requests by method (a cross-check), and the
/// seconds those requests took, summed by method (its latency histogram's `_sum`).
pub async fn ours_requests(http: SocketAddr) -> Result<(TemporalCounts, TemporalCounts)> {
    let (code, body) = test_harness::loopback_http::get(http, "/metrics", "text/plain", None)
        .await
        .context("scraping our controller's metrics")?;
    ensure!(code == 200, "GET /metrics on {http}: {code}");
    let mut counts = TemporalCounts::new();
    let mut seconds = TemporalCounts::new();
    for (family, labels, value) in samples(&body) {
        let into = match family {
            "temporal_worker_controller_temporal_requests" => &mut counts,
            "temporal_worker_controller_temporal_request_duration_seconds_sum" => &mut seconds,
            _ => continue,
        };
        let method = label(labels, "method").unwrap_or("?").to_string();
        *into.entry(method).or_default() += value;
    }
    Ok((counts, seconds))
}

/// RSS, peak RSS and CPU time of a process, from `/proc`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
    /// The two parts of the RSS (the breakdown of issue 30's memory work): anonymous memory
    /// (heap, stacks) and the executable's pages mapped in.
    pub rss_anon_kib: u64,
    pub rss_file_kib: u64,
    /// User + system CPU seconds since the process started.
    pub cpu_secs: f64,
}

pub fn proc_sample(pid: u32) -> Result<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> f64 { fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    Ok(ProcSample {
        rss_kib: kib("VmRSS:"),
        peak_rss_kib: kib("VmHWM:"),
        rss_anon_kib: kib("RssAnon:"),
        rss_file_kib: kib("RssFile:"),
        cpu_secs: (ticks(11) + ticks(12)) / clock_ticks(),
    })
}

/// `sysconf(_SC_CLK_TCK)`, through `getconf` (no libc binding in this crate); 100 otherwise.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The methods a controller calls (worker polls and heartbeats left out).
pub fn controller_methods(counts: TemporalCounts) -> TemporalCounts {
    counts
        .into_iter()
        .filter(|(m, _)| !is_worker_method(m))
        .collect()
}
