//! Hostile input to the command line (docs/limits.md): releases that use cluster profiles, absurd
//! flag values, a `--release-image` that would inject YAML, graph exit codes, a stdout closed
//! early, and connection errors that say what failed.
//!
//! Nothing here needs a cluster: `apply`/`plan` run `--in-memory`, and the connection tests
//! point a kubeconfig at a closed loopback port, a TLS server with another CA (openssl
//! s_server) and a loopback HTTP server that answers 401.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

use assert_cmd::Command;

const DEFAULT_PROFILE: &str = "self-managed-high-availability";

fn cvo() -> Command {
    let mut cmd = common::cli::cvo();
    cmd.timeout(Duration::from_secs(120));
    cmd
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = cvo().args(args).output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn config_map(name: &str, annotations: &[(&str, &str)]) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: cvo-hardening\n  annotations:\n"
    );
    for (k, v) in annotations {
        text.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    text.push_str("data:\n  a: b\n");
    text
}

const SELF_MANAGED: &str = "include.release.openshift.io/self-managed-high-availability";
const IBM: &str = "include.release.openshift.io/ibm-cloud-managed";

/// A release like OpenShift's: a manifest and its `-ibm-cloud-managed` twin with the same
/// identity, each in its own profile, and a TechPreviewNoUpgrade-only manifest.
fn profile_release() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(
        p,
        "release-metadata",
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.0.0"}"#,
    );
    write(
        p,
        "0000_10_a_00_namespace.yaml",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cvo-hardening\n  annotations:\n    {SELF_MANAGED}: \"true\"\n    {IBM}: \"true\"\n"
        ),
    );
    write(
        p,
        "0000_10_a_01_config.yaml",
        &config_map("settings", &[(SELF_MANAGED, "true")]),
    );
    write(
        p,
        "0000_10_a_01_config-ibm-cloud-managed.yaml",
        &config_map("settings", &[(IBM, "true")]),
    );
    write(
        p,
        "0000_10_a_02_preview.yaml",
        &config_map(
            "preview",
            &[
                (SELF_MANAGED, "true"),
                ("release.openshift.io/feature-set", "TechPreviewNoUpgrade"),
            ],
        ),
    );
    dir
}

fn release_arg(dir: &Path) -> String {
    dir.to_str().unwrap().to_owned()
}

// ---- defect 4: profiles, feature sets, parallelism, release image ----

