//! Releases as OCI artifacts against a real registry (`common::registry`: Debian's
//! docker-registry on loopback; ignored by default, see `common::needs`): `cvo push` is
//! reproducible,
//! `validate`/`graph` read `oci://…:TAG`, `oci://…@sha256:…` and `oci-layout:` exactly as the
//! directory, a tag moved after resolution changes nothing under a digest pin, a tampered
//! blob and hostile tars are refused by name, and `cvo apply --release oci://…@sha256:…`
//! gives the objects of the directory run on the test cluster.

use crate::common;

use std::path::Path;

use serde_json::Value;

/// `cvo ARGS…` with its own Docker config (none: anonymous) and cache: exit code, stdout,
/// stderr.
fn cvo(env: &Env, args: &[&str]) -> (i32, String, String) {
    let out = common::cli::cvo()
        .env("DOCKER_CONFIG", env.docker_config.path())
        .args(args)
        .arg("--cache-dir")
        .arg(env.cache.path())
        .output()
        .expect("run cvo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Env {
    docker_config: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            docker_config: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
        }
    }
}

fn example() -> String {
    common::example::dir().display().to_string()
}

/// Pushes `dir` to `target`, which must succeed; the digest printed (`…@sha256:…`).
fn push(env: &Env, dir: &str, target: &str) -> String {
    let (code, stdout, stderr) = cvo(env, &["push", "--release", dir, target]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let line = stdout.trim();
    let (pushed, digest) = line.rsplit_once('@').expect("REPO:TAG@sha256:…");
    assert_eq!(
        format!("oci://{pushed}"),
        target.replace("oci-layout:oci-layout:", "oci-layout:"),
        "{line}"
    );
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{line}"
    );
    digest.to_owned()
}

/// `cvo graph --release SOURCE`'s output, which must succeed.
fn graph(env: &Env, source: &str) -> String {
    let (code, stdout, stderr) = cvo(env, &["graph", "--release", source]);
    assert_eq!(code, 0, "{source}: {stderr}");
    stdout
}

/// The files of an OCI release are named inside the artifact (`0000_….yaml`), never in the
/// temporary directory it was extracted to, which is gone once the command ends: validate's
/// text, JSON and SARIF, and apply's JSON report.
#[test]
fn files_of_an_oci_release_are_named_inside_the_artifact() {
    let env = Env::new();
    let release =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/validate/dropped-field/bad");
    let layout = tempfile::tempdir().unwrap();
    let source = format!("oci-layout:{}:1", layout.path().display());
    let (code, _, stderr) = cvo(
        &env,
        &["push", "--release", release.to_str().unwrap(), &source],
    );
    assert_eq!(code, 0, "{stderr}");
    let file = "0000_50_app_00_binding.yaml";
    let cache = env.cache.path().display().to_string();
    let (code, text, _) = cvo(&env, &["validate", "--release", &source]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("--> {file}:1 (document 0)")),
        "{text}"
    );
    for format in ["json", "sarif"] {
        let (_, out, _) = cvo(
            &env,
            &["validate", "--release", &source, "--format", format],
        );
        assert!(out.contains(&format!("\"{file}\"")), "{out}");
        assert!(!out.contains(&cache), "{out}");
    }
    let (code, out, stderr) = cvo(
        &env,
        &["apply", "--in-memory", "--release", &source, "-o", "json"],
    );
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["results"][0]["file"], file, "{report:#}");
    assert!(!stderr.contains(&cache), "{stderr}");
}

