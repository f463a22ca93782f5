//! The parse cache: what a manifest file's bytes parse to, kept under `<cache-dir>/parsed/` so
//! that a release read again (every command reads the whole release) is not parsed again.
//!
//! **Key.** An entry is named by the SHA-256 of the file's bytes and of everything else its
//! parse depends on: cvo's version, [`FORMAT`] and the running executable (its size and
//! modification time: a rebuilt cvo never reads another build's entries), the file's name
//! (its extension and run level), and whether it is a payload's templated file, then with
//! which template values. The file's path is not part of it: the same bytes under another
//! directory (an OCI release extracted afresh) are a hit. An entry stores documents and lines,
//! never a path; what is loaded from it names the file read now.
//!
//! **Shared by processes.** An entry is written to a temporary file in the same directory and
//! renamed into place, so a reader sees a whole entry or none. It is never trusted blindly:
//! one larger than [`MAX_ENTRY_BYTES`], that does not decode, or that holds another key (a
//! copy, a hand edit) is ignored, and the file is parsed and the entry written again.
//!
//! **Bounded.** After a load that wrote entries, the oldest (by modification time, which a hit
//! older than [`TOUCH_AFTER`] refreshes) are removed while all of them together hold more than
//! the bound ([`DEFAULT_MAX_BYTES`]). A load that only hits never scans the directory.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::read::{ReadError, read_capped_with_metadata};
use super::template::TemplateValues;
use super::{Manifest, ObjectId};
use crate::diagnostic::{Diagnostic, Location, Severity, escaped_path};

/// The entry format and what the parse of a file gives: bump it when either changes.
pub const FORMAT: u32 = 1;
/// 256 MiB: the entries of some twenty releases of the OpenShift payload's size (12 MiB for
/// its 799 files).
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// The largest entry read or written (a larger one is not cached).
pub const MAX_ENTRY_BYTES: u64 = 64 << 20;
/// A hit refreshes its entry's modification time when older than this (once an hour at most:
/// the bound drops the entries unused longest, without a write on every hit).
pub const TOUCH_AFTER: Duration = Duration::from_secs(60 * 60);
/// A temporary file older than this is a leftover of a killed process, removed when pruning.
const STALE_TEMP: Duration = Duration::from_secs(60 * 60);
/// The names of temporary files (hidden, never taken for an entry).
const TEMP_PREFIX: &str = ".tmp-";

/// Where and how much to cache: a handle in [`super::LoadOptions`] (`None` there: no cache).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseCache {
    dir: PathBuf,
    max_bytes: u64,
    build: String,
}

impl ParseCache {
    /// The parse cache of the cache directory `cache_dir` (`--cache-dir`): its `parsed/`,
    /// created when the first entry is written.
    pub fn new(cache_dir: &Path) -> Self {
        ParseCache {
            dir: cache_dir.join("parsed"),
            max_bytes: DEFAULT_MAX_BYTES,
            build: build_identity(),
        }
    }

    /// The same cache with another bound on its entries' bytes together.
    pub fn with_max_bytes(self, max_bytes: u64) -> Self {
        ParseCache { max_bytes, ..self }
    }

    /// The directory of the entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }
}

/// What a cvo build is: its version, [`FORMAT`], and its executable's size and time.
fn build_identity() -> String {
    let exe = std::env::current_exe().and_then(std::fs::metadata).ok();
    let (size, nanos) = exe.map_or((0, 0), |m| {
        let time = m.modified().ok();
        let nanos = time
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        (m.len(), nanos)
    });
    format!(
        "cvo {} format {FORMAT} exe {size} {nanos}",
        env!("CARGO_PKG_VERSION")
    )
}

/// How one load used the cache: files found there, parsed, and entries written (and removed
/// by the bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    pub hits: usize,
    pub misses: usize,
    pub written: usize,
    pub removed: usize,
}

/// One load's use of a [`ParseCache`], counted (shared by the threads that parse).
pub(super) struct Session<'a> {
    cache: &'a ParseCache,
    hits: AtomicUsize,
    misses: AtomicUsize,
    written: AtomicUsize,
}

