//! Diagnostics: one finding about a release (a parse problem, a validation rule hit, a
//! warning from loading), with the place it points at and the object it is about.
//!
//! The loader, the validator and later the apply engine all report through this one type so
//! that every front end (rustc-style text, JSON, SARIF) renders them the same way.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::release::ObjectId;

/// How bad a finding is. Ordered: `Note < Warning < Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
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
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(doc) = self.document {
            write!(f, " (document {doc})")?;
        }
        Ok(())
    }
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
