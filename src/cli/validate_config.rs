//! `.cvo.yaml`: the checked-in settings of `cvo validate` — rule levels, the default
//! `--profile`, `--feature-set`, `--exclude` and `--previous` — and where each effective
//! setting came from (`--print-config`).
//!
//! The file is the first `.cvo.yaml` found from the release directory upwards (from the current
//! directory when `--release` is an OCI artifact), stopping at the repository root (the
//! directory holding `.git`), or the one `--config FILE` names. Flags
//! given on the command line override it; `--rule` adds to (and overrides) its `rules:`.
//! An unknown key, rule id or level is an error naming the file and the line.
//!
//! ```yaml
//! rules:
//!   apply-and-delete: error
//!   subdirectory-ignored: off
//! profile: self-managed-high-availability
//! feature-set: Default
//! exclude: [my-component]
//! previous: ../release-4.16   # relative to the file's directory
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::CliError;
use crate::validate::levels::{Level, RuleLevels, known_rule};

/// The file name looked for (never read as a manifest of the release beside it).
pub const FILE_NAME: &str = crate::release::CONFIG_FILE;
/// Largest config file read.
const MAX_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    #[serde(default)]
    rules: Option<HashMap<Spanned<String>, Spanned<String>>>,
    profile: Option<Spanned<String>>,
    feature_set: Option<Spanned<String>>,
    exclude: Option<Spanned<Vec<String>>>,
    previous: Option<Spanned<String>>,
}

/// A setting with where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    /// `file:line`, `command line` or `default`.
    pub source: String,
}

/// A config file as read: its settings, each with its `file:line`.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The file, when one was found or named.
    pub file: Option<PathBuf>,
    pub rules: Vec<(&'static str, Sourced<Level>)>,
    pub profile: Option<Sourced<String>>,
    pub feature_set: Option<Sourced<String>>,
    pub exclude: Option<Sourced<Vec<String>>>,
    /// Resolved against the file's directory.
    pub previous: Option<Sourced<PathBuf>>,
}

impl Config {
    /// The config of a release: `explicit` when given, else the first [`FILE_NAME`] from
    /// `start` upwards to the repository root, else none.
    pub fn find(explicit: Option<&Path>, start: SearchFrom<'_>) -> Result<Config, CliError> {
        if let Some(file) = explicit {
            return Config::read(file);
        }
        let from = match start {
            SearchFrom::ReleaseDir(dir) => std::path::absolute(dir),
            SearchFrom::CurrentDir => std::env::current_dir(),
        };
        let Ok(from) = from else {
            return Ok(Config::default());
        };
        for dir in from.ancestors() {
            let candidate = dir.join(FILE_NAME);
            if candidate.is_file() {
                return Config::read_as(&candidate, Some((start, &from)));
            }
            if dir.join(".git").exists() {
                break;
            }
        }
        Ok(Config::default())
    }

    /// Reads and checks `file`, named with `--config`.
    pub fn read(file: &Path) -> Result<Config, CliError> {
        Config::read_as(file, None)
    }

