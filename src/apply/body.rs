//! The body `cvo` server-side applies for a manifest, and whether the live object already
//! matches it (then no request is sent at all).
//!
//! Two marks go on every body: the label [`MANAGED_LABEL`] and the annotation
//! [`DIGEST_ANNOTATION`], a SHA-256 of the body without it. A live object is up to date when
//! it carries the digest of the body about to be sent — the last apply sent exactly this body,
//! so no field `cvo` owned has left the manifest since — and every value the body sends is
//! still there unchanged (nobody drifted it; fields the server or others added are not
//! compared). Skipping the PATCH then changes nothing: the
//! server would keep every value. It also avoids the one write a real server makes when an
//! apply follows another manager's first status apply (it re-sorts `managedFields`, e.g.
//! after the ValidatingAdmissionPolicy status controller). What the server does not keep is
//! no difference ([`Stored`]): numbers compare by value (`0.0` sent, `0` read), a built-in
//! kind's zero values read back absent (`omitempty`), and the `status` of a kind with a status
//! subresource is ignored by the write. Anything else — an old object without the digest, a
//! value the server normalizes (`0.5` → `500m`) — is applied as usual.

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::MANAGED_LABEL;

/// Annotation carrying the digest of the last body `cvo` applied to the object.
pub const DIGEST_ANNOTATION: &str = "cvo.io/applied-digest";

/// Puts [`MANAGED_LABEL`] and [`DIGEST_ANNOTATION`] on an apply body. The label also makes
/// every apply own at least one field: a body with nothing but a name (a bare Namespace)
/// leaves no managed fields behind, and the server then re-owns the object's defaulted fields
/// to `before-first-apply` on the next apply — one write more (docs/kubernetes-semantics.md §16).
pub fn mark(body: &mut Value) {
    set(body, "labels", MANAGED_LABEL, "true".to_owned());
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(DIGEST_ANNOTATION);
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
    let secret = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .zip(body.get("kind").and_then(Value::as_str))
        .is_some_and(|(v, k)| super::secrets::is_secret(v, k));
    let digest = if secret {
        digest(&super::secrets::redacted(body))
    } else {
        digest(body)
    };
    set(body, "annotations", DIGEST_ANNOTATION, digest);
}

/// How the server keeps the object: what a comparison with the live object must allow for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stored {
    /// A built-in kind, kept as a Go struct: a zero value (`""`, `false`, `0`, `{}`) sent
    /// reads back absent (`omitempty`), e.g. a CRD's `preserveUnknownFields: false` or a
    /// ConfigMap's `data: {}`.
    pub typed: bool,
    /// The kind has a status subresource: the server ignores the `status` an apply sends
    /// (ClusterOperator manifests carry one), so it is not compared.
    pub status_subresource: bool,
}

/// True when `live` already is what applying `body` (from [`mark`]) would make it.
pub fn up_to_date(live: &DynamicObject, body: &Value, stored: Stored) -> bool {
    difference(live, body, stored).is_none()
}

