//! The artifact shapes `cvo` reads and the one it writes.
//!
//! - cvo's (what `cvo push` writes): an OCI 1.1 image manifest with `artifactType:
//!   application/vnd.cvo.release.v1`, the empty config (`application/vnd.oci.empty.v1+json`,
//!   `{}`), and one `application/vnd.oci.image.layer.v1.tar+gzip` layer holding the release
//!   directory.
//! - Flux's (`flux push artifact`): config `application/vnd.cncf.flux.config.v1+json`, the
//!   first layer `application/vnd.cncf.flux.content.v1.tar+gzip`.
//!
//! Anything else (an image index, a container image, another artifact) is refused, naming
//! the media types found.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Digest;

/// The OCI image manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The artifact type of a cvo release.
pub const CVO_ARTIFACT_TYPE: &str = "application/vnd.cvo.release.v1";
/// The empty config of OCI 1.1 artifacts.
pub const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The content of the empty config.
pub const EMPTY_CONFIG: &[u8] = b"{}";
/// cvo's layer: the release directory as a gzipped tar.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Flux's config.
pub const FLUX_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.flux.config.v1+json";
/// Flux's content layer.
pub const FLUX_CONTENT_MEDIA_TYPE: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
/// The media types a manifest is asked for with (the ones read, and the index types so that
/// an index is answered as one and refused by name).
pub const ACCEPTED_MEDIA_TYPES: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// A content descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the content is.
    pub media_type: String,
    /// Its digest, as written (checked with [`Descriptor::digest`]).
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_owned(),
            digest: Digest::of(bytes).to_string(),
            size: bytes.len() as u64,
        }
    }

    /// The parsed digest; a malformed or non-sha256 one is refused.
    pub fn digest(&self) -> Result<Digest, String> {
        Digest::parse(&self.digest).map_err(|e| format!("the layer's digest: {e}"))
    }
}

/// An OCI image manifest (the fields `cvo` reads and writes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest's media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// OCI 1.1's artifact type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob (absent in an index: then refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Descriptor>,
    /// The layers.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Annotations (cvo writes none: no time stamps, so the digest is reproducible).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Which shape a manifest has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `cvo push`'s.
    Cvo,
    /// `flux push artifact`'s.
    Flux,
}

/// cvo's manifest for `layer` (the bytes of the gzipped tar), as bytes, and its digest.
/// Serialized the same way every time: the same layer gives the same manifest digest.
pub fn cvo_manifest(layer: &[u8]) -> (Vec<u8>, Digest) {
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        artifact_type: Some(CVO_ARTIFACT_TYPE.to_owned()),
        config: Some(Descriptor::of(EMPTY_CONFIG_MEDIA_TYPE, EMPTY_CONFIG)),
        layers: vec![Descriptor::of(LAYER_MEDIA_TYPE, layer)],
        annotations: BTreeMap::new(),
    };
    let bytes = serde_json::to_vec(&manifest).expect("a manifest serializes");
    let digest = Digest::of(&bytes);
    (bytes, digest)
}

