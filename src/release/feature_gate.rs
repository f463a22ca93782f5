//! The feature-gate and major-version filters, with OpenShift's CVO's rules and reasons
//! (library-go `pkg/manifest`: `checkFeatureGates`, `checkMajorVersion`), and where the
//! enabled feature gates are read from a FeatureGate object (docs/release-format.md, "Feature
//! gates and major versions").
//!
//! - `release.openshift.io/feature-gate: "A,-B"`: the manifest needs gate A enabled and gate B
//!   not enabled. Entries are trimmed; empty ones are ignored. A manifest may not carry both
//!   this and `release.openshift.io/feature-set`: such a manifest is always left out.
//! - `release.openshift.io/major-version: "4,5"` or `"-3"`: the major versions the manifest is
//!   for, or is not for. Only CustomResourceDefinitions (`apiextensions.k8s.io`) and
//!   FeatureGates (`config.openshift.io`) may carry it: any other kind with it is left out, as
//!   is a manifest whose value does not parse or names a version both ways.
//!
//! Pure functions: no cluster, no files.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{FEATURE_SET_ANNOTATION, Manifest};

/// `release.openshift.io/feature-gate`: the gates a manifest needs enabled (`A`) or disabled
/// (`-A`), comma-separated.
pub const FEATURE_GATE_ANNOTATION: &str = "release.openshift.io/feature-gate";
/// `release.openshift.io/major-version`: the major versions a manifest is for (`4,5`) or not
/// for (`-3`), comma-separated.
pub const MAJOR_VERSION_ANNOTATION: &str = "release.openshift.io/major-version";

/// The cluster's FeatureGate object the gates are read from: `config.openshift.io/v1`
/// FeatureGate `cluster`.
pub const OBJECT_API_VERSION: &str = "config.openshift.io/v1";
/// The FeatureGate kind.
pub const OBJECT_KIND: &str = "FeatureGate";
/// The name of the cluster's FeatureGate.
pub const OBJECT_NAME: &str = "cluster";

/// The names of the enabled feature gates.
pub type EnabledGates = BTreeSet<String>;

/// Why `manifest` is left out with the feature gates `enabled`, in the CVO's words; `None`
/// when it is kept. A manifest with both a feature-set and a feature-gate annotation is left
/// out whatever the gates are.
pub fn feature_gate_exclusion(enabled: &EnabledGates, manifest: &Manifest) -> Option<String> {
    let gates = manifest.annotation(FEATURE_GATE_ANNOTATION)?;
    gate_exclusion(
        enabled,
        gates,
        manifest.annotation(FEATURE_SET_ANNOTATION).is_some(),
    )
}

/// [`feature_gate_exclusion`] of a manifest whose feature-gate annotation is `gates`, and which
/// has a feature-set annotation too when `with_feature_set`.
pub fn gate_exclusion(
    enabled: &EnabledGates,
    gates: &str,
    with_feature_set: bool,
) -> Option<String> {
    if with_feature_set {
        return Some("both feature set and feature gate annotations are present: manifests may specify either a feature set or a feature gate, but not both".to_owned());
    }
    for entry in gates.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.strip_prefix('-') {
            Some(gate) if enabled.contains(gate) => {
                return Some(format!(
                    "feature gate {gate} is enabled but manifest requires it to be disabled"
                ));
            }
            Some(_) => {}
            None if !enabled.contains(entry) => {
                return Some(format!("feature gate {entry} is required but not enabled"));
            }
            None => {}
        }
    }
    None
}

