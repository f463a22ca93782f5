//! A release's signature where the release is: the tag `sha256-HEX.sig` beside it in its
//! registry repository or OCI layout ([`super::signature`] has the format). [`verify`] checks
//! it before the release's layer is read; [`sign`] adds a signature after a push, keeping the
//! other signatures already on the tag (a signature of the same payload by the same key is
//! replaced, so pushing and signing again does not pile them up).

use std::path::Path;

use super::keys::SigningKey;
use super::registry::Registry;
use super::shape::{Descriptor, MANIFEST_MEDIA_TYPE};
use super::signature::{self, Layer, Rejection, SignatureCheck, Verify};
use super::{Digest, MAX_MANIFEST_BYTES, OciError, payload};

/// Where a release and its signature are.
#[derive(Clone, Copy, Debug)]
pub enum Place<'a> {
    /// A repository of a registry.
    Registry {
        /// The registry's client.
        registry: &'a Registry,
        /// The repository (`REPO`, without the host).
        repository: &'a str,
    },
    /// An OCI image layout directory.
    Layout(&'a Path),
}

impl Place<'_> {
    /// `HOST[:PORT]/REPO`, or `oci-layout:PATH`.
    pub fn name(&self) -> String {
        match self {
            Place::Registry {
                registry,
                repository,
            } => format!("{}/{repository}", registry.name()),
            Place::Layout(path) => format!("oci-layout:{}", path.display()),
        }
    }

    /// The manifest tagged `tag`, `None` when there is none.
    pub async fn manifest(&self, tag: &str) -> Result<Option<Vec<u8>>, OciError> {
        match self {
            Place::Registry {
                registry,
                repository,
            } => Ok(registry
                .manifest_if_exists(repository, tag)
                .await?
                .map(|(bytes, _)| bytes)),
            Place::Layout(path) => match super::layout::find(path, tag)? {
                Some(digest) => Ok(Some(super::layout::read_manifest(path, &digest)?)),
                None => Ok(None),
            },
        }
    }

    /// A signature layer's payload, checked against its digest and capped.
    async fn payload(&self, layer: &Layer) -> Result<Vec<u8>, OciError> {
        self.blob(&layer.descriptor(), signature::MAX_PAYLOAD_BYTES)
            .await
    }

    /// The blob `descriptor` names, checked against its digest; refused when larger than `cap`.
    pub async fn blob(&self, descriptor: &Descriptor, cap: u64) -> Result<Vec<u8>, OciError> {
        let mut out = Vec::new();
        self.copy_blob(descriptor, cap, &mut out).await?;
        Ok(out)
    }

    /// Copies the blob `descriptor` names into `out`, checked against its digest as it
    /// streams; refused when larger than `cap`.
    pub async fn copy_blob(
        &self,
        descriptor: &Descriptor,
        cap: u64,
        out: &mut impl std::io::Write,
    ) -> Result<(), OciError> {
        let digest = descriptor.digest().map_err(OciError::Refused)?;
        if descriptor.size > cap {
            return Err(OciError::Refused(format!(
                "{}@{digest}: a blob of {} bytes, more than {cap}: refused",
                self.name(),
                descriptor.size,
            )));
        }
        match self {
            Place::Registry {
                registry,
                repository,
            } => registry.blob(repository, descriptor, cap, out).await,
            Place::Layout(path) => super::layout::read_blob(path, &digest, cap, out),
        }
    }

    /// Stores the file `file` (verified content of `digest`) as a blob, streamed.
    pub async fn put_blob_file(&self, digest: &Digest, file: &Path) -> Result<(), OciError> {
        match self {
            Place::Registry {
                registry,
                repository,
            } => registry.push_blob_file(repository, file, digest).await,
            Place::Layout(path) => super::layout::put_blob_file(path, digest, file),
        }
    }

    /// Writes `blobs` and the OCI image manifest `manifest` tagged `tag`.
    pub async fn write(&self, tag: &str, manifest: &[u8], blobs: &[&[u8]]) -> Result<(), OciError> {
        match self {
            Place::Registry {
                registry,
                repository,
            } => {
                for blob in blobs {
                    registry.push_blob(repository, blob).await?;
                }
                registry
                    .push_manifest(repository, tag, manifest, MANIFEST_MEDIA_TYPE)
                    .await
            }
            Place::Layout(path) => super::layout::write(path, tag, manifest, blobs).map(|_| ()),
        }
    }
}

