//! The Go manager's address flags (`--metrics-bind-address`, `--health-probe-bind-address`)
//! as `run` accepts them: parsed, and served beside or instead of `--http-addr`.

use std::net::SocketAddr;

/// A Go manager bind address: `host:port`, `:port` (every interface) or `0` (off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoBind {
    Off,
    At(SocketAddr),
}

pub fn go_bind_address(s: &str) -> Result<GoBind, String> {
    if s == "0" {
        return Ok(GoBind::Off);
    }
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_string(),
    };
    full.parse()
        .map(GoBind::At)
        .map_err(|e| format!("{s:?} is not host:port, :port or 0: {e}"))
}

/// Where the HTTP server (metrics, health, status API: every endpoint on each address)
/// listens. Precedence: `--http-addr` when given; otherwise the first Go address given
/// (`--metrics-bind-address`, then `--health-probe-bind-address`); otherwise 0.0.0.0:8080.
/// Every other Go address is served too, except one whose port is already served (say the Go
/// chart's `127.0.0.1:8080` beside our `0.0.0.0:8080`, which already answers there) or `0`.
/// Never refuses the Go chart's defaults. Returns the addresses and the one line saying what
/// the Go flags did, if any were given.
pub fn http_addrs(
    ours: Option<SocketAddr>,
    metrics: Option<GoBind>,
    probes: Option<GoBind>,
) -> (Vec<SocketAddr>, Option<String>) {
    let go: Vec<(&str, SocketAddr)> = [
        ("--metrics-bind-address", metrics),
        ("--health-probe-bind-address", probes),
    ]
    .into_iter()
    .filter_map(|(flag, b)| match b {
        Some(GoBind::At(a)) => Some((flag, a)),
        _ => None,
    })
    .collect();
    let primary = ours
        .or_else(|| go.first().map(|(_, a)| *a))
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 8080)));
    let mut addrs = vec![primary];
    let mut notes = Vec::new();
    for (flag, a) in go {
        if addrs.contains(&a) {
            notes.push(format!("{flag} {a}: served"));
        } else if addrs.iter().any(|b| b.port() == a.port()) {
            notes.push(format!("{flag} {a}: already answered on port {}", a.port()));
        } else {
            addrs.push(a);
            notes.push(format!("{flag} {a}: served"));
        }
    }
    let given = metrics.is_some() || probes.is_some();
    let line = given.then(|| {
        let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        format!(
            "Go manager flags: HTTP (metrics, /healthz, /readyz, status API) on {} ({})",
            list.join(" and "),
            if notes.is_empty() {
                "metrics off".to_string()
            } else {
                notes.join("; ")
            }
        )
    });
    (addrs, line)
}
