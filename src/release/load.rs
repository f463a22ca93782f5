//! Reading a release directory: which files, in which order, and what each document becomes.
//!
//! A release is either a flat directory of manifests or a CVO payload root holding
//! `manifests/` (CVO's own, Go-templated) and `release-manifests/`. Only top-level `.yaml`,
//! `.yml` and `.json` files are read (hidden ones too, with a warning; cvo's own config file
//! [`CONFIG_FILE`] never), as the CVO reads them:
//! every file of `manifests/` in byte order of its name, then every file of
//! `release-manifests/`. What a file holds is read by its content, as the CVO's reader does:
//! JSON when it starts with `{`, else YAML.
//! `release-metadata` and `image-references` are read where CVO keeps them, and the capability
//! catalogue `capabilities.yaml` from `release-manifests/` (or the flat directory). Files are parsed
//! in parallel; the result does not depend on it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::Value;

use super::annotations::{
    CAPABILITY_ANNOTATION, CREATE_ONLY_ANNOTATION, DELETE_ANNOTATION, FEATURE_SET_ANNOTATION,
};
use super::cache::{CacheCounts, ParseCache, Session};
use super::capability::{CATALOGUE_FILE, Catalogue};
use super::filter::{KNOWN_FEATURE_SETS, unknown_feature_set};
use super::metadata::parse_image_references;
use super::read::{Limits, ReadError, human_bytes, read_capped, regular_file_size};
use super::template::{TemplateValues, mentions_cvo_fields, render};
use super::yaml::{Document, DocumentError, DuplicateKey, Parsed, decode, parse_json, parse_yaml};
use super::{
    DeleteIntent, Excluded, Filters, Manifest, ObjectId, Release, ReleaseMetadata, Verification,
    parse_file_name,
};
use crate::diagnostic::{Diagnostic, Location, Severity, excerpt};

/// The profile CVO renders into `{{.ClusterProfile}}` when none is given.
pub const DEFAULT_CLUSTER_PROFILE: &str = "self-managed-high-availability";

/// cvo's own config file (the settings of `cvo validate`, docs/ci.md), checked in next to a
/// release. It is never part of one: the loader does not read it as a manifest (in any
/// folder of the release) and `cvo push` leaves it out of the artifact ([`is_config_file`]).
pub const CONFIG_FILE: &str = ".cvo.yaml";

/// Whether `path` (a file of a release directory, at any depth) is cvo's own
/// [`CONFIG_FILE`], which is never part of a release.
pub fn is_config_file(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == CONFIG_FILE)
}

/// How to load a release.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub filters: Filters,
    /// `--release-image`: value of `{{.ReleaseImage}}` in the payload's `manifests/`.
    pub release_image: Option<String>,
    /// How much may be read (docs/limits.md).
    pub limits: Limits,
    /// Where parsed files are kept to be reused (`--cache-dir`'s `parsed/`); `None`: every
    /// file is parsed, nothing is read from or written to a cache (`--no-cache`).
    pub cache: Option<ParseCache>,
}

/// The release could not be read at all (exit code 2). Problems with single files are
/// diagnostics in the returned [`Release`] instead.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "cannot read release directory {}: {source}",
        crate::diagnostic::escaped_path(path)
    )]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a directory: a release is a directory of manifests or a CVO payload root",
        crate::diagnostic::escaped_path(path)
    )]
    NotADirectory { path: PathBuf },
    #[error("release {} is larger than the limit of {} for a whole release (its files hold at least {}); split it, or raise the limit with --max-release-bytes if it really is this large (docs/limits.md)", crate::diagnostic::escaped_path(path), human_bytes(*limit), human_bytes(*total))]
    TooLarge {
        path: PathBuf,
        limit: u64,
        total: u64,
    },
}

/// A manifest file to read.
struct SourceFile {
    path: PathBuf,
    name: String,
    templated: bool,
}

/// The files of a release, found but not read yet.
#[derive(Default)]
struct Found {
    /// Manifest files, in lexical file-name order across folders.
    files: Vec<SourceFile>,
    metadata: Option<PathBuf>,
    image_references: Option<PathBuf>,
    /// [`CATALOGUE_FILE`] of `release-manifests/` (or of a flat release).
    catalogue: Option<PathBuf>,
}

/// How [`load_selected`] chose the release's profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileChoice {
    /// The profile of the options (or none: the release uses no profiles).
    AsGiven,
    /// No profile was given and the release uses these: it was read in
    /// [`DEFAULT_CLUSTER_PROFILE`], the CVO's default.
    Default { profiles: Vec<String> },
}

/// Loads `root` as every `--release` reader does (`cvo operator` at start, and a release it
/// pulls later): with the options' profile; without one, a release that uses cluster profiles
/// is read in [`DEFAULT_CLUSTER_PROFILE`] (every profile at once would hold each object's
/// per-profile twins). A profile or feature set no manifest names would silently select
/// nothing: refused, naming the ones the release uses, as is a release that uses profiles but
/// not the default one.
///
/// # Errors
///
/// The loader's error, or the refusal, in plain words.
pub fn load_selected(
    root: &Path,
    options: &LoadOptions,
) -> Result<(Release, ProfileChoice), String> {
    let read = read(root, options).map_err(|e| e.to_string())?;
    let used = super::Selectors::of(read.all_manifests());
    if let Some(why) = used.refusal(&options.filters) {
        return Err(why);
    }
    if options.filters.profile.is_some() || used.profiles.is_empty() {
        return Ok((read.into_selected(&options.filters), ProfileChoice::AsGiven));
    }
    if !used.profiles.contains(DEFAULT_CLUSTER_PROFILE) {
        return Err(format!(
            "{}, but not {DEFAULT_CLUSTER_PROFILE}, the CVO's default: choose one with --profile",
            used.describe()
        ));
    }
    // Read once: the files were rendered in the default profile already.
    let mut in_default = options.filters.clone();
    in_default.profile = Some(DEFAULT_CLUSTER_PROFILE.to_owned());
    Ok((
        read.into_selected(&in_default),
        ProfileChoice::Default {
            profiles: used.profiles.into_iter().collect(),
        },
    ))
}

/// Loads a release directory: every good manifest plus every problem found.
///
/// # Errors
///
/// A [`LoadError`] when the release cannot be read at all: `root` (or one of its folders)
/// cannot be read, is not a directory, or its files are larger together than
/// [`Limits::max_release_bytes`]. Problems with single files are diagnostics in the returned
/// [`Release`] instead.
pub fn load(root: &Path, options: &LoadOptions) -> Result<Release, LoadError> {
    let filters = options.filters.clone();
    Ok(read(root, options)?.into_selected(&filters))
}

/// A release read and parsed once, not yet filtered: [`ReadRelease::select`] makes the
/// release of each selection (profile, feature set, …) from it without reading or parsing the
/// files again (only a payload's templated files are rendered again, for another profile).
pub struct ReadRelease {
    root: PathBuf,
    files: Vec<SourceFile>,
    per_file: Vec<FileRead>,
    /// Whole-release problems (metadata, image references, catalogue, sub-directories).
    diagnostics: Vec<Diagnostic>,
    metadata: Option<ReleaseMetadata>,
    catalogue: Option<Catalogue>,
    version_hash: String,
    values: TemplateValues,
    limits: Limits,
    cache: Option<ParseCache>,
    cache_counts: Option<CacheCounts>,
}

