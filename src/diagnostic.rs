//! Diagnostics: one finding about a release (a parse problem, a validation rule hit, a
//! warning from loading), with the place it points at and the object it is about.
//!
//! The loader, the validator and later the apply engine all report through this one type so
//! that every front end (rustc-style text, JSON, SARIF) renders them the same way.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::release::ObjectId;

/// How bad a finding is. Ordered: `Note < Warning < Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// Where a finding points: a file, and when known the YAML document in it (zero-based index
/// counting every document of the file, empty ones included) and a one-based line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Location {
    #[serde(serialize_with = "serialize_path")]
    pub file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl Location {
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Location {
            file: file.into(),
            document: None,
            line: None,
        }
    }
}

impl fmt::Display for Location {
    /// `path/to/file.yaml:12 (document 3)`: the form editors and CI logs turn into links.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escaped_path(&self.file))?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(doc) = self.document {
            write!(f, " (document {doc})")?;
        }
        Ok(())
    }
}

fn serialize_path<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&escaped_path(path))
}

/// A path as text that shows every file distinctly on one line: control characters are
/// escaped (`\n`, `\t`, `\u{1b}`), a backslash is doubled, and bytes that are not UTF-8 are
/// shown as `\xFF`. Ordinary paths come out unchanged.
pub fn escaped_path(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped(&mut out, c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\\' => out.push_str("\\\\"),
        c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
        c => out.push(c),
    }
}

/// How many characters of the input a message quotes at most.
pub const EXCERPT_CHARS: usize = 200;

/// A piece of the release's input for a message: control characters escaped, at most
/// [`EXCERPT_CHARS`] characters (then `…`).
pub fn excerpt(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == EXCERPT_CHARS {
            out.push('…');
            break;
        }
        push_escaped(&mut out, c);
    }
    out
}

/// One finding. `rule` is a stable id documented in `docs/validation.md`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub rule: &'static str,
    pub severity: Severity,
    pub location: Location,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectId>,
    pub message: String,
    /// What to do about it, in one sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(
        rule: &'static str,
        severity: Severity,
        location: Location,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            rule,
            severity,
            location,
            object: None,
            message: message.into(),
            help: None,
        }
    }

    pub fn with_object(mut self, object: ObjectId) -> Self {
        self.object = Some(object);
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    /// rustc style: `error[rule]: message` then `  --> file:line`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]: ", self.severity, self.rule)?;
        if let Some(object) = &self.object {
            write!(f, "{object}: ")?;
        }
        writeln!(f, "{}", self.message)?;
        write!(f, "  --> {}", self.location)?;
        if let Some(help) = &self.help {
            write!(f, "\n   = help: {help}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_on_one_line() {
        assert_eq!(excerpt("a\nb"), "a\\nb");
        let long = excerpt(&"x".repeat(1000));
        assert_eq!(long.chars().count(), EXCERPT_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[cfg(unix)]
    #[test]
    fn paths_are_escaped_and_distinct() {
        use std::os::unix::ffi::OsStrExt;
        let path = |b: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(b));
        assert_eq!(escaped_path(&path(b"dir/a\nb.yaml")), "dir/a\\nb.yaml");
        assert_eq!(escaped_path(&path(b"x\xff.yaml")), "x\\xFF.yaml");
        assert_ne!(
            escaped_path(&path(b"x\xfe.yaml")),
            escaped_path(&path(b"x\xff.yaml"))
        );
        assert_eq!(
            escaped_path(Path::new("plain/0000_10_a.yaml")),
            "plain/0000_10_a.yaml"
        );
    }
}
