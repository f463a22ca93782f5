//! A CRD's `openAPIV3Schema` as the API server stores and serves it, so that a release's CRD
//! compares with the one a cluster serves (`cvo validate --live`) by meaning, not by form.
//!
//! The server decodes a schema into its typed `JSONSchemaProps` and encodes it back: a key it
//! does not know (`optional: [port]`, a typo) is dropped, and so is a field holding its zero
//! value where the type omits it when empty (`format: ""`, `nullable: false`, `required: []`,
//! `properties: {}`). Values the schema holds as data (`default`, `enum` members, `example`)
//! are kept as written, as are the fields the server keeps when set to a zero value (the
//! pointers: `x-kubernetes-preserve-unknown-fields: false`, `minLength: 0`, …).

use serde_json::{Map, Value};

/// Keys whose value is a schema.
const SCHEMA: &[&str] = &["not"];
/// Keys whose value is a schema or a boolean.
const SCHEMA_OR_BOOL: &[&str] = &["additionalProperties", "additionalItems"];
/// Keys whose value is a schema or a list of schemas.
const SCHEMA_OR_LIST: &[&str] = &["items"];
/// Keys whose value is a list of schemas.
const SCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf"];
/// Keys whose value maps names to schemas.
const SCHEMA_MAP: &[&str] = &["properties", "patternProperties", "definitions"];
/// Keys kept as written whatever their value (pointers in the server's type, or data).
const KEPT: &[&str] = &[
    "default",
    "example",
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
    "multipleOf",
    "externalDocs",
    "$ref",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
];
/// Keys omitted by the server when they hold their zero value (`""`, `false`, `[]`, `{}`).
const OMITTED_WHEN_EMPTY: &[&str] = &[
    "id",
    "$schema",
    "description",
    "type",
    "format",
    "title",
    "pattern",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "enum",
    "required",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
    "dependencies",
];

/// `schema` as the API server serves it back.
pub fn schema(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let key = key.as_str();
        let kept = if SCHEMA.contains(&key) {
            Some(self::schema(value))
        } else if SCHEMA_OR_BOOL.contains(&key) {
            Some(match value {
                Value::Bool(_) => value.clone(),
                other => self::schema(other),
            })
        } else if SCHEMA_OR_LIST.contains(&key) {
            Some(match value {
                Value::Array(items) => Value::Array(items.iter().map(self::schema).collect()),
                other => self::schema(other),
            })
        } else if SCHEMA_LIST.contains(&key) {
            non_empty(match value {
                Value::Array(items) => Value::Array(items.iter().map(self::schema).collect()),
                other => other.clone(),
            })
        } else if SCHEMA_MAP.contains(&key) {
            non_empty(match value {
                Value::Object(m) => Value::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), self::schema(v)))
                        .collect(),
                ),
                other => other.clone(),
            })
        } else if key == "x-kubernetes-validations" {
            non_empty(match value {
                Value::Array(rules) => Value::Array(rules.iter().map(without_empty).collect()),
                other => other.clone(),
            })
        } else if KEPT.contains(&key) {
            Some(value.clone())
        } else if OMITTED_WHEN_EMPTY.contains(&key) {
            non_empty(value.clone())
        } else {
            // Not a field of the server's schema type: dropped when decoded.
            None
        };
        if let Some(v) = kept {
            out.insert(key.to_owned(), v);
        }
    }
    Value::Object(out)
}

/// `value`, unless it is a zero value the server omits.
fn non_empty(value: Value) -> Option<Value> {
    let empty = match &value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(_) => false,
    };
    (!empty).then_some(value)
}

/// A validation rule without the strings it leaves empty (the server omits them).
fn without_empty(rule: &Value) -> Value {
    match rule.as_object() {
        Some(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !matches!(v, Value::String(s) if s.is_empty()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => rule.clone(),
    }
}

/// The CRD `object` with each schema (`spec.versions[*].schema.openAPIV3Schema`, and the
/// shared `spec.validation.openAPIV3Schema` of older manifests) as the server serves it.
pub fn crd(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(versions) = object
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for v in versions {
            if let Some(s) = v.pointer_mut("/schema/openAPIV3Schema") {
                *s = schema(s);
            }
        }
    }
    if let Some(s) = object.pointer_mut("/spec/validation/openAPIV3Schema") {
        *s = schema(s);
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_and_omitted_zero_values_go_data_stays() {
        let written = json!({
            "type": "object",
            "description": "",
            "properties": {
                "data": {"type": "string", "format": ""},
                "mode": {"type": "string", "enum": ["", "A"], "default": "", "nullable": false},
                "list": {"type": "array", "items": {"type": "string", "uniqueItems": false}, "x-kubernetes-list-type": "set"},
                "keep": {"type": "boolean", "x-kubernetes-preserve-unknown-fields": false, "minLength": 0},
                "rules": {"type": "object", "x-kubernetes-validations": [{"rule": "self.a", "message": ""}]},
                "empty": {"type": "object", "properties": {}, "required": []},
            },
            "anyOf": [{"required": ["address"], "optional": ["port"]}],
            "additionalProperties": false,
        });
        let served = json!({
            "type": "object",
            "properties": {
                "data": {"type": "string"},
                "mode": {"type": "string", "enum": ["", "A"], "default": ""},
                "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "keep": {"type": "boolean", "x-kubernetes-preserve-unknown-fields": false, "minLength": 0},
                "rules": {"type": "object", "x-kubernetes-validations": [{"rule": "self.a"}]},
                "empty": {"type": "object"},
            },
            "anyOf": [{"required": ["address"]}],
            "additionalProperties": false,
        });
        assert_eq!(schema(&written), served);
        // Idempotent: what the server serves, served again, is the same.
        assert_eq!(schema(&served), served);
    }

    #[test]
    fn every_schema_of_a_crd_is_served_form() {
        let crd = json!({"spec": {
            "validation": {"openAPIV3Schema": {"type": "object", "format": ""}},
            "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "x": 1}}}],
        }});
        let served = super::crd(&crd);
        assert_eq!(
            served["spec"]["validation"]["openAPIV3Schema"],
            json!({"type": "object"})
        );
        assert_eq!(
            served["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            json!({"type": "object"})
        );
        assert_eq!(served["spec"]["versions"][0]["name"], "v1");
    }
}