/// Reads and parses the release at `root` as [`load`] does, without filtering it.
///
/// # Errors
///
/// As [`load`].
pub fn read(root: &Path, options: &LoadOptions) -> Result<ReadRelease, LoadError> {
    let meta = std::fs::metadata(root).map_err(|source| LoadError::Unreadable {
        path: root.into(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(LoadError::NotADirectory { path: root.into() });
    }
    let mut diagnostics = Vec::new();
    let found = find_files(root, &mut diagnostics)?;
    // The whole release is refused before anything is read when its files are too large
    // together; a file that grows meanwhile is still held to the per-file cap.
    let sizes = found
        .files
        .iter()
        .map(|f| &f.path)
        .chain(found.metadata.iter())
        .chain(found.image_references.iter())
        .chain(found.catalogue.iter())
        .filter_map(|p| regular_file_size(p).ok());
    let mut total = 0u64;
    for size in sizes {
        total = total.saturating_add(size);
    }
    check_release_size(root, options.limits, total)?;

    let limits = options.limits;
    let mut metadata_text = None;
    let metadata = found.metadata.and_then(|path| {
        read_small_file(
            &path,
            limits,
            |text: &str| {
                metadata_text = Some(text.to_owned());
                ReleaseMetadata::parse(text)
            },
            r#"write JSON like {"kind": "cincinnati-metadata-v0", "version": "4.16.2"}"#,
            &mut diagnostics,
        )
    });
    let images = found
        .image_references
        .and_then(|path| {
            read_small_file(
                &path,
                limits,
                parse_image_references,
                "write an ImageStream whose spec.tags list `name:` and `from: {name: PULLSPEC}`",
                &mut diagnostics,
            )
        })
        .unwrap_or_default();
    let mut catalogue_text = None;
    let catalogue = found.catalogue.and_then(|path| {
        let read = read_small_file(
            &path,
            limits,
            |text: &str| {
                catalogue_text = Some(text.to_owned());
                Catalogue::parse(text)
            },
            "write YAML like `known: [Console, Insights]` and `sets: {None: [], vCurrent: [Console, Insights]}` (docs/capabilities.md)",
            &mut diagnostics,
        );
        read.map(|c| Catalogue {
            file: Some(path),
            ..c
        })
    });
    let values = TemplateValues {
        release_image: options.release_image.clone(),
        cluster_profile: options
            .filters
            .profile
            .clone()
            .unwrap_or_else(|| DEFAULT_CLUSTER_PROFILE.to_owned()),
        images,
    };

    let session = options.cache.as_ref().map(Session::new);
    let per_file: Vec<FileRead> = found
        .files
        .par_iter()
        .map(|f| load_file(f, &values, limits, session.as_ref()))
        .collect();
    let cache_counts = session.map(Session::finish);
    let read: u64 = per_file.iter().map(|f| f.bytes).sum();
    check_release_size(root, limits, read)?;
    let version_hash = release_hash(
        &found.files,
        &per_file,
        catalogue_text.as_deref(),
        metadata_text.as_deref(),
    );
    Ok(ReadRelease {
        root: root.to_path_buf(),
        files: found.files,
        per_file,
        diagnostics,
        metadata,
        catalogue,
        version_hash,
        values,
        limits,
        cache: options.cache.clone(),
        cache_counts,
    })
}

impl ReadRelease {
    /// Every manifest of every file, whatever the filters.
    pub fn all_manifests(&self) -> impl Iterator<Item = &Manifest> {
        self.per_file.iter().flat_map(|f| f.manifests.iter())
    }

    /// How reading used the parse cache (`None`: read without one).
    pub fn cache_counts(&self) -> Option<CacheCounts> {
        self.cache_counts
    }

    /// The release as `filters` select it, as [`load`] with these filters would return it.
    pub fn select(&self, filters: &Filters) -> Release {
        let values = self.values_for(filters);
        let per_file = self
            .rendered_again(&values)
            .into_iter()
            .zip(&self.per_file)
            .map(|(again, read)| {
                again.unwrap_or_else(|| (read.manifests.clone(), read.diagnostics.clone()))
            })
            .collect();
        assemble(
            &self.root,
            &values,
            self.diagnostics.clone(),
            self.metadata.clone(),
            self.catalogue.clone(),
            self.version_hash.clone(),
            per_file,
            filters,
        )
    }

    /// [`ReadRelease::select`], consuming the read release: its manifests are moved, not
    /// copied (for the last or only selection of a release).
    pub fn into_selected(self, filters: &Filters) -> Release {
        let values = self.values_for(filters);
        let per_file = self
            .rendered_again(&values)
            .into_iter()
            .zip(self.per_file)
            .map(|(again, read)| again.unwrap_or((read.manifests, read.diagnostics)))
            .collect();
        assemble(
            &self.root,
            &values,
            self.diagnostics,
            self.metadata,
            self.catalogue,
            self.version_hash,
            per_file,
            filters,
        )
    }

    /// [`ReadRelease::select`] for each of `filters` in turn, the last moving the manifests
    /// instead of copying them: one copy of the release fewer at the peak, and no copy at all
    /// for a release selected once.
    pub fn into_selections(self, filters: Vec<Filters>) -> impl Iterator<Item = Release> {
        let mut read = Some(self);
        let last = filters.len().saturating_sub(1);
        filters
            .into_iter()
            .enumerate()
            .filter_map(move |(i, filters)| match (i == last, read.take()) {
                (true, Some(r)) => Some(r.into_selected(&filters)),
                (false, Some(r)) => {
                    let release = r.select(&filters);
                    read = Some(r);
                    Some(release)
                }
                (_, None) => None,
            })
    }

    /// For each file, its manifests and diagnostics read again when `values` render it
    /// differently (a payload's templated file, in another profile); `None` for the rest,
    /// which are as they were read.
    #[allow(clippy::type_complexity)]
    fn rendered_again(
        &self,
        values: &TemplateValues,
    ) -> Vec<Option<(Vec<Manifest>, Vec<Diagnostic>)>> {
        let session = self.cache.as_ref().map(Session::new);
        let again = self
            .files
            .iter()
            .map(|file| {
                (file.templated && values.cluster_profile != self.values.cluster_profile).then(
                    || {
                        let again = load_file(file, values, self.limits, session.as_ref());
                        (again.manifests, again.diagnostics)
                    },
                )
            })
            .collect();
        if let Some(session) = session {
            session.finish();
        }
        again
    }

    /// The template values for `filters`' profile.
    fn values_for(&self, filters: &Filters) -> TemplateValues {
        TemplateValues {
            cluster_profile: filters
                .profile
                .clone()
                .unwrap_or_else(|| DEFAULT_CLUSTER_PROFILE.to_owned()),
            ..self.values.clone()
        }
    }
}

/// A release from its parsed files: the manifests `filters` keep, the rest excluded with the
/// reason, and every problem.
#[allow(clippy::too_many_arguments)]
fn assemble(
    root: &Path,
    values: &TemplateValues,
    mut diagnostics: Vec<Diagnostic>,
    metadata: Option<ReleaseMetadata>,
    catalogue: Option<Catalogue>,
    version_hash: String,
    per_file: Vec<(Vec<Manifest>, Vec<Diagnostic>)>,
    filters: &Filters,
) -> Release {
    let release_major = metadata.as_ref().map(|m| m.version.major);
    let mut manifests = Vec::with_capacity(per_file.iter().map(|(m, _)| m.len()).sum());
    let mut excluded = Vec::new();
    for (file_manifests, file_diagnostics) in per_file {
        diagnostics.extend(file_diagnostics);
        for manifest in file_manifests {
            match filters.exclusion(&manifest, release_major) {
                Some((by, reason)) => excluded.push(Excluded {
                    manifest,
                    by,
                    reason,
                }),
                None => manifests.push(manifest),
            }
        }
    }
    diagnostics.extend(duplicate_identities(&manifests));
    let capabilities = catalogue.unwrap_or_else(|| {
        Catalogue::derived(
            manifests
                .iter()
                .chain(excluded.iter().map(|e: &Excluded| &e.manifest)),
        )
    });
    Release {
        root: root.to_path_buf(),
        image: values.release_image.clone(),
        version_hash,
        metadata,
        manifests,
        excluded,
        diagnostics,
        verification: Verification::NotChecked,
        capabilities,
    }
}

/// The files of the release at `root`: a flat directory, or a payload root's `manifests/`
/// (templated) and `release-manifests/`. Sub-directories are reported, not read.
fn find_files(root: &Path, diagnostics: &mut Vec<Diagnostic>) -> Result<Found, LoadError> {
    let manifests_dir = root.join("manifests");
    let release_dir = root.join("release-manifests");
    let payload = manifests_dir.is_dir() || release_dir.is_dir();
    let folders: Vec<(PathBuf, bool)> = if payload {
        [(manifests_dir, true), (release_dir, false)]
            .into_iter()
            .filter(|(d, _)| d.is_dir())
            .collect()
    } else {
        vec![(root.to_path_buf(), false)]
    };
    let mut found = Found::default();
    for (dir, templated) in &folders {
        let entries = read_dir_sorted(dir).map_err(|source| LoadError::Unreadable {
            path: dir.clone(),
            source,
        })?;
        for (path, name, is_dir) in entries {
            if is_dir {
                diagnostics.push(
                    Diagnostic::new(
                        "subdirectory-ignored",
                        Severity::Warning,
                        Location::file(&path),
                        "sub-directories of a release are not read",
                    )
                    .with_help("move its manifests up one level if they belong to the release"),
                );
            } else if name == "release-metadata" {
                found.metadata = Some(path);
            } else if name == "image-references" {
                found.image_references = Some(path);
            } else if name == CATALOGUE_FILE && !*templated {
                found.catalogue = Some(path);
            } else if name == CONFIG_FILE {
                // cvo's own settings, checked in beside the manifests: never a manifest.
            } else if [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e)) {
                if name.starts_with('.') {
                    diagnostics.push(
                        Diagnostic::new(
                            "hidden-file",
                            Severity::Warning,
                            Location::file(&path),
                            "a hidden manifest file (its name starts with `.`) is part of the release: the CVO applies it, before the files whose names start with a letter or digit",
                        )
                        .with_help("rename the file without the leading `.` if it belongs to the release, or delete it; editors and archives often leave such files behind"),
                    );
                }
                found.files.push(SourceFile {
                    path,
                    name,
                    templated: *templated,
                });
            }
        }
    }
    if found.metadata.is_none() && payload && root.join("release-metadata").is_file() {
        found.metadata = Some(root.join("release-metadata"));
    }
    // As the CVO: every file of `manifests/`, then every file of `release-manifests/`, each
    // folder in byte order of its names (hidden files first).
    Ok(found)
}

fn check_release_size(root: &Path, limits: Limits, total: u64) -> Result<(), LoadError> {
    if total > limits.max_release_bytes {
        return Err(LoadError::TooLarge {
            path: root.to_path_buf(),
            limit: limits.max_release_bytes,
            total,
        });
    }
    Ok(())
}

/// Why a small text file of the release could not be read as text.
#[derive(Debug, thiserror::Error)]
enum TextError {
    #[error("the file {}; {}", .0, .0.help())]
    Read(ReadError),
    #[error(
        "invalid UTF-8: byte 0x{byte:02X} at byte offset {offset}; save the file as UTF-8 text"
    )]
    NotUtf8 { byte: u8, offset: usize },
}

