//! `cvo dev-apiserver`: refuses non-loopback addresses, serves a kubeconfig that another
//! `cvo` process (or kubectl) can use, and the kubectl commands a person types work against it.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use predicates::prelude::*;

#[test]
fn refuses_non_loopback_addresses() {
    common::cli::cvo()
        .args(["dev-apiserver", "--listen", "0.0.0.0:18080"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "refusing to listen on 0.0.0.0:18080",
        ));
}

/// Kills the server when the test ends, pass or fail.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serves_http_on_loopback_and_writes_a_kubeconfig() {
    // A free port: bind, read it, release it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let addr = format!("127.0.0.1:{port}");
    let _server = Child(
        common::cli::process()
            .args(["dev-apiserver", "--listen", &addr, "--kubeconfig-out"])
            .arg(&kubeconfig)
            .spawn()
            .unwrap(),
    );
    // Poll until the server answers /version (deadline, no fixed sleep).
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Ok(mut stream) = TcpStream::connect(&addr) {
            write!(
                stream,
                "GET /version HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "dev-apiserver did not answer on {addr}"
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval, bounded by the deadline
    };
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("\"gitVersion\""), "{body}");
    let config = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        config.contains(&format!("server: http://{addr}")),
        "{config}"
    );
}

/// The kubectl binary on `PATH`, if any.
fn kubectl_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
}

/// `kubectl ARGS` with `kubeconfig` (and `env`), which must succeed; its standard output.
fn kubectl(bin: &Path, kubeconfig: &Path, env: &[(&str, &Path)], args: &[&str]) -> String {
    let out = Command::new(bin)
        .env("KUBECONFIG", kubeconfig)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Starts `cvo dev-apiserver` on a port the kernel picks; returns it and its kubeconfig once
/// written (the server writes it when the port is bound).
fn start_dev_apiserver(dir: &Path) -> (Child, PathBuf) {
    let kubeconfig = dir.join("kubeconfig");
    let server = Child(
        common::cli::process()
            .args([
                "dev-apiserver",
                "--listen",
                "127.0.0.1:0",
                "--kubeconfig-out",
            ])
            .arg(&kubeconfig)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&kubeconfig).is_ok_and(|c| c.contains("current-context")) {
        assert!(
            Instant::now() < deadline,
            "no kubeconfig from dev-apiserver"
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval, bounded by the deadline
    }
    (server, kubeconfig)
}

/// Issue 34 item 7: the commands a person types, with the real kubectl binary. kubectl 1.32+
/// sends `create namespace|configmap` as protobuf and client-go does not fall back to JSON
/// after a 415 (only after CBOR), so these used to fail; patch (strategic merge, merge, JSON),
/// label, annotate, edit (an editor script), get -o yaml, get -w and delete work as on
/// kube-apiserver.
#[test]
#[ignore = "needs kubectl on PATH: run with --include-ignored (.ci/run does)"]
fn kubectl_create_get_patch_edit_watch_delete() {
    let Some(bin) = kubectl_binary() else {
        common::needs::missing(
            "kubectl",
            "install it (the real control plane ../shared/realk8s uses it) or put it on PATH",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, kc) = start_dev_apiserver(dir.path());
    let run = |args: &[&str]| kubectl(&bin, &kc, &[], args);
    assert_eq!(run(&["create", "ns", "foo"]), "namespace/foo created\n");
    assert_eq!(
        run(&[
            "create",
            "configmap",
            "x",
            "--from-literal=a=b",
            "-n",
            "foo"
        ]),
        "configmap/x created\n"
    );
    let listed = run(&["get", "cm", "-n", "foo"]);
    assert!(listed.starts_with("NAME"), "{listed}");
    assert!(listed.lines().any(|l| l.starts_with("x ")), "{listed}");
    let yaml = run(&["get", "cm", "x", "-n", "foo", "-o", "yaml"]);
    assert!(yaml.contains("data:\n  a: b\n"), "{yaml}");
    assert!(yaml.contains("kind: ConfigMap"), "{yaml}");

    for (kind, patch) in [
        ("strategic", r#"{"data":{"c":"d"}}"#),
        ("merge", r#"{"data":{"e":"f"}}"#),
        ("json", r#"[{"op":"add","path":"/data/g","value":"h"}]"#),
    ] {
        let out = run(&["patch", "cm", "x", "-n", "foo", "--type", kind, "-p", patch]);
        assert_eq!(out, "configmap/x patched\n", "--type {kind}");
    }
    assert_eq!(
        run(&["label", "cm", "x", "-n", "foo", "l=1"]),
        "configmap/x labeled\n"
    );
    assert_eq!(
        run(&["annotate", "cm", "x", "-n", "foo", "n=2"]),
        "configmap/x annotated\n"
    );
    let editor = dir.path().join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/a: b/a: edited/' \"$1\"\n").unwrap();
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let edited = kubectl(
        &bin,
        &kc,
        &[("KUBE_EDITOR", &editor)],
        &["edit", "cm", "x", "-n", "foo"],
    );
    assert_eq!(edited, "configmap/x edited\n");
    let all = run(&[
        "get",
        "cm",
        "x",
        "-n",
        "foo",
        "-o",
        "jsonpath={.data} {.metadata.labels.l} {.metadata.annotations.n}",
    ]);
    assert_eq!(all, r#"{"a":"edited","c":"d","e":"f","g":"h"} 1 2"#);

    watch_sees_a_change(&bin, &kc, &run);

    assert_eq!(
        run(&["delete", "cm", "x", "-n", "foo"]),
        "configmap \"x\" deleted\n"
    );
    assert_eq!(run(&["get", "cm", "-n", "foo", "-o", "name"]), "");
}

/// `kubectl get -w` in the background prints a line for a change made meanwhile: its lines
/// are read until the expected one, with a deadline (no sleep).
fn watch_sees_a_change(bin: &Path, kc: &Path, run: &dyn Fn(&[&str]) -> String) {
    let columns = "custom-columns=NAME:.metadata.name,W:.metadata.labels.w";
    let mut watch = Child(
        Command::new(bin)
            .env("KUBECONFIG", kc)
            .args(["get", "cm", "x", "-n", "foo", "-w", "-o", columns])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let stdout = watch.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let next_line = |want: &str| loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.split_whitespace().eq(want.split_whitespace()) => return,
            Ok(_) => {}
            Err(e) => panic!("kubectl get -w printed no line {want:?}: {e}"),
        }
    };
    next_line("x <none>");
    assert_eq!(
        run(&["label", "cm", "x", "-n", "foo", "w=seen"]),
        "configmap/x labeled\n"
    );
    next_line("x seen");
}
