//! CRD upgrade safety: every change between the previous and the new release's
//! CustomResourceDefinitions that can lose data or break clients, with crdify's rules (ids
//! `crd-<crdify name in kebab-case>`: `enum` is `crd-enum`, `existingFieldRemoval` is
//! `crd-existing-field-removal`) and a few beyond it (served and storage versions, immutable
//! names, exactly one storage version, conversion webhooks).
//!
//! [`schema_diff`] compares two `openAPIV3Schema`s; [`versions`] holds the version-level
//! rules and decides which schemas are compared. A release's CRD is compared with the same CRD
//! in the previous release or, without one, with the CRD on the cluster (`cvo validate
//! --live`, [`LiveCrds`]). Where objects may be stored: with `--live`, the cluster's
//! `status.storedVersions` of each CRD; otherwise every version of the previous release (an
//! approximation that errs on the side of reporting: whether objects are still stored in a
//! version, served or not, only the cluster knows).
//!
//! A CRD may carry `release.cvo.io/allow-crd-changes: "enum,default"` (crdify names or our
//! ids): [`allow`] turns findings of those rules about it into notes, still printed with their
//! path. It runs after the rule levels, so that a level set for a rule (`--rule crd-enum=error`)
//! does not undo a reviewed exception.

mod schema_diff;
mod served;
mod versions;

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::finding;
use super::levels::{Level, RuleLevels};
use super::rules::*;
use super::suppression::Usage;
use crate::diagnostic::{Diagnostic, Severity, excerpt};
use crate::release::{DeleteIntent, FieldLines, Manifest, Release};
use schema_diff::Change;

/// The cluster's CRDs (`cvo validate --live`), by name: the versions `status.storedVersions`
/// lists, and the CRD as the cluster serves it, which the release's CRD is compared with when
/// no previous release is given (as OLM v1's preflight compares with the installed CRD).
#[derive(Default)]
pub struct LiveCrds(BTreeMap<String, LiveCrd>);

struct LiveCrd {
    stored: Vec<String>,
    manifest: Manifest,
}

impl LiveCrds {
    /// Adds the CRD `name` as the cluster serves it (`object`), whose objects are stored in
    /// the versions `stored` (its `status.storedVersions`).
    pub fn insert(&mut self, name: String, stored: Vec<String>, object: Value) {
        let manifest = Manifest {
            id: crate::release::ObjectId {
                group: CRD_GROUP.into(),
                kind: CRD_KIND.into(),
                namespace: None,
                name: name.clone(),
            },
            api_version: format!("{CRD_GROUP}/v1"),
            location: crate::diagnostic::Location::file(format!(
                "the cluster's customresourcedefinitions/{name}"
            )),
            order: None,
            intent: DeleteIntent::Apply,
            create_only: false,
            capabilities: Vec::new(),
            object: served::crd(&object).into(),
        };
        self.0.insert(name, LiveCrd { stored, manifest });
    }
}

/// Where the CRD a release's CRD is compared with comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Previous,
    Cluster,
}

/// The annotation that turns the named rules' findings about a CRD into notes.
pub const ALLOW_ANNOTATION: &str = "release.cvo.io/allow-crd-changes";

const CRD_GROUP: &str = "apiextensions.k8s.io";
const CRD_KIND: &str = "CustomResourceDefinition";