/// Why `manifest` is left out for a cluster at major version `major`, in the CVO's words;
/// `None` when it is kept. `major` is `None` when the release has no version to compare with:
/// a manifest that names major versions is then left out (it cannot be told that it belongs).
pub fn major_version_exclusion(major: Option<u64>, manifest: &Manifest) -> Option<String> {
    let value = manifest.annotation(MAJOR_VERSION_ANNOTATION)?;
    let allowed = matches!(
        (manifest.id.group.as_str(), manifest.id.kind.as_str()),
        ("config.openshift.io", "FeatureGate")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
    );
    if !allowed {
        return Some(
            "major version filtering is only supported for feature gates and custom resources"
                .to_owned(),
        );
    }
    let mut included = BTreeSet::new();
    let mut excluded = BTreeSet::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (set, number, which) = match entry.strip_prefix('-') {
            Some(n) => (&mut excluded, n, "excluded"),
            None => (&mut included, entry, "included"),
        };
        match parse_major(number) {
            Some(n) => {
                set.insert(n);
            }
            None => {
                return Some(format!(
                    "invalid {which} major version \"{number}\" in annotation: not a whole number from 0 to {}",
                    u64::MAX
                ));
            }
        }
    }
    let overlap: Vec<String> = included
        .intersection(&excluded)
        .map(u64::to_string)
        .collect();
    if !overlap.is_empty() {
        return Some(format!(
            "inclusion and exclusion requirements overlap: [{}]",
            overlap.join(" ")
        ));
    }
    let Some(major) = major else {
        return Some(format!(
            "the release has no version (release-metadata) to compare {MAJOR_VERSION_ANNOTATION}: \"{value}\" with; give one with --major-version N"
        ));
    };
    if included.contains(&major) {
        None
    } else if excluded.contains(&major) {
        Some(format!(
            "major version {major} matches excluded version {major}"
        ))
    } else if !included.is_empty() {
        Some(format!(
            "major version {major} does not match any required versions"
        ))
    } else {
        None
    }
}

/// A major version as the CVO parses it (Go's `strconv.ParseUint(s, 10, 64)`): decimal digits
/// only, no sign, within 64 bits.
fn parse_major(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Where the enabled feature gates come from when they are given rather than read from the
/// cluster's FeatureGate: `--feature-gates` or `--feature-gates-file`.
#[derive(Clone, Debug, PartialEq)]
pub enum GateSource {
    /// `--feature-gates A,B`: exactly these.
    List(EnabledGates),
    /// `--feature-gates-file FILE`: a FeatureGate object, read for the release's version
    /// ([`Fallback::FileToo`]).
    Object {
        file: std::path::PathBuf,
        object: Value,
    },
}

impl GateSource {
    /// The gates enabled for a release at `version`; an error in plain words naming the file
    /// when its FeatureGate does not say.
    pub fn enabled(&self, version: Option<&semver::Version>) -> Result<EnabledGates, String> {
        match self {
            GateSource::List(gates) => Ok(gates.clone()),
            GateSource::Object { file, object } => {
                let version = version.map(ToString::to_string);
                enabled_in(object, version.as_deref(), Fallback::FileToo).map_err(|why| {
                    format!(
                        "--feature-gates-file {}: {why}; cannot tell which feature gates are enabled",
                        crate::diagnostic::escaped_path(file)
                    )
                })
            }
        }
    }
}

/// `--feature-gates A,B`: the names, trimmed, empty entries dropped.
pub fn parse_gate_list(list: &str) -> EnabledGates {
    list.split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Where [`enabled_in`] looks besides the release version's status entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// The cluster's FeatureGate, as the CVO reads it: only the status entry of the release's
    /// version; none means no gate is enabled.
    StatusOnly,
    /// A FeatureGate file (`--feature-gates-file`): a status with a single entry is that
    /// entry (a rendered FeatureGate holds one version), and a FeatureGate without status its
    /// `spec.customNoUpgrade.enabled` when `spec.featureSet` is `CustomNoUpgrade`.
    FileToo,
}

/// The gates a FeatureGate object enables for `version`: its `status.featureGates` entry whose
/// `version` equals it (`Fallback` says what else counts). An error, in plain words, when the
/// object is not of FeatureGate's shape: the caller must not guess the gates then.
pub fn enabled_in(
    object: &Value,
    version: Option<&str>,
    fallback: Fallback,
) -> Result<EnabledGates, String> {
    let entries = match object.pointer("/status/featureGates") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(entries)) => entries.iter().collect(),
        Some(_) => return Err("status.featureGates is not a list".to_owned()),
    };
    let matching = entries
        .iter()
        .find(|e| version.is_some() && e.get("version").and_then(Value::as_str) == version);
    let chosen = match (matching, fallback, entries.as_slice()) {
        (Some(entry), _, _) => Some(*entry),
        (None, Fallback::FileToo, [only]) => Some(*only),
        (None, Fallback::FileToo, []) => return spec_gates(object),
        (None, Fallback::FileToo, _) => {
            let versions: Vec<&str> = entries
                .iter()
                .filter_map(|e| e.get("version").and_then(Value::as_str))
                .collect();
            return Err(format!(
                "status.featureGates has no entry for version {} (it has {}): render the FeatureGate for this release's version",
                version.unwrap_or("(the release has none)"),
                versions.join(", ")
            ));
        }
        (None, Fallback::StatusOnly, _) => None,
    };
    match chosen {
        Some(entry) => names(entry.get("enabled"), "status.featureGates[].enabled"),
        None => Ok(EnabledGates::new()),
    }
}

