//! Secret values never leave the engine. A plan's field changes of a `v1` Secret show its
//! `data` / `stringData` values masked as `kubectl diff` does — `***` when unchanged,
//! `*** (before)` / `*** (after)` when changed — and the digest annotation of an apply body
//! (see [`super::body`]) is computed with those values replaced, so no hash of a secret value
//! is stored on the object either. (A Secret that does not decode is reported without its
//! values by `release::typed`.)

use serde_json::Value;

const MAPS: [&str; 2] = ["data", "stringData"];

const MASK: &str = "***";

/// True for core `v1` Secrets (the object's `apiVersion` and `kind`, or a DynamicObject's
/// serialization without them is not a Secret: callers pass the manifest's).
pub fn is_secret(api_version: &str, kind: &str) -> bool {
    api_version == "v1" && kind == "Secret"
}

/// Masks the values of `data` and `stringData` in both objects of a comparison.
pub fn mask_pair(before: &mut Value, after: &mut Value) {
    for map in MAPS {
        let old = before.get(map).and_then(Value::as_object).cloned();
        let new = after.get(map).and_then(Value::as_object).cloned();
        let changed = |key: &str| {
            old.as_ref().and_then(|m| m.get(key)) != new.as_ref().and_then(|m| m.get(key))
        };
        for (side, value) in [("before", &mut *before), ("after", &mut *after)] {
            if let Some(entries) = value.get_mut(map).and_then(Value::as_object_mut) {
                for (key, v) in entries.iter_mut() {
                    *v = Value::String(if changed(key) {
                        format!("{MASK} ({side})")
                    } else {
                        MASK.to_owned()
                    });
                }
            }
        }
    }
}

/// `body` with every value of `data` and `stringData` replaced (the keys stay).
pub fn redacted(body: &Value) -> Value {
    let mut body = body.clone();
    for map in MAPS {
        if let Some(entries) = body.get_mut(map).and_then(Value::as_object_mut) {
            entries
                .values_mut()
                .for_each(|v| *v = Value::String(MASK.to_owned()));
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_like_kubectl_diff() {
        let mut before =
            json!({"data": {"same": "c2FtZQ==", "pw": "b2xk"}, "stringData": {"x": "y"}});
        let mut after = json!({"data": {"same": "c2FtZQ==", "pw": "bmV3"}});
        mask_pair(&mut before, &mut after);
        assert_eq!(
            before,
            json!({"data": {"same": "***", "pw": "*** (before)"}, "stringData": {"x": "*** (before)"}})
        );
        assert_eq!(after, json!({"data": {"same": "***", "pw": "*** (after)"}}));
        let r = redacted(&json!({"kind": "Secret", "data": {"pw": "c2VjcmV0"}}));
        assert_eq!(r["data"]["pw"], "***");
    }
}
