//! Rendering findings: rustc-style text, JSON, SARIF 2.1.0 for code-scanning services, and
//! the forms CI systems render inline: JUnit XML ([`junit`]), GitHub workflow commands
//! ([`github`]) and GitLab Code Quality JSON ([`gitlab`]).
//!
//! All six forms carry the same findings — rule id, severity, file and line, object, message,
//! help — so a CI job can switch format without losing anything.

mod github;
mod gitlab;
mod junit;

use std::fmt::Write as _;
use std::path::{Component, Path};

use serde_json::{Value, json};

use crate::diagnostic::{Diagnostic, Severity};

use super::rules::RULES;
use crate::release::left_out::{LeftOut, default_reading};

/// Output format of `cvo validate`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `error[rule]: message` / `  --> file:line` / `   = help: …`, like rustc and clippy.
    #[default]
    Text,
    /// `{"diagnostics": [...], "summary": {...}}`.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
    /// JUnit XML: a test suite per rule, a test case per finding, a failure per error (Jenkins
    /// and most CI dashboards).
    Junit,
    /// GitHub Actions workflow commands (`::error file=…,line=…,title=RULE::…`): annotations.
    Github,
    /// GitLab Code Quality JSON, for the merge request's code-quality widget.
    Gitlab,
}

/// Counts by severity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub notes: usize,
}

impl Summary {
    pub fn of(diagnostics: &[Diagnostic]) -> Self {
        let mut s = Summary::default();
        for d in diagnostics {
            match d.severity {
                Severity::Error => s.errors += 1,
                Severity::Warning => s.warnings += 1,
                Severity::Note => s.notes += 1,
            }
        }
        s
    }

    pub fn has_errors(&self) -> bool {
        self.errors > 0
    }
}

impl std::fmt::Display for Summary {
    /// `2 errors, 1 warning, 0 notes`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        write!(
            f,
            "{}, {}, {}",
            plural(self.errors, "error"),
            plural(self.warnings, "warning"),
            plural(self.notes, "note")
        )
    }
}

/// Renders `diagnostics` in `format`. `base` is the directory SARIF URIs, GitHub and GitLab
/// paths are made relative to (normally the repository root in CI).
pub fn render(format: Format, diagnostics: &[Diagnostic], base: Option<&Path>) -> String {
    render_report(format, diagnostics, &[], base)
}

/// [`render`], with what the release leaves out in each profile it was read in (`left_out`,
/// one per reading): a line per reading before the text summary, `summary.excluded` and
/// `summary.profiles` in JSON, the run's `properties` in SARIF.
pub fn render_report(
    format: Format,
    diagnostics: &[Diagnostic],
    left_out: &[LeftOut],
    base: Option<&Path>,
) -> String {
    match format {
        Format::Text => text_with(diagnostics, left_out),
        Format::Json => pretty(&json_report_with(diagnostics, left_out)),
        Format::Sarif => {
            let mut log = sarif(diagnostics, base);
            if !left_out.is_empty() {
                log["runs"][0]["properties"] = excluded_json(left_out);
            }
            pretty(&log)
        }
        Format::Junit => junit::junit(diagnostics),
        Format::Github => github::github(diagnostics, base),
        Format::Gitlab => pretty(&gitlab::gitlab(diagnostics, base)),
    }
}

/// `{"excluded": {...} or null, "profiles": [{"profile", "manifests", "excluded"}]}`:
/// `excluded` is the reading a cluster without a profile choice gets ([`default_reading`]).
fn excluded_json(left_out: &[LeftOut]) -> Value {
    json!({
        "excluded": default_reading(left_out).map(LeftOut::json),
        "profiles": left_out.iter().map(|l| json!({
            "profile": l.profile,
            "manifests": l.total,
            "excluded": l.json(),
        })).collect::<Vec<_>>(),
    })
}

fn pretty(value: &Value) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// rustc-style text: every finding, a blank line after each, then the summary line.
pub fn text(diagnostics: &[Diagnostic]) -> String {
    text_with(diagnostics, &[])
}

/// [`text`], with a line per reading of what it leaves out before the summary line.
fn text_with(diagnostics: &[Diagnostic], left_out: &[LeftOut]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let _ = writeln!(out, "{d}\n");
    }
    for l in left_out {
        let _ = writeln!(out, "{}", l.line());
    }
    let _ = writeln!(out, "{}", Summary::of(diagnostics));
    out
}

