//! Suppressions: an object annotated `validate.cvo.io/ignore: "RULE[,RULE]"` with a
//! `validate.cvo.io/ignore-reason` has those rules' findings about it reported as notes that
//! carry the reason, so a reviewed exception stays visible without failing CI.
//!
//! A suppression without a reason, or naming a rule that does not exist, suppresses nothing
//! and is an `invalid-suppression` error; one that matches no finding is a
//! `stale-suppression` warning (the problem was fixed, or the rule never fired there), so
//! suppressions do not outlive their reason. A suppression of a rule that is off matches
//! nothing and is not stale: nothing could be checked. A release read in several cluster
//! profiles has its suppressions judged over all of them ([`check`] per profile, then
//! [`stale`]): one matched in any profile is not stale.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use crate::diagnostic::{Diagnostic, Severity, excerpt};
use crate::release::{Manifest, Release};

use super::levels::{Level, RuleLevels, known_rule};
use super::rules::{INVALID_SUPPRESSION, STALE_SUPPRESSION};

/// The annotation naming the suppressed rules (comma-separated ids).
pub const IGNORE: &str = "validate.cvo.io/ignore";
/// The annotation giving the reason; required.
pub const IGNORE_REASON: &str = "validate.cvo.io/ignore-reason";

/// One manifest's suppression, as written.
struct Suppression<'a> {
    manifest: &'a Manifest,
    rules: Vec<&'static str>,
    reason: String,
    used: BTreeSet<&'static str>,
}

fn annotation<'a>(manifest: &'a Manifest, key: &str) -> Option<&'a serde_json::Value> {
    manifest
        .object
        .get("metadata")?
        .get("annotations")?
        .get(key)
}

/// Where a suppression is written: the file and the YAML document in it.
type Place = (PathBuf, Option<usize>);

/// How much of each suppression of one reading of a release (one cluster profile) matched a
/// finding: the input of [`stale`]. Suppressions are `validate.cvo.io/ignore` and a CRD's
/// `release.cvo.io/allow-crd-changes` ([`super::ALLOW_ANNOTATION`]).
#[derive(Clone, Debug, Default)]
pub struct Usage {
    /// Per annotation of an annotated document (file, document, annotation key): the finding
    /// a stale suppression is reported as (its place and object), and the rules it names
    /// that matched nothing there.
    unused: Vec<((Place, &'static str), Diagnostic, BTreeSet<&'static str>)>,
}

impl Usage {
    /// Records that `annotation` of `manifest` named `unused` and they matched nothing; `at`
    /// is the finding a stale suppression is reported as.
    pub fn record(
        &mut self,
        manifest: &Manifest,
        annotation: &'static str,
        at: Diagnostic,
        unused: BTreeSet<&'static str>,
    ) {
        let place = (manifest.location.file.clone(), manifest.location.document);
        self.unused.push(((place, annotation), at, unused));
    }
}

/// `diagnostics` (already at their `levels`) with suppressed findings turned into notes, plus
/// the invalid suppressions of `release`'s manifests, and what each suppression matched, so
/// that readings of one release in several profiles can be judged together ([`stale`]).
///
/// `compared`: the release was compared with a previous release (or the cluster's CRDs);
/// without that, rules that compare ([`super::rules::compares`]) report nothing, and a
/// suppression of them is not judged.
pub fn check(
    release: &Release,
    diagnostics: Vec<Diagnostic>,
    levels: &RuleLevels,
    compared: bool,
) -> (Vec<Diagnostic>, Usage) {
    let mut problems = Vec::new();
    let mut by_place: HashMap<Place, Suppression> = HashMap::new();
    for manifest in &release.manifests {
        if let Some(suppression) = Suppression::read(manifest, &mut problems) {
            let place = (manifest.location.file.clone(), manifest.location.document);
            by_place.insert(place, suppression);
        }
    }
    let mut out: Vec<Diagnostic> = diagnostics
        .into_iter()
        .map(|d| suppress(&mut by_place, d))
        .collect();
    let usage = usage(&by_place, levels, compared);
    out.extend(levels.apply(problems));
    super::sort(&mut out);
    (out, usage)
}

impl<'a> Suppression<'a> {
    /// The suppression `manifest` writes, if any; an invalid one suppresses nothing and adds
    /// its `invalid-suppression` findings to `problems`.
    fn read(manifest: &'a Manifest, problems: &mut Vec<Diagnostic>) -> Option<Self> {
        let value = annotation(manifest, IGNORE)?;
        let Some(list) = value.as_str() else {
            problems.push(super::finding(
                INVALID_SUPPRESSION,
                manifest,
                format!("`{IGNORE}` is not a string, so it suppresses nothing"),
                format!(
                    "write `{IGNORE}: \"RULE[,RULE]\"` (a quoted, comma-separated list of rule ids)"
                ),
            ));
            return None;
        };
        let reason = annotation(manifest, IGNORE_REASON)
            .and_then(|v| v.as_str())
            .map(str::trim)
            .unwrap_or("");
        if reason.is_empty() {
            problems.push(super::finding(
                INVALID_SUPPRESSION,
                manifest,
                format!("`{IGNORE}: {}` has no `{IGNORE_REASON}`, so it suppresses nothing", excerpt(list)),
                format!("add `{IGNORE_REASON}: \"…\"` saying why the finding is acceptable (reviewers read it)"),
            ));
            return None;
        }
        let rules = suppressible_rules(manifest, list, problems);
        (!rules.is_empty()).then(|| Suppression {
            manifest,
            rules,
            reason: reason.to_owned(),
            used: BTreeSet::new(),
        })
    }
}

/// The rules `list` (comma-separated ids) names that a suppression may name; each other id
/// is an `invalid-suppression` finding in `problems`.
fn suppressible_rules(
    manifest: &Manifest,
    list: &str,
    problems: &mut Vec<Diagnostic>,
) -> Vec<&'static str> {
    let mut rules = Vec::new();
    for id in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match known_rule(id)
            .and_then(|rule| super::levels::fixed_at_error(rule, Level::Off).map(|()| rule))
        {
            Ok(rule) => rules.push(rule.id),
            Err(why) => problems.push(super::finding(
                INVALID_SUPPRESSION,
                manifest,
                format!("`{IGNORE}`: {why}, so it suppresses nothing"),
                "name rule ids exactly as reports show them (`error[RULE]`)",
            )),
        }
    }
    rules
}

