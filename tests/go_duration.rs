//! Our Go-duration parser (`src/api/duration.rs`) against Go's own `time.ParseDuration`: the
//! Go program `tests/fixtures/go-duration` (standard library only, built offline with the
//! installed Go toolchain) answers for the same strings, and ours must give the same
//! nanoseconds wherever Go accepts a string and refuse wherever Go refuses it. The CRD's
//! `pattern` for durations (generated from `duration::PATTERN`, in `crds/`) and the chart's
//! values schema must accept exactly what the parser accepts.
//!
//! Deliberate differences, each checked as such below:
//! - **negative durations** (`-1s`, even `-0`): Go accepts them; every duration of ours is a
//!   wait or an interval, so the parser and the pattern refuse any `-` sign;
//! - **values past Go's int64 nanoseconds** are refused by both parsers, but a regular
//!   expression cannot bound a sum, so the pattern lets them through and the controller's
//!   validation refuses them with the parser's message.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use regex::Regex;
use serde::Deserialize;
use temporal_worker_controller::api::duration;
use test_harness::gitops::repo_root;

/// What Go made of one string.
#[derive(Debug, Deserialize)]
struct GoAnswer {
    ns: Option<i64>,
    err: Option<String>,
}

/// Hand-picked cases: Go's special zero, fractions, every unit spelling, signs, missing and
/// unknown units, and the edges of int64 nanoseconds.
const LISTED: &[&str] = &[
    "0",
    "+0",
    "-0",
    "00",
    "0s",
    "0.0s",
    "1.5h",
    ".5s",
    "1.s",
    ".s",
    ".",
    "1..5s",
    "1.5.5s",
    "1ns",
    "1us",
    "1µs",
    "1μs",
    "1ms",
    "1s",
    "1m",
    "1h",
    "1h2m3.5s",
    "1m.5s",
    "1.0000000001s",
    "0.3333333333333333333h",
    "1.00000000000000000000000000000000001h",
    "-1s",
    "+5m",
    "+-5m",
    "-",
    "+",
    "",
    " ",
    "1",
    "10",
    "1d",
    "1w",
    "1e3s",
    "1E3s",
    "1 s",
    " 1s",
    "1s ",
    "1h 2m",
    "1S",
    "1Ms",
    "1sec",
    "s",
    "ms",
    "1.5",
    "9223372036854775807ns",
    "9223372036854775808ns",
    "9223372036854775807000ns",
    "2562047h",
    "2562048h",
    "2562047h47m16.854775807s",
    "2562047h47m16.854775808s",
    "2562047.7880152155h",
    "1000000000000000000000000h",
    "9223372036s",
    "9223372037s",
    "5124095576030431h",
    "0.000000001s",
    "0.0000000001s",
    "1.9999999999ns",
    "30s",
    "1h30m",
    "500ms",
    "24h",
    "1h1h",
    "1s1ms1us1ns",
    "١s",
    "1s\n",
];

/// Strings drawn from the characters a duration is made of (fixed seed: the same run every
/// time), so that combinations nobody thought to list are compared too.
fn generated() -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(0x5eed_d0c5);
    let alphabet: Vec<char> = "0123456789..nsuµμmh+-e ".chars().collect();
    let units = ["ns", "us", "µs", "μs", "ms", "s", "m", "h"];
    (0..3000)
        .map(|i| {
            if i % 2 == 0 {
                // Mostly well-formed: numbers and units, sometimes with a sign or a dot.
                let mut s = String::new();
                if rng.u8(..10) == 0 {
                    s.push(if rng.bool() { '+' } else { '-' });
                }
                for _ in 0..rng.usize(1..4) {
                    let digits = rng.u32(0..12);
                    s.push_str(&rng.u64(..10u64.pow(digits)).to_string());
                    if rng.u8(..3) == 0 {
                        s.push('.');
                        let digits = rng.u32(0..10);
                        s.push_str(&rng.u64(..10u64.pow(digits)).to_string());
                    }
                    s.push_str(units[rng.usize(..units.len())]);
                }
                s
            } else {
                (0..rng.usize(0..8))
                    .map(|_| alphabet[rng.usize(..alphabet.len())])
                    .collect()
            }
        })
        .collect()
}

/// The directory of the Go program, and a temporary directory it is built into.
fn go_parser() -> (PathBuf, tempdir::Dir) {
    let src = repo_root().join("tests/fixtures/go-duration");
    let out = tempdir::Dir::new("twc-go-duration");
    let go = ["/usr/local/go/bin/go", "go"]
        .into_iter()
        .find(|g| Command::new(g).arg("version").output().is_ok())
        .expect("the Go toolchain (go) is needed to compare with Go's time.ParseDuration");
    let bin = out.path().join("go-duration");
    // Offline: the program has no dependencies, and no other toolchain may be fetched.
    let built = Command::new(go)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&src)
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .output()
        .expect("running go build");
    assert!(
        built.status.success(),
        "go build of {}: {}",
        src.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    (bin, out)
}

/// Go's answers for `inputs`, in order.
fn ask_go(bin: &Path, inputs: &[String]) -> Vec<GoAnswer> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the Go parser");
    let mut request = String::new();
    for s in inputs {
        request.push_str(&serde_json::to_string(s).expect("JSON string"));
        request.push('\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(request.as_bytes()));
    let out = child.wait_with_output().expect("the Go parser's answers");
    writer
        .join()
        .expect("writer")
        .expect("writing to the Go parser");
    assert!(
        out.status.success(),
        "the Go parser failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<GoAnswer> = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON answer per line"))
        .collect();
    assert_eq!(answers.len(), inputs.len(), "one answer per input");
    answers
}

