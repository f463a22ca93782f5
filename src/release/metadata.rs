//! `release-metadata`: the payload's version.
use serde::Serialize;

/// The `release-metadata` file (`kind: cincinnati-metadata-v0`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReleaseMetadata {
    pub version: semver::Version,
    pub previous: Vec<semver::Version>,
}
