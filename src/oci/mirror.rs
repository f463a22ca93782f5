//! Mirroring a release artifact as it is — the same manifest bytes, so the same digest — from a
//! registry or layout to another (a registry into an OCI layout for an air-gapped cluster, or
//! a layout into the cluster's registry), with its signature tag `sha256-HEX.sig` copied
//! along unchanged. What is copied is checked as it is read: the manifest against its digest,
//! its shape (a release artifact), every blob against its digest and the size caps, and with a
//! [`Verify`] the signature before any blob is read.

use super::attach::{self, Place};
use super::registry::Registry;
use super::shape::{Manifest, release_layer};
use super::signature::Verify;
use super::{Access, Caps, Digest, MAX_MANIFEST_BYTES, OciError, Pushed, Source};

/// Copies the release `source` names to `target` (a tag) unchanged, its signature with it;
/// with `verify`, only when its signature verifies.
pub async fn mirror(
    source: &Source,
    target: &Source,
    access: &Access,
    caps: Caps,
    verify: Option<&Verify>,
) -> Result<Pushed, OciError> {
    let registry = match source {
        Source::Registry(r) => Some(Registry::new(&r.registry, access)?),
        Source::Layout(_) => None,
    };
    let from = match (source, &registry) {
        (Source::Registry(r), Some(registry)) => Place::Registry {
            registry,
            repository: &r.repository,
        },
        (Source::Layout(l), _) => Place::Layout(&l.path),
        (Source::Registry(_), None) => unreachable!("a registry source has a client"),
    };
    let (manifest, digest) = resolve(source, registry.as_ref()).await?;
    let name = format!("{source} ({digest})");
    release_layer(&manifest).map_err(|e| OciError::Refused(format!("{name}: {e}")))?;
    let parsed: Manifest =
        serde_json::from_slice(&manifest).map_err(|e| OciError::Refused(format!("{name}: {e}")))?;
    if let Some(v) = verify {
        attach::verify(from, &digest, v).await?;
    }
    let mut blobs = Vec::new();
    if let Some(config) = &parsed.config {
        blobs.push(from.blob(config, MAX_MANIFEST_BYTES).await?);
    }
    for layer in &parsed.layers {
        blobs.push(from.blob(layer, caps.max_release_bytes).await?);
    }
    let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let mut pushed = super::push_artifact(target, &manifest, &refs, access).await?;
    debug_assert_eq!(pushed.digest, digest);
    let target_registry = match target {
        Source::Registry(r) => Some(Registry::new(&r.registry, access)?),
        Source::Layout(_) => None,
    };
    let to = match (target, &target_registry) {
        (Source::Registry(r), Some(registry)) => Place::Registry {
            registry,
            repository: &r.repository,
        },
        (Source::Layout(l), _) => Place::Layout(&l.path),
        (Source::Registry(_), None) => unreachable!("a registry target has a client"),
    };
    if let Some((tag, sig)) = attach::copy(from, to, &digest).await? {
        pushed.signature = Some(format!("{}:{tag}@{sig}", pushed.repository));
    }
    Ok(pushed)
}

/// The manifest `source` names and its digest (checked when the source pins one).
async fn resolve(
    source: &Source,
    registry: Option<&Registry>,
) -> Result<(Vec<u8>, Digest), OciError> {
    match (source, registry) {
        (Source::Registry(r), Some(registry)) => {
            registry.manifest(&r.repository, &r.reference()).await
        }
        (Source::Layout(l), _) => {
            let digest = super::layout::resolve(&l.path, l.tag.as_deref(), l.digest.as_ref())?;
            Ok((super::layout::read_manifest(&l.path, &digest)?, digest))
        }
        (Source::Registry(_), None) => unreachable!("a registry source has a client"),
    }
}
