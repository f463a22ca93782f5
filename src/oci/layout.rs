//! OCI image layout directories (`oci-layout:PATH`): the on-disk form of a registry
//! repository, for air-gapped mirrors. `oci-layout` holds `{"imageLayoutVersion":"1.0.0"}`,
//! `index.json` lists the manifests (a tag is the `org.opencontainers.image.ref.name`
//! annotation), and `blobs/sha256/<hex>` holds every manifest and blob by digest. Every blob
//! read is verified against its digest and capped.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::digest::{VerifyError, copy_verified};
use super::shape::MANIFEST_MEDIA_TYPE;
use super::{Digest, MAX_MANIFEST_BYTES, OciError};

/// The annotation that tags a manifest in `index.json`.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Vec<IndexEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexEntry {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    annotations: std::collections::BTreeMap<String, String>,
}

fn read_index(path: &Path) -> Result<Index, OciError> {
    let file = path.join("index.json");
    let unreadable = |e: std::io::Error| {
        OciError::Unavailable(format!(
            "{}: cannot read it ({e}): is {} an OCI image layout?",
            file.display(),
            path.display()
        ))
    };
    let mut text = Vec::new();
    open_regular(&file)
        .map_err(unreadable)?
        .take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(unreadable)?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(OciError::Refused(format!(
            "{}: larger than {MAX_MANIFEST_BYTES} bytes, the most an index may hold: refused",
            file.display()
        )));
    }
    serde_json::from_slice(&text)
        .map_err(|e| OciError::Refused(format!("{}: not an OCI image index: {e}", file.display())))
}

/// `file` opened for reading when it is a regular file (symlinks followed): a FIFO would block
/// the reader forever and a device (`/dev/zero`) never ends. Checked before opening, and again
/// on the handle (opened non-blocking, so a file swapped for a FIFO in between does not block).
fn open_regular(file: &Path) -> std::io::Result<File> {
    let not_regular = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file: a layout only holds regular files",
        )
    };
    if !std::fs::metadata(file)?.is_file() {
        return Err(not_regular());
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let opened = options.open(file)?;
    if !opened.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(opened)
}

/// The digest of the manifest tagged `tag` in the layout at `path`, `None` when no manifest
/// has that tag.
pub fn find(path: &Path, tag: &str) -> Result<Option<Digest>, OciError> {
    let index = read_index(path)?;
    index
        .manifests
        .iter()
        .find(|m| m.annotations.get(REF_NAME).map(String::as_str) == Some(tag))
        .map(|m| {
            Digest::parse(&m.digest).map_err(|e| {
                OciError::Refused(format!("{}: {e}", path.join("index.json").display()))
            })
        })
        .transpose()
}

/// The digest of the manifest `tag` or `digest` names in the layout at `path` (with neither,
/// the layout's only manifest).
pub fn resolve(
    path: &Path,
    tag: Option<&str>,
    digest: Option<&Digest>,
) -> Result<Digest, OciError> {
    if let Some(d) = digest {
        return Ok(d.clone());
    }
    let index = read_index(path)?;
    let tags = || {
        let t: Vec<&str> = index
            .manifests
            .iter()
            .filter_map(|m| m.annotations.get(REF_NAME).map(String::as_str))
            .collect();
        if t.is_empty() {
            "none".to_owned()
        } else {
            t.join(", ")
        }
    };
    let entry = match tag {
        Some(tag) => index
            .manifests
            .iter()
            .find(|m| m.annotations.get(REF_NAME).map(String::as_str) == Some(tag))
            .ok_or_else(|| {
                OciError::Unavailable(format!(
                    "oci-layout:{}: no manifest tagged {tag:?} (its tags: {})",
                    path.display(),
                    tags()
                ))
            })?,
        None => match index.manifests.as_slice() {
            [one] => one,
            _ => {
                return Err(OciError::Usage(format!(
                    "oci-layout:{}: holds {} manifests: name one with :TAG or @sha256:… (its tags: {})",
                    path.display(),
                    index.manifests.len(),
                    tags()
                )));
            }
        },
    };
    Digest::parse(&entry.digest)
        .map_err(|e| OciError::Refused(format!("{}: {e}", path.join("index.json").display())))
}

/// The path of blob `digest` in the layout.
pub fn blob_path(path: &Path, digest: &Digest) -> PathBuf {
    path.join("blobs/sha256").join(digest.hex())
}

/// Copies blob `digest` into `out`, verified and capped at `cap` bytes.
pub fn read_blob(
    path: &Path,
    digest: &Digest,
    cap: u64,
    out: &mut impl std::io::Write,
) -> Result<(), OciError> {
    let blob = blob_path(path, digest);
    let file = open_regular(&blob).map_err(|e| {
        OciError::Unavailable(format!(
            "oci-layout:{}: blob {digest}: cannot read {}: {e}",
            path.display(),
            blob.display()
        ))
    })?;
    let what = format!("oci-layout:{} blob {digest}", path.display());
    copy_verified(&mut BufReader::new(file), out, digest, cap, &what).map_err(|e| match e {
        VerifyError::Io(e) => OciError::Unavailable(format!("{what}: {e}")),
        VerifyError::TooLarge(m) => OciError::Refused(m),
        VerifyError::Mismatch(m) => OciError::Mismatch(m),
    })?;
    Ok(())
}