    /// Reads and checks `file`: named with `--config`, or found from a directory upwards
    /// (`found_from`: where the search started, as what; its errors say so).
    fn read_as(
        file: &Path,
        found_from: Option<(SearchFrom<'_>, &Path)>,
    ) -> Result<Config, CliError> {
        let shown = file.display();
        let what_to_do = what_to_do(found_from);
        let fail =
            |why: String| CliError::usage(format_args!("config file {shown}: {why}; {what_to_do}"));
        let size = std::fs::metadata(file)
            .map_err(|e| fail(format!("cannot read it: {e}")))?
            .len();
        if size > MAX_BYTES {
            return Err(fail(format!(
                "{size} bytes, more than a config file holds ({MAX_BYTES} at most)"
            )));
        }
        let text =
            std::fs::read_to_string(file).map_err(|e| fail(format!("cannot read it: {e}")))?;
        Config::parse(file, &text).map_err(|e| CliError::usage(format_args!("{e}; {what_to_do}")))
    }

    fn parse(file: &Path, text: &str) -> Result<Config, CliError> {
        let shown = file.display();
        let at = |line: u64| format!("{shown}:{line}");
        let raw: Raw = if text.trim().is_empty() {
            Raw {
                rules: None,
                profile: None,
                feature_set: None,
                exclude: None,
                previous: None,
            }
        } else {
            serde_saphyr::from_str(text).map_err(|e| {
                let line = e.location().map(|l| l.line()).unwrap_or(1).max(1);
                CliError::usage(format_args!(
                    "config file {}: {}; the keys are rules, profile, feature-set, exclude and previous (docs/ci.md)",
                    at(line),
                    first_line_of(&e.to_string())
                ))
            })?
        };
        let mut rules = Vec::new();
        let mut entries: Vec<_> = raw.rules.unwrap_or_default().into_iter().collect();
        entries.sort_by_key(|(k, _)| k.referenced.line());
        for (id, level) in entries {
            let rule = known_rule(&id.value).map_err(|e| {
                CliError::usage(format_args!(
                    "config file {}: rules: {e}",
                    at(id.referenced.line())
                ))
            })?;
            let parsed: Level = level.value.parse().map_err(|e| {
                CliError::usage(format_args!(
                    "config file {}: rules: {}: {e}",
                    at(level.referenced.line()),
                    rule.id
                ))
            })?;
            crate::validate::levels::fixed_at_error(rule, parsed).map_err(|e| {
                CliError::usage(format_args!(
                    "config file {}: rules: {e}",
                    at(level.referenced.line())
                ))
            })?;
            rules.push((
                rule.id,
                Sourced {
                    value: parsed,
                    source: at(id.referenced.line()),
                },
            ));
        }
        let sourced = |s: Spanned<String>| Sourced {
            source: at(s.referenced.line()),
            value: s.value,
        };
        let base = file.parent().unwrap_or(Path::new("."));
        Ok(Config {
            file: Some(file.to_path_buf()),
            rules,
            profile: raw.profile.map(sourced),
            feature_set: raw.feature_set.map(sourced),
            exclude: raw.exclude.map(|e| Sourced {
                source: at(e.referenced.line()),
                value: e.value,
            }),
            previous: raw.previous.map(|p| Sourced {
                source: at(p.referenced.line()),
                value: base.join(p.value),
            }),
        })
    }

    /// The rule levels of the file, then of `--rule` (which win), each with its source.
    pub fn levels(
        &self,
        flags: &[(&'static str, Level)],
    ) -> (RuleLevels, HashMap<&'static str, String>) {
        let mut levels = RuleLevels::default();
        let mut sources = HashMap::new();
        for (id, level) in &self.rules {
            levels.set(id, level.value);
            sources.insert(*id, level.source.clone());
        }
        for (id, level) in flags {
            levels.set(id, *level);
            sources.insert(*id, "command line (--rule)".to_owned());
        }
        (levels, sources)
    }
}

/// What to do about a config file that cannot be used: one named with `--config` or one found
/// from a directory upwards.
fn what_to_do(found_from: Option<(SearchFrom<'_>, &Path)>) -> String {
    let whence = match found_from {
        None => return "fix the file, or the path given to --config".to_owned(),
        Some((SearchFrom::ReleaseDir(_), dir)) => {
            format!("the release directory {}", dir.display())
        }
        Some((SearchFrom::CurrentDir, dir)) => format!(
            "the current directory {} (the release is an OCI artifact)",
            dir.display()
        ),
    };
    format!(
        "the file was found from {whence} upwards (the first {FILE_NAME} up to the repository root): fix it, or name another with --config"
    )
}

/// Where the search for [`FILE_NAME`] starts.
#[derive(Clone, Copy, Debug)]
pub enum SearchFrom<'a> {
    /// A release directory (`--release DIR`).
    ReleaseDir(&'a Path),
    /// The current directory: the release is an OCI artifact, whose files have no place in
    /// the repository.
    CurrentDir,
}

/// The parser's message without its position prefix and source excerpt.
fn first_line_of(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let plain = match first.split_once(": ") {
        Some((at, rest)) if at.starts_with("line ") => rest,
        _ => first,
    };
    crate::release::typed::plain_serde_message(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(Path::new("/r/.cvo.yaml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn settings_with_their_lines() {
        let c = parse(
            "rules:\n  file-name-convention: error\n  subdirectory-ignored: off\nprofile: hypershift\nexclude: [a, b]\nprevious: ../old\n",
        )
        .unwrap();
        assert_eq!(c.rules.len(), 2);
        assert_eq!(c.rules[0].0, "file-name-convention");
        assert_eq!(c.rules[0].1.value, Level::Error);
        assert_eq!(c.rules[1].1.source, "/r/.cvo.yaml:3");
        assert_eq!(c.profile.unwrap().source, "/r/.cvo.yaml:4");
        assert_eq!(c.exclude.unwrap().value, ["a", "b"]);
        assert_eq!(c.previous.unwrap().value, PathBuf::from("/r/../old"));
    }

    #[test]
    fn unknown_keys_ids_and_levels_name_the_line() {
        let e = parse("profile: x\nfeature_set: Default\n").unwrap_err();
        assert!(e.contains("/r/.cvo.yaml:2"), "{e}");
        let e = parse("rules:\n  apply-and-delete: error\n  aply-and-delet: off\n").unwrap_err();
        assert!(e.contains("/r/.cvo.yaml:3"), "{e}");
        assert!(e.contains("did you mean `apply-and-delete`"), "{e}");
        let e = parse("rules:\n  apply-and-delete: fatal\n").unwrap_err();
        assert!(e.contains("/r/.cvo.yaml:2") && e.contains("fatal"), "{e}");
        // A loader error that stops apply is never lowered (fail closed).
        let e = parse("rules:\n  apply-and-delete: warning\n").unwrap_err();
        assert!(
            e.contains("/r/.cvo.yaml:2") && e.contains("cannot be lowered"),
            "{e}"
        );
    }
}
