//! `cvo push`'s library half: a release directory as cvo's artifact (the reproducible layer
//! of [`super::layer`], the empty config, the manifest of [`super::shape::cvo_manifest`]),
//! pushed to a registry or written into an OCI image layout under a tag.

use std::path::Path;

use serde::Serialize;

use super::registry::Registry;
use super::shape::{EMPTY_CONFIG, MANIFEST_MEDIA_TYPE};
use super::{Access, Caps, Digest, OciError, Source};

/// What was pushed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pushed {
    /// `HOST[:PORT]/REPO`, or `oci-layout:PATH`.
    pub repository: String,
    /// The tag.
    pub tag: String,
    /// The manifest digest.
    pub digest: Digest,
}

impl Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Pushes the release directory `dir` (already validated by the caller) to `target` as cvo's
/// artifact. The same directory gives the same digest every time.
pub async fn push_release(
    dir: &Path,
    target: &Source,
    access: &Access,
    caps: Caps,
) -> Result<Pushed, OciError> {
    let layer = super::layer::build(dir, caps)?;
    let (manifest, _) = super::shape::cvo_manifest(&layer);
    push_artifact(target, &manifest, &[&layer, EMPTY_CONFIG], access).await
}

/// Pushes a manifest and its blobs as they are (the low-level push: tests use it to make
/// hostile artifacts). `target` must name a tag and no digest.
pub async fn push_artifact(
    target: &Source,
    manifest: &[u8],
    blobs: &[&[u8]],
    access: &Access,
) -> Result<Pushed, OciError> {
    if target.digest().is_some() {
        return Err(OciError::Usage(format!(
            "{target}: push to a tag, not a digest (the digest is what the push prints)"
        )));
    }
    let Some(tag) = target.tag() else {
        return Err(OciError::Usage(format!(
            "{target}: name a tag to push to (REPO:TAG)"
        )));
    };
    match target {
        Source::Registry(r) => {
            let registry = Registry::new(&r.registry, access)?;
            for blob in blobs {
                registry.push_blob(&r.repository, blob).await?;
            }
            registry
                .push_manifest(&r.repository, tag, manifest, MANIFEST_MEDIA_TYPE)
                .await?;
            Ok(Pushed {
                repository: r.name(),
                tag: tag.to_owned(),
                digest: Digest::of(manifest),
            })
        }
        Source::Layout(l) => {
            let digest = super::layout::write(&l.path, tag, manifest, blobs)?;
            Ok(Pushed {
                repository: format!("oci-layout:{}", l.path.display()),
                tag: tag.to_owned(),
                digest,
            })
        }
    }
}
