//! YAML loading throughput in MB/s (docs/performance.md): clean input, and the worst case for the
//! under-indented quoted-scalar repair (every line of the document a continuation line that
//! must be repaired), one file of about 1 MB each. Loading is linear, so both are a constant
//! number of MB/s whatever the size.
//!
//! And the slope in documents of one file (issue 41): 10,000, 20,000 and 40,000 small
//! ConfigMaps in one file, loaded, and loaded then validated with a finding in every document
//! (each names its field's line). Linear, the time per document is the same at every size; it
//! was proportional to the file before.
//!
//! `cargo bench --bench load_yaml`. Results go in docs/limits.md and docs/performance.md. As a
//! test (`cargo test --all-targets`, no `--bench`), one tenth of the documents.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cvo::release::{LoadOptions, load};
use cvo::validate::validate;

const HEADER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ns\n";

/// About `size` bytes of ordinary ConfigMap data.
fn clean(size: usize) -> String {
    let mut text = format!("{HEADER}data:\n");
    let mut i = 0;
    while text.len() < size {
        text.push_str(&format!("  key-{i}: \"value {i} with some text\"\n"));
        i += 1;
    }
    text
}

/// One quoted annotation whose every continuation line is under-indented.
fn worst(size: usize) -> String {
    let mut text = format!("{HEADER}  annotations:\n    d: 'start\n");
    while text.len() < size {
        text.push_str("  a continuation line under-indented\n");
    }
    text.push_str("  end'\n");
    text
}

/// Many short quoted scalars, each repaired.
fn worst_many(size: usize) -> String {
    let mut text = format!("{HEADER}data:\n");
    let mut i = 0;
    while text.len() < size {
        text.push_str(&format!("  k{i}: \"a\n  b\"\n"));
        i += 1;
    }
    text
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("load_yaml");
    group.sample_size(10);
    for (name, text) in [
        ("clean", clean(1 << 20)),
        ("worst-case (one long repaired scalar)", worst(1 << 20)),
        ("worst-case (many repaired scalars)", worst_many(1 << 20)),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("0000_10_x_file.yaml"), &text).expect("write");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let release = load(dir.path(), &LoadOptions::default()).expect("load");
                assert!(release.diagnostics.is_empty(), "{:?}", release.diagnostics);
                release.manifests.len()
            })
        });
    }
    group.finish();
}

/// One file of `n` ConfigMaps; with `finding`, each has a map where a string belongs (a
/// `schema-mismatch` that names its field's line).
fn one_file(n: usize, finding: bool) -> tempfile::TempDir {
    let value = if finding { "\n    nested: v" } else { " v" };
    let text: String = (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns\ndata:\n  k:{value}{i}\n"
            )
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("0000_10_big_configmaps.yaml"), text).expect("write");
    dir
}

fn documents_in_one_file(c: &mut Criterion) {
    let scale = if std::env::args().any(|a| a == "--bench") {
        1
    } else {
        10
    };
    let mut group = c.benchmark_group("documents in one file");
    group.sample_size(10);
    for n in [10_000, 20_000, 40_000].map(|n| n / scale) {
        group.throughput(Throughput::Elements(n as u64));
        let plain = one_file(n, false);
        group.bench_with_input(BenchmarkId::new("load", n), &plain, |b, dir| {
            b.iter(|| {
                let release = load(dir.path(), &LoadOptions::default()).expect("load");
                assert_eq!(release.manifests.len(), n);
                release.manifests.len()
            })
        });
        let findings = one_file(n, true);
        group.bench_with_input(
            BenchmarkId::new("load + validate, a finding each", n),
            &findings,
            |b, dir| {
                b.iter(|| {
                    let release = load(dir.path(), &LoadOptions::default()).expect("load");
                    let found = validate(&release, None);
                    assert_eq!(found.len(), n, "one schema-mismatch a document");
                    found.len()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(yaml, benches, documents_in_one_file);
criterion_main!(yaml);