/// The CRD rules over `release`: on its own, and against `previous` or, without it, the
/// cluster's CRDs (`live`); where objects are stored comes from `live` when given (then the
/// previous release is not needed for it).
pub fn check(
    release: &Release,
    previous: Option<&Release>,
    live: Option<&LiveCrds>,
) -> Vec<Diagnostic> {
    let before: HashMap<&str, (Crd, Origin)> = match (previous, live) {
        (Some(p), _) => p
            .manifests
            .iter()
            .filter_map(Crd::of)
            .map(|c| (c.name(), (c, Origin::Previous)))
            .collect(),
        (None, Some(live)) => live
            .0
            .values()
            .filter_map(|c| Crd::of(&c.manifest))
            .map(|c| (c.name(), (c, Origin::Cluster)))
            .collect(),
        (None, None) => HashMap::new(),
    };
    let mut out = Vec::new();
    let lines = FieldLines::default();
    for new in release.manifests.iter().filter_map(Crd::of) {
        let old = before.get(new.name());
        let (stored_list, source): (Vec<String>, String) = match (live, old) {
            (Some(cluster), _) => (
                cluster
                    .0
                    .get(new.name())
                    .map(|c| c.stored.clone())
                    .unwrap_or_default(),
                "the cluster's status.storedVersions lists it".into(),
            ),
            // A version kept unserved is usually kept because objects may still be stored in
            // it: without the cluster, every version of the previous release may hold some.
            (None, Some((old, _))) => (
                old.versions.iter().map(|v| v.name.to_owned()).collect(),
                "the previous release has it; without --live every version it has is taken as possibly stored: check status.storedVersions with --live".to_owned(),
            ),
            (None, None) => (Vec::new(), String::new()),
        };
        let mut changes = versions::single(&new);
        changes.extend(versions::stored_removed(&stored_list, &source, &new));
        match old {
            // The cluster serves its CRD as the server stores it: compare the release's in
            // that form too (unknown keys and omitted zero values gone).
            Some((old, Origin::Cluster)) => {
                let served = Manifest {
                    object: served::crd(&new.manifest.object).into(),
                    ..new.manifest.clone()
                };
                if let Some(served) = Crd::of(&served) {
                    changes.extend(versions::compare(old, &served, &stored_list));
                }
            }
            Some((old, Origin::Previous)) => {
                changes.extend(versions::compare(old, &new, &stored_list))
            }
            None => {}
        }
        out.extend(
            changes
                .into_iter()
                .map(|c| diagnostic(&lines, &new, old.map(|(c, o)| (c, *o)), c)),
        );
    }
    out
}

fn diagnostic(lines: &FieldLines, new: &Crd, old: Option<(&Crd, Origin)>, c: Change) -> Diagnostic {
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
    let mut message = format!(
        "{}: {} (before: {}; now: {})",
        c.path,
        c.what,
        show(&c.before),
        show(&c.after)
    );
    match old {
        Some((old, Origin::Previous)) => {
            let mut at = old.manifest.location.clone();
            at.line = line_of(lines, old.manifest, &c.path).or(at.line);
            message.push_str(&format!("; previous release: {at}"));
        }
        Some((_, Origin::Cluster)) => message.push_str("; compared with the CRD on the cluster"),
        None => {}
    }
    let help = super::rule_by_id(c.rule)
        .map(|r| r.help)
        .unwrap_or_default();
    let mut d = finding(c.rule, new.manifest, message, help);
    if let Some(line) = line_of(lines, new.manifest, &c.path) {
        d.location.line = Some(line);
    }
    d
}

/// The rules a CRD's [`ALLOW_ANNOTATION`] may name: those of [`check`] whose change the API
/// server accepts (it refuses a scope change and a CRD without exactly one storage version,
/// whatever the annotation says).
const ALLOWABLE: [&str; 25] = [
    CRD_EXISTING_FIELD_REMOVAL,
    CRD_STORED_VERSION_REMOVAL,
    CRD_TYPE,
    CRD_ENUM,
    CRD_DEFAULT,
    CRD_REQUIRED,
    CRD_MAXIMUM,
    CRD_MINIMUM,
    CRD_MAX_ITEMS,
    CRD_MIN_ITEMS,
    CRD_MAX_LENGTH,
    CRD_MIN_LENGTH,
    CRD_MAX_PROPERTIES,
    CRD_MIN_PROPERTIES,
    CRD_PATTERN,
    CRD_NULLABLE,
    CRD_ONE_OF,
    CRD_ANY_OF,
    CRD_ALL_OF,
    CRD_DESCRIPTION,
    CRD_UNHANDLED,
    CRD_SERVED_VERSION_REMOVAL,
    CRD_STORAGE_VERSION_CHANGED,
    CRD_IMMUTABLE_FIELD_CHANGED,
    CRD_CONVERSION_WEBHOOK,
];

