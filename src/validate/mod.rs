//! CI validation of a release: rules over a loaded [`Release`] (and optionally the release it
//! updates from), reported as [`Diagnostic`]s.
//!
//! Each concern lives in its own module; [`rules`] is the registry of every rule id with its
//! severity and one-line doc, and [`report`] renders findings as rustc-style text, JSON or
//! SARIF 2.1.0. [`validate`] is the single entry point: it returns the loader's diagnostics
//! plus every rule finding, sorted by file, line and rule so that the output is
//! deterministic. [`LeftOut`] counts what a release leaves out for a cluster, by reason, for
//! the report's summary.

mod annotation;
mod capability;
mod crd;
mod deletion_order;
mod extra_fields;
mod file_name;
pub mod levels;
mod previous;
mod profiles;
pub mod report;
pub mod rules;
mod schema;
pub mod suppression;

use crate::diagnostic::{Diagnostic, Location};
use crate::release::{Manifest, Release};

pub use crate::release::LeftOut;
pub use crd::{ALLOW_ANNOTATION, LiveCrds};
pub use levels::{Level, RuleLevels};
pub use report::{Format, Summary};
pub use rules::{RULES, Rule, rule_by_id};
pub use schema::Checked;

/// Validates `release`; with `previous`, also checks the update from it.
///
/// Returns the loader's diagnostics and every rule finding, sorted by file, line and rule.
/// Loader diagnostics without advice get their rule's default `help`.
pub fn validate(release: &Release, previous: Option<&Release>) -> Vec<Diagnostic> {
    validate_with_live(release, previous, None, &mut Checked::default())
}

/// [`validate`], with the cluster's CRDs (`cvo validate --live`): their `status.storedVersions`
/// in place of the approximation from the previous release, and, without a previous release,
/// the CRDs themselves to compare the release's with.
///
/// Every rule's findings are returned, those of rules off by default too: [`RuleLevels`]
/// decides what is reported. `checked` carries the schema findings from one selection of a
/// release (a profile) to the next ([`Checked`]).
pub fn validate_with_live(
    release: &Release,
    previous: Option<&Release>,
    live: Option<&LiveCrds>,
    checked: &mut Checked,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = release.diagnostics.clone();
    for d in &mut out {
        if rules::ERRORS_ONLY_IN_VALIDATE.contains(&d.rule) {
            d.severity = crate::diagnostic::Severity::Error;
        }
        if d.help.is_none()
            && let Some(rule) = rule_by_id(d.rule)
        {
            d.help = Some(rule.help.to_owned());
        }
    }
    out.extend(annotation::check(release));
    out.extend(deletion_order::check(release));
    out.extend(profiles::check(release));
    out.extend(profiles::check_in_no_profile(release));
    out.extend(capability::check(release));
    out.extend(extra_fields::check(release));
    out.extend(file_name::check(release));
    out.extend(schema::check(release, checked));
    if let Some(previous) = previous {
        out.extend(previous::check(release, previous));
        out.extend(capability::check_update(release, previous));
        out.extend(deletion_order::check_update(release, previous));
    }
    out.extend(crd::check(release, previous, live));
    sort(&mut out);
    out
}

/// What a report shows of `found` (the findings of [`validate_with_live`] for `release`,
/// read in one cluster profile): the findings at `levels`, with suppressions
/// (`validate.cvo.io/ignore`) and the changes each CRD allows
/// (`release.cvo.io/allow-crd-changes`) turned into notes, after the levels, so that a level
/// set for a rule does not undo a reviewed exception; and what each suppression matched, for
/// [`suppression::stale`] once every profile has been read. `previous` and `live` as given to
/// [`validate_with_live`].
pub fn report_at_levels(
    release: &Release,
    found: Vec<Diagnostic>,
    levels: &RuleLevels,
    compared_with: (Option<&Release>, Option<&LiveCrds>),
) -> (Vec<Diagnostic>, suppression::Usage) {
    let compared = compared_with.0.is_some() || compared_with.1.is_some();
    let (found, mut usage) = suppression::check(release, levels.apply(found), levels, compared);
    let found = crd::allow(release, found, levels, compared_with, &mut usage);
    (found, usage)
}

