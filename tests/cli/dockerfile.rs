//! The Dockerfile, checked without a container engine (none runs on the machines that test
//! this repository; `docker build` itself is never run here):
//!
//! - every path the build stage copies exists, and those paths alone are a build context cargo
//!   accepts for `cargo build --release --locked` (in a directory holding only them, up to
//!   target selection: a target declared in Cargo.toml but not copied, or a stale lock file,
//!   would break `docker build`);
//! - the image's command (`ENTRYPOINT` + `CMD`) is a working `cvo` invocation: run with the
//!   release the image bakes in at `/release` (its `COPY` source), against the embedded
//!   in-memory server (`--in-memory`), it completes a pass and stops on SIGTERM with exit 0;
//! - the runtime user is numeric (a pod's `runAsNonRoot` can only check a number).

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::dockerfile::{ROOT, context_copies, exec_form, runtime_stage, stages};

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read_dir") {
            let entry = entry.expect("entry");
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).expect("copy");
    }
}

#[test]
fn the_build_stage_context_is_complete() {
    let context = tempfile::tempdir().expect("tempdir");
    let mut copied = 0;
    for (sources, _) in context_copies(&stages()[0]) {
        for source in sources {
            let path = Path::new(ROOT).join(&source);
            assert!(
                path.exists(),
                "the Dockerfile copies {source}, which does not exist"
            );
            copy_tree(&path, &context.path().join(&source));
            copied += 1;
        }
    }
    assert!(copied >= 3, "no build-stage COPY found");
    // `docker build` runs `cargo build --release --locked`. Asked for a binary that does not
    // exist, cargo parses the manifest (every declared target must be there), checks the lock
    // file and resolves offline, then stops before compiling anything.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .current_dir(context.path())
        .args(["build", "--release", "--locked", "--offline"])
        .args(["--bin", "no-such-binary-dockerfile-check"])
        .env("CARGO_TARGET_DIR", context.path().join("target"))
        .output()
        .expect("run cargo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no bin target named `no-such-binary-dockerfile-check`"),
        "cargo does not accept the build context the Dockerfile copies:\n{stderr}"
    );
}

#[test]
fn the_runtime_user_is_numeric() {
    let (_, user) = runtime_stage()
        .into_iter()
        .rfind(|(k, _)| k == "USER")
        .expect("a USER instruction");
    let uid = user.split(':').next().unwrap_or_default();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER {user}: not a non-root number"
    );
}

/// Where the image's `/release` comes from in this repository.
fn baked_release() -> PathBuf {
    let (sources, _) = context_copies(&runtime_stage())
        .into_iter()
        .find(|(_, dest)| dest == "/release")
        .expect("a COPY of the release to /release");
    Path::new(ROOT).join(&sources[0])
}

#[tokio::test]
async fn the_image_command_runs_the_operator_on_the_baked_release() {
    let entrypoint = exec_form("ENTRYPOINT");
    assert_eq!(entrypoint, ["cvo"], "the entrypoint is the cvo binary");
    let release = baked_release();
    let args: Vec<String> = exec_form("CMD")
        .into_iter()
        .map(|a| {
            if a == "/release" {
                release.display().to_string()
            } else {
                a
            }
        })
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("operator"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let log = tempfile::NamedTempFile::new().expect("log");
    let child = common::cli::process()
        .args(&args)
        .args([
            "--in-memory",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().expect("log file"))
        .spawn()
        .expect("start the image's command");
    let mut running = Running(Some(child), log.path().to_owned());
    let process = std::cell::RefCell::new(&mut running);
    common::poll_until("an applied pass", Duration::from_secs(120), || async {
        let exited = process
            .borrow_mut()
            .0
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            panic!("the image's command exited: {status}");
        }
        let (_, text) = common::http_get(port, "/metrics").await?;
        text.lines()
            .any(|l| l.starts_with("cvo_sync_passes_total{") && l.contains("result=\"applied\""))
            .then_some(())
            .ok_or(text)
    })
    .await;
    let mut child = running.0.take().expect("running");
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(stopped.success());
    let status = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .expect("join");
    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}\nlog:\n{text}"
    );
}

/// The operator process: killed when dropped, its log printed when the test failed.
struct Running(Option<std::process::Child>, PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.1).unwrap_or_default();
            eprintln!("--- operator log ---\n{log}");
        }
    }
}
