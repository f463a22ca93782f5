//! Splitting a manifest file into documents and parsing each into JSON values.
//!
//! YAML files are split at `---` lines (a `---` at column 0 always starts a document in
//! YAML, even inside block scalars), so a broken document is reported with its own index
//! and line and does not take the rest of its file down. Numbers follow the YAML 1.1 rules
//! Kubernetes tooling uses (`0644` is octal), duplicate mapping keys are errors, and a UTF-8
//! BOM is accepted. `.json` files are one document, parsed with duplicate-key detection.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// One non-empty document of a file.
#[derive(Debug)]
pub struct Document {
    /// Zero-based index among the file's documents, empty ones included.
    pub index: usize,
    /// One-based line where the document's content starts.
    pub line: usize,
    pub value: Value,
}

/// A document that could not be parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct DocumentError {
    pub index: usize,
    pub line: usize,
    pub message: String,
}

/// Documents parsed from one file, and the ones that failed.
#[derive(Debug, Default)]
pub struct Parsed {
    pub documents: Vec<Document>,
    pub errors: Vec<DocumentError>,
}

/// Parses a YAML file's text (possibly multi-document).
pub fn parse_yaml(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parsed = Parsed::default();
    for mut segment in split_documents(text) {
        let mut repairs = 0;
        let result = loop {
            match parse_segment(&segment.text) {
                Err(err) if repairs < MAX_REPAIRS && is_underindented_quoted(&err) => {
                    let Some(line) = err.location().map(|l| l.line() as usize) else {
                        break Err(err);
                    };
                    segment.text = indent_line(&segment.text, line);
                    repairs += 1;
                }
                other => break other,
            }
        };
        match result {
            Ok(
                None
                | Some(Spanned {
                    value: Value::Null, ..
                }),
            ) => {}
            Ok(Some(Spanned { line, value })) => parsed.documents.push(Document {
                index: segment.index,
                line: segment.first_line + line.saturating_sub(1),
                value,
            }),
            Err(err) => {
                let line = err
                    .location()
                    .map(|l| l.line() as usize)
                    .filter(|&l| l > 0)
                    .unwrap_or(1);
                parsed.errors.push(DocumentError {
                    index: segment.index,
                    line: segment.first_line + line - 1,
                    message: clean_message(&err.to_string()),
                });
            }
        }
    }
    parsed
}

/// How many under-indented quoted-scalar lines one document may have repaired.
const MAX_REPAIRS: usize = 10_000;

fn parse_segment(text: &str) -> Result<Option<Spanned>, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        legacy_octal_numbers: true,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options)
}

/// YAML 1.2 requires the continuation lines of a multi-line quoted scalar to be indented
/// past the enclosing block; libyaml and go-yaml (so kubectl and CVO) do not, and real
/// release manifests rely on that (OpenShift's `scc-nested-container` description).
/// Leading white space of a continuation line is not part of the value (line folding), so
/// indenting such a line further is a repair that cannot change what the document means.
fn is_underindented_quoted(err: &serde_saphyr::Error) -> bool {
    err.to_string()
        .contains("invalid indentation in multiline quoted scalar")
}

fn indent_line(text: &str, line: usize) -> String {
    const PAD: &str = "        ";
    let mut out = String::with_capacity(text.len() + PAD.len());
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            out.push_str(PAD);
        }
        out.push_str(l);
    }
    out
}

/// Parses a `.json` file: one document; duplicate keys are errors.
pub fn parse_json(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parsed = Parsed::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let result = UniqueKeys
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match result {
        Ok(Value::Null) => {}
        Ok(value) => {
            let line = text
                .lines()
                .position(|l| !l.trim().is_empty())
                .map_or(1, |i| i + 1);
            parsed.documents.push(Document {
                index: 0,
                line,
                value,
            });
        }
        Err(err) => parsed.errors.push(DocumentError {
            index: 0,
            line: err.line().max(1),
            message: err.to_string(),
        }),
    }
    parsed
}

/// The text of one document, with where it sits in its file.
struct Segment {
    index: usize,
    first_line: usize,
    text: String,
}

/// Splits at `---` document markers and truncates at `...` end markers. The marker itself is
/// blanked (not removed) so that columns and lines stay those of the file.
fn split_documents(text: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut current = Segment {
        index: 0,
        first_line: 1,
        text: String::new(),
    };
    let mut ended = false;
    let mut seen_content = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let lineno = i + 1;
        if is_marker(line, "---") {
            // A leading `---` before any content opens the first document; it does not
            // close an empty one.
            if seen_content || current.index > 0 || ended {
                let index = current.index + 1;
                segments.push(std::mem::replace(
                    &mut current,
                    Segment {
                        index,
                        first_line: lineno,
                        text: String::new(),
                    },
                ));
            } else {
                current.first_line = lineno;
                current.text.clear();
            }
            current.text.push_str("   ");
            current.text.push_str(&line[3..]);
            ended = false;
            seen_content = true;
            continue;
        }
        if is_marker(line, "...") {
            ended = true;
            continue;
        }
        if ended {
            continue;
        }
        if !seen_content && !is_blank_or_comment(line) {
            seen_content = true;
        }
        current.text.push_str(line);
    }
    segments.push(current);
    segments
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// serde-saphyr prefixes `error: line N column M:` and adds configuration hints; the line is
/// reported separately, and the hints are about our parser, not the user's file.
fn clean_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let first = match first.split_once(": ") {
        Some((prefix, rest)) if prefix.starts_with("line ") => rest,
        _ => first,
    };
    first
        .split(", set DuplicateKeyPolicy")
        .next()
        .unwrap_or(first)
        .to_owned()
}

