//! Command-line flags shared by the commands that talk to a cluster: which kubeconfig and
//! context are used (kubectl's rules), and duration flags.
//!
//! The kubeconfig tests run `cvo plan` (server-side dry-run, writes nothing) against a
//! `cvo dev-apiserver` started for the test, with the kubeconfig split over files the way
//! `KUBECONFIG=a:b` users split theirs.

use crate::common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;

/// `cvo` with a clean environment for kubeconfig lookup (`common::cli`: no KUBECONFIG, no
/// in-cluster variables), and HOME at `home` (so ~/.kube/config is whatever the test puts there).
fn cvo(home: &Path) -> Command {
    let mut cmd = common::cli::cvo();
    cmd.env("HOME", home);
    cmd
}

#[test]
fn too_long_negative_and_unknown_durations_are_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    for (value, message) in [
        ("99999999999999999999h", "too long: at most 100 years"),
        ("101y", "too long: at most 100 years"),
        ("-5s", "cannot be negative"),
        ("5q", "unknown unit \"q\""),
        ("soon", "not a duration"),
    ] {
        for flag in [
            "--stuck-after",
            "--deletion-timeout",
            "--health-timeout",
            "--failing-after",
        ] {
            cvo(home.path())
                .args(["apply", "--release", "unused", "--in-memory", flag, value])
                .assert()
                .code(2)
                .stderr(predicate::str::contains(message))
                .stderr(predicate::str::contains("panicked").not());
        }
    }
}

#[test]
fn an_unknown_wait_mode_is_a_usage_error_naming_the_choices() {
    let home = tempfile::tempdir().unwrap();
    cvo(home.path())
        .args([
            "apply",
            "--release",
            "unused",
            "--in-memory",
            "--wait",
            "forever",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("failures"))
        .stderr(predicate::str::contains("ready"))
        .stderr(predicate::str::contains("none"));
}

/// Kills the server when the test ends, pass or fail.
struct Server {
    child: std::process::Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `cvo dev-apiserver` on a free loopback port, ready (it has written its kubeconfig).
fn dev_apiserver(dir: &Path) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let written = dir.join("dev.kubeconfig");
    let child = common::cli::process()
        .args(["dev-apiserver", "--listen", &addr, "--kubeconfig-out"])
        .arg(&written)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, addr };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !written.exists() {
        assert!(Instant::now() < deadline, "dev-apiserver did not start");
        std::thread::sleep(Duration::from_millis(20)); // poll interval, bounded by the deadline
    }
    server
}

/// One kubeconfig split in two the way users split theirs: `creds` has the clusters and
/// users, `contexts` the contexts and `current-context`. The context `good` points at the dev
/// server; `bad` at a port nothing listens on.
fn split_kubeconfig(dir: &Path, server: &Server) -> (PathBuf, PathBuf) {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let creds = dir.join("creds.yaml");
    std::fs::write(
        &creds,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dev\n  cluster:\n    server: http://{}\n- name: nowhere\n  cluster:\n    server: http://127.0.0.1:{closed}\nusers:\n- name: me\n  user: {{}}\n",
            server.addr
        ),
    )
    .unwrap();
    let contexts = dir.join("contexts.yaml");
    std::fs::write(
        &contexts,
        "apiVersion: v1\nkind: Config\ncontexts:\n- name: good\n  context:\n    cluster: dev\n    user: me\n- name: bad\n  context:\n    cluster: nowhere\n    user: me\ncurrent-context: good\n",
    )
    .unwrap();
    (contexts, creds)
}

fn release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    std::fs::create_dir(&release).unwrap();
    std::fs::write(
        release.join("0000_10_x_ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cvo-kubeconfig-test\n",
    )
    .unwrap();
    release
}

fn list(paths: &[&Path]) -> std::ffi::OsString {
    std::env::join_paths(paths).unwrap()
}

