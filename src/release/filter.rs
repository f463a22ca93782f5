//! Inclusion filters (profile, feature set, exclusions), as CVO applies them.

/// Which manifests of a release to keep.
#[derive(Clone, Debug)]
pub struct Filters {
    /// `--profile NAME`: keep only manifests with `include.release.openshift.io/NAME: "true"`.
    pub profile: Option<String>,
    /// `--feature-set NAME` (default `Default`).
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
