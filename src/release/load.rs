//! Reading a release directory: which files, in which order, and what each document becomes.
//!
//! A release is either a flat directory of manifests or a CVO payload root holding
//! `manifests/` (CVO's own, Go-templated) and `release-manifests/`. Only top-level `.yaml`,
//! `.yml` and `.json` files are read, in lexical file-name order across both folders.
//! `release-metadata` and `image-references` are read where CVO keeps them. Files are parsed
//! in parallel; the result does not depend on it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::Value;

use super::annotations::{CAPABILITY_ANNOTATION, CREATE_ONLY_ANNOTATION, DELETE_ANNOTATION};
use super::metadata::parse_image_references;
use super::template::{TemplateValues, mentions_cvo_fields, render};
use super::yaml::{Document, Parsed, parse_json, parse_yaml};
use super::{
    DeleteIntent, Excluded, Filters, Manifest, ObjectId, Release, ReleaseMetadata, parse_file_name,
};
use crate::diagnostic::{Diagnostic, Location, Severity};

/// The profile CVO renders into `{{.ClusterProfile}}` when none is given.
pub const DEFAULT_CLUSTER_PROFILE: &str = "self-managed-high-availability";

/// How to load a release.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub filters: Filters,
    /// `--release-image`: value of `{{.ReleaseImage}}` in the payload's `manifests/`.
    pub release_image: Option<String>,
}

/// The release could not be read at all (exit code 2). Problems with single files are
/// diagnostics in the returned [`Release`] instead.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read release directory {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a directory: a release is a directory of manifests or a CVO payload root", path.display())]
    NotADirectory { path: PathBuf },
}

/// A manifest file to read.
struct SourceFile {
    path: PathBuf,
    name: String,
    templated: bool,
}

/// Loads a release directory: every good manifest plus every problem found.
pub fn load(root: &Path, options: &LoadOptions) -> Result<Release, LoadError> {
    let meta = std::fs::metadata(root).map_err(|source| LoadError::Unreadable {
        path: root.into(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(LoadError::NotADirectory { path: root.into() });
    }
    let mut diagnostics = Vec::new();
    let manifests_dir = root.join("manifests");
    let release_dir = root.join("release-manifests");
    let payload = manifests_dir.is_dir() || release_dir.is_dir();
    let folders: Vec<(PathBuf, bool)> = if payload {
        [(manifests_dir, true), (release_dir.clone(), false)]
            .into_iter()
            .filter(|(d, _)| d.is_dir())
            .collect()
    } else {
        vec![(root.to_path_buf(), false)]
    };

    let mut files = Vec::new();
    let mut metadata_file = None;
    let mut image_refs_file = None;
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
                metadata_file = Some(path);
            } else if name == "image-references" {
                image_refs_file = Some(path);
            } else if [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e)) {
                files.push(SourceFile {
                    path,
                    name,
                    templated: *templated,
                });
            }
        }
    }
    if metadata_file.is_none() && payload && root.join("release-metadata").is_file() {
        metadata_file = Some(root.join("release-metadata"));
    }
    // Lexical file-name order across folders; `manifests/` first on a tie (stable sort).
    files.sort_by(|a, b| a.name.cmp(&b.name));

    let metadata = metadata_file.and_then(|path| match std::fs::read_to_string(&path) {
        Ok(text) => ReleaseMetadata::parse(&text)
            .map_err(|e| diagnostics.push(metadata_error(&path, e)))
            .ok(),
        Err(e) => {
            diagnostics.push(metadata_error(&path, e.to_string()));
            None
        }
    });
    let images = image_refs_file
        .and_then(|path| {
            std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| parse_image_references(&t))
                .map_err(|e| {
                    diagnostics.push(Diagnostic::new(
                        "release-metadata",
                        Severity::Error,
                        Location::file(&path),
                        format!("image-references: {e}"),
                    ))
                })
                .ok()
        })
        .unwrap_or_default();
    let values = TemplateValues {
        release_image: options.release_image.clone(),
        cluster_profile: options
            .filters
            .profile
            .clone()
            .unwrap_or_else(|| DEFAULT_CLUSTER_PROFILE.to_owned()),
        images,
    };

    let per_file: Vec<(Vec<Manifest>, Vec<Diagnostic>)> =
        files.par_iter().map(|f| load_file(f, &values)).collect();

    let mut manifests = Vec::new();
    let mut excluded = Vec::new();
    for (file_manifests, file_diagnostics) in per_file {
        diagnostics.extend(file_diagnostics);
        for manifest in file_manifests {
            match options.filters.exclusion(&manifest) {
                Some(reason) => excluded.push(Excluded { manifest, reason }),
                None => manifests.push(manifest),
            }
        }
    }
    diagnostics.extend(duplicate_identities(&manifests));
    Ok(Release {
        root: root.to_path_buf(),
        metadata,
        manifests,
        excluded,
        diagnostics,
    })
}

