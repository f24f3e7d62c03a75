//! The Prometheus text format 0.0.4, derived from our OpenMetrics exposition.

/// Rewrites an OpenMetrics exposition as Prometheus text format 0.0.4, for scrapers (and
/// `promtool check metrics`) that do not speak OpenMetrics. The two differ only in metadata:
/// 0.0.4 names counter families with their `_total` suffix, has no `# UNIT` / `# EOF`
/// lines and no `info` type.
pub fn openmetrics_to_prometheus_text(text: &str) -> String {
    use std::collections::HashMap;
    // Family name -> (suffix to append in metadata, type to print).
    let mut families: HashMap<&str, (&str, &str)> = HashMap::new();
    for line in text.lines() {
        if let Some((name, ty)) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_once(' '))
        {
            let mapped = match ty {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" | "histogram" | "summary" => ("", ty),
                _ => ("", "untyped"),
            };
            families.insert(name, mapped);
        }
    }
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let (suffix, ty) = families.get(name).copied().unwrap_or(("", "untyped"));
                out.push_str(kind);
                out.push_str(name);
                if !name.ends_with(suffix) {
                    out.push_str(suffix);
                }
                out.push(' ');
                out.push_str(if kind == "# TYPE " { ty } else { tail });
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_to_prometheus_text() {
        let om = "# HELP a_reconcile Reconciles.\n# TYPE a_reconcile counter\na_reconcile_total{x=\"1\"} 2\n\
                  # HELP a_dur_seconds Time.\n# TYPE a_dur_seconds histogram\n# UNIT a_dur_seconds seconds\n\
                  a_dur_seconds_sum 1.0\n# HELP a_build Build.\n# TYPE a_build info\na_build_info{v=\"1\"} 1\n# EOF\n";
        let want = "# HELP a_reconcile_total Reconciles.\n# TYPE a_reconcile_total counter\na_reconcile_total{x=\"1\"} 2\n\
                    # HELP a_dur_seconds Time.\n# TYPE a_dur_seconds histogram\na_dur_seconds_sum 1.0\n\
                    # HELP a_build_info Build.\n# TYPE a_build_info gauge\na_build_info{v=\"1\"} 1\n";
        assert_eq!(openmetrics_to_prometheus_text(om), want);
    }
}