#[test]
fn apply_without_profile_uses_the_default_profile_of_a_release_with_profiles() {
    let dir = profile_release();
    let r = run(&[
        "apply",
        "--release",
        &release_arg(dir.path()),
        "--in-memory",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains(DEFAULT_PROFILE), "{}", r.stderr);
    assert!(!r.stderr.contains("duplicate-identity"), "{}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["summary"]["created"], 2, "{report}");
}

#[test]
fn graph_without_profile_uses_the_default_profile() {
    let dir = profile_release();
    let r = run(&["graph", "--release", &release_arg(dir.path())]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains(DEFAULT_PROFILE), "{}", r.stderr);
    assert!(!r.stderr.contains("duplicate-identity"), "{}", r.stderr);
}

#[test]
fn validate_without_profile_checks_each_profile_on_its_own() {
    let dir = profile_release();
    let r = run(&["validate", "--release", &release_arg(dir.path())]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(!all.contains("duplicate-identity"), "{all}");
    assert!(
        all.contains(DEFAULT_PROFILE) && all.contains("ibm-cloud-managed"),
        "{all}"
    );
    // JSON stays JSON.
    let r = run(&[
        "validate",
        "--release",
        &release_arg(dir.path()),
        "--format",
        "json",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    serde_json::from_str::<serde_json::Value>(&r.stdout).expect("JSON on stdout");
}

#[test]
fn validate_without_profile_says_which_profile_a_finding_is_in() {
    let dir = profile_release();
    // A second ConfigMap `settings` only in the ibm-cloud-managed profile: a duplicate there.
    write(
        dir.path(),
        "0000_10_a_03_again-ibm-cloud-managed.yaml",
        &config_map("settings", &[(IBM, "true")]),
    );
    let r = run(&["validate", "--release", &release_arg(dir.path())]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("duplicate-identity"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(line.contains("(profile ibm-cloud-managed)"), "{line}");
    assert!(!line.contains(DEFAULT_PROFILE), "{line}");
}

#[test]
fn a_profile_or_feature_set_that_no_manifest_names_is_refused() {
    let dir = profile_release();
    let release = release_arg(dir.path());
    for (command, flag, value) in [
        ("graph", "--profile", ""),
        ("graph", "--profile", "nope"),
        ("validate", "--profile", ""),
        ("validate", "--profile", "Self-Managed-High-Availability"),
        ("graph", "--feature-set", "Nope"),
        ("validate", "--feature-set", ""),
        ("apply", "--profile", "nope"),
    ] {
        let mut args = vec![command, "--release", &release, flag, value];
        if command == "apply" {
            args.push("--in-memory");
        }
        let r = run(&args);
        assert_eq!(r.code, Some(2), "{command} {flag} {value:?}: {}", r.stderr);
        for known in [DEFAULT_PROFILE, "ibm-cloud-managed", "TechPreviewNoUpgrade"] {
            assert!(
                r.stderr.contains(known),
                "{command} {flag} {value:?}: {}",
                r.stderr
            );
        }
    }
    // The ones the release uses are accepted.
    for (flag, value) in [
        ("--profile", "ibm-cloud-managed"),
        ("--feature-set", "TechPreviewNoUpgrade"),
        ("--feature-set", "Default"),
    ] {
        let r = run(&["graph", "--release", &release, flag, value]);
        assert_eq!(r.code, Some(0), "{flag} {value}: {}", r.stderr);
    }
}

#[test]
fn a_profile_for_a_release_without_profiles_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "0000_10_a_01_config.yaml",
        &config_map("c", &[]),
    );
    let r = run(&[
        "graph",
        "--release",
        &release_arg(dir.path()),
        "--profile",
        "hypershift",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("no cluster profiles"), "{}", r.stderr);
}

#[test]
fn parallelism_is_bounded() {
    for command in ["apply", "plan"] {
        for value in ["0", "1000000", "-1", "many"] {
            let r = run(&[
                command,
                "--release",
                "manifests-example",
                "--in-memory",
                "--parallelism",
                value,
            ]);
            assert_eq!(
                r.code,
                Some(2),
                "{command} --parallelism {value}: {}",
                r.stderr
            );
            assert!(r.stderr.contains("--parallelism"), "{}", r.stderr);
        }
    }
}

fn payload_with_release_image() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    write(
        &manifests,
        "0000_00_cvo_00_namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cvo-hardening\n",
    );
    write(
        &manifests,
        "0000_00_cvo_01_config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cvo\n  namespace: cvo-hardening\ndata:\n  quoted: '{{.ReleaseImage}}'\n  plain: {{.ReleaseImage}}\n  arg: \"--release-image={{.ReleaseImage}}\"\n",
    );
    dir
}

#[test]
fn a_release_image_that_is_not_an_image_reference_is_refused() {
    let dir = payload_with_release_image();
    let release = release_arg(dir.path());
    for bad in [
        "quay.io/r:1\n  injected: true",
        "quay.io/r:1' \n",
        "quay.io/R:1",
        "",
        "quay.io/r:1 # comment",
        "quay.io/r@sha256:xyz",
    ] {
        let r = run(&["graph", "--release", &release, "--release-image", bad]);
        assert_eq!(r.code, Some(2), "{bad:?}: {}", r.stderr);
        assert!(r.stderr.contains("--release-image"), "{}", r.stderr);
    }
    let good = "quay.io/openshift-release-dev/ocp-release@sha256:\
                0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    for ok in [good, "quay.io/r:4.16.2-x86_64", "localhost:5000/r", "r"] {
        let r = run(&["graph", "--release", &release, "--release-image", ok]);
        assert_eq!(r.code, Some(0), "{ok:?}: {}", r.stderr);
    }
}

// ---- defect 5: graph exit code ----

#[test]
fn graph_exits_1_when_a_file_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "0000_10_a_00_ok.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n",
    );
    write(
        dir.path(),
        "0000_10_a_01_broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n",
    );
    let r = run(&["graph", "--release", &release_arg(dir.path())]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("0000_10_a_01_broken.yaml"),
        "{}",
        r.stderr
    );
    // The graph of what did load is still printed.
    assert!(r.stdout.contains("10"), "{}", r.stdout);
}

// ---- issue 19: two messages of the hostile-input run ----

/// A version number past 64 bits is said in plain words, and a syntax error in a file that
/// mixes CRLF and lone CR line ends names the line an editor shows: lines end at LF in a file
/// with one (a lone CR is inside a line), at CR in a file without.
#[test]
fn validate_says_too_large_and_names_the_editor_line_with_lone_crs() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "release-metadata",
        r#"{"kind":"cincinnati-metadata-v0","version":"99999999999999999999999.0.0"}"#,
    );
    // CRLF and lone CR alternate: line 7 as written is on the editor's line 4 (of 5).
    let lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: mixed",
        "  namespace: cvo-hardening",
        "data:",
        "  key: value: x",
        "  other: y",
    ];
    let mixed: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{l}{}", if i % 2 == 0 { "\r\n" } else { "\r" }))
        .collect();
    write(dir.path(), "0000_10_a_mixed.yaml", &mixed);
    // The file the hostile-input run reported: every line ends `\r\r\n` (15 lines as editors,
    // `wc -l` and `grep -n` count them), broken on the last.
    let cr_crlf: String = lines[..6]
        .iter()
        .map(|l| l.replace("mixed", "cr-crlf"))
        .chain((0..8).map(|i| format!("  k{i}: v{i}")))
        .chain(["  broken: [".to_owned()])
        .map(|l| format!("{l}\r\r\n"))
        .collect();
    write(dir.path(), "0000_10_b_cr_crlf.yaml", &cr_crlf);
    // A classic Mac file (CR only): lines end at CR.
    let cr: String = lines
        .iter()
        .map(|l| format!("{}\r", l.replace("mixed", "cr")))
        .collect();
    write(dir.path(), "0000_10_c_cr.yaml", &cr);
    let r = run(&["validate", "--release", &release_arg(dir.path())]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "is not semver: the major version number is too large (at most 18446744073709551615)"
        ),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("u64"), "{}", r.stdout);
    for place in [
        "0000_10_a_mixed.yaml:4 (document 0)",
        "0000_10_b_cr_crlf.yaml:15 (document 0)",
        "0000_10_c_cr.yaml:7 (document 0)",
    ] {
        assert!(r.stdout.contains(place), "{place}: {}", r.stdout);
    }
    let json = run(&[
        "validate",
        "--release",
        &release_arg(dir.path()),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let mut lines: Vec<(String, u64)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["rule"] == "parse-error")
        .map(|d| {
            let file = d["location"]["file"].as_str().unwrap_or_default();
            let name = file.rsplit('/').next().unwrap_or_default().to_owned();
            (name, d["location"]["line"].as_u64().unwrap_or_default())
        })
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            ("0000_10_a_mixed.yaml".to_owned(), 4),
            ("0000_10_b_cr_crlf.yaml".to_owned(), 15),
            ("0000_10_c_cr.yaml".to_owned(), 7),
        ],
        "{}",
        json.stdout
    );
}

