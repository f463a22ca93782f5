//! Splitting a manifest file into documents and parsing each into JSON values.
//!
//! YAML files are split at `---` lines (a `---` at column 0 always starts a document in
//! YAML, even inside block scalars), so a broken document is reported with its own index
//! and line and does not take the rest of its file down. Numbers follow the YAML 1.1 rules
//! Kubernetes tooling uses (`0644` is octal) and a UTF-8 BOM is accepted. A mapping key written
//! twice keeps its last value, as Kubernetes' YAML and JSON readers (and so the CVO) do; each
//! such key is recorded on its [`Document`] with both lines, so that `validate` can warn. The
//! strict parse that refuses duplicates is the fast path: the slower one that keeps the last
//! value and records lines runs only for a document where the strict one found a duplicate.
//! `.json` files are read as one JSON document.
//!
//! Errors are for release authors, not for us: each [`ErrorKind`] has its own plain message
//! and advice, and no parser internals (type names, parser options) reach the user.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::lines;
use super::repair::{Repaired, indent_quoted_continuations};
use crate::diagnostic::excerpt;

/// One non-empty document of a file.
#[derive(Debug)]
pub struct Document {
    /// Zero-based index among the file's documents, empty ones included.
    pub index: usize,
    /// One-based line where the document's content starts.
    pub line: usize,
    pub value: Value,
    /// Mapping keys written twice: the last value is in `value`.
    pub duplicate_keys: Vec<DuplicateKey>,
}

/// A mapping key written twice in one mapping of a document; the last value wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateKey {
    pub key: String,
    /// One-based line of the first occurrence (0 when unknown).
    pub first_line: usize,
    /// One-based line of the occurrence that wins (0 when unknown).
    pub line: usize,
}

/// A document that could not be parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct DocumentError {
    pub index: usize,
    pub line: usize,
    pub kind: ErrorKind,
    pub message: String,
}

/// What is wrong with a document that could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file's bytes are not UTF-8 text.
    InvalidUtf8,
    /// YAML or JSON syntax: an unclosed bracket or quote, bad indentation, …
    Syntax,
    /// A mapping has the same key twice.
    DuplicateKey,
    /// A mapping key is empty, null, a list or a mapping: objects only have string keys.
    InvalidKey,
    /// A number JSON cannot hold: NaN, infinity, or out of range.
    InvalidNumber,
    /// A control character (vertical tab, NUL, …) where YAML allows none.
    InvalidCharacter,
    /// A YAML tag (`!!binary`, `!!int`) that does not fit its value.
    Tag,
    /// Past a limit of the YAML reader: nesting depth, number of values, text size.
    TooComplex,
    /// Aliases that expand to far more than the document holds (a "billion laughs").
    AliasBomb,
}

impl ErrorKind {
    /// What to do about an error of this kind, in one sentence.
    pub fn help(self) -> &'static str {
        match self {
            ErrorKind::InvalidUtf8 => {
                "save the file as UTF-8 text; the byte shown is probably from another encoding (such as Latin-1) or binary data"
            }
            ErrorKind::Syntax => {
                "fix the syntax at the line shown: an unclosed quote or bracket, a missing `:` or a wrongly indented line are the usual causes"
            }
            ErrorKind::DuplicateKey => {
                "remove one of the two keys: tools disagree on which value wins (kubectl keeps the last, others the first or fail)"
            }
            ErrorKind::InvalidKey => {
                "give every key a plain name (`name: value`); quote a key such as \"null\" or \"~\" if the text itself is meant"
            }
            ErrorKind::InvalidNumber => {
                "write a finite number that fits in 64 bits, or quote the value if it is meant as a string"
            }
            ErrorKind::InvalidCharacter => {
                "delete the invisible character (often pasted from another program); inside a double-quoted string write it as an escape such as \\v"
            }
            ErrorKind::Tag => {
                "remove the `!!` tag: Kubernetes manifests need none; quote the value if it is text, and use a Secret's `data` field for base64"
            }
            ErrorKind::TooComplex => {
                "split the object into smaller ones or flatten it; these limits keep a broken or hostile file from exhausting the machine (docs/limits.md)"
            }
            ErrorKind::AliasBomb => {
                "write the repeated values out instead of using many `*alias` references to the same `&anchor`"
            }
        }
    }
}

