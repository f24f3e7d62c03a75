//! The standard `process_*` families, read from `/proc/self` at scrape time.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

/// A gauge of a fractional value.
type GaugeF = Gauge<f64, AtomicU64>;

/// The standard `process_*` families, read at scrape time.
pub(super) fn register(root: &mut Registry, start_time: f64) {
    let process = process_stats();
    let proc_reg = root.sub_registry_with_prefix("process");
    let g = |v: f64| -> GaugeF {
        let g = GaugeF::default();
        g.set(v);
        g
    };
    if let Some(rss) = process.resident_bytes {
        proc_reg.register_with_unit(
            "resident_memory",
            "Resident memory size",
            Unit::Bytes,
            g(rss),
        );
    }
    if let Some(vms) = process.virtual_bytes {
        proc_reg.register_with_unit("virtual_memory", "Virtual memory size", Unit::Bytes, g(vms));
    }
    if let Some(fds) = process.open_fds {
        proc_reg.register("open_fds", "Open file descriptors", g(fds));
    }
    if let Some(cpu) = process.cpu_seconds {
        // Counter semantics, but the value is read, not accumulated here.
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(cpu);
        proc_reg.register_with_unit("cpu", "User and system CPU time", Unit::Seconds, c);
    }
    proc_reg.register_with_unit(
        "start_time",
        "Start time of the process since the Unix epoch",
        Unit::Seconds,
        g(start_time),
    );
}

#[derive(Debug, Default, Clone, Copy)]
struct ProcessStats {
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    cpu_seconds: Option<f64>,
}

/// Linux `/proc/self` figures; absent elsewhere (the families are then omitted).
fn process_stats() -> ProcessStats {
    // Pages in /proc are 4 KiB on the platforms we ship (x86_64, aarch64 with 4 KiB pages);
    // USER_HZ is 100 on both. Reading them via libc is not worth a dependency.
    const PAGE: f64 = 4096.0;
    const USER_HZ: f64 = 100.0;
    let mut out = ProcessStats::default();
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        let mut fields = statm.split_whitespace().map(|f| f.parse::<f64>().ok());
        out.virtual_bytes = fields.next().flatten().map(|p| p * PAGE);
        out.resident_bytes = fields.next().flatten().map(|p| p * PAGE);
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // The command name (field 2) may contain spaces: parse after its closing paren.
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // rest starts at field 3 (state); utime and stime are fields 14 and 15.
            let utime = fields.get(11).and_then(|v| v.parse::<f64>().ok());
            let stime = fields.get(12).and_then(|v| v.parse::<f64>().ok());
            if let (Some(u), Some(s)) = (utime, stime) {
                out.cpu_seconds = Some((u + s) / USER_HZ);
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        out.open_fds = Some(dir.count() as f64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_stats_on_linux() {
        let p = process_stats();
        if cfg!(target_os = "linux") {
            assert!(p.resident_bytes.unwrap() > 0.0);
            assert!(p.open_fds.unwrap() >= 1.0);
            assert!(p.cpu_seconds.is_some());
        }
    }
}
