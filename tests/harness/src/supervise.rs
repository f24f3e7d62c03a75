//! Child processes that cannot outlive the test process.
//!
//! Each child runs under a tiny `sh` supervisor whose stdin is a pipe held by this process. When
//! the pipe closes (the [`Supervised`] is dropped, or the test process exits or crashes and the
//! kernel closes its descriptors) the supervisor sends the child SIGTERM. This is why servers kept
//! in a `static` do not outlive the test binary, without `prctl`/`atexit` tricks
//! (`PR_SET_PDEATHSIG` would also fire when the spawning *thread* exits, which happens whenever a
//! per-test tokio runtime shuts down).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

/// The supervisor: runs the program in the background, stops it as soon as fd 3 (a copy of our
/// stdin pipe) reaches EOF, and exits with the program's status.
const SUPERVISOR: &str = r#"exec 3<&0
"$@" </dev/null &
server=$!
{ read _ignored <&3; kill "$server" 2>/dev/null; } &
watcher=$!
wait "$server"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

/// A supervised child process; stopped (SIGTERM, then SIGKILL after a grace period) on drop.
pub struct Supervised {
    name: String,
    child: Child,
    // Held only so that closing it tells the supervisor to stop the program.
    stdin: Option<ChildStdin>,
    log_path: PathBuf,
}

impl Supervised {
    /// Spawns `program args…` with stdout and stderr appended to `log_path`.
    pub fn spawn<I, S>(name: &str, program: &Path, args: I, log_path: &Path) -> Result<Supervised>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let log_err = log.try_clone()?;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(SUPERVISOR)
            .arg(format!("{name}-supervisor"));
        cmd.arg(program).args(args);
        cmd.stdin(Stdio::piped()).stdout(log).stderr(log_err);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawning {name} ({})", program.display()))?;
        let stdin = child.stdin.take();
        Ok(Supervised {
            name: name.to_string(),
            child,
            stdin,
            log_path: log_path.to_path_buf(),
        })
    }

    /// `Some(status)` once the program has exited.
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// Path of the file receiving the program's output.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last few KiB of the program's output, for error messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path)
    }

    /// An error naming the program, its exit status and its log tail.
    pub fn died(&mut self) -> Option<anyhow::Error> {
        let status = self.exited().ok().flatten()?;
        Some(anyhow::anyhow!(
            "{} exited early ({status}); log tail:\n{}",
            self.name,
            self.log_tail()
        ))
    }

    /// Stops the program and waits for it (at most `grace`, then SIGKILL).
    pub fn stop(&mut self, grace: Duration) {
        drop(self.stdin.take());
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// The last 4 KiB of a log file (on a character boundary).
pub fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let start = text.len().saturating_sub(4000);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_string()
}

/// Ports [`free_port`] hands out: below the kernel's ephemeral range (32768 and up by default),
/// with room above for the ports a server derives from its own (the Temporal dev server's HTTP
/// port is its gRPC port + 1000).
const PORT_POOL: std::ops::Range<u16> = 20_000..30_000;

/// A loopback port that was free a moment ago, for a child process to bind.
///
/// Not a port the kernel picks (bind to 0): those come from the ephemeral range, which outgoing
/// connections draw from too, so on a busy machine a client socket could take the port before
/// the child binds it (a Go controller once failed to start its metrics server this way). The
/// walk starts at a point spread by process ID and a counter, so that two test binaries running
/// at once rarely probe the same ports.
pub fn free_port() -> Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(PORT_POOL.end - PORT_POOL.start);
    let start = std::process::id()
        .wrapping_mul(2_654_435_761)
        .wrapping_add(NEXT.fetch_add(7_919, Ordering::Relaxed));
    (0..span)
        .map(|i| PORT_POOL.start + ((start.wrapping_add(i) % span) as u16))
        .find(|port| bindable(*port))
        .context("no free loopback port below the ephemeral range")
}

/// Whether a listener could bind `port` on loopback and on every address right now.
fn bindable(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
        && std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_come_from_the_pool_and_skip_a_bound_one() {
        let held = std::net::TcpListener::bind(("127.0.0.1", free_port().expect("a port")))
            .expect("binding the port handed out");
        let held_port = held.local_addr().expect("addr").port();
        assert!(
            PORT_POOL.contains(&held_port),
            "{held_port} outside the pool"
        );
        for _ in 0..200 {
            let port = free_port().expect("a port");
            assert!(PORT_POOL.contains(&port), "{port} outside the pool");
            assert_ne!(port, held_port, "a bound port was handed out");
        }
    }
}
