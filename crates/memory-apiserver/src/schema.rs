//! Structural schemas of custom resources (`openAPIV3Schema`): pruning of unknown fields,
//! validation of the common constraints (type, enum, minimum/maximum, lengths, pattern, item
//! counts, required, nullable, int-or-string) with kube's 422 messages, and schema lookup by
//! field path (used by server-side apply for `x-kubernetes-list-type`).
//!
//! Not covered: CEL rules (`x-kubernetes-validations`), `format`, defaulting, `oneOf`/`anyOf`/
//! `allOf`/`not`, `uniqueItems`, metadata validation beyond names.

use serde_json::{Map, Value, json};

use super::errors::Cause;
use super::ssa::Pe;

/// The schema node for a field path (`Key`/`Value` steps go into `items`).
pub fn node_at<'a>(schema: &'a Value, path: &[Pe]) -> Option<&'a Value> {
    let mut cur = schema;
    for pe in path {
        cur = match pe {
            Pe::Field(f) => cur
                .get("properties")
                .and_then(|p| p.get(f))
                .or_else(|| cur.get("additionalProperties").filter(|a| a.is_object()))?,
            Pe::Key(_) | Pe::Value(_) => cur.get("items")?,
        };
    }
    Some(cur)
}

fn preserves(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

/// Drop fields the schema does not know (the root keeps apiVersion, kind and metadata);
/// returns the dotted paths of what was dropped.
pub fn prune(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut dropped = Vec::new();
    prune_node(obj, schema, true, "", &mut dropped);
    dropped
}

fn prune_node(v: &mut Value, s: &Value, root: bool, path: &str, dropped: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            let embedded = root
                || s.get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    == Some(true);
            let keep_unknown = preserves(s)
                || additional.is_some()
                || (props.is_none() && s.get("type").is_none());
            m.retain(|k, _| {
                let keep = (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                    || props.is_some_and(|p| p.contains_key(k))
                    || keep_unknown;
                if !keep {
                    dropped.push(if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    });
                }
                keep
            });
            for (k, c) in m.iter_mut() {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    let child = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    prune_node(c, cs, false, &child, dropped);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (n, i) in items.iter_mut().enumerate() {
                    prune_node(i, is, false, &format!("{path}[{n}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Validate against the schema; every violation becomes a 422 cause.
pub fn validate(obj: &Value, schema: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if let (Some(m), Some(props)) = (
        obj.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for (k, v) in m {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(s) = props.get(k) {
                check(v, s, k, &mut out);
            }
        }
        required(m, schema, "", &mut out);
    }
    out
}

fn required(m: &Map<String, Value>, s: &Value, path: &str, out: &mut Vec<Cause>) {
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !m.contains_key(r) {
            let field = if path.is_empty() {
                r.to_string()
            } else {
                format!("{path}.{r}")
            };
            out.push(Cause::required(&field, ""));
        }
    }
}

fn check(v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    if !check_type(v, s, path, out) {
        return;
    }
    check_enum(v, s, path, out);
    if let Some(n) = v.as_f64() {
        check_bounds(n, v, s, path, out);
    }
    if let Some(st) = v.as_str() {
        check_string(st, v, s, path, out);
    }
    if let Some(items) = v.as_array() {
        check_items(items, v, s, path, out);
    }
    if let Some(m) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        let additional = s.get("additionalProperties").filter(|a| a.is_object());
        for (k, c) in m {
            if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                check(c, cs, &format!("{path}.{k}"), out);
            }
        }
        required(m, s, path, out);
    }
}

/// `null` only where `nullable`, and the schema's `type` (a number may be an integer;
/// `x-kubernetes-int-or-string`). False when the value is not checked any further.
fn check_type(v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) -> bool {
    if v.is_null() {
        if s.get("nullable").and_then(Value::as_bool) != Some(true) && s.get("type").is_some() {
            out.push(Cause::invalid(
                path,
                v,
                &format!(
                    "{path} in body must be of type {}: \"null\"",
                    s["type"].as_str().unwrap_or("object")
                ),
            ));
        }
        return false;
    }
    let int_or_string = s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let actual = type_name(v);
        let ok = actual == t
            || (t == "number" && actual == "integer")
            || (int_or_string && matches!(actual, "integer" | "string"));
        if !ok {
            out.push(Cause::invalid(
                path,
                &json!(actual),
                &format!("{path} in body must be of type {t}: \"{actual}\""),
            ));
            return false;
        }
    } else if int_or_string && !matches!(type_name(v), "integer" | "string") {
        out.push(Cause::invalid(
            path,
            v,
            &format!("{path} in body must be of type integer or string"),
        ));
        return false;
    }
    true
}

/// `enum`.
fn check_enum(v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        let supported = e
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        out.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.into(),
            message: format!("Unsupported value: {v}: supported values: {supported}"),
        });
    }
}

