//! The reproducible release layer: a release directory as a gzipped tar whose bytes depend
//! only on the files' paths and contents.
//!
//! Entries are sorted by path (bytes), directories before what they hold; every entry has
//! uid/gid 0, no user or group names, mtime 0, mode 0644 (files) or 0755 (directories); the
//! gzip header has no time and no file name (OS byte "unknown"). Only regular files and
//! directories are written: a symlink, a device or a FIFO in the directory refuses the push,
//! naming the file. The same directory gives the same bytes on every run (with the same
//! `cvo`: another gzip implementation may compress differently).

use std::path::{Path, PathBuf};

use flate2::{Compression, GzBuilder};

use super::{Caps, OciError};

/// The gzipped tar of `dir`, without the files `left_out` names (by path relative to `dir`);
/// refused when it holds anything but regular files and directories, or more than the caps
/// allow.
pub fn build(
    dir: &Path,
    caps: Caps,
    left_out: &dyn Fn(&Path) -> bool,
) -> Result<Vec<u8>, OciError> {
    let mut entries = Vec::new();
    walk(dir, Path::new(""), &mut entries)?;
    entries.retain(|(rel, is_dir)| *is_dir || !left_out(rel));
    entries.sort_by(|a, b| {
        a.0.as_os_str()
            .as_encoded_bytes()
            .cmp(b.0.as_os_str().as_encoded_bytes())
    });
    let gz = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mut total: u64 = 0;
    for (rel, is_dir) in &entries {
        let name = rel.to_string_lossy().into_owned();
        let mut header = tar::Header::new_gnu();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        let io = |e: std::io::Error| {
            OciError::Unavailable(format!(
                "{}: cannot add it to the layer: {e}",
                dir.join(rel).display()
            ))
        };
        if *is_dir {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            tar.append_data(&mut header, format!("{name}/"), std::io::empty())
                .map_err(io)?;
        } else {
            let data = std::fs::read(dir.join(rel)).map_err(io)?;
            let size = data.len() as u64;
            if size > caps.max_file_bytes {
                return Err(OciError::Refused(format!(
                    "{}: {size} bytes, more than --max-file-bytes {}",
                    dir.join(rel).display(),
                    caps.max_file_bytes
                )));
            }
            total += size;
            if total > caps.max_release_bytes {
                return Err(OciError::Refused(format!(
                    "{}: the release holds more than --max-release-bytes {}",
                    dir.display(),
                    caps.max_release_bytes
                )));
            }
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(size);
            tar.append_data(&mut header, &name, data.as_slice())
                .map_err(io)?;
        }
    }
    let gz = tar.into_inner().map_err(|e| {
        OciError::Unavailable(format!("writing the layer of {}: {e}", dir.display()))
    })?;
    gz.finish().map_err(|e| {
        OciError::Unavailable(format!("compressing the layer of {}: {e}", dir.display()))
    })
}

/// Every entry under `root/rel`: (path relative to root, is a directory).
fn walk(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, bool)>) -> Result<(), OciError> {
    let here = root.join(rel);
    let read = std::fs::read_dir(&here).map_err(|e| {
        OciError::Usage(format!(
            "{}: cannot read the directory: {e}",
            here.display()
        ))
    })?;
    for entry in read {
        let entry = entry.map_err(|e| {
            OciError::Usage(format!(
                "{}: cannot read the directory: {e}",
                here.display()
            ))
        })?;
        let path = rel.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| OciError::Usage(format!("{}: {e}", root.join(&path).display())))?;
        if kind.is_dir() {
            out.push((path.clone(), true));
            walk(root, &path, out)?;
        } else if kind.is_file() {
            out.push((path, false));
        } else {
            return Err(OciError::Refused(format!(
                "{}: not a regular file or directory (a symlink, device or FIFO): a release layer holds only regular files and directories; replace it with a copy of what it points to",
                root.join(&path).display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaves nothing out.
    fn nothing(_: &Path) -> bool {
        false
    }

    pub(crate) const CAPS: Caps = Caps {
        max_file_bytes: 1 << 20,
        max_release_bytes: 4 << 20,
    };

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("manifests/sub")).unwrap();
        std::fs::write(dir.path().join("manifests/b.yaml"), "b: 1\n").unwrap();
        std::fs::write(dir.path().join("manifests/a.yaml"), "a: 1\n").unwrap();
        std::fs::write(dir.path().join("manifests/sub/c.yaml"), "c: 1\n").unwrap();
        dir
    }

    #[test]
    fn same_directory_same_bytes() {
        let one = tree();
        let two = tree();
        // Other times and modes: the bytes do not change.
        let f = std::fs::File::options()
            .write(true)
            .open(two.path().join("manifests/a.yaml"))
            .unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(12345))
            .unwrap();
        let a = build(one.path(), CAPS, &nothing).unwrap();
        assert_eq!(a, build(one.path(), CAPS, &nothing).unwrap());
        assert_eq!(a, build(two.path(), CAPS, &nothing).unwrap());
        // The gzip header: no time, OS unknown.
        assert_eq!(&a[4..8], &[0, 0, 0, 0]);
        assert_eq!(a[9], 255);
        // Entries sorted, owner-less, time-less.
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(a.as_slice()));
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                assert_eq!(
                    (h.uid().unwrap(), h.gid().unwrap(), h.mtime().unwrap()),
                    (0, 0, 0)
                );
                assert_eq!(h.username().unwrap(), Some(""));
                e.path().unwrap().to_string_lossy().into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "manifests/",
                "manifests/a.yaml",
                "manifests/b.yaml",
                "manifests/sub/",
                "manifests/sub/c.yaml"
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_refuse_the_layer() {
        let dir = tree();
        std::os::unix::fs::symlink("a.yaml", dir.path().join("manifests/link.yaml")).unwrap();
        let err = build(dir.path(), CAPS, &nothing).unwrap_err().to_string();
        assert!(
            err.contains("link.yaml") && err.contains("not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn files_left_out_are_not_in_the_layer() {
        let dir = tree();
        std::fs::write(dir.path().join("manifests/.cvo.yaml"), "rules: {}\n").unwrap();
        let left_out = |rel: &Path| rel.file_name().is_some_and(|n| n == ".cvo.yaml");
        let with = build(dir.path(), CAPS, &left_out).unwrap();
        std::fs::remove_file(dir.path().join("manifests/.cvo.yaml")).unwrap();
        assert_eq!(with, build(dir.path(), CAPS, &nothing).unwrap());
    }

    #[test]
    fn caps_refuse_the_layer() {
        let dir = tree();
        let tight = Caps {
            max_file_bytes: 3,
            max_release_bytes: 100,
        };
        let err = build(dir.path(), tight, &nothing).unwrap_err().to_string();
        assert!(err.contains("--max-file-bytes 3"), "{err}");
    }
}
