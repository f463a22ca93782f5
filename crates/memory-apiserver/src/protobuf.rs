//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the few kinds that
//! `kubectl create namespace|configmap|secret|serviceaccount` sends, turned into JSON.
//!
//! kubectl 1.32 and later send built-in kinds from their typed `create` commands as protobuf,
//! and client-go falls back to JSON after a 415 only when it sent CBOR: a server that cannot
//! decode protobuf leaves those commands broken. kube-apiserver decodes every built-in kind;
//! this server decodes Namespace, ConfigMap, Secret and ServiceAccount (`v1`) and answers 415
//! `UnsupportedMediaType` for any other kind, or for a field it does not know (never dropping a
//! field silently). The wire format is Kubernetes' envelope: the magic `k8s\0`, then a
//! `runtime.Unknown` {typeMeta {apiVersion, kind}, raw (the object's message)}. Field numbers
//! are those of `k8s.io/api/core/v1/generated.proto` and `apimachinery/.../meta/v1`.
//! Hand-written (about 150 lines) rather than a protobuf crate: four messages, decoding only,
//! and no code generation in the build.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::errors::ApiError;

/// How one field's value is read, and turned into JSON.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bool,
    Int,
    /// `map<string, string>`.
    StrMap,
    /// `map<string, bytes>`: base64 strings in JSON.
    BytesMap,
    /// `repeated string`.
    StrList,
    Msg(&'static [Field]),
    /// `repeated` message.
    MsgList(&'static [Field]),
    /// Read and dropped: server-set fields (timestamps, status) the server overwrites anyway.
    Skip,
}

/// A field: its number, its JSON name, its type.
type Field = (u32, &'static str, Ty);

const META: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (4, "selfLink", Ty::Skip),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::Int),
    (8, "creationTimestamp", Ty::Skip),
    (11, "labels", Ty::StrMap),
    (12, "annotations", Ty::StrMap),
    (14, "finalizers", Ty::StrList),
];
const LOCAL_REF: &[Field] = &[(1, "name", Ty::Str)];
const NAMESPACE: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "spec", Ty::Msg(&[(1, "finalizers", Ty::StrList)])),
    (3, "status", Ty::Skip),
];
const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "data", Ty::StrMap),
    (3, "binaryData", Ty::BytesMap),
    (4, "immutable", Ty::Bool),
];
const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "data", Ty::BytesMap),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::StrMap),
    (5, "immutable", Ty::Bool),
];
const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (3, "imagePullSecrets", Ty::MsgList(LOCAL_REF)),
    (4, "automountServiceAccountToken", Ty::Bool),
];
const TYPE_META: &[Field] = &[(1, "apiVersion", Ty::Str), (2, "kind", Ty::Str)];

/// The JSON encoding of a protobuf request body, or 415 (a kind or field this server does not
/// decode) or 400 (not a well-formed Kubernetes protobuf body).
pub fn to_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| malformed("it does not start with the Kubernetes protobuf magic k8s\\0"))?;
    let (api_version, kind, raw) = unknown(rest)?;
    let fields = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        _ => {
            return Err(unsupported(&format!(
                "it decodes protobuf only for v1 Namespace, ConfigMap, Secret and ServiceAccount, not {api_version} {kind}"
            )));
        }
    };
    let mut object = message(raw, fields, &kind)?;
    object.insert("apiVersion".into(), api_version.into());
    object.insert("kind".into(), kind.into());
    Ok(serde_json::to_vec(&Value::Object(object)).expect("a JSON value serializes"))
}

