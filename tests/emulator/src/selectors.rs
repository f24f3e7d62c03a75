//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors.

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

fn bad(sel: &str, why: &str) -> ApiError {
    ApiError::BadRequest(format!("unable to parse requirement: found '{sel}', {why}"))
}

/// Splits on commas that are not inside `( … )`.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(whole, "expected a parenthesised set of values"))?;
    let vals: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if vals.is_empty() {
        return Err(bad(
            whole,
            "for 'in', 'notin' operators, values set can't be empty",
        ));
    }
    if let Some(v) = vals.iter().find(|v| !valid_value(v)) {
        return Err(bad(whole, &format!("invalid label value: \"{v}\"")));
    }
    Ok(vals)
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err(bad(s, "empty requirement"));
            }
            let req = if let Some(k) = p.strip_prefix('!') {
                Requirement {
                    key: k.trim().into(),
                    op: Op::NotExists,
                }
            } else if let Some((k, v)) = p.split_once("!=") {
                Requirement {
                    key: k.trim().into(),
                    op: Op::NotEq(v.trim().into()),
                }
            } else if let Some((k, v)) = p.split_once("==") {
                Requirement {
                    key: k.trim().into(),
                    op: Op::Eq(v.trim().into()),
                }
            } else if let Some((k, v)) = p.split_once('=') {
                Requirement {
                    key: k.trim().into(),
                    op: Op::Eq(v.trim().into()),
                }
            } else if let Some((k, rest)) = split_word(p, "notin") {
                Requirement {
                    key: k.into(),
                    op: Op::NotIn(parse_set(rest, s)?),
                }
            } else if let Some((k, rest)) = split_word(p, "in") {
                Requirement {
                    key: k.into(),
                    op: Op::In(parse_set(rest, s)?),
                }
            } else {
                Requirement {
                    key: p.into(),
                    op: Op::Exists,
                }
            };
            if !valid_key(&req.key) {
                return Err(bad(s, &format!("invalid label key \"{}\"", req.key)));
            }
            if let Op::Eq(v) | Op::NotEq(v) = &req.op
                && !valid_value(v)
            {
                return Err(bad(s, &format!("invalid label value: \"{v}\"")));
            }
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match &r.op {
            Op::Eq(v) => get(&r.key) == Some(v.as_str()),
            Op::NotEq(v) => get(&r.key) != Some(v.as_str()),
            Op::In(vs) => get(&r.key).is_some_and(|x| vs.iter().any(|v| v == x)),
            Op::NotIn(vs) => get(&r.key).is_none_or(|x| vs.iter().all(|v| v != x)),
            Op::Exists => get(&r.key).is_some(),
            Op::NotExists => get(&r.key).is_none(),
        })
    }

    /// Whether an object's labels match.
    pub fn matches_obj(&self, obj: &Value) -> bool {
        self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

/// `key in (..)` / `key notin (..)`: the word must be surrounded by whitespace or `(`.
fn split_word<'a>(p: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let pat = format!(" {word}");
    let idx = p.find(&pat)?;
    let rest = &p[idx + pat.len()..];
    if rest.starts_with(' ') || rest.starts_with('(') {
        Some((p[..idx].trim(), rest))
    } else {
        None
    }
}

/// A parsed `metav1.LabelSelector` object (matchLabels + matchExpressions).
pub fn selector_object_matches(
    sel: &Value,
    labels: Option<&serde_json::Map<String, Value>>,
) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object)
        && !ml.iter().all(|(k, v)| get(k) == v.as_str())
    {
        return false;
    }
    let exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    exprs.iter().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match e
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "In" => get(key).is_some_and(|x| values.contains(&x)),
            "NotIn" => get(key).is_none_or(|x| !values.contains(&x)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        }
    })
}

#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d`; only fields in `allowed` (plus metadata.name/namespace) are accepted,
    /// like the real server which answers 400 for unsupported field labels.
    pub fn parse(s: &str, allowed: &[&str], kind_for_error: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" && !allowed.contains(&k) {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {k}{}",
                    if kind_for_error.is_empty() {
                        String::new()
                    } else {
                        format!(" (for {kind_for_error})")
                    }
                )));
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(k, eq, v)| {
            let actual = field_value(obj, k);
            (actual == *v) == *eq
        })
    }
}

/// The string a field selector compares against (absent fields compare as "").
fn field_value(obj: &Value, path: &str) -> String {
    // `source` on core events means source.component.
    let path = if path == "source" {
        "source.component"
    } else {
        path
    };
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(json!({"app": "web", "tier": "fe"}));
        let m = |s: &str| LabelSelector::parse(s).map(|sel| sel.matches(Some(&l)));
        assert_eq!(m("app=web").ok(), Some(true));
        assert_eq!(m("app==web,tier=fe").ok(), Some(true));
        assert_eq!(m("app!=web").ok(), Some(false));
        assert_eq!(m("app in (web, api)").ok(), Some(true));
        assert_eq!(m("app notin (web,api)").ok(), Some(false));
        assert_eq!(m("tier,app in (x),!missing").ok(), Some(false));
        assert_eq!(m("tier,!missing").ok(), Some(true));
        assert_eq!(m("!app").ok(), Some(false));
        assert_eq!(m("missing notin (a)").ok(), Some(true));
        assert!(m("app in ()").is_err());
        assert!(m("a b c").is_err());
    }

    #[test]
    fn field_selector_names() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let s = FieldSelector::parse("metadata.name=a,metadata.namespace!=x", &[], "")
            .map(|f| f.matches(&obj));
        assert_eq!(s.ok(), Some(true));
        assert!(FieldSelector::parse("spec.foo=a", &[], "Thing").is_err());
    }
}