/// `{"diagnostics": [...], "summary": {"errors", "warnings", "notes"}}`. Every diagnostic has
/// the same keys; absent values are `null`.
pub fn json_report(diagnostics: &[Diagnostic]) -> Value {
    json_report_with(diagnostics, &[])
}

/// [`json_report`], with `summary.excluded` and `summary.profiles` when `left_out` is given.
fn json_report_with(diagnostics: &[Diagnostic], left_out: &[LeftOut]) -> Value {
    let summary = Summary::of(diagnostics);
    let mut report = json!({
        "diagnostics": diagnostics.iter().map(json_diagnostic).collect::<Vec<_>>(),
        "summary": {
            "errors": summary.errors,
            "warnings": summary.warnings,
            "notes": summary.notes,
        },
    });
    if !left_out.is_empty()
        && let (Some(summary), Value::Object(excluded)) =
            (report["summary"].as_object_mut(), excluded_json(left_out))
    {
        summary.extend(excluded);
    }
    report
}

fn json_diagnostic(d: &Diagnostic) -> Value {
    json!({
        "rule": d.rule,
        "severity": d.severity.to_string(),
        "location": {
            "file": crate::diagnostic::escaped_path(&d.location.file),
            "document": d.location.document,
            "line": d.location.line,
        },
        "object": d.object.as_ref().map(|o| json!({
            "group": o.group,
            "kind": o.kind,
            "namespace": o.namespace,
            "name": o.name,
        })),
        "message": d.message,
        "help": d.help,
    })
}

fn sarif_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// A SARIF 2.1.0 log with one run; every registered rule is listed in the driver.
pub fn sarif(diagnostics: &[Diagnostic], base: Option<&Path>) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": r.summary },
                "help": { "text": r.help },
                "defaultConfiguration": {
                    "level": sarif_level(r.severity),
                    "enabled": !r.off_by_default,
                },
            })
        })
        .collect();
    let results: Vec<Value> = diagnostics
        .iter()
        .map(|d| {
            let mut text = match &d.object {
                Some(o) => format!("{o}: {}", d.message),
                None => d.message.clone(),
            };
            if let Some(help) = &d.help {
                let _ = write!(text, "\nhelp: {help}");
            }
            let mut result = json!({
                "ruleId": d.rule,
                "level": sarif_level(d.severity),
                "message": { "text": text },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": sarif_uri(&d.location.file, base) },
                        "region": { "startLine": d.location.line.unwrap_or(1).max(1) },
                    }
                }],
            });
            if let Some(index) = RULES.iter().position(|r| r.id == d.rule) {
                result["ruleIndex"] = json!(index);
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "cvo",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "results": results,
        }],
    })
}

/// A relative URI with forward slashes for `file`: relative to `base` when it lies below it,
/// as written when it is already relative, `file://` for other absolute paths.
pub fn sarif_uri(file: &Path, base: Option<&Path>) -> String {
    let relative = match base {
        Some(base) if file.is_absolute() => file.strip_prefix(base).unwrap_or(file),
        _ => file,
    };
    let mut parts = Vec::new();
    for c in relative.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => parts.push("..".to_owned()),
            // Escaped first, so two names that differ only in non-UTF-8 bytes stay distinct.
            Component::Normal(s) => parts.push(encode(&crate::diagnostic::escaped_path(
                std::path::Path::new(s),
            ))),
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let path = parts.join("/");
    if relative.is_absolute() {
        format!("file:///{path}")
    } else {
        path
    }
}

/// `file` relative to `base` when it lies below it (else as it is), both with their `.` and
/// `..` components resolved lexically ([`lexically_normal`]), with forward slashes and
/// escaped as [`crate::diagnostic::escaped_path`] does, not percent-encoded: the path GitHub
/// annotations and GitLab's code-quality report match against the repository's files.
pub fn relative_path(file: &Path, base: Option<&Path>) -> String {
    let file = lexically_normal(file);
    let relative = match base {
        Some(base) if file.is_absolute() => {
            let base = lexically_normal(base);
            file.strip_prefix(&base)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| file.clone())
        }
        _ => file,
    };
    let parts: Vec<String> = relative
        .components()
        .filter_map(|c| match c {
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
            Component::ParentDir => Some("..".to_owned()),
            Component::Normal(s) => Some(crate::diagnostic::escaped_path(Path::new(s))),
        })
        .collect();
    let path = parts.join("/");
    if relative.is_absolute() {
        format!("/{path}")
    } else {
        path
    }
}

