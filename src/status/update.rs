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
    /// `UpgradeableFalse`, `StaleDeleteManifest`, `LowDesiredVersion`, …
    pub reason: &'static str,
    /// For people: at most [`NAMES_SHOWN`] objects named, then a count.
    pub message: String,
    /// Every object concerned (the JSON report lists them all).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
}

/// Objects named in a message before the rest is counted.
pub const NAMES_SHOWN: usize = 10;

/// `a, b, c` — or the first [`NAMES_SHOWN`] and `and N more`.
pub fn name_list(names: &[String]) -> String {
    if names.len() <= NAMES_SHOWN {
        return names.join(", ");
    }
    format!(
        "{} and {} more",
        names[..NAMES_SHOWN].join(", "),
        names.len() - NAMES_SHOWN
    )
}

/// The version a rollback may go back to: the newest history entry older than the current
/// target, as OpenShift's CVO allows.
#[derive(Debug, Default)]
pub struct Versions<'a> {
    /// The current target: the newest history entry, completed or not.
    pub current: Option<&'a semver::Version>,
    /// The newest history entry with another version than `current`.
    pub previous: Option<&'a semver::Version>,
    /// The release being applied.
    pub target: Option<&'a semver::Version>,
}

impl Versions<'_> {
    /// Refuses what OpenShift's CVO refuses: going back further than the previous version
    /// or across a minor version (`LowDesiredVersion`), a new major version
    /// (`MajorVersionUpdate`), skipping a minor version (`MultipleMinorVersionsUpdate`).
    pub fn check(&self) -> Option<PreconditionFailure> {
        let (Some(current), Some(target)) = (self.current, self.target) else {
            return None;
        };
        let refuse = |reason, message: String| {
            Some(PreconditionFailure {
                reason,
                message,
                objects: Vec::new(),
            })
        };
        if target < current {
            return match self.previous {
                Some(previous) if previous != target => refuse(
                    "LowDesiredVersion",
                    format!(
                        "{target} is older than the current version {current}; a rollback may only go back to the previous version {previous}"
                    ),
                ),
                Some(_) if (current.major, current.minor) != (target.major, target.minor) => {
                    refuse(
                        "LowDesiredVersion",
                        format!(
                            "{target} is the previous version, but going back from {current} crosses a minor version; only rollbacks within one minor version (z-stream) are allowed"
                        ),
                    )
                }
                Some(_) => None,
                None => refuse(
                    "LowDesiredVersion",
                    format!(
                        "{target} is older than the current version {current}, and the cluster has no previous version to roll back to"
                    ),
                ),
            };
        }
        if target.major > current.major {
            return refuse(
                "MajorVersionUpdate",
                format!(
                    "{target} has a newer major version than the current version {current}; updates stay within one major version"
                ),
            );
        }
        if target.major == current.major && target.minor > current.minor + 1 {
            return refuse(
                "MultipleMinorVersionsUpdate",
                format!(
                    "{target} skips a minor version after {current}; update to {}.{} first",
                    current.major,
                    current.minor + 1
                ),
            );
        }
        None
    }
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
    /// Delete manifests of this release whose objects are absent and were deleted under an
    /// earlier minor release (per the deletion record; all absent ones without a record).
    pub stale_deletes: &'a [ObjectId],
    /// Why the deletion record could not be read, when it could not.
    pub record_error: Option<&'a str>,
    /// Delete manifests whose objects could not be read (so neither absent nor present).
    pub unknown_deletes: &'a [ObjectId],
    /// Current, previous and target versions (rollbacks, giant hops).
    pub versions: Versions<'a>,
}

