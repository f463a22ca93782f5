//! Safe extraction of a release layer (a gzipped tar) into a directory.
//!
//! Only regular files and directories are written. An absolute path, a `..` component, a
//! symlink, a hard link, a device, a FIFO or any other entry type refuses the whole layer,
//! naming the entry; so does an entry written twice. Each file is capped at
//! `--max-file-bytes` and all of them together at `--max-release-bytes` (counted as they are
//! decompressed: a gzip bomb stops at the cap). Files are written 0644, directories 0755,
//! whatever the tar says. The caller extracts into a fresh temporary directory and renames
//! it into place only when this returns `Ok`.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use super::Caps;

/// Extracts the gzipped tar `layer` into `dest` (an existing, empty directory). `what` names
/// the layer in messages (`oci://…@sha256:…`).
pub fn extract(layer: impl Read, dest: &Path, caps: Caps, what: &str) -> Result<(), String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(layer));
    let entries = archive
        .entries()
        .map_err(|e| format!("{what}: the layer is not a gzipped tar: {e}"))?;
    let mut total: u64 = 0;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| format!("{what}: the layer is not a readable gzipped tar: {e}"))?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let refuse = |why: &str| {
            format!(
                "{what}: tar entry {raw:?} {why}: refused (a release layer holds only regular files and directories at relative paths)"
            )
        };
        let kind = entry.header().entry_type();
        let rel = safe_path(&raw).map_err(refuse)?;
        match kind {
            tar::EntryType::Directory => {
                if let Some(rel) = rel {
                    std::fs::create_dir_all(dest.join(rel))
                        .map_err(|e| format!("{what}: creating {raw:?}: {e}"))?;
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let Some(rel) = rel else {
                    return Err(refuse("is a file without a name"));
                };
                let path = dest.join(&rel);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| format!("{what}: creating the directory of {raw:?}: {e}"))?;
                }
                let mut file = std::fs::File::options()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::AlreadyExists => refuse("appears twice"),
                        _ => format!("{what}: writing {raw:?}: {e}"),
                    })?;
                let mut buf = vec![0u8; 64 << 10];
                let mut size: u64 = 0;
                loop {
                    let n = entry
                        .read(&mut buf)
                        .map_err(|e| format!("{what}: reading tar entry {raw:?}: {e}"))?;
                    if n == 0 {
                        break;
                    }
                    size += n as u64;
                    total += n as u64;
                    if size > caps.max_file_bytes {
                        return Err(format!(
                            "{what}: tar entry {raw:?} holds more than --max-file-bytes {}: refused",
                            caps.max_file_bytes
                        ));
                    }
                    if total > caps.max_release_bytes {
                        return Err(format!(
                            "{what}: the layer holds more than --max-release-bytes {} (at tar entry {raw:?}): refused",
                            caps.max_release_bytes
                        ));
                    }
                    file.write_all(&buf[..n])
                        .map_err(|e| format!("{what}: writing {raw:?}: {e}"))?;
                }
            }
            // PAX extended headers: the tar reader applies them to the next entry.
            tar::EntryType::XHeader | tar::EntryType::XGlobalHeader => {}
            tar::EntryType::Symlink => return Err(refuse("is a symbolic link")),
            tar::EntryType::Link => return Err(refuse("is a hard link")),
            tar::EntryType::Char | tar::EntryType::Block => return Err(refuse("is a device")),
            tar::EntryType::Fifo => return Err(refuse("is a FIFO")),
            other => {
                return Err(refuse(&format!(
                    "has entry type {:?}",
                    other.as_byte() as char
                )));
            }
        }
    }
    // The gzip trailer (CRC, size) is checked when the stream ends: read to the end.
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink())
        .map_err(|e| format!("{what}: the layer's gzip stream is damaged: {e}"))?;
    Ok(())
}

