//! Go-style duration strings (`30s`, `1h30m`, `500ms`), the format users know from the Go
//! controller and from `kubectl`. Parsing is strict so typos surface as `InvalidSpec`.

use std::time::Duration;

/// Regex used in the CRD schema; must accept exactly what [`parse`] accepts.
pub const PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why}")]
pub struct ParseError {
    pub input: String,
    pub why: &'static str,
}

/// Parses a Go-style duration. Negative and bare-number values are rejected.
pub fn parse(input: &str) -> Result<Duration, ParseError> {
    let err = |why| ParseError {
        input: input.to_string(),
        why,
    };
    if input.is_empty() {
        return Err(err("empty"));
    }
    let mut total_nanos: f64 = 0.0;
    let mut rest = input;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(err("missing unit (use s, m or h)")),
            _ => return Err(err("unknown unit (use ns, us, ms, s, m or h)")),
        };
        rest = &rest[unit_len..];
        total_nanos += number * scale;
    }
    if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
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
    fn rejects_garbage() {
        for bad in ["", "10", "s", "-1s", "1d", "1h 2m", "abc"] {
            assert!(parse(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn schema_pattern_matches_parser() {
        // Keep the CRD pattern and the parser in lockstep on representative inputs.
        let re_ok = ["30s", "1h30m", "1.5s", "100ms"];
        for s in re_ok {
            assert!(parse(s).is_ok());
        }
    }

    #[test]
    fn formats_shortest() {
        assert_eq!(format(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format(Duration::from_secs(0)), "0s");
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
    }
}
