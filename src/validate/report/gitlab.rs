//! GitLab Code Quality JSON (a subset of the Code Climate issue format): an array of issues
//! with `description`, `check_name`, `fingerprint`, `severity` and `location.path` /
//! `location.lines.begin`, the fields GitLab's merge-request widget needs.
//!
//! The fingerprint is a SHA-256 over the rule, the file, the object and the message with its
//! location references taken out (`file.yaml:12`, `line 3`, `lines 3 and 9`, `document 2`)
//! — not the line, so an unrelated edit above a finding does not make it "new" — plus the
//! occurrence number among findings that agree on all of those, so fingerprints are unique in
//! a report and the same on every run over the same input.

use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use serde_json::{Value, json};

use crate::diagnostic::{Diagnostic, Severity};

use super::relative_path;

/// The Code Quality report of `diagnostics`; paths relative to `root` (the repository root).
pub fn gitlab(diagnostics: &[Diagnostic], root: Option<&Path>) -> Value {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let issues: Vec<Value> = diagnostics
        .iter()
        .map(|d| {
            let path = relative_path(&d.location.file, root);
            let object = d.object.as_ref().map(|o| o.to_string()).unwrap_or_default();
            let key = format!(
                "{}\0{path}\0{object}\0{}",
                d.rule,
                without_locations(&d.message)
            );
            let n = seen.entry(key.clone()).or_insert(0);
            *n += 1;
            let digest =
                ring::digest::digest(&ring::digest::SHA256, format!("{key}\0{}", *n).as_bytes());
            let fingerprint: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
            let description = match &d.object {
                Some(o) => format!("{o}: {}", d.message),
                None => d.message.clone(),
            };
            json!({
                "type": "issue",
                "description": description,
                "check_name": d.rule,
                "fingerprint": fingerprint,
                "severity": severity(d.severity),
                "categories": ["Bug Risk"],
                "location": {
                    "path": path,
                    "lines": { "begin": d.location.line.unwrap_or(1).max(1) },
                },
            })
        })
        .collect();
    Value::Array(issues)
}

/// `message` without the line and document numbers of the locations it names, which move
/// when lines are added above them.
fn without_locations(message: &str) -> String {
    static LINES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(lines?|documents?)\s+\d+(\s*(,|and)\s*\d+)*").expect("valid pattern")
    });
    static FILE_LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"([^\s:]):\d+\b").expect("valid pattern"));
    let message = LINES.replace_all(message, "$1");
    FILE_LINE.replace_all(&message, "$1").into_owned()
}

/// GitLab's scale is info, minor, major, critical, blocker: an error (which fails the job)
/// is major, a warning minor, a note info.
fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "major",
        Severity::Warning => "minor",
        Severity::Note => "info",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Location;

    #[test]
    fn fingerprints_are_unique_and_stable() {
        let one = Diagnostic::new(
            "file-name-convention",
            Severity::Warning,
            Location::file("/repo/rel/x.yaml"),
            "name",
        );
        let d = vec![one.clone(), one];
        let a = gitlab(&d, Some(Path::new("/repo")));
        let b = gitlab(&d, Some(Path::new("/repo")));
        assert_eq!(a, b);
        assert_ne!(a[0]["fingerprint"], a[1]["fingerprint"]);
        assert_eq!(a[0]["location"]["path"], "rel/x.yaml");
        assert_eq!(a[0]["location"]["lines"]["begin"], 1);
        assert_eq!(a[0]["severity"], "minor");
        assert_eq!(a[0]["check_name"], "file-name-convention");
    }

    #[test]
    fn location_references_are_left_out_of_the_fingerprint() {
        assert_eq!(
            without_locations("the key `a` is written twice in one mapping (lines 3 and 12): x"),
            "the key `a` is written twice in one mapping (lines): x"
        );
        assert_eq!(
            without_locations("without `X` (at rel/0000_a.yaml:14 (document 2)) and"),
            "without `X` (at rel/0000_a.yaml (document)) and"
        );
        assert_eq!(
            without_locations("applies 2 object(s) in it: ConfigMap ns/a1"),
            "applies 2 object(s) in it: ConfigMap ns/a1"
        );
        let at = |line, message: &str| {
            Diagnostic::new(
                "duplicate-key",
                Severity::Warning,
                Location {
                    file: "/repo/rel/x.yaml".into(),
                    document: Some(0),
                    line: Some(line),
                },
                message,
            )
        };
        let before = gitlab(
            &[
                at(3, "key `a` (lines 3 and 5)"),
                at(4, "key `b` (lines 4 and 6)"),
            ],
            Some(Path::new("/repo")),
        );
        let after = gitlab(
            &[
                at(4, "key `a` (lines 4 and 6)"),
                at(5, "key `b` (lines 5 and 7)"),
            ],
            Some(Path::new("/repo")),
        );
        assert_eq!(before[0]["fingerprint"], after[0]["fingerprint"]);
        assert_eq!(before[1]["fingerprint"], after[1]["fingerprint"]);
        assert_ne!(before[0]["fingerprint"], before[1]["fingerprint"]);
    }
}
