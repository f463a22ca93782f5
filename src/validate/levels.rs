//! Rule levels: how each rule's findings are reported — `off`, `note`, `warning` or `error` —
//! from the rule's default ([`Rule::default_level`], which may be `off`), overridden per rule by
//! the config file's `rules:` map and the command line's `--rule ID=LEVEL` (the same ids and
//! levels; the command line wins).
//!
//! A level set for a rule applies to every finding of it (a rule that reports some findings as
//! warnings and others as errors reports all at the set level); without one, findings keep the
//! severity the rule gave them, and a rule that is off by default reports nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::diagnostic::{Diagnostic, Severity};

use super::rules::{RULES, Rule, rule_by_id};

/// How a rule's findings are reported. Ordered: `Off < Note < Warning < Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Not reported at all.
    Off,
    Note,
    Warning,
    Error,
}

impl Level {
    /// Every level, as written in `--rule` and the config file.
    pub const NAMES: &[&str] = &["error", "warning", "note", "off"];

    /// The level that reports at `severity`.
    pub const fn of(severity: Severity) -> Level {
        match severity {
            Severity::Note => Level::Note,
            Severity::Warning => Level::Warning,
            Severity::Error => Level::Error,
        }
    }

    /// The severity findings get at this level; `None` when off.
    pub const fn severity(self) -> Option<Severity> {
        match self {
            Level::Off => None,
            Level::Note => Some(Severity::Note),
            Level::Warning => Some(Severity::Warning),
            Level::Error => Some(Severity::Error),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Off => "off",
            Level::Note => "note",
            Level::Warning => "warning",
            Level::Error => "error",
        })
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Level::Off),
            "note" => Ok(Level::Note),
            "warning" => Ok(Level::Warning),
            "error" => Ok(Level::Error),
            other => Err(format!(
                "`{other}` is not a rule level: use one of {}",
                Level::NAMES.join(", ")
            )),
        }
    }
}

/// A registered rule by id, or an error naming the id with the nearest registered one.
pub fn known_rule(id: &str) -> Result<&'static Rule, String> {
    if let Some(rule) = rule_by_id(id) {
        return Ok(rule);
    }
    let nearest = RULES
        .iter()
        .map(|r| (strsim::levenshtein(id, r.id), r.id))
        .min()
        .filter(|(distance, _)| *distance <= 3 || id.len() > 6 && *distance <= id.len() / 3);
    Err(match nearest {
        Some((_, near)) => format!(
            "`{id}` is not a rule id (did you mean `{near}`?); docs/validation.md lists them"
        ),
        None => format!("`{id}` is not a rule id; docs/validation.md lists them"),
    })
}

/// Why `level` cannot be set for `rule`, if it cannot: a loader error that makes `apply` and
/// the operator refuse the release is never reported below error, so that CI never passes a
/// release the cluster would refuse (fail closed). The two errors the CVO accepts
/// ([`super::rules::ERRORS_ONLY_IN_VALIDATE`]) may be lowered.
pub fn fixed_at_error(rule: &Rule, level: Level) -> Result<(), String> {
    let fixed = rule.from_loader
        && rule.severity == Severity::Error
        && !super::rules::ERRORS_ONLY_IN_VALIDATE.contains(&rule.id);
    if fixed && level != Level::Error {
        return Err(format!(
            "`{}` cannot be lowered or turned off: `apply` and the operator refuse a release with this error, so `validate` always reports it",
            rule.id
        ));
    }
    Ok(())
}

/// `ID=LEVEL` as `--rule` takes it.
pub fn parse_rule_level(arg: &str) -> Result<(&'static str, Level), String> {
    let Some((id, level)) = arg.split_once('=') else {
        return Err(format!(
            "`{arg}` is not ID=LEVEL (e.g. subdirectory-ignored=off; levels: {})",
            Level::NAMES.join(", ")
        ));
    };
    let rule = known_rule(id.trim())?;
    let level: Level = level.trim().parse()?;
    fixed_at_error(rule, level)?;
    Ok((rule.id, level))
}

/// The levels set for rules (by the config file, then the command line); rules not in it
/// have their default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleLevels {
    set: BTreeMap<&'static str, Level>,
}

impl RuleLevels {
    /// Sets `rule` to `level` (a later setting wins).
    pub fn set(&mut self, rule: &'static str, level: Level) {
        self.set.insert(rule, level);
    }

    /// The level set for `rule`, if any.
    pub fn get(&self, rule: &str) -> Option<Level> {
        self.set.get(rule).copied()
    }

    /// The level `rule` reports at: the one set, else its default (unregistered ids: on, at
    /// the severity of each finding).
    pub fn level(&self, rule: &str) -> Option<Level> {
        self.get(rule)
            .or_else(|| rule_by_id(rule).map(Rule::default_level))
    }

    /// `diagnostics` at these levels: findings of rules that are off are dropped, those of a
    /// rule with a level set take its severity, the others stay as they are.
    pub fn apply(&self, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
        diagnostics
            .into_iter()
            .filter_map(|mut d| {
                match self.get(d.rule) {
                    Some(level) => d.severity = level.severity()?,
                    None => {
                        if rule_by_id(d.rule).is_some_and(|r| r.off_by_default) {
                            return None;
                        }
                    }
                }
                Some(d)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loader_error_that_stops_apply_cannot_be_lowered() {
        for arg in [
            "parse-error=off",
            "repeated-document=warning",
            "duplicate-identity=note",
        ] {
            let e = parse_rule_level(arg).unwrap_err();
            assert!(e.contains("cannot be lowered or turned off"), "{arg}: {e}");
        }
        assert!(parse_rule_level("parse-error=error").is_ok());
        assert!(parse_rule_level("non-string-annotation=warning").is_ok());
        assert!(parse_rule_level("file-name-convention=off").is_ok());
    }
    use crate::diagnostic::Location;
    use crate::validate::rules;

    #[test]
    fn rule_arguments_parse_and_unknown_ids_get_a_suggestion() {
        assert_eq!(
            parse_rule_level("subdirectory-ignored=off"),
            Ok((rules::SUBDIRECTORY_IGNORED, Level::Off))
        );
        let e = parse_rule_level("aply-and-delete=error").unwrap_err();
        assert!(e.contains("did you mean `apply-and-delete`"), "{e}");
        let e = parse_rule_level("zzz=error").unwrap_err();
        assert!(!e.contains("did you mean"), "{e}");
        assert!(parse_rule_level("apply-and-delete=fatal").is_err());
        assert!(parse_rule_level("apply-and-delete").is_err());
    }

    #[test]
    fn levels_drop_and_change_findings_and_off_can_be_a_default() {
        let d = |rule| Diagnostic::new(rule, Severity::Warning, Location::file("f.yaml"), "m");
        let mut levels = RuleLevels::default();
        levels.set(rules::FILE_NAME_CONVENTION, Level::Error);
        levels.set(rules::SUBDIRECTORY_IGNORED, Level::Off);
        let out = levels.apply(vec![
            d(rules::FILE_NAME_CONVENTION),
            d(rules::SUBDIRECTORY_IGNORED),
            d(rules::DROPPED_FIELD),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].severity, Severity::Error);
        assert_eq!(out[1].severity, Severity::Warning);

        let off = Rule {
            id: "x",
            severity: Severity::Note,
            summary: "s",
            help: "h",
            from_loader: false,
            off_by_default: false,
        }
        .off_by_default();
        assert_eq!(off.default_level(), Level::Off);
        assert_eq!(
            rule_by_id(rules::DROPPED_FIELD).unwrap().default_level(),
            Level::Warning
        );
    }
}