/// The `runtime.Unknown` envelope: apiVersion, kind and the object's own message.
fn unknown(buf: &[u8]) -> Result<(String, String, &[u8]), ApiError> {
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (number, value) in wire_fields(buf)? {
        match (number, value) {
            (1, Wire::Bytes(b)) => {
                let type_meta = message(b, TYPE_META, "TypeMeta")?;
                let get = |k: &str| {
                    type_meta
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                (api_version, kind) = (get("apiVersion"), get("kind"));
            }
            (2, Wire::Bytes(b)) => raw = b,
            (3 | 4, Wire::Bytes([])) => {} // contentEncoding, contentType: none
            (n, _) => return Err(unknown_field(n, "runtime.Unknown")),
        }
    }
    Ok((api_version, kind, raw))
}

/// One message, by its field table, as a JSON object. Empty strings, zero integers and empty
/// messages are left out, as Go's JSON encoder leaves out these `omitempty` fields.
fn message(buf: &[u8], fields: &[Field], name: &str) -> Result<Map<String, Value>, ApiError> {
    let mut object = Map::new();
    for (number, wire) in wire_fields(buf)? {
        let &(_, key, ty) = fields
            .iter()
            .find(|f| f.0 == number)
            .ok_or_else(|| unknown_field(number, name))?;
        let value = match (ty, wire) {
            (Ty::Skip, _) => continue,
            (Ty::Str, Wire::Bytes([])) => continue,
            (Ty::Str, Wire::Bytes(b)) => Value::from(text(b)?),
            (Ty::Bool, Wire::Varint(v)) => Value::from(v != 0),
            (Ty::Int, Wire::Varint(0)) => continue,
            (Ty::Int, Wire::Varint(v)) => Value::from(v as i64),
            (Ty::StrMap | Ty::BytesMap, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b, matches!(ty, Ty::BytesMap))?;
                let map = object
                    .entry(key)
                    .or_insert_with(|| Value::Object(Map::new()));
                map.as_object_mut().expect("a map").insert(k, v);
                continue;
            }
            (Ty::StrList, Wire::Bytes(b)) => {
                push(&mut object, key, Value::from(text(b)?));
                continue;
            }
            (Ty::MsgList(f), Wire::Bytes(b)) => {
                push(&mut object, key, Value::Object(message(b, f, key)?));
                continue;
            }
            (Ty::Msg(f), Wire::Bytes(b)) => match message(b, f, key)? {
                m if m.is_empty() => continue,
                m => Value::Object(m),
            },
            _ => {
                return Err(malformed(&format!(
                    "field {key} of {name} has the wrong wire type"
                )));
            }
        };
        object.insert(key.into(), value);
    }
    Ok(object)
}

/// Appends to the JSON array `key` of `object`.
fn push(object: &mut Map<String, Value>, key: &str, item: Value) {
    let list = object
        .entry(key)
        .or_insert_with(|| Value::Array(Vec::new()));
    list.as_array_mut().expect("a list").push(item);
}

/// A map entry (key = 1, value = 2); bytes values become base64, as in JSON.
fn map_entry(buf: &[u8], bytes: bool) -> Result<(String, Value), ApiError> {
    let (mut key, mut value) = (String::new(), Value::from(""));
    for (number, wire) in wire_fields(buf)? {
        match (number, wire) {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) if bytes => {
                value = base64::engine::general_purpose::STANDARD.encode(b).into();
            }
            (2, Wire::Bytes(b)) => value = text(b)?.into(),
            (n, _) => return Err(unknown_field(n, "a map entry")),
        }
    }
    Ok((key, value))
}

/// A field's value on the wire (the two wire types these messages use).
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// The fields of one message, in order.
fn wire_fields(mut buf: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, ApiError> {
    let mut fields = Vec::new();
    while !buf.is_empty() {
        let tag = varint(&mut buf)?;
        let number =
            u32::try_from(tag >> 3).map_err(|_| malformed("a field number is too large"))?;
        let wire = match tag & 7 {
            0 => Wire::Varint(varint(&mut buf)?),
            2 => {
                let len = usize::try_from(varint(&mut buf)?).unwrap_or(usize::MAX);
                if len > buf.len() {
                    return Err(malformed("a length runs past the end of the body"));
                }
                let (value, rest) = buf.split_at(len);
                buf = rest;
                Wire::Bytes(value)
            }
            t => return Err(malformed(&format!("field {number} has wire type {t}"))),
        };
        fields.push((number, wire));
    }
    Ok(fields)
}

fn varint(buf: &mut &[u8]) -> Result<u64, ApiError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf
            .split_first()
            .ok_or_else(|| malformed("a number runs past the end of the body"))?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(malformed("a number is longer than 10 bytes"))
}

