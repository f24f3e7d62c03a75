//! The label selector syntax of `kubectl -l` and `labelSelector=` (equality- and set-based
//! requirements), parsed into kube-core's [`Expression`]s. kube-core matches and prints
//! selectors but has no parser of the text form, and the selector is only ever given as text
//! here (a flag, a chart value).

use kube::core::Expression;

/// `key` of a requirement.
pub fn key(e: &Expression) -> &str {
    match e {
        Expression::In(k, _)
        | Expression::NotIn(k, _)
        | Expression::Equal(k, _)
        | Expression::NotEqual(k, _)
        | Expression::Exists(k)
        | Expression::DoesNotExist(k) => k,
    }
}

/// The requirements of `text`: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
/// `!k`, separated by commas.
pub fn parse(text: &str) -> Result<Vec<Expression>, String> {
    let parts = split(text)?;
    if parts.is_empty() {
        return Err("the selector is empty".into());
    }
    parts.iter().map(|p| requirement(p.trim())).collect()
}

/// Splits at the commas outside parentheses.
fn split(text: &str) -> Result<Vec<String>, String> {
    let (mut parts, mut current, mut depth) = (Vec::new(), String::new(), 0u32);
    for c in text.chars() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err("nested parentheses".into()),
            ')' if depth == 1 => depth = 0,
            ')' => return Err("a ')' without its '('".into()),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if depth != 0 {
        return Err("a '(' without its ')'".into());
    }
    parts.push(current);
    Ok(parts)
}

fn requirement(part: &str) -> Result<Expression, String> {
    if part.is_empty() {
        return Err("an empty requirement (two commas in a row?)".into());
    }
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(label_key(k.trim())?));
    }
    for (op, build) in [
        (
            "!=",
            Expression::NotEqual as fn(String, String) -> Expression,
        ),
        ("==", Expression::Equal),
        ("=", Expression::Equal),
    ] {
        if let Some((k, v)) = part.split_once(op) {
            return Ok(build(label_key(k.trim())?, label_value(v.trim())?));
        }
    }
    if let Some((k, rest)) = part.split_once(char::is_whitespace) {
        let rest = rest.trim();
        let (notin, set) = if let Some(set) = rest.strip_prefix("notin") {
            (true, set)
        } else if let Some(set) = rest.strip_prefix("in") {
            (false, set)
        } else {
            return Err(format!("{part:?}: expected 'in (…)' or 'notin (…)'"));
        };
        let values = value_set(set.trim())?;
        let key = label_key(k.trim())?;
        return Ok(if notin {
            Expression::NotIn(key, values)
        } else {
            Expression::In(key, values)
        });
    }
    Ok(Expression::Exists(label_key(part)?))
}

fn value_set(set: &str) -> Result<std::collections::BTreeSet<String>, String> {
    let inner = set
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("{set:?}: a set of values is written (a,b)"))?;
    let values = inner
        .split(',')
        .map(|v| label_value(v.trim()))
        .collect::<Result<std::collections::BTreeSet<_>, _>>()?;
    if values.iter().all(String::is_empty) {
        return Err(format!("{set:?}: the set has no values"));
    }
    Ok(values)
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (letters, digits, `-`, `_`, `.`, alphanumeric at both ends).
fn label_key(k: &str) -> Result<String, String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    });
    if !prefix_ok || name.is_empty() || !name_like(name) {
        return Err(format!("{k:?} is not a label key"));
    }
    Ok(k.to_string())
}

/// A label value: empty, or a name of at most 63 characters.
fn label_value(v: &str) -> Result<String, String> {
    if v.is_empty() || name_like(v) {
        Ok(v.to_string())
    } else {
        Err(format!("{v:?} is not a label value"))
    }
}

fn name_like(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Selector;

    fn printed(text: &str) -> String {
        let s: Selector = parse(text).unwrap().into_iter().collect();
        s.to_string()
    }

    #[test]
    fn every_requirement_form_reads_as_the_api_server_writes_it() {
        assert_eq!(printed("k=a"), "k=a");
        assert_eq!(printed("k == a"), "k=a");
        assert_eq!(printed("k!=a"), "k!=a");
        assert_eq!(printed("x.io/k in (b, a)"), "x.io/k in (a,b)");
        assert_eq!(printed("k notin (a,b),team"), "k notin (a,b),team");
        assert_eq!(printed("!k"), "!k");
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        for (text, says) in [
            ("", "empty"),
            ("k=a,,j=b", "empty requirement"),
            ("k in (a,b", "without its ')'"),
            ("k in a,b", "(a,b)"),
            ("k within (a)", "'in (…)'"),
            ("K_=a", "not a label key"),
            ("k=-a", "not a label value"),
            ("k in ()", "no values"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }
}
