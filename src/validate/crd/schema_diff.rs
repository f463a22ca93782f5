//! Walking two `openAPIV3Schema`s of one CRD version side by side and naming every change
//! that can break stored objects or clients, with crdify's rule names (kebab-case, `crd-`
//! prefixed) and a JSON path such as
//! `.spec.versions[v1].schema.openAPIV3Schema.properties.spec.properties.mode.enum`.
//!
//! The walk follows `properties`, `items` (one schema) and `additionalProperties` (a schema);
//! every other keyword is judged where it stands. A keyword no rule judges whose value changed
//! is `crd-unhandled` (its safety is unknown, so it is not let through).

use serde_json::{Map, Value};

use crate::diagnostic::excerpt;
use crate::validate::rules::{
    CRD_ALL_OF, CRD_ANY_OF, CRD_DEFAULT, CRD_DESCRIPTION, CRD_ENUM, CRD_EXISTING_FIELD_REMOVAL,
    CRD_MAX_ITEMS, CRD_MAX_LENGTH, CRD_MAX_PROPERTIES, CRD_MAXIMUM, CRD_MIN_ITEMS, CRD_MIN_LENGTH,
    CRD_MIN_PROPERTIES, CRD_MINIMUM, CRD_NULLABLE, CRD_ONE_OF, CRD_PATTERN, CRD_REQUIRED, CRD_TYPE,
    CRD_UNHANDLED,
};

/// One change of a schema: the rule it breaks, where, what it was and what it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub rule: &'static str,
    /// JSON path of the keyword (or of the removed field).
    pub path: String,
    /// What the change does, in words (`value "b" removed`).
    pub what: String,
    /// The old value, compact JSON, shortened (absent: the keyword was not there).
    pub before: Option<String>,
    /// The new value, likewise.
    pub after: Option<String>,
}

/// Keywords a rule of this module judges (or that the walk descends into).
const HANDLED: &[&str] = &[
    "type",
    "enum",
    "default",
    "required",
    "maximum",
    "minimum",
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "maxProperties",
    "minProperties",
    "pattern",
    "nullable",
    "oneOf",
    "anyOf",
    "allOf",
    "description",
    "properties",
    "items",
    "additionalProperties",
];

/// Bounds: keyword, rule, and whether the bound is an upper one (lowering it tightens).
const BOUNDS: &[(&str, &str, bool)] = &[
    ("maximum", CRD_MAXIMUM, true),
    ("minimum", CRD_MINIMUM, false),
    ("maxItems", CRD_MAX_ITEMS, true),
    ("minItems", CRD_MIN_ITEMS, false),
    ("maxLength", CRD_MAX_LENGTH, true),
    ("minLength", CRD_MIN_LENGTH, false),
    ("maxProperties", CRD_MAX_PROPERTIES, true),
    ("minProperties", CRD_MIN_PROPERTIES, false),
];

/// Every breaking change from `old` to `new`, both schemas at `path`, in walk order.
pub fn diff(old: &Value, new: &Value, path: &str) -> Vec<Change> {
    let mut out = Vec::new();
    walk(old, new, path, &mut out);
    out
}

/// Appends the breaking changes from `old` to `new` (both at `path`) to `out`: the
/// keywords of this schema first, then its fields, subschemas and the keywords no rule judges.
fn walk(old: &Value, new: &Value, path: &str, out: &mut Vec<Change>) {
    if old == new {
        return;
    }
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        // A schema that is not an object (or became one): nothing the rules can judge.
        out.push(change(
            CRD_UNHANDLED,
            path,
            "the schema changed",
            Some(old),
            Some(new),
        ));
        return;
    };
    let pair = Pair { old, new, path };
    pair.judge_keywords(out);
    pair.walk_fields(out);
    pair.walk_subschemas(out);
    pair.judge_unhandled(out);
}

/// One schema object before and after, at `path`: the rules that judge its keywords, and
/// the descent into its fields and subschemas.
struct Pair<'a> {
    old: &'a Map<String, Value>,
    new: &'a Map<String, Value>,
    path: &'a str,
}