/// The manifest `digest` of the layout, verified.
pub fn read_manifest(path: &Path, digest: &Digest) -> Result<Vec<u8>, OciError> {
    let mut out = Vec::new();
    read_blob(path, digest, MAX_MANIFEST_BYTES, &mut out)?;
    Ok(out)
}

/// Copies the file `file` (verified content of `digest`) into the layout at `path` as a blob
/// (the layout's directories are created when missing).
pub fn put_blob_file(path: &Path, digest: &Digest, file: &Path) -> Result<(), OciError> {
    let blob = blob_path(path, digest);
    let written = std::fs::create_dir_all(path.join("blobs/sha256"))
        .and_then(|()| std::fs::copy(file, &blob));
    written.map(|_| ()).map_err(|e| {
        OciError::Unavailable(format!(
            "oci-layout:{}: writing {}: {e}",
            path.display(),
            blob.display()
        ))
    })
}

/// Writes the manifest `manifest` and its `blobs` into the layout at `path` (created when
/// missing), tagged `tag` (replacing an earlier manifest of that tag in index.json).
pub fn write(path: &Path, tag: &str, manifest: &[u8], blobs: &[&[u8]]) -> Result<Digest, OciError> {
    let io = |what: &Path, e: std::io::Error| {
        OciError::Unavailable(format!(
            "oci-layout:{}: writing {}: {e}",
            path.display(),
            what.display()
        ))
    };
    let blob_dir = path.join("blobs/sha256");
    std::fs::create_dir_all(&blob_dir).map_err(|e| io(&blob_dir, e))?;
    let marker = path.join("oci-layout");
    std::fs::write(&marker, br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(|e| io(&marker, e))?;
    for bytes in blobs.iter().copied().chain([manifest]) {
        let file = blob_path(path, &Digest::of(bytes));
        std::fs::write(&file, bytes).map_err(|e| io(&file, e))?;
    }
    let digest = Digest::of(manifest);
    let mut index = if path.join("index.json").exists() {
        read_index(path)?
    } else {
        Index {
            schema_version: 2,
            media_type: Some("application/vnd.oci.image.index.v1+json".to_owned()),
            manifests: Vec::new(),
        }
    };
    index
        .manifests
        .retain(|m| m.annotations.get(REF_NAME).map(String::as_str) != Some(tag));
    index.manifests.push(IndexEntry {
        media_type: MANIFEST_MEDIA_TYPE.to_owned(),
        digest: digest.to_string(),
        size: manifest.len() as u64,
        annotations: [(REF_NAME.to_owned(), tag.to_owned())].into(),
    });
    let file = path.join("index.json");
    let text = serde_json::to_vec_pretty(&index).expect("an index serializes");
    std::fs::write(&file, text).map_err(|e| io(&file, e))?;
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_layouts_resolve_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let (manifest, digest) = super::super::shape::cvo_manifest(b"layer");
        assert_eq!(
            write(dir.path(), "v1", &manifest, &[b"layer", b"{}"]).unwrap(),
            digest
        );
        assert_eq!(resolve(dir.path(), Some("v1"), None).unwrap(), digest);
        assert_eq!(resolve(dir.path(), None, None).unwrap(), digest);
        assert!(
            resolve(dir.path(), Some("v2"), None)
                .unwrap_err()
                .to_string()
                .contains("its tags: v1")
        );
        assert_eq!(read_manifest(dir.path(), &digest).unwrap(), manifest);
        // A second tag: an untagged source is ambiguous.
        let (other, _) = super::super::shape::cvo_manifest(b"other");
        write(dir.path(), "v2", &other, &[b"other"]).unwrap();
        assert!(
            resolve(dir.path(), None, None)
                .unwrap_err()
                .to_string()
                .contains("holds 2 manifests")
        );
        // A tampered blob is refused.
        let layer = Digest::of(b"layer");
        std::fs::write(blob_path(dir.path(), &layer), b"layeR").unwrap();
        let err = read_blob(dir.path(), &layer, 100, &mut Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("changed or was corrupted"), "{err}");
    }

    /// An `index.json` over the cap, one that is `/dev/zero` (never ends) and one that is a
    /// FIFO (would block forever) are refused at once, naming the file.
    #[cfg(unix)]
    #[test]
    fn an_index_that_is_too_large_or_not_a_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index.json");
        std::fs::write(&index, vec![b' '; MAX_MANIFEST_BYTES as usize + 1]).unwrap();
        let err = resolve(dir.path(), Some("v1"), None).unwrap_err();
        assert!(
            matches!(&err, OciError::Refused(m) if m.contains(&format!("index.json: larger than {MAX_MANIFEST_BYTES} bytes, the most an index may hold"))),
            "{err}"
        );
        std::fs::remove_file(&index).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &index).unwrap();
        let err = find(dir.path(), "v1").unwrap_err().to_string();
        assert!(
            err.contains("index.json") && err.contains("not a regular file"),
            "{err}"
        );
        std::fs::remove_file(&index).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&index).status();
        if made.is_ok_and(|s| s.success()) {
            let err = find(dir.path(), "v1").unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
    }
}
