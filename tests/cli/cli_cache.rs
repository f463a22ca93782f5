//! The parse cache (issue 36): a release's files are parsed once per content, kept under
//! `--cache-dir`'s `parsed/`, and reused by every command that reads `--release`. What a
//! command did with it is its debug event `parse cache hits=… misses=… written=…` (target
//! `cvo::release::cache`), read here with `CVO_LOG=cvo::release::cache=debug`.

use crate::common::cli::{cvo, process};

use std::path::{Path, PathBuf};

/// A ConfigMap with a key written twice: a `duplicate-key` warning at line 5.
const WARNS: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  name: w\n  namespace: ns\n";

fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n")
}

/// A release of `n` ConfigMap files plus one file with a warning.
fn release(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..n {
        let path = dir
            .path()
            .join(format!("0000_{:02}_c{}_{i:04}.yaml", i % 90, i % 7));
        std::fs::write(path, config_map(&format!("cm-{i}"))).unwrap();
    }
    std::fs::write(dir.path().join("0000_95_w_x.yaml"), WARNS).unwrap();
    dir
}

/// What one run did with the cache: the sums of its debug events.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    hits: usize,
    misses: usize,
    written: usize,
}

fn counts(stderr: &str) -> Counts {
    let mut out = Counts::default();
    for line in stderr.lines().filter(|l| l.contains("cvo::release::cache")) {
        for field in line.split_whitespace() {
            let Some((name, value)) = field.split_once('=') else {
                continue;
            };
            let Ok(value) = value.parse::<usize>() else {
                continue;
            };
            match name {
                "hits" => out.hits += value,
                "misses" => out.misses += value,
                "written" => out.written += value,
                _ => {}
            }
        }
    }
    out
}

/// `cvo ARGS --cache-dir CACHE` with the cache's debug events on: (stdout, counts). The
/// command must succeed.
fn run(args: &[&str], cache: &Path) -> (String, Counts) {
    let output = cvo()
        .args(args)
        .arg("--cache-dir")
        .arg(cache)
        .env("CVO_LOG", "cvo::release::cache=debug")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "cvo {args:?}: {stderr}");
    (String::from_utf8(output.stdout).unwrap(), counts(&stderr))
}

fn graph(release: &Path, cache: &Path) -> (String, Counts) {
    let release = release.to_str().unwrap();
    run(&["graph", "--release", release, "--format", "json"], cache)
}

