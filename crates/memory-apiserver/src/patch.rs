//! Non-apply PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902, `test` included)
//! and an approximation of strategic merge patch.
//!
//! Strategic merge is approximated: maps merge recursively like a merge patch; lists of objects
//! merge by the built-in merge keys of [`ssa::builtin_list_keys`](super::ssa::builtin_list_keys)
//! (`name`, `mountPath`, `containerPort`+`protocol`, …), with `$patch: delete` items removing
//! entries and `$patch: replace` replacing the list; every other list is replaced wholesale
//! (real kube also merges some scalar lists such as `finalizers`). `$retainKeys`,
//! `$setElementOrder/…` and `$deleteFromPrimitiveList/…` directives are ignored.

use serde_json::{Map, Value};

use super::errors::ApiError;

/// The patch flavours, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchKind {
    /// From a `Content-Type` header value.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml"
            | "application/apply-patch+json"
            | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// Apply a non-SSA patch to `doc`.
pub fn apply_patch(kind: PatchKind, doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let parsed: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    match kind {
        PatchKind::Merge => {
            if !parsed.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(doc, &parsed);
            Ok(())
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_value(parsed)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            // kube-apiserver's JSON patch (evanphx/json-patch) lets a `test` of an absent
            // path against `null` pass (kube-runtime's finalizer helper relies on it), where
            // RFC 6902 fails it: ops run one by one on a copy, such tests are passed.
            let mut work = doc.clone();
            for op in p.0 {
                if let json_patch::PatchOperation::Test(t) = &op
                    && t.value.is_null()
                    && work.pointer(t.path.as_str()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut work, &[op]).map_err(patch_error)?;
            }
            *doc = work;
            Ok(())
        }
        PatchKind::Strategic => {
            if !parsed.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            }
            strategic_merge(doc, &parsed);
            Ok(())
        }
        PatchKind::Apply => Err(ApiError::internal("apply patches are handled by ssa")),
    }
}

/// A failed JSON patch op, as kube-apiserver reports it: 422 Invalid.
fn patch_error(e: json_patch::PatchError) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("the server rejected our request due to an error in our request: {e}"),
    )
}

/// Approximate strategic merge of `patch` into `doc` (see module docs).
pub fn strategic_merge(doc: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *doc = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = p.clone();
        p.remove("$patch");
        *doc = Value::Object(p);
        return;
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let d = doc.as_object_mut().expect("object");
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                d.remove(k);
            }
            Value::Object(_) => strategic_merge(d.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let plain: Vec<Value> = items
                    .iter()
                    .filter(|i| i.get("$patch").is_none())
                    .cloned()
                    .collect();
                let keys = super::ssa::builtin_list_keys(k, &plain).or_else(|| {
                    (plain.is_empty() && !items.is_empty()).then(|| vec!["name".to_string()])
                });
                let existing = d.get_mut(k).and_then(Value::as_array_mut);
                match (existing, keys) {
                    (Some(cur), Some(keys)) => {
                        if items
                            .iter()
                            .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
                        {
                            *cur = plain;
                            continue;
                        }
                        let same =
                            |a: &Value, b: &Value| keys.iter().all(|key| a.get(key) == b.get(key));
                        for item in items {
                            let pos = cur.iter().position(|c| same(c, item));
                            let delete =
                                item.get("$patch").and_then(Value::as_str) == Some("delete");
                            match (pos, delete) {
                                (Some(i), true) => {
                                    cur.remove(i);
                                }
                                (None, true) => {}
                                (Some(i), false) => strategic_merge(&mut cur[i], item),
                                (None, false) => {
                                    let mut fresh = Value::Null;
                                    strategic_merge(&mut fresh, item);
                                    cur.push(fresh);
                                }
                            }
                        }
                    }
                    _ => {
                        d.insert(k.clone(), Value::Array(plain));
                    }
                }
            }
            _ => {
                d.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_with_test() {
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let ok = br#"[{"op":"test","path":"/metadata/finalizers/0","value":"a"},{"op":"remove","path":"/metadata/finalizers/0"}]"#;
        apply_patch(PatchKind::Json, &mut doc, ok).unwrap();
        assert_eq!(doc, json!({"metadata": {"finalizers": ["b"]}}));
        let bad = br#"[{"op":"test","path":"/metadata/finalizers/0","value":"zzz"}]"#;
        let before = doc.clone();
        assert_eq!(
            apply_patch(PatchKind::Json, &mut doc, bad)
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(doc, before, "a failed patch changes nothing");
        // A later op failing undoes the earlier ones.
        let half = br#"[{"op":"remove","path":"/metadata/finalizers/0"},{"op":"test","path":"/metadata/x","value":"y"}]"#;
        assert!(apply_patch(PatchKind::Json, &mut doc, half).is_err());
        assert_eq!(doc, before);
    }

    #[test]
    fn json_patch_test_of_an_absent_path_against_null_passes() {
        // As kube-apiserver does (kube-runtime's finalizer helper adds the first finalizer so).
        let mut doc = json!({"metadata": {"name": "x"}});
        let add = br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
        apply_patch(PatchKind::Json, &mut doc, add).unwrap();
        assert_eq!(doc, json!({"metadata": {"name": "x", "finalizers": ["f"]}}));
        // A present value is not null: the test fails.
        assert!(apply_patch(PatchKind::Json, &mut doc, add).is_err());
    }

    #[test]
    fn merge_patch_null_removes() {
        let mut doc = json!({"data": {"a": "1", "b": "2"}});
        apply_patch(
            PatchKind::Merge,
            &mut doc,
            br#"{"data":{"a":null,"c":"3"}}"#,
        )
        .unwrap();
        assert_eq!(doc, json!({"data": {"b": "2", "c": "3"}}));
    }

    #[test]
    fn strategic_merges_named_lists() {
        let mut doc = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "args": ["1"]}});
        let p = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "a", "$patch": "delete"}, {"name": "c", "image": "w"}], "args": ["2"]}});
        strategic_merge(&mut doc, &p);
        assert_eq!(
            doc,
            json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}], "args": ["2"]}})
        );
    }
}