// ---- defect 13: a closed stdout ----

/// Runs cvo with its stdout closed before it writes anything (a reader that went away, as
/// `| head -0`); returns the exit code and stderr.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = common::cli::process()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), stderr)
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let mut cases: Vec<(Vec<&str>, Option<i32>)> = vec![
        (vec!["validate", "--release", "manifests-example"], Some(0)),
        (
            vec![
                "validate",
                "--release",
                "manifests-example",
                "--format",
                "sarif",
            ],
            Some(0),
        ),
        (
            vec!["apply", "--release", "manifests-example", "--in-memory"],
            Some(3),
        ),
        (
            vec![
                "apply",
                "--release",
                "manifests-example",
                "--in-memory",
                "-o",
                "json",
            ],
            Some(3),
        ),
        (
            vec!["plan", "--release", "manifests-example", "--in-memory"],
            Some(3),
        ),
        (vec!["--help"], Some(0)),
        (vec!["--version"], Some(0)),
    ];
    for format in ["text", "dot", "mermaid", "json"] {
        cases.push((
            vec![
                "graph",
                "--release",
                "manifests-example",
                "--format",
                format,
            ],
            Some(0),
        ));
    }
    ends_quietly(cases);
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn a_closed_stdout_ends_the_graph_of_the_corpus_quietly() {
    let corpus = common::needs::corpus("openshift-release");
    let corpus = corpus.to_str().expect("a UTF-8 path");
    // The corpus loads with no error (its one duplicate key is a warning, as the CVO reads
    // the last value).
    ends_quietly(vec![(vec!["graph", "--release", corpus], Some(0))]);
}

