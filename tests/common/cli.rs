//! The `cvo` binary as the tests run it: one builder, one documented environment.
//!
//! Every `cvo` a test starts goes through [`cvo`] (for `assert_cmd` assertions) or [`process`]
//! (to spawn and signal it), so that the environment of the developer or of CI never changes
//! what a test sees: the variables in [`SCRUBBED_ENV`] are removed. A test that wants one of
//! them sets it explicitly after the builder.

/// Removed from the environment of every `cvo` a test runs:
/// - `KUBECONFIG`: the cluster is only ever named by `--kubeconfig` (or a test's own `HOME`);
/// - `KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT`: never "running in a pod's cluster";
/// - `POD_NAME`, `POD_NAMESPACE`: not in a pod (the image the operator runs is
///   `--release-image`'s);
/// - `CVO_LOG`: the default log filter (tests that read the log set their own);
/// - `NO_COLOR`: the default output style.
pub const SCRUBBED_ENV: [&str; 7] = [
    "KUBECONFIG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "POD_NAME",
    "POD_NAMESPACE",
    "CVO_LOG",
    "NO_COLOR",
];

/// `XDG_CACHE_HOME` of every `cvo` a test runs: the default `--cache-dir` (OCI blobs, parsed
/// files) is then under the build's temporary directory, never the developer's ~/.cache.
pub const CACHE_HOME: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/xdg-cache");

/// The path of the `cvo` binary cargo built for these tests.
pub fn binary() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_cvo"))
}

/// `cvo`, for `assert_cmd` (`.assert()`, `.output()`, `.write_stdin()`), with [`SCRUBBED_ENV`]
/// removed.
pub fn cvo() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(binary());
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CACHE_HOME", CACHE_HOME);
    cmd
}

/// `cvo` as a process to spawn (and signal, or kill), with [`SCRUBBED_ENV`] removed.
pub fn process() -> std::process::Command {
    let mut cmd = std::process::Command::new(binary());
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CACHE_HOME", CACHE_HOME);
    cmd
}

/// Runs `cmd`, which must succeed, and returns its standard output.
pub fn stdout(cmd: &mut assert_cmd::Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("UTF-8 output")
}
