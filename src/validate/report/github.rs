//! GitHub Actions workflow commands: `::error file=…,line=…,title=RULE::message` per finding
//! (`::warning`, `::notice` for the others), which the runner turns into annotations on the
//! pull request's files. Paths are relative to the repository root (the workspace the runner
//! checks out), with forward slashes.

use std::fmt::Write as _;
use std::path::Path;

use crate::diagnostic::{Diagnostic, Severity};

use super::{Summary, relative_path};

/// The workflow commands of `diagnostics`, then the summary line (plain text, which the log
/// shows as is). `root` is the repository root paths are made relative to.
pub fn github(diagnostics: &[Diagnostic], root: Option<&Path>) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let command = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "notice",
        };
        let _ = write!(
            out,
            "::{command} file={}",
            property(&relative_path(&d.location.file, root))
        );
        if let Some(line) = d.location.line {
            let _ = write!(out, ",line={line}");
        }
        let mut message = match &d.object {
            Some(o) => format!("{o}: {}", d.message),
            None => d.message.clone(),
        };
        if let Some(help) = &d.help {
            let _ = write!(message, "\nhelp: {help}");
        }
        let _ = writeln!(out, ",title={}::{}", property(d.rule), data(&message));
    }
    let _ = writeln!(out, "{}", Summary::of(diagnostics));
    out
}

/// A command's message, escaped as the runner's toolkit does.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command property's value: also `:` and `,`, which would end it.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Location;

    #[test]
    fn commands_with_escaped_values_and_relative_paths() {
        let d = vec![
            Diagnostic::new(
                "invalid-delete-value",
                Severity::Error,
                Location {
                    file: "/repo/rel/a,b.yaml".into(),
                    document: Some(0),
                    line: Some(3),
                },
                "100% bad\nreally",
            )
            .with_help("fix: it"),
            Diagnostic::new(
                "delete-extra-fields",
                Severity::Note,
                Location::file("rel/x.yaml"),
                "n",
            ),
        ];
        let out = github(&d, Some(Path::new("/repo")));
        let mut lines = out.lines();
        assert_eq!(
            lines.next(),
            Some(
                "::error file=rel/a%2Cb.yaml,line=3,title=invalid-delete-value::100%25 bad%0Areally%0Ahelp: fix: it"
            )
        );
        assert_eq!(
            lines.next(),
            Some("::notice file=rel/x.yaml,title=delete-extra-fields::n")
        );
        assert_eq!(lines.next(), Some("1 error, 0 warnings, 1 note"));
    }
}