/// Each command, its stdout closed at once, ends with its exit code and no panic or
/// "Broken pipe" on stderr.
fn ends_quietly(cases: Vec<(Vec<&str>, Option<i32>)>) {
    for (args, want) in cases {
        let (code, stderr) = with_closed_stdout(&args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert_eq!(code, want, "{args:?}: {stderr}");
    }
}

// ---- defect 11: connection errors ----

fn kubeconfig(dir: &Path, server: &str, context: &str, extra_cluster: &str, user: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{extra_cluster}contexts:\n- name: {context}\n  context:\n    cluster: c\n    user: u\ncurrent-context: {context}\nusers:\n- name: u\n  user:\n{user}"
        ),
    )
    .unwrap();
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn plan_against(kubeconfig: &Path) -> Run {
    run(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "plan",
        "--release",
        "manifests-example",
    ])
}

fn assert_plain_stderr(r: &Run) {
    assert!(!r.stderr.contains('\u{1b}'), "colour codes: {:?}", r.stderr);
    assert!(!r.stderr.contains("ServiceError"), "{}", r.stderr);
    assert!(!r.stderr.contains("ListMeta"), "{}", r.stderr);
    assert!(r.stderr.lines().count() <= 3, "{}", r.stderr);
}

#[test]
fn a_closed_port_says_connection_refused_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = format!("https://127.0.0.1:{port}");
    let kc = kubeconfig(
        dir.path(),
        &server,
        "ctx",
        "    insecure-skip-tls-verify: true\n",
        "    token: abc\n",
    );
    let r = plan_against(&kc);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("connection refused"), "{}", r.stderr);
    assert_plain_stderr(&r);
}

/// `openssl s_server` with a self-signed certificate, on a free loopback port.
struct TlsServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openssl(dir: &Path, args: &[&str]) -> bool {
    StdCommand::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A self-signed certificate: a CA, or (`leaf`) a server certificate.
fn self_signed(dir: &Path, name: &str, subject: &str, leaf: bool) -> bool {
    let constraints = if leaf {
        "basicConstraints=critical,CA:FALSE"
    } else {
        "basicConstraints=critical,CA:TRUE"
    };
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            subject,
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-addext",
            constraints,
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    )
}

fn tls_server(dir: &Path) -> Option<TlsServer> {
    if !self_signed(dir, "server", "/CN=127.0.0.1", true) {
        return None;
    }
    let port = free_port();
    let mut child = StdCommand::new("openssl")
        .args([
            "s_server",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-cert",
            "server.crt",
            "-key",
            "server.key",
            "-www",
        ])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // s_server prints ACCEPT once it listens.
    let mut line = String::new();
    BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    Some(TlsServer { child, port })
}

#[test]
fn a_wrong_certificate_authority_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let server = tls_server(dir.path()).unwrap_or_else(|| {
        common::needs::missing(
            "the openssl CLI (to make certificates and serve TLS)",
            "install openssl",
        )
    });
    // Another CA: with another name (UnknownIssuer), and with the server's name, as when a
    // cluster's certificates were made again (a bad signature); Go says the same of both.
    for subject in ["/CN=other-ca", "/CN=127.0.0.1"] {
        assert!(self_signed(dir.path(), "other", subject, false));
        let kc = kubeconfig(
            dir.path(),
            &format!("https://127.0.0.1:{}", server.port),
            "ctx",
            &format!(
                "    certificate-authority: {}\n",
                dir.path().join("other.crt").display()
            ),
            "    token: abc\n",
        );
        let r = plan_against(&kc);
        assert_eq!(r.code, Some(1), "{subject}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("certificate signed by an unknown authority"),
            "{subject}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&format!("127.0.0.1:{}", server.port)),
            "{}",
            r.stderr
        );
        assert_plain_stderr(&r);
    }
}

/// A loopback HTTP server that answers every request with 401 Unauthorized, as kube-apiserver
/// does for a bad token.
fn unauthorized_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    // Read one request (headers only: the client sends GETs).
                    let mut seen = false;
                    loop {
                        let mut line = String::new();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        if line == "\r\n" {
                            break;
                        }
                        seen = true;
                    }
                    if !seen {
                        return;
                    }
                    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
                    let response = format!(
                        "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn rejected_credentials_name_the_context_and_not_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let port = unauthorized_server();
    let kc = kubeconfig(
        dir.path(),
        &format!("http://127.0.0.1:{port}"),
        "ctx-with-bad-token",
        "",
        "    token: s3cr3t-t0ken\n",
    );
    let r = plan_against(&kc);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the credentials of context ctx-with-bad-token were rejected (401"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("s3cr3t"), "{}", r.stderr);
    assert_plain_stderr(&r);
}
