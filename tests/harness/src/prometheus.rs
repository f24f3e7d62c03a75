//! A real Prometheus server (Debian's `prometheus`) with a data directory of its own, scraping
//! given targets under one job every second and evaluating a rule file every second; killed
//! and its directory removed on drop. Queried through its HTTP API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};

use crate::supervise::free_port;
use crate::wait::eventually;

/// How long the server may take to answer `/-/ready`.
const READY_DEADLINE: Duration = Duration::from_secs(60);

pub struct Prometheus {
    pub addr: SocketAddr,
    _child: tokio::process::Child,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Scrapes `targets` as job `job` every second and evaluates `rules` (a rule file) every
    /// second; returns once the server is ready.
    pub async fn start(job: &str, targets: &[SocketAddr], rules: &str) -> Result<Prometheus> {
        let dir = std::env::temp_dir().join(format!(
            "twc-prometheus-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(dir.join("data"))?;
        std::fs::write(dir.join("rules.yml"), rules)?;
        let targets: Vec<String> = targets.iter().map(SocketAddr::to_string).collect();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
            "rule_files": [dir.join("rules.yml")],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}]
        });
        // JSON is YAML.
        std::fs::write(
            dir.join("prometheus.yml"),
            serde_json::to_vec_pretty(&config)?,
        )?;
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = tokio::process::Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting prometheus (Debian package `prometheus`; run .ci/setup-tests)")?;
        let prom = Prometheus {
            addr,
            _child: child,
            dir,
        };
        eventually("Prometheus ready", READY_DEADLINE, || async {
            let (code, _) = crate::loopback_http::get(prom.addr, "/-/ready", "text/plain", None)
                .await
                .unwrap_or((0, String::new()));
            Ok((code == 200).then_some(()))
        })
        .await
        .with_context(|| prom.log())?;
        Ok(prom)
    }

    /// Prometheus's own log (warnings and errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// The `data` of an API call.
    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let target = format!("{path}?{query}");
        let (code, body) =
            crate::loopback_http::get(self.addr, &target, "application/json", None).await?;
        let v: Value = serde_json::from_str(&body)
            .with_context(|| format!("{path} answered {code}: {body}"))?;
        ensure!(
            v["status"] == "success",
            "{path} {params:?} failed ({code}): {v}"
        );
        Ok(v["data"].clone())
    }

    /// Samples of an instant query now.
    pub async fn instant(&self, query: &str) -> Result<Vec<Value>> {
        let data = self.api("/api/v1/query", &[("query", query)]).await?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// Series of a range query over `[start, end]` (Unix seconds), one point per second.
    pub async fn range(&self, query: &str, start: f64, end: f64) -> Result<Vec<Value>> {
        let (start, end) = (format!("{start:.3}"), format!("{end:.3}"));
        let params = [
            ("query", query),
            ("start", start.as_str()),
            ("end", end.as_str()),
            ("step", "1"),
        ];
        let data = self.api("/api/v1/query_range", &params).await?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// The alerts now, as `/api/v1/alerts` lists them (each with `labels` and `state`).
    pub async fn alerts(&self) -> Result<Vec<Value>> {
        let data = self.api("/api/v1/alerts", &[]).await?;
        Ok(data["alerts"].as_array().cloned().unwrap_or_default())
    }

    /// When every rule group was last evaluated (the earliest of their last evaluations), Unix
    /// seconds; 0 before the first evaluation.
    pub async fn last_evaluation(&self) -> Result<f64> {
        let data = self.api("/api/v1/rules", &[]).await?;
        let groups = data["groups"].as_array().cloned().unwrap_or_default();
        ensure!(!groups.is_empty(), "no rule groups loaded: {data}");
        let mut earliest = f64::MAX;
        for g in &groups {
            let at = g["lastEvaluation"].as_str().unwrap_or_default();
            let secs = at
                .parse::<jiff::Timestamp>()
                .map_or(0.0, |t| t.as_millisecond() as f64 / 1000.0);
            earliest = earliest.min(secs);
        }
        Ok(earliest)
    }

    /// How many targets are up.
    pub async fn targets_up(&self) -> Result<usize> {
        let up = self.instant("up == 1").await?;
        Ok(up.len())
    }
}
