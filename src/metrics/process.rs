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
    if let Some(max) = process.max_fds {
        proc_reg.register("max_fds", "Limit of open file descriptors", g(max));
    }
    if let Some(threads) = process.threads {
        proc_reg.register("threads", "Threads of the process", g(threads));
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
    max_fds: Option<f64>,
    threads: Option<f64>,
    cpu_seconds: Option<f64>,
}

/// Linux `/proc/self` figures; absent elsewhere (the families are then omitted).
fn process_stats() -> ProcessStats {
    // USER_HZ is 100 on every Linux ABI we ship (the kernel fixes it for user space).
    const USER_HZ: f64 = 100.0;
    let mut out = ProcessStats::default();
    // Memory from `status`, which the kernel gives in kB whatever the page size
    // (`statm` counts pages, which are 16 or 64 KiB on some arm64 kernels).
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let memory = memory_from_status(&status);
        out.resident_bytes = memory.resident_bytes;
        out.virtual_bytes = memory.virtual_bytes;
        out.threads = memory.threads;
    }
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
        out.max_fds = max_fds_from_limits(&limits);
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

/// The soft limit of open files in a `/proc/<pid>/limits` text (`Max open files  1024  4096
/// files`), the one the process hits; `unlimited` gives none.
fn max_fds_from_limits(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `VmRSS` and `VmSize` of a `/proc/<pid>/status` text (lines like `VmRSS:  10240 kB`), in
/// bytes, and `Threads`.
fn memory_from_status(status: &str) -> ProcessStats {
    let kb = |field: &str| {
        status.lines().find_map(|line| {
            let value = line.strip_prefix(field)?.strip_prefix(':')?;
            let kb = value
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<f64>()
                .ok()?;
            Some(kb * 1024.0)
        })
    };
    let threads = status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:")?.trim().parse::<f64>().ok());
    ProcessStats {
        resident_bytes: kb("VmRSS"),
        virtual_bytes: kb("VmSize"),
        threads,
        ..ProcessStats::default()
    }
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
            assert!(p.threads.unwrap() >= 1.0);
            // No limit (`unlimited`) is no value.
            if let Some(max) = p.max_fds {
                assert!(max >= p.open_fds.unwrap());
            }
        }
    }

    #[test]
    fn the_soft_open_files_limit_is_read_from_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_fds_from_limits(limits), Some(1024.0));
        let unlimited =
            "Max open files            unlimited            unlimited            files     \n";
        assert_eq!(max_fds_from_limits(unlimited), None);
        assert_eq!(max_fds_from_limits("Max processes 10 10 processes\n"), None);
    }

    #[test]
    fn memory_is_read_from_status_in_kilobytes() {
        let status = "Name:\ttwc\nVmPeak:\t  999 kB\nVmSize:\t  204800 kB\nVmHWM:\t 9 kB\n\
                      VmRSS:\t   10240 kB\nRssAnon:\t 5 kB\nThreads:\t4\n";
        let m = memory_from_status(status);
        assert_eq!(m.resident_bytes, Some(10240.0 * 1024.0));
        assert_eq!(m.virtual_bytes, Some(204800.0 * 1024.0));
        assert_eq!(m.threads, Some(4.0));
        // Kernel threads have no Vm lines: no value rather than a wrong one.
        let none = memory_from_status("Name:\tkthreadd\nThreads:\t1\n");
        assert_eq!((none.resident_bytes, none.virtual_bytes), (None, None));
    }

    /// The reported resident size is what the kernel reports, whatever its page size: within
    /// 16 MiB of `VmRSS` read just before and just after (the process may grow in between).
    #[test]
    fn resident_memory_agrees_with_the_kernel() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let vm_rss = || -> f64 {
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            let line = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .expect("VmRSS");
            let kb: f64 = line
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .expect("VmRSS kB");
            kb * 1024.0
        };
        let before = vm_rss();
        let reported = process_stats().resident_bytes.expect("resident bytes");
        let after = vm_rss();
        let slack = 16.0 * 1024.0 * 1024.0;
        assert!(
            reported >= before.min(after) - slack && reported <= before.max(after) + slack,
            "reported {reported} B, VmRSS {before}..{after} B"
        );
    }
}