/// Checks the signature of the release `digest` at `place` with `verify`'s keys (the digest
/// is what is signed: see [`signature::check`]). A failure is [`OciError::Verification`] when
/// `verify.enforce`, else [`SignatureCheck::Failed`].
pub async fn verify(
    place: Place<'_>,
    digest: &Digest,
    verify: &Verify,
) -> Result<SignatureCheck, OciError> {
    match find_signature(place, digest, verify).await {
        Ok(key) => Ok(SignatureCheck::Verified { key }),
        Err(e) if verify.enforce => Err(e),
        Err(e) => Ok(SignatureCheck::Failed {
            why: match e {
                OciError::Verification { why, .. } => why,
                other => other.to_string(),
            },
        }),
    }
}

async fn find_signature(
    place: Place<'_>,
    digest: &Digest,
    verify: &Verify,
) -> Result<String, OciError> {
    let tag = signature::tag(digest);
    let refused = |why: String| OciError::Verification {
        digest: digest.clone(),
        why,
    };
    let where_ = place.name();
    let Some(manifest) = place.manifest(&tag).await? else {
        return Err(refused(format!(
            "it is not signed: {where_} has no signature tag {tag} (sign it with cvo push --sign-key or cosign sign --key)"
        )));
    };
    let layers = signature::layers(&manifest).map_err(|e| refused(format!("{tag}: {e}")))?;
    let mut rejections = Vec::new();
    for layer in layers.iter().take(signature::MAX_SIGNATURES) {
        let payload = match place.payload(layer).await {
            Ok(p) => p,
            Err(OciError::Refused(m) | OciError::Mismatch(m)) => {
                rejections.push(Rejection::Malformed(m));
                continue;
            }
            Err(e) => return Err(e),
        };
        match signature::check(layer, &payload, &verify.keys, digest) {
            Ok(key) => return Ok(key),
            Err(r) => rejections.push(r),
        }
    }
    Err(refused(signature::why(&tag, &rejections, &verify.keys)))
}

/// Signs the release `digest` at `place` with `key`, its payload naming `reference`
/// (`HOST[:PORT]/REPO`, or the layout's name); returns the signature's tag and manifest digest.
pub async fn sign(
    place: Place<'_>,
    reference: &str,
    digest: &Digest,
    key: &SigningKey,
) -> Result<(String, Digest), OciError> {
    let tag = signature::tag(digest);
    let payload = payload::write(reference, digest);
    let new = signature::signed_layer(key, &payload);
    let own = [key.public_key()];
    let mut layers: Vec<Layer> = match place.manifest(&tag).await? {
        Some(bytes) if bytes.len() as u64 <= MAX_MANIFEST_BYTES => {
            match signature::layers(&bytes) {
                Ok(layers) => layers,
                Err(e) => {
                    tracing::warn!(tag = %tag, "{}: {tag}: {e}; replacing it", place.name());
                    Vec::new()
                }
            }
        }
        _ => Vec::new(),
    };
    layers.retain(|l| {
        !(l.digest == new.digest && signature::check(l, &payload, &own, digest).is_ok())
    });
    layers.push(new);
    let (manifest, config) = signature::artifact(&layers);
    place.write(&tag, &manifest, &[&payload, &config]).await?;
    Ok((tag, Digest::of(&manifest)))
}

/// Copies the signature of `digest` (its tag, manifest, config and payloads, unchanged) from
/// `from` to `to`; `None` when `from` has none.
pub async fn copy(
    from: Place<'_>,
    to: Place<'_>,
    digest: &Digest,
) -> Result<Option<(String, Digest)>, OciError> {
    let tag = signature::tag(digest);
    let Some(manifest) = from.manifest(&tag).await? else {
        return Ok(None);
    };
    let refused = |e: String| OciError::Refused(format!("{}:{tag}: {e}", from.name()));
    let config = serde_json::from_slice::<serde_json::Value>(&manifest)
        .ok()
        .and_then(|m| serde_json::from_value::<Layer>(m["config"].clone()).ok())
        .ok_or_else(|| refused("the signature manifest has no config".to_owned()))?;
    let mut blobs = vec![from.blob(&config.descriptor(), MAX_MANIFEST_BYTES).await?];
    for layer in signature::layers(&manifest).map_err(refused)? {
        blobs.push(from.payload(&layer).await?);
    }
    let blobs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    to.write(&tag, &manifest, &blobs).await?;
    Ok(Some((tag, Digest::of(&manifest))))
}
