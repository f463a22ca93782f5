//! `release-metadata` (the payload's version) and `image-references` (the payload's images).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diagnostic::excerpt;
use crate::version::VersionError;

/// The `release-metadata` file (`kind: cincinnati-metadata-v0`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReleaseMetadata {
    /// The release's version (semver).
    pub version: semver::Version,
    /// Versions this release may be updated from, when listed.
    pub previous: Vec<semver::Version>,
}

const METADATA_KIND: &str = "cincinnati-metadata-v0";

#[derive(Deserialize)]
struct RawMetadata {
    kind: Option<String>,
    version: Option<String>,
    #[serde(default)]
    previous: Vec<String>,
}

/// Why `release-metadata` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("not valid release-metadata JSON (line {line}): {message}")]
    NotJson { line: usize, message: String },
    #[error("kind is `{}`, expected `{METADATA_KIND}`", excerpt(.0))]
    WrongKind(String),
    #[error("`kind: {METADATA_KIND}` is missing")]
    NoKind,
    #[error("`version` is missing")]
    NoVersion,
    #[error("version `{}` is not semver: {source}", excerpt(.version))]
    VersionNotSemver {
        version: String,
        source: VersionError,
    },
    #[error("previous version `{}` is not semver: {source}", excerpt(.version))]
    PreviousNotSemver {
        version: String,
        source: VersionError,
    },
}

impl ReleaseMetadata {
    /// Parses the JSON text of `release-metadata`.
    ///
    /// # Errors
    ///
    /// A [`MetadataError`] saying what is wrong: the text is not JSON, its `kind` is not
    /// `cincinnati-metadata-v0`, or its `version` (or a `previous` version) is missing or not
    /// semver.
    pub fn parse(text: &str) -> Result<Self, MetadataError> {
        // The JSON parser counts LFs: with a CR-only file's CRs made LFs, its lines are the
        // editor's; an error at the end of the text is on its last line.
        let text = super::lines::normalize(text.trim_start_matches('\u{feff}'));
        let raw: RawMetadata = serde_json::from_str(&text).map_err(|e| MetadataError::NotJson {
            line: e.line().clamp(1, super::lines::count(&text).max(1)),
            message: super::typed::plain_serde_message(&e.to_string()),
        })?;
        match raw.kind.as_deref() {
            Some(METADATA_KIND) => {}
            Some(other) => return Err(MetadataError::WrongKind(other.to_owned())),
            None => return Err(MetadataError::NoKind),
        }
        let version = raw.version.ok_or(MetadataError::NoVersion)?;
        let version = crate::version::parse(&version)
            .map_err(|source| MetadataError::VersionNotSemver { version, source })?;
        let previous = raw
            .previous
            .into_iter()
            .map(|p| {
                crate::version::parse(&p)
                    .map_err(|source| MetadataError::PreviousNotSemver { version: p, source })
            })
            .collect::<Result<_, _>>()?;
        Ok(ReleaseMetadata { version, previous })
    }
}

/// Why `image-references` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ImageReferencesError {
    #[error("not a valid ImageStream (line {line}): {message}")]
    NotImageStream { line: usize, message: String },
    #[error("`spec.tags` is not a list")]
    TagsNotList,
    #[error("`spec.tags[{0}].name` is missing or not a string")]
    TagWithoutName(usize),
    #[error("`spec.tags[{0}].from.name` is not a string")]
    FromNameNotString(usize),
}

