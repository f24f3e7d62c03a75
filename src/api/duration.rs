//! Go-style duration strings (`30s`, `1h30m`, `500ms`), the format users know from the Go
//! controller and from `kubectl`. Parsing is strict so typos surface as `InvalidSpec`.

use std::time::Duration;

/// Regex used in the CRD schema and the chart's values schema; accepts exactly what [`parse`]
/// accepts, but for values too large for Go's `time.Duration` (a pattern cannot bound a sum),
/// which [`parse`] refuses. Go's grammar without the minus sign: a bare `0`, or one or more
/// `<number><unit>` where the number has digits before or after its point.
pub const PATTERN: &str = r"^\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why}")]
pub struct ParseError {
    pub input: String,
    pub why: &'static str,
}

/// Nanoseconds per unit, as Go's `time` package names them (`µs` is U+00B5, `μs` U+03BC).
const UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's limit: `time.Duration` is an int64 of nanoseconds.
const MAX_NANOS: u64 = i64::MAX as u64;

/// Parses a Go duration as Go's `time.ParseDuration` does, with the same result to the
/// nanosecond (the same integer arithmetic, and the same float step for fractions), except
/// that a negative duration (`-` sign, even `-0`) is refused: every duration here is a wait or
/// an interval. `tests/go_duration.rs` compares the two on the same inputs.
pub fn parse(input: &str) -> Result<Duration, ParseError> {
    let err = |why| ParseError {
        input: input.to_string(),
        why,
    };
    let s = match input.as_bytes().first() {
        Some(b'-') => return Err(err("negative durations are not allowed")),
        Some(b'+') => &input[1..],
        _ => input,
    };
    // Go's special case: a bare zero needs no unit.
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let (nanos, after) = component(rest).map_err(err)?;
        total = total
            .checked_add(nanos)
            .filter(|t| *t <= MAX_NANOS)
            .ok_or_else(|| err(TOO_LARGE))?;
        rest = after;
    }
    Ok(Duration::from_nanos(total))
}

const TOO_LARGE: &str = "too large (at most 2562047h47m16.854775807s)";

/// One `<number><unit>` at the start of `s`: its nanoseconds and what follows it.
fn component(s: &str) -> Result<(u64, &str), &'static str> {
    if !s.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err("expected a number");
    }
    let (whole, rest) = split_digits(s);
    let mut v = digits_value(whole).ok_or(TOO_LARGE)?;
    let (fraction, rest) = match rest.strip_prefix('.') {
        Some(after) => split_digits(after),
        None => ("", rest),
    };
    if whole.is_empty() && fraction.is_empty() {
        return Err("expected a number");
    }
    let unit_len = rest
        .find(|c: char| c.is_ascii_digit() || c == '.')
        .unwrap_or(rest.len());
    let (unit, rest) = rest.split_at(unit_len);
    if unit.is_empty() {
        return Err("missing unit (use s, m or h)");
    }
    let scale = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, nanos)| *nanos)
        .ok_or("unknown unit (use ns, us, ms, s, m or h)")?;
    v = v
        .checked_mul(scale)
        .filter(|v| *v <= MAX_NANOS + 1)
        .ok_or(TOO_LARGE)?;
    let (f, f_scale) = fraction_value(fraction);
    if f > 0 {
        // Go's own step (exact to the nanosecond for fractions of hours), truncating.
        v = v
            .checked_add((f as f64 * (scale as f64 / f_scale)) as u64)
            .filter(|v| *v <= MAX_NANOS + 1)
            .ok_or(TOO_LARGE)?;
    }
    Ok((v, rest))
}

/// The leading ASCII digits of `s`, and the rest.
fn split_digits(s: &str) -> (&str, &str) {
    s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()))
}

/// The value of a digit run, `None` past 2^63 (Go's `leadingInt`).
fn digits_value(digits: &str) -> Option<u64> {
    digits.bytes().try_fold(0u64, |x, d| {
        x.checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(d - b'0')))
            .filter(|x| *x <= MAX_NANOS + 1)
    })
}

/// The digits after the point as an integer and its scale (`"25"` → `(25, 100.0)`); digits
/// past what an int64 holds are ignored, as Go's `leadingFraction` does.
fn fraction_value(digits: &str) -> (u64, f64) {
    let (mut x, mut scale) = (0u64, 1.0f64);
    for d in digits.bytes() {
        match x
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(d - b'0')))
        {
            Some(y) if x <= MAX_NANOS / 10 && y <= MAX_NANOS + 1 => {
                x = y;
                scale *= 10.0;
            }
            _ => break,
        }
    }
    (x, scale)
}

/// Formats a duration the way Go prints it (`1h0m0s` style is avoided: shortest exact form).
pub fn format(d: Duration) -> String {
    let total = d.as_secs();
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("24h").unwrap(), Duration::from_secs(86400));
    }

    #[test]
    fn parses_what_go_accepts_beyond_the_common_forms() {
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(parse("+0").unwrap(), Duration::ZERO);
        assert_eq!(parse("+5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1.s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse("1μs").unwrap(), Duration::from_micros(1));
        assert_eq!(parse("1µs").unwrap(), Duration::from_micros(1));
        assert_eq!(
            parse("2562047h47m16.854775807s").unwrap(),
            Duration::from_nanos(i64::MAX as u64)
        );
        assert!(parse("2562047h47m16.854775808s").is_err());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "10", "s", "-1s", "-0", "1d", "1h 2m", "abc", ".s", "00", "1e3s", "+", "1..5s",
        ] {
            assert!(parse(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn formats_shortest() {
        assert_eq!(format(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format(Duration::from_secs(0)), "0s");
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
    }
}