/// `diagnostics` (at their levels) with the findings each CRD's [`ALLOW_ANNOTATION`] allows
/// turned into notes that say so, plus the annotation's problems: a name that is no rule it
/// may allow is an `invalid-suppression` error; for a CRD that was compared (with `previous`
/// or, without it, with the cluster's in `live`, as [`check`] does), the rules it names that
/// report nothing about the CRD (unless off) are recorded in `usage`, whose
/// [`super::suppression::stale`] reports them once every profile has been read. A CRD compared
/// with nothing has no change judged, so nothing is recorded.
pub fn allow(
    release: &Release,
    diagnostics: Vec<Diagnostic>,
    levels: &RuleLevels,
    (previous, live): (Option<&Release>, Option<&LiveCrds>),
    usage: &mut Usage,
) -> Vec<Diagnostic> {
    let mut out = diagnostics;
    let mut problems = Vec::new();
    let lines = FieldLines::default();
    for crd in release.manifests.iter().filter_map(Crd::of) {
        let Some(list) = crd.manifest.annotation(ALLOW_ANNOTATION) else {
            continue;
        };
        // Problems of the annotation point at the annotations, not at the document's start.
        let problem = |rule, message: String, help: String| {
            let mut d = finding(rule, crd.manifest, message, help);
            d.location.line = lines
                .line(crd.manifest, "metadata.annotations")
                .or(d.location.line);
            d
        };
        let mut allowed: Vec<&'static str> = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match ALLOWABLE.iter().find(|r| same_rule(name, r)) {
                Some(rule) => allowed.push(rule),
                None => problems.push(problem(
                    INVALID_SUPPRESSION,
                    format!(
                        "`{ALLOW_ANNOTATION}` names `{}`, {}, so it allows nothing",
                        excerpt(name),
                        match [CRD_SCOPE, CRD_STORAGE_VERSION_COUNT]
                            .iter()
                            .find(|r| same_rule(name, r))
                        {
                            Some(rule) => format!("but the API server refuses a `{rule}` change whatever the annotation says"),
                            None => "which is no CRD rule".to_owned(),
                        }
                    ),
                    "name crdify's rules (`enum`, `existingFieldRemoval`) or cvo's ids (`crd-enum`), as docs/validation.md lists them".to_owned(),
                )),
            }
        }
        let compared = match (previous, live) {
            (Some(p), _) => p
                .manifests
                .iter()
                .filter_map(Crd::of)
                .any(|c| c.name() == crd.name()),
            (None, Some(live)) => live.0.contains_key(crd.name()),
            (None, None) => false,
        };
        let mut used: Vec<&'static str> = Vec::new();
        for d in out.iter_mut().filter(|d| {
            d.object.as_ref() == Some(&crd.manifest.id)
                && d.location.file == crd.manifest.location.file
                && allowed.contains(&d.rule)
        }) {
            used.push(d.rule);
            if d.severity > Severity::Note {
                d.message.push_str(&format!(
                    "; allowed by the CRD's {ALLOW_ANNOTATION} annotation (was {})",
                    d.severity
                ));
                d.severity = Severity::Note;
            }
        }
        if compared {
            let unused = allowed
                .iter()
                .copied()
                .filter(|r| !used.contains(r) && levels.level(r) != Some(Level::Off))
                .collect();
            let at = problem(STALE_SUPPRESSION, String::new(), String::new());
            usage.record(crd.manifest, ALLOW_ANNOTATION, at, unused);
        }
    }
    out.extend(levels.apply(problems));
    super::sort(&mut out);
    out
}