/// `d`, turned into a note carrying the reason when a suppression of its object names its
/// rule (and that use recorded).
fn suppress(by_place: &mut HashMap<Place, Suppression>, mut d: Diagnostic) -> Diagnostic {
    // A finding about the whole file (no document) matches by the object it names.
    let place = by_place.values_mut().find(|s| {
        let at = &s.manifest.location;
        at.file == d.location.file
            && (d.location.document == at.document
                || d.location.document.is_none() && d.object.as_ref() == Some(&s.manifest.id))
    });
    if let Some(s) = place
        && let Some(rule) = s.rules.iter().find(|r| **r == d.rule)
    {
        s.used.insert(rule);
        if d.severity > Severity::Note {
            d.message.push_str(&format!(
                " (suppressed, was {}: {})",
                d.severity,
                excerpt(&s.reason)
            ));
        } else {
            d.message
                .push_str(&format!(" (suppressed: {})", excerpt(&s.reason)));
        }
        d.severity = Severity::Note;
    }
    d
}

/// What each suppression left unused, in place order: the rules it names that matched no
/// finding, were not off, and could be checked (a comparing rule only when `compared`).
fn usage(by_place: &HashMap<Place, Suppression>, levels: &RuleLevels, compared: bool) -> Usage {
    let mut suppressions: Vec<(&Place, &Suppression)> = by_place.iter().collect();
    suppressions.sort_by_key(|(place, _)| *place);
    let mut usage = Usage::default();
    for (_, s) in suppressions {
        let unused: BTreeSet<&'static str> = s
            .rules
            .iter()
            .copied()
            .filter(|r| {
                !s.used.contains(r)
                    && levels.level(r) != Some(Level::Off)
                    && (compared || !super::rules::compares(r))
            })
            .collect();
        let at = super::finding(STALE_SUPPRESSION, s.manifest, String::new(), String::new());
        usage.record(s.manifest, IGNORE, at, unused);
    }
    usage
}

