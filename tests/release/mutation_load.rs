//! A seeded mutation test of hostile input (docs/limits.md): thousands of mutants of real
//! corpus files go through the loader and the validator. None may panic, every diagnostic must
//! point inside its own file, and no message may carry parser or Rust internals.
//!
//! The generator is `fastrand`'s with a fixed seed, so a failure reproduces; set
//! `CVO_MUTATION_SEED` to explore other seeds. The mutants come from the shared corpus: the
//! test is ignored by default (`common::needs`).

use std::collections::HashMap;
use std::path::PathBuf;

use cvo::diagnostic::Diagnostic;
use cvo::release::{LoadOptions, load};

/// Wording that means a library or Rust internal reached the user.
pub const DENY: &[&str] = &[
    "budget breached",
    "Depth {",
    "Nodes {",
    "ScalarBytes",
    "AliasAnchorRatio",
    "Option<",
    "from_str_multiple",
    "ignore_binary_tag_for_string",
    "invalid u64",
    "invalid i64",
    "configured policy",
    "\\u{",
    "u64::MAX",
    "i64::MAX",
    "expected i32",
    "expected i64",
    "expected u64",
    "expected f64",
    "expected struct",
    "expected enum",
    "Options",
    "serde",
    "deserialize",
    "BudgetBreach",
    "Error {",
];

/// A CamelCase Rust type name after "expected" (`expected CustomResourceDefinitionSpec`).
fn names_a_type(message: &str) -> bool {
    message.match_indices("expected ").any(|(i, m)| {
        let word: String = message[i + m.len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().skip(1).any(char::is_uppercase)
            && word.chars().any(char::is_lowercase)
    })
}

pub fn assert_plain(d: &Diagnostic) {
    for text in [Some(d.message.as_str()), d.help.as_deref()]
        .into_iter()
        .flatten()
    {
        for deny in DENY {
            assert!(!text.contains(deny), "internal `{deny}` in: {d}");
        }
        assert!(!names_a_type(text), "a Rust type name in: {d}");
        assert!(
            text.chars().count() < 600,
            "message quotes too much input: {d}"
        );
    }
}

/// The mutants' generator: `fastrand`'s, seeded.
struct Rng(fastrand::Rng);

impl Rng {
    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        self.0.usize(..n.max(1))
    }
}

/// Fragments that exercise the loader's error paths.
const HOSTILE: &[&[u8]] = &[
    b"\"",
    b"'",
    b": ",
    b"- ",
    b"\t",
    b"\r",
    b"\x0b",
    b"\0",
    b"\xff",
    b"{",
    b"[",
    b"]",
    b"&a ",
    b"*a",
    b"*nowhere",
    b"!!binary ",
    b"!!int ",
    b".nan",
    b".inf",
    b"1e999999",
    b"99999999999999999999999",
    b"no",
    b"~",
    b"\n---\n",
    b"\n...\n",
    b"? ",
    b"|",
    b">-",
    b"#",
    b"{{ .Bad }}",
    b"<<: *a",
    b"\\",
];

fn mutate(rng: &mut Rng, original: &[u8]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(7) {
            0 => {
                let end = (at + rng.below(40)).min(bytes.len());
                bytes.drain(at..end);
            }
            1 | 2 => {
                let piece = HOSTILE[rng.below(HOSTILE.len())];
                bytes.splice(at..at, piece.iter().copied());
            }
            3 => {
                // Shift a line left or right.
                let start = bytes[..at]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                if rng.below(2) == 0 {
                    bytes.splice(start..start, *b"   ");
                } else {
                    let n = bytes[start..].iter().take_while(|&&b| b == b' ').count();
                    bytes.drain(start..start + n.min(2 + rng.below(4)));
                }
            }
            4 => bytes.truncate(at),
            5 => {
                // Duplicate a line.
                let start = bytes[..at]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let end = bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |i| at + i + 1);
                let line = bytes[start..end].to_vec();
                bytes.splice(start..start, line);
            }
            _ => {
                if !bytes.is_empty() {
                    let i = at.min(bytes.len() - 1);
                    bytes[i] = rng.0.u8(..);
                }
            }
        }
    }
    bytes
}

/// Lines as YAML counts them: a LF, a CRLF or a lone CR ends one.
fn yaml_lines(bytes: &[u8]) -> usize {
    let lone_cr = bytes
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\r' && bytes.get(i + 1) != Some(&b'\n'))
        .count();
    bytes.iter().filter(|&&b| b == b'\n').count() + lone_cr + 1
}

/// Small corpus files (fast to parse in a debug build), in a stable order (the test fails
/// without the corpus).
fn seeds() -> Vec<PathBuf> {
    let dir = crate::common::needs::corpus("openshift-release");
    let entries = std::fs::read_dir(&dir).expect("read the corpus");
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "yaml" || e == "json")
                && std::fs::metadata(p).is_ok_and(|m| m.len() < 6_000)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no small seed file in {}", dir.display());
    files
}

const MUTANTS: usize = 2_400;
const PER_RELEASE: usize = 200;

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn mutants_of_corpus_files_never_panic_and_report_plainly() {
    let seeds = seeds();
    let seed = std::env::var("CVO_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe_f00d_u64);
    let mut rng = Rng(fastrand::Rng::with_seed(seed));
    let originals: Vec<Vec<u8>> = seeds.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let mut diagnostics = 0;
    for batch in 0..MUTANTS / PER_RELEASE {
        let dir = tempfile::tempdir().unwrap();
        let mut lines: HashMap<PathBuf, usize> = HashMap::new();
        for i in 0..PER_RELEASE {
            let k = rng.below(originals.len());
            let mutant = mutate(&mut rng, &originals[k]);
            let ext = seeds[k].extension().unwrap().to_str().unwrap();
            let path = dir
                .path()
                .join(format!("0000_{:02}_m_{i:03}.{ext}", i % 90));
            lines.insert(path.clone(), yaml_lines(&mutant));
            std::fs::write(&path, mutant).unwrap();
        }
        let release = load(dir.path(), &LoadOptions::default()).expect("readable");
        let mut all = release.diagnostics.clone();
        all.extend(cvo::validate::validate(&release, None));
        for d in &all {
            let Some(&count) = lines.get(&d.location.file) else {
                panic!("seed {seed:#x} batch {batch}: diagnostic outside the mutants: {d}");
            };
            if let Some(line) = d.location.line {
                assert!(
                    (1..=count).contains(&line),
                    "seed {seed:#x} batch {batch}: line {line} of {count}: {d}"
                );
            }
            assert_plain(d);
        }
        diagnostics += all.len();
    }
    assert!(diagnostics > 100, "the mutants should break something");
}

/// Each internal wording users once saw (decoder and budget messages naming Rust types), from a
/// document that produces it, comes out plain.
#[test]
fn deny_list_catches_the_reported_internals() {
    for bad in [
        "budget breached: Depth { depth: 65 }",
        "cannot deserialize null into string; use Option<String>",
        "invalid type: map, expected CustomResourceDefinitionSpec",
        "unexpected character: `\\u{b}'",
    ] {
        let d = Diagnostic::new(
            "parse-error",
            cvo::diagnostic::Severity::Error,
            cvo::diagnostic::Location::file("x.yaml"),
            bad,
        );
        let caught = std::panic::catch_unwind(|| assert_plain(&d)).is_err();
        assert!(caught, "{bad}");
    }
}
