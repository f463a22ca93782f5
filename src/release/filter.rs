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
            && !sets.split(',').any(|s| s.trim() == self.feature_set)
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
            if let Some(sets) = m.annotation(FEATURE_SET_ANNOTATION) {
                out.feature_sets.extend(
                    sets.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        out
    }

    /// Why `filters` would select a profile or feature set that no manifest names (and so
    /// silently keep nothing of it), or `None` when they are fine. The feature set `Default`
    /// is always accepted: manifests without a feature-set annotation are in it.
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
            } else if fs != DEFAULT_FEATURE_SET && !self.feature_sets.contains(fs) {
                Some(format!(
                    "--feature-set {fs}: no manifest of the release names this feature set"
                ))
            } else {
                None
            }
        })?;
        Some(format!("{problem}; {}", self.describe()))
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
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-a\n  annotations:\n    include.release.openshift.io/hypershift: \"true\"\n    include.release.openshift.io/ibm-cloud-managed: \"false\"\n    release.openshift.io/feature-set: \"TechPreviewNoUpgrade, CustomNoUpgrade\"\n",
        );
        let b = manifest(
            "0000_10_a_01_y.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-b\n",
        );
        Selectors::of([&a, &b])
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
                "--feature-set techpreviewnoupgrade: no manifest",
            ),
        ] {
            let refusal = used.refusal(&with(profile, fs)).expect("refused");
            assert!(refusal.starts_with(why), "{refusal}");
            assert!(refusal.ends_with(&used.describe()), "{refusal}");
        }
    }
}
