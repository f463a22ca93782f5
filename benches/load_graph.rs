//! Load + graph throughput: the shared OpenShift corpus and a generated 20,000-manifest release.
//!
//! `cargo bench --bench load_graph`. Results and the machine go in docs/performance.md.

use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use cvo::release::{LoadOptions, load};

fn corpus() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/openshift-release");
    dir.is_dir().then_some(dir)
}

/// Writes a release of `n` manifests: 40 components over 10 runlevels, ConfigMaps, Deployments
/// and delete manifests, 10 documents per file.
fn generated(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let per_file = 10;
    for file in 0..n.div_ceil(per_file) {
        let runlevel = (file % 10) * 10;
        let component = format!("comp{}", file % 40);
        let mut text = String::new();
        for doc in 0..per_file.min(n - file * per_file) {
            let i = file * per_file + doc;
            let delete = if i % 50 == 0 {
                "\n    release.openshift.io/delete: \"true\""
            } else {
                ""
            };
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns-{component}\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"{delete}\ndata:\n  key: value-{i}\n  config.yaml: |\n    replicas: 3\n    image: quay.io/example/app@sha256:{i:064}\n"
            ));
        }
        std::fs::write(
            dir.path()
                .join(format!("0000_{runlevel:02}_{component}_{file:05}.yaml")),
            text,
        )
        .expect("write");
    }
    dir
}

fn load_and_graph(dir: &Path) -> usize {
    let release = load(dir, &LoadOptions::default()).expect("load");
    cvo::apply::run_level_graph(&release).len()
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("load+graph");
    group.sample_size(10);
    if let Some(dir) = corpus() {
        group.bench_function("openshift-corpus (799 files)", |b| {
            b.iter(|| load_and_graph(&dir))
        });
    } else {
        eprintln!("skipping the corpus benchmark: ../shared/corpus is absent");
    }
    for n in [5_000, 20_000] {
        let dir = generated(n);
        group.bench_function(format!("generated {n} manifests"), |b| {
            b.iter(|| load_and_graph(dir.path()))
        });
    }
    group.finish();
}

criterion_group!(load_graph, benches);
criterion_main!(load_graph);