/// The line of `path` (`.spec.versions[NAME].schema…`, `.spec.scope`) in the new CRD's
/// manifest: a version is found by its name among `spec.versions`; for one the new CRD no
/// longer has, the line of `spec.versions`.
fn line_of(lines: &FieldLines, manifest: &Manifest, path: &str) -> Option<usize> {
    let Some(rest) = path.strip_prefix(".spec.versions[") else {
        return lines.line(manifest, path);
    };
    let (name, tail) = rest.split_once(']')?;
    let index = manifest
        .object
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .position(|v| v.get("name").and_then(Value::as_str) == Some(name))
        });
    match index {
        Some(i) => lines.line(manifest, &format!("spec.versions[{i}]{tail}")),
        None => lines.line(manifest, "spec.versions"),
    }
}

/// True when `name` (a crdify name such as `existingFieldRemoval`, or our id, with or without
/// `crd-`) names `rule`.
fn same_rule(name: &str, rule: &str) -> bool {
    let key = |s: &str| -> String {
        let s = s.trim();
        let s = s.strip_prefix("crd-").unwrap_or(s);
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    !name.trim().is_empty() && key(name) == key(rule)
}

/// A CRD the release applies, read from its manifest.
pub struct Crd<'a> {
    pub manifest: &'a Manifest,
    pub versions: Vec<Version<'a>>,
    /// spec.conversion.strategy is Webhook.
    pub webhook: bool,
}

/// One entry of spec.versions.
pub struct Version<'a> {
    pub name: &'a str,
    pub served: bool,
    pub storage: bool,
    pub schema: Option<&'a Value>,
}

impl<'a> Crd<'a> {
    /// The CRD `manifest` applies (none for other kinds and for delete manifests).
    pub fn of(manifest: &'a Manifest) -> Option<Self> {
        if !manifest.id.is_crd() || manifest.intent != DeleteIntent::Apply {
            return None;
        }
        let spec = manifest.object.get("spec")?;
        let shared = spec.pointer("/validation/openAPIV3Schema");
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| {
                        Some(Version {
                            name: v.get("name")?.as_str()?,
                            served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                            schema: v.pointer("/schema/openAPIV3Schema").or(shared),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Crd {
            manifest,
            versions,
            webhook: spec.pointer("/conversion/strategy").and_then(Value::as_str)
                == Some("Webhook"),
        })
    }

    pub fn name(&self) -> &'a str {
        &self.manifest.id.name
    }

    pub fn text(&self, pointer: &str) -> Option<&'a str> {
        self.manifest
            .object
            .pointer(pointer)
            .and_then(Value::as_str)
    }