/// A file's manifests as an entry holds them: each object with its location in the file.
pub(super) struct Hit {
    pub objects: Vec<(Location, Value)>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    key: Cow<'a, str>,
    manifests: Vec<StoredManifest<'a>>,
    diagnostics: Vec<StoredDiagnostic>,
}

#[derive(Serialize, Deserialize)]
struct StoredManifest<'a> {
    document: Option<usize>,
    line: Option<usize>,
    #[serde(deserialize_with = "exact_size")]
    object: Cow<'a, Value>,
}

/// An entry's object with its mappings at their exact size, as the loader reads one: serde_json's
/// own reader left a 50,000-manifest release's objects taking 67 MB more.
fn exact_size<'de, 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Cow<'a, Value>, D::Error> {
    super::yaml::exact_size(d).map(Cow::Owned)
}

#[derive(Serialize, Deserialize)]
struct StoredDiagnostic {
    rule: String,
    severity: Severity,
    document: Option<usize>,
    line: Option<usize>,
    object: Option<ObjectId>,
    message: String,
    help: Option<String>,
}

impl<'a> Session<'a> {
    pub fn new(cache: &'a ParseCache) -> Self {
        Session {
            cache,
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
        }
    }

    /// The key of a file: its bytes' SHA-256 `digest`, its `name`, and when `templated` the
    /// template `values`, for this build.
    pub fn key(
        &self,
        digest: &[u8],
        name: &str,
        templated: bool,
        values: &TemplateValues,
    ) -> String {
        use ring::digest::{Context, SHA256};
        let mut ctx = Context::new(&SHA256);
        let mut add = |bytes: &[u8]| {
            ctx.update(&(bytes.len() as u64).to_le_bytes());
            ctx.update(bytes);
        };
        add(self.cache.build.as_bytes());
        add(digest);
        add(name.as_bytes());
        if templated {
            add(b"templated");
            match &values.release_image {
                Some(image) => {
                    add(b"release image");
                    add(image.as_bytes());
                }
                None => add(b"no release image"),
            }
            add(values.cluster_profile.as_bytes());
            for (name, image) in &values.images {
                add(name.as_bytes());
                add(image.as_bytes());
            }
        }
        hex(ctx.finish().as_ref())
    }