fn metadata_error(path: &Path, message: String) -> Diagnostic {
    Diagnostic::new(
        "release-metadata",
        Severity::Error,
        Location::file(path),
        format!("release-metadata: {message}"),
    )
    .with_help(r#"write JSON like {"kind": "cincinnati-metadata-v0", "version": "4.16.2"}"#)
}

/// Directory entries as (path, file name, is directory), sorted by name.
fn read_dir_sorted(dir: &Path) -> std::io::Result<Vec<(PathBuf, String, bool)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let is_dir = entry.path().is_dir();
        entries.push((entry.path(), name, is_dir));
    }
    entries.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(entries)
}

/// Reads, renders and parses one file into manifests.
fn load_file(file: &SourceFile, values: &TemplateValues) -> (Vec<Manifest>, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let at = |document: Option<usize>, line: Option<usize>| Location {
        file: file.path.clone(),
        document,
        line,
    };
    let text = match std::fs::read(&file.path).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => {
            let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            let d = Diagnostic::new(
                "parse-error",
                Severity::Error,
                at(None, Some(line)),
                "file is not valid UTF-8",
            );
            return (Vec::new(), vec![d]);
        }
        Err(e) => {
            let d = Diagnostic::new(
                "parse-error",
                Severity::Error,
                at(None, None),
                format!("cannot read file: {e}"),
            );
            return (Vec::new(), vec![d]);
        }
    };
    let text = if file.templated {
        match render(&text, values) {
            Ok(rendered) => rendered,
            Err(e) => {
                let d = Diagnostic::new(
                    "template-error",
                    Severity::Error,
                    at(None, Some(e.line)),
                    e.message,
                )
                .with_help("files in a payload's manifests/ are Go templates rendered by cvo");
                return (Vec::new(), vec![d]);
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
    let Parsed { documents, errors } = if file.name.ends_with(".json") {
        parse_json(&text)
    } else {
        parse_yaml(&text)
    };
    for e in errors {
        diagnostics.push(Diagnostic::new(
            "parse-error",
            Severity::Error,
            at(Some(e.index), Some(e.line)),
            e.message,
        ));
    }
    let order = parse_file_name(&file.name);
    let mut manifests = Vec::with_capacity(documents.len());
    for doc in documents {
        let location = at(Some(doc.index), Some(doc.line));
        match to_manifest(doc, location.clone(), order.clone()) {
            Ok(m) => manifests.push(m),
            Err(message) => diagnostics.push(
                Diagnostic::new("invalid-object", Severity::Error, location, message)
                    .with_help("every document must be a Kubernetes object with apiVersion, kind and metadata.name"),
            ),
        }
    }
    (manifests, diagnostics)
}

fn to_manifest(
    doc: Document,
    location: Location,
    order: Option<super::FileOrder>,
) -> Result<Manifest, String> {
    let Value::Object(map) = &doc.value else {
        return Err(format!(
            "document is {}, not an object",
            json_type(&doc.value)
        ));
    };
    let field = |name: &str| -> Result<&str, String> {
        match map.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            Some(Value::String(_)) | None => Err(format!("`{name}` is missing")),
            Some(other) => Err(format!("`{name}` is {}, not a string", json_type(other))),
        }
    };
    let api_version = field("apiVersion")?;
    let kind = field("kind")?;
    if kind == "List" || kind.ends_with("List") && map.contains_key("items") {
        return Err(format!(
            "`kind: {kind}` wrappers are not supported: write one document per object"
        ));
    }
    let metadata = match map.get("metadata") {
        Some(Value::Object(m)) => m,
        _ => return Err("`metadata` is missing or not an object".into()),
    };
    let name = match metadata.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ if metadata.contains_key("generateName") => {
            return Err(
                "`metadata.generateName` cannot be applied repeatedly: set `metadata.name`".into(),
            );
        }
        _ => return Err("`metadata.name` is missing".into()),
    };
    let namespace = match metadata.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            return Err(format!(
                "`metadata.namespace` is {}, not a string",
                json_type(other)
            ));
        }
    };
    let annotations = metadata.get("annotations").and_then(Value::as_object);
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
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
        capabilities: annotation(CAPABILITY_ANNOTATION)
            .and_then(Value::as_str)
            .map(|c| {
                c.split('+')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        object: doc.value,
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
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n  annotations:\n    x: y\n{extra_annotations}"
        )
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

    #[test]
    fn payload_renders_manifests_folder_and_reads_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("manifests");
        let r = dir.path().join("release-manifests");
        fs::create_dir_all(&m).unwrap();
        fs::create_dir_all(&r).unwrap();
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

    #[test]
    fn unreadable_root_is_a_load_error() {
        assert!(matches!(
            load(Path::new("/nonexistent/release"), &LoadOptions::default()),
            Err(LoadError::Unreadable { .. })
        ));
    }
}
