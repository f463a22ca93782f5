//! A release: the ordered set of manifests `cvo` makes a cluster match.
//!
//! This module owns reading a release directory into [`Release`] — files, YAML/JSON
//! documents, object identity, the `0000_<runlevel>_<component>_` file-name convention,
//! `release-metadata`, the `release.openshift.io/*` annotations and the inclusion filters
//! (profile, feature set, feature gates, major version, exclusions), and [`typed`]: the typed round trip that turns a
//! manifest into the body `apply` sends. It performs no I/O beyond reading the directory and
//! never talks to a cluster.
//!
//! Loading never stops at the first bad input: [`load`] returns every good manifest together
//! with every problem found, each as a [`Diagnostic`] naming file, document and line.

mod annotations;
pub mod cache;
pub mod capability;
pub mod feature_gate;
mod filename;
mod filter;
mod identity;
pub mod left_out;
mod lines;
mod load;
mod locate;
mod metadata;
mod read;
mod repair;
mod template;
pub mod typed;
mod work;
mod yaml;

use std::path::PathBuf;

use serde::Serialize;

use crate::diagnostic::{Diagnostic, Location, Severity};
pub use annotations::{
    CAPABILITY_ANNOTATION, CREATE_ONLY_ANNOTATION, DELETE_ANNOTATION, DeleteIntent, EXCLUDE_PREFIX,
    FEATURE_SET_ANNOTATION, INCLUDE_PREFIX,
};
pub use cache::{CacheCounts, ParseCache};
pub use filename::{FileOrder, parse_file_name};
pub use filter::{
    DEFAULT_FEATURE_SET, Filters, KNOWN_FEATURE_SETS, Selectors, unknown_feature_set,
};
pub use identity::ObjectId;
pub use left_out::LeftOut;
pub use load::{
    CONFIG_FILE, DEFAULT_CLUSTER_PROFILE, LoadError, LoadOptions, ProfileChoice, ReadRelease,
    is_config_file, load, load_selected, read, version_hash,
};
pub use locate::FieldLines;
pub use metadata::{MetadataError, ReleaseMetadata};
pub use read::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_RELEASE_BYTES, Limits, read_capped};

/// One Kubernetes object from the release, with where it came from.
#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    /// (group, kind, namespace, name): the API version is not part of identity.
    pub id: ObjectId,
    /// `apiVersion` as written (`v1`, `apps/v1`, `config.openshift.io/v1`).
    pub api_version: String,
    /// File, document index and line of the document.
    pub location: Location,
    /// Run level and component from the file name; `None` when the name does not follow
    /// the convention (such manifests run serially, as in CVO).
    pub order: Option<FileOrder>,
    /// What `release.openshift.io/delete` asks for.
    pub intent: DeleteIntent,
    /// `release.openshift.io/create-only: "true"`: create when absent, never update.
    pub create_only: bool,
    /// `capability.openshift.io/name`, split on `+` as the CVO splits it (nothing trimmed;
    /// empty when the annotation is absent or empty).
    pub capabilities: Vec<String>,
    /// The object as it will be sent (CVO templates rendered for `manifests/`).
    #[serde(serialize_with = "serialize_shared")]
    pub object: std::sync::Arc<serde_json::Value>,
}

fn serialize_shared<S: serde::Serializer>(
    object: &std::sync::Arc<serde_json::Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&**object, s)
}

impl Manifest {
    /// File name without directories, the unit the file-name convention speaks of.
    pub fn file_name(&self) -> &str {
        self.location
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    }

    /// The object's `metadata.annotations` as the CVO reads them: empty when absent, and
    /// empty too when any value is not a string ([`Manifest::non_string_annotation`]).
    pub fn annotations(&self) -> impl Iterator<Item = (&str, &str)> {
        self.readable_annotations()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
    }

