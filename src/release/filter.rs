//! Inclusion filters (profile, feature set, exclusions), as CVO applies them.

use super::{EXCLUDE_PREFIX, FEATURE_SET_ANNOTATION, INCLUDE_PREFIX, Manifest};

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
}

impl Default for Filters {
    fn default() -> Self {
        Filters {
            profile: None,
            feature_set: "Default".into(),
            exclude: Vec::new(),
        }
    }
}

impl Filters {
    /// Why the manifest is left out, or `None` when it is kept.
    pub fn exclusion(&self, manifest: &Manifest) -> Option<String> {
        if let Some(profile) = &self.profile {
            let key = format!("{INCLUDE_PREFIX}{profile}");
            if manifest.annotation(&key) != Some("true") {
                return Some(format!(
                    "not included in profile `{profile}` (no `{key}: \"true\"`)"
                ));
            }
        }
        if let Some(sets) = manifest.annotation(FEATURE_SET_ANNOTATION)
            && !sets.split(',').any(|s| s.trim() == self.feature_set)
        {
            return Some(format!(
                "feature sets `{sets}` do not include `{}`",
                self.feature_set
            ));
        }
        self.exclude.iter().find_map(|id| {
            let key = format!("{EXCLUDE_PREFIX}{id}");
            (manifest.annotation(&key) == Some("true")).then(|| format!("excluded by `{key}`"))
        })
    }
}