/// The relative path of an entry named `raw`; `None` for the root (`./`). An absolute path
/// or a `..` component is refused.
fn safe_path(raw: &str) -> Result<Option<PathBuf>, &'static str> {
    if raw.starts_with('/') || raw.starts_with('\\') {
        return Err("has an absolute path");
    }
    let mut out = PathBuf::new();
    for c in Path::new(raw).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err("has a '..' component"),
            Component::RootDir | Component::Prefix(_) => return Err("has an absolute path"),
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// Test helper: a gzipped tar written byte by byte, so that entries the tar writer would
/// refuse (`../x`, `/abs`) can be made. Each entry: (name, type, content).
#[doc(hidden)]
pub fn raw_layer(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (name, kind, data) in entries {
        let mut header = tar::Header::new_old();
        let bytes = name.as_bytes();
        header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
            header.set_link_name("target").expect("link name");
        }
        header.set_cksum();
        tar.append(&header, *data).expect("in memory");
    }
    tar.into_inner()
        .and_then(|gz| gz.finish())
        .expect("in memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar::EntryType as T;

    const CAPS: Caps = Caps {
        max_file_bytes: 1 << 20,
        max_release_bytes: 4 << 20,
    };

    fn run(entries: &[(&str, T, &[u8])], caps: Caps) -> (Result<(), String>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let layer = raw_layer(entries);
        (extract(layer.as_slice(), dir.path(), caps, "layer"), dir)
    }

    #[test]
    fn files_and_directories_are_extracted() {
        let (r, dir) = run(
            &[
                ("./", T::Directory, b""),
                ("manifests/", T::Directory, b""),
                ("manifests/a.yaml", T::Regular, b"a: 1\n"),
                ("b/c.yaml", T::Regular, b"c: 1\n"),
            ],
            CAPS,
        );
        r.unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("manifests/a.yaml")).unwrap(),
            b"a: 1\n"
        );
        assert_eq!(
            std::fs::read(dir.path().join("b/c.yaml")).unwrap(),
            b"c: 1\n"
        );
    }

    #[test]
    fn unsafe_entries_are_refused_by_name() {
        for (name, kind, why) in [
            ("../x", T::Regular, "'..'"),
            ("a/../../x", T::Regular, "'..'"),
            ("/abs", T::Regular, "absolute"),
            ("link", T::Symlink, "symbolic link"),
            ("hard", T::Link, "hard link"),
            ("dev", T::Char, "device"),
            ("blk", T::Block, "device"),
            ("fifo", T::Fifo, "FIFO"),
        ] {
            let (r, dir) = run(
                &[("ok.yaml", T::Regular, b"a: 1\n"), (name, kind, b"")],
                CAPS,
            );
            let err = r.unwrap_err();
            assert!(
                err.contains(&format!("{name:?}")) && err.contains(why),
                "{name}: {err}"
            );
            // Nothing was written outside the directory.
            assert!(!dir.path().parent().unwrap().join("x").exists());
        }
    }

    #[test]
    fn duplicates_and_caps_are_refused() {
        let (r, _d) = run(&[("a", T::Regular, b"1"), ("a", T::Regular, b"2")], CAPS);
        assert!(r.unwrap_err().contains("appears twice"));
        let big = vec![b'x'; 2000];
        let file_cap = Caps {
            max_file_bytes: 1000,
            max_release_bytes: 1 << 20,
        };
        let (r, _d) = run(&[("big", T::Regular, &big)], file_cap);
        assert!(r.unwrap_err().contains("--max-file-bytes 1000"));
        let total_cap = Caps {
            max_file_bytes: 1500,
            max_release_bytes: 2500,
        };
        let (r, _d) = run(
            &[
                ("a", T::Regular, &big[..1500]),
                ("b", T::Regular, &big[..1500]),
            ],
            total_cap,
        );
        assert!(r.unwrap_err().contains("--max-release-bytes 2500"));
    }

    #[test]
    fn not_a_tar_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = extract(&b"plain text"[..], dir.path(), CAPS, "layer").unwrap_err();
        assert!(err.contains("layer:"), "{err}");
    }
}