/// A small text file of the release (`release-metadata`, `image-references`).
fn read_text(path: &Path, limits: Limits) -> Result<String, TextError> {
    let bytes = read_capped(path, limits.max_file_bytes).map_err(TextError::Read)?;
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        TextError::NotUtf8 {
            byte: e.as_bytes()[offset],
            offset,
        }
    })
}

/// One of the release's small files (`release-metadata`, `image-references`), read and
/// parsed; `None`, with a diagnostic that starts with the file name and says why (and
/// `help`), when it cannot be used.
fn read_small_file<T, E: std::fmt::Display>(
    path: &Path,
    limits: Limits,
    parse: impl FnOnce(&str) -> Result<T, E>,
    help: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<T> {
    let problem = |message: &dyn std::fmt::Display| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        Diagnostic::new(
            "release-metadata",
            Severity::Error,
            Location::file(path),
            format!("{name}: {message}"),
        )
        .with_help(help)
    };
    let parsed = match read_text(path, limits) {
        Ok(text) => parse(&text).map_err(|e| problem(&e)),
        Err(e) => Err(problem(&e)),
    };
    parsed.map_err(|d| diagnostics.push(d)).ok()
}

/// Directory entries as (path, file name, is directory), sorted by name in byte order (as Go's
/// `os.ReadDir`), hidden directories left out. Names that are not UTF-8 are compared by their
/// bytes, so two of them never tie.
fn read_dir_sorted(dir: &Path) -> std::io::Result<Vec<(PathBuf, String, bool)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.path().is_dir();
        if is_dir && name.starts_with('.') {
            // `.git` and the like: never part of a release, not worth a warning.
            continue;
        }
        entries.push((entry.path(), name, is_dir));
    }
    entries.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(entries)
}

/// The [`version_hash`] of a release's files as read, its catalogue and its metadata.
fn release_hash(
    files: &[SourceFile],
    per_file: &[FileRead],
    catalogue_text: Option<&str>,
    metadata_text: Option<&str>,
) -> String {
    let catalogue_digest =
        catalogue_text.map(|t| ring::digest::digest(&ring::digest::SHA256, t.as_bytes()));
    version_hash(
        files
            .iter()
            .zip(per_file)
            .map(|(f, r)| (f.name.as_str(), r.digest.as_ref().map(AsRef::as_ref)))
            .chain(
                catalogue_digest
                    .as_ref()
                    .map(|d| (CATALOGUE_FILE, Some(d.as_ref()))),
            ),
        metadata_text,
    )
}

/// A stable hash of a release's contents, as ClusterVersion `status.versionHash` records it:
/// SHA-256 over, for each manifest file in apply order (folder, then file name), its name, a
/// NUL byte and the SHA-256 of its bytes as read (before any template is rendered; a file that could not
/// be read counts as empty), then the same for `release-metadata` when the release has one;
/// written as 64 lowercase hex digits. The same files give the same hash on every machine;
/// any changed byte, renamed, added or removed file gives another. Inclusion filters and
/// `--release-image` do not change it.
pub fn version_hash<'a>(
    files: impl Iterator<Item = (&'a str, Option<&'a [u8]>)>,
    metadata: Option<&str>,
) -> String {
    use ring::digest::{Context, SHA256, digest};
    let mut all = Context::new(&SHA256);
    let mut add = |name: &str, file_digest: Option<&[u8]>| {
        all.update(name.as_bytes());
        all.update(&[0]);
        match file_digest {
            Some(d) => all.update(d),
            None => all.update(digest(&SHA256, b"").as_ref()),
        }
    };
    for (name, file_digest) in files {
        add(name, file_digest);
    }
    if let Some(text) = metadata {
        add(
            "release-metadata",
            Some(digest(&SHA256, text.as_bytes()).as_ref()),
        );
    }
    all.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One manifest file read: its manifests and problems, the bytes read and their SHA-256
/// (`None` when the file could not be read).
struct FileRead {
    manifests: Vec<Manifest>,
    diagnostics: Vec<Diagnostic>,
    bytes: u64,
    digest: Option<ring::digest::Digest>,
}

/// Reads, renders and parses one file into manifests (or takes them from `cache`); also
/// returns the bytes read and their digest.
fn load_file(
    file: &SourceFile,
    values: &TemplateValues,
    limits: Limits,
    cache: Option<&Session>,
) -> FileRead {
    let read_bytes = read_capped(&file.path, limits.max_file_bytes);
    let digest = read_bytes
        .as_ref()
        .ok()
        .map(|b| ring::digest::digest(&ring::digest::SHA256, b));
    let (manifests, diagnostics, bytes) = match (cache, &digest, read_bytes) {
        (Some(cache), Some(digest), Ok(bytes)) => {
            parse_through(cache, file, bytes, digest.as_ref(), values)
        }
        (_, _, read_bytes) => parse_file(file, read_bytes, values),
    };
    FileRead {
        manifests,
        diagnostics,
        bytes,
        digest,
    }
}

/// [`parse_file`] through the parse cache: the entry of these bytes (name, template values)
/// when there is a usable one, else parsed and stored.
fn parse_through(
    cache: &Session,
    file: &SourceFile,
    bytes: Vec<u8>,
    digest: &[u8],
    values: &TemplateValues,
) -> (Vec<Manifest>, Vec<Diagnostic>, u64) {
    let key = cache.key(digest, &file.name, file.templated, values);
    let read = bytes.len() as u64;
    if let Some(hit) = cache.get(&key, &file.path, parse_rule) {
        let order = parse_file_name(&file.name);
        let manifests = hit
            .objects
            .into_iter()
            .map(|(location, value)| {
                let doc = Document {
                    index: location.document.unwrap_or_default(),
                    line: location.line.unwrap_or_default(),
                    value,
                    duplicate_keys: Vec::new(),
                };
                to_manifest(doc, location, order.clone()).ok()
            })
            .collect::<Option<Vec<_>>>();
        if let Some(manifests) = manifests {
            return (manifests, hit.diagnostics, read);
        }
        cache.unusable();
    }
    let (manifests, diagnostics, read) = parse_file(file, Ok(bytes), values);
    cache.put(&key, &file.path, &manifests, &diagnostics, |rule| {
        parse_rule(rule).is_some()
    });
    (manifests, diagnostics, read)
}

/// Every rule [`parse_file`] reports (a parse cache entry holding another is not used).
const PARSE_RULES: [&str; 10] = [
    "parse-error",
    "unknown-template-action",
    "template-error",
    "unrendered-template",
    "json-extension-yaml-content",
    "duplicate-key",
    "repeated-document",
    "invalid-object",
    "non-string-annotation",
    "unknown-feature-set",
];

/// The rule of [`PARSE_RULES`] named `name`.
fn parse_rule(name: &str) -> Option<&'static str> {
    PARSE_RULES.iter().find(|r| **r == name).copied()
}