#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn push_is_reproducible_and_every_source_reads_like_the_directory() {
    let registry = common::registry::Registry::start();
    let env = Env::new();
    let target = registry.url("cvo/example", ":1.4.0");
    let first = push(&env, &example(), &target);
    // Another run, another cache: the same digest.
    let again = push(&Env::new(), &example(), &target);
    assert_eq!(first, again);
    // -o json.
    let (code, stdout, _) = cvo(
        &env,
        &["push", "--release", &example(), &target, "-o", "json"],
    );
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "repository": format!("{}/cvo/example", registry.host()),
            "tag": "1.4.0",
            "digest": first,
        })
    );

    let directory = graph(&env, &example());
    let pinned = registry.url("cvo/example", &format!("@{first}"));
    for source in [target.clone(), pinned.clone()] {
        assert_eq!(graph(&env, &source), directory, "{source}");
        let (code, validated, stderr) = cvo(&env, &["validate", "--release", &source]);
        let (_, validated_dir, _) = cvo(&env, &["validate", "--release", &example()]);
        assert_eq!((code, &validated), (0, &validated_dir), "{stderr}");
        // Where it came from: the digest and the tag.
        assert!(stderr.contains(&format!("is {first}")), "{stderr}");
    }
    let (_, _, stderr) = cvo(&env, &["graph", "--release", &target]);
    assert!(stderr.contains("(tag 1.4.0)"), "{stderr}");

    // An OCI layout written by the library reads back the same, with the same digest.
    let layout = tempfile::tempdir().unwrap();
    let layout_target = format!("oci-layout:{}:1.4.0", layout.path().display());
    let (code, stdout, stderr) = cvo(&env, &["push", "--release", &example(), &layout_target]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), format!("{layout_target}@{first}"));
    assert_eq!(graph(&env, &layout_target), directory);
    assert_eq!(
        graph(
            &env,
            &format!("oci-layout:{}@{first}", layout.path().display())
        ),
        directory
    );
}

#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn a_tag_moved_after_resolution_changes_nothing_under_the_digest() {
    let registry = common::registry::Registry::start();
    let env = Env::new();
    let target = registry.url("cvo/moving", ":stable");
    let first = push(&env, &example(), &target);
    let pinned = registry.url("cvo/moving", &format!(":stable@{first}"));
    let before = graph(&env, &pinned);
    // Another release pushed to the same tag.
    let other = tempfile::tempdir().unwrap();
    common::write_release(
        other.path(),
        Some("2.0.0"),
        &[(
            "0000_10_x_cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moved\n  namespace: default\n"
                .to_owned(),
        )],
    );
    let second = push(&env, &other.path().display().to_string(), &target);
    assert_ne!(first, second);
    // The tag now gives the other release; the pin still the first, also with a cold cache.
    assert_eq!(
        graph(&env, &target),
        graph(&env, &other.path().display().to_string())
    );
    assert_eq!(graph(&env, &pinned), before);
    assert_eq!(graph(&Env::new(), &pinned), before);
    assert_eq!(before, graph(&env, &example()));
}

#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn a_tampered_blob_is_refused_and_a_corrupted_cache_is_fetched_again() {
    let registry = common::registry::Registry::start();
    let env = Env::new();
    let target = registry.url("cvo/tamper", ":1");
    let digest = push(&env, &example(), &target);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(registry.blob_file(&digest)).unwrap()).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().to_owned();
    // A warm cache first.
    graph(&env, &target);
    let blob = registry.blob_file(&layer);
    let good = std::fs::read(&blob).unwrap();
    let mut bad = good.clone();
    bad[100] ^= 0xff;
    std::fs::write(&blob, &bad).unwrap();
    let (code, _, stderr) = cvo(&Env::new(), &["validate", "--release", &target]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&layer) && stderr.contains("does not match its digest"),
        "{stderr}"
    );
    // The cache holds the good copy, verified before use: still fine.
    assert_eq!(graph(&env, &target), graph(&env, &example()));
    // A corrupted cache entry is fetched again (here: the tampered blob, refused).
    let cached = env.cache.path().join("blobs/sha256").join(&layer[7..]);
    std::fs::write(&cached, b"corrupt").unwrap();
    let (code, _, stderr) = cvo(&env, &["validate", "--release", &target]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cached blob") && stderr.contains("fetching"),
        "{stderr}"
    );
    std::fs::write(&blob, &good).unwrap();
    let (code, _, stderr) = cvo(&env, &["validate", "--release", &target]);
    assert_eq!(code, 0, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn hostile_tars_and_foreign_artifacts_are_refused_by_name() {
    use tar::EntryType as T;
    let registry = common::registry::Registry::start();
    let env = Env::new();
    let access = cvo::oci::Access::default();
    let cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n";
    for (tag, entry, kind, why) in [
        ("dotdot", "../x", T::Regular, "'..' component"),
        ("symlink", "link.yaml", T::Symlink, "symbolic link"),
        ("absolute", "/etc/x", T::Regular, "absolute path"),
    ] {
        let layer = cvo::oci::extract::raw_layer(&[
            ("0000_10_a_cm.yaml", T::Regular, cm),
            (entry, kind, b""),
        ]);
        let (manifest, _) = cvo::oci::shape::cvo_manifest(&layer);
        let target = cvo::oci::Source::parse(&registry.url("cvo/hostile", &format!(":{tag}")))
            .unwrap()
            .unwrap();
        cvo::oci::push_artifact(&target, &manifest, &[&layer, b"{}"], &access)
            .await
            .expect("push by hand");
        let (code, _, stderr) = tokio::task::block_in_place(|| {
            cvo(&env, &["validate", "--release", &target.to_string()])
        });
        assert_eq!(code, 1, "{tag}: {stderr}");
        assert!(
            stderr.contains(&format!("{entry:?}")) && stderr.contains(why),
            "{tag}: {stderr}"
        );
        // Nothing was written outside the extraction directory.
        assert!(!env.cache.path().join("extract/x").exists());
    }
    // An artifact of another kind: refused, naming its media types.
    let config = br#"{"architecture":"amd64","os":"linux"}"#;
    let layer = cvo::oci::extract::raw_layer(&[("a.yaml", T::Regular, cm)]);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cvo::oci::Digest::of(config).to_string(), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": cvo::oci::Digest::of(&layer).to_string(), "size": layer.len()}]
    })
    .to_string();
    let target = cvo::oci::Source::parse(&registry.url("cvo/image", ":1"))
        .unwrap()
        .unwrap();
    cvo::oci::push_artifact(&target, manifest.as_bytes(), &[&layer, config], &access)
        .await
        .expect("push by hand");
    let (code, _, stderr) =
        tokio::task::block_in_place(|| cvo(&env, &["graph", "--release", &target.to_string()]));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("not a release artifact")
            && stderr.contains("application/vnd.oci.image.config.v1+json"),
        "{stderr}"
    );
}