/// Decodes a manifest file's bytes. Invalid UTF-8 is an error at the first bad byte: its
/// offset, line and (for YAML, `multi_document`) the document it is in.
pub fn decode(bytes: Vec<u8>, multi_document: bool) -> Result<String, DocumentError> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // The valid prefix is text: split it the way its documents are parsed.
        let prefix = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
        let index = if multi_document {
            split_documents(prefix.strip_prefix('\u{feff}').unwrap_or(prefix))
                .last()
                .map_or(0, |s| s.index)
        } else {
            0
        };
        DocumentError {
            index,
            line: lines::line_of(bytes, offset),
            kind: ErrorKind::InvalidUtf8,
            message: format!(
                "invalid UTF-8: byte 0x{:02X} at byte offset {offset}",
                bytes[offset]
            ),
        }
    })
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
    // A CR-only file (old Mac line ends) gets LFs: numbered alike by editors and the parser.
    let text = lines::normalize(text);
    // Documents are split and parsed at every line break YAML knows (a lone CR in a file with
    // LFs too); the lines reported are the editor's.
    let editor = lines::ParserLines::new(&text);
    let mut parsed = Parsed::default();
    for segment in split_documents(&text) {
        let mut repaired = None;
        let mut result = parse_segment(&segment.text).map(|d| d.map(|d| (d, Vec::new())));
        if let Err(err) = &result
            && is_underindented_quoted(err)
            && let Some(r) = indent_quoted_continuations(&segment.text)
        {
            result = parse_segment(&r.text).map(|d| d.map(|d| (d, Vec::new())));
            repaired = Some(r);
        }
        if let Err(err) = &result
            && is_duplicate_key(err)
        {
            let text = repaired.as_ref().map_or(&segment.text, |r| &r.text);
            result = parse_segment_keeping_last(text);
        }
        let to_editor =
            |line: usize| editor.editor_line(segment.first_line + line.saturating_sub(1));
        match result {
            Ok(
                None
                | Some((
                    Spanned {
                        value: Value::Null, ..
                    },
                    _,
                )),
            ) => {}
            Ok(Some((Spanned { line, value }, duplicates))) => parsed.documents.push(Document {
                index: segment.index,
                line: to_editor(line),
                value,
                duplicate_keys: duplicates
                    .into_iter()
                    .map(|(key, first, last)| DuplicateKey {
                        key,
                        first_line: to_editor(first),
                        line: to_editor(last),
                    })
                    .collect(),
            }),
            Err(err) => {
                let (line, kind, message) = locate_yaml_error(&err, &segment, repaired.as_ref());
                parsed.errors.push(DocumentError {
                    index: segment.index,
                    line: editor.editor_line(segment.first_line + line - 1),
                    kind,
                    message,
                });
            }
        }
    }
    parsed
}

/// The one-based line (the parser's, within the segment), kind and message of a YAML error,
/// in the coordinates of the text as written (before any repair).
fn locate_yaml_error(
    err: &serde_saphyr::Error,
    segment: &Segment,
    repaired: Option<&Repaired>,
) -> (usize, ErrorKind, String) {
    // An error at the end of input (an unclosed quote) points past the last line.
    let last = lines::count_parser(&segment.text).max(1);
    let location = err.location();
    let line = location
        .map(|l| l.line() as usize)
        .filter(|&l| l > 0)
        .unwrap_or(1);
    if let Some((open_line, open_col)) = repaired.and_then(|r| r.unclosed)
        && line >= last
    {
        return (
            open_line,
            ErrorKind::Syntax,
            format!(
                "YAML syntax error (column {open_col}): the quoted string that starts here is not closed"
            ),
        );
    }
    let pad = repaired.and_then(|r| r.pads.get(line - 1)).copied();
    let column = location
        .map(|l| (l.column() as usize).saturating_sub(pad.unwrap_or(0)))
        .filter(|&c| c > 0);
    let (kind, message) = describe_yaml_error(err, column);
    (line.min(last), kind, message)
}

fn parse_segment(text: &str) -> Result<Option<Spanned>, serde_saphyr::Error> {
    super::work::scanned(text.len());
    let options = serde_saphyr::options! {
        legacy_octal_numbers: true,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options)
}

/// Whether the strict parse failed on a mapping key written twice.
fn is_duplicate_key(err: &serde_saphyr::Error) -> bool {
    use serde_saphyr::Error as E;
    match err {
        E::AliasError { error, .. } | E::WithSnippet { error, .. } => is_duplicate_key(error),
        E::DuplicateMappingKey { .. } => true,
        _ => false,
    }
}

/// A key written twice: (key, parser line of the first, parser line of the last).
type RawDuplicate = (String, usize, usize);

/// The slow path for a document with a duplicate mapping key: the last value wins (as in
/// Kubernetes' YAML reader), and every duplicate is returned with the lines of both keys.
fn parse_segment_keeping_last(
    text: &str,
) -> Result<Option<(Spanned, Vec<RawDuplicate>)>, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        legacy_octal_numbers: true,
        with_snippet: false,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::PassThrough,
    };
    let doc: Option<serde_saphyr::Spanned<Kept<serde_saphyr::Spanned<String>>>> =
        serde_saphyr::from_str_with_options(text, options)?;
    Ok(doc.map(|s| {
        (
            Spanned {
                line: s.referenced.line() as usize,
                value: s.value.value,
            },
            s.value.duplicates,
        )
    }))
}

/// A mapping key with the line it is written on, when the reader knows it (0 otherwise).
trait KeyWithLine {
    /// Whether a key written twice is looked for: not where the parser already refused it.
    const REPEATS: bool = true;
    fn into_parts(self) -> (String, usize);
}

/// A key of a mapping the strict parse read: no key is written twice there.
struct Unique(String);

impl<'de> de::Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Unique)
    }
}

