//! Load + graph with the parse cache (issue 36): cold (no cache), filling an empty cache, and
//! warm (every file a hit), on the shared OpenShift corpus (`CVO_TEST_CORPUS`, else
//! ../shared/corpus; skipped with a note when absent) and on a generated release of 5,000
//! small manifests. After the timings, the CPU time (user + system, all threads) of one load
//! of each kind is printed: the parse is parallel, so the wall time alone hides it.
//!
//! `cargo bench --bench load -- --warm-up-time 1 --measurement-time 5`. Results and the
//! machine go in docs/performance.md ("Parse cache").

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use cvo::release::{LoadOptions, ParseCache, load_selected};

fn corpus() -> Option<PathBuf> {
    let root = std::env::var_os("CVO_TEST_CORPUS")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"));
    let dir = root.join("openshift-release");
    dir.is_dir().then_some(dir)
}

/// A release of `n` small manifests, one ConfigMap per file, over 10 run levels.
fn generated(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..n {
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns-{}\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\ndata:\n  key: value-{i}\n",
            i % 40
        );
        let name = format!("0000_{:02}_comp{}_{i:05}.yaml", (i % 10) * 10, i % 40);
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    dir
}

fn options(cache: Option<&Path>) -> LoadOptions {
    LoadOptions {
        cache: cache.map(ParseCache::new),
        ..LoadOptions::default()
    }
}

/// Loads `dir` as `--release` is loaded, and builds its run-level graph.
fn load_and_graph(dir: &Path, options: &LoadOptions) -> usize {
    let (release, _) = load_selected(dir, options).expect("load");
    cvo::apply::run_level_graph(&release).len()
}

/// User + system CPU time of this process so far, all threads (Linux: /proc/self/stat, in
/// USER_HZ ticks of 10 ms); zero where it cannot be read.
fn cpu() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses): utime and stime are the
    // 12th and 13th of them.
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    std::time::Duration::from_millis(ticks * 10)
}

fn bench_release(c: &mut Criterion, name: &str, dir: &Path) {
    let cold = options(None);
    let warm_dir = tempfile::tempdir().expect("tempdir");
    let warm = options(Some(warm_dir.path()));
    load_and_graph(dir, &warm);
    let mut group = c.benchmark_group(format!("load+graph {name}"));
    group.sample_size(10);
    group.bench_function("cold (no cache)", |b| b.iter(|| load_and_graph(dir, &cold)));
    group.bench_function("filling an empty cache", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("tempdir"),
            // The directory is returned: removed after the timing, not in it.
            |empty| (load_and_graph(dir, &options(Some(empty.path()))), empty),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("warm (cache filled)", |b| {
        b.iter(|| load_and_graph(dir, &warm))
    });
    group.finish();
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this once as a test, where
    // one load of each kind checks the path (an unoptimised build's figure means nothing).
    let runs: u32 = if std::env::args().any(|a| a == "--bench") {
        10
    } else {
        1
    };
    let per_load = |options: &LoadOptions| {
        let before = cpu();
        for _ in 0..runs {
            load_and_graph(dir, options);
        }
        (cpu() - before) / runs
    };
    let (cold_cpu, warm_cpu) = (per_load(&cold), per_load(&warm));
    println!(
        "load+graph {name}: CPU per load cold {:.1} ms, warm {:.1} ms ({:.0}% of cold)",
        cold_cpu.as_secs_f64() * 1e3,
        warm_cpu.as_secs_f64() * 1e3,
        100.0 * warm_cpu.as_secs_f64() / cold_cpu.as_secs_f64().max(f64::EPSILON)
    );
}

fn benches(c: &mut Criterion) {
    match corpus() {
        Some(dir) => bench_release(c, "openshift corpus", &dir),
        None => println!(
            "skipping the corpus case: no openshift-release in CVO_TEST_CORPUS or ../shared/corpus"
        ),
    }
    let generated = generated(5_000);
    bench_release(c, "5,000 generated manifests", generated.path());
}

criterion_group!(load, benches);
criterion_main!(load);