/// Sorts findings by file, line, rule (then document and message, for total determinism).
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (
            &a.location.file,
            a.location.line,
            a.rule,
            a.location.document,
        )
            .cmp(&(
                &b.location.file,
                b.location.line,
                b.rule,
                b.location.document,
            ))
            .then_with(|| a.message.cmp(&b.message))
    });
}

/// A finding of `rule` about `manifest`, at its location, with the rule's default severity.
fn finding(
    rule: &'static str,
    manifest: &Manifest,
    message: impl Into<String>,
    help: impl Into<String>,
) -> Diagnostic {
    finding_at(rule, manifest.location.clone(), message, help).with_object(manifest.id.clone())
}

/// A finding of `rule` at `location`, with the rule's default severity.
fn finding_at(
    rule: &'static str,
    location: Location,
    message: impl Into<String>,
    help: impl Into<String>,
) -> Diagnostic {
    let severity = rule_by_id(rule)
        .map(|r| r.severity)
        .expect("every rule id is registered");
    Diagnostic::new(rule, severity, location, message).with_help(help)
}

#[cfg(test)]
mod tests {
    use super::testing::{manifest, release, rules};
    use super::*;
    use crate::diagnostic::Severity;

    #[test]
    fn loader_findings_come_first_in_file_order_and_get_default_help() {
        let mut r = release(vec![
            manifest(
                "b/0000_50_a_00_x.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"no\"\n",
            ),
            manifest(
                "a/plain.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: ns\n",
            ),
        ]);
        r.diagnostics.push(Diagnostic::new(
            rules::PARSE_ERROR,
            Severity::Error,
            Location {
                file: "b/0000_50_a_00_x.yaml".into(),
                document: Some(1),
                line: Some(9),
            },
            "bad",
        ));
        let found = validate(&r, None);
        assert_eq!(
            rules(&found),
            [
                rules::FILE_NAME_CONVENTION,
                rules::INVALID_DELETE_VALUE,
                rules::PARSE_ERROR
            ]
        );
        assert!(found.iter().all(|d| d.help.is_some()));
        assert_eq!(found, validate(&r, None), "deterministic");
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Building releases in memory for the rule tests.

    use crate::diagnostic::Location;
    use crate::release::{DeleteIntent, Excluded, Manifest, ObjectId, Release, parse_file_name};

    /// A manifest from YAML text, as the loader would build it from `file` (document 0,
    /// line 1).
    pub fn manifest(file: &str, yaml: &str) -> Manifest {
        manifest_at(file, 1, yaml)
    }

    pub fn manifest_at(file: &str, line: usize, yaml: &str) -> Manifest {
        let object: serde_json::Value = serde_saphyr::from_str(yaml).expect("test YAML");
        let api_version = object["apiVersion"].as_str().unwrap().to_owned();
        let kind = object["kind"].as_str().unwrap();
        let meta = &object["metadata"];
        let id = ObjectId::new(
            ObjectId::group_of(&api_version),
            kind,
            meta["namespace"].as_str(),
            meta["name"].as_str().unwrap(),
        );
        let intent = DeleteIntent::from_annotation(
            meta.pointer("/annotations/release.openshift.io~1delete"),
        );
        let capabilities = meta
            .pointer("/annotations/capability.openshift.io~1name")
            .and_then(|v| v.as_str())
            .map(crate::release::capability::split_annotation)
            .unwrap_or_default();
        Manifest {
            id,
            api_version,
            location: Location {
                file: file.into(),
                document: Some(0),
                line: Some(line),
            },
            order: std::path::Path::new(file)
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_file_name),
            intent,
            create_only: false,
            capabilities,
            object: object.into(),
        }
    }

    pub fn release(manifests: Vec<Manifest>) -> Release {
        Release {
            root: "rel".into(),
            image: None,
            version_hash: String::new(),
            metadata: None,
            manifests,
            excluded: Vec::new(),
            diagnostics: Vec::new(),
            verification: Default::default(),
            capabilities: Default::default(),
        }
    }

    pub fn with_excluded(mut release: Release, excluded: Vec<Manifest>) -> Release {
        release.excluded = excluded
            .into_iter()
            .map(|manifest| Excluded {
                manifest,
                by: crate::release::ExcludedBy::Profile,
                reason: "test".into(),
            })
            .collect();
        release
    }

    pub fn rules(diagnostics: &[crate::diagnostic::Diagnostic]) -> Vec<&'static str> {
        diagnostics.iter().map(|d| d.rule).collect()
    }
}
