//! The blob cache: manifests and layers stored by digest (`--cache-dir`, default the user
//! cache dir's `cvo/`, e.g. `~/.cache/cvo`), each verified again before it is used. A blob
//! whose content no longer matches its digest (a disk error, a hand edit) is deleted and
//! fetched again; a pinned digest whose blobs are all cached needs no registry at all.
//!
//! Layout: `ROOT/blobs/sha256/<hex>` (complete, verified blobs, written to a temporary file
//! in `ROOT/tmp/` first and renamed), and `ROOT/extract/` (the temporary directories releases
//! are extracted into, removed when the command ends). What a killed process left in `tmp/`
//! and `extract/` is removed by the next one to open the cache, once older than
//! [`STALE_AFTER`] (no process reads its extraction directory that long: a release is read
//! once, right after extraction).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::digest::{VerifyError, copy_verified};
use super::{Digest, OciError};

/// Age after which an entry of `tmp/` or `extract/` is a leftover of a killed process.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// A cache directory.
#[derive(Clone, Debug)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The cache at `root`, created if missing.
    pub fn open(root: &Path) -> Result<Cache, OciError> {
        for sub in ["blobs/sha256", "tmp", "extract"] {
            std::fs::create_dir_all(root.join(sub)).map_err(|e| {
                OciError::Usage(format!(
                    "the cache directory {}: cannot create it: {e} (choose another with --cache-dir)",
                    root.display()
                ))
            })?;
        }
        let cache = Cache {
            root: root.to_owned(),
        };
        cache.remove_leftovers(std::time::SystemTime::now());
        Ok(cache)
    }

    /// Removes the entries of `tmp/` and `extract/` last modified more than [`STALE_AFTER`]
    /// before `now` (best effort: what cannot be removed stays, said at debug level).
    fn remove_leftovers(&self, now: std::time::SystemTime) {
        for sub in ["tmp", "extract"] {
            let Ok(entries) = std::fs::read_dir(self.root.join(sub)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_AFTER));
                if !stale {
                    continue;
                }
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                match removed {
                    Ok(()) => {
                        tracing::debug!(path = %path.display(), "removed a leftover of an earlier run from the cache")
                    }
                    Err(e) => {
                        tracing::debug!(path = %path.display(), error = %e, "could not remove a leftover from the cache")
                    }
                }
            }
        }
    }

    /// The default cache directory: `cvo/` in the user cache directory ($XDG_CACHE_HOME or
    /// ~/.cache on Linux); `None` when there is no home directory.
    pub fn default_root() -> Option<PathBuf> {
        dirs::cache_dir().map(|d| d.join("cvo"))
    }

    /// Where the cache keeps temporary directories of extracted releases.
    pub fn extract_dir(&self) -> PathBuf {
        self.root.join("extract")
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    /// The cached blob of `digest`, verified now (digest and cap); a blob that fails the
    /// check is removed (a warning says so) and `None` returned, as for one never cached.
    pub fn get(&self, digest: &Digest, cap: u64) -> Option<PathBuf> {
        let path = self.blob_path(digest);
        let file = File::open(&path).ok()?;
        let what = format!("cached blob {}", path.display());
        match copy_verified(
            &mut BufReader::new(file),
            &mut std::io::sink(),
            digest,
            cap,
            &what,
        ) {
            Ok(_) => Some(path),
            Err(e) => {
                let why = match e {
                    VerifyError::Io(e) => format!("{what}: {e}"),
                    VerifyError::TooLarge(m) | VerifyError::Mismatch(m) => m,
                };
                tracing::warn!("{why}; removing it and fetching {digest} again");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// A temporary file in the cache, to be filled and then [`Cache::keep`]-ed.
    pub fn temp_file(&self) -> Result<tempfile::NamedTempFile, OciError> {
        tempfile::NamedTempFile::new_in(self.root.join("tmp")).map_err(|e| {
            OciError::Unavailable(format!(
                "the cache directory {}: cannot write in it: {e}",
                self.root.display()
            ))
        })
    }

    /// Moves `file`, whose content was verified to be `digest`, into the cache; returns its
    /// path there.
    pub fn keep(
        &self,
        file: tempfile::NamedTempFile,
        digest: &Digest,
    ) -> Result<PathBuf, OciError> {
        let path = self.blob_path(digest);
        file.persist(&path).map_err(|e| {
            OciError::Unavailable(format!(
                "the cache: cannot store {}: {}",
                path.display(),
                e.error
            ))
        })?;
        Ok(path)
    }

    /// Stores `bytes`, whose digest is `digest` (checked), in the cache.
    pub fn put(&self, digest: &Digest, bytes: &[u8]) -> Result<PathBuf, OciError> {
        if &Digest::of(bytes) != digest {
            return Err(OciError::Refused(format!(
                "content is not {digest}: not cached"
            )));
        }
        let mut file = self.temp_file()?;
        std::io::Write::write_all(&mut file, bytes)
            .map_err(|e| OciError::Unavailable(format!("the cache: writing {digest}: {e}")))?;
        self.keep(file, digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_of_killed_runs_are_removed_once_stale() {
        let root = tempfile::tempdir().unwrap();
        let cache = Cache::open(root.path()).unwrap();
        let extracted = cache.extract_dir().join("release-x");
        std::fs::create_dir_all(extracted.join("release")).unwrap();
        std::fs::write(extracted.join("release/a.yaml"), "a").unwrap();
        let partial = root.path().join("tmp/blob");
        std::fs::write(&partial, "b").unwrap();
        let digest = Digest::of(b"kept");
        let blob = cache.put(&digest, b"kept").unwrap();
        // Fresh: kept (another process may be using it).
        let now = std::time::SystemTime::now();
        cache.remove_leftovers(now);
        assert!(extracted.exists() && partial.exists());
        // Older than STALE_AFTER: removed; blobs are never touched.
        cache.remove_leftovers(now + STALE_AFTER + std::time::Duration::from_secs(60));
        assert!(!extracted.exists() && !partial.exists());
        assert!(blob.exists());
    }

    #[test]
    fn verified_blobs_are_reused_and_corrupted_ones_dropped() {
        let root = tempfile::tempdir().unwrap();
        let cache = Cache::open(root.path()).unwrap();
        let digest = Digest::of(b"layer bytes");
        assert_eq!(cache.get(&digest, 100), None);
        let path = cache.put(&digest, b"layer bytes").unwrap();
        assert_eq!(cache.get(&digest, 100), Some(path.clone()));
        // Over the cap: not used.
        assert_eq!(cache.get(&digest, 3), None);
        cache.put(&digest, b"layer bytes").unwrap();
        // Corrupted on disk: dropped, so the caller fetches it again.
        std::fs::write(&path, b"layer bytez").unwrap();
        assert_eq!(cache.get(&digest, 100), None);
        assert!(!path.exists());
        assert!(cache.put(&digest, b"other").is_err());
    }
}
