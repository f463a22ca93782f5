//! Visible skips, and the inputs whose absence makes a test skip.
//!
//! A test that cannot run here says so with [`skip`] and returns: never a silent `return`
//! that reads as a pass. `.ci/run` sets `CVO_TEST_SKIP_LOG` and prints the skips at the end.

use std::io::Write;
use std::path::PathBuf;

/// Environment variable naming a file to which every skip appends its line.
pub const SKIP_LOG_ENV: &str = "CVO_TEST_SKIP_LOG";
/// Environment variable naming the shared OpenShift corpus (default: `../shared/corpus`
/// beside the repository).
pub const CORPUS_ENV: &str = "CVO_TEST_CORPUS";

/// Reports that the running test (or a part of it) is skipped: prints
/// `SKIPPED: <test>: <reason>` and appends that line to the file named by
/// `CVO_TEST_SKIP_LOG`, if set. The caller then returns (or leaves the part out).
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => "a test on the main thread".to_owned(),
    };
    skip_named(&test, reason);
}

/// Like [`skip`], for a test whose name is not its thread's (a custom harness's step).
pub fn skip_named(test: &str, reason: &str) {
    let line = format!("SKIPPED: {test}: {reason}");
    println!("{line}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV).filter(|p| !p.is_empty()) {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            // One write of the whole line: lines of tests running at once do not interleave.
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            panic!("{SKIP_LOG_ENV}={}: {e}", PathBuf::from(path).display());
        }
    }
}

/// The directory `sub` of the shared OpenShift corpus (`CVO_TEST_CORPUS`, or
/// `../shared/corpus` beside the repository); when it is absent, [`skip`] says so and this is
/// `None`: the caller returns (or leaves the part out).
pub fn corpus(sub: &str) -> Option<PathBuf> {
    let root = match std::env::var_os(CORPUS_ENV).filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    };
    let dir = root.join(sub);
    if dir.is_dir() {
        Some(dir)
    } else {
        skip(&format!(
            "{} is absent (set {CORPUS_ENV} to the shared corpus, or put it at ../shared/corpus beside the repository)",
            dir.display()
        ));
        None
    }
}