impl Pair<'_> {
    /// The path of keyword `key` of this schema.
    fn at(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// Keyword `key` before and after.
    fn get(&self, key: &str) -> (Option<&Value>, Option<&Value>) {
        (self.old.get(key), self.new.get(key))
    }

    /// A change of keyword `key` under `rule`, with its values before and after.
    fn change(&self, rule: &'static str, key: &str, what: &str) -> Change {
        let (before, after) = self.get(key);
        change(rule, &self.at(key), what, before, after)
    }

    /// Every keyword a rule judges, in a fixed order.
    fn judge_keywords(&self, out: &mut Vec<Change>) {
        if self.old.get("type") != self.new.get("type") {
            out.push(self.change(CRD_TYPE, "type", "the type changed"));
        }
        let (old_enum, new_enum) = self.get("enum");
        enums(old_enum, new_enum, &self.at("enum"), out);
        self.judge_default(out);
        self.judge_required(out);
        self.judge_bounds(out);
        self.judge_pattern(out);
        let nullable = |m: &Map<String, Value>| m.get("nullable") == Some(&Value::Bool(true));
        if nullable(self.old) && !nullable(self.new) {
            out.push(self.change(CRD_NULLABLE, "nullable", "nullable: true was removed"));
        }
        for (key, rule) in [
            ("oneOf", CRD_ONE_OF),
            ("anyOf", CRD_ANY_OF),
            ("allOf", CRD_ALL_OF),
        ] {
            if self.old.get(key) != self.new.get(key) {
                out.push(self.change(rule, key, &format!("{key} changed")));
            }
        }
        if self.old.get("description") != self.new.get("description") {
            out.push(self.change(CRD_DESCRIPTION, "description", "the description changed"));
        }
    }

    /// A default added, removed or changed.
    fn judge_default(&self, out: &mut Vec<Change>) {
        let what = match self.get("default") {
            (before, after) if before == after => return,
            (None, _) => "a default was added to an existing field",
            (_, None) => "the default was removed",
            _ => "the default changed",
        };
        out.push(self.change(CRD_DEFAULT, "default", what));
    }

    /// One change per field that is newly required.
    fn judge_required(&self, out: &mut Vec<Change>) {
        let required = |m: &Map<String, Value>| -> Vec<String> {
            m.get("required")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let was_required = required(self.old);
        for field in required(self.new)
            .iter()
            .filter(|f| !was_required.contains(f))
        {
            out.push(self.change(
                CRD_REQUIRED,
                "required",
                &format!("field {field:?} is newly required"),
            ));
        }
    }

    /// A bound added, or tightened (an upper one lowered, a lower one raised).
    fn judge_bounds(&self, out: &mut Vec<Change>) {
        for &(key, rule, upper) in BOUNDS {
            let (before, after) = self.get(key);
            let what = match (
                before.and_then(Value::as_f64),
                after.and_then(Value::as_f64),
            ) {
                (None, Some(_)) => format!("{key} was added"),
                (Some(b), Some(a)) if (upper && a < b) || (!upper && a > b) => {
                    format!("{key} was {}", if upper { "lowered" } else { "raised" })
                }
                _ => continue,
            };
            out.push(self.change(rule, key, &what));
        }
    }

    /// A pattern added or changed (removing one only loosens).
    fn judge_pattern(&self, out: &mut Vec<Change>) {
        let (before, after) = self.get("pattern");
        if after.is_none() || before == after {
            return;
        }
        let what = if before.is_some() {
            "the pattern changed"
        } else {
            "a pattern was added"
        };
        out.push(self.change(CRD_PATTERN, "pattern", what));
    }

    /// Each field of the old schema: walked against its new schema, or reported removed.
    fn walk_fields(&self, out: &mut Vec<Change>) {
        let empty = Map::new();
        let old_props = self
            .old
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_props = self
            .new
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (name, old_schema) in old_props {
            let field_path = self.field_path(name);
            match new_props.get(name) {
                Some(new_schema) => walk(old_schema, new_schema, &field_path, out),
                None => out.push(change(
                    CRD_EXISTING_FIELD_REMOVAL,
                    &field_path,
                    &format!("field {name:?} was removed"),
                    Some(&Value::String(type_of(old_schema))),
                    None,
                )),
            }
        }
    }

    /// The path of field `name`. A name that is not a plain word (`a.b`, `x y`) is quoted, so
    /// the path stays unambiguous: `.properties["a.b"]`.
    fn field_path(&self, name: &str) -> String {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if plain {
            format!("{}.properties.{name}", self.path)
        } else {
            format!("{}.properties[{}]", self.path, Value::String(excerpt(name)))
        }
    }

    /// `items` and `additionalProperties`: walked when both are schemas, otherwise any
    /// change is unhandled.
    fn walk_subschemas(&self, out: &mut Vec<Change>) {
        for key in ["items", "additionalProperties"] {
            match self.get(key) {
                (Some(a), Some(b)) if a.is_object() && b.is_object() => {
                    walk(a, b, &self.at(key), out)
                }
                (a, b) if a != b => {
                    out.push(self.change(CRD_UNHANDLED, key, &format!("{key} changed")))
                }
                _ => {}
            }
        }
    }

    /// Every other keyword that changed, in name order: no rule judges it.
    fn judge_unhandled(&self, out: &mut Vec<Change>) {
        let mut others: Vec<&String> = self
            .old
            .keys()
            .chain(self.new.keys().filter(|k| !self.old.contains_key(*k)))
            .filter(|k| !HANDLED.contains(&k.as_str()))
            .collect();
        others.sort();
        for key in others {
            if self.old.get(key) != self.new.get(key) {
                out.push(self.change(
                    CRD_UNHANDLED,
                    key,
                    &format!("{key} changed, which no rule judges"),
                ));
            }
        }
    }
}

fn enums(old: Option<&Value>, new: Option<&Value>, path: &str, out: &mut Vec<Change>) {
    match (old.and_then(Value::as_array), new.and_then(Value::as_array)) {
        (None, Some(_)) => out.push(change(
            CRD_ENUM,
            path,
            "an enum was added to an existing field",
            old,
            new,
        )),
        (Some(before), Some(after)) => {
            let removed: Vec<String> = before
                .iter()
                .filter(|v| !after.contains(v))
                .map(Value::to_string)
                .collect();
            if !removed.is_empty() {
                let s = if removed.len() == 1 { "" } else { "s" };
                out.push(change(
                    CRD_ENUM,
                    path,
                    &format!("value{s} {} removed", removed.join(", ")),
                    old,
                    new,
                ));
            }
        }
        _ => {}
    }
}

/// The type a removed field had, for the message.
fn type_of(schema: &Value) -> String {
    schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("untyped")
        .to_owned()
}

pub(super) fn change(
    rule: &'static str,
    path: &str,
    what: &str,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Change {
    let show = |v: &Value| excerpt(&v.to_string());
    Change {
        rule,
        path: path.to_owned(),
        what: what.to_owned(),
        before: before.map(show),
        after: after.map(show),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const P: &str = ".s";

    fn rules_of(old: Value, new: Value) -> Vec<&'static str> {
        diff(&old, &new, P).iter().map(|c| c.rule).collect()
    }

    /// One table row: the old and new schema, and the rules the change must report (empty:
    /// a near miss that must report nothing).
    struct Case {
        name: &'static str,
        old: Value,
        new: Value,
        want: &'static [&'static str],
    }

    fn obj(props: Value) -> Value {
        json!({"type": "object", "properties": props})
    }

    #[test]
    fn every_rule_has_a_hit_and_a_near_miss() {
        let cases = vec![
            Case {
                name: "field removed",
                old: obj(json!({"a": {"type": "string"}, "b": {"type": "string"}})),
                new: obj(json!({"a": {"type": "string"}})),
                want: &[CRD_EXISTING_FIELD_REMOVAL],
            },
            Case {
                name: "field added",
                old: obj(json!({"a": {"type": "string"}})),
                new: obj(json!({"a": {"type": "string"}, "b": {"type": "string"}})),
                want: &[],
            },
            Case {
                name: "type changed",
                old: obj(json!({"a": {"type": "string"}})),
                new: obj(json!({"a": {"type": "integer"}})),
                want: &[CRD_TYPE],
            },
            Case {
                name: "type kept, format free text",
                old: obj(json!({"a": {"type": "string"}})),
                new: obj(json!({"a": {"type": "string"}})),
                want: &[],
            },
            Case {
                name: "enum value removed",
                old: json!({"enum": ["a", "b"]}),
                new: json!({"enum": ["a"]}),
                want: &[CRD_ENUM],
            },
            Case {
                name: "enum value added",
                old: json!({"enum": ["a"]}),
                new: json!({"enum": ["a", "b"]}),
                want: &[],
            },
            Case {
                name: "enum added to a field",
                old: json!({"type": "string"}),
                new: json!({"type": "string", "enum": ["a"]}),
                want: &[CRD_ENUM],
            },
            Case {
                name: "enum dropped (looser)",
                old: json!({"type": "string", "enum": ["a"]}),
                new: json!({"type": "string"}),
                want: &[],
            },
            Case {
                name: "default changed",
                old: json!({"default": 1}),
                new: json!({"default": 2}),
                want: &[CRD_DEFAULT],
            },
            Case {
                name: "default added",
                old: json!({"type": "integer"}),
                new: json!({"type": "integer", "default": 2}),
                want: &[CRD_DEFAULT],
            },
            Case {
                name: "default kept",
                old: json!({"default": 1, "type": "integer"}),
                new: json!({"type": "integer", "default": 1}),
                want: &[],
            },
            Case {
                name: "newly required",
                old: json!({"required": ["a"]}),
                new: json!({"required": ["a", "b"]}),
                want: &[CRD_REQUIRED],
            },
            Case {
                name: "no longer required",
                old: json!({"required": ["a", "b"]}),
                new: json!({"required": ["a"]}),
                want: &[],
            },
            Case {
                name: "maximum lowered",
                old: json!({"maximum": 10}),
                new: json!({"maximum": 5}),
                want: &[CRD_MAXIMUM],
            },
            Case {
                name: "maximum raised",
                old: json!({"maximum": 10}),
                new: json!({"maximum": 50}),
                want: &[],
            },
            Case {
                name: "maximum added",
                old: json!({}),
                new: json!({"maximum": 50}),
                want: &[CRD_MAXIMUM],
            },
            Case {
                name: "minimum raised",
                old: json!({"minimum": 1}),
                new: json!({"minimum": 2}),
                want: &[CRD_MINIMUM],
            },
            Case {
                name: "minimum lowered",
                old: json!({"minimum": 1}),
                new: json!({"minimum": 0}),
                want: &[],
            },
            Case {
                name: "maxItems lowered",
                old: json!({"maxItems": 3}),
                new: json!({"maxItems": 2}),
                want: &[CRD_MAX_ITEMS],
            },
            Case {
                name: "maxItems removed",
                old: json!({"maxItems": 3}),
                new: json!({}),
                want: &[],
            },
            Case {
                name: "minItems added",
                old: json!({}),
                new: json!({"minItems": 1}),
                want: &[CRD_MIN_ITEMS],
            },
            Case {
                name: "minItems lowered",
                old: json!({"minItems": 2}),
                new: json!({"minItems": 1}),
                want: &[],
            },
            Case {
                name: "maxLength lowered",
                old: json!({"maxLength": 63}),
                new: json!({"maxLength": 10}),
                want: &[CRD_MAX_LENGTH],
            },
            Case {
                name: "maxLength raised",
                old: json!({"maxLength": 63}),
                new: json!({"maxLength": 253}),
                want: &[],
            },
            Case {
                name: "minLength raised",
                old: json!({"minLength": 0}),
                new: json!({"minLength": 1}),
                want: &[CRD_MIN_LENGTH],
            },
            Case {
                name: "minLength removed",
                old: json!({"minLength": 1}),
                new: json!({}),
                want: &[],
            },
            Case {
                name: "maxProperties added",
                old: json!({}),
                new: json!({"maxProperties": 4}),
                want: &[CRD_MAX_PROPERTIES],
            },
            Case {
                name: "maxProperties raised",
                old: json!({"maxProperties": 4}),
                new: json!({"maxProperties": 5}),
                want: &[],
            },
            Case {
                name: "minProperties raised",
                old: json!({"minProperties": 1}),
                new: json!({"minProperties": 2}),
                want: &[CRD_MIN_PROPERTIES],
            },
            Case {
                name: "minProperties same",
                old: json!({"minProperties": 1}),
                new: json!({"minProperties": 1.0}),
                want: &[],
            },
            Case {
                name: "pattern added",
                old: json!({"type": "string"}),
                new: json!({"type": "string", "pattern": "^a$"}),
                want: &[CRD_PATTERN],
            },
            Case {
                name: "pattern removed",
                old: json!({"pattern": "^a$"}),
                new: json!({}),
                want: &[],
            },
            Case {
                name: "nullable removed",
                old: json!({"nullable": true}),
                new: json!({}),
                want: &[CRD_NULLABLE],
            },
            Case {
                name: "nullable added",
                old: json!({}),
                new: json!({"nullable": true}),
                want: &[],
            },
            Case {
                name: "oneOf changed",
                old: json!({"oneOf": [{"required": ["a"]}]}),
                new: json!({"oneOf": [{"required": ["b"]}]}),
                want: &[CRD_ONE_OF],
            },
            Case {
                name: "anyOf changed",
                old: json!({"anyOf": [{"required": ["a"]}]}),
                new: json!({"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
                want: &[CRD_ANY_OF],
            },
            Case {
                name: "allOf added",
                old: json!({}),
                new: json!({"allOf": [{"required": ["a"]}]}),
                want: &[CRD_ALL_OF],
            },
            Case {
                name: "allOf same",
                old: json!({"allOf": [{"required": ["a"]}]}),
                new: json!({"allOf": [{"required": ["a"]}]}),
                want: &[],
            },
            Case {
                name: "description changed",
                old: json!({"description": "a"}),
                new: json!({"description": "b"}),
                want: &[CRD_DESCRIPTION],
            },
            Case {
                name: "format changed",
                old: json!({"type": "string", "format": "date-time"}),
                new: json!({"type": "string", "format": "int-or-string"}),
                want: &[CRD_UNHANDLED],
            },
            Case {
                name: "x-kubernetes-validations changed",
                old: json!({"x-kubernetes-validations": [{"rule": "self > 1"}]}),
                new: json!({"x-kubernetes-validations": [{"rule": "self > 2"}]}),
                want: &[CRD_UNHANDLED],
            },
            Case {
                name: "nested in items",
                old: json!({"type": "array", "items": obj(json!({"a": {"type": "string", "enum": ["x", "y"]}}))}),
                new: json!({"type": "array", "items": obj(json!({"a": {"type": "string", "enum": ["x"]}}))}),
                want: &[CRD_ENUM],
            },
            Case {
                name: "nested in additionalProperties",
                old: json!({"additionalProperties": {"type": "string"}}),
                new: json!({"additionalProperties": {"type": "integer"}}),
                want: &[CRD_TYPE],
            },
            Case {
                name: "unchanged",
                old: obj(json!({"a": {"type": "string", "enum": ["x"]}})),
                new: obj(json!({"a": {"enum": ["x"], "type": "string"}})),
                want: &[],
            },
        ];
        for case in cases {
            assert_eq!(rules_of(case.old, case.new), case.want, "{}", case.name);
        }
    }

    #[test]
    fn a_field_name_that_is_not_a_word_is_quoted_in_the_path() {
        let old: Value =
            serde_json::json!({"properties": {"a.b": {"type": "string"}, "c": {"type": "string"}}});
        let new: Value = serde_json::json!({"properties": {}});
        let paths: Vec<String> = diff(&old, &new, ".s").into_iter().map(|c| c.path).collect();
        assert_eq!(paths, [".s.properties[\"a.b\"]", ".s.properties.c"]);
    }

    #[test]
    fn changes_name_the_path_and_both_values() {
        let old =
            obj(json!({"spec": obj(json!({"mode": {"type": "string", "enum": ["A", "B"]}}))}));
        let new = obj(json!({"spec": obj(json!({"mode": {"type": "string", "enum": ["A"]}}))}));
        let changes = diff(&old, &new, ".spec.versions[v1].schema.openAPIV3Schema");
        assert_eq!(
            changes,
            [Change {
                rule: CRD_ENUM,
                path:
                    ".spec.versions[v1].schema.openAPIV3Schema.properties.spec.properties.mode.enum"
                        .into(),
                what: "value \"B\" removed".into(),
                before: Some(r#"["A","B"]"#.into()),
                after: Some(r#"["A"]"#.into()),
            }]
        );
        let removed = diff(&obj(json!({"a": {"type": "string"}})), &obj(json!({})), P);
        assert_eq!(removed[0].path, ".s.properties.a");
        assert_eq!(removed[0].rule, CRD_EXISTING_FIELD_REMOVAL);
    }
}