/// Why `live` is not what applying `body` would make it: `digest` (the last apply sent another
/// body), or the path of the first value that differs (a path only: never a value, which may
/// be a Secret's). `None` when it is up to date.
pub fn difference(live: &DynamicObject, body: &Value, stored: Stored) -> Option<String> {
    let sent = body
        .pointer(&format!(
            "/metadata/annotations/{}",
            DIGEST_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str);
    if sent.is_none()
        || live
            .annotations()
            .get(DIGEST_ANNOTATION)
            .map(String::as_str)
            != sent
    {
        return Some("digest".to_owned());
    }
    let live = serde_json::to_value(live).unwrap_or(Value::Null);
    let Value::Object(fields) = body else {
        return Some(String::new());
    };
    let mut path = String::new();
    // A real server's LIST items carry no apiVersion/kind: the type is not compared.
    let same = fields
        .iter()
        .filter(|(key, _)| *key != "apiVersion" && *key != "kind")
        .filter(|(key, _)| !(stored.status_subresource && *key == "status"))
        .all(|(key, value)| {
            within(&mut path, key, |p| {
                present(value, live.get(key), stored.typed, p)
            })
        });
    (!same).then_some(path)
}

/// Runs `check` with `key` appended to `path`; the path stays extended when it fails, so that
/// it names the first difference.
fn within(path: &mut String, key: &str, check: impl FnOnce(&mut String) -> bool) -> bool {
    let len = path.len();
    path.push('/');
    path.push_str(key);
    let same = check(path);
    if same {
        path.truncate(len);
    }
    same
}

/// Every leaf of `sent` has the same value in `live`. Lists must have the same length and
/// their items are compared the same way, so fields the server defaults inside them (a
/// container's `terminationMessagePath`, a rule's `scope`) are no difference. With `typed`, a
/// zero value sent may read back absent. On a difference, `path` names it.
fn present(sent: &Value, live: Option<&Value>, typed: bool, path: &mut String) -> bool {
    match (sent, live) {
        (sent, None | Some(Value::Null)) if typed && zero(sent) => true,
        (Value::Object(sent), Some(Value::Object(live))) => sent
            .iter()
            .all(|(key, value)| within(path, key, |p| present(value, live.get(key), typed, p))),
        (Value::Array(sent), Some(Value::Array(live))) => {
            sent.len() == live.len()
                && sent.iter().zip(live).enumerate().all(|(i, (s, l))| {
                    within(path, &i.to_string(), |p| present(s, Some(l), typed, p))
                })
        }
        (Value::Number(sent), Some(Value::Number(live))) => same_number(sent, live),
        (sent, live) => live == Some(sent),
    }
}

/// What a Go struct field with `omitempty` does not keep.
fn zero(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Null => true,
        other => crate::release::typed::is_zero(other),
    }
}

/// The same number, however written: a typed round trip sends a float field's `0` as `0.0`,
/// and a real server answers `0` (Go renders an integral float64 without a fraction).
fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => a.as_f64().zip(b.as_f64()).is_some_and(|(x, y)| x == y),
    }
}