fn text(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| malformed("a string is not UTF-8"))
}

fn malformed(why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the body of the request could not be decoded as protobuf: {why}"
    ))
}

fn unknown_field(number: u32, message: &str) -> ApiError {
    unsupported(&format!("it does not know field {number} of {message}"))
}

/// 415 with kube's message, why this server cannot decode the body, and what to do.
fn unsupported(why: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml; this in-memory API server decodes only part of protobuf (application/vnd.kubernetes.protobuf): {why}; send the object as JSON or YAML, e.g. `kubectl create … --dry-run=client -o yaml | kubectl create -f -`"
        ),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// kubectl 1.32's body for `kubectl create ns bar`.
    pub(crate) const KUBECTL_CREATE_NS_BAR: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1b\x0a\x13\x0a\x03bar\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
    /// kubectl 1.32's body for
    /// `kubectl create secret generic t --from-literal=p=q --type=kubernetes.io/basic-auth -n foo`.
    const KUBECTL_CREATE_SECRET: &[u8] = b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\x38\x0a\x14\x0a\x01t\x12\x00\x1a\x03foo\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x06\x0a\x01p\x12\x01q\x1a\x18kubernetes.io/basic-auth\x1a\x00\x22\x00";

    fn decoded(body: &[u8]) -> Value {
        serde_json::from_slice(&to_json(body).expect("decodes")).unwrap()
    }

    /// Length-delimited field `number` holding `value`.
    fn field(number: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![number << 3 | 2, u8::try_from(value.len()).unwrap()];
        out.extend_from_slice(value);
        out
    }

    /// An envelope around `raw` for `v1` `kind`.
    fn envelope(kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, b"v1"), field(2, kind.as_bytes())].concat();
        [b"k8s\0".to_vec(), field(1, &type_meta), field(2, raw)].concat()
    }

    #[test]
    fn kubectl_bodies_become_the_json_kubectl_would_send() {
        assert_eq!(
            decoded(KUBECTL_CREATE_NS_BAR),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bar"}})
        );
        assert_eq!(
            decoded(KUBECTL_CREATE_SECRET),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                   "metadata": {"name": "t", "namespace": "foo"}, "data": {"p": "cQ=="}})
        );
    }

    #[test]
    fn config_map_labels_lists_and_flags_are_decoded() {
        let label = |k: &[u8], v: &[u8]| field(11, &[field(1, k), field(2, v)].concat());
        let meta = [
            field(1, b"x"),
            label(b"a", b"1"),
            label(b"b", b""),
            field(14, b"f"),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
            field(3, &[field(1, b"bin"), field(2, &[0xff, 0])].concat()),
            vec![4 << 3, 1], // immutable: true
        ]
        .concat();
        assert_eq!(
            decoded(&envelope("ConfigMap", &raw)),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "immutable": true,
                   "metadata": {"name": "x", "labels": {"a": "1", "b": ""}, "finalizers": ["f"]},
                   "data": {"k": "v"}, "binaryData": {"bin": "/wA="}})
        );
    }

    /// Never a field dropped silently: an unknown one (here ownerReferences, 13) is a 415; a
    /// truncated or foreign body is a 400.
    #[test]
    fn unknown_fields_and_malformed_bodies_are_refused() {
        let raw = field(1, &[field(1, b"x"), field(13, b"")].concat());
        let err = to_json(&envelope("ConfigMap", &raw)).unwrap_err();
        assert_eq!(err.code, 415, "{err:?}");
        assert!(err.message.contains("field 13 of metadata"), "{err:?}");
        for bad in [
            &b"{}"[..],
            b"k8s\0\x0a\x05\x0a",
            b"k8s\0\x0d\0\0\0\0",
            b"k8s\0\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ] {
            let err = to_json(bad).unwrap_err();
            assert_eq!(err.code, 400, "{bad:?}: {err:?}");
        }
        let not_utf8 = envelope("ConfigMap", &field(1, &field(1, &[0xff])));
        assert_eq!(to_json(&not_utf8).unwrap_err().code, 400);
    }
}