/// The `stale-suppression` findings of a release read once per profile (`usages`, one each):
/// a suppression is stale for a rule only when it matched no finding of that rule in any
/// profile its object is part of (a finding reported in one profile only is still matched).
pub fn stale(usages: &[Usage], levels: &RuleLevels) -> Vec<Diagnostic> {
    let mut merged: BTreeMap<&(Place, &'static str), (&Diagnostic, BTreeSet<&'static str>)> =
        BTreeMap::new();
    for usage in usages {
        for (place, at, unused) in &usage.unused {
            merged
                .entry(place)
                .and_modify(|(_, all)| all.retain(|r| unused.contains(r)))
                .or_insert_with(|| (at, unused.clone()));
        }
    }
    let found = merged
        .into_iter()
        .filter(|(_, (_, unused))| !unused.is_empty())
        .map(|((_, annotation), (at, unused))| {
            let unused: Vec<&str> = unused.into_iter().collect();
            let names = unused
                .iter()
                .map(|r| format!("`{r}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut d = at.clone();
            if *annotation == IGNORE {
                d.message = format!(
                    "`{IGNORE}` suppresses {names} but no such finding is reported about this object"
                );
                d.help = Some(format!(
                    "remove {} from `{IGNORE}` (and the annotations when nothing is left)",
                    unused.join(", ")
                ));
            } else {
                d.message = format!(
                    "`{annotation}` allows {names} but no such change is reported about this CRD"
                );
                d.help = Some(format!(
                    "remove {} from `{annotation}` (the change it allowed has shipped)",
                    unused.join(", ")
                ));
            }
            d
        })
        .collect();
    levels.apply(found)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{manifest, release, rules};
    use super::*;
    use crate::validate::rules::{FILE_NAME_CONVENTION, SUBDIRECTORY_IGNORED};

    /// The findings of a release of one manifest (`yaml`), read in one profile and compared
    /// with nothing, at `levels`, with its suppressions applied and judged.
    fn run(yaml: &str, levels: &RuleLevels) -> Vec<Diagnostic> {
        let r = release(vec![manifest("rel/settings.yaml", yaml)]);
        let found = levels.apply(crate::validate::validate(&r, None));
        let (mut out, used) = check(&r, found, levels, false);
        out.extend(stale(&[used], levels));
        crate::validate::sort(&mut out);
        out
    }

    const HEAD: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  namespace: ns\n  annotations:\n";

    #[test]
    fn a_suppression_of_a_rule_that_compares_is_not_stale_without_a_comparison() {
        let found = run(
            &format!(
                "{HEAD}    validate.cvo.io/ignore: removed-without-delete,crd-enum\n    validate.cvo.io/ignore-reason: kept on purpose\n"
            ),
            &RuleLevels::default(),
        );
        assert!(!rules(&found).contains(&STALE_SUPPRESSION), "{found:?}");
    }

    #[test]
    fn a_suppressed_finding_is_a_note_with_the_reason() {
        let found = run(
            &format!(
                "{HEAD}    validate.cvo.io/ignore: file-name-convention\n    validate.cvo.io/ignore-reason: legacy name, renamed in 4.18\n"
            ),
            &RuleLevels::default(),
        );
        assert_eq!(rules(&found), [FILE_NAME_CONVENTION]);
        assert_eq!(found[0].severity, Severity::Note);
        assert!(
            found[0]
                .message
                .ends_with("(suppressed, was warning: legacy name, renamed in 4.18)"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn no_reason_unknown_ids_and_stale_suppressions_are_reported() {
        let found = run(
            &format!("{HEAD}    validate.cvo.io/ignore: file-name-convention\n"),
            &RuleLevels::default(),
        );
        assert_eq!(rules(&found), [FILE_NAME_CONVENTION, INVALID_SUPPRESSION]);
        assert_eq!(found[0].severity, Severity::Warning);

        let found = run(
            &format!(
                "{HEAD}    validate.cvo.io/ignore: \"file-name-convention, subdirectory-ignored, nope\"\n    validate.cvo.io/ignore-reason: r\n"
            ),
            &RuleLevels::default(),
        );
        assert_eq!(
            rules(&found),
            [FILE_NAME_CONVENTION, INVALID_SUPPRESSION, STALE_SUPPRESSION]
        );
        assert!(found[2].message.contains("`subdirectory-ignored`"));

        // A rule that is off cannot be checked: not stale.
        let mut levels = RuleLevels::default();
        levels.set(SUBDIRECTORY_IGNORED, Level::Off);
        let found = run(
            &format!(
                "{HEAD}    validate.cvo.io/ignore: file-name-convention,subdirectory-ignored\n    validate.cvo.io/ignore-reason: r\n"
            ),
            &levels,
        );
        assert_eq!(rules(&found), [FILE_NAME_CONVENTION]);
    }
}