fn digest(body: &Value) -> String {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let hash = ring::digest::digest(&ring::digest::SHA256, &bytes);
    hash.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn set(body: &mut Value, map: &str, key: &str, value: String) {
    let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let entry = meta.entry(map).or_insert(Value::Null);
    if !entry.is_object() {
        *entry = Value::Object(Default::default());
    }
    if let Some(entries) = entry.as_object_mut() {
        entries.insert(key.to_owned(), Value::String(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn marked(data: &str) -> Value {
        let mut body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "labels": null}, "data": {"a": data}});
        mark(&mut body);
        body
    }

    fn live(body: &Value) -> DynamicObject {
        let mut obj: DynamicObject = serde_json::from_value(body.clone()).unwrap();
        obj.types = None; // as in a LIST
        obj.metadata.resource_version = Some("7".into());
        obj.metadata
            .labels
            .get_or_insert_default()
            .insert("other".into(), "x".into());
        obj
    }

    #[test]
    fn marks_are_stable_and_the_digest_follows_the_body() {
        let body = marked("b");
        assert_eq!(body["metadata"]["labels"][MANAGED_LABEL], "true");
        let mut again = body.clone();
        mark(&mut again);
        assert_eq!(again, body, "marking a marked body changes nothing");
        assert_ne!(
            marked("c")["metadata"]["annotations"][DIGEST_ANNOTATION],
            body["metadata"]["annotations"][DIGEST_ANNOTATION]
        );
    }

    #[test]
    fn what_the_server_does_not_keep_is_no_difference() {
        let mut body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "w.example.com"},
            "spec": {"preserveUnknownFields": false, "extra": {}, "names": {"kind": "W"}},
            "status": {"versions": [{"name": "x"}]}});
        mark(&mut body);
        let mut served = body.clone();
        served["spec"]
            .as_object_mut()
            .unwrap()
            .remove("preserveUnknownFields");
        served["spec"].as_object_mut().unwrap().remove("extra");
        served.as_object_mut().unwrap().remove("status");
        let typed = Stored {
            typed: true,
            status_subresource: true,
        };
        assert!(up_to_date(&live(&served), &body, typed));
        // Custom resources keep zero values: their absence is drift.
        let custom = Stored {
            typed: false,
            status_subresource: true,
        };
        assert!(!up_to_date(&live(&served), &body, custom));
        // Without a status subresource, status is the object's own.
        let mut with_status = body.clone();
        with_status["spec"] = served["spec"].clone();
        assert!(up_to_date(&live(&with_status), &body, typed));
        with_status.as_object_mut().unwrap().remove("status");
        let no_subresource = Stored {
            typed: true,
            status_subresource: false,
        };
        assert!(!up_to_date(&live(&with_status), &body, no_subresource));
        // A value that is not a zero value is still compared.
        let mut drifted = served.clone();
        drifted["spec"]["names"]["kind"] = json!("V");
        assert!(!up_to_date(&live(&drifted), &body, typed));
    }

    #[test]
    fn a_difference_is_named_by_its_path_never_its_value() {
        let body = marked("secret-value");
        let mut served = body.clone();
        served["data"]["a"] = json!("other");
        assert_eq!(
            difference(&live(&served), &body, Stored::default()).as_deref(),
            Some("/data/a")
        );
        assert_eq!(
            difference(&live(&body), &marked("c"), Stored::default()).as_deref(),
            Some("digest")
        );
        assert_eq!(difference(&live(&body), &body, Stored::default()), None);
    }

    #[test]
    fn numbers_compare_by_value_not_by_spelling() {
        // A CRD's schema after the typed round trip sends `minimum: 0.0`; the server says `0`.
        let mut body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "w.example.com"}, "spec": {"minimum": 0.0, "max": 2.5, "big": u64::MAX}});
        mark(&mut body);
        let mut served = body.clone();
        served["spec"]["minimum"] = json!(0);
        assert!(up_to_date(&live(&served), &body, Stored::default()));
        served["spec"]["max"] = json!(2);
        assert!(
            !up_to_date(&live(&served), &body, Stored::default()),
            "2 is not 2.5"
        );
        served["spec"]["max"] = json!(2.5);
        served["spec"]["big"] = json!(u64::MAX - 1);
        assert!(
            !up_to_date(&live(&served), &body, Stored::default()),
            "large integers exactly"
        );
        // 2^53 - 1 (a CRD's `maximum`), sent as a float, read back as an integer: the same
        // only when floats are parsed exactly (serde_json's `float_roundtrip`).
        let sent: Value = serde_json::from_str("9007199254740991.0").unwrap();
        assert!(same_number(
            sent.as_number().unwrap(),
            &serde_json::Number::from(9_007_199_254_740_991u64)
        ));
    }

    #[test]
    fn up_to_date_only_with_the_same_digest_and_no_drift() {
        let body = marked("b");
        assert!(up_to_date(&live(&body), &body, Stored::default()));
        // The manifest changed (a field may have left it): apply.
        assert!(!up_to_date(&live(&body), &marked("c"), Stored::default()));
        // Someone changed a value cvo sends: apply.
        let mut drifted = live(&body);
        drifted.data["data"]["a"] = json!("z");
        assert!(!up_to_date(&drifted, &body, Stored::default()));
        // An object applied before digests existed: apply.
        let mut old = live(&body);
        old.metadata.annotations = None;
        assert!(!up_to_date(&old, &body, Stored::default()));
    }

    #[test]
    fn defaults_inside_lists_are_no_difference_but_other_items_are() {
        let mut body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        mark(&mut body);
        let mut obj = live(&body);
        obj.data["spec"]["containers"][0]["terminationMessagePath"] = json!("/dev/termination-log");
        assert!(up_to_date(&obj, &body, Stored::default()));
        obj.data["spec"]["containers"][0]["image"] = json!("other");
        assert!(!up_to_date(&obj, &body, Stored::default()));
        let mut longer = live(&body);
        longer.data["spec"]["containers"] = json!([{"name": "c", "image": "i"}, {"name": "d"}]);
        assert!(!up_to_date(&longer, &body, Stored::default()));
    }
}
