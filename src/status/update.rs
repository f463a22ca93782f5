//! Update type (install, patch, minor/major) and the preconditions checked before anything
//! is written.
//!
//! The current version is the newest `Completed` entry of `ClusterVersion` history; without
//! one (or without a ClusterVersion) the pass is an install. The target is the release's
//! `release-metadata` version.

use std::fmt;

use serde::Serialize;

use super::{Condition, ConditionStatus};
use crate::release::ObjectId;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdateType {
    /// Nothing completed before.
    Install,
    /// Same major.minor (including re-applying the same version), or an unknown version on
    /// either side.
    Patch,
    /// Major or minor changes.
    MinorOrMajor,
}

impl fmt::Display for UpdateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UpdateType::Install => "install",
            UpdateType::Patch => "patch update",
            UpdateType::MinorOrMajor => "minor/major update",
        })
    }
}

/// Classifies `current → target`.
pub fn update_type(
    current: Option<&semver::Version>,
    target: Option<&semver::Version>,
) -> UpdateType {
    match (current, target) {
        (None, _) => UpdateType::Install,
        (Some(c), Some(t)) if (c.major, c.minor) != (t.major, t.minor) => UpdateType::MinorOrMajor,
        _ => UpdateType::Patch,
    }
}

/// A precondition that refuses the update (exit code 4 unless `--force`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PreconditionFailure {
    /// `UpgradeableFalse` or `StaleDeleteManifest`.
    pub reason: &'static str,
    pub message: String,
}

impl fmt::Display for PreconditionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// What the preconditions need to know.
#[derive(Debug)]
pub struct Precondition<'a> {
    pub update: UpdateType,
    /// The cluster's Upgradeable condition before this pass, when known.
    pub upgradeable: Option<&'a Condition>,
    /// Delete manifests of this release whose objects are already absent.
    pub absent_deletes: &'a [ObjectId],
    /// Delete manifests whose objects could not be read (so neither absent nor present).
    pub unknown_deletes: &'a [ObjectId],
}

impl Precondition<'_> {
    /// Failures that refuse the update, and warnings that do not.
    pub fn check(&self) -> (Vec<PreconditionFailure>, Vec<String>) {
        let mut failures = Vec::new();
        let mut warnings = Vec::new();
        // Fail closed: Unknown refuses exactly as False does.
        if self.update == UpdateType::MinorOrMajor
            && let Some(c) = self
                .upgradeable
                .filter(|c| c.status != ConditionStatus::True)
        {
            let (reason, status) = match c.status {
                ConditionStatus::Unknown => ("UpgradeableUnknown", "Unknown"),
                _ => ("UpgradeableFalse", "False"),
            };
            failures.push(PreconditionFailure {
                reason,
                message: format!(
                    "a minor/major update is not allowed while Upgradeable={status} ({}: {})",
                    c.reason, c.message
                ),
            });
        }
        if self.update == UpdateType::MinorOrMajor && !self.unknown_deletes.is_empty() {
            let names: Vec<String> = self
                .unknown_deletes
                .iter()
                .map(ToString::to_string)
                .collect();
            failures.push(PreconditionFailure {
                reason: "DeletionStatusUnknown",
                message: format!(
                    "cannot tell whether the objects of these delete manifests exist (the server did not answer); a minor/major update needs to know: {}",
                    names.join(", ")
                ),
            });
        }
        if !self.absent_deletes.is_empty() {
            let names: Vec<String> = self
                .absent_deletes
                .iter()
                .map(ToString::to_string)
                .collect();
            if self.update == UpdateType::MinorOrMajor {
                failures.push(PreconditionFailure {
                    reason: "StaleDeleteManifest",
                    message: format!(
                        "delete manifests for objects that are already absent must not ship in a minor/major update: {}",
                        names.join(", ")
                    ),
                });
            } else {
                for n in names {
                    warnings.push(format!(
                        "delete manifest for {n}: the object is already absent"
                    ));
                }
            }
        }
        (failures, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        s.parse().unwrap()
    }

    #[test]
    fn update_types() {
        assert_eq!(update_type(None, Some(&v("4.15.1"))), UpdateType::Install);
        assert_eq!(
            update_type(Some(&v("4.15.1")), Some(&v("4.15.9"))),
            UpdateType::Patch
        );
        assert_eq!(
            update_type(Some(&v("4.15.1")), Some(&v("4.15.1"))),
            UpdateType::Patch
        );
        assert_eq!(
            update_type(Some(&v("4.15.1")), Some(&v("4.16.0"))),
            UpdateType::MinorOrMajor
        );
        assert_eq!(
            update_type(Some(&v("4.15.1")), Some(&v("5.0.0"))),
            UpdateType::MinorOrMajor
        );
        assert_eq!(update_type(Some(&v("4.15.1")), None), UpdateType::Patch);
    }

    #[test]
    fn minor_update_refused_while_not_upgradeable_and_with_stale_deletes() {
        let blocked = Condition::new(
            "Upgradeable",
            ConditionStatus::False,
            "ResourceDeletionStuck",
            "x",
        );
        let absent = [ObjectId::new("", "ConfigMap", Some("ns"), "old")];
        let p = Precondition {
            update: UpdateType::MinorOrMajor,
            upgradeable: Some(&blocked),
            absent_deletes: &absent,
            unknown_deletes: &[],
        };
        let (failures, warnings) = p.check();
        let reasons: Vec<_> = failures.iter().map(|f| f.reason).collect();
        assert_eq!(reasons, ["UpgradeableFalse", "StaleDeleteManifest"]);
        assert!(warnings.is_empty());
        let p = Precondition {
            update: UpdateType::Patch,
            upgradeable: Some(&blocked),
            absent_deletes: &absent,
            unknown_deletes: &absent,
        };
        let (failures, warnings) = p.check();
        assert!(failures.is_empty());
        assert_eq!(
            warnings,
            ["delete manifest for ConfigMap ns/old: the object is already absent"]
        );
    }

    #[test]
    fn unknown_refuses_a_minor_update_like_false() {
        let unknown = Condition::new(
            "Upgradeable",
            ConditionStatus::Unknown,
            "DeletionStatusUnknown",
            "x",
        );
        let unread = [ObjectId::new("", "ConfigMap", Some("ns"), "unread")];
        let p = Precondition {
            update: UpdateType::MinorOrMajor,
            upgradeable: Some(&unknown),
            absent_deletes: &[],
            unknown_deletes: &unread,
        };
        let reasons: Vec<_> = p.check().0.iter().map(|f| f.reason).collect();
        assert_eq!(reasons, ["UpgradeableUnknown", "DeletionStatusUnknown"]);
        let upgradeable = Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
        let p = Precondition {
            update: UpdateType::MinorOrMajor,
            upgradeable: Some(&upgradeable),
            absent_deletes: &[],
            unknown_deletes: &[],
        };
        assert!(p.check().0.is_empty());
    }
}