/// Renders and parses one file's bytes into manifests; also returns the bytes read. What it
/// gives depends on the bytes, the file's name and, for a templated file, the template values
/// only (never on the file's path but in locations): the parse cache relies on it. A rule it
/// reports is one of [`PARSE_RULES`].
fn parse_file(
    file: &SourceFile,
    read_bytes: Result<Vec<u8>, ReadError>,
    values: &TemplateValues,
) -> (Vec<Manifest>, Vec<Diagnostic>, u64) {
    let mut diagnostics = Vec::new();
    let at = |document: Option<usize>, line: Option<usize>| Location {
        file: file.path.clone(),
        document,
        line,
    };
    let is_json = file.name.ends_with(".json");
    let parse_error = |e: DocumentError| {
        Diagnostic::new(
            "parse-error",
            Severity::Error,
            at(Some(e.index), Some(e.line)),
            e.message,
        )
        .with_help(e.kind.help())
    };
    let bytes = match read_bytes {
        Ok(bytes) => bytes,
        Err(e) => {
            let d = Diagnostic::new(
                "parse-error",
                Severity::Error,
                at(None, None),
                format!("the file {e}"),
            )
            .with_help(e.help());
            return (Vec::new(), vec![d], 0);
        }
    };
    let read = bytes.len() as u64;
    let text = match decode(bytes, !is_json) {
        Ok(text) => text,
        Err(e) => return (Vec::new(), vec![parse_error(e)], read),
    };
    // A CR-only file's CRs made LFs (offsets unchanged): the template renderer and the parsers
    // then see the lines an editor numbers.
    let text = super::lines::normalize_owned(text);
    let text = if file.templated {
        match render(&text, values) {
            Ok(rendered) => rendered,
            Err(e) if e.unknown_action => {
                // As the CVO: a newer payload may use fields this version does not know; the
                // file is skipped (the newer CVO renders it once it runs).
                let d = Diagnostic::new(
                    "unknown-template-action",
                    Severity::Warning,
                    at(None, Some(e.line)),
                    format!("{}; the file is skipped, as the CVO skips a manifest whose template it cannot render (it may be meant for a newer version)", e.message),
                )
                .with_help("only .ReleaseImage, .ClusterProfile, `index .Images \"name\"` and string literals are rendered: write one of those, or the value itself, if the file must be applied");
                return (Vec::new(), vec![d], read);
            }
            Err(e) => {
                let d = Diagnostic::new(
                    "template-error",
                    Severity::Error,
                    at(None, Some(e.line)),
                    e.message,
                )
                .with_help("files in a payload's manifests/ are Go templates rendered by cvo");
                return (Vec::new(), vec![d], read);
            }
        }
    } else {
        if let Some(line) = mentions_cvo_fields(&text) {
            diagnostics.push(
                Diagnostic::new(
                    "unrendered-template",
                    Severity::Warning,
                    at(None, Some(line)),
                    "file contains CVO template actions ({{.ReleaseImage}}, {{.ClusterProfile}}, {{index .Images …}} or an escaped {{ \"{{ … }}\" }}) but is not in a payload's manifests/ folder, so they are applied literally",
                )
                .with_help("move the file into <payload>/manifests/ or write the value out"),
            );
        }
        text
    };
    // By content, as the CVO's reader: JSON when the text starts with `{`, else YAML.
    let json_content = text
        .trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
        .starts_with('{');
    if is_json && !json_content {
        diagnostics.push(
            Diagnostic::new(
                "json-extension-yaml-content",
                Severity::Warning,
                at(None, None),
                "the file is named .json but holds YAML (it does not start with `{`): it is read as YAML, as the CVO reads it",
            )
            .with_help("rename the file to .yaml, or write it as JSON"),
        );
    }
    let Parsed { documents, errors } = if json_content {
        parse_json(&text)
    } else {
        parse_yaml(&text)
    };
    diagnostics.extend(errors.into_iter().map(parse_error));
    let order = parse_file_name(&file.name);
    let mut manifests: Vec<Manifest> = Vec::with_capacity(documents.len());
    // Where each object first appears in this file (its index in `manifests`): one lookup a
    // document, not a scan of the documents before it.
    let mut first_at: HashMap<ObjectId, usize> = HashMap::with_capacity(documents.len());
    for doc in documents {
        let location = at(Some(doc.index), Some(doc.line));
        for dup in &doc.duplicate_keys {
            diagnostics.push(duplicate_key(dup, at(Some(doc.index), Some(dup.line))));
        }
        match to_manifest(doc, location.clone(), order.clone()) {
            Ok(m) => {
                // The CVO refuses a file that holds one object twice (even one the filters
                // drop), and with it the release.
                if let Some(&first) = first_at.get(&m.id) {
                    let first = &manifests[first];
                    diagnostics.push(
                        Diagnostic::new(
                            "repeated-document",
                            Severity::Error,
                            location,
                            format!(
                                "this file already holds the same object at line {} (document {}): the CVO refuses a release whose file holds one object twice",
                                first.location.line.unwrap_or_default(),
                                first.location.document.unwrap_or_default()
                            ),
                        )
                        .with_help("remove one of the two documents (objects are identified by group, kind, namespace and name)")
                        .with_object(m.id.clone()),
                    );
                } else {
                    first_at.insert(m.id.clone(), manifests.len());
                }
                diagnostics.extend(annotation_problems(&m));
                manifests.push(m)
            }
            Err(Invalid { message, help }) => diagnostics.push(
                Diagnostic::new("invalid-object", Severity::Error, location, message)
                    .with_help(help),
            ),
        }
    }
    (manifests, diagnostics, read)
}

/// What the CVO reads differently from what the annotations seem to say: a value that is not
/// a string (no annotations at all, then), a feature set it does not know (never included).
/// Warnings here (the release is used, as the CVO uses it); `validate` makes them errors
/// ([`crate::validate::rules::ERRORS_ONLY_IN_VALIDATE`]).
fn annotation_problems(m: &Manifest) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some((key, value)) = m.non_string_annotation() {
        out.push(
            Diagnostic::new(
                "non-string-annotation",
                // The CVO accepts the release (and leaves the manifest out): so does every
                // command but `validate`, which reports it as an error.
                Severity::Warning,
                m.location.clone(),
                format!(
                    "the annotation `{}` is {}, not a string: the CVO then reads the object as having no annotations at all (so it is left out when a profile is required), and the API server refuses it",
                    excerpt(key),
                    json_type(value)
                ),
            )
            .with_help(format!("quote the value, such as `{}: \"true\"`", excerpt(key)))
            .with_object(m.id.clone()),
        );
    }
    if let Some(sets) = m.annotation(FEATURE_SET_ANNOTATION)
        && let Some(unknown) = unknown_feature_set(sets)
    {
        out.push(
            Diagnostic::new(
                "unknown-feature-set",
                // The CVO accepts the release (and leaves the manifest out): so does every
                // command but `validate`, which reports it as an error.
                Severity::Warning,
                m.location.clone(),
                format!(
                    "`{FEATURE_SET_ANNOTATION}: {}` names `{}`, which is not a known feature set: the CVO never includes this manifest, in any feature set",
                    excerpt(sets),
                    excerpt(unknown)
                ),
            )
            .with_help(format!(
                "write a comma-separated list of {} with no spaces",
                KNOWN_FEATURE_SETS.join(", ")
            ))
            .with_object(m.id.clone()),
        );
    }
    out
}