/// `minimum` / `maximum`, exclusive or not.
fn check_bounds(n: f64, v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    let excl_min = s.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
    let excl_max = s.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
    if let Some(min) = s.get("minimum").and_then(Value::as_f64)
        && (n < min || (excl_min && n == min))
    {
        let op = if excl_min {
            "greater than"
        } else {
            "greater than or equal to"
        };
        out.push(Cause::invalid(
            path,
            v,
            &format!("{path} in body should be {op} {}", s["minimum"]),
        ));
    }
    if let Some(max) = s.get("maximum").and_then(Value::as_f64)
        && (n > max || (excl_max && n == max))
    {
        let op = if excl_max {
            "less than"
        } else {
            "less than or equal to"
        };
        out.push(Cause::invalid(
            path,
            v,
            &format!("{path} in body should be {op} {}", s["maximum"]),
        ));
    }
}

/// `minLength` / `maxLength` (in characters) and `pattern`.
fn check_string(st: &str, v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    let len = st.chars().count() as u64;
    if let Some(min) = s
        .get("minLength")
        .and_then(Value::as_u64)
        .filter(|m| len < *m)
    {
        out.push(Cause::invalid(
            path,
            v,
            &format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(max) = s
        .get("maxLength")
        .and_then(Value::as_u64)
        .filter(|m| len > *m)
    {
        out.push(Cause {
            reason: "FieldValueTooLong",
            field: path.into(),
            message: format!("Too long: may not be more than {max} bytes"),
        });
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && regex::Regex::new(p).is_ok_and(|re| !re.is_match(st))
    {
        out.push(Cause::invalid(
            path,
            v,
            &format!("{path} in body should match '{p}'"),
        ));
    }
}

/// `minItems` / `maxItems`, and each item against `items`.
fn check_items(items: &[Value], v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    let n = items.len() as u64;
    if let Some(min) = s.get("minItems").and_then(Value::as_u64).filter(|m| n < *m) {
        out.push(Cause::invalid(
            path,
            v,
            &format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64).filter(|m| n > *m) {
        out.push(Cause {
            reason: "FieldValueTooMany",
            field: path.into(),
            message: format!("Too many: {n}: must have at most {max} items"),
        });
    }
    if let Some(is) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item, is, &format!("{path}[{i}]"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["mode"], "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "mode": {"type": "string", "enum": ["open", "closed"]},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true}}}}})
    }

    #[test]
    fn prunes_unknown_fields() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"mode": "open", "colour": "red", "free": {"any": 1}}, "other": 1});
        assert_eq!(prune(&mut o, &schema()), vec!["other", "spec.colour"]);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"mode": "open", "free": {"any": 1}}})
        );
    }

    #[test]
    fn validates() {
        let bad = |spec: Value| validate(&json!({"spec": spec}), &schema());
        assert!(bad(json!({"mode": "open", "replicas": 1, "port": "http"})).is_empty());
        assert_eq!(
            bad(json!({"mode": "open", "replicas": "two"}))[0].field,
            "spec.replicas"
        );
        assert_eq!(
            bad(json!({"mode": "ajar"}))[0].reason,
            "FieldValueNotSupported"
        );
        assert!(
            bad(json!({"mode": "open", "replicas": -1}))[0]
                .message
                .contains("greater than or equal to 0")
        );
        assert_eq!(bad(json!({}))[0].reason, "FieldValueRequired");
        assert!(!bad(json!({"mode": "open", "port": true})).is_empty());
    }
}
