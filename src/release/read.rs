//! Reading the bytes of a release's files safely: regular files only, and never more than
//! the configured limits (docs/limits.md).
//!
//! A FIFO would block the loader forever, and a symlink to `/dev/zero` would read until
//! memory runs out; both are refused by their file type (symlinks followed) before a byte is
//! read. The file is opened non-blocking and its type checked again on the open handle, so a
//! file swapped for a FIFO in between is refused too. Reads stop one byte past the cap.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// How much a release may make the loader read. Defaults in docs/limits.md, with why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one file (manifest, `release-metadata`, `image-references`).
    pub max_file_bytes: u64,
    /// Bytes of all files of one release together.
    pub max_release_bytes: u64,
}

/// 16 MiB: ten times the largest object etcd stores (1.5 MiB), and ten times the largest
/// file of the OpenShift payload.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 << 20;
/// 256 MiB: fifteen times the OpenShift payload (17 MB); loading takes about twice the
/// input in memory.
pub const DEFAULT_MAX_RELEASE_BYTES: u64 = 256 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_release_bytes: DEFAULT_MAX_RELEASE_BYTES,
        }
    }
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("is {0}, not a regular file: a release only reads regular files")]
    NotRegular(&'static str),
    #[error("is larger than the limit of {} per file", human_bytes(*limit))]
    TooLarge { limit: u64 },
    #[error("cannot be read: {0}")]
    Io(std::io::Error),
}

impl ReadError {
    /// What to do about it, in one sentence.
    pub fn help(&self) -> &'static str {
        match self {
            ReadError::NotRegular(_) => {
                "replace it with a regular file, or remove it from the release directory"
            }
            ReadError::TooLarge { .. } => {
                "split the file, or raise the limit with --max-file-bytes if it really is this large (docs/limits.md)"
            }
            ReadError::Io(_) => "check that the file exists and is readable by this user",
        }
    }
}

/// The size of a regular file (symlinks followed), or why it is not one.
pub fn regular_file_size(path: &Path) -> Result<u64, ReadError> {
    let meta = std::fs::metadata(path).map_err(ReadError::Io)?;
    check_type(&meta)?;
    Ok(meta.len())
}

/// Reads a regular file of at most `limit` bytes.
pub fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    read_capped_with_metadata(path, limit).map(|(bytes, _)| bytes)
}

/// [`read_capped`], with the metadata of the file read.
pub fn read_capped_with_metadata(
    path: &Path,
    limit: u64,
) -> Result<(Vec<u8>, std::fs::Metadata), ReadError> {
    regular_file_size(path)?;
    let file = open_nonblocking(path).map_err(ReadError::Io)?;
    let metadata = file.metadata().map_err(ReadError::Io)?;
    check_type(&metadata)?;
    let mut bytes = Vec::with_capacity(metadata.len().min(limit) as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok((bytes, metadata))
}

fn check_type(meta: &std::fs::Metadata) -> Result<(), ReadError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(ReadError::NotRegular(file_type_name(&meta.file_type())))
}

#[cfg(unix)]
fn file_type_name(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn file_type_name(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// `16 MiB`, `1.5 KiB`, `300 bytes`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text} {} ({n} bytes)", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_reads_naturally() {
        assert_eq!(human_bytes(300), "300 bytes");
        assert_eq!(human_bytes(16 << 20), "16 MiB (16777216 bytes)");
        assert_eq!(human_bytes(1536), "1.5 KiB (1536 bytes)");
    }

    #[test]
    fn reads_stop_at_the_cap() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), "0123456789").unwrap();
        assert_eq!(read_capped(f.path(), 10).unwrap().len(), 10);
        assert!(matches!(
            read_capped(f.path(), 9),
            Err(ReadError::TooLarge { limit: 9 })
        ));
        assert!(matches!(
            read_capped(Path::new("/dev/null"), 9),
            Err(ReadError::NotRegular("a character device"))
        ));
    }
}