/// `path` with `.` components dropped and each `..` taking out the component before it, without
/// reading the file system (`/repo/sub/../rel` is `/repo/rel`); a relative path keeps the
/// `..` that lead out of it, an absolute one never goes above its root.
pub fn lexically_normal(path: &Path) -> std::path::PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return std::path::PathBuf::from(".");
    }
    out.iter().collect()
}

/// Percent-encodes what may not appear in a URI path segment.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_lexically_before_they_are_made_relative() {
        let root = Some(Path::new("/repo"));
        assert_eq!(
            relative_path(Path::new("/repo/sub/../x/./rel/a.yaml"), root),
            "x/rel/a.yaml"
        );
        assert_eq!(
            relative_path(Path::new("/repo/./rel/a.yaml"), Some(Path::new("/repo/."))),
            "rel/a.yaml"
        );
        assert_eq!(
            relative_path(Path::new("/repo/../other/a.yaml"), root),
            "/other/a.yaml"
        );
        assert_eq!(
            lexically_normal(Path::new("../a/./b/../c")),
            Path::new("../a/c")
        );
        assert_eq!(lexically_normal(Path::new("/../a")), Path::new("/a"));
        assert_eq!(lexically_normal(Path::new("a/..")), Path::new("."));
    }
    use crate::diagnostic::Location;
    use crate::release::ObjectId;

    fn diagnostics() -> Vec<Diagnostic> {
        vec![
            Diagnostic::new(
                "invalid-delete-value",
                Severity::Error,
                Location {
                    file: "rel/0000_50_a_00_x.yaml".into(),
                    document: Some(0),
                    line: Some(3),
                },
                "bad",
            )
            .with_object(ObjectId::new("", "ConfigMap", Some("ns"), "x"))
            .with_help("fix it"),
            Diagnostic::new(
                "file-name-convention",
                Severity::Warning,
                Location::file("rel/x.yaml"),
                "name",
            ),
        ]
    }

    #[test]
    fn text_is_rustc_style_with_summary() {
        let out = text(&diagnostics());
        assert!(out.starts_with(
            "error[invalid-delete-value]: ConfigMap ns/x: bad\n  --> rel/0000_50_a_00_x.yaml:3"
        ));
        assert!(out.contains("   = help: fix it"));
        assert!(out.ends_with("1 error, 1 warning, 0 notes\n"));
    }

    #[test]
    fn json_shape_is_stable() {
        let v = json_report(&diagnostics());
        assert_eq!(v["summary"]["errors"], 1);
        assert_eq!(v["diagnostics"][0]["object"]["kind"], "ConfigMap");
        assert_eq!(v["diagnostics"][1]["object"], Value::Null);
        assert_eq!(v["diagnostics"][1]["location"]["line"], Value::Null);
    }

    #[test]
    fn sarif_has_what_code_scanning_needs() {
        let v = sarif(&diagnostics(), None);
        assert_eq!(v["version"], "2.1.0");
        let run = &v["runs"][0];
        assert_eq!(run["tool"]["driver"]["name"], "cvo");
        assert_eq!(
            run["tool"]["driver"]["rules"].as_array().unwrap().len(),
            RULES.len()
        );
        let r = &run["results"][0];
        assert_eq!(r["ruleId"], "invalid-delete-value");
        assert_eq!(r["level"], "error");
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "rel/0000_50_a_00_x.yaml");
        assert_eq!(loc["region"]["startLine"], 3);
        assert_eq!(
            run["results"][1]["locations"][0]["physicalLocation"]["region"]["startLine"],
            1
        );
    }

    #[test]
    fn uris_are_relative_with_forward_slashes() {
        let base = Path::new("/repo");
        assert_eq!(
            sarif_uri(Path::new("/repo/a/b c.yaml"), Some(base)),
            "a/b%20c.yaml"
        );
        assert_eq!(sarif_uri(Path::new("./a/b.yaml"), Some(base)), "a/b.yaml");
        assert_eq!(
            sarif_uri(Path::new("../x/b.yaml"), Some(base)),
            "../x/b.yaml"
        );
        assert_eq!(
            sarif_uri(Path::new("/else/b.yaml"), Some(base)),
            "file:///else/b.yaml"
        );
    }
}