impl Precondition<'_> {
    /// The failures that refuse the update.
    pub fn check(&self) -> Vec<PreconditionFailure> {
        let mut failures: Vec<PreconditionFailure> = self.versions.check().into_iter().collect();
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
                objects: Vec::new(),
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
                    name_list(&names)
                ),
                objects: names,
            });
        }
        if self.update == UpdateType::MinorOrMajor && !self.stale_deletes.is_empty() {
            let names: Vec<String> = self.stale_deletes.iter().map(ToString::to_string).collect();
            let unsure = match self.record_error {
                Some(_) => {
                    " (the deletion record could not be read, so every absent object counts as deleted earlier)"
                }
                None => "",
            };
            failures.push(PreconditionFailure {
                reason: "StaleDeleteManifest",
                message: format!(
                    "delete manifests for objects already deleted under an earlier minor release must not ship in a minor/major update{unsure}: {}",
                    name_list(&names)
                ),
                objects: names,
            });
        }
        failures
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
            stale_deletes: &absent,
            record_error: None,
            unknown_deletes: &[],
            versions: Versions::default(),
        };
        let failures = p.check();
        let reasons: Vec<_> = failures.iter().map(|f| f.reason).collect();
        assert_eq!(reasons, ["UpgradeableFalse", "StaleDeleteManifest"]);
        assert!(!failures[1].message.contains("could not be read"));
        let unsure = Precondition {
            record_error: Some("forbidden"),
            ..p
        };
        assert!(unsure.check()[1].message.contains("could not be read"));
        let p = Precondition {
            update: UpdateType::Patch,
            upgradeable: Some(&blocked),
            stale_deletes: &absent,
            record_error: None,
            unknown_deletes: &absent,
            versions: Versions::default(),
        };
        assert!(p.check().is_empty());
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
            stale_deletes: &[],
            record_error: None,
            unknown_deletes: &unread,
            versions: Versions::default(),
        };
        let reasons: Vec<_> = p.check().iter().map(|f| f.reason).collect();
        assert_eq!(reasons, ["UpgradeableUnknown", "DeletionStatusUnknown"]);
        let upgradeable = Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
        let p = Precondition {
            update: UpdateType::MinorOrMajor,
            upgradeable: Some(&upgradeable),
            stale_deletes: &[],
            record_error: None,
            unknown_deletes: &[],
            versions: Versions::default(),
        };
        assert!(p.check().is_empty());
    }

    fn refusal(current: &str, previous: Option<&str>, target: &str) -> Option<&'static str> {
        let (c, p, t) = (v(current), previous.map(v), v(target));
        Versions {
            current: Some(&c),
            previous: p.as_ref(),
            target: Some(&t),
        }
        .check()
        .map(|f| f.reason)
    }

    #[test]
    fn rollbacks_and_giant_hops_are_refused_as_the_cvo_does() {
        assert_eq!(refusal("1.0.0", None, "0.1.0"), Some("LowDesiredVersion"));
        assert_eq!(
            refusal("1.4.2", Some("1.4.1"), "1.4.0"),
            Some("LowDesiredVersion")
        );
        assert_eq!(refusal("1.4.2", Some("1.4.1"), "1.4.1"), None);
        assert_eq!(
            refusal("1.5.0", Some("1.4.9"), "1.4.9"),
            Some("LowDesiredVersion")
        );
        assert_eq!(refusal("1.4.0", None, "2.0.0"), Some("MajorVersionUpdate"));
        assert_eq!(
            refusal("1.4.0", None, "1.6.0"),
            Some("MultipleMinorVersionsUpdate")
        );
        assert_eq!(refusal("1.4.0", None, "1.5.3"), None);
        assert_eq!(refusal("1.4.0", None, "1.4.0"), None);
    }

    #[test]
    fn long_lists_are_cut_in_messages_but_kept_whole() {
        let many: Vec<ObjectId> = (0..240)
            .map(|i| ObjectId::new("", "ConfigMap", Some("ns"), format!("cm-{i}")))
            .collect();
        let p = Precondition {
            update: UpdateType::MinorOrMajor,
            upgradeable: None,
            stale_deletes: &many,
            record_error: None,
            unknown_deletes: &[],
            versions: Versions::default(),
        };
        let failure = &p.check()[0];
        assert!(
            failure.message.ends_with("ConfigMap ns/cm-9 and 230 more"),
            "{}",
            failure.message
        );
        assert_eq!(failure.objects.len(), 240);
    }
}
