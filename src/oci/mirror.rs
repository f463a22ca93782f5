//! Mirroring a release artifact as it is — the same manifest bytes, so the same digest — from a
//! registry or layout to another (a registry into an OCI layout for an air-gapped cluster, or
//! a layout into the cluster's registry), with its signature tag `sha256-HEX.sig` copied
//! along unchanged. What is copied is checked as it is read: the manifest against its digest,
//! its shape (a release artifact), every blob against its digest and the size caps (all of
//! them together at most `--max-release-bytes`, from the manifest before any is read), and
//! with a [`Verify`] the signature before any blob is read. Blobs pass through temporary files,
//! one at a time: none is held in memory.

use super::attach::{self, Place};
use super::registry::Registry;
use super::shape::{Descriptor, Manifest, release_layer};
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
    let tag = super::push::target_tag(target)?;
    let registry = client(source, access)?;
    let from = place(source, registry.as_ref());
    let (manifest, digest) = resolve(source, registry.as_ref()).await?;
    let name = format!("{source} ({digest})");
    release_layer(&manifest).map_err(|e| OciError::Refused(format!("{name}: {e}")))?;
    let parsed: Manifest =
        serde_json::from_slice(&manifest).map_err(|e| OciError::Refused(format!("{name}: {e}")))?;
    let total = parsed
        .layers
        .iter()
        .fold(0u64, |t, l| t.saturating_add(l.size));
    if total > caps.max_release_bytes {
        return Err(OciError::Refused(format!(
            "{name}: its layers have {total} bytes together, more than --max-release-bytes {}: refused",
            caps.max_release_bytes
        )));
    }
    if let Some(v) = verify {
        attach::verify(from, &digest, v).await?;
    }
    let target_registry = client(target, access)?;
    let to = place(target, target_registry.as_ref());
    let blobs = parsed
        .config
        .iter()
        .map(|c| (c, MAX_MANIFEST_BYTES))
        .chain(parsed.layers.iter().map(|l| (l, caps.max_release_bytes)));
    for (descriptor, cap) in blobs {
        copy_blob(from, to, descriptor, cap).await?;
    }
    to.write(tag, &manifest, &[]).await?;
    let mut pushed = Pushed {
        repository: to.name(),
        tag: tag.to_owned(),
        digest: Digest::of(&manifest),
        signature: None,
    };
    debug_assert_eq!(pushed.digest, digest);
    if let Some((tag, sig)) = attach::copy(from, to, &digest).await? {
        pushed.signature = Some(format!("{}:{tag}@{sig}", pushed.repository));
    }
    Ok(pushed)
}

/// Copies one blob from `from` to `to` through a temporary file, verified and capped at `cap`.
async fn copy_blob(
    from: Place<'_>,
    to: Place<'_>,
    descriptor: &Descriptor,
    cap: u64,
) -> Result<(), OciError> {
    let digest = descriptor.digest().map_err(OciError::Refused)?;
    let mut file = tempfile::NamedTempFile::new().map_err(|e| {
        OciError::Unavailable(format!(
            "cannot create a temporary file for blob {digest}: {e}"
        ))
    })?;
    from.copy_blob(descriptor, cap, file.as_file_mut()).await?;
    to.put_blob_file(&digest, file.path()).await
}

/// A registry's client for `source`, `None` for a layout.
fn client(source: &Source, access: &Access) -> Result<Option<Registry>, OciError> {
    match source {
        Source::Registry(r) => Registry::new(&r.registry, access).map(Some),
        Source::Layout(_) => Ok(None),
    }
}

/// Where `source` is, with its registry's client.
fn place<'a>(source: &'a Source, registry: Option<&'a Registry>) -> Place<'a> {
    match (source, registry) {
        (Source::Registry(r), Some(registry)) => Place::Registry {
            registry,
            repository: &r.repository,
        },
        (Source::Layout(l), _) => Place::Layout(&l.path),
        (Source::Registry(_), None) => unreachable!("a registry source has a client"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::shape::{FLUX_CONFIG_MEDIA_TYPE, FLUX_CONTENT_MEDIA_TYPE, MANIFEST_MEDIA_TYPE};

    fn layout(dir: &std::path::Path, tail: &str) -> Source {
        Source::parse(&format!("oci-layout:{}{tail}", dir.display()))
            .unwrap()
            .unwrap()
    }

    /// A Flux artifact of three layers, each under the cap and together over it: refused
    /// from its manifest before any blob is read; under the cap, copied unchanged.
    #[tokio::test]
    async fn the_layers_of_a_mirrored_artifact_are_capped_together() {
        let layers: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 400]).collect();
        let descriptor = |l: &Vec<u8>| serde_json::json!({"mediaType": FLUX_CONTENT_MEDIA_TYPE, "digest": Digest::of(l).to_string(), "size": l.len()});
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": FLUX_CONFIG_MEDIA_TYPE, "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": layers.iter().map(descriptor).collect::<Vec<_>>(),
        })
        .to_string();
        let from = tempfile::tempdir().unwrap();
        let mut blobs: Vec<&[u8]> = layers.iter().map(Vec::as_slice).collect();
        blobs.push(b"{}");
        let digest =
            crate::oci::layout::write(from.path(), "1", manifest.as_bytes(), &blobs).unwrap();
        let to = tempfile::tempdir().unwrap();
        let caps = |max_release_bytes| Caps {
            max_file_bytes: 1 << 20,
            max_release_bytes,
        };
        let (source, target) = (layout(from.path(), ":1"), layout(to.path(), ":m"));
        let access = Access::default();
        let err = mirror(&source, &target, &access, caps(1000), None)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, OciError::Refused(m) if m.contains("its layers have 1200 bytes together, more than --max-release-bytes 1000")),
            "{err}"
        );
        assert!(!to.path().join("index.json").exists(), "nothing written");
        let pushed = mirror(&source, &target, &access, caps(1200), None)
            .await
            .unwrap();
        assert_eq!(pushed.digest, digest);
        for l in &layers {
            let blob = crate::oci::layout::blob_path(to.path(), &Digest::of(l));
            assert_eq!(&std::fs::read(blob).unwrap(), l);
        }
        assert_eq!(
            crate::oci::layout::read_manifest(to.path(), &digest).unwrap(),
            manifest.as_bytes()
        );
    }
}