impl KeyWithLine for Unique {
    const REPEATS: bool = false;
    fn into_parts(self) -> (String, usize) {
        (self.0, 0)
    }
}

impl KeyWithLine for String {
    fn into_parts(self) -> (String, usize) {
        (self, 0)
    }
}

impl KeyWithLine for serde_saphyr::Spanned<String> {
    fn into_parts(self) -> (String, usize) {
        let line = self.referenced.line() as usize;
        (self.value, line)
    }
}

/// A value read with the last of a repeated mapping key winning, and the repeated keys. Its
/// mappings hold exactly their entries: serde_json's own reader grows each as an `IndexMap`
/// grows, to up to twice the room it needs (a small manifest's value took 1.6 KB; 1.0 KB read this way).
struct Kept<K> {
    value: Value,
    duplicates: Vec<RawDuplicate>,
    key: std::marker::PhantomData<K>,
}

impl<K> Kept<K> {
    fn plain(value: Value) -> Self {
        Kept {
            value,
            duplicates: Vec::new(),
            key: std::marker::PhantomData,
        }
    }
}

impl<'de, K: KeyWithLine + de::Deserialize<'de>> de::Deserialize<'de> for Kept<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KeptVisitor::<K>(std::marker::PhantomData))
    }
}

struct KeptVisitor<K>(std::marker::PhantomData<K>);