    /// One annotation, read as [`Manifest::annotations`] reads them.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.readable_annotations()?.get(key)?.as_str()
    }

    /// The first annotation whose value is not a string (`hypershift: true`, unquoted). The
    /// CVO (Kubernetes' unstructured reader) then reads the object as having no annotations
    /// at all, and so does cvo for inclusion; `validate` reports it.
    pub fn non_string_annotation(&self) -> Option<(&str, &serde_json::Value)> {
        self.object
            .pointer("/metadata/annotations")?
            .as_object()?
            .iter()
            .find(|(_, v)| !v.is_string())
            .map(|(k, v)| (k.as_str(), v))
    }

    fn readable_annotations(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        let all = self.object.pointer("/metadata/annotations")?.as_object()?;
        all.values()
            .all(serde_json::Value::is_string)
            .then_some(all)
    }

    pub fn is_delete(&self) -> bool {
        self.intent == DeleteIntent::Delete
    }
}

/// A loaded release.
#[derive(Clone, Debug, Serialize)]
pub struct Release {
    /// The directory given by the user.
    pub root: PathBuf,
    /// `--release-image`: the pull spec of the release image, when given. ClusterVersion
    /// records it as `desired.image` and in history (the empty string without it).
    pub image: Option<String>,
    /// A stable hash of the release's files ([`version_hash`]): ClusterVersion
    /// `status.versionHash`.
    pub version_hash: String,
    /// `release-metadata`, when the release has one and it is valid.
    pub metadata: Option<ReleaseMetadata>,
    /// Manifests kept by the filters, in apply order (folder — a payload's `manifests/`
    /// before `release-manifests/` — then file name, then document).
    pub manifests: Vec<Manifest>,
    /// Manifests dropped by the filters (profile, feature set, exclusions), with why.
    pub excluded: Vec<Excluded>,
    /// Everything found wrong or suspicious while loading.
    pub diagnostics: Vec<Diagnostic>,
    /// What is known of the release image's signature: set by whoever read it from an OCI
    /// source with `--verify-key` (the loader itself reads a directory: `NotChecked`).
    #[serde(skip)]
    pub verification: Verification,
    /// Which capabilities the release knows, and its named sets (`capabilities.yaml`, else
    /// derived from the manifests): [`capability`].
    pub capabilities: capability::Catalogue,
}

/// What is known of a release image's signature (`--verify-key`, docs/release-format.md):
/// ClusterVersion history `verified`, and the accepted risk of a forced update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Verification {
    /// Not checked: a directory, or no key given.
    #[default]
    NotChecked,
    /// Its signature verified with one of the keys.
    Verified,
    /// Its signature did not verify, and it is used anyway because the update was forced
    /// (`spec.desiredUpdate.force`): the accepted risk recorded in its history entry, in the
    /// CVO's words.
    Forced(String),
}

/// A manifest that the inclusion filters left out.
#[derive(Clone, Debug, Serialize)]
pub struct Excluded {
    pub manifest: Manifest,
    /// Which filter left it out.
    pub by: ExcludedBy,
    pub reason: String,
}

/// The filter that leaves a manifest out: the keys of the `excluded` counts of every report
/// (`{profile: N, featureSet: N, featureGate: N, majorVersion: N, capability: N, exclude: N}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ExcludedBy {
    /// `--profile` (`include.release.openshift.io/<profile>`).
    Profile,
    /// `--feature-set` (`release.openshift.io/feature-set`).
    FeatureSet,
    /// A feature gate the manifest needs (`release.openshift.io/feature-gate`), enabled or
    /// not as it asks; or that annotation beside a feature-set one.
    FeatureGate,
    /// `release.openshift.io/major-version` does not admit the release's major version.
    MajorVersion,
    /// A capability the cluster does not enable (`capability.openshift.io/name`).
    Capability,
    /// `--exclude` (`exclude.release.openshift.io/<id>`).
    Exclude,
}

impl ExcludedBy {
    pub const ALL: [ExcludedBy; 6] = [
        ExcludedBy::Profile,
        ExcludedBy::FeatureSet,
        ExcludedBy::FeatureGate,
        ExcludedBy::MajorVersion,
        ExcludedBy::Capability,
        ExcludedBy::Exclude,
    ];