fn validate(release: &Path, cache: &Path) -> (String, Counts) {
    let release = release.to_str().unwrap();
    run(&["validate", "--release", release, "-o", "json"], cache)
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(cache.join("parsed"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn counted(hits: usize, misses: usize, written: usize) -> Counts {
    Counts {
        hits,
        misses,
        written,
    }
}

#[test]
fn cli_an_unchanged_file_is_not_parsed_again_and_a_changed_one_is() {
    let (release, cache) = (release(5), tempfile::tempdir().unwrap());
    let (cold, first) = validate(release.path(), cache.path());
    assert_eq!(first, counted(0, 6, 6));
    assert_eq!(entries(cache.path()).len(), 6);
    let (warm, second) = validate(release.path(), cache.path());
    assert_eq!(second, counted(6, 0, 0));
    assert_eq!(warm, cold);
    std::fs::write(
        release.path().join("0000_00_c0_0000.yaml"),
        config_map("new"),
    )
    .unwrap();
    let (_, third) = validate(release.path(), cache.path());
    assert_eq!(third, counted(5, 1, 1));
    // Every command that reads --release reads the same entries, the changed file's too.
    let (graph, by_graph) = graph(release.path(), cache.path());
    assert_eq!(by_graph, counted(6, 0, 0));
    assert!(graph.contains("ConfigMap ns/new"), "{graph}");
}

#[test]
fn cli_the_same_bytes_elsewhere_hit_and_the_warning_names_the_new_path() {
    let cache = tempfile::tempdir().unwrap();
    let (first, second) = (release(3), release(3));
    let (_, cold) = validate(first.path(), cache.path());
    assert_eq!(cold, counted(0, 4, 4));
    let (report, warm) = validate(second.path(), cache.path());
    assert_eq!(warm, counted(4, 0, 0));
    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    let warning = &json["diagnostics"][0];
    assert_eq!(warning["rule"], "duplicate-key", "{report}");
    let file = second.path().join("0000_95_w_x.yaml");
    assert_eq!(
        warning["location"]["file"],
        file.to_str().unwrap(),
        "{report}"
    );
    assert_eq!(warning["location"]["line"], 5, "{report}");
    assert!(!report.contains(first.path().to_str().unwrap()), "{report}");
}

#[test]
fn cli_a_corrupted_entry_is_ignored_parsed_again_and_rewritten() {
    let (release, cache) = (release(3), tempfile::tempdir().unwrap());
    let (expected, _) = validate(release.path(), cache.path());
    let all = entries(cache.path());
    let good: Vec<Vec<u8>> = all.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // Garbage, a truncated entry, another entry's content (its key is not this one's).
    std::fs::write(&all[0], b"\x00garbage").unwrap();
    std::fs::write(&all[1], &good[1][..good[1].len() / 2]).unwrap();
    std::fs::write(&all[2], &good[3]).unwrap();
    let (report, counts) = validate(release.path(), cache.path());
    assert_eq!(counts, counted(1, 3, 3));
    assert_eq!(report, expected);
    for (path, bytes) in all.iter().zip(&good) {
        assert_eq!(
            &std::fs::read(path).unwrap(),
            bytes,
            "{} rewritten",
            path.display()
        );
    }
    assert_eq!(validate(release.path(), cache.path()).1, counted(4, 0, 0));
}

#[test]
fn cli_two_processes_filling_one_cache_at_once_agree() {
    let (release, cache) = (release(400), tempfile::tempdir().unwrap());
    let start = || {
        process()
            .args(["graph", "--format", "json", "--release"])
            .arg(release.path())
            .arg("--cache-dir")
            .arg(cache.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (start(), start());
    let (one, two) = (
        one.wait_with_output().unwrap(),
        two.wait_with_output().unwrap(),
    );
    for out in [&one, &two] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(one.stdout, two.stdout);
    assert!(!one.stdout.is_empty());
    let (third, counts) = graph(release.path(), cache.path());
    assert_eq!(counts, counted(401, 0, 0));
    assert_eq!(third.as_bytes(), one.stdout.as_slice());
    // Only whole entries are left: no temporary file.
    assert_eq!(entries(cache.path()).len(), 401);
}

#[test]
fn cli_no_cache_reads_nothing_and_writes_nothing() {
    let (release, cache) = (release(2), tempfile::tempdir().unwrap());
    let (expected, _) = graph(release.path(), cache.path());
    // An entry planted with another name for the same key: whoever reads it uses it.
    let all = entries(cache.path());
    let planted: Vec<PathBuf> = all
        .iter()
        .filter(|p| std::fs::read_to_string(p).unwrap().contains("\"cm-0\""))
        .cloned()
        .collect();
    assert_eq!(planted.len(), 1);
    let text = std::fs::read_to_string(&planted[0]).unwrap();
    std::fs::write(&planted[0], text.replace("\"cm-0\"", "\"planted\"")).unwrap();
    let (with_cache, _) = graph(release.path(), cache.path());
    assert!(with_cache.contains("ConfigMap ns/planted"), "{with_cache}");
    let before: Vec<(PathBuf, Vec<u8>)> = all
        .iter()
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect();
    let release_arg = release.path().to_str().unwrap();
    let args = [
        "graph",
        "--release",
        release_arg,
        "--format",
        "json",
        "--no-cache",
    ];
    let (without, counts) = run(&args, cache.path());
    assert_eq!(without, expected);
    assert!(!without.contains("planted"));
    assert_eq!(counts, Counts::default(), "no cache event at all");
    let after: Vec<(PathBuf, Vec<u8>)> = entries(cache.path())
        .iter()
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect();
    assert_eq!(after, before, "nothing written");
    // An empty cache directory stays empty.
    let empty = tempfile::tempdir().unwrap();
    run(&args, empty.path());
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
}

#[test]
fn cli_every_release_reader_uses_the_cache_and_takes_no_cache() {
    for sub in [
        "apply",
        "plan",
        "graph",
        "validate",
        "capabilities",
        "push",
        "rbac",
        "operator",
    ] {
        let help = cvo().args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(help.contains("--no-cache"), "cvo {sub} --help: {help}");
    }
    let (release, cache) = (release(2), tempfile::tempdir().unwrap());
    let dir = release.path().to_str().unwrap();
    assert_eq!(graph(release.path(), cache.path()).1, counted(0, 3, 3));
    for args in [
        vec!["capabilities", "--release", dir],
        vec!["rbac", "--release", dir],
        vec!["validate", "--release", dir, "--previous", dir],
    ] {
        let (_, counts) = run(&args, cache.path());
        assert_eq!(counts.misses, 0, "cvo {args:?}: {counts:?}");
        assert!(counts.hits >= 3, "cvo {args:?}: {counts:?}");
    }
}

#[test]
fn cli_an_oci_release_extracted_afresh_each_time_hits() {
    let (release, cache, layout) = (
        release(3),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let target = format!("oci-layout:{}:v1", layout.path().display());
    let dir = release.path().to_str().unwrap();
    let (_, by_push) = run(&["push", "--release", dir, &target], cache.path());
    assert_eq!(by_push, counted(0, 4, 4), "push validates the directory");
    let (report, first) = validate(Path::new(&target), cache.path());
    assert_eq!(
        first,
        counted(4, 0, 0),
        "the same bytes, extracted: {report}"
    );
    let (again, second) = validate(Path::new(&target), cache.path());
    assert_eq!(second, counted(4, 0, 0));
    assert_eq!(report, again);
    // Its files are named inside the artifact, not in the temporary extraction directory.
    assert!(report.contains("\"0000_95_w_x.yaml\""), "{report}");
}
