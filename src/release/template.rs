//! The Go-template fields CVO renders in its own payload `manifests/` directory:
//! `{{.ReleaseImage}}`, `{{.ClusterProfile}}`, `{{index .Images "name"}}` and string
//! literals (`{{ "{{ $labels.x }}" }}`, how Prometheus templates are escaped there).
//!
//! Only files under a payload's `manifests/` are templates. Everywhere else `{{` is data
//! (Prometheus rules, dashboards), and [`mentions_cvo_fields`] lets the loader warn about a
//! file that looks like an unrendered CVO template.

use super::lines::{LineCursor, line_of};
use crate::diagnostic::excerpt;
use std::collections::BTreeMap;

/// Values for the template fields.
#[derive(Clone, Debug, Default)]
pub struct TemplateValues {
    pub release_image: Option<String>,
    pub cluster_profile: String,
    pub images: BTreeMap<String, String>,
}

/// A template action that could not be rendered, with its one-based line.
#[derive(Debug, PartialEq, Eq)]
pub struct TemplateError {
    pub line: usize,
    pub message: String,
    /// The action is not one cvo knows (a field or function of a newer CVO, such as
    /// `{{index .FutureField "k"}}`): the CVO skips such a file with a warning.
    pub unknown_action: bool,
}

/// Renders every `{{ … }}` action of `text`.
pub fn render(text: &str, values: &TemplateValues) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut lines = LineCursor::new(text.as_bytes());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let line = lines.line_at(text.len() - rest.len() + start);
        let (before, after_open) = (&rest[..start], &rest[start + 2..]);
        let end = find_close(after_open).ok_or_else(|| TemplateError {
            line,
            message: "`{{` without a closing `}}`".into(),
            unknown_action: false,
        })?;
        let mut action = &after_open[..end];
        let mut after = &after_open[end + 2..];
        let mut before = before;
        // `{{- ` and ` -}}` trim the white space next to the action, as in Go.
        if let Some(a) = action.strip_prefix("- ") {
            action = a;
            before = before.trim_end();
        }
        if let Some(a) = action.strip_suffix(" -") {
            action = a;
            after = after.trim_start();
        }
        out.push_str(before);
        let rendered = eval(action.trim(), values).and_then(|rendered| match rendered {
            Rendered::Text(text) => Ok(text),
            Rendered::Value(value) => {
                let line_so_far = &out[out.rfind('\n').map_or(0, |i| i + 1)..];
                as_yaml(&value, context(line_so_far), ends_scalar(after))
            }
        });
        out.push_str(&rendered.map_err(|e| TemplateError {
            line,
            unknown_action: matches!(e, ActionError::Unsupported),
            message: format!("`{{{{{}}}}}`: {e}", action.trim()),
        })?);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// Line of the first CVO template field in `text`, for files that are not rendered.
///
/// The actions are read as [`render`] (and Go's template lexer) reads them: from the start,
/// each from its `{{` to its `}}`, the next one after it. A `{{` inside an action is part of
/// that action, and one that is never closed ends the search (rendered, the file would fail
/// there). So each byte is scanned once, whatever the file holds.
pub fn mentions_cvo_fields(text: &str) -> Option<usize> {
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let close = find_close(after)?;
        let action = &after[..close];
        let words: Vec<&str> = action.trim_matches(['-', ' ']).split_whitespace().collect();
        let literal = action.trim_matches(['-', ' ']);
        let cvo = matches!(words.as_slice(), [".ReleaseImage"] | [".ClusterProfile"])
            || matches!(words.as_slice(), ["index", ".Images", _])
            // `{{ "{{ $labels.x }}" }}`: how CVO's templates escape Prometheus templates.
            || (literal.starts_with(['"', '`']) && literal.contains("{{"));
        if cvo {
            return Some(line_of(text, offset + start));
        }
        offset += start + 2 + close + 2;
        rest = &after[close + 2..];
    }
    None
}

/// Position of the `}}` closing an action, skipping string literals.
fn find_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let close = find_close_bytes(bytes);
    super::work::scanned(close.map_or(bytes.len(), |i| i + 2));
    close
}

fn find_close_bytes(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// What an action renders to: template text written by the release's author (a string
/// literal), copied as is, or a value from outside the file, written as a YAML scalar.
enum Rendered {
    Text(String),
    Value(String),
}

/// Why one action cannot be rendered; shown after the action, at its line.
#[derive(Debug, thiserror::Error)]
enum ActionError {
    #[error("needs a value: pass --release-image PULLSPEC")]
    NoReleaseImage,
    #[error("`index .Images {}`: the image name must be a string", excerpt(.0))]
    ImageNameNotString(String),
    #[error("image `{}` is not in image-references", excerpt(.0))]
    UnknownImage(String),
    #[error(
        "unsupported template action: only .ReleaseImage, .ClusterProfile, `index .Images \"name\"` and string literals are rendered"
    )]
    Unsupported,
    #[error(
        "the value {0} cannot be written here without changing the YAML around it: put the action in quotes"
    )]
    NeedsQuotes(String),
}