    /// The entry of `key`, its locations in the file at `path`; `None` (a miss) when there is
    /// none or it cannot be used. `rule` gives the known rule of a stored diagnostic.
    pub fn get(
        &self,
        key: &str,
        path: &Path,
        rule: impl Fn(&str) -> Option<&'static str>,
    ) -> Option<Hit> {
        let entry_path = self.cache.entry_path(key);
        match read_entry(&entry_path, key, path, rule) {
            Some((hit, modified)) => {
                touch(&entry_path, modified);
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(hit)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// A hit that could not be used after all (its objects are not manifests): a miss.
    pub fn unusable(&self) {
        self.hits.fetch_sub(1, Ordering::Relaxed);
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Stores what the file at `path` parsed to under `key` (best effort: a cache that cannot
    /// be written is said at debug level). Not stored when anything of it names another file
    /// or the path itself (it would name the wrong file once reused), or a diagnostic's rule is
    /// not `known`.
    pub fn put(
        &self,
        key: &str,
        path: &Path,
        manifests: &[Manifest],
        diagnostics: &[Diagnostic],
        known: impl Fn(&str) -> bool,
    ) {
        let shown = escaped_path(path);
        let elsewhere = manifests.iter().any(|m| m.location.file != path)
            || diagnostics.iter().any(|d| {
                d.location.file != path
                    || !known(d.rule)
                    || d.message.contains(&shown)
                    || d.help.as_ref().is_some_and(|h| h.contains(&shown))
            });
        if elsewhere {
            tracing::debug!(path = %shown, "parse cache: not stored (names a path, or a rule it does not know)");
            return;
        }
        let entry = Entry {
            key: Cow::Borrowed(key),
            manifests: manifests
                .iter()
                .map(|m| StoredManifest {
                    document: m.location.document,
                    line: m.location.line,
                    object: Cow::Borrowed(&m.object),
                })
                .collect(),
            diagnostics: diagnostics.iter().map(StoredDiagnostic::of).collect(),
        };
        match write_entry(&self.cache.dir, &self.cache.entry_path(key), &entry) {
            Ok(()) => {
                self.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => tracing::debug!(path = %shown, error = %e, "parse cache: not stored"),
        }
    }

    /// The counts of this load, said at debug level (target `cvo::release::cache`) when it
    /// looked anything up, after pruning the cache to its bound when entries were written.
    pub fn finish(self) -> CacheCounts {
        let written = self.written.into_inner();
        let removed = if written > 0 {
            prune(self.cache, SystemTime::now())
        } else {
            0
        };
        let counts = CacheCounts {
            hits: self.hits.into_inner(),
            misses: self.misses.into_inner(),
            written,
            removed,
        };
        if counts.hits + counts.misses == 0 {
            // Nothing was looked up (a selection that parsed no file again): nothing to say.
            return counts;
        }
        tracing::debug!(
            hits = counts.hits,
            misses = counts.misses,
            written = counts.written,
            removed = counts.removed,
            dir = %self.cache.dir.display(),
            "parse cache"
        );
        counts
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

impl StoredDiagnostic {
    fn of(d: &Diagnostic) -> Self {
        StoredDiagnostic {
            rule: d.rule.to_owned(),
            severity: d.severity,
            document: d.location.document,
            line: d.location.line,
            object: d.object.clone(),
            message: d.message.clone(),
            help: d.help.clone(),
        }
    }

    /// The diagnostic at its document and line of the file at `path`; `None` for a rule that
    /// is not known.
    fn at(self, path: &Path, rule: &impl Fn(&str) -> Option<&'static str>) -> Option<Diagnostic> {
        Some(Diagnostic {
            rule: rule(&self.rule)?,
            severity: self.severity,
            location: Location {
                file: path.to_path_buf(),
                document: self.document,
                line: self.line,
            },
            object: self.object,
            message: self.message,
            help: self.help,
        })
    }
}

/// The entry at `entry_path` if it holds `key`, with its locations in the file at `path`, and
/// when it was last modified.
fn read_entry(
    entry_path: &Path,
    key: &str,
    path: &Path,
    rule: impl Fn(&str) -> Option<&'static str>,
) -> Option<(Hit, Option<SystemTime>)> {
    let (bytes, metadata) = match read_capped_with_metadata(entry_path, MAX_ENTRY_BYTES) {
        Ok(read) => read,
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return None;
        }
        Err(e) => {
            tracing::debug!(entry = %entry_path.display(), error = %e, "parse cache: entry ignored");
            return None;
        }
    };
    let entry: Entry = match serde_json::from_slice(&bytes) {
        Ok(entry) => entry,
        Err(e) => {
            tracing::debug!(entry = %entry_path.display(), error = %e, "parse cache: entry ignored (does not decode)");
            return None;
        }
    };
    if entry.key != key {
        tracing::debug!(entry = %entry_path.display(), "parse cache: entry ignored (holds another key)");
        return None;
    }
    let at = |document, line| Location {
        file: path.to_path_buf(),
        document,
        line,
    };
    let objects = entry
        .manifests
        .into_iter()
        .map(|m| (at(m.document, m.line), m.object.into_owned()))
        .collect();
    let diagnostics = entry
        .diagnostics
        .into_iter()
        .map(|d| d.at(path, &rule))
        .collect::<Option<Vec<_>>>()?;
    let hit = Hit {
        objects,
        diagnostics,
    };
    Some((hit, metadata.modified().ok()))
}

/// Writes `entry` to a temporary file in `dir`, then renames it to `entry_path`.
fn write_entry(dir: &Path, entry_path: &Path, entry: &Entry) -> std::io::Result<()> {
    // First: a cache directory that cannot be written costs no serializing.
    std::fs::create_dir_all(dir)?;
    let bytes = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(std::io::Error::other(format!(
            "the entry would be {} bytes, more than {MAX_ENTRY_BYTES}",
            bytes.len()
        )));
    }
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    temp.write_all(&bytes)?;
    temp.persist(entry_path).map_err(|e| e.error)?;
    Ok(())
}

/// Refreshes the modification time of the entry at `path`, last `modified` then, when older
/// than [`TOUCH_AFTER`] (best effort).
fn touch(path: &Path, modified: Option<SystemTime>) {
    let now = SystemTime::now();
    let old = modified.is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > TOUCH_AFTER));
    if old {
        let _ = std::fs::File::options()
            .append(true)
            .open(path)
            .and_then(|f| f.set_modified(now));
    }
}

/// Removes the oldest entries while they hold more than the bound together, and temporary
/// files older than [`STALE_TEMP`] (leftovers of killed processes); returns how many entries
/// were removed. One directory listing and one `stat` per entry.
fn prune(cache: &ParseCache, now: SystemTime) -> usize {
    let Ok(listing) = std::fs::read_dir(&cache.dir) else {
        return 0;
    };
    let mut entries = Vec::new();
    let mut total = 0u64;
    for item in listing.flatten() {
        let name = item.file_name();
        let name = name.to_string_lossy();
        let Ok(meta) = item.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if name.starts_with(TEMP_PREFIX) {
            if now
                .duration_since(modified)
                .is_ok_and(|age| age > STALE_TEMP)
            {
                let _ = std::fs::remove_file(item.path());
            }
        } else if name.ends_with(".json") && meta.is_file() {
            total = total.saturating_add(meta.len());
            entries.push((modified, item.path(), meta.len()));
        }
    }
    if total <= cache.max_bytes {
        return 0;
    }
    entries.sort();
    let mut removed = 0;
    for (_, path, len) in entries {
        if total <= cache.max_bytes {
            break;
        }
        // Another process may have removed it first: it is gone all the same.
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
        total = total.saturating_sub(len);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::{LoadOptions, ReadRelease, Release, load, read};

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n";
    /// A ConfigMap with a key written twice: a `duplicate-key` warning at line 5.
    const WARNS: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  name: w\n  namespace: ns\n";

    fn options(cache: &ParseCache) -> LoadOptions {
        LoadOptions {
            cache: Some(cache.clone()),
            ..LoadOptions::default()
        }
    }

    fn read_with(dir: &Path, cache: &ParseCache) -> (ReadRelease, CacheCounts) {
        let read = read(dir, &options(cache)).unwrap();
        let counts = read.cache_counts().unwrap();
        (read, counts)
    }

    fn counts(hits: usize, misses: usize, written: usize) -> CacheCounts {
        CacheCounts {
            hits,
            misses,
            written,
            removed: 0,
        }
    }

    fn entries(cache: &ParseCache) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(cache.dir())
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        out.sort();
        out
    }

    fn as_json(release: &Release) -> Value {
        serde_json::to_value(release).unwrap()
    }

    #[test]
    fn an_unchanged_file_is_not_parsed_again_and_a_changed_one_is() {
        let (release, cache_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cache = ParseCache::new(cache_root.path());
        std::fs::write(release.path().join("0000_10_a_x.yaml"), CM).unwrap();
        std::fs::write(release.path().join("0000_20_b_x.yaml"), WARNS).unwrap();
        assert_eq!(read_with(release.path(), &cache).1, counts(0, 2, 2));
        assert_eq!(entries(&cache).len(), 2);
        assert_eq!(read_with(release.path(), &cache).1, counts(2, 0, 0));
        std::fs::write(
            release.path().join("0000_20_b_x.yaml"),
            CM.replace("a\n", "b\n"),
        )
        .unwrap();
        assert_eq!(read_with(release.path(), &cache).1, counts(1, 1, 1));
        assert_eq!(read_with(release.path(), &cache).1, counts(2, 0, 0));
    }

    #[test]
    fn what_a_hit_loads_is_what_parsing_loads() {
        let (release, cache_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cache = ParseCache::new(cache_root.path());
        let files = [
            ("0000_10_a_ok.yaml", format!("{CM}---\n{}", CM.replace("name: a", "name: a2"))),
            ("0000_10_a_warns.yaml", WARNS.to_owned()),
            ("0000_10_a_twice.yaml", format!("{CM}---\n{CM}")),
            ("0000_10_a_bad.yaml", "kind: [\n".to_owned()),
            ("0000_10_a_list.yaml", "apiVersion: v1\nkind: List\nitems: []\n".to_owned()),
            ("0000_10_a_yaml.json", CM.replace("name: a", "name: j")),
            ("0000_10_a_tmpl.yaml", CM.replace("ns\n", "ns\ndata:\n  i: '{{.ReleaseImage}}'\n")),
            (
                "0000_10_a_ann.yaml",
                CM.replace("ns\n", "ns\n  annotations:\n    release.openshift.io/feature-set: Nope\n    release.openshift.io/delete: \"true\"\n    capability.openshift.io/name: A+B\n"),
            ),
            ("0000_10_a_flt.yaml", CM.replace("ns\n", "ns\ndata: {n: 1.5e300, m: -0.0, i: 18446744073709551615}\n")),
        ];
        for (name, text) in &files {
            std::fs::write(release.path().join(name), text).unwrap();
        }
        let parsed = load(release.path(), &LoadOptions::default()).unwrap();
        assert!(parsed.diagnostics.len() >= 6, "{:?}", parsed.diagnostics);
        let cold = load(release.path(), &options(&cache)).unwrap();
        let (_, warm_counts) = read_with(release.path(), &cache);
        assert_eq!(warm_counts, counts(files.len(), 0, 0));
        let warm = load(release.path(), &options(&cache)).unwrap();
        assert_eq!(as_json(&cold), as_json(&parsed));
        assert_eq!(as_json(&warm), as_json(&parsed));
        assert_eq!(warm.diagnostics, parsed.diagnostics);
    }

    #[test]
    fn the_same_bytes_elsewhere_hit_and_name_the_new_path() {
        let cache_root = tempfile::tempdir().unwrap();
        let cache = ParseCache::new(cache_root.path());
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for dir in [&first, &second] {
            std::fs::write(dir.path().join("0000_10_a_x.yaml"), WARNS).unwrap();
        }
        assert_eq!(read_with(first.path(), &cache).1, counts(0, 1, 1));
        let release = load(second.path(), &options(&cache)).unwrap();
        assert_eq!(read_with(second.path(), &cache).1, counts(1, 0, 0));
        let file = second.path().join("0000_10_a_x.yaml");
        assert_eq!(
            release.manifests[0].location,
            Location {
                file: file.clone(),
                document: Some(0),
                line: Some(1)
            }
        );
        let warning = &release.diagnostics[0];
        assert_eq!(warning.rule, "duplicate-key");
        assert_eq!(
            warning.location,
            Location {
                file,
                document: Some(0),
                line: Some(5)
            }
        );
        let shown = serde_json::to_string(&release).unwrap();
        assert!(
            !shown.contains(&first.path().display().to_string()),
            "{shown}"
        );
    }

    #[test]
    fn a_corrupted_entry_is_ignored_parsed_again_and_rewritten() {
        let (release, cache_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cache = ParseCache::new(cache_root.path());
        std::fs::write(release.path().join("0000_10_a_x.yaml"), WARNS).unwrap();
        std::fs::write(release.path().join("0000_10_b_x.yaml"), CM).unwrap();
        let expected = as_json(&load(release.path(), &LoadOptions::default()).unwrap());
        read_with(release.path(), &cache);
        // `a`: the entry with the warning (a diagnostic to corrupt), `b` the other one.
        let [mut a, mut b] = <[PathBuf; 2]>::try_from(entries(&cache)).unwrap();
        if !std::fs::read_to_string(&a)
            .unwrap()
            .contains("duplicate-key")
        {
            std::mem::swap(&mut a, &mut b);
        }
        let good = std::fs::read(&a).unwrap();
        let other = std::fs::read(&b).unwrap();
        let truncated = good[..good.len() / 2].to_vec();
        // Another entry's content under this entry's name: its key is not this one.
        let wrong_key = other.clone();
        let bad_rule = String::from_utf8(good.clone())
            .unwrap()
            .replace("\"rule\":\"", "\"rule\":\"x");
        for corrupt in [
            b"garbage".to_vec(),
            truncated,
            wrong_key,
            bad_rule.into_bytes(),
            Vec::new(),
        ] {
            std::fs::write(&a, &corrupt).unwrap();
            assert_eq!(read_with(release.path(), &cache).1, counts(1, 1, 1));
            assert_eq!(std::fs::read(&a).unwrap(), good, "rewritten");
            assert_eq!(
                as_json(&load(release.path(), &options(&cache)).unwrap()),
                expected
            );
        }
        // A directory in its place (not a regular file): ignored too.
        std::fs::remove_file(&a).unwrap();
        std::fs::create_dir(&a).unwrap();
        assert_eq!(
            as_json(&load(release.path(), &options(&cache)).unwrap()),
            expected
        );
    }

    #[test]
    fn the_key_holds_the_build_the_name_and_the_template_values() {
        let one = ParseCache::new(Path::new("/c"));
        let session = Session::new(&one);
        let values = TemplateValues {
            cluster_profile: "p".into(),
            ..TemplateValues::default()
        };
        let key = |name: &str, templated: bool, values: &TemplateValues| {
            session.key(&[1; 32], name, templated, values)
        };
        let base = key("a.yaml", false, &values);
        assert_eq!(base.len(), 64);
        assert_eq!(
            base,
            key("a.yaml", false, &TemplateValues::default()),
            "values count only when templated"
        );
        assert_ne!(base, key("a.json", false, &values));
        assert_ne!(base, key("a.yaml", true, &values));
        let other_profile = TemplateValues {
            cluster_profile: "q".into(),
            ..values.clone()
        };
        assert_ne!(
            key("a.yaml", true, &values),
            key("a.yaml", true, &other_profile)
        );
        let image = TemplateValues {
            release_image: Some("i".into()),
            ..values.clone()
        };
        assert_ne!(key("a.yaml", true, &values), key("a.yaml", true, &image));
        assert_ne!(base, session.key(&[2; 32], "a.yaml", false, &values));
        let other_build = ParseCache {
            build: "cvo 9".into(),
            ..one.clone()
        };
        assert_ne!(
            base,
            Session::new(&other_build).key(&[1; 32], "a.yaml", false, &values)
        );
    }

    #[test]
    fn the_bound_drops_the_oldest_entries() {
        let cache_root = tempfile::tempdir().unwrap();
        let cache = ParseCache::new(cache_root.path()).with_max_bytes(250);
        std::fs::create_dir_all(cache.dir()).unwrap();
        let now = SystemTime::now();
        let put = |name: &str, age_secs: u64| {
            let path = cache.dir().join(name);
            std::fs::write(&path, [b'x'; 100]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(now - Duration::from_secs(age_secs))
                .unwrap();
            path
        };
        let oldest = put("a.json", 300);
        let middle = put("b.json", 200);
        let newest = put("c.json", 100);
        let stale_temp = put(".tmp-old", 2 * 3600);
        let fresh_temp = put(".tmp-new", 10);
        assert_eq!(prune(&cache, now), 1);
        assert!(!oldest.exists() && middle.exists() && newest.exists());
        assert!(!stale_temp.exists() && fresh_temp.exists());
        assert_eq!(prune(&cache, now), 0, "within the bound");

        // A load that writes prunes: here, the two old entries left, not the two it wrote.
        let release = tempfile::tempdir().unwrap();
        std::fs::write(release.path().join("0000_10_a_x.yaml"), CM).unwrap();
        std::fs::write(release.path().join("0000_10_b_x.yaml"), WARNS).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let sizes = ParseCache::new(scratch.path());
        read_with(release.path(), &sizes);
        let written: u64 = entries(&sizes)
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        let bounded = ParseCache::new(cache_root.path()).with_max_bytes(written);
        let (_, counts) = read_with(release.path(), &bounded);
        assert_eq!((counts.written, counts.removed), (2, 2));
        assert!(!middle.exists() && !newest.exists());
        assert_eq!(
            entries(&bounded).len(),
            3,
            "the two written and the fresh temporary file"
        );
    }

    #[test]
    fn a_hit_refreshes_an_old_entry() {
        let (release, cache_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cache = ParseCache::new(cache_root.path());
        std::fs::write(release.path().join("0000_10_a_x.yaml"), CM).unwrap();
        read_with(release.path(), &cache);
        let entry = entries(&cache).remove(0);
        let old = SystemTime::now() - 2 * TOUCH_AFTER;
        std::fs::File::options()
            .append(true)
            .open(&entry)
            .unwrap()
            .set_modified(old)
            .unwrap();
        read_with(release.path(), &cache);
        let modified = std::fs::metadata(&entry).unwrap().modified().unwrap();
        assert!(modified > old + TOUCH_AFTER, "refreshed");
    }
}