fn spec_gates(object: &Value) -> Result<EnabledGates, String> {
    if object.pointer("/spec/featureSet").and_then(Value::as_str) != Some("CustomNoUpgrade") {
        return Ok(EnabledGates::new());
    }
    names(
        object.pointer("/spec/customNoUpgrade/enabled"),
        "spec.customNoUpgrade.enabled",
    )
}

/// `[{name: A}, …]` (status) or `[A, …]` (spec) as names.
fn names(list: Option<&Value>, field: &str) -> Result<EnabledGates, String> {
    let items = match list {
        None | Some(Value::Null) => return Ok(EnabledGates::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(format!("{field} is not a list")),
    };
    items
        .iter()
        .map(|item| {
            item.as_str()
                .or_else(|| item.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .ok_or_else(|| format!("{field} holds an entry without a name: {item}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::manifest;
    use serde_json::json;

    fn with(kind: &str, api_version: &str, annotations: &[(&str, &str)]) -> Manifest {
        let mut text = format!(
            "apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: x\n  annotations:\n    a: b\n"
        );
        for (k, v) in annotations {
            text.push_str(&format!("    {k}: \"{v}\"\n"));
        }
        manifest("0000_10_a_00_x.yaml", &text)
    }

    fn gated(value: &str) -> Manifest {
        with("ConfigMap", "v1", &[(FEATURE_GATE_ANNOTATION, value)])
    }

    fn gates(names: &[&str]) -> EnabledGates {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    /// The rules of library-go's `checkFeatureGates` (and the CVO's feature-gate integration
    /// test's cases), with its reasons.
    #[test]
    fn feature_gates_as_the_cvo() {
        let none = gates(&[]);
        let a = gates(&["FeatureA"]);
        let ab = gates(&["FeatureA", "FeatureB"]);
        let cases: &[(&EnabledGates, &str, Option<&str>)] = &[
            (&a, "FeatureA", None),
            (
                &none,
                "FeatureA",
                Some("feature gate FeatureA is required but not enabled"),
            ),
            (&none, "-FeatureA", None),
            (
                &a,
                "-FeatureA",
                Some("feature gate FeatureA is enabled but manifest requires it to be disabled"),
            ),
            (&ab, "FeatureA,FeatureB", None),
            (
                &a,
                "FeatureA,FeatureB",
                Some("feature gate FeatureB is required but not enabled"),
            ),
            (&a, "FeatureA,-FeatureB", None),
            (
                &ab,
                "FeatureA,-FeatureB",
                Some("feature gate FeatureB is enabled but manifest requires it to be disabled"),
            ),
            (&ab, " FeatureA , FeatureB ", None),
            (&none, "", None),
            (&none, ",,", None),
            (&none, "-", None),
            (&a, "FeatureA,,", None),
        ];
        for (enabled, value, want) in cases {
            assert_eq!(
                feature_gate_exclusion(enabled, &gated(value)).as_deref(),
                *want,
                "{value:?} with {enabled:?}"
            );
        }
        let plain = with("ConfigMap", "v1", &[]);
        assert_eq!(feature_gate_exclusion(&none, &plain), None);
    }

    #[test]
    fn feature_set_and_feature_gate_together_are_left_out() {
        let both = with(
            "ConfigMap",
            "v1",
            &[
                (FEATURE_GATE_ANNOTATION, "FeatureA"),
                (FEATURE_SET_ANNOTATION, "Default"),
            ],
        );
        let why = feature_gate_exclusion(&gates(&["FeatureA"]), &both).expect("left out");
        assert!(why.starts_with("both feature set and feature gate annotations are present"));
    }

    fn crd(value: &str) -> Manifest {
        with(
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1",
            &[(MAJOR_VERSION_ANNOTATION, value)],
        )
    }

    /// The rules of library-go's `checkMajorVersion`, with its reasons.
    #[test]
    fn major_versions_as_the_cvo() {
        let cases: &[(u64, &str, Option<&str>)] = &[
            (4, "4", None),
            (4, "4,5", None),
            (
                5,
                "4",
                Some("major version 5 does not match any required versions"),
            ),
            (4, "-4", Some("major version 4 matches excluded version 4")),
            (4, "-3", None),
            (4, "-3,-5", None),
            (
                4,
                "5,-3",
                Some("major version 4 does not match any required versions"),
            ),
            (4, " 4 , -5 ", None),
            (4, "", None),
            (4, ",", None),
            (
                4,
                "4,-4",
                Some("inclusion and exclusion requirements overlap: [4]"),
            ),
            (
                4,
                "abc",
                Some(
                    "invalid included major version \"abc\" in annotation: not a whole number from 0 to 18446744073709551615",
                ),
            ),
            (
                4,
                "-x",
                Some(
                    "invalid excluded major version \"x\" in annotation: not a whole number from 0 to 18446744073709551615",
                ),
            ),
            (
                4,
                "-",
                Some(
                    "invalid excluded major version \"\" in annotation: not a whole number from 0 to 18446744073709551615",
                ),
            ),
            (
                4,
                "+4",
                Some(
                    "invalid included major version \"+4\" in annotation: not a whole number from 0 to 18446744073709551615",
                ),
            ),
            (
                4,
                "--4",
                Some(
                    "invalid excluded major version \"-4\" in annotation: not a whole number from 0 to 18446744073709551615",
                ),
            ),
            (
                4,
                "99999999999999999999",
                Some(
                    "invalid included major version \"99999999999999999999\" in annotation: not a whole number from 0 to 18446744073709551615",
                ),
            ),
        ];
        for (major, value, want) in cases {
            assert_eq!(
                major_version_exclusion(Some(*major), &crd(value)).as_deref(),
                *want,
                "{value:?} at {major}"
            );
        }
    }

    #[test]
    fn major_version_only_on_crds_and_feature_gates() {
        let fg = with(
            "FeatureGate",
            "config.openshift.io/v1",
            &[(MAJOR_VERSION_ANNOTATION, "4")],
        );
        assert_eq!(major_version_exclusion(Some(4), &fg), None);
        for (kind, api) in [
            ("ConfigMap", "v1"),
            ("FeatureGate", "example.com/v1"),
            ("Infrastructure", "config.openshift.io/v1"),
        ] {
            let m = with(kind, api, &[(MAJOR_VERSION_ANNOTATION, "4")]);
            assert_eq!(
                major_version_exclusion(Some(4), &m).as_deref(),
                Some(
                    "major version filtering is only supported for feature gates and custom resources"
                ),
                "{kind} {api}"
            );
        }
        assert_eq!(
            major_version_exclusion(Some(4), &with("ConfigMap", "v1", &[])),
            None
        );
        let why = major_version_exclusion(None, &crd("4")).expect("left out");
        assert!(why.contains("--major-version"), "{why}");
    }

    #[test]
    fn gates_of_a_feature_gate_object() {
        let fg = json!({
            "apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
            "spec": {"featureSet": "CustomNoUpgrade", "customNoUpgrade": {"enabled": ["S"]}},
            "status": {"featureGates": [
                {"version": "4.18.0", "enabled": [{"name": "A"}], "disabled": [{"name": "B"}]},
                {"version": "4.19.0", "enabled": [{"name": "A"}, {"name": "C"}]}
            ]}
        });
        for fallback in [Fallback::StatusOnly, Fallback::FileToo] {
            assert_eq!(
                enabled_in(&fg, Some("4.19.0"), fallback),
                Ok(gates(&["A", "C"]))
            );
        }
        assert_eq!(
            enabled_in(&fg, Some("4.20.0"), Fallback::StatusOnly),
            Ok(gates(&[]))
        );
        let err = enabled_in(&fg, Some("4.20.0"), Fallback::FileToo).unwrap_err();
        assert!(err.contains("4.18.0, 4.19.0"), "{err}");
        let one =
            json!({"status": {"featureGates": [{"version": "9", "enabled": [{"name": "A"}]}]}});
        assert_eq!(enabled_in(&one, None, Fallback::FileToo), Ok(gates(&["A"])));
        assert_eq!(enabled_in(&one, None, Fallback::StatusOnly), Ok(gates(&[])));
        let spec_only = json!({"spec": {"featureSet": "CustomNoUpgrade", "customNoUpgrade": {"enabled": ["S", "T"]}}});
        assert_eq!(
            enabled_in(&spec_only, Some("1.0.0"), Fallback::FileToo),
            Ok(gates(&["S", "T"]))
        );
        assert_eq!(
            enabled_in(&spec_only, Some("1.0.0"), Fallback::StatusOnly),
            Ok(gates(&[]))
        );
        let tech = json!({"spec": {"featureSet": "TechPreviewNoUpgrade"}});
        assert_eq!(enabled_in(&tech, None, Fallback::FileToo), Ok(gates(&[])));
        assert!(
            enabled_in(
                &json!({"status": {"featureGates": {}}}),
                None,
                Fallback::StatusOnly
            )
            .is_err()
        );
        let nameless =
            json!({"status": {"featureGates": [{"version": "1", "enabled": [{"x": 1}]}]}});
        assert!(enabled_in(&nameless, Some("1"), Fallback::StatusOnly).is_err());
        assert_eq!(parse_gate_list(" A, ,B,"), gates(&["A", "B"]));
    }

    /// The loader compares with the release version's major, or `--major-version`.
    #[test]
    fn loading_leaves_out_by_the_release_major_version() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "release-metadata",
            r#"{"kind": "cincinnati-metadata-v0", "version": "4.19.2"}"#,
        );
        let crd = |name: &str, value: &str| {
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}.example.com\n  annotations:\n    release.openshift.io/major-version: \"{value}\"\n"
            )
        };
        write("0000_10_a_00_four.yaml", &crd("four", "4"));
        write("0000_10_a_01_five.yaml", &crd("five", "5"));
        write(
            "0000_10_a_02_cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\n  annotations:\n    release.openshift.io/major-version: \"4\"\n",
        );
        let names = |major: Option<u64>| {
            let options = crate::release::LoadOptions {
                filters: crate::release::Filters {
                    major_version: major,
                    ..Default::default()
                },
                ..Default::default()
            };
            let r = crate::release::load(dir.path(), &options).unwrap();
            assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
            assert!(
                r.excluded
                    .iter()
                    .all(|e| e.by == super::super::ExcludedBy::MajorVersion)
            );
            let kept: Vec<String> = r.manifests.iter().map(|m| m.id.name.clone()).collect();
            kept
        };
        assert_eq!(names(None), ["four.example.com"]);
        assert_eq!(names(Some(5)), ["five.example.com"]);
    }
}
