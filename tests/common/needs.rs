//! What a test needs that a plain `cargo test` may not have, and how a test says so.
//!
//! Some tests need something that may or may not be on the machine: a real control plane,
//! Debian's `docker-registry`, Graphviz `dot`, the Python virtualenv of the CI tests, the shared
//! OpenShift corpus. Whether it is there cannot be known when the test is compiled, so such a
//! test is marked `#[ignore = "needs …: run with --include-ignored (.ci/run does)"]`: a plain
//! `cargo test` reports it as *ignored*, with that reason, and never as passed. Run with
//! `--include-ignored` (or by name with `--ignored`) where the thing is missing, the test
//! fails through [`missing`], saying what is missing and how to get it: never a pass.
//!
//! A tool nearly every machine has (`python3`, `openssl`) is not a reason to ignore a test:
//! the test runs, and fails through [`missing`] where the tool is absent.

use std::path::PathBuf;

/// Environment variable naming the shared OpenShift corpus (default: `../shared/corpus`
/// beside the repository).
pub const CORPUS_ENV: &str = "CVO_TEST_CORPUS";

/// Fails the running test: it needs `what`, which is not here; `how` says how to get it.
#[track_caller]
pub fn missing(what: &str, how: &str) -> ! {
    panic!(
        "this test needs {what}, which is missing here: {how}. (Without it the test cannot run: \
         it is ignored by default, and run with --include-ignored it fails rather than pass.)"
    )
}

/// The directory `sub` of the shared OpenShift corpus (`CVO_TEST_CORPUS`, or
/// `../shared/corpus` beside the repository); the test fails ([`missing`]) without it. Tests
/// that read it are `#[ignore = "needs the shared OpenShift corpus …"]`.
#[track_caller]
pub fn corpus(sub: &str) -> PathBuf {
    let root = match std::env::var_os(CORPUS_ENV).filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    };
    let dir = root.join(sub);
    if !dir.is_dir() {
        missing(
            &format!("the shared OpenShift corpus ({} is absent)", dir.display()),
            &format!(
                "set {CORPUS_ENV} to the shared corpus, or put it at ../shared/corpus beside the repository"
            ),
        );
    }
    dir
}

/// Fails the running test unless `tc` is a real cluster (`CVO_TEST_KUBECONFIG`): for a test
/// marked `#[ignore = "needs a real cluster …"]`, which checks what only a real API server
/// does (`why`).
#[track_caller]
pub fn real_cluster(tc: &super::TestCluster, why: &str) {
    if tc.is_memory() {
        missing(
            &format!("a real cluster ({why})"),
            &format!(
                "set {}=$KUBECONFIG after eval \"$(../shared/realk8s/start.sh)\"",
                super::KUBECONFIG_ENV
            ),
        );
    }
}
