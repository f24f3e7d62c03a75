//! The admission webhook's families: its requests by kind, verdict and code with their
//! latency, and when the certificate it serves expires.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{KindLabels, WebhookLabels};

/// Admission is on the path of every `kubectl apply` of a template (`failurePolicy: Fail`):
/// buckets around the API server's 10 s webhook timeout.
const WEBHOOK_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// No certificate served (yet, or the webhook is off): the expiry family is then left out,
/// so an alert on it cannot fire for an install without a webhook.
const NO_CERTIFICATE: i64 = i64::MIN;

/// How one admission request ended: its `verdict` label and its `code` (the HTTP status the
/// API server shows the requester, 200 when allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookVerdict {
    Allowed,
    /// Refused because of the object or the requester's rights (422 or 403): the webhook
    /// did its job.
    Denied(u16),
    /// No decision could be made (500), or the review could not be read (400): the request is
    /// refused because the webhook failed.
    Error(u16),
}

impl WebhookVerdict {
    fn labels(self) -> (&'static str, &'static str) {
        match self {
            WebhookVerdict::Allowed => ("allowed", "200"),
            WebhookVerdict::Denied(403) => ("denied", "403"),
            WebhookVerdict::Denied(_) => ("denied", "422"),
            WebhookVerdict::Error(400) => ("error", "400"),
            WebhookVerdict::Error(_) => ("error", "500"),
        }
    }
}

/// The kinds the webhook is called for, as a bounded label (`other` for anything else).
fn kind_label(kind: &str) -> &'static str {
    const KINDS: [&str; 4] = [
        "WorkerDeployment",
        "TemporalWorkerDeployment",
        "WorkerResourceTemplate",
        "TemporalWorkerOwnedResource",
    ];
    KINDS.into_iter().find(|k| *k == kind).unwrap_or("other")
}

type Durations = Family<KindLabels, Histogram, fn() -> Histogram>;

fn webhook_histogram() -> Histogram {
    Histogram::new(WEBHOOK_BUCKETS)
}

#[derive(Debug)]
pub(super) struct WebhookFamilies {
    requests: Family<WebhookLabels, Counter>,
    duration: Durations,
    cert_not_after: AtomicI64,
}

impl WebhookFamilies {
    pub(super) fn register(registry: &mut Registry) -> WebhookFamilies {
        let requests = Family::<WebhookLabels, Counter>::default();
        registry.register(
            "webhook_requests",
            "Admission requests answered by the webhook, by kind, verdict (allowed, denied, error) and code",
            requests.clone(),
        );
        let duration = Durations::new_with_constructor(webhook_histogram as fn() -> Histogram);
        registry.register_with_unit(
            "webhook_request_duration",
            "Time the webhook took to answer an admission request, by kind",
            Unit::Seconds,
            duration.clone(),
        );
        WebhookFamilies {
            requests,
            duration,
            cert_not_after: AtomicI64::new(NO_CERTIFICATE),
        }
    }

    pub(super) fn request(&self, kind: &str, verdict: WebhookVerdict, took: Duration) {
        let kind = kind_label(kind);
        let (verdict, code) = verdict.labels();
        self.requests
            .get_or_create(&WebhookLabels {
                kind,
                verdict,
                code,
            })
            .inc();
        self.duration
            .get_or_create(&KindLabels { kind })
            .observe(took.as_secs_f64());
    }

    pub(super) fn certificate(&self, not_after: Option<jiff::Timestamp>) {
        let secs = not_after.map_or(NO_CERTIFICATE, |t| t.as_second());
        self.cert_not_after.store(secs, Ordering::Relaxed);
    }

    /// The certificate family, at scrape time (only while a certificate is served).
    pub(super) fn register_certificate(&self, reg: &mut Registry) {
        let secs = self.cert_not_after.load(Ordering::Relaxed);
        if secs == NO_CERTIFICATE {
            return;
        }
        let gauge = Gauge::<i64, AtomicI64>::default();
        gauge.set(secs);
        reg.register_with_unit(
            "webhook_certificate_expiry_timestamp",
            "When the certificate the admission webhook serves expires (its notAfter)",
            Unit::Seconds,
            gauge,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn encoded(m: &Metrics) -> String {
        m.encode(&crate::workers::Workers::of(vec![]))
    }

    #[test]
    fn requests_are_counted_by_kind_verdict_and_code_with_their_latency() {
        let m = Metrics::new();
        m.webhook_request(
            "WorkerResourceTemplate",
            WebhookVerdict::Allowed,
            Duration::from_millis(3),
        );
        m.webhook_request(
            "WorkerResourceTemplate",
            WebhookVerdict::Error(500),
            Duration::from_millis(700),
        );
        m.webhook_request("Secret", WebhookVerdict::Denied(403), Duration::ZERO);
        let text = encoded(&m);
        for line in [
            "temporal_worker_controller_webhook_requests_total{kind=\"WorkerResourceTemplate\",verdict=\"allowed\",code=\"200\"} 1",
            "temporal_worker_controller_webhook_requests_total{kind=\"WorkerResourceTemplate\",verdict=\"error\",code=\"500\"} 1",
            "temporal_worker_controller_webhook_requests_total{kind=\"other\",verdict=\"denied\",code=\"403\"} 1",
            "temporal_worker_controller_webhook_request_duration_seconds_count{kind=\"WorkerResourceTemplate\"} 2",
            "temporal_worker_controller_webhook_request_duration_seconds_bucket{le=\"0.005\",kind=\"WorkerResourceTemplate\"} 1",
            "temporal_worker_controller_webhook_request_duration_seconds_bucket{le=\"1.0\",kind=\"WorkerResourceTemplate\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn the_certificate_expiry_is_exported_only_while_one_is_served() {
        let m = Metrics::new();
        let family = "temporal_worker_controller_webhook_certificate_expiry_timestamp_seconds";
        assert!(!encoded(&m).contains(family));
        let t = jiff::Timestamp::from_second(1_900_000_000).expect("time");
        m.webhook_certificate(Some(t));
        assert!(
            encoded(&m).contains(&format!("{family} 1900000000")),
            "{}",
            encoded(&m)
        );
        m.webhook_certificate(None);
        assert!(!encoded(&m).contains(family));
    }
}