fn eval(action: &str, values: &TemplateValues) -> Result<Rendered, ActionError> {
    if let Some(lit) = string_literal(action) {
        return Ok(Rendered::Text(lit));
    }
    let words: Vec<&str> = action.split_whitespace().collect();
    let value = match words.as_slice() {
        [".ReleaseImage"] => values
            .release_image
            .clone()
            .ok_or(ActionError::NoReleaseImage),
        [".ClusterProfile"] => Ok(values.cluster_profile.clone()),
        ["index", ".Images", name] => {
            let name = string_literal(name)
                .ok_or_else(|| ActionError::ImageNameNotString((*name).to_owned()))?;
            match values.images.get(&name) {
                Some(image) => Ok(image.clone()),
                None => Err(ActionError::UnknownImage(name)),
            }
        }
        _ => Err(ActionError::Unsupported),
    }?;
    Ok(Rendered::Value(value))
}

/// Where in a YAML line a value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Context {
    /// Inside `'…'`.
    SingleQuoted,
    /// Inside `"…"`.
    DoubleQuoted,
    /// Unquoted, where a scalar starts (after `key: `, `- `, `[`, `,`).
    ScalarStart,
    /// Unquoted, inside a plain scalar, a block scalar or a comment.
    Plain,
}

/// The quoting context at the end of `line` (the current line up to the action). Quotes
/// only open a scalar where a scalar starts: `it's` is no quote.
fn context(line: &str) -> Context {
    let mut state = Context::Plain;
    let mut prev: Option<char> = None; // last character outside quotes
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match state {
            Context::SingleQuoted => {
                if c == '\'' {
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                    } else {
                        state = Context::Plain;
                        prev = Some(c);
                    }
                }
            }
            Context::DoubleQuoted => match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    state = Context::Plain;
                    prev = Some(c);
                }
                _ => {}
            },
            _ => {
                let starts = starts_scalar(prev);
                if starts && c == '\'' {
                    state = Context::SingleQuoted;
                } else if starts && c == '"' {
                    state = Context::DoubleQuoted;
                } else if c == '#' && prev.is_none_or(char::is_whitespace) {
                    return Context::Plain; // a comment
                }
                prev = Some(c);
            }
        }
    }
    if state != Context::Plain {
        return state;
    }
    let trimmed = line.trim_end();
    let spaced = trimmed.len() < line.len();
    match trimmed.trim_start().chars().last() {
        None => Context::Plain, // only indentation: a block scalar's line
        Some(':' | '-' | '?') if spaced => Context::ScalarStart,
        Some('[' | '{' | ',') => Context::ScalarStart,
        _ => Context::Plain,
    }
}

/// Whether a scalar may start after `prev`, the last character before it outside quotes.
fn starts_scalar(prev: Option<char>) -> bool {
    prev.is_none_or(|c| c.is_whitespace() || matches!(c, ':' | '-' | '[' | '{' | ',' | '?'))
}

/// Whether the text after an action ends the scalar: end of line, a comment, a flow
/// collection's separator.
fn ends_scalar(after: &str) -> bool {
    let rest = after.trim_start_matches([' ', '\t']);
    rest.is_empty() || rest.starts_with(['\n', '\r', '#', ',', ']', '}'])
}

/// `value` written at a place of the given context, so that it stays one scalar whatever it
/// holds: escaped inside quotes, a double-quoted scalar where it is the whole value, and
/// refused where neither is possible and it would change the document.
fn as_yaml(value: &str, context: Context, whole_scalar: bool) -> Result<String, ActionError> {
    let json = serde_json::to_string(value).unwrap_or_default();
    match context {
        Context::DoubleQuoted => Ok(json[1..json.len() - 1].to_owned()),
        Context::SingleQuoted if !value.chars().any(char::is_control) => {
            Ok(value.replace('\'', "''"))
        }
        Context::ScalarStart if whole_scalar => Ok(json),
        _ if plain_safe(value) => Ok(value.to_owned()),
        _ => Err(ActionError::NeedsQuotes(json)),
    }
}

/// Whether `value` can sit inside a plain scalar (or a block scalar's line) as it is.
fn plain_safe(value: &str) -> bool {
    !value.chars().any(char::is_control)
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
}

