//! The Go-template fields CVO renders in its own payload `manifests/` directory:
//! `{{.ReleaseImage}}`, `{{.ClusterProfile}}`, `{{index .Images "name"}}` and string
//! literals (`{{ "{{ $labels.x }}" }}`, how Prometheus templates are escaped there).
//!
//! Only files under a payload's `manifests/` are templates. Everywhere else `{{` is data
//! (Prometheus rules, dashboards), and [`mentions_cvo_fields`] lets the loader warn about a
//! file that looks like an unrendered CVO template.

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
}

/// Renders every `{{ … }}` action of `text`.
pub fn render(text: &str, values: &TemplateValues) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let line = line_of(text, text.len() - rest.len() + start);
        let (before, after_open) = (&rest[..start], &rest[start + 2..]);
        let end = find_close(after_open).ok_or_else(|| TemplateError {
            line,
            message: "`{{` without a closing `}}`".into(),
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
        out.push_str(
            &eval(action.trim(), values).map_err(|message| TemplateError { line, message })?,
        );
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// Line of the first CVO template field in `text`, for files that are not rendered.
pub fn mentions_cvo_fields(text: &str) -> Option<usize> {
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let action = &after[..find_close(after).unwrap_or(after.len())];
        let words: Vec<&str> = action.trim_matches(['-', ' ']).split_whitespace().collect();
        let literal = action.trim_matches(['-', ' ']);
        let cvo = matches!(words.as_slice(), [".ReleaseImage"] | [".ClusterProfile"])
            || matches!(words.as_slice(), ["index", ".Images", _])
            // `{{ "{{ $labels.x }}" }}`: how CVO's templates escape Prometheus templates.
            || (literal.starts_with(['"', '`']) && literal.contains("{{"));
        if cvo {
            return Some(line_of(text, offset + start));
        }
        offset += start + 2;
        rest = after;
    }
    None
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

/// Position of the `}}` closing an action, skipping string literals.
fn find_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
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

fn eval(action: &str, values: &TemplateValues) -> Result<String, String> {
    if let Some(lit) = string_literal(action) {
        return Ok(lit);
    }
    let words: Vec<&str> = action.split_whitespace().collect();
    match words.as_slice() {
        [".ReleaseImage"] => values.release_image.clone().ok_or_else(|| {
            "`{{.ReleaseImage}}` needs a value: pass --release-image PULLSPEC".to_owned()
        }),
        [".ClusterProfile"] => Ok(values.cluster_profile.clone()),
        ["index", ".Images", name] => {
            let name = string_literal(name).ok_or_else(|| {
                format!(
                    "`index .Images {}`: the image name must be a string",
                    excerpt(name)
                )
            })?;
            values
                .images
                .get(&name)
                .cloned()
                .ok_or_else(|| format!("image `{}` is not in image-references", excerpt(&name)))
        }
        _ => Err(format!(
            "unsupported template action `{{{{{}}}}}`: only .ReleaseImage, .ClusterProfile, `index .Images \"name\"` and string literals are rendered",
            excerpt(action)
        )),
    }
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
            "image: 'quay.io/r@sha256:1'\np: 'hypershift'\ni: quay.io/cli@sha256:2\nd: '{{ $labels.x }}'\n"
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
}