fn inputs() -> Vec<String> {
    LISTED
        .iter()
        .map(|s| s.to_string())
        .chain(generated())
        .collect()
}

#[test]
fn our_parser_agrees_with_gos_time_parse_duration() {
    let (bin, _dir) = go_parser();
    let inputs = inputs();
    let answers = ask_go(&bin, &inputs);
    let mut mismatches = Vec::new();
    let (mut accepted, mut refused, mut negative) = (0, 0, 0);
    for (input, go) in inputs.iter().zip(&answers) {
        let ours = duration::parse(input);
        let ok = match (go.ns, &ours) {
            // Deliberate: negative durations are refused (see the module docs).
            (Some(_), Err(e)) if input.starts_with('-') => {
                negative += 1;
                e.why.contains("negative")
            }
            (Some(ns), Ok(d)) => {
                accepted += 1;
                u64::try_from(ns).is_ok_and(|ns| u128::from(ns) == d.as_nanos())
            }
            (Some(_), Err(_)) => false,
            (None, Err(_)) => {
                refused += 1;
                true
            }
            (None, Ok(_)) => false,
        };
        if !ok {
            mismatches.push(format!(
                "{input:?}: Go {:?}, ours {ours:?}",
                go.ns.ok_or(go.err.as_deref().unwrap_or("?"))
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} strings differ:\n{}",
        mismatches.len(),
        inputs.len(),
        mismatches.join("\n")
    );
    // The comparison covered all three kinds of answer in numbers.
    assert!(
        accepted > 500 && refused > 500 && negative > 20,
        "accepted {accepted}, refused {refused}, negative {negative}"
    );
    // The cases of the issue, by name: Go accepts them and so do we.
    for s in ["0", "+0", ".5s", "1.s", "1μs", "1µs", "+5m", "1h2m3.5s"] {
        assert!(duration::parse(s).is_ok(), "{s}");
    }
}

/// The duration patterns of the generated CRDs (every field with a Go duration), which must
/// all be [`duration::PATTERN`].
fn crd_duration_patterns() -> Vec<String> {
    fn walk(v: &serde_yaml::Value, out: &mut Vec<String>) {
        match v {
            serde_yaml::Value::Mapping(m) => {
                for (k, v) in m {
                    match (k.as_str(), v.as_str()) {
                        (Some("pattern"), Some(p)) if p.contains("ms|s|m|h") => {
                            out.push(p.to_string())
                        }
                        _ => walk(v, out),
                    }
                }
            }
            serde_yaml::Value::Sequence(s) => s.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for file in ["workerdeployments", "temporalworkerdeployments"] {
        let path = repo_root().join(format!("crds/{file}.temporal.io.yaml"));
        let text = std::fs::read_to_string(&path).expect("generated CRD");
        walk(&serde_yaml::from_str(&text).expect("CRD YAML"), &mut out);
    }
    out
}

/// The values schema's patterns for the controller's Go-duration flags.
fn chart_duration_patterns() -> Vec<String> {
    let path = repo_root().join("charts/temporal-worker-controller/values.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("values schema")).expect("JSON");
    let props = &schema["properties"];
    [
        &props["controller"]["properties"]["idleInterval"],
        &props["controller"]["properties"]["restInterval"],
        &props["controller"]["properties"]["pollerHealth"]["properties"]["liveThreshold"],
        &props["controller"]["properties"]["pollerHealth"]["properties"]["checkInterval"],
        &props["webhook"]["properties"]["selfManaged"]["properties"]["validity"],
        &props["webhook"]["properties"]["selfManaged"]["properties"]["renewBefore"],
        &props["webhook"]["properties"]["selfManaged"]["properties"]["checkInterval"],
    ]
    .iter()
    .map(|p| {
        p["pattern"]
            .as_str()
            .expect("a duration pattern")
            .to_string()
    })
    .collect()
}

#[test]
fn the_crd_and_chart_patterns_accept_what_the_parser_accepts() {
    let crd = crd_duration_patterns();
    assert!(crd.len() >= 14, "duration fields in the CRDs: {crd:?}");
    let chart = chart_duration_patterns();
    for p in crd.iter().chain(&chart) {
        assert_eq!(
            p,
            duration::PATTERN,
            "a duration pattern that is not PATTERN"
        );
    }
    let re = Regex::new(duration::PATTERN).expect("PATTERN compiles");
    let mut mismatches = Vec::new();
    let mut too_large = 0;
    for input in inputs() {
        let parsed = duration::parse(&input);
        let matched = re.is_match(&input);
        let ok = match &parsed {
            Ok(_) => matched,
            // Deliberate: the pattern cannot bound the value (see the module docs).
            Err(e) if e.why.starts_with("too large") => {
                too_large += 1;
                matched
            }
            Err(_) => !matched,
        };
        if !ok {
            mismatches.push(format!("{input:?}: pattern {matched}, parser {parsed:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "the pattern and the parser differ:\n{}",
        mismatches.join("\n")
    );
    assert!(too_large >= 5, "values past int64 nanoseconds: {too_large}");
}

/// A temporary directory, removed on drop.
mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(prefix: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
            std::fs::create_dir_all(&path).expect("temporary directory");
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