/// A document's value with the line its node starts on.
struct Spanned {
    line: usize,
    value: Value,
}

impl<'de> de::Deserialize<'de> for Spanned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = serde_saphyr::Spanned::<Value>::deserialize(d)?;
        Ok(Spanned {
            line: s.referenced.line() as usize,
            value: s.value,
        })
    }
}

/// Builds a `serde_json::Value`, rejecting duplicate object keys (serde_json's own `Value`
/// silently keeps the last one).
struct UniqueKeys;

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(UniqueKeys)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{key}` in object"
                )));
            }
            let value = map.next_value_seed(UniqueKeys)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn docs(text: &str) -> Vec<(usize, usize, Value)> {
        let parsed = parse_yaml(text);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        parsed
            .documents
            .into_iter()
            .map(|d| (d.index, d.line, d.value))
            .collect()
    }

    #[test]
    fn multi_document_with_empty_and_null_documents() {
        let text = "a: 1\n---\n---\n# c\nb: 2\n---\nnull\n---\n";
        assert_eq!(
            docs(text),
            vec![(0, 1, json!({"a": 1})), (2, 5, json!({"b": 2}))]
        );
    }

    #[test]
    fn leading_marker_does_not_count_as_a_document() {
        let text = "# header\n---\nkind: A\n---\nkind: B\n";
        assert_eq!(
            docs(text),
            vec![(0, 3, json!({"kind": "A"})), (1, 5, json!({"kind": "B"}))]
        );
    }

    #[test]
    fn bom_octal_and_yaml_1_1_scalars() {
        let text = "\u{feff}mode: 0644\nplain: 644\nenum: [=, x]\n";
        assert_eq!(
            docs(text),
            vec![(0, 1, json!({"mode": 420, "plain": 644, "enum": ["=", "x"]}))]
        );
    }

    #[test]
    fn underindented_quoted_continuation_is_read_as_libyaml_does() {
        let text = "metadata:\n  annotations:\n    d: 'one\n    two\n  three'\n  name: x\n";
        assert_eq!(
            docs(text),
            vec![(
                0,
                1,
                json!({"metadata": {"annotations": {"d": "one two three"}, "name": "x"}})
            )]
        );
    }

    #[test]
    fn block_scalar_content_and_document_end_marker() {
        let text = "data: |\n  --- not a marker\n  x\n...\n---\nb: 1\n";
        assert_eq!(
            docs(text),
            vec![
                (0, 1, json!({"data": "--- not a marker\nx\n"})),
                (1, 6, json!({"b": 1}))
            ]
        );
    }

    #[test]
    fn broken_document_is_isolated_with_file_line() {
        let text = "a: 1\n---\nb: [\n---\nc: 3\n";
        let parsed = parse_yaml(text);
        assert_eq!(parsed.documents.len(), 2);
        assert_eq!(parsed.errors.len(), 1);
        assert_eq!(parsed.errors[0].index, 1);
        assert!(parsed.errors[0].line >= 3, "{:?}", parsed.errors);
    }

    #[test]
    fn duplicate_key_is_an_error_with_its_line() {
        let parsed = parse_yaml("kind: A\nmetadata:\n  name: x\n  name: y\n");
        assert_eq!(parsed.documents.len(), 0);
        assert_eq!(parsed.errors[0].line, 4);
        assert!(
            parsed.errors[0].message.contains("duplicate"),
            "{}",
            parsed.errors[0].message
        );
    }

    #[test]
    fn json_duplicate_keys_and_lines() {
        let ok = parse_json("\n{\"a\": {\"b\": [1, 2.5, null, true]}}\n");
        assert_eq!(ok.documents[0].line, 2);
        assert_eq!(
            ok.documents[0].value,
            json!({"a": {"b": [1, 2.5, null, true]}})
        );
        let dup = parse_json("{\n\"a\": 1,\n\"a\": 2\n}");
        assert_eq!(dup.errors[0].line, 3);
        assert!(dup.errors[0].message.contains("duplicate key `a`"));
    }

    #[test]
    fn clean_message_strips_prefix_and_hint() {
        assert_eq!(
            clean_message(
                "error: line 2 column 1: duplicate mapping key: a, set DuplicateKeyPolicy in Options if acceptable\n --> x"
            ),
            "duplicate mapping key: a"
        );
    }
}