impl<'de, K: KeyWithLine + de::Deserialize<'de>> Visitor<'de> for KeptVisitor<K> {
    type Value = Kept<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Kept<K>, E> {
        Ok(Kept::plain(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Kept<K>, E> {
        Ok(Kept::plain(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Kept<K>, E> {
        Ok(Kept::plain(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Kept<K>, E> {
        <serde_json::Number as de::Deserialize>::deserialize(de::value::I128Deserializer::<E>::new(
            v,
        ))
        .map(|n| Kept::plain(Value::Number(n)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Kept<K>, E> {
        <serde_json::Number as de::Deserialize>::deserialize(de::value::U128Deserializer::<E>::new(
            v,
        ))
        .map(|n| Kept::plain(Value::Number(n)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Kept<K>, E> {
        serde_json::Number::from_f64(v)
            .map(|n| Kept::plain(Value::Number(n)))
            .ok_or_else(|| E::custom("a number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Kept<K>, E> {
        Ok(Kept::plain(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Kept<K>, E> {
        Ok(Kept::plain(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Kept<K>, E> {
        Ok(Kept::plain(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Kept<K>, E> {
        Ok(Kept::plain(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Kept<K>, D::Error> {
        de::Deserialize::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kept<K>, A::Error> {
        let mut items = Vec::new();
        let mut duplicates = Vec::new();
        while let Some(v) = seq.next_element::<Kept<K>>()? {
            items.push(v.value);
            duplicates.extend(v.duplicates);
        }
        Ok(Kept {
            duplicates,
            ..Kept::plain(Value::Array(items))
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kept<K>, A::Error> {
        let mut entries = Vec::new();
        let mut lines: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut duplicates = Vec::new();
        while let Some(key) = map.next_key::<K>()? {
            let (key, line) = key.into_parts();
            let value = map.next_value::<Kept<K>>()?;
            duplicates.extend(value.duplicates);
            if K::REPEATS {
                match lines.get(&key) {
                    Some(first) => duplicates.push((key.clone(), *first, line)),
                    None => {
                        lines.insert(key.clone(), line);
                    }
                }
            }
            entries.push((key, value.value));
        }
        // A key written twice keeps its first place and its last value.
        let mut object = Map::with_capacity(entries.len());
        object.extend(entries);
        Ok(Kept {
            duplicates,
            ..Kept::plain(Value::Object(object))
        })
    }
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

/// The lines of a JSON document's repeated keys (the JSON reader knows none): JSON is YAML, so
/// the YAML reader's lines, when it reads the text; else the keys without lines.
fn json_duplicate_lines(
    document: &str,
    line: usize,
    duplicates: Vec<RawDuplicate>,
) -> Vec<DuplicateKey> {
    if duplicates.is_empty() {
        return Vec::new();
    }
    let from_yaml = parse_segment_keeping_last(document)
        .ok()
        .flatten()
        .map(|(_, d)| d)
        .filter(|d| d.len() == duplicates.len());
    let editor = lines::ParserLines::new(document);
    // The document's own lines, counted on from the file's line where it starts.
    let in_file = |own: usize| {
        if own == 0 {
            0
        } else {
            line + editor.editor_line(own) - 1
        }
    };
    from_yaml
        .unwrap_or(duplicates)
        .into_iter()
        .map(|(key, first_line, line)| DuplicateKey {
            key,
            first_line: in_file(first_line),
            line: in_file(line),
        })
        .collect()
}

/// Parses JSON content: a stream of values, one document each (as the CVO's reader takes
/// `{…}{…}` or one object per line); a key written twice keeps its last value. A value that
/// cannot be parsed ends the file there (what follows cannot be told apart).
pub fn parse_json(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // The JSON parser counts LFs: with a CR-only file's CRs made LFs, its lines are the
    // editor's (a lone CR elsewhere is white space inside a line).
    let text = &*lines::normalize(text);
    let mut parsed = Parsed::default();
    let mut lines = lines::LineCursor::new(text.as_bytes());
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Kept<String>>();
    let (mut from, mut index) = (0, 0);
    while let Some(item) = stream.next() {
        let to = stream.byte_offset();
        match item {
            Ok(Kept {
                value: Value::Null, ..
            }) => {}
            Ok(Kept {
                value, duplicates, ..
            }) => {
                let slice = &text[from..to];
                let start = from + (slice.len() - slice.trim_start().len());
                let line = lines.line_at(start);
                parsed.documents.push(Document {
                    index,
                    line,
                    value,
                    duplicate_keys: json_duplicate_lines(&text[start..to], line, duplicates),
                });
            }
            Err(err) => {
                let (kind, message) = describe_json_error(&err);
                parsed.errors.push(DocumentError {
                    index,
                    // An error at the end of the text is on its last line, not past it.
                    line: err.line().clamp(1, lines::count(text).max(1)),
                    kind,
                    message,
                });
                break;
            }
        }
        index += 1;
        from = to;
    }
    parsed
}

/// The text of one document, with where it sits in its file.
struct Segment {
    index: usize,
    /// The parser's line (every break counted) where the segment starts.
    first_line: usize,
    text: String,
}

/// Splits at `---` document markers and truncates at `...` end markers, on the parser's lines
/// (a lone CR is a line break). The marker itself is blanked (not removed) so that columns
/// and lines stay those of the file; `first_line` is the parser's.
fn split_documents(text: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut current = Segment {
        index: 0,
        first_line: 1,
        text: String::new(),
    };
    let mut ended = false;
    let mut seen_content = false;
    for (i, line) in lines::split_parser_inclusive(text).enumerate() {
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

/// The kind of a YAML error and its message in the user's terms.
fn describe_yaml_error(err: &serde_saphyr::Error, column: Option<usize>) -> (ErrorKind, String) {
    use serde_saphyr::Error as E;
    match err {
        E::AliasError { error, .. } | E::WithSnippet { error, .. } => {
            describe_yaml_error(error, column)
        }
        E::DuplicateMappingKey { key: Some(key), .. } => (
            ErrorKind::DuplicateKey,
            format!("duplicate key `{}`", excerpt(key)),
        ),
        E::DuplicateMappingKey { key: None, .. } => {
            (ErrorKind::DuplicateKey, "duplicate key".to_owned())
        }
        E::NullIntoString { .. } => (
            ErrorKind::InvalidKey,
            "a key is empty or null (`: value`, `~: value` or `null: value`)".to_owned(),
        ),
        E::Unexpected { expected, .. } if expected.contains("string") => (
            ErrorKind::InvalidKey,
            "a key is a list or a mapping, not a name".to_owned(),
        ),
        E::NonFiniteFloat { value, .. } => (
            ErrorKind::InvalidNumber,
            format!(
                "`{}` is not a finite number (JSON, and so the API server, cannot hold NaN or infinity)",
                excerpt(value)
            ),
        ),
        E::Budget { breach, .. } => describe_budget(breach),
        E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. }
        | E::AliasReplayCounterOverflow { .. } => (
            ErrorKind::AliasBomb,
            "aliases (`*name`) expand to far more data than the document holds".to_owned(),
        ),
        E::MultipleDocuments { .. } => (
            ErrorKind::Syntax,
            "a `---` document marker is not at the start of a line".to_owned(),
        ),
        E::InvalidBinaryBase64 { .. }
        | E::BinaryNotUtf8 { .. }
        | E::TaggedScalarCannotDeserializeIntoString { .. }
        | E::BytesNotSupportedMissingBinaryTag { .. } => (
            ErrorKind::Tag,
            "a value has a YAML tag (`!!binary`, `!!int`, …) that does not fit it".to_owned(),
        ),
        E::MergeValueNotMapOrSeqOfMaps { .. } | E::MergeKeyNotAllowed { .. } => (
            ErrorKind::Syntax,
            "a merge key (`<<`) must merge a mapping or a list of mappings".to_owned(),
        ),
        E::InvalidScalar { .. } | E::SerdeInvalidValue { .. } | E::SerdeInvalidType { .. } => (
            ErrorKind::InvalidNumber,
            "a number is out of range or not a number at all (integers hold at most 64 bits)"
                .to_owned(),
        ),
        E::UnknownAnchor { .. } => (
            ErrorKind::Syntax,
            "an alias (`*name`) refers to an unknown anchor (`&name`)".to_owned(),
        ),
        _ => {
            let text = err.to_string();
            let first = text.lines().next().unwrap_or_default();
            let detail = strip_position(first);
            if let Some(c) = unexpected_character(detail) {
                return (
                    ErrorKind::InvalidCharacter,
                    format!("the control character {c} is not allowed in YAML text"),
                );
            }
            if is_internal(detail) {
                return (
                    ErrorKind::Syntax,
                    "the document is not valid YAML here".to_owned(),
                );
            }
            let detail = if detail.contains("multiline quoted scalar") {
                "a quoted string is not closed, or its next line is not indented".to_owned()
            } else {
                excerpt(&detail.replace("EOF", "end of the document"))
            };
            let column = column.map(|c| format!(" (column {c})")).unwrap_or_default();
            (
                ErrorKind::Syntax,
                format!("YAML syntax error{column}: {detail}"),
            )
        }
    }
}

/// A resource limit of the YAML reader (docs/limits.md), in the user's terms.
fn describe_budget(breach: &serde_saphyr::budget::BudgetBreach) -> (ErrorKind, String) {
    use serde_saphyr::budget::BudgetBreach as B;
    let message = match breach {
        B::Depth { .. } => "objects and lists are nested more than 64 levels deep".to_owned(),
        B::Nodes { .. } => "the document holds more than 250,000 values".to_owned(),
        B::ScalarBytes { .. } => "the document's text values add up to more than 64 MiB".to_owned(),
        B::Events { .. } => "the document holds more than 1,000,000 YAML items".to_owned(),
        B::Documents { .. } => "the file holds more than 1,024 documents".to_owned(),
        B::Aliases { .. }
        | B::AliasAnchorRatio { .. }
        | B::RecordedAnchorEvents { .. }
        | B::RecordedAnchorBytes { .. } => {
            return (
                ErrorKind::AliasBomb,
                "aliases (`*name`) are used far more often than anchors (`&name`) are defined, the pattern of an alias bomb".to_owned(),
            );
        }
        B::Anchors { .. } => "the document defines more than 50,000 anchors (`&name`)".to_owned(),
        B::MergeKeys { .. } => "the document has more than 10,000 merge keys (`<<`)".to_owned(),
        _ => "the document is too large or too deeply structured to read safely".to_owned(),
    };
    (ErrorKind::TooComplex, message)
}

/// `unexpected character: `\u{b}'` → `U+000B`, with the character's name when it has one.
fn unexpected_character(detail: &str) -> Option<String> {
    let rest = detail.strip_prefix("unexpected character")?;
    let start = rest.find("\\u{")? + 3;
    let end = start + rest[start..].find('}')?;
    let code = u32::from_str_radix(&rest[start..end], 16).ok()?;
    let name = match code {
        0x0 => " (NUL)",
        0x7 => " (bell)",
        0x8 => " (backspace)",
        0xB => " (vertical tab)",
        0xC => " (form feed)",
        0x1B => " (escape)",
        0x7F => " (delete)",
        0xFEFF => " (byte-order mark)",
        _ => "",
    };
    Some(format!("U+{code:04X}{name}"))
}

/// Parser wording that names its own internals rather than the document.
fn is_internal(detail: &str) -> bool {
    [
        "Option",
        "option",
        "serde",
        "deserializ",
        "::",
        "\\u{",
        "policy",
        "from_str",
        "{ ",
    ]
    .iter()
    .any(|w| detail.contains(w))
        || detail
            .split(|c: char| !c.is_alphanumeric())
            .any(is_rust_number_type)
}

/// `u64`, `i32`, `f64`, `usize`: how Rust names number types.
fn is_rust_number_type(word: &str) -> bool {
    let mut chars = word.chars();
    matches!(chars.next(), Some('u' | 'i' | 'f'))
        && matches!(chars.as_str(), "8" | "16" | "32" | "64" | "128" | "size")
}

/// The kind of a JSON error and its message in the user's terms.
fn describe_json_error(err: &serde_json::Error) -> (ErrorKind, String) {
    let text = err.to_string();
    let detail = strip_position(&text);
    if detail.starts_with("duplicate key") {
        return (ErrorKind::DuplicateKey, detail.replace(" in object", ""));
    }
    if detail == "key must be a string" {
        return (
            ErrorKind::InvalidKey,
            "a key is not a string: JSON object keys are quoted".to_owned(),
        );
    }
    if detail == "number out of range" {
        return (
            ErrorKind::InvalidNumber,
            "a number is out of range".to_owned(),
        );
    }
    let detail = detail.replace("EOF", "end of file");
    (
        ErrorKind::Syntax,
        format!("JSON syntax error (column {}): {detail}", err.column()),
    )
}

/// Drops the ` at line N, column M` (YAML) or ` at line N column M` (JSON) the parsers append:
/// the line is reported separately.
fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i])
}

/// A JSON value cvo wrote itself (a parse cache entry's object: no key twice), read as a
/// document is read: its mappings at their exact size ([`Kept`]).
pub fn exact_size<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    de::Deserialize::deserialize(d).map(|k: Kept<Unique>| k.value)
}

/// A document's value with the line its node starts on.
struct Spanned {
    line: usize,
    value: Value,
}

impl<'de> de::Deserialize<'de> for Spanned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = serde_saphyr::Spanned::<Kept<Unique>>::deserialize(d)?;
        Ok(Spanned {
            line: s.referenced.line() as usize,
            value: s.value.value,
        })
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

    /// The documents' own reader ([`Kept`], mappings of exact size) gives the values
    /// serde_json's reader gives, on every kind of node and number.
    #[test]
    fn values_are_those_of_serde_jsons_reader() {
        let text = "a: 1\nb: -2\nc: 1.5\nd: 99999999999999999999\ne: -9999999999999999999\nf: 0644\ng: 0x1F\nh: true\ni: ~\nj: \"s\"\nk: [1, [2, {x: y}], {}]\nl: &anchor {p: 1, q: [a]}\nm: *anchor\nn:\n  <<: *anchor\n  r: 2\no: |\n  block\n  text\n'p q': 1e3\n\"7\": 7\n";
        let options = || {
            serde_saphyr::options! {
                legacy_octal_numbers: true,
                with_snippet: false,
            }
        };
        let ours = parse_segment(text).unwrap().unwrap().value;
        let theirs: Value = serde_saphyr::from_str_with_options(text, options()).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(
            ours.as_object().unwrap().keys().collect::<Vec<_>>(),
            theirs.as_object().unwrap().keys().collect::<Vec<_>>(),
            "same key order"
        );
    }

    /// A JSON stream's documents cost the same whatever comes before them: each document's
    /// line was counted from the file's start, and one with a repeated key was parsed again
    /// behind a line end for every line before it.
    #[test]
    fn a_json_streams_work_per_document_does_not_grow_with_the_stream() {
        let stream = |n: usize| "{\"a\": 1, \"a\": 2}\n".repeat(n);
        let (small, small_work) = super::super::work::measure(|| parse_json(&stream(500)));
        let (large, large_work) = super::super::work::measure(|| parse_json(&stream(2_000)));
        assert_eq!((small.documents.len(), large.documents.len()), (500, 2_000));
        let last = large.documents.last().unwrap();
        assert_eq!(
            (last.line, last.duplicate_keys[0].line),
            (2_000, 2_000),
            "the lines are the file's"
        );
        assert!(
            large_work.bytes <= 4 * small_work.bytes + small_work.bytes / 4,
            "{small_work:?} for 500 documents, {large_work:?} for 2,000"
        );
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

    /// Issue 25 item 4: as the CVO (Kubernetes' YAML reader), the last value of a key written
    /// twice wins; both lines are recorded for `validate`'s `duplicate-key` warning.
    #[test]
    fn duplicate_key_keeps_the_last_value_and_names_both_lines() {
        let parsed = parse_yaml(
            "kind: A\nmetadata:\n  name: x\n  name: w\nlist:\n- a: 1\n  b: 2\n  a: 3\nname: z\n---\nk: 1\n",
        );
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let doc = &parsed.documents[0];
        assert_eq!(
            doc.value,
            json!({"kind": "A", "metadata": {"name": "w"}, "list": [{"a": 3, "b": 2}], "name": "z"})
        );
        let dup = |key: &str, first_line, line| DuplicateKey {
            key: key.to_owned(),
            first_line,
            line,
        };
        assert_eq!(doc.duplicate_keys, [dup("name", 3, 4), dup("a", 6, 8)]);
        assert!(parsed.documents[1].duplicate_keys.is_empty());
        // Three times: each later one against the first; lines as an editor numbers them.
        let parsed = parse_yaml("x: 0\r\nb: 1\r\nb: 2\r\nb: 3\r\n");
        assert_eq!(parsed.documents[0].value, json!({"x": 0, "b": 3}));
        assert_eq!(
            parsed.documents[0].duplicate_keys,
            [dup("b", 2, 3), dup("b", 2, 4)]
        );
    }

    #[test]
    fn json_duplicate_keys_keep_the_last_value_with_lines() {
        let ok = parse_json("\n{\"a\": {\"b\": [1, 2.5, null, true]}}\n");
        assert_eq!(ok.documents[0].line, 2);
        assert_eq!(
            ok.documents[0].value,
            json!({"a": {"b": [1, 2.5, null, true]}})
        );
        assert!(ok.documents[0].duplicate_keys.is_empty());
        let dup = parse_json("{\n\"a\": 1,\n\"a\": 2\n}");
        assert!(dup.errors.is_empty(), "{:?}", dup.errors);
        assert_eq!(dup.documents[0].value, json!({"a": 2}));
        assert_eq!(
            dup.documents[0].duplicate_keys,
            [DuplicateKey {
                key: "a".into(),
                first_line: 2,
                line: 3
            }]
        );
    }

    /// (input, kind, words the message must contain, line).
    const BAD_YAML: &[(&str, ErrorKind, &str, usize)] = &[
        (": : :\n", ErrorKind::InvalidKey, "key is empty or null", 1),
        (
            "null: 1\n",
            ErrorKind::InvalidKey,
            "key is empty or null",
            1,
        ),
        (
            "? [a]\n: b\n",
            ErrorKind::InvalidKey,
            "key is a list or a mapping",
            1,
        ),
        (
            "a: .nan\n",
            ErrorKind::InvalidNumber,
            "`.nan` is not a finite number",
            1,
        ),
        ("a: 1e999\n", ErrorKind::InvalidNumber, "`1e999`", 1),
        (
            "a: [\n",
            ErrorKind::Syntax,
            "(column 4): unclosed bracket '['",
            1,
        ),
        (
            "x: 1\na: 'open\n",
            ErrorKind::Syntax,
            "quoted string that starts here is not closed",
            2,
        ),
        (
            "a: b: c\n",
            ErrorKind::Syntax,
            "mapping values are not allowed",
            1,
        ),
        (
            "a:\n  - b\n c: d\n",
            ErrorKind::Syntax,
            "did not find expected key",
            3,
        ),
        ("a: *nowhere\n", ErrorKind::Syntax, "unknown anchor", 1),
    ];

    #[test]
    fn each_yaml_error_kind_has_its_own_plain_message() {
        for &(text, kind, words, line) in BAD_YAML {
            let parsed = parse_yaml(text);
            assert_eq!(parsed.errors.len(), 1, "{text:?}: {:?}", parsed.errors);
            let e = &parsed.errors[0];
            assert_eq!((e.kind, e.line), (kind, line), "{text:?}: {e:?}");
            assert!(e.message.contains(words), "{text:?}: {}", e.message);
            assert_plain(&e.message);
        }
    }

    #[test]
    fn each_json_error_kind_has_its_own_plain_message() {
        for (text, kind, words) in [
            ("{1: 2}", ErrorKind::InvalidKey, "key is not a string"),
            ("{\"a\": 1e999}", ErrorKind::InvalidNumber, "out of range"),
            (
                "{\"a\": }",
                ErrorKind::Syntax,
                "JSON syntax error (column 7): expected value",
            ),
            (
                "{\"a\": 1",
                ErrorKind::Syntax,
                "end of file while parsing an object",
            ),
            ("{\"a\": 1} x", ErrorKind::Syntax, "expected value"),
        ] {
            let parsed = parse_json(text);
            let e = &parsed.errors[0];
            assert_eq!(e.kind, kind, "{text:?}: {e:?}");
            assert!(e.message.contains(words), "{text:?}: {}", e.message);
            assert_plain(&e.message);
        }
    }

    #[test]
    fn invalid_utf8_names_offset_line_and_document() {
        let text = b"a: 1\n---\nb: 2\nc: \xff\xfe\n".to_vec();
        let e = decode(text.clone(), true).unwrap_err();
        assert_eq!((e.kind, e.index, e.line), (ErrorKind::InvalidUtf8, 1, 4));
        assert_eq!(e.message, "invalid UTF-8: byte 0xFF at byte offset 17");
        assert_eq!(decode(text, false).unwrap_err().index, 0);
        assert_eq!(decode(b"ok".to_vec(), true).unwrap(), "ok");
    }

    /// The editor's line of byte `byte` and the editor's line count of `text`, written here
    /// apart from the loader's counter: lines end at LF in a file with one, else at CR.
    fn editor(text: &str, byte: usize) -> (usize, usize) {
        let end = if text.contains('\n') { '\n' } else { '\r' };
        let count = text.matches(end).count() + usize::from(!text.ends_with(end));
        (text[..byte].matches(end).count() + 1, count)
    }

    /// Found by the hostile-input run: CRLF mixed with lone CRs. Every line named is the
    /// line an editor shows (lines end at LF in a file with one, else at CR), inside the file.
    #[test]
    fn lines_are_numbered_as_editors_detect_line_ends() {
        let lines = [
            "apiVersion: v1",
            "kind: ConfigMap",
            "metadata:",
            "  name: x",
            "data:",
            "  a: '1'",
            "  b: b: c",
            "  c: '3'",
        ];
        for ends in [
            &["\r\n", "\r"][..],
            &["\r"],
            &["\r\n"],
            &["\n"],
            &["\r\r\n"],
            &["\r", "\r\n", "\n"],
        ] {
            let text: String = lines
                .iter()
                .enumerate()
                .map(|(i, l)| format!("{l}{}", ends[i % ends.len()]))
                .collect();
            let parsed = parse_yaml(&text);
            assert_eq!(parsed.errors.len(), 1, "{text:?}");
            let e = &parsed.errors[0];
            let (line, count) = editor(&text, text.find("b: b: c").unwrap());
            assert_eq!(e.line, line, "{text:?}: {e:?}");
            assert!(e.line <= count, "{text:?}: {e:?}");
            assert!(e.message.contains("mapping values"), "{}", e.message);
            if ends.iter().all(|&end| end == ends[0]) {
                assert_eq!(e.line, 7, "one kind of line end: {text:?}");
            }
            // A second document (its marker after a CR, a line break in YAML) starts where
            // its content does.
            let two = format!("{}---\r{}", text.replace("b: b: c", "b: c"), text);
            let parsed = parse_yaml(&two);
            assert_eq!(parsed.documents.len(), 1, "{two:?}");
            assert_eq!(parsed.documents[0].line, 1);
            let (line, count) = editor(&two, two.rfind("b: b: c").unwrap());
            assert_eq!(parsed.errors[0].index, 1, "{two:?}");
            assert_eq!(parsed.errors[0].line, line, "{two:?}");
            assert!(line <= count);
        }
        // The reproduced file: 15 lines ending `\r\r\n`, broken on the last; line 15 of 15.
        let text: String = (1..15).map(|i| format!("k{i}: {i}\r\r\n")).collect();
        let text = format!("{text}bad: [\r\r\n");
        let parsed = parse_yaml(&text);
        assert_eq!(parsed.errors[0].line, 15, "{:?}", parsed.errors);
        // An unclosed quote: where it opens.
        let parsed = parse_yaml("x: 1\ra: 'open\r\nb: 2\rc: 3\r");
        assert_eq!(parsed.errors[0].line, 1, "{:?}", parsed.errors);
        let parsed = parse_yaml("x: 1\ra: 'open\rb: 2\rc: 3\r");
        assert_eq!(parsed.errors[0].line, 2, "{:?}", parsed.errors);
    }

    /// A lone CR in a file with LFs is the parser's line break: mapping line numbers changes
    /// nothing the documents parse to.
    #[test]
    fn a_lone_cr_among_lfs_still_breaks_yaml_lines() {
        let parsed = parse_yaml("a: 1\rb: 2\n");
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert_eq!(
            parsed.documents[0].value,
            serde_json::json!({"a": 1, "b": 2})
        );
        let parsed = parse_yaml("a: 1\n\rb: 2\r---\rc: 3\n");
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let docs: Vec<_> = parsed
            .documents
            .iter()
            .map(|d| (d.index, d.line, d.value.clone()))
            .collect();
        assert_eq!(
            docs,
            [
                (0, 1, serde_json::json!({"a": 1, "b": 2})),
                (1, 2, serde_json::json!({"c": 3})),
            ]
        );
        // A CR-only file splits into documents at its `---` lines.
        let parsed = parse_yaml("a: 1\r---\rb: 2\r---\r\rc: 3\r");
        let lines: Vec<_> = parsed.documents.iter().map(|d| d.line).collect();
        assert_eq!(lines, [1, 3, 6], "{parsed:?}");
    }

    #[test]
    fn a_json_stream_is_one_document_per_value() {
        let p = parse_json("{\"a\": 1}\n{\"b\": 2}{\"c\": 3}\n\nnull\n{\"d\":\n 1, \"d\": 2}");
        let at: Vec<(usize, usize)> = p.documents.iter().map(|d| (d.index, d.line)).collect();
        assert_eq!(at, [(0, 1), (1, 2), (2, 2), (4, 5)]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let dup = &p.documents[3].duplicate_keys[0];
        assert_eq!((dup.first_line, dup.line), (5, 6));
        // A broken value ends the file there.
        let p = parse_json("{\"a\": 1}\n{\"b\": }\n{\"c\": 3}");
        assert_eq!(p.documents.len(), 1);
        assert_eq!((p.errors[0].index, p.errors[0].line), (1, 2));
    }

    #[test]
    fn json_and_invalid_utf8_lines_are_the_editors() {
        let lines = |text: &str| {
            let d = &parse_json(text).documents[0].duplicate_keys[0];
            (d.first_line, d.line)
        };
        assert_eq!(lines("{\r\"a\": 1,\r\n\"a\": 2\r}"), (1, 2));
        assert_eq!(lines("{\r\"a\": 1,\r\"a\": 2\r}"), (2, 3), "CR-only");
        assert_eq!(parse_json("\r\r\n{\"a\": 1}").documents[0].line, 2);
        assert_eq!(parse_json("\r\r{\"a\": 1}").documents[0].line, 3);
        // An error at the end of the text is on its last line.
        assert_eq!(parse_json("{\n").errors[0].line, 1);
        assert_eq!(parse_json("{\r\n\r\n").errors[0].line, 2);
        let e = decode(b"a: 1\rb: 2\r\nc: \xff\r".to_vec(), true).unwrap_err();
        assert_eq!(e.line, 2);
        let e = decode(b"a: 1\rb: 2\rc: \xff\r".to_vec(), true).unwrap_err();
        assert_eq!(e.line, 3, "CR-only");
        // Which byte ends a line depends on the whole file, past the bad byte too.
        let e = decode(b"a: 1\rb: 2\rc: \xff\n".to_vec(), true).unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn every_kind_has_different_help() {
        let kinds = [
            ErrorKind::InvalidUtf8,
            ErrorKind::Syntax,
            ErrorKind::DuplicateKey,
            ErrorKind::InvalidKey,
            ErrorKind::InvalidNumber,
            ErrorKind::InvalidCharacter,
            ErrorKind::Tag,
            ErrorKind::TooComplex,
            ErrorKind::AliasBomb,
        ];
        let helps: std::collections::HashSet<_> = kinds.iter().map(|k| k.help()).collect();
        assert_eq!(helps.len(), kinds.len());
    }

    /// No parser internals: Rust type names, serde, parser options.
    fn assert_plain(message: &str) {
        for internal in [
            "Option<",
            "String",
            "serde",
            "Policy",
            "deserialize",
            " at line ",
        ] {
            assert!(!message.contains(internal), "{message}");
        }
    }
}
