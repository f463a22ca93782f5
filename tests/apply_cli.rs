//! `cvo apply` / `cvo plan` as a user runs them: exit codes, JSON shape, kubeconfig. The
//! binary talks over HTTP to an in-memory API server served on loopback.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use assert_cmd::Command;
use cvo::cluster::memory::{Config, MemoryServer, kubeconfig_yaml, serve};
use serde_json::Value;

struct Served {
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
    server: MemoryServer,
}

async fn served() -> Served {
    let server = MemoryServer::start(Config::default());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    tokio::spawn(serve(server.clone(), addr));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_yaml(addr)).expect("kubeconfig");
    // Wait for the listener.
    common::poll_until(
        "server listening",
        std::time::Duration::from_secs(10),
        || async {
            tokio::net::TcpStream::connect(addr)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await;
    Served {
        _dir: dir,
        kubeconfig,
        server,
    }
}

async fn cvo(kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    let kubeconfig = kubeconfig.to_owned();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = Command::cargo_bin("cvo")
            .expect("binary")
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .output()
            .expect("run cvo");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    })
    .await
    .expect("join")
}

fn release(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("release-metadata"),
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.0.0"}"#,
    )
    .expect("write");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    dir
}

const NS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cli\n";
const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: cli\ndata:\n  a: b\n";
const HELD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: cli\n  finalizers: [cvo-test.example.com/hold]\n";
const DELETE_HELD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: cli\n  annotations:\n    release.openshift.io/delete: \"true\"\n";
const BAD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: cli\n  annotations:\n    release.openshift.io/delete: \"false\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_json_report() {
    let s = served().await;
    let path = |d: &tempfile::TempDir| d.path().display().to_string();

    // 2: unreadable input.
    let (code, _) = cvo(
        &s.kubeconfig,
        &["apply", "--release", "/nonexistent/release"],
    )
    .await;
    assert_eq!(code, 2);

    // 0: everything applied; JSON shape of DESIGN.md §2.
    let first = release(&[
        ("0000_10_a_ns.yaml", NS),
        ("0000_20_a_cm.yaml", CM),
        ("0000_20_b_held.yaml", HELD),
    ]);
    let (code, out) = cvo(
        &s.kubeconfig,
        &["apply", "--release", &path(&first), "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["release"]["version"], "1.0.0");
    assert_eq!(report["summary"]["total"], 3);
    assert_eq!(report["summary"]["created"], 3);
    for key in [
        "updated",
        "unchanged",
        "deleted",
        "deletionInProgress",
        "alreadyAbsent",
        "skipped",
        "failed",
    ] {
        assert_eq!(report["summary"][key], 0, "{key}");
    }
    let r = &report["results"][1];
    for key in [
        "file",
        "document",
        "kind",
        "apiVersion",
        "namespace",
        "name",
        "action",
        "error",
    ] {
        assert!(r.get(key).is_some(), "result lacks {key}: {r}");
    }
    assert_eq!(
        (r["kind"].as_str(), r["name"].as_str(), r["action"].as_str()),
        (Some("ConfigMap"), Some("settings"), Some("created"))
    );
    let types: Vec<_> = report["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| c["type"].clone())
        .collect();
    assert_eq!(
        types,
        ["Available", "Progressing", "Failing", "Upgradeable"]
    );

    // plan: a changed ConfigMap is an update with a field diff; nothing is written.
    let rv = s.server.resource_version();
    let changed = release(&[
        ("0000_10_a_ns.yaml", NS),
        ("0000_20_a_cm.yaml", &CM.replace("a: b", "a: c")),
    ]);
    let (code, out) = cvo(
        &s.kubeconfig,
        &["plan", "--release", &path(&changed), "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let plan: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(plan["results"][1]["action"], "updated");
    assert_eq!(plan["results"][1]["changes"][0]["path"], "/data/a");
    assert_eq!(s.server.resource_version(), rv, "plan wrote something");

    // 3: a deletion held by a finalizer.
    let deleting = release(&[
        ("0000_10_a_ns.yaml", NS),
        ("0000_20_b_held.yaml", DELETE_HELD),
    ]);
    let (code, out) = cvo(&s.kubeconfig, &["apply", "--release", &path(&deleting)]).await;
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("Upgradeable=False ResourceDeletionInProgress"),
        "{out}"
    );
    let (code, out) = cvo(
        &s.kubeconfig,
        &[
            "apply",
            "--release",
            &path(&deleting),
            "--stuck-after",
            "0s",
        ],
    )
    .await;
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("ResourceDeletionStuck")
            && out.contains("ConfigMap cli/held (finalizers: cvo-test.example.com/hold)"),
        "{out}"
    );

    // 1: a manifest failed.
    let bad = release(&[("0000_10_a_ns.yaml", NS), ("0000_20_c_bad.yaml", BAD)]);
    let (code, out) = cvo(&s.kubeconfig, &["apply", "--release", &path(&bad)]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("release.openshift.io/delete must be exactly"),
        "{out}"
    );
}

#[test]
fn in_memory_quickstart_shows_the_stuck_deletion() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
    let out = Command::cargo_bin("cvo")
        .expect("binary")
        .args([
            "apply",
            "--in-memory",
            "--stuck-after",
            "0s",
            "-o",
            "json",
            "--release",
        ])
        .arg(&manifests)
        .output()
        .expect("run");
    // The seeded legacy Widget keeps a finalizer nothing removes: exit 3.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["deletionInProgress"], 1);
    let upgradeable = report["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Upgradeable"))
        .expect("Upgradeable");
    assert_eq!(upgradeable["reason"], "ResourceDeletionStuck");
    assert!(
        upgradeable["message"]
            .as_str()
            .is_some_and(|m| m
                .contains("Widget widget-operator/legacy (finalizers: example.com/never-removed)")),
        "{upgradeable}"
    );
}