    /// The JSON key (`featureSet`).
    pub fn key(self) -> &'static str {
        match self {
            ExcludedBy::Profile => "profile",
            ExcludedBy::FeatureSet => "featureSet",
            ExcludedBy::FeatureGate => "featureGate",
            ExcludedBy::MajorVersion => "majorVersion",
            ExcludedBy::Capability => "capability",
            ExcludedBy::Exclude => "exclude",
        }
    }

    /// In words (`feature set`).
    pub fn label(self) -> &'static str {
        match self {
            ExcludedBy::Profile => "profile",
            ExcludedBy::FeatureSet => "feature set",
            ExcludedBy::FeatureGate => "feature gate",
            ExcludedBy::MajorVersion => "major version",
            ExcludedBy::Capability => "capability",
            ExcludedBy::Exclude => "exclude",
        }
    }
}

impl Release {
    /// Every manifest of the release, kept or excluded by the filters, in load order of each.
    pub fn all_manifests(&self) -> impl Iterator<Item = &Manifest> {
        self.manifests
            .iter()
            .chain(self.excluded.iter().map(|e| &e.manifest))
    }

    /// Leaves out the kept manifests that the feature gates `enabled` exclude
    /// ([`feature_gate::feature_gate_exclusion`]), as [`ExcludedBy::FeatureGate`], keeping the
    /// order of the rest: for a reader that knows the gates once the release is loaded
    /// (`--feature-gates`, `--feature-gates-file` read for the release's version).
    pub fn leave_out_by_feature_gates(&mut self, enabled: &feature_gate::EnabledGates) {
        // In place: the manifests left out are taken from the list, each with its reason.
        let mut reasons = Vec::new();
        let left: Vec<Manifest> = self
            .manifests
            .extract_if(.., |m| {
                match feature_gate::feature_gate_exclusion(enabled, m) {
                    Some(why) => {
                        reasons.push(why);
                        true
                    }
                    None => false,
                }
            })
            .collect();
        self.excluded.extend(
            left.into_iter()
                .zip(reasons)
                .map(|(manifest, reason)| Excluded {
                    manifest,
                    by: ExcludedBy::FeatureGate,
                    reason,
                }),
        );
    }

    pub fn version(&self) -> Option<&semver::Version> {
        self.metadata.as_ref().map(|m| &m.version)
    }

    /// The diagnostics that are errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
    }

    /// Names the release's files (manifests kept and excluded, diagnostics) relative to its
    /// root instead of under it: for a release read from an OCI artifact, whose root is a
    /// temporary extraction directory that means nothing once the command ends (the artifact's
    /// digest is what names it). Call it once nothing reads the files again: validation does
    /// ([`crate::release::FieldLines`]).
    pub fn name_files_relative_to_root(&mut self) {
        let root = self.root.clone();
        let relative = |file: &mut PathBuf| {
            if let Ok(rel) = file.strip_prefix(&root) {
                *file = rel.to_path_buf();
            }
        };
        for m in &mut self.manifests {
            relative(&mut m.location.file);
        }
        for e in &mut self.excluded {
            relative(&mut e.manifest.location.file);
        }
        for d in &mut self.diagnostics {
            relative(&mut d.location.file);
        }
        if let Some(file) = &mut self.capabilities.file {
            relative(file);
        }
    }

    /// The errors in one line, for a status message: `N errors (see `cvo validate`):
    /// file:line: message; …` — the first ten, then how many more.
    pub fn errors_line(&self) -> String {
        const SHOWN: usize = 10;
        let errors: Vec<String> = self
            .errors()
            .map(|d| format!("{}: {}", d.location, d.message))
            .collect();
        let mut line = format!(
            "{} errors (see `cvo validate`): {}",
            errors.len(),
            errors[..errors.len().min(SHOWN)].join("; ")
        );
        if errors.len() > SHOWN {
            line.push_str(&format!("; and {} more", errors.len() - SHOWN));
        }
        line
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}