/// A mapping key written twice: the last value is used (as the CVO and Kubernetes' readers
/// do), and `validate` warns, naming both lines.
fn duplicate_key(dup: &DuplicateKey, location: Location) -> Diagnostic {
    let lines = match (dup.first_line, dup.line) {
        (0, _) | (_, 0) => String::new(),
        (first, last) => format!(" (lines {first} and {last})"),
    };
    Diagnostic::new(
        "duplicate-key",
        Severity::Warning,
        location,
        format!(
            "the key `{}` is written twice in one mapping{lines}: the last value is used, as the CVO and kubectl read it",
            excerpt(&dup.key)
        ),
    )
    .with_help("remove one of the two keys so that the file says what it means; other tools keep the first value or refuse the file")
}

/// Why a parsed document is not an object the applier can manage, and what to do about it.
#[derive(Debug)]
struct Invalid {
    message: String,
    help: String,
}

impl Invalid {
    fn new(message: impl Into<String>, help: impl Into<String>) -> Self {
        Invalid {
            message: message.into(),
            help: help.into(),
        }
    }

    /// `field` holds a value of the wrong type. A boolean or number where a string belongs
    /// is almost always an unquoted YAML 1.1 word (`no`, `on`) or number (`0644`).
    fn wrong_type(field: &str, value: &Value, expected: &str) -> Self {
        let leaf = field.rsplit('.').next().unwrap_or(field);
        let help = match value {
            Value::Bool(_) if expected == "a string" => format!(
                "quote the value, such as `{leaf}: \"no\"`: unquoted yes, no, on, off, y, n, true and false are booleans in Kubernetes YAML; write `{field}` as {expected}"
            ),
            Value::Number(_) if expected == "a string" => format!(
                "quote the value, such as `{leaf}: \"0644\"`: unquoted digits are a number in Kubernetes YAML; write `{field}` as {expected}"
            ),
            _ => format!("write `{field}` as {expected}"),
        };
        Invalid::new(
            format!("`{field}` is {}, not {expected}", json_type(value)),
            help,
        )
    }

    /// `field` is absent, null or empty.
    fn missing(field: &str, help: &str) -> Self {
        Invalid::new(format!("`{field}` is missing"), help)
    }
}

/// A top-level string field of an object: present, a string, and not empty.
fn string_field<'a>(
    map: &'a serde_json::Map<String, Value>,
    field: &str,
    help: &str,
) -> Result<&'a str, Invalid> {
    match map.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        None | Some(Value::Null | Value::String(_)) => Err(Invalid::missing(field, help)),
        Some(other) => Err(Invalid::wrong_type(field, other, "a string")),
    }
}