/// A Go string literal: `"…"` with escapes, or a raw `` `…` ``.
fn string_literal(s: &str) -> Option<String> {
    if let Some(raw) = s.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        return Some(raw.to_owned());
    }
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> TemplateValues {
        TemplateValues {
            release_image: Some("quay.io/r@sha256:1".into()),
            cluster_profile: "hypershift".into(),
            images: BTreeMap::from([("cli".into(), "quay.io/cli@sha256:2".into())]),
        }
    }

    #[test]
    fn renders_cvo_fields_and_escaped_prometheus_templates() {
        let text = "image: '{{.ReleaseImage}}'\np: '{{ .ClusterProfile }}'\ni: {{index .Images \"cli\"}}\nd: '{{ \"{{ $labels.x }}\" }}'\n";
        assert_eq!(
            render(text, &values()).unwrap(),
            "image: 'quay.io/r@sha256:1'\np: 'hypershift'\ni: \"quay.io/cli@sha256:2\"\nd: '{{ $labels.x }}'\n"
        );
    }

    #[test]
    fn trim_markers_and_errors_with_lines() {
        assert_eq!(render("a  {{- \"b\" -}}  c", &values()).unwrap(), "abc");
        let err = render("x\ny: {{ .Nope }}", &values()).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("unsupported"));
        let missing = TemplateValues::default();
        assert!(
            render("{{.ReleaseImage}}", &missing)
                .unwrap_err()
                .message
                .contains("--release-image")
        );
        assert!(
            render("{{ index .Images \"nope\" }}", &values())
                .unwrap_err()
                .message
                .contains("image-references")
        );
        assert_eq!(render("{{ oops", &values()).unwrap_err().line, 1);
        // Lines as editors number them: at LF in a file with one (a lone CR is inside a
        // line), at CR in a file without.
        assert_eq!(
            render("x\r\ny\rz: {{ .Nope }}", &values())
                .unwrap_err()
                .line,
            2
        );
        assert_eq!(
            render("x\ry\rz: {{ .Nope }}", &values()).unwrap_err().line,
            3
        );
        assert_eq!(mentions_cvo_fields("a\rb\r{{.ReleaseImage}}"), Some(3));
        assert_eq!(mentions_cvo_fields("a\rb\r{{.ReleaseImage}}\n"), Some(1));
    }

    #[test]
    fn detects_cvo_fields_but_not_data() {
        assert_eq!(
            mentions_cvo_fields("a: {{ $labels.x }}\nb: {{.ReleaseImage}}"),
            Some(2)
        );
        assert_eq!(mentions_cvo_fields("a: {{ $value }} {{instance}}"), None);
        assert_eq!(mentions_cvo_fields("i: {{index .Images \"x\"}}"), Some(1));
        assert_eq!(
            mentions_cvo_fields("d: '{{ \"{{ $labels.x }}\" }}'"),
            Some(1)
        );
    }

    fn with_image(image: &str) -> TemplateValues {
        TemplateValues {
            release_image: Some(image.into()),
            ..values()
        }
    }

    #[test]
    fn values_stay_one_scalar_whatever_they_hold() {
        let hostile = with_image("x'\"\n  injected: true");
        assert_eq!(
            render("a: '{{.ReleaseImage}}'\n", &with_image("it's")).unwrap(),
            "a: 'it''s'\n"
        );
        assert_eq!(
            render("a: \"--image={{.ReleaseImage}}\"\n", &hostile).unwrap(),
            "a: \"--image=x'\\\"\\n  injected: true\"\n"
        );
        assert_eq!(
            render(
                "a: {{.ReleaseImage}}\n- {{ .ReleaseImage }} # c\n",
                &hostile
            )
            .unwrap(),
            "a: \"x'\\\"\\n  injected: true\"\n- \"x'\\\"\\n  injected: true\" # c\n"
        );
        // Inside a plain or block scalar only a value that cannot change the YAML goes in.
        assert_eq!(
            render(
                "a: --image={{.ReleaseImage}}\n  {{.ReleaseImage}}\n",
                &values()
            )
            .unwrap(),
            "a: --image=quay.io/r@sha256:1\n  quay.io/r@sha256:1\n"
        );
        for text in [
            "a: --image={{.ReleaseImage}}",
            "a: '{{.ReleaseImage}}'",
            "a: {{.ReleaseImage}}-x",
        ] {
            let err = render(text, &hostile).unwrap_err();
            assert!(
                err.message.contains("{{.ReleaseImage}}"),
                "{text}: {}",
                err.message
            );
        }
        // `it's` opens no quote; a quote after `- ` does.
        assert_eq!(context("  - it's "), Context::Plain);
        assert_eq!(context("  - 'a"), Context::SingleQuoted);
        assert_eq!(context("k: \"a\\\" b"), Context::DoubleQuoted);
        assert_eq!(context("k: 'a'' b"), Context::SingleQuoted);
        assert_eq!(context("k: [a, "), Context::ScalarStart);
        assert_eq!(context("k: a # "), Context::Plain);
    }
}
