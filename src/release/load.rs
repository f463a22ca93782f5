//! Reading a release directory.
use std::path::{Path, PathBuf};

use super::{Filters, Release};

/// How to load a release.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub filters: Filters,
    /// `--release-image`: value of `{{.ReleaseImage}}` in the payload's `manifests/`.
    pub release_image: Option<String>,
}

/// The release could not be read at all (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read release directory {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Loads a release directory.
pub fn load(root: &Path, _options: &LoadOptions) -> Result<Release, LoadError> {
    Err(LoadError::Unreadable {
        path: root.into(),
        source: std::io::Error::other("not implemented yet"),
    })
}
