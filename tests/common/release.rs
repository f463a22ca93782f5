//! Releases on disk for the tests: the one writer of a release directory (`release-metadata`
//! and manifests), and the one ConfigMap manifest builder.

use std::path::Path;

/// The `metadata` lines of a manifest that asks for its object's deletion (for
/// [`configmap`]'s `meta`).
pub const DELETE_ANNOTATION: &str = "  annotations:\n    release.openshift.io/delete: \"true\"\n";

/// The text of a `release-metadata` file for `version`.
pub fn release_metadata(version: &str) -> String {
    format!(r#"{{"kind": "cincinnati-metadata-v0", "version": "{version}"}}"#)
}

/// Writes a release into `dir` (created if missing): `release-metadata` for `version` when
/// given, and `files` (name, text).
pub fn write_release(dir: &Path, version: Option<&str>, files: &[(&str, String)]) {
    std::fs::create_dir_all(dir).expect("create the release directory");
    if let Some(version) = version {
        std::fs::write(dir.join("release-metadata"), release_metadata(version))
            .expect("write release-metadata");
    }
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write manifest");
    }
}

/// A release directory of `files` (name, text), with `release-metadata` for `version` when
/// given, loaded; a release with errors fails the test.
pub fn release(
    version: Option<&str>,
    files: &[(&str, String)],
) -> (tempfile::TempDir, cvo::release::Release) {
    let dir = tempfile::tempdir().expect("tempdir");
    write_release(dir.path(), version, files);
    let rel = cvo::release::load(dir.path(), &Default::default()).expect("load");
    assert!(!rel.has_errors(), "{:?}", rel.diagnostics);
    (dir, rel)
}

/// A ConfigMap manifest `ns`/`name`: `meta` is more lines of its `metadata` (indented by two
/// spaces, e.g. [`DELETE_ANNOTATION`]), `data` its string data (none: no `data` key).
pub fn configmap(ns: &str, name: &str, meta: &str, data: &[(&str, &str)]) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{meta}"
    );
    if !data.is_empty() {
        text.push_str("data:\n");
        for (key, value) in data {
            text.push_str(&format!("  {key}: \"{value}\"\n"));
        }
    }
    text
}
