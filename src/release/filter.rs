//! Inclusion filters applied while loading (profile, feature set, major version, exclusions),
//! as CVO applies them (the major-version rules: [`super::feature_gate`]; the feature gates
//! are applied once known: [`super::Release::leave_out_by_feature_gates`], or by a sync).

use std::collections::BTreeSet;

use super::feature_gate::major_version_exclusion;
use super::{EXCLUDE_PREFIX, ExcludedBy, FEATURE_SET_ANNOTATION, INCLUDE_PREFIX, Manifest};

/// Which manifests of a release to keep.
#[derive(Clone, Debug)]
pub struct Filters {
    /// `--profile NAME`: keep only manifests with `include.release.openshift.io/NAME: "true"`.
    /// No profile filtering when `None`.
    pub profile: Option<String>,
    /// `--feature-set NAME` (default `Default`): drop manifests whose
    /// `release.openshift.io/feature-set` list does not name it.
    pub feature_set: String,
    /// `--exclude ID`: drop manifests with `exclude.release.openshift.io/ID: "true"`.
    pub exclude: Vec<String>,
    /// `--major-version N`: the major version `release.openshift.io/major-version` is compared
    /// with; `None`: the release version's major.
    pub major_version: Option<u64>,
}

impl Default for Filters {
    fn default() -> Self {
        Filters {
            profile: None,
            feature_set: DEFAULT_FEATURE_SET.into(),
            exclude: Vec::new(),
            major_version: None,
        }
    }
}

impl Filters {
    /// Which filter leaves the manifest out and why, or `None` when it is kept;
    /// `release_major` is the major of the release's version (`None`: it has none).
    pub fn exclusion(
        &self,
        manifest: &Manifest,
        release_major: Option<u64>,
    ) -> Option<(ExcludedBy, String)> {
        if let Some(profile) = &self.profile {
            let key = format!("{INCLUDE_PREFIX}{profile}");
            if manifest.annotation(&key) != Some("true") {
                return Some((
                    ExcludedBy::Profile,
                    format!("not included in profile `{profile}` (no `{key}: \"true\"`)"),
                ));
            }
        }
        if let Some(sets) = manifest.annotation(FEATURE_SET_ANNOTATION)
            && let Some(unknown) = unknown_feature_set(sets)
        {
            // The CVO's checkFeatureSets: never included, whatever the cluster's feature set.
            return Some((
                ExcludedBy::FeatureSet,
                format!(
                    "feature sets `{sets}` name `{unknown}`, which is not a known feature set ({}): never included, as in the CVO",
                    KNOWN_FEATURE_SETS.join(", ")
                ),
            ));
        }
        if let Some(sets) = manifest.annotation(FEATURE_SET_ANNOTATION)
            && !sets.split(',').any(|s| s == self.feature_set)
        {
            return Some((
                ExcludedBy::FeatureSet,
                format!(
                    "feature sets `{sets}` do not include `{}`",
                    self.feature_set
                ),
            ));
        }
        if let Some(why) = major_version_exclusion(self.major_version.or(release_major), manifest) {
            return Some((ExcludedBy::MajorVersion, why));
        }
        self.exclude.iter().find_map(|id| {
            let key = format!("{EXCLUDE_PREFIX}{id}");
            (manifest.annotation(&key) == Some("true"))
                .then(|| (ExcludedBy::Exclude, format!("excluded by `{key}`")))
        })
    }
}

/// The cluster profiles (`include.release.openshift.io/NAME: "true"`) and feature sets
/// (`release.openshift.io/feature-set`) that a release's manifests name: what `--profile`
/// and `--feature-set` can select.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors {
    pub profiles: BTreeSet<String>,
    pub feature_sets: BTreeSet<String>,
}

impl Selectors {
    /// Every profile and feature set named by `manifests` (pass all of them, kept and
    /// excluded: [`super::Release::all_manifests`]).
    pub fn of<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Self {
        let mut out = Selectors::default();
        for m in manifests {
            for (key, value) in m.annotations() {
                if let Some(profile) = key.strip_prefix(INCLUDE_PREFIX)
                    && value == "true"
                {
                    out.profiles.insert(profile.to_owned());
                }
            }
            if let Some(sets) = m.annotation(FEATURE_SET_ANNOTATION)
                && unknown_feature_set(sets).is_none()
            {
                out.feature_sets.extend(sets.split(',').map(str::to_owned));
            }
        }
        out
    }