#[test]
fn a_registry_that_is_down_is_named() {
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let source = format!("oci://127.0.0.1:{port}/cvo/example:1");
    let (code, _, stderr) = cvo(&env, &["validate", "--release", &source]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("cannot reach the registry 127.0.0.1:{port}")),
        "{stderr}"
    );
    // A non-loopback host is HTTPS-only unless named by --insecure-registry (not reached:
    // the reference is refused before anything when written wrong).
    let (code, _, stderr) = cvo(&env, &["validate", "--release", "oci://host/Repo:1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a repository name"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn apply_from_a_digest_gives_the_objects_of_the_directory_run() {
    let registry = common::registry::Registry::start();
    let env = Env::new();
    let tc = common::cluster().await;
    let (_cv_turn, cv_resource) = common::cluster_version(&tc).await;
    common::example::prepare(&tc).await;
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(work.path()).await;
    let digest = push(&env, &example(), &registry.url("cvo/example", ":1.4.0"));
    let image = format!("{}/cvo/example@{digest}", registry.host());
    let apply = |source: String, extra: Vec<String>| {
        let kubeconfig = kubeconfig.clone();
        let cache = env.cache.path().to_owned();
        let docker_config = env.docker_config.path().to_owned();
        async move {
            tokio::task::spawn_blocking(move || {
                let out = common::cli::cvo()
                    .env("DOCKER_CONFIG", &docker_config)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["apply", "--release", &source, "-o", "json"])
                    .args(["--install-timeout", "120s", "--health-timeout", "60s"])
                    .arg("--cache-dir")
                    .arg(&cache)
                    .args(&extra)
                    .write_stdin("")
                    .output()
                    .expect("run cvo");
                let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
                let report: Value = serde_json::from_str(&stdout)
                    .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
                report
            })
            .await
            .expect("join")
        }
    };
    let objects = |report: &Value| -> Vec<(String, String, String)> {
        let mut v: Vec<_> = report["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["kind"].as_str().unwrap_or_default().to_owned(),
                    r["namespace"].as_str().unwrap_or_default().to_owned(),
                    r["name"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        v.sort();
        v
    };
    // The directory, recorded with the image the OCI run records by default.
    let from_dir = apply(example(), vec!["--release-image".into(), image.clone()]).await;
    assert_eq!(from_dir["release"]["source"], example());
    assert_eq!(from_dir["release"]["digest"], Value::Null);
    // The artifact by digest: the same objects, each already as the directory made it.
    let from_oci = apply(registry.url("cvo/example", &format!("@{digest}")), vec![]).await;
    assert_eq!(objects(&from_oci), objects(&from_dir));
    for r in from_oci["results"].as_array().unwrap() {
        assert!(
            !matches!(
                r["action"].as_str(),
                Some("created" | "updated" | "deleted" | "failed")
            ),
            "{r}"
        );
    }
    assert_eq!(from_oci["release"]["digest"], digest.as_str());
    assert_eq!(
        from_oci["release"]["source"],
        registry.url("cvo/example", &format!("@{digest}"))
    );
    let cvs = tc.dynamic(&cv_resource, None);
    let cv = cvs.get("version").await.expect("get cv");
    assert_eq!(cv.data["status"]["desired"]["image"], image.as_str());
    common::example::clean_up(&tc, &cvs).await;
    drop(registry);
}

/// A registry asking for HTTP Basic auth (htpasswd, tests/fixtures/oci/htpasswd, a test-only
/// password): without credentials the push and the read are refused, naming the registry and
/// what to do; with the Docker config's credentials for `HOST:PORT` both work; the password
/// appears in no output.
#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn basic_auth_credentials_come_from_the_docker_config_and_are_never_printed() {
    const PASSWORD: &str = "not-a-secret-1";
    let htpasswd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oci/htpasswd");
    let registry = common::registry::Registry::start_with_htpasswd(&htpasswd);
    let env = Env::new();
    let target = registry.url("cvo/private", ":1");
    let (code, stdout, stderr) = cvo(&env, &["push", "--release", &example(), &target]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("the registry {} refused access", registry.host()))
            && stderr.contains("docker login"),
        "{stderr}"
    );
    // `docker login` writes this.
    let auth = base64(format!("cvo-test:{PASSWORD}").as_bytes());
    std::fs::write(
        env.docker_config.path().join("config.json"),
        serde_json::json!({"auths": {registry.host(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let (code, stdout, stderr) = cvo(&env, &["push", "--release", &example(), &target]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (code, read, stderr2) = cvo(&env, &["graph", "--release", &target]);
    assert_eq!(code, 0, "{stderr2}");
    assert_eq!(read, graph(&env, &example()));
    for text in [&stdout, &stderr, &read, &stderr2] {
        assert!(!text.contains(PASSWORD) && !text.contains(&auth), "{text}");
    }
    // A wrong password: refused, and not printed either.
    let wrong = base64(b"cvo-test:wrong-password");
    let fresh = Env::new();
    std::fs::write(
        fresh.docker_config.path().join("config.json"),
        serde_json::json!({"auths": {registry.host(): {"auth": wrong}}}).to_string(),
    )
    .unwrap();
    let (code, _, stderr) = cvo(&fresh, &["graph", "--release", &target]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("refused access")
            && !stderr.contains("wrong-password")
            && !stderr.contains(&wrong),
        "{stderr}"
    );
}

/// The token server's users: one may pull and push, one may only pull (and holds a refresh
/// token, what `docker login` stores as `identitytoken`).
const WRITER: common::token::User = common::token::User {
    name: "writer",
    password: "not-a-secret-writer-1",
    refresh_token: None,
    actions: &["pull", "push"],
};
const READER: common::token::User = common::token::User {
    name: "reader",
    password: "not-a-secret-reader-1",
    refresh_token: Some("not-a-secret-refresh-1"),
    actions: &["pull"],
};

/// A registry with distribution's token auth and its token server (`common::token`).
fn token_registry() -> (common::token::TokenServer, common::registry::Registry) {
    let tokens = common::token::TokenServer::start(&[WRITER, READER]);
    let registry = common::registry::Registry::start_with_token(&tokens);
    (tokens, registry)
}

/// `env`'s Docker config holding `user`'s credentials for `registry`, as `docker login` writes
/// them; the `auth` value.
fn log_in(env: &Env, registry: &common::registry::Registry, user: &common::token::User) -> String {
    let auth = base64(format!("{}:{}", user.name, user.password).as_bytes());
    std::fs::write(
        env.docker_config.path().join("config.json"),
        serde_json::json!({"auths": {registry.host(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    auth
}

/// Asserts that no credential of the token server's users and no token it issued appears in
/// `texts`.
fn no_secret_in(tokens: &common::token::TokenServer, texts: &[&str]) {
    let mut secrets: Vec<String> = tokens
        .issued()
        .into_iter()
        .filter_map(|i| i.token)
        .collect();
    for user in [WRITER, READER] {
        secrets.push(user.password.to_owned());
        secrets.push(base64(
            format!("{}:{}", user.name, user.password).as_bytes(),
        ));
        secrets.extend(user.refresh_token.map(str::to_owned));
    }
    for text in texts {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret is printed: {text}"
            );
        }
    }
}

/// A registry asking for bearer tokens (distribution's token auth): the Docker config's user
/// name and password get a token from the realm for exactly the operation (pull, or pull and
/// push), so the writer's push lands and the reader reads it; the reader's push, anonymous
/// access and wrong credentials are refused in plain words naming the registry and what to
/// do; no password and no token appears in any output.
#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn bearer_tokens_come_from_the_realm_with_the_docker_configs_credentials() {
    let (tokens, registry) = token_registry();
    let target = registry.url("cvo/example", ":1");
    let mut outputs = Vec::new();
    // Anonymous: the token server grants nothing, the registry refuses.
    let anonymous = Env::new();
    let (code, stdout, stderr) = cvo(&anonymous, &["push", "--release", &example(), &target]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("the registry {} refused access", registry.host()))
            && stderr.contains("docker login"),
        "{stderr}"
    );
    assert!(
        tokens
            .issued()
            .iter()
            .all(|i| i.user.is_none() && i.granted.is_empty()),
        "{:?}",
        tokens.issued()
    );

    outputs.extend([stdout, stderr]);
    // The writer: a token for pull and push on the repository, and the artifact lands.
    let writer = Env::new();
    log_in(&writer, &registry, &WRITER);
    let (code, stdout, stderr) = cvo(&writer, &["push", "--release", &example(), &target]);
    assert_eq!(code, 0, "{stdout}\n{stderr}\n{}", registry.log());
    assert!(
        tokens
            .issued()
            .iter()
            .any(|i| i.user.as_deref() == Some("writer")
                && i.granted
                    == [(
                        "cvo/example".to_owned(),
                        vec!["pull".to_owned(), "push".to_owned()]
                    )]),
        "{:?}",
        tokens.issued()
    );
    let digest = stdout
        .trim()
        .rsplit_once('@')
        .expect("REPO:TAG@sha256:…")
        .1
        .to_owned();

    outputs.extend([stdout, stderr]);
    // The reader: reads it by tag and by digest, as the directory reads.
    let reader = Env::new();
    log_in(&reader, &registry, &READER);
    let directory = graph(&reader, &example());
    for source in [
        target.clone(),
        registry.url("cvo/example", &format!("@{digest}")),
    ] {
        let (code, stdout, stderr) = cvo(&reader, &["graph", "--release", &source]);
        assert_eq!(code, 0, "{source}: {stderr}");
        assert_eq!(stdout, directory);

        outputs.extend([stdout, stderr]);
    }
    // … but may not push: refused, naming the registry, the repository and what to do.
    let (code, stdout, stderr) = cvo(
        &reader,
        &[
            "push",
            "--release",
            &example(),
            &registry.url("cvo/example", ":2"),
        ],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("the registry {} refused access", registry.host()))
            && stderr.contains("cvo/example:2")
            && stderr.contains("to push with the credentials cvo holds for it")
            && stderr.contains("may not push the repository"),
        "{stderr}"
    );

    outputs.extend([stdout, stderr]);
    // A wrong password: the token server refuses it, and so does the registry.
    let wrong = Env::new();
    let bad = common::token::User {
        password: "wrong-password-1",
        ..READER
    };
    log_in(&wrong, &registry, &bad);
    let (code, stdout, stderr) = cvo(&wrong, &["graph", "--release", &target]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("refused access (HTTP 401) to read with the credentials")
            && stderr.contains("log in again"),
        "{stderr}"
    );
    assert!(
        tokens.issued().iter().any(|i| i.status == 401),
        "{:?}",
        tokens.issued()
    );

    outputs.extend([stdout, stderr]);
    let texts: Vec<&str> = outputs.iter().map(String::as_str).collect();
    no_secret_in(&tokens, &texts);
}

/// A Docker identity token (`identitytoken`: an OAuth2 refresh token, what `docker login`
/// stores when the token server issues one) is exchanged at the realm (`POST`,
/// `grant_type=refresh_token`) for a bearer token granting what its user may do: the reader
/// reads, its push is refused; an unknown identity token is refused by the token server in
/// plain words; neither token is printed.
#[test]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
fn an_identity_token_is_exchanged_at_the_realm_for_bearer_tokens() {
    let (tokens, registry) = token_registry();
    let writer = Env::new();
    log_in(&writer, &registry, &WRITER);
    let target = registry.url("cvo/example", ":1");
    push(&writer, &example(), &target);
    let with_identity = |token: &str| {
        let env = Env::new();
        // `docker login` writes the user name `<token>` into `auth` beside it.
        std::fs::write(
            env.docker_config.path().join("config.json"),
            serde_json::json!({"auths": {registry.host(): {
                "auth": base64(b"<token>:"), "identitytoken": token}}})
            .to_string(),
        )
        .unwrap();
        env
    };
    let reader = with_identity(READER.refresh_token.unwrap());
    let mut outputs = Vec::new();
    let (code, stdout, stderr) = cvo(&reader, &["graph", "--release", &target]);
    assert_eq!(code, 0, "{stderr}\n{}", registry.log());
    assert_eq!(stdout, graph(&reader, &example()));
    assert!(
        tokens.issued().iter().any(|i| i.method == "POST"
            && i.user.as_deref() == Some("reader")
            && i.granted == [("cvo/example".to_owned(), vec!["pull".to_owned()])]),
        "{:?}",
        tokens.issued()
    );
    outputs.extend([stdout, stderr]);
    let (code, stdout, stderr) = cvo(
        &reader,
        &[
            "push",
            "--release",
            &example(),
            &registry.url("cvo/example", ":2"),
        ],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("the registry {} refused access", registry.host()))
            && stderr.contains("may not push the repository"),
        "{stderr}"
    );
    outputs.extend([stdout, stderr]);
    let unknown = with_identity("not-a-secret-unknown-refresh");
    let (code, stdout, stderr) = cvo(&unknown, &["graph", "--release", &target]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("the token server {}", tokens.realm()))
            && stderr.contains("refused the Docker config's identity token (HTTP 401)")
            && stderr.contains(&format!("docker login {}", registry.host()))
            && !stderr.contains("not-a-secret-unknown-refresh"),
        "{stderr}"
    );
    outputs.extend([stdout, stderr]);
    let texts: Vec<&str> = outputs.iter().map(String::as_str).collect();
    no_secret_in(&tokens, &texts);
}

/// `cvo apply --release oci://…@sha256:…` as the pull-only user of a registry with token
/// auth applies the release on the test cluster, and prints no secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn apply_reads_a_release_with_a_pull_only_bearer_token() {
    let (tokens, registry) = token_registry();
    let writer = Env::new();
    log_in(&writer, &registry, &WRITER);
    let digest = push(&writer, &example(), &registry.url("cvo/example", ":1.4.0"));
    let reader = Env::new();
    log_in(&reader, &registry, &READER);
    let tc = common::cluster().await;
    let (_cv_turn, cv_resource) = common::cluster_version(&tc).await;
    common::example::prepare(&tc).await;
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(work.path()).await;
    let source = registry.url("cvo/example", &format!("@{digest}"));
    let docker_config = reader.docker_config.path().to_owned();
    let cache = reader.cache.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        common::cli::cvo()
            .env("DOCKER_CONFIG", &docker_config)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["apply", "--release", &source, "-o", "json"])
            .args(["--install-timeout", "120s", "--health-timeout", "60s"])
            .arg("--cache-dir")
            .arg(&cache)
            .write_stdin("")
            .output()
            .expect("run cvo")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(report["release"]["digest"], digest.as_str());
    assert!(
        tokens
            .issued()
            .iter()
            .any(|i| i.user.as_deref() == Some("reader")
                && i.granted == [("cvo/example".to_owned(), vec!["pull".to_owned()])]),
        "{:?}",
        tokens.issued()
    );
    no_secret_in(&tokens, &[&stdout, &stderr]);
    let cvs = tc.dynamic(&cv_resource, None);
    common::example::clean_up(&tc, &cvs).await;
    drop(registry);
}

/// Standard base64 with padding (the Docker config's `auth`).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
