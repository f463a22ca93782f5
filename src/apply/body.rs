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
//! after the ValidatingAdmissionPolicy status controller). Anything else — an old object
//! without the digest, a value the server normalizes (`0.5` → `500m`) — is applied as usual.

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::MANAGED_LABEL;

/// Annotation carrying the digest of the last body `cvo` applied to the object.
pub const DIGEST_ANNOTATION: &str = "cvo.io/applied-digest";

/// Puts [`MANAGED_LABEL`] and [`DIGEST_ANNOTATION`] on an apply body. The label also makes
/// every apply own at least one field: a body with nothing but a name (a bare Namespace)
/// leaves no managed fields behind, and the server then re-owns the object's defaulted fields
/// to `before-first-apply` on the next apply — one write more (DESIGN.md §3.16).
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

/// True when `live` already is what applying `body` (from [`mark`]) would make it.
pub fn up_to_date(live: &DynamicObject, body: &Value) -> bool {
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
        return false;
    }
    let live = serde_json::to_value(live).unwrap_or(Value::Null);
    let Value::Object(fields) = body else {
        return false;
    };
    // A real server's LIST items carry no apiVersion/kind: the type is not compared.
    fields
        .iter()
        .filter(|(key, _)| *key != "apiVersion" && *key != "kind")
        .all(|(key, value)| present(value, live.get(key)))
}

/// Every leaf of `sent` has the same value in `live`. Lists must have the same length and
/// their items are compared the same way, so fields the server defaults inside them (a
/// container's `terminationMessagePath`, a rule's `scope`) are no difference.
fn present(sent: &Value, live: Option<&Value>) -> bool {
    match (sent, live) {
        (Value::Object(sent), Some(Value::Object(live))) => sent
            .iter()
            .all(|(key, value)| present(value, live.get(key))),
        (Value::Array(sent), Some(Value::Array(live))) => {
            sent.len() == live.len() && sent.iter().zip(live).all(|(s, l)| present(s, Some(l)))
        }
        (Value::Number(sent), Some(Value::Number(live))) => same_number(sent, live),
        (sent, live) => live == Some(sent),
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
    fn numbers_compare_by_value_not_by_spelling() {
        // A CRD's schema after the typed round trip sends `minimum: 0.0`; the server says `0`.
        let mut body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "w.example.com"}, "spec": {"minimum": 0.0, "max": 2.5, "big": u64::MAX}});
        mark(&mut body);
        let mut served = body.clone();
        served["spec"]["minimum"] = json!(0);
        assert!(up_to_date(&live(&served), &body));
        served["spec"]["max"] = json!(2);
        assert!(!up_to_date(&live(&served), &body), "2 is not 2.5");
        served["spec"]["max"] = json!(2.5);
        served["spec"]["big"] = json!(u64::MAX - 1);
        assert!(!up_to_date(&live(&served), &body), "large integers exactly");
    }

    #[test]
    fn up_to_date_only_with_the_same_digest_and_no_drift() {
        let body = marked("b");
        assert!(up_to_date(&live(&body), &body));
        // The manifest changed (a field may have left it): apply.
        assert!(!up_to_date(&live(&body), &marked("c")));
        // Someone changed a value cvo sends: apply.
        let mut drifted = live(&body);
        drifted.data["data"]["a"] = json!("z");
        assert!(!up_to_date(&drifted, &body));
        // An object applied before digests existed: apply.
        let mut old = live(&body);
        old.metadata.annotations = None;
        assert!(!up_to_date(&old, &body));
    }

    #[test]
    fn defaults_inside_lists_are_no_difference_but_other_items_are() {
        let mut body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        mark(&mut body);
        let mut obj = live(&body);
        obj.data["spec"]["containers"][0]["terminationMessagePath"] = json!("/dev/termination-log");
        assert!(up_to_date(&obj, &body));
        obj.data["spec"]["containers"][0]["image"] = json!("other");
        assert!(!up_to_date(&obj, &body));
        let mut longer = live(&body);
        longer.data["spec"]["containers"] = json!([{"name": "c", "image": "i"}, {"name": "d"}]);
        assert!(!up_to_date(&longer, &body));
    }
}
