//! Just enough of Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) to read
//! the request bodies of the authentication APIs: client-go's typed clients (so `kubectl create
//! token`) send TokenRequests that way. Bodies are turned into the equivalent JSON; responses
//! stay JSON, which those clients also accept.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\x00";

fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!("unable to decode protobuf body: {what}"))
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed 32/64-bit values: not used by the messages read here.
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> ApiResult<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| bad("truncated varint"))?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn take(&mut self, n: usize) -> ApiResult<&'a [u8]> {
        if n > self.buf.len() {
            return Err(bad("truncated field"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next (field number, value), or `None` at the end.
    fn field(&mut self) -> ApiResult<Option<(u64, Field<'a>)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let field = match tag & 7 {
            0 => Field::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Field::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| bad("length overflow"))?;
                Field::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Field::Fixed
            }
            w => return Err(bad(&format!("unsupported wire type {w}"))),
        };
        Ok(Some((tag >> 3, field)))
    }
}

fn fields(buf: &[u8]) -> Reader<'_> {
    Reader { buf }
}

fn string(b: &[u8]) -> ApiResult<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("invalid UTF-8 in a string"))
}

/// Unwraps the `k8s\0` + `runtime.Unknown` envelope: (apiVersion, kind, raw message).
fn envelope(body: &[u8]) -> ApiResult<(String, String, &[u8])> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing the k8s protobuf prefix"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut next = fields(rest);
    while let Some((n, f)) = next.field()? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                let mut inner = fields(tm);
                while let Some((n, f)) = inner.field()? {
                    match (n, f) {
                        (1, Field::Bytes(b)) => api_version = string(b)?,
                        (2, Field::Bytes(b)) => kind = string(b)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// The ObjectMeta fields a create request may usefully carry.
fn object_meta(buf: &[u8]) -> ApiResult<Value> {
    let mut m = Map::new();
    let mut next = fields(buf);
    while let Some((n, f)) = next.field()? {
        let Field::Bytes(b) = f else { continue };
        let key = match n {
            1 => "name",
            2 => "generateName",
            3 => "namespace",
            5 => "uid",
            6 => "resourceVersion",
            11 | 12 => {
                let (mut k, mut v) = (String::new(), String::new());
                let mut entry = fields(b);
                while let Some((n, f)) = entry.field()? {
                    match (n, f) {
                        (1, Field::Bytes(b)) => k = string(b)?,
                        (2, Field::Bytes(b)) => v = string(b)?,
                        _ => {}
                    }
                }
                let map = if n == 11 { "labels" } else { "annotations" };
                if let Value::Object(o) = m.entry(map).or_insert_with(|| json!({})) {
                    o.insert(k, json!(v));
                }
                continue;
            }
            _ => continue,
        };
        let s = string(b)?;
        if !s.is_empty() {
            m.insert(key.into(), json!(s));
        }
    }
    Ok(Value::Object(m))
}

fn token_request_spec(buf: &[u8]) -> ApiResult<Value> {
    let mut audiences = Vec::new();
    let mut spec = Map::new();
    let mut next = fields(buf);
    while let Some((n, f)) = next.field()? {
        match (n, f) {
            (1, Field::Bytes(b)) => audiences.push(json!(string(b)?)),
            // int64 is a two's-complement varint.
            (4, Field::Varint(v)) => {
                spec.insert("expirationSeconds".into(), json!(v as i64));
            }
            (3, Field::Bytes(b)) => {
                let mut r = Map::new();
                let mut inner = fields(b);
                while let Some((n, f)) = inner.field()? {
                    let Field::Bytes(b) = f else { continue };
                    let key = match n {
                        1 => "kind",
                        2 => "apiVersion",
                        3 => "name",
                        4 => "uid",
                        _ => continue,
                    };
                    r.insert(key.into(), json!(string(b)?));
                }
                spec.insert("boundObjectRef".into(), Value::Object(r));
            }
            _ => {}
        }
    }
    spec.insert("audiences".into(), Value::Array(audiences));
    Ok(Value::Object(spec))
}

fn token_review_spec(buf: &[u8]) -> ApiResult<Value> {
    let mut spec = Map::new();
    let mut audiences = Vec::new();
    let mut next = fields(buf);
    while let Some((n, f)) = next.field()? {
        match (n, f) {
            (1, Field::Bytes(b)) => {
                spec.insert("token".into(), json!(string(b)?));
            }
            (2, Field::Bytes(b)) => audiences.push(json!(string(b)?)),
            _ => {}
        }
    }
    if !audiences.is_empty() {
        spec.insert("audiences".into(), Value::Array(audiences));
    }
    Ok(Value::Object(spec))
}

/// Decodes a protobuf TokenRequest or TokenReview (metadata + spec; status is ignored, the
/// server overwrites it) into its JSON form.
pub fn decode_authentication(body: &[u8]) -> ApiResult<Value> {
    let (api_version, kind, raw) = envelope(body)?;
    let spec_of: fn(&[u8]) -> ApiResult<Value> = match kind.as_str() {
        "TokenRequest" => token_request_spec,
        "TokenReview" => token_review_spec,
        other => {
            return Err(ApiError::BadRequest(format!(
                "no protobuf decoding for kind {other:?} in the emulator"
            )));
        }
    };
    let mut obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {}, "spec": {}});
    let mut next = fields(raw);
    while let Some((n, f)) = next.field()? {
        match (n, f) {
            (1, Field::Bytes(b)) => obj["metadata"] = object_meta(b)?,
            (2, Field::Bytes(b)) => obj["spec"] = spec_of(b)?,
            _ => {}
        }
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_kubectl_create_token_sends() {
        // Captured from `kubectl create token foo -n bar --audience x --duration 20m` (v1.32).
        let body = b"k8s\x00\n(\n\x18authentication.k8s.io/v1\x12\x0cTokenRequest\x12 \n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\n\x01x \xb0\t\x1a\x04\n\x00\x12\x00\x1a\x00\"\x00";
        let v = decode_authentication(body).expect("decodes");
        assert_eq!(
            v,
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {},
                "spec": {"audiences": ["x"], "expirationSeconds": 1200},
            })
        );
    }

    #[test]
    fn bound_object_ref_and_review() {
        // spec { audiences: [] , boundObjectRef { kind: "Pod", apiVersion: "v1", name: "p" } }
        let bound = b"\n\x03Pod\x12\x02v1\x1a\x01p";
        let mut spec = vec![0x1a, bound.len() as u8];
        spec.extend_from_slice(bound);
        let mut msg = vec![0x12, spec.len() as u8];
        msg.extend_from_slice(&spec);
        let tm = b"\n\x18authentication.k8s.io/v1\x12\x0cTokenRequest";
        let mut body = b"k8s\x00".to_vec();
        body.extend_from_slice(&[0x0a, tm.len() as u8]);
        body.extend_from_slice(tm);
        body.extend_from_slice(&[0x12, msg.len() as u8]);
        body.extend_from_slice(&msg);
        let v = decode_authentication(&body).expect("decodes");
        assert_eq!(
            v["spec"]["boundObjectRef"],
            json!({"kind": "Pod", "apiVersion": "v1", "name": "p"})
        );

        let tm = b"\n\x18authentication.k8s.io/v1\x12\x0bTokenReview";
        let spec = b"\n\x03tok\x12\x01a";
        let mut body = b"k8s\x00".to_vec();
        body.extend_from_slice(&[0x0a, tm.len() as u8]);
        body.extend_from_slice(tm);
        body.extend_from_slice(&[0x12, spec.len() as u8 + 2, 0x12, spec.len() as u8]);
        body.extend_from_slice(spec);
        let v = decode_authentication(&body).expect("decodes");
        assert_eq!(v["spec"], json!({"token": "tok", "audiences": ["a"]}));
    }

    #[test]
    fn garbage_is_a_bad_request() {
        for body in [
            &b"not protobuf"[..],
            b"k8s\x00\x0a\xff",
            b"k8s\x00\x0a\x05ab",
            b"k8s\x00\x0f",
        ] {
            assert!(matches!(
                decode_authentication(body),
                Err(ApiError::BadRequest(_))
            ));
        }
    }
}
