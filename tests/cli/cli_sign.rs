//! Release signatures as a user meets them, against a real registry (`common::registry`:
//! Debian's docker-registry on loopback; those tests are ignored by default, see
//! `common::needs`) and OCI layouts:
//! `cvo push --sign-key` writes cosign's `sha256-HEX.sig`; `--verify-key` accepts it (any one
//! key suffices) and refuses with exit code 4 — applying nothing — an unsigned release, a
//! signature by another key, a signature moved from another release, and a tampered layer.
//! `--verify-key` on a directory and unreadable key files are usage errors (exit code 2).

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A test-only key file of tests/fixtures/oci/keys.
fn key(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oci/keys")
        .join(name)
        .display()
        .to_string()
}

/// `cvo ARGS…` with an empty Docker config and its own cache: exit code, stdout, stderr.
fn cvo(args: &[&str]) -> (i32, String, String) {
    let docker_config = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = common::cli::cvo()
        .env("DOCKER_CONFIG", docker_config.path())
        .args(args)
        .arg("--cache-dir")
        .arg(cache.path())
        .write_stdin("")
        .output()
        .expect("run cvo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A release of one Namespace `ns` and one ConfigMap in it whose data is `value`.
fn release(ns: &str, value: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let namespace = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels: {{{}: sign}}\n",
        common::TEST_LABEL
    );
    common::write_release(
        dir.path(),
        Some("1.0.0"),
        &[
            ("0000_10_ns.yaml", namespace),
            (
                "0000_20_cm.yaml",
                common::configmap(ns, "settings", "", &[("value", value)]),
            ),
        ],
    );
    dir
}

/// `cvo push --release DIR TARGET [--sign-key KEY]`, which must succeed: the release's digest
/// and the signature line (if signed).
fn push(dir: &Path, target: &str, sign_key: Option<&str>) -> (String, Option<String>) {
    let mut args = vec!["push", "--release", dir.to_str().unwrap(), target];
    if let Some(k) = sign_key {
        args.extend(["--sign-key", k]);
    }
    let (code, stdout, stderr) = cvo(&args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let mut lines = stdout.lines();
    let digest = lines
        .next()
        .and_then(|l| l.rsplit_once('@'))
        .expect("REPO:TAG@sha256:…")
        .1
        .to_owned();
    (digest, lines.next().map(str::to_owned))
}

/// `cvo validate --release SOURCE --verify-key K…`.
fn validate(source: &str, keys: &[&str]) -> (i32, String, String) {
    let mut args = vec!["validate", "--release", source];
    let keys: Vec<String> = keys.iter().map(|k| key(k)).collect();
    for k in &keys {
        args.extend(["--verify-key", k.as_str()]);
    }
    cvo(&args)
}

/// Asserts a refusal (exit code 4) naming `digest` and saying `words`.
fn assert_refused((code, stdout, stderr): (i32, String, String), digest: &str, words: &str) {
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(digest) && stderr.contains(words),
        "{words}: {stderr}"
    );
    assert!(stderr.contains("failed signature verification"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn signed_releases_are_applied_and_others_refused_with_nothing_applied() {
    let registry = common::registry::Registry::start();
    let tc = common::cluster().await;
    // `cvo apply` reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(work.path()).await;
    let ns = common::unique("sign");
    tc.track_namespace(&ns);
    let a = release(&ns, "a");
    let b = release(&ns, "b");
    let (digest_a, signature) = push(
        a.path(),
        &registry.url("cvo/signed", ":a"),
        Some(&key("p256.pem")),
    );
    let sig_tag = format!("sha256-{}.sig", &digest_a[7..]);
    let signature = signature.expect("the signature line");
    assert!(
        signature.starts_with(&format!("{}/cvo/signed:{sig_tag}@sha256:", registry.host())),
        "{signature}"
    );
    let (digest_b, none) = push(b.path(), &registry.url("cvo/signed", ":b"), None);
    assert_eq!(none, None);
    let source_a = registry.url("cvo/signed", &format!("@{digest_a}"));
    let source_b = registry.url("cvo/signed", ":b");

    let apply_with = |source: &str, public_key: &str| {
        let args: Vec<String> = [
            "apply",
            "--release",
            source,
            "--verify-key",
            &key(public_key),
            "--install-timeout",
            "120s",
            "--health-timeout",
            "60s",
            "--cache-dir",
            work.path().join("cache").to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let kubeconfig = kubeconfig.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            common::run_cvo(&kubeconfig, &args).await
        }
    };
    let apply = |source: &str| apply_with(source, "p256.pub");
    let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(tc.client.clone());
    let nothing_applied = || async {
        assert!(
            namespaces.get_opt(&ns).await.expect("get ns").is_none(),
            "a refused release was applied"
        );
    };

    // Unsigned: refused, nothing applied.
    assert_refused(apply(&source_b).await, &digest_b, "not signed");
    nothing_applied().await;
    // Signed by another key.
    assert_refused(
        apply_with(&source_a, "other.pub").await,
        &digest_a,
        "signed by another key",
    );
    nothing_applied().await;
    // A's signature moved to B's signature tag: its payload names A.
    let sig_manifest = registry_manifest(&registry, &signature);
    let moved = cvo::oci::Source::parse(
        &registry.url("cvo/signed", &format!(":sha256-{}.sig", &digest_b[7..])),
    )
    .unwrap()
    .unwrap();
    cvo::oci::push_artifact(&moved, &sig_manifest, &[], &Default::default())
        .await
        .unwrap();
    assert_refused(apply(&source_b).await, &digest_b, "signs another release");
    nothing_applied().await;

    // Signed: verified (any one key suffices), then applied.
    let (code, _, stderr) = validate(&source_a, &["other.pub", "p256.pub"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("verified by {}", key("p256.pub"))),
        "{stderr}"
    );
    let (code, stdout, stderr) = apply(&source_a).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let cms =
        kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(tc.client.clone(), &ns);
    let cm = cms
        .get("settings")
        .await
        .expect("the signed release applied");
    assert_eq!(cm.data.unwrap()["value"], "a");

    // A tampered layer in the registry's storage: refused, nothing changed.
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(registry.blob_file(&digest_b)).unwrap()).unwrap();
    let layer = registry.blob_file(manifest["layers"][0]["digest"].as_str().unwrap());
    // B signed properly now, so only the tampering is left to refuse.
    let (_, resigned) = push(b.path(), &source_b, Some(&key("p256.pem")));
    assert!(resigned.is_some());
    let mut bytes = std::fs::read(&layer).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&layer, bytes).unwrap();
    assert_refused(apply(&source_b).await, &digest_b, "content was changed");
    let cm = cms.get("settings").await.expect("get cm");
    assert_eq!(cm.data.unwrap()["value"], "a");

    let cvs = tc.dynamic(&common::openshift_kind(&tc, "ClusterVersion").await, None);
    if cvs.get_opt("version").await.expect("get cv").is_some() {
        cvs.delete("version", &Default::default())
            .await
            .expect("delete cv");
        common::wait_gone(&tc, &cvs, "version", "ClusterVersion version").await;
    }
    drop(registry);
}

/// The manifest bytes a `REPO:TAG@sha256:…` line names, from the registry's storage.
fn registry_manifest(registry: &common::registry::Registry, line: &str) -> Vec<u8> {
    let digest = line.rsplit_once('@').expect("…@sha256:…").1;
    std::fs::read(registry.blob_file(digest)).unwrap()
}

#[test]
fn signed_oci_layouts_verify_and_others_are_refused() {
    let layout = tempfile::tempdir().unwrap();
    let a = release("sign-layout", "a");
    let b = release("sign-layout", "b");
    let target_a = format!("oci-layout:{}:a", layout.path().display());
    let target_b = format!("oci-layout:{}:b", layout.path().display());
    let (digest_a, signature) = push(a.path(), &target_a, Some(&key("p256.pem")));
    assert!(
        signature
            .as_deref()
            .is_some_and(|s| s.contains(&format!(":sha256-{}.sig@sha256:", &digest_a[7..]))),
        "{signature:?}"
    );
    let (digest_b, _) = push(b.path(), &target_b, None);
    let (code, _, stderr) = validate(&target_a, &["p256.pub"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("verified by"), "{stderr}");
    assert_refused(
        validate(&target_a, &["other.pub"]),
        &digest_a,
        "signed by another key",
    );
    assert_refused(validate(&target_b, &["p256.pub"]), &digest_b, "not signed");
    // JSON output names the signature.
    let (code, stdout, stderr) = cvo(&[
        "push",
        "--release",
        b.path().to_str().unwrap(),
        &target_b,
        "--sign-key",
        &key("other.pem"),
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        json["signature"]
            .as_str()
            .is_some_and(|s| s.contains(".sig@sha256:")),
        "{json}"
    );
    let (code, _, stderr) = validate(&target_b, &["other.pub"]);
    assert_eq!(code, 0, "{stderr}");
    // A tampered layer blob in the layout.
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(layout.path().join("blobs/sha256").join(&digest_a[7..])).unwrap(),
    )
    .unwrap();
    let layer: PathBuf = layout
        .path()
        .join("blobs/sha256")
        .join(&manifest["layers"][0]["digest"].as_str().unwrap()[7..]);
    let mut bytes = std::fs::read(&layer).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&layer, bytes).unwrap();
    assert_refused(
        validate(&target_a, &["p256.pub"]),
        &digest_a,
        "content was changed",
    );
}

#[test]
fn wrong_keys_and_verify_key_on_a_directory_are_usage_errors() {
    let dir = release("sign-usage", "a");
    let path = dir.path().to_str().unwrap();
    let (code, _, stderr) = validate(path, &["p256.pub"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("is a directory, which has no digest or signature to verify"),
        "{stderr}"
    );
    let layout = tempfile::tempdir().unwrap();
    let target = format!("oci-layout:{}:a", layout.path().display());
    for (file, words) in [
        ("rsa.pem", "is an RSA key"),
        ("p384.pem", "is an ECDSA P-384 key"),
        ("encrypted.pem", "is encrypted"),
    ] {
        let (code, _, stderr) =
            cvo(&["push", "--release", path, &target, "--sign-key", &key(file)]);
        assert_eq!(code, 2, "{file}: {stderr}");
        assert!(stderr.contains(words), "{file}: {stderr}");
        assert!(!stderr.contains("BEGIN"), "{stderr}");
    }
    // Nothing was pushed with a key that cannot sign.
    assert!(!layout.path().join("index.json").exists());
    push(dir.path(), &target, None);
    let (code, _, stderr) = validate(&target, &["rsa.pub"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is an RSA key"), "{stderr}");
}

#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn mirroring_into_a_layout_keeps_the_digest_and_the_signature() {
    let registry = common::registry::Registry::start();
    let a = release("sign-mirror", "a");
    let b = release("sign-mirror", "b");
    let (digest, signature) = push(
        a.path(),
        &registry.url("cvo/mirror", ":a"),
        Some(&key("p256.pem")),
    );
    let (digest_b, _) = push(b.path(), &registry.url("cvo/mirror", ":b"), None);
    let layout = tempfile::tempdir().unwrap();
    let target = format!("oci-layout:{}:a", layout.path().display());
    let source = registry.url("cvo/mirror", &format!("@{digest}"));
    let (code, stdout, stderr) = cvo(&[
        "push",
        "--release",
        &source,
        &target,
        "--verify-key",
        &key("p256.pub"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(format!("{target}@{digest}").as_str()));
    // The signature manifest copied unchanged: the same digest.
    let sig_digest = signature.unwrap().rsplit_once('@').unwrap().1.to_owned();
    assert!(
        lines
            .next()
            .is_some_and(|l| l.ends_with(&format!("@{sig_digest}"))),
        "{stdout}"
    );
    // The air-gapped side verifies it with the same key.
    let (code, _, stderr) = validate(&target, &["p256.pub"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&digest) && stderr.contains("verified by"),
        "{stderr}"
    );
    // An unsigned release is not mirrored under --verify-key.
    let target_b = format!("oci-layout:{}:b", layout.path().display());
    let (code, _, stderr) = cvo(&[
        "push",
        "--release",
        &registry.url("cvo/mirror", ":b"),
        &target_b,
        "--verify-key",
        &key("p256.pub"),
    ]);
    assert_refused((code, String::new(), stderr), &digest_b, "not signed");
    let index = std::fs::read_to_string(layout.path().join("index.json")).unwrap();
    assert!(!index.contains(&digest_b[7..]), "{index}");
}