    /// Why `filters` would select a profile that no manifest names (and so silently keep
    /// nothing of it) or a feature set OpenShift does not know, or `None` when they are fine.
    /// A known feature set is accepted even when no manifest names it, as the CVO accepts it:
    /// the manifests without a feature-set annotation are in every feature set
    /// ([`Selectors::feature_set_note`] says so).
    pub fn refusal(&self, filters: &Filters) -> Option<String> {
        let problem = if let Some(profile) = &filters.profile {
            if self.profiles.contains(profile) {
                None
            } else if profile.is_empty() {
                Some("--profile: the profile name is empty".to_owned())
            } else {
                Some(format!(
                    "--profile {profile}: no manifest of the release is in this profile"
                ))
            }
        } else {
            None
        };
        let problem = problem.or_else(|| {
            let fs = &filters.feature_set;
            if fs.is_empty() {
                Some("--feature-set: the feature set name is empty".to_owned())
            } else if !KNOWN_FEATURE_SETS.contains(&fs.as_str()) {
                Some(format!(
                    "--feature-set {fs}: not a known feature set (the known ones are {})",
                    KNOWN_FEATURE_SETS.join(", ")
                ))
            } else {
                None
            }
        })?;
        Some(format!("{problem}; {}", self.describe()))
    }

    /// A note for a feature set that no manifest names (though it is a known one): it selects
    /// only the `selected` manifests without a feature-set annotation. `None` for `Default`
    /// and for a feature set the release names.
    pub fn feature_set_note(&self, filters: &Filters, selected: usize) -> Option<String> {
        let fs = &filters.feature_set;
        (fs != DEFAULT_FEATURE_SET && !self.feature_sets.contains(fs)).then(|| {
            format!(
                "--feature-set {fs}: no manifest of the release names this feature set, so it selects the {selected} manifests without a feature-set annotation (as the CVO does)"
            )
        })
    }

    /// `the release uses cluster profiles a, b and feature sets Default, X`.
    pub fn describe(&self) -> String {
        let profiles = if self.profiles.is_empty() {
            "no cluster profiles".to_owned()
        } else {
            format!("cluster profiles {}", join(&self.profiles))
        };
        let mut sets = self.feature_sets.clone();
        sets.insert(DEFAULT_FEATURE_SET.to_owned());
        format!(
            "the release uses {profiles} and feature sets {}",
            join(&sets)
        )
    }
}

/// The feature set of manifests without a `release.openshift.io/feature-set` annotation.
pub const DEFAULT_FEATURE_SET: &str = "Default";

/// The feature sets OpenShift knows (openshift/api `AllFixedFeatureSets` and
/// `CustomNoUpgrade`, as library-go's manifest reader lists them).
pub const KNOWN_FEATURE_SETS: [&str; 5] = [
    "CustomNoUpgrade",
    "Default",
    "DevPreviewNoUpgrade",
    "OKD",
    "TechPreviewNoUpgrade",
];

/// The first entry of a `release.openshift.io/feature-set` value (split at `,`, nothing
/// trimmed, as the CVO splits it) that is not a known feature set.
pub fn unknown_feature_set(value: &str) -> Option<&str> {
    value.split(',').find(|s| !KNOWN_FEATURE_SETS.contains(s))
}