/// Parses `bytes` as a manifest and finds the release layer: its shape and descriptor. A
/// manifest of another shape is refused naming the media types found.
pub fn release_layer(bytes: &[u8]) -> Result<(Shape, Descriptor), String> {
    let manifest: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| format!("the manifest is not an OCI image manifest ({e})"))?;
    let found = || {
        format!(
            "manifest media type {}, artifact type {}, config {}, layers [{}]",
            manifest.media_type.as_deref().unwrap_or("(none)"),
            manifest.artifact_type.as_deref().unwrap_or("(none)"),
            manifest
                .config
                .as_ref()
                .map_or("(none)", |c| c.media_type.as_str()),
            manifest
                .layers
                .iter()
                .map(|l| l.media_type.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let refuse = || {
        format!(
            "not a release artifact ({}): cvo reads artifacts of type {CVO_ARTIFACT_TYPE} (written by `cvo push`) and Flux artifacts (`flux push artifact`)",
            found()
        )
    };
    if manifest.schema_version != 2
        || manifest
            .media_type
            .as_deref()
            .is_some_and(|m| m != MANIFEST_MEDIA_TYPE)
    {
        return Err(refuse());
    }
    let config = manifest.config.as_ref().map(|c| c.media_type.as_str());
    if manifest.artifact_type.as_deref() == Some(CVO_ARTIFACT_TYPE)
        && config == Some(EMPTY_CONFIG_MEDIA_TYPE)
        && manifest.layers.len() == 1
        && manifest.layers[0].media_type == LAYER_MEDIA_TYPE
    {
        return Ok((Shape::Cvo, manifest.layers[0].clone()));
    }
    if config == Some(FLUX_CONFIG_MEDIA_TYPE)
        && manifest
            .layers
            .first()
            .is_some_and(|l| l.media_type == FLUX_CONTENT_MEDIA_TYPE)
    {
        return Ok((Shape::Flux, manifest.layers[0].clone()));
    }
    Err(refuse())
}

/// What a manifest that is not a release artifact is, when it is a container image: a Docker
/// or OCI image manifest whose config is an image config, or an image index (a multi-arch
/// image). `None`: neither a release artifact nor an image.
pub fn container_image(bytes: &[u8]) -> Option<&'static str> {
    const IMAGE_CONFIGS: &[&str] = &[
        "application/vnd.oci.image.config.v1+json",
        "application/vnd.docker.container.image.v1+json",
    ];
    const INDEXES: &[(&str, &str)] = &[
        (
            "application/vnd.oci.image.index.v1+json",
            "an OCI image index",
        ),
        (
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "a Docker manifest list",
        ),
    ];
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let media_type = value.get("mediaType").and_then(serde_json::Value::as_str);
    if let Some((_, what)) = INDEXES.iter().find(|(m, _)| Some(*m) == media_type) {
        return Some(what);
    }
    if media_type.is_none()
        && value
            .get("manifests")
            .is_some_and(serde_json::Value::is_array)
    {
        return Some("an OCI image index");
    }
    let config = value
        .pointer("/config/mediaType")
        .and_then(serde_json::Value::as_str)?;
    IMAGE_CONFIGS
        .contains(&config)
        .then_some("a container image")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvo_manifest_reads_back_and_is_stable() {
        let (bytes, digest) = cvo_manifest(b"layer");
        let (again, same) = cvo_manifest(b"layer");
        assert_eq!((&bytes, &digest), (&again, &same));
        let (shape, layer) = release_layer(&bytes).unwrap();
        assert_eq!(shape, Shape::Cvo);
        assert_eq!(layer, Descriptor::of(LAYER_MEDIA_TYPE, b"layer"));
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.contains(r#""artifactType":"application/vnd.cvo.release.v1""#),
            "{text}"
        );
    }

    #[test]
    fn flux_artifacts_are_read() {
        let m = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": FLUX_CONFIG_MEDIA_TYPE, "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": [{"mediaType": FLUX_CONTENT_MEDIA_TYPE, "digest": Digest::of(b"x").to_string(), "size": 1}],
            "annotations": {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"}
        });
        let (shape, layer) = release_layer(m.to_string().as_bytes()).unwrap();
        assert_eq!((shape, layer.size), (Shape::Flux, 1));
    }

    #[test]
    fn other_shapes_are_refused_with_their_media_types() {
        let image = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": Digest::of(b"x").to_string(), "size": 1}]
        });
        let err = release_layer(image.to_string().as_bytes()).unwrap_err();
        assert!(
            err.contains("application/vnd.oci.image.config.v1+json"),
            "{err}"
        );
        assert!(err.contains("tar+zstd"), "{err}");
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": []
        });
        let err = release_layer(index.to_string().as_bytes()).unwrap_err();
        assert!(
            err.contains("application/vnd.oci.image.index.v1+json"),
            "{err}"
        );
        // Two layers in a cvo artifact: not cvo's shape.
        let (bytes, _) = cvo_manifest(b"a");
        let mut m: Manifest = serde_json::from_slice(&bytes).unwrap();
        m.layers.push(m.layers[0].clone());
        assert!(release_layer(&serde_json::to_vec(&m).unwrap()).is_err());
        assert!(
            release_layer(b"not json")
                .unwrap_err()
                .contains("not an OCI image manifest")
        );
    }

    #[test]
    fn container_images_are_told_from_other_manifests() {
        let image = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": []
        });
        assert_eq!(
            container_image(image.to_string().as_bytes()),
            Some("a container image")
        );
        let index = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []});
        assert_eq!(
            container_image(index.to_string().as_bytes()),
            Some("an OCI image index")
        );
        assert_eq!(container_image(&cvo_manifest(b"x").0), None);
        let other = serde_json::json!({"schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": "application/vnd.example.config+json", "digest": Digest::of(b"{}").to_string(), "size": 2}, "layers": []});
        assert_eq!(container_image(other.to_string().as_bytes()), None);
        assert_eq!(container_image(b"<html>"), None);
    }
}