fn to_manifest(
    doc: Document,
    location: Location,
    order: Option<super::FileOrder>,
) -> Result<Manifest, Invalid> {
    let Value::Object(map) = &doc.value else {
        return Err(Invalid::new(
            format!("the document is {}, not a mapping", json_type(&doc.value)),
            "a document is one Kubernetes object, a mapping with apiVersion, kind and metadata: check the indentation, and separate objects with `---`",
        ));
    };
    let api_version = string_field(
        map,
        "apiVersion",
        "add `apiVersion:` at the top level of the document, such as `apiVersion: v1` or `apiVersion: apps/v1`",
    )?;
    let kind = string_field(
        map,
        "kind",
        "add `kind:` at the top level of the document, such as `kind: ConfigMap`",
    )?;
    if kind == "List" || kind.ends_with("List") && map.contains_key("items") {
        return Err(Invalid::new(
            format!("`kind: {}` wrappers are not supported", excerpt(kind)),
            "write each item as its own document, separated by `---`",
        ));
    }
    let metadata = match map.get("metadata") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => {
            return Err(Invalid::missing(
                "metadata",
                "add `metadata:` with a `name:` under it (and a `namespace:` for namespaced kinds)",
            ));
        }
        Some(other) => return Err(Invalid::wrong_type("metadata", other, "a mapping")),
    };
    let name_help = "add `name:` under `metadata:`: the applier finds the object by its name";
    let name = match metadata.get("name") {
        None | Some(Value::Null) if metadata.contains_key("generateName") => {
            return Err(Invalid::new(
                "`metadata.generateName` cannot be applied repeatedly",
                "replace `generateName` with a fixed `metadata.name`: a generated name makes a new object on every apply",
            ));
        }
        Some(Value::String(s)) if !s.is_empty() => s,
        None | Some(Value::Null | Value::String(_)) => {
            return Err(Invalid::missing("metadata.name", name_help));
        }
        Some(other) => return Err(Invalid::wrong_type("metadata.name", other, "a string")),
    };
    let namespace = match metadata.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            return Err(Invalid::wrong_type("metadata.namespace", other, "a string"));
        }
    };
    let annotations = metadata.get("annotations").and_then(Value::as_object);
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
    // For inclusion, as the CVO reads them: none at all when any value is not a string.
    let for_inclusion = annotations.filter(|a| a.values().all(Value::is_string));
    let id = ObjectId::new(
        ObjectId::group_of(api_version),
        kind,
        namespace,
        name.as_str(),
    );
    Ok(Manifest {
        id,
        api_version: api_version.to_owned(),
        location,
        order,
        intent: DeleteIntent::from_annotation(annotation(DELETE_ANNOTATION)),
        create_only: annotation(CREATE_ONLY_ANNOTATION).and_then(Value::as_str) == Some("true"),
        capabilities: for_inclusion
            .and_then(|a| a.get(CAPABILITY_ANNOTATION))
            .and_then(Value::as_str)
            .map(super::capability::split_annotation)
            .unwrap_or_default(),
        object: doc.value.into(),
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Two manifests with one identity: an error at the second (and later) one. When one
/// applies and the other deletes the object, the release fights itself.
fn duplicate_identities(manifests: &[Manifest]) -> Vec<Diagnostic> {
    let mut first: HashMap<&ObjectId, &Manifest> = HashMap::with_capacity(manifests.len());
    let mut out = Vec::new();
    for m in manifests {
        let Some(prev) = first.get(&m.id) else {
            first.insert(&m.id, m);
            continue;
        };
        if prev.location.file == m.location.file {
            // Reported once, as `repeated-document` (the CVO refuses such a file).
            continue;
        }
        let fights = prev.is_delete() != m.is_delete();
        let d = if fights {
            Diagnostic::new(
                "apply-and-delete",
                Severity::Error,
                m.location.clone(),
                format!(
                    "the release both applies and deletes this object (also at {}): the applier would fight itself and the deletion never finishes",
                    prev.location
                ),
            )
            .with_help("keep either the delete manifest or the manifest that applies the object, not both")
        } else {
            Diagnostic::new(
                "duplicate-identity",
                Severity::Error,
                m.location.clone(),
                format!("the same object is already defined at {}", prev.location),
            )
            .with_help("objects are identified by group, kind, namespace and name (not API version): remove one of the two")
        };
        out.push(d.with_object(m.id.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(dir: &Path, name: &str, text: &str) {
        fs::write(dir.join(name), text).unwrap();
    }

    fn cm(name: &str, extra_annotations: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n  annotations:\n    x: \"y\"\n{extra_annotations}"
        )
    }

    #[test]
    fn version_hash_is_stable_and_changes_with_any_file_byte_name_or_the_metadata() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "0000_10_a_x.yaml", &cm("a", ""));
        write(dir.path(), "0000_20_b_x.yaml", &cm("b", ""));
        let hash = |options: &LoadOptions| load(dir.path(), options).unwrap().version_hash;
        let first = hash(&LoadOptions::default());
        assert_eq!(first.len(), 64, "{first}");
        assert!(
            first
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(
            hash(&LoadOptions::default()),
            first,
            "same files, same hash"
        );
        let with_image = LoadOptions {
            release_image: Some("quay.io/r@sha256:1".into()),
            ..LoadOptions::default()
        };
        assert_eq!(hash(&with_image), first, "the image is recorded apart");

        write(dir.path(), "0000_20_b_x.yaml", &cm("c", ""));
        let changed = hash(&LoadOptions::default());
        assert_ne!(changed, first, "one byte changed");
        fs::rename(
            dir.path().join("0000_20_b_x.yaml"),
            dir.path().join("0000_30_b_x.yaml"),
        )
        .unwrap();
        let renamed = hash(&LoadOptions::default());
        assert_ne!(renamed, changed, "renamed file");
        write(
            dir.path(),
            "release-metadata",
            r#"{"kind": "cincinnati-metadata-v0", "version": "1.0.0"}"#,
        );
        let with_metadata = hash(&LoadOptions::default());
        assert_ne!(with_metadata, renamed, "release-metadata counts");
        write(
            dir.path(),
            "release-metadata",
            r#"{"kind": "cincinnati-metadata-v0", "version": "1.0.1"}"#,
        );
        assert_ne!(hash(&LoadOptions::default()), with_metadata);
    }

    #[test]
    fn loads_flat_directory_in_file_name_order_and_reports_problems() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "0000_10_b_x.yaml", &cm("b", ""));
        write(
            dir.path(),
            "0000_05_a_x.yaml",
            &format!("{}---\nkind: Broken\n", cm("a", "")),
        );
        write(dir.path(), "notes.txt", "ignored");
        fs::create_dir(dir.path().join("sub")).unwrap();
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        let names: Vec<_> = release
            .manifests
            .iter()
            .map(|m| m.id.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let rules: Vec<_> = release.diagnostics.iter().map(|d| d.rule).collect();
        assert_eq!(rules, ["subdirectory-ignored", "invalid-object"]);
        let invalid = &release.diagnostics[1];
        assert_eq!(invalid.location.document, Some(1));
        assert_eq!(invalid.location.line, Some(9));
        assert_eq!(release.manifests[0].order.as_ref().unwrap().runlevel, 5);
    }

    #[test]
    fn duplicate_and_apply_and_delete_identities() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &cm("x", ""));
        write(
            dir.path(),
            "b.yaml",
            &cm("x", "    release.openshift.io/delete: \"true\"\n"),
        );
        write(dir.path(), "c.yaml", &cm("z", ""));
        write(dir.path(), "d.yaml", &cm("z", "").replace("v1", "v2"));
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        let rules: Vec<_> = release.diagnostics.iter().map(|d| d.rule).collect();
        assert_eq!(rules, ["apply-and-delete", "duplicate-identity"]);
        assert_eq!(release.manifests.len(), 4);
    }

    /// A payload directory with empty `manifests/` and `release-manifests/` folders.
    fn payload_dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("manifests");
        let r = dir.path().join("release-manifests");
        fs::create_dir_all(&m).unwrap();
        fs::create_dir_all(&r).unwrap();
        (dir, m, r)
    }

    #[test]
    fn a_release_read_once_selects_as_a_load_in_each_profile() {
        let (dir, m, r) = payload_dirs();
        write(
            &m,
            "0000_00_cvo_deploy.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: nsx\n  annotations:\n    include.release.openshift.io/a: \"true\"\n    include.release.openshift.io/b: \"true\"\ndata:\n  profile: '{{ .ClusterProfile }}'\n",
        );
        write(
            &r,
            "0000_01_x_a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  namespace: nsx\n  annotations:\n    include.release.openshift.io/a: \"true\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  namespace: nsx\n  annotations:\n    include.release.openshift.io/b: \"true\"\n    release.openshift.io/feature-set: TechPreviewNoUpgrade\n",
        );
        write(&r, "0000_02_x_bad.yaml", "key: [unclosed\n");
        let options = |profile: Option<&str>| LoadOptions {
            filters: Filters {
                profile: profile.map(str::to_owned),
                ..Default::default()
            },
            ..Default::default()
        };
        let read = read(dir.path(), &options(None)).unwrap();
        assert_eq!(read.all_manifests().count(), 3);
        for profile in [None, Some("a"), Some("b")] {
            let loaded = load(dir.path(), &options(profile)).unwrap();
            let selected = read.select(&options(profile).filters);
            let ids = |r: &Release| -> Vec<String> {
                r.manifests
                    .iter()
                    .map(|m| format!("{} {}", m.id, m.object["data"]))
                    .collect()
            };
            let left = |r: &Release| -> Vec<String> {
                r.excluded
                    .iter()
                    .map(|e| format!("{} {}", e.manifest.id, e.reason))
                    .collect()
            };
            assert_eq!(ids(&selected), ids(&loaded), "{profile:?}");
            assert_eq!(left(&selected), left(&loaded), "{profile:?}");
            assert_eq!(selected.diagnostics, loaded.diagnostics, "{profile:?}");
            assert_eq!(selected.version_hash, loaded.version_hash);
        }
        // The templated file is rendered for the profile selected.
        let in_b = read.select(&options(Some("b")).filters);
        assert_eq!(in_b.manifests[0].object["data"]["profile"], "b");
    }

    #[test]
    fn payload_renders_manifests_folder_and_reads_metadata() {
        let (dir, m, r) = payload_dirs();
        write(
            &m,
            "0000_00_cvo_deploy.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: nsx\ndata:\n  image: '{{.ReleaseImage}}'\n  profile: '{{ .ClusterProfile }}'\n",
        );
        write(
            &r,
            "0000_01_x_a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  namespace: nsx\ndata:\n  rule: '{{ $labels.x }}'\n",
        );
        write(
            &r,
            "release-metadata",
            r#"{"kind":"cincinnati-metadata-v0","version":"1.2.3"}"#,
        );
        write(
            &r,
            "image-references",
            "kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags: []\n",
        );
        let options = LoadOptions {
            release_image: Some("quay.io/r:1".into()),
            ..Default::default()
        };
        let release = load(dir.path(), &options).unwrap();
        assert!(release.diagnostics.is_empty(), "{:?}", release.diagnostics);
        assert_eq!(release.version().unwrap().to_string(), "1.2.3");
        assert_eq!(release.manifests[0].object["data"]["image"], "quay.io/r:1");
        assert_eq!(
            release.manifests[0].object["data"]["profile"],
            DEFAULT_CLUSTER_PROFILE
        );
        assert_eq!(
            release.manifests[1].object["data"]["rule"],
            "{{ $labels.x }}"
        );
    }

    #[test]
    fn filters_exclude_with_reasons() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.yaml",
            &cm(
                "in",
                "    include.release.openshift.io/hypershift: \"true\"\n",
            ),
        );
        write(dir.path(), "b.yaml", &cm("out", ""));
        write(
            dir.path(),
            "c.yaml",
            &cm(
                "tp",
                "    include.release.openshift.io/hypershift: \"true\"\n    release.openshift.io/feature-set: TechPreviewNoUpgrade\n",
            ),
        );
        let options = LoadOptions {
            filters: Filters {
                profile: Some("hypershift".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let release = load(dir.path(), &options).unwrap();
        assert_eq!(release.manifests.len(), 1);
        assert_eq!(release.excluded.len(), 2);
        assert!(release.excluded[1].reason.contains("TechPreviewNoUpgrade"));
    }

    /// Every document problem names the file, document and line, says what is wrong in the
    /// user's terms, and gives advice of its own.
    #[test]
    fn each_document_problem_has_its_own_message_and_help() {
        let cases: &[(&str, &str, &str, &str)] = &[
            // (document, rule, message, words of the help)
            (
                "a: 1\na: 2\n",
                "duplicate-key",
                "the key `a` is written twice in one mapping (lines 9 and 10): the last value is used",
                "remove one of the two keys",
            ),
            (
                ": : :\n",
                "parse-error",
                "a key is empty or null",
                "plain name",
            ),
            (
                "a: [\n",
                "parse-error",
                "YAML syntax error (column 4): unclosed bracket '['",
                "fix the syntax",
            ),
            (
                "- a\n- b\n",
                "invalid-object",
                "the document is a list, not a mapping",
                "separate objects with `---`",
            ),
            (
                "just text\n",
                "invalid-object",
                "the document is a string, not a mapping",
                "one Kubernetes object",
            ),
            (
                "kind: ConfigMap\nmetadata:\n  name: x\n",
                "invalid-object",
                "`apiVersion` is missing",
                "add `apiVersion:`",
            ),
            (
                "apiVersion: v1\nmetadata:\n  name: x\n",
                "invalid-object",
                "`kind` is missing",
                "add `kind:`",
            ),
            (
                "apiVersion: 1\nkind: ConfigMap\nmetadata:\n  name: x\n",
                "invalid-object",
                "`apiVersion` is a number, not a string",
                "write `apiVersion` as a string",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\n",
                "invalid-object",
                "`metadata` is missing",
                "add `metadata:`",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: x\n",
                "invalid-object",
                "`metadata` is a string, not a mapping",
                "write `metadata` as a mapping",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n",
                "invalid-object",
                "`metadata.name` is missing",
                "add `name:` under `metadata:`",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x]\n",
                "invalid-object",
                "`metadata.name` is a list, not a string",
                "write `metadata.name` as a string",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: true\n",
                "invalid-object",
                "`metadata.namespace` is a boolean, not a string",
                "write `metadata.namespace` as a string",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n",
                "invalid-object",
                "`metadata.generateName` cannot be applied repeatedly",
                "fixed `metadata.name`",
            ),
            (
                "apiVersion: v1\nkind: List\nitems: []\n",
                "invalid-object",
                "`kind: List` wrappers are not supported",
                "its own document",
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        for (i, (doc, ..)) in cases.iter().enumerate() {
            // The problem is the second document, on line 3: the first one loads.
            write(
                dir.path(),
                &format!("{i:02}.yaml"),
                &format!(
                    "{}---\n{doc}",
                    cm("ok", "").replace("ok", &format!("ok{i}"))
                ),
            );
        }
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(release.manifests.len(), cases.len());
        let mut helps = std::collections::HashSet::new();
        for (i, (doc, rule, message, help)) in cases.iter().enumerate() {
            let file = dir.path().join(format!("{i:02}.yaml"));
            let d = release
                .diagnostics
                .iter()
                .find(|d| d.location.file == file)
                .unwrap_or_else(|| panic!("{doc:?}: no diagnostic"));
            assert_eq!(d.rule, *rule, "{doc:?}");
            assert_eq!(d.location.document, Some(1), "{doc:?}");
            assert!(
                d.location.line.is_some_and(|l| l >= 9),
                "{doc:?}: {:?}",
                d.location
            );
            assert!(d.message.contains(message), "{doc:?}: {}", d.message);
            let h = d.help.as_deref().unwrap_or_default();
            assert!(h.contains(help), "{doc:?}: {h}");
            helps.insert(h.to_owned());
        }
        // Wrong-type helps differ per field; the rest are one per problem.
        assert!(helps.len() >= cases.len() - 1, "{helps:?}");
    }

    #[test]
    fn invalid_utf8_is_reported_at_its_document_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = cm("a", "").into_bytes();
        bytes.extend_from_slice(b"---\napiVersion: v1\ndata:\n  x: caf\xe9\n");
        fs::write(dir.path().join("latin1.yaml"), bytes).unwrap();
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        let d = &release.diagnostics[0];
        assert_eq!(d.rule, "parse-error");
        assert_eq!((d.location.document, d.location.line), (Some(1), Some(11)));
        assert!(
            d.message
                .starts_with("invalid UTF-8: byte 0xE9 at byte offset "),
            "{}",
            d.message
        );
        assert!(
            d.help
                .as_deref()
                .unwrap()
                .contains("save the file as UTF-8")
        );
    }

    fn rules_of(release: &Release) -> Vec<&str> {
        release.diagnostics.iter().map(|d| d.rule).collect()
    }

    fn names_of(release: &Release) -> Vec<&str> {
        release
            .manifests
            .iter()
            .map(|m| m.id.name.as_str())
            .collect()
    }

    /// Issue 25 item 3: every file of `manifests/` before any of `release-manifests/`, as
    /// the CVO's task list; item 11: hidden files are read, first in byte order.
    #[test]
    fn payload_folders_in_cvo_order_and_hidden_files_first() {
        let (dir, m, r) = payload_dirs();
        fs::create_dir_all(r.join(".git")).unwrap();
        write(&m, "0000_90_b_x.yaml", &cm("m90", ""));
        write(&m, "0000_00_a_x.yaml", &cm("m00", ""));
        write(&r, "0000_10_a_x.yaml", &cm("r10", ""));
        write(&r, ".0000_99_z_x.yaml", &cm("hidden", ""));
        write(&r, "0000_05_a_x.yaml", &cm("r05", ""));
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(names_of(&release), ["m00", "m90", "hidden", "r05", "r10"]);
        assert_eq!(rules_of(&release), ["hidden-file"]);
        assert!(
            release.diagnostics[0]
                .location
                .file
                .ends_with(".0000_99_z_x.yaml"),
            "{:?}",
            release.diagnostics[0]
        );
    }

    /// Issue 34 item 1: `.cvo.yaml` beside the manifests is cvo's config, never a manifest
    /// (no `hidden-file`, no `invalid-object`, no change to the version hash), in a flat
    /// release and in both folders of a payload; another hidden file is still read.
    #[test]
    fn the_cvo_config_file_is_never_part_of_the_release() {
        let config = "rules:\n  hidden-file: off\n";
        let flat = tempfile::tempdir().unwrap();
        write(flat.path(), "0000_10_a_x.yaml", &cm("a", ""));
        let without = load(flat.path(), &LoadOptions::default()).unwrap();
        write(flat.path(), CONFIG_FILE, config);
        let with = load(flat.path(), &LoadOptions::default()).unwrap();
        assert_eq!(names_of(&with), ["a"]);
        assert!(with.diagnostics.is_empty(), "{:?}", with.diagnostics);
        assert_eq!(with.version_hash, without.version_hash);

        let (payload, m, r) = payload_dirs();
        write(&m, "0000_00_a_x.yaml", &cm("m", ""));
        write(&r, "0000_10_a_x.yaml", &cm("r", ""));
        for dir in [payload.path(), m.as_path(), r.as_path()] {
            write(dir, CONFIG_FILE, config);
        }
        write(&r, ".cvo.yml", &cm("hidden", ""));
        let release = load(payload.path(), &LoadOptions::default()).unwrap();
        assert_eq!(names_of(&release), ["m", "hidden", "r"]);
        assert_eq!(rules_of(&release), ["hidden-file"]);
        assert!(is_config_file(&r.join(CONFIG_FILE)));
        assert!(!is_config_file(&r.join(".cvo.yml")));
    }

    /// Issue 25 item 5: one object twice in one file is an error, even when the filters
    /// leave it out; reported once (not as a duplicate identity too).
    #[test]
    fn repeated_document_in_one_file_is_an_error_even_when_excluded() {
        let dir = tempfile::tempdir().unwrap();
        let tp = "    release.openshift.io/feature-set: TechPreviewNoUpgrade\n";
        write(
            dir.path(),
            "a.yaml",
            &format!("{}---\n{}", cm("x", tp), cm("x", tp)),
        );
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(rules_of(&release), ["repeated-document"]);
        assert!(release.has_errors());
        assert_eq!(release.diagnostics[0].location.document, Some(1));
        assert!(
            release.diagnostics[0]
                .message
                .contains("already holds the same object"),
            "{}",
            release.diagnostics[0].message
        );
        assert_eq!((release.manifests.len(), release.excluded.len()), (0, 2));
        write(
            dir.path(),
            "a.yaml",
            &format!("{}---\n{}", cm("x", ""), cm("x", "")),
        );
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(rules_of(&release), ["repeated-document"]);
    }

    /// Issue 25 item 8: a `.json` file is read by its content, as the CVO reads it.
    #[test]
    fn json_file_with_yaml_content_is_read_as_yaml_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.json", &cm("yaml-in-json", ""));
        write(
            dir.path(),
            "b.json",
            r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "json", "namespace": "ns"}}"#,
        );
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(names_of(&release), ["yaml-in-json", "json"]);
        assert_eq!(rules_of(&release), ["json-extension-yaml-content"]);
        assert!(!release.has_errors());
    }

    /// Issue 25 item 9: a non-string annotation value: the CVO reads no annotations at all,
    /// so the object is left out when a profile is required; an error for `validate`.
    #[test]
    fn non_string_annotation_reads_as_no_annotations() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.yaml",
            &cm(
                "bool",
                "    include.release.openshift.io/hypershift: true\n",
            ),
        );
        write(
            dir.path(),
            "b.yaml",
            &cm(
                "string",
                "    include.release.openshift.io/hypershift: \"true\"\n",
            ),
        );
        let options = LoadOptions {
            filters: Filters {
                profile: Some("hypershift".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let release = load(dir.path(), &options).unwrap();
        assert_eq!(names_of(&release), ["string"]);
        assert_eq!(release.excluded[0].manifest.id.name, "bool");
        assert_eq!(release.excluded[0].by, super::super::ExcludedBy::Profile);
        assert_eq!(rules_of(&release), ["non-string-annotation"]);
        let d = &release.diagnostics[0];
        // The CVO uses the release: a warning here, an error in `validate`.
        assert_eq!(d.severity, Severity::Warning);
        assert!(
            d.message
                .contains("`include.release.openshift.io/hypershift` is a boolean, not a string"),
            "{}",
            d.message
        );
        assert_eq!(release.excluded[0].manifest.annotations().count(), 0);
    }

    /// Issue 25 item 10: an unknown or space-padded feature-set entry: never included, an
    /// error for `validate`.
    #[test]
    fn unknown_feature_set_entry_is_never_included() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.yaml",
            &cm(
                "padded",
                "    release.openshift.io/feature-set: \"Default \"\n",
            ),
        );
        write(
            dir.path(),
            "b.yaml",
            &cm(
                "foo",
                "    release.openshift.io/feature-set: TechPreviewNoUpgrade,Foo\n",
            ),
        );
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert!(release.manifests.is_empty());
        assert_eq!(release.excluded.len(), 2);
        assert_eq!(
            rules_of(&release),
            ["unknown-feature-set", "unknown-feature-set"]
        );
        assert!(release.diagnostics[1].message.contains("names `Foo`"));
    }

    /// Issue 25 item 7: an action cvo does not know in `manifests/`: the file is skipped with
    /// a warning, as the CVO skips it; other template problems stay errors.
    #[test]
    fn unknown_template_action_skips_the_file_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("manifests");
        fs::create_dir_all(&m).unwrap();
        write(
            &m,
            "0000_00_a_future.yaml",
            &format!(
                "{}data:\n  k: '{{{{index .FutureField \"some-key\"}}}}'\n",
                cm("future", "")
            ),
        );
        write(&m, "0000_00_a_ok.yaml", &cm("ok", ""));
        write(
            &m,
            "0000_00_a_unclosed.yaml",
            &format!("{}data:\n  k: '{{{{ .ClusterProfile'\n", cm("unclosed", "")),
        );
        let release = load(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(names_of(&release), ["ok"]);
        assert_eq!(
            rules_of(&release),
            ["unknown-template-action", "template-error"]
        );
        assert_eq!(release.diagnostics[0].severity, Severity::Warning);
        assert!(
            release.diagnostics[0].message.contains(".FutureField")
                && release.diagnostics[0]
                    .message
                    .contains("the file is skipped"),
            "{}",
            release.diagnostics[0].message
        );
    }

    #[test]
    fn unreadable_root_is_a_load_error() {
        assert!(matches!(
            load(Path::new("/nonexistent/release"), &LoadOptions::default()),
            Err(LoadError::Unreadable { .. })
        ));
    }
}