/// `image-references`: an ImageStream whose `spec.tags` map image names to pull specs; the
/// values of `{{index .Images "name"}}` in the payload's `manifests/`.
/// Read with the manifest parser, so its errors read like every other parse error.
///
/// # Errors
///
/// An [`ImageReferencesError`] when the text is not YAML, or `spec.tags` is not a list of
/// tags with a string `name` and `from.name`.
pub fn parse_image_references(
    text: &str,
) -> Result<BTreeMap<String, String>, ImageReferencesError> {
    let parsed = super::yaml::parse_yaml(text);
    if let Some(e) = parsed.errors.first() {
        return Err(ImageReferencesError::NotImageStream {
            line: e.line,
            message: e.message.clone(),
        });
    }
    let Some(stream) = parsed.documents.first() else {
        return Ok(BTreeMap::new());
    };
    let tags = match stream.value.pointer("/spec/tags") {
        None | Some(serde_json::Value::Null) => return Ok(BTreeMap::new()),
        Some(serde_json::Value::Array(tags)) => tags,
        Some(_) => return Err(ImageReferencesError::TagsNotList),
    };
    let mut images = BTreeMap::new();
    for (i, tag) in tags.iter().enumerate() {
        let Some(name) = tag.get("name").and_then(serde_json::Value::as_str) else {
            return Err(ImageReferencesError::TagWithoutName(i));
        };
        match tag.pointer("/from/name") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::String(from)) => {
                images.insert(name.to_owned(), from.clone());
            }
            Some(_) => return Err(ImageReferencesError::FromNameNotString(i)),
        }
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_version_and_previous() {
        let m = ReleaseMetadata::parse(
            r#"{"kind":"cincinnati-metadata-v0","version":"4.16.2","previous":["4.16.1"],"metadata":{}}"#,
        )
        .unwrap();
        assert_eq!(m.version, semver::Version::new(4, 16, 2));
        assert_eq!(m.previous, vec![semver::Version::new(4, 16, 1)]);
    }

    #[test]
    fn rejects_non_semver_and_wrong_kind() {
        let bad = ReleaseMetadata::parse(r#"{"kind":"cincinnati-metadata-v0","version":"4.16"}"#);
        assert!(bad.unwrap_err().to_string().contains("not semver"));
        let kind = ReleaseMetadata::parse(r#"{"kind":"x","version":"1.0.0"}"#);
        assert_eq!(
            kind.unwrap_err().to_string(),
            "kind is `x`, expected `cincinnati-metadata-v0`"
        );
        assert!(
            ReleaseMetadata::parse("{")
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
    }

    /// Found by the hostile-input run: the semver crate's "exceeds u64::MAX" reached users.
    #[test]
    fn numbers_past_64_bits_are_too_large_in_plain_words() {
        let huge = "99999999999999999999999";
        for (version, previous, field, part) in [
            (
                format!("{huge}.0.0"),
                "1.0.0".to_owned(),
                "version",
                "major",
            ),
            (
                format!("1.{huge}.0"),
                "1.0.0".to_owned(),
                "version",
                "minor",
            ),
            (
                "2.0.0".to_owned(),
                format!("1.0.{huge}"),
                "previous version",
                "patch",
            ),
        ] {
            let text = format!(
                r#"{{"kind":"cincinnati-metadata-v0","version":"{version}","previous":["{previous}"]}}"#
            );
            let e = ReleaseMetadata::parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{field} `")), "{e}");
            assert!(
                e.ends_with(&format!(
                    "is not semver: the {part} version number is too large (at most 18446744073709551615)"
                )),
                "{e}"
            );
            assert!(!e.contains("u64"), "{e}");
        }
    }

    #[test]
    fn json_errors_name_the_editor_line() {
        let line = |text: &str| {
            let e = ReleaseMetadata::parse(text).unwrap_err();
            let MetadataError::NotJson { line, .. } = e else {
                panic!("{e}")
            };
            line
        };
        // A file with LF: lines end at LF only (a lone CR is inside a line).
        assert_eq!(
            line("{\r\"kind\": \"cincinnati-metadata-v0\",\r\n\"version\": }\r"),
            2
        );
        // A CR-only file: lines end at CR.
        assert_eq!(
            line("{\r\"kind\": \"cincinnati-metadata-v0\",\r\"version\": }\r"),
            3
        );
        // At the end of the text: its last line, not past it.
        assert_eq!(line("{\"kind\": \"cincinnati-metadata-v0\",\r\n"), 1);
    }

    #[test]
    fn image_references_map_names_to_pull_specs() {
        let refs = parse_image_references(
            "kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags:\n  - name: cli\n    from:\n      kind: DockerImage\n      name: quay.io/x/cli@sha256:1\n",
        )
        .unwrap();
        assert_eq!(refs["cli"], "quay.io/x/cli@sha256:1");
    }
}
