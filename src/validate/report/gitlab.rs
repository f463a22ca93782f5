//! GitLab Code Quality JSON (a subset of the Code Climate issue format): an array of issues
//! with `description`, `check_name`, `fingerprint`, `severity` and `location.path` /
//! `location.lines.begin`, the fields GitLab's merge-request widget needs.
//!
//! The fingerprint is a SHA-256 over the rule, the file, the object and the message — not the
//! line, so an unrelated edit above a finding does not make it "new" — plus the occurrence
//! number among findings that agree on all of those, so fingerprints are unique in a report
//! and the same on every run over the same input.

use std::collections::HashMap;
use std::path::Path;

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
            let key = format!("{}\0{path}\0{object}\0{}", d.rule, d.message);
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
}