#[test]
fn kubeconfig_list_is_merged_and_context_flag_picks_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = dev_apiserver(dir.path());
    let (contexts, creds) = split_kubeconfig(dir.path(), &server);
    let release = release(dir.path());
    let plan = |cmd: &mut Command| {
        cmd.args(["plan", "--release"]).arg(&release);
    };

    // KUBECONFIG=contexts:creds — the context from one file, its cluster and user from the
    // other (an empty entry is ignored, as kubectl does).
    let merged = list(&[&contexts, Path::new(""), &creds]);
    let mut cmd = cvo(dir.path());
    cmd.env("KUBECONFIG", &merged);
    plan(&mut cmd);
    cmd.assert()
        .code(0)
        .stdout(predicate::str::contains("cvo-kubeconfig-test"));

    // --context picks another context of the merged list: nothing listens there.
    let mut cmd = cvo(dir.path());
    cmd.env("KUBECONFIG", &merged).args(["--context", "bad"]);
    plan(&mut cmd);
    cmd.assert().code(predicate::ne(0));

    // A context that is in no file of the list: a usage error naming the list.
    let mut cmd = cvo(dir.path());
    cmd.env("KUBECONFIG", &merged)
        .args(["--context", "missing"]);
    plan(&mut cmd);
    cmd.assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--context missing: no such context in KUBECONFIG=",
        ))
        .stderr(predicate::str::contains("(it has: good, bad)"));

    // The file that only has clusters and users is not enough on its own.
    let mut cmd = cvo(dir.path());
    cmd.env("KUBECONFIG", &creds);
    plan(&mut cmd);
    cmd.assert().code(2);
}

#[test]
fn kubeconfig_flag_wins_over_the_list_and_home_is_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let server = dev_apiserver(dir.path());
    let (contexts, _) = split_kubeconfig(dir.path(), &server);
    let release = release(dir.path());
    let written = dir.path().join("dev.kubeconfig");

    // --kubeconfig is read alone: the (broken) KUBECONFIG list is not looked at.
    cvo(dir.path())
        .env(
            "KUBECONFIG",
            list(&[&contexts, Path::new("/nonexistent/kubeconfig")]),
        )
        .arg("--kubeconfig")
        .arg(&written)
        .args(["plan", "--release"])
        .arg(&release)
        .assert()
        .code(0);

    // A file of the list that exists but cannot be read is an error that names it.
    let unreadable = dir.path().join("a-directory");
    std::fs::create_dir(&unreadable).unwrap();
    cvo(dir.path())
        .env("KUBECONFIG", list(&[&contexts, &unreadable]))
        .args(["plan", "--release"])
        .arg(&release)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "{}: ",
            unreadable.display()
        )));

    // Without flag and KUBECONFIG: ~/.kube/config.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    std::fs::copy(&written, home.join(".kube/config")).unwrap();
    cvo(&home)
        .args(["plan", "--release"])
        .arg(&release)
        .assert()
        .code(0);
}

/// `KUBECONFIG=missing:good` works as with kubectl (files of the list that do not exist are
/// skipped), on both servers; a list of only missing files is a usage error that says so.
#[tokio::test]
async fn missing_files_in_the_kubeconfig_list_are_skipped_as_kubectl_does() {
    let tc = common::cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let good = tc.kubeconfig_file(dir.path()).await;
    let ns = tc.namespace("kubeconfig-list").await;
    let release = dir.path().join("release");
    std::fs::create_dir(&release).unwrap();
    std::fs::write(
        release.join("0000_10_x_cm.yaml"),
        common::configmap(&ns, "listed", "", &[("a", "b")]),
    )
    .unwrap();
    let home = dir.path().to_owned();
    let run = move |list: std::ffi::OsString| {
        let release = release.clone();
        let home = home.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                cvo(&home)
                    .env("KUBECONFIG", list)
                    .args(["plan", "--release"])
                    .arg(&release)
                    .output()
                    .expect("run cvo")
            })
            .await
            .expect("join")
        }
    };
    let out = run(list(&[Path::new("/nonexistent/kubeconfig"), &good])).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("ConfigMap {ns}/listed")),
        "{stdout}"
    );

    let out = run(list(&[
        Path::new("/nonexistent/a"),
        Path::new("/nonexistent/b"),
    ]))
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "KUBECONFIG=/nonexistent/a:/nonexistent/b: none of these kubeconfig files exists"
        ),
        "{stderr}"
    );
}

#[test]
fn without_any_kubeconfig_and_outside_a_cluster_the_error_says_so() {
    let home = tempfile::tempdir().unwrap();
    let release = release(home.path());
    cvo(home.path())
        .args(["plan", "--release"])
        .arg(&release)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no cluster configuration"));
    cvo(home.path())
        .args(["--context", "prod", "plan", "--release"])
        .arg(&release)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--context prod: no kubeconfig found",
        ));
}