fn join(names: &BTreeSet<String>) -> String {
    names
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::manifest;

    fn used() -> Selectors {
        let a = manifest(
            "0000_10_a_00_x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-a\n  annotations:\n    include.release.openshift.io/hypershift: \"true\"\n    include.release.openshift.io/ibm-cloud-managed: \"false\"\n    release.openshift.io/feature-set: \"TechPreviewNoUpgrade,CustomNoUpgrade\"\n",
        );
        // Space-padded or unknown entries: never included (the CVO), so they select nothing.
        let c = manifest(
            "0000_10_a_02_z.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-c\n  annotations:\n    release.openshift.io/feature-set: \"OKD, DevPreviewNoUpgrade,Foo\"\n",
        );
        let b = manifest(
            "0000_10_a_01_y.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-b\n",
        );
        Selectors::of([&a, &b, &c])
    }

    #[test]
    fn names_only_what_manifests_select() {
        let used = used();
        assert_eq!(used.profiles, BTreeSet::from(["hypershift".to_owned()]));
        assert_eq!(
            used.feature_sets,
            BTreeSet::from([
                "CustomNoUpgrade".to_owned(),
                "TechPreviewNoUpgrade".to_owned()
            ])
        );
        assert_eq!(
            used.describe(),
            "the release uses cluster profiles hypershift and feature sets CustomNoUpgrade, Default, TechPreviewNoUpgrade"
        );
    }

    #[test]
    fn refuses_what_selects_nothing() {
        let used = used();
        let with = |profile: Option<&str>, feature_set: &str| Filters {
            profile: profile.map(str::to_owned),
            feature_set: feature_set.to_owned(),
            ..Filters::default()
        };
        for (profile, fs) in [(None, "Default"), (Some("hypershift"), "CustomNoUpgrade")] {
            assert_eq!(used.refusal(&with(profile, fs)), None, "{profile:?} {fs}");
            assert_eq!(used.feature_set_note(&with(profile, fs), 3), None);
        }
        for (profile, fs, why) in [
            (Some(""), "Default", "--profile: the profile name is empty"),
            (
                Some("ibm-cloud-managed"),
                "Default",
                "--profile ibm-cloud-managed: no manifest",
            ),
            (None, "", "--feature-set: the feature set name is empty"),
            (
                None,
                "techpreviewnoupgrade",
                "--feature-set techpreviewnoupgrade: not a known feature set (the known ones are CustomNoUpgrade, Default, DevPreviewNoUpgrade, OKD, TechPreviewNoUpgrade)",
            ),
            (None, "Foo", "--feature-set Foo: not a known feature set"),
        ] {
            let refusal = used.refusal(&with(profile, fs)).expect("refused");
            assert!(refusal.starts_with(why), "{refusal}");
            assert!(refusal.ends_with(&used.describe()), "{refusal}");
        }
    }

    /// Issue 25 item 6: a known feature set that no manifest names is accepted (the CVO
    /// applies the manifests without a feature-set annotation), with a note of how many.
    #[test]
    fn known_feature_set_no_manifest_names_is_accepted_with_a_note() {
        let used = used();
        for fs in ["OKD", "DevPreviewNoUpgrade"] {
            let filters = Filters {
                feature_set: fs.to_owned(),
                ..Filters::default()
            };
            assert_eq!(used.refusal(&filters), None, "{fs}");
            let note = used.feature_set_note(&filters, 7).expect("a note");
            assert!(
                note.contains("no manifest of the release names this feature set")
                    && note.contains("selects the 7 manifests without a feature-set annotation"),
                "{note}"
            );
        }
    }

    /// Issue 25 item 10: an unknown or space-padded entry keeps the manifest out under every
    /// feature set, as the CVO's checkFeatureSets.
    #[test]
    fn unknown_or_padded_feature_set_is_never_included() {
        for value in ["Default ", "TechPreviewNoUpgrade,Foo", "Default, OKD", ""] {
            let m = manifest(
                "0000_10_a_x.yaml",
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    release.openshift.io/feature-set: \"{value}\"\n"
                ),
            );
            for fs in KNOWN_FEATURE_SETS {
                let filters = Filters {
                    feature_set: fs.to_owned(),
                    ..Filters::default()
                };
                let (by, reason) = filters.exclusion(&m, None).expect("excluded");
                assert_eq!(by, ExcludedBy::FeatureSet, "{value:?} {fs}");
                assert!(reason.contains("not a known feature set"), "{reason}");
            }
        }
        assert_eq!(unknown_feature_set("Default,OKD"), None);
        assert_eq!(unknown_feature_set("Default "), Some("Default "));
    }
}
