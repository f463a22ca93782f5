//! YAML loading throughput in MB/s (docs/performance.md): clean input, and the worst case for the
//! under-indented quoted-scalar repair (every line of the document a continuation line that
//! must be repaired), one file of about 1 MB each. Loading is linear, so both are a constant
//! number of MB/s whatever the size.
//!
//! `cargo bench --bench load_yaml`. Results go in docs/limits.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cvo::release::{LoadOptions, load};

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

criterion_group!(yaml, benches);
criterion_main!(yaml);
