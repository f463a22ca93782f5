//! `cvo push`'s library half: a release directory as cvo's artifact (the reproducible layer
//! of [`super::layer`], the empty config, the manifest of [`super::shape::cvo_manifest`]),
//! pushed to a registry or written into an OCI image layout under a tag, and signed
//! ([`sign_pushed`], cosign's format, beside it).

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
    /// `REPO:sha256-HEX.sig@sha256:…`, the signature written by [`sign_pushed`], if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Pushes the release directory `dir` (already validated by the caller) to `target` as cvo's
/// artifact, without the files `left_out` names (by path relative to `dir`: cvo's own config
/// file, which is no part of the release). The same directory gives the same digest every
/// time.
pub async fn push_release(
    dir: &Path,
    target: &Source,
    access: &Access,
    caps: Caps,
    left_out: &dyn Fn(&Path) -> bool,
) -> Result<Pushed, OciError> {
    let layer = super::layer::build(dir, caps, left_out)?;
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
    let tag = target_tag(target)?;
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
                signature: None,
            })
        }
        Source::Layout(l) => {
            let digest = super::layout::write(&l.path, tag, manifest, blobs)?;
            Ok(Pushed {
                repository: format!("oci-layout:{}", l.path.display()),
                tag: tag.to_owned(),
                digest,
                signature: None,
            })
        }
    }
}

/// The tag `target` names to push to: one that names a digest, or no tag, is a usage error.
pub(super) fn target_tag(target: &Source) -> Result<&str, OciError> {
    if target.digest().is_some() {
        return Err(OciError::Usage(format!(
            "{target}: push to a tag, not a digest (the digest is what the push prints)"
        )));
    }
    target
        .tag()
        .ok_or_else(|| OciError::Usage(format!("{target}: name a tag to push to (REPO:TAG)")))
}

/// Signs what [`push_artifact`] pushed to `target` with `key` (the signature tag
/// `sha256-HEX.sig` beside it, other signatures on that tag kept) and records it in
/// `pushed.signature`.
pub async fn sign_pushed(
    target: &Source,
    pushed: &mut Pushed,
    key: &super::SigningKey,
    access: &Access,
) -> Result<(), OciError> {
    let (tag, digest) = match target {
        Source::Registry(r) => {
            let registry = Registry::new(&r.registry, access)?;
            let place = super::attach::Place::Registry {
                registry: &registry,
                repository: &r.repository,
            };
            super::attach::sign(place, &r.name(), &pushed.digest, key).await?
        }
        Source::Layout(l) => {
            let place = super::attach::Place::Layout(&l.path);
            super::attach::sign(place, &pushed.repository, &pushed.digest, key).await?
        }
    };
    pushed.signature = Some(format!("{}:{tag}@{digest}", pushed.repository));
    Ok(())
}