    pub fn version(&self, name: &str) -> Option<&Version<'a>> {
        self.versions.iter().find(|v| v.name == name)
    }

    /// The storage version, when exactly one is marked.
    pub fn storage(&self) -> Option<&Version<'a>> {
        let mut storage = self.versions.iter().filter(|v| v.storage);
        match (storage.next(), storage.next()) {
            (Some(v), None) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules};

    /// A CRD `widgets.example.com` (kind Widget) with `extra` YAML lines under `spec:` and
    /// versions of (name, served, storage, schema as flow YAML).
    pub fn crd_manifest(extra: &str, versions: &[(&str, bool, bool, &str)]) -> Manifest {
        crd_annotated("", extra, versions)
    }

    pub fn crd_annotated(
        allow: &str,
        extra: &str,
        versions: &[(&str, bool, bool, &str)],
    ) -> Manifest {
        let mut yaml = String::from(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n",
        );
        if !allow.is_empty() {
            yaml.push_str(&format!(
                "  annotations:\n    {ALLOW_ANNOTATION}: \"{allow}\"\n"
            ));
        }
        yaml.push_str("spec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n");
        if !extra.contains("scope:") {
            yaml.push_str("  scope: Namespaced\n");
        }
        yaml.push_str(extra);
        yaml.push_str("  versions:\n");
        for (name, served, storage, schema) in versions {
            yaml.push_str(&format!(
                "  - name: {name}\n    served: {served}\n    storage: {storage}\n    schema:\n      openAPIV3Schema: {schema}\n"
            ));
        }
        manifest("0000_50_widgets_00_crd.yaml", &yaml)
    }

    const OLD: &str = "{type: object, properties: {spec: {type: object, properties: {mode: {type: string, enum: [A, B]}}}}}";
    const NEW: &str = "{type: object, properties: {spec: {type: object, properties: {mode: {type: string, enum: [A], default: A}}}}}";

    #[test]
    fn findings_name_crd_version_path_values_and_file() {
        let old = release(vec![crd_manifest("", &[("v1", true, true, OLD)])]);
        let new = release(vec![crd_manifest("", &[("v1", true, true, NEW)])]);
        let found = check(&new, Some(&old), None);
        assert_eq!(rules(&found), [CRD_ENUM, CRD_DEFAULT]);
        let text = found[0].to_string();
        assert!(
            text.contains("CustomResourceDefinition widgets.example.com"),
            "{text}"
        );
        assert!(
            text.contains(".spec.versions[v1].schema.openAPIV3Schema.properties.spec.properties.mode.enum: value \"B\" removed (before: [\"A\",\"B\"]; now: [\"A\"])"),
            "{text}"
        );
        assert!(text.contains("--> 0000_50_widgets_00_crd.yaml:1"), "{text}");
        assert!(found.iter().all(|d| d.severity == Severity::Error));
        // The same release against itself: nothing.
        assert!(check(&new, Some(&new), None).is_empty());
    }

    /// [`check`] against `old`, then [`allow`] at `levels`.
    fn allowed_at(old: &Release, new: &Release, levels: &RuleLevels) -> Vec<Diagnostic> {
        allowed(new, check(new, Some(old), None), levels, Some(old))
    }

    /// [`allow`] and the stale suppressions of one reading.
    fn allowed(
        new: &Release,
        found: Vec<Diagnostic>,
        levels: &RuleLevels,
        old: Option<&Release>,
    ) -> Vec<Diagnostic> {
        let mut usage = Usage::default();
        let mut found = allow(new, levels.apply(found), levels, (old, None), &mut usage);
        found.extend(crate::validate::suppression::stale(&[usage], levels));
        crate::validate::sort(&mut found);
        found
    }

    #[test]
    fn the_annotation_turns_named_rules_into_notes_whatever_their_level() {
        let old = release(vec![crd_manifest("", &[("v1", true, true, OLD)])]);
        let new = release(vec![crd_annotated("enum", "", &[("v1", true, true, NEW)])]);
        let mut levels = RuleLevels::default();
        for level in [None, Some(Level::Error), Some(Level::Warning)] {
            if let Some(level) = level {
                levels.set(CRD_ENUM, level);
            }
            let found = allowed_at(&old, &new, &levels);
            assert_eq!(rules(&found), [CRD_DEFAULT, CRD_ENUM]);
            assert_eq!(found[1].severity, Severity::Note, "{level:?}");
            assert!(found[1].message.contains(".mode.enum"));
            assert!(
                found[1].message.ends_with(&format!(
                    "allowed by the CRD's {ALLOW_ANNOTATION} annotation (was {})",
                    level.map_or(Severity::Error, |l| l.severity().unwrap())
                )),
                "{}",
                found[1].message
            );
            assert_eq!(found[0].severity, Severity::Error, "default is not allowed");
        }
        // A rule turned off reports nothing, and is not stale either.
        levels.set(CRD_ENUM, Level::Off);
        assert_eq!(rules(&allowed_at(&old, &new, &levels)), [CRD_DEFAULT]);
        assert!(same_rule(
            "existingFieldRemoval",
            CRD_EXISTING_FIELD_REMOVAL
        ));
        assert!(same_rule(" crd-one-of", CRD_ONE_OF));
        assert!(same_rule("oneOf", CRD_ONE_OF));
        assert!(!same_rule("", CRD_ENUM));
        assert!(!same_rule("enums", CRD_ENUM));
    }

    #[test]
    fn an_unknown_refused_or_stale_name_in_the_annotation_is_reported() {
        let old = release(vec![crd_manifest("", &[("v1", true, true, OLD)])]);
        let new = release(vec![crd_annotated(
            "enums, scope,enum,default,type",
            "",
            &[("v1", true, true, NEW)],
        )]);
        let found = allowed_at(&old, &new, &RuleLevels::default());
        let problems: Vec<&Diagnostic> = found
            .iter()
            .filter(|d| !d.rule.starts_with("crd-"))
            .collect();
        assert_eq!(
            rules(&found),
            [
                CRD_DEFAULT,
                CRD_ENUM,
                INVALID_SUPPRESSION,
                INVALID_SUPPRESSION,
                STALE_SUPPRESSION
            ]
        );
        assert!(
            problems[0]
                .message
                .contains("`enums`, which is no CRD rule"),
            "{}",
            problems[0].message
        );
        assert!(
            problems[1].message.contains("refuses a `crd-scope` change"),
            "{}",
            problems[1].message
        );
        assert!(
            problems[2].message.contains("allows `crd-type` but"),
            "{}",
            problems[2].message
        );
        assert!(found[..2].iter().all(|d| d.severity == Severity::Note));
        // Without a previous release nothing is compared, so nothing is stale.
        let alone = allowed(&new, check(&new, None, None), &RuleLevels::default(), None);
        assert_eq!(rules(&alone), [INVALID_SUPPRESSION, INVALID_SUPPRESSION]);
    }

    #[test]
    fn without_a_previous_release_the_crd_on_the_cluster_is_compared() {
        let on_cluster = crd_manifest(
            "",
            &[("v1alpha1", true, false, OLD), ("v1", true, true, OLD)],
        );
        let new = release(vec![crd_manifest("", &[("v1", true, true, OLD)])]);
        let live = |stored: &[&str], object: &Manifest| {
            let mut live = LiveCrds::default();
            live.insert(
                "widgets.example.com".into(),
                stored.iter().map(|s| s.to_string()).collect(),
                (*object.object).clone(),
            );
            live
        };
        let found = check(&new, None, Some(&live(&["v1alpha1", "v1"], &on_cluster)));
        assert_eq!(rules(&found), [CRD_STORED_VERSION_REMOVAL]);
        assert!(
            found[0].message.contains("status.storedVersions")
                && found[0]
                    .message
                    .ends_with("; compared with the CRD on the cluster"),
            "{}",
            found[0].message
        );
        // After a storage migration: what is left is that v1alpha1's clients break.
        let found = check(&new, None, Some(&live(&["v1"], &on_cluster)));
        assert_eq!(rules(&found), [CRD_SERVED_VERSION_REMOVAL]);
        // The schema is compared with the cluster's too.
        let narrowed = release(vec![crd_manifest("", &[("v1", true, true, NEW)])]);
        let found = check(&narrowed, None, Some(&live(&["v1"], &new.manifests[0])));
        assert_eq!(rules(&found), [CRD_ENUM, CRD_DEFAULT]);
        // With a previous release, that one is compared, and the cluster says what is stored.
        let found = check(&narrowed, Some(&new), Some(&live(&["v1"], &on_cluster)));
        assert!(
            found
                .iter()
                .all(|d| d.message.contains("previous release: ")),
            "{found:?}"
        );
        // A CRD the cluster does not have yet stores nothing and is compared with nothing.
        assert!(check(&new, None, Some(&LiveCrds::default())).is_empty());
    }

    #[test]
    fn delete_manifests_and_other_kinds_are_not_crds() {
        let m = manifest(
            "0000_50_x_00_crd.yaml",
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n  annotations:\n    release.openshift.io/delete: \"true\"\n",
        );
        assert!(Crd::of(&m).is_none());
    }
}