/// The loader's work per document does not grow with the file ([`super::work`]): the counts
/// for one file of `4 n` documents are at most about four times those for `n`. On the loader
/// of issue 41 the identity comparisons and the bytes scanned for template lines grew with the
/// square of the documents.
#[cfg(test)]
mod linear {
    use super::super::work::{Work, measure};
    use super::*;

    /// One file of `n` ConfigMaps, every 50th repeating the one before it (a `repeated-document`
    /// error, as the CVO refuses), each with a template action on its last line: a CVO field
    /// when the file is `templated`, a Prometheus one otherwise.
    fn file(n: usize, templated: bool) -> (SourceFile, Vec<u8>) {
        let action = if templated {
            "{{.ReleaseImage}}"
        } else {
            "{{ $labels.instance }}"
        };
        let mut text = String::new();
        for i in 0..n {
            let name = if i % 50 == 49 { i - 1 } else { i };
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{name}\n  namespace: ns\ndata:\n  k: v{i}\n  image: \"{action}\"\n"
            ));
        }
        let name = "0000_10_big_configmaps.yaml".to_owned();
        let file = SourceFile {
            path: PathBuf::from("/release").join(&name),
            name,
            templated,
        };
        (file, text.into_bytes())
    }

    fn load_one(n: usize, templated: bool) -> (Vec<Manifest>, Vec<Diagnostic>, Work) {
        let (file, bytes) = file(n, templated);
        let values = TemplateValues {
            release_image: Some("quay.io/r@sha256:1".into()),
            ..TemplateValues::default()
        };
        let ((manifests, diagnostics, _), work) = measure(|| parse_file(&file, Ok(bytes), &values));
        (manifests, diagnostics, work)
    }

    #[test]
    fn a_files_work_per_document_does_not_grow_with_the_file() {
        const N: usize = 500;
        for templated in [false, true] {
            let (small_manifests, small_diagnostics, small) = load_one(N, templated);
            let (manifests, diagnostics, large) = load_one(4 * N, templated);
            assert_eq!(
                (small_manifests.len(), manifests.len()),
                (N, 4 * N),
                "templated: {templated}"
            );
            let repeated =
                |d: &[Diagnostic]| d.iter().filter(|d| d.rule == "repeated-document").count();
            assert_eq!(repeated(&small_diagnostics), N / 50);
            assert_eq!(repeated(&diagnostics), 4 * N / 50, "{diagnostics:?}");
            if !templated {
                assert!(
                    diagnostics.iter().all(|d| d.rule != "unrendered-template"),
                    "a Prometheus action is data"
                );
            }
            // Linear: four times the documents, at most ~4× the work (a little slack for the
            // longer names). Quadratic would be ~16×.
            assert!(
                large.bytes <= 4 * small.bytes + small.bytes / 4,
                "templated: {templated}: {small:?} for {N} documents, {large:?} for {}",
                4 * N
            );
            // A hash lookup a document: one comparison for each repeated one, and one for
            // about every tenth where two hashes share their tag. A scan would be n²/2.
            assert!(
                large.comparisons <= (4 * N / 2) as u64,
                "templated: {templated}: {large:?}"
            );
            let size = manifests.len() as u64 * 120;
            assert!(
                large.bytes <= 8 * size,
                "templated: {templated}: {} bytes scanned for about {size} bytes of text",
                large.bytes
            );
        }
    }

    #[test]
    fn identities_across_files_are_compared_once_each() {
        let (manifests, _, _) = load_one(2_000, false);
        let (diagnostics, work) = measure(|| duplicate_identities(&manifests));
        assert!(
            diagnostics.is_empty(),
            "repeats in one file are reported once, as repeated-document"
        );
        assert!(work.comparisons <= 2_000 / 2, "{work:?}");
    }

    #[test]
    fn unclosed_template_actions_are_scanned_once() {
        // A hostile file: every `{{` unclosed. Each was scanned to the end of the file.
        let text = "{{ a".repeat(20_000);
        let (found, work) = measure(|| mentions_cvo_fields(&text));
        assert_eq!(found, None);
        assert!(work.bytes <= 2 * text.len() as u64, "{work:?}");
        let (found, work) = measure(|| mentions_cvo_fields(&"{{ a }}\n".repeat(20_000)));
        assert_eq!(found, None);
        assert!(work.bytes <= 2 * 8 * 20_000, "{work:?}");
    }
}
