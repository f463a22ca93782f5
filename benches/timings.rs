//! `--timings` after a pass: the figures (critical path, ordered limit, slowest tasks) and the
//! page, for a pass of the generated 5,040-manifest release with made-up times. What a user
//! pays at the end of `cvo apply --timings`, on top of the pass.
//!
//! `cargo bench --bench timings`. Results go in docs/performance.md.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use cvo::apply::{Action, PassTimeline, TaskRun, TaskTime};
use cvo::release::LoadOptions;
use tokio::time::Instant;

// Only the generated release is used here; the installer step is the apply benches'.
#[allow(dead_code)]
mod common;

/// A timeline of `graph`'s nodes run one after another, each task 1 ms of which half waited on
/// the server.
fn timeline(graph: cvo::graph::TaskGraph, tasks: usize) -> PassTimeline {
    let started = Instant::now();
    let mut at = started;
    let mut runs = vec![None; tasks];
    let mut nodes = vec![None; graph.len()];
    for (id, node) in graph.nodes() {
        let node_start = at;
        for &t in node.tasks() {
            let end = at + Duration::from_millis(1);
            runs[t] = Some(TaskRun {
                action: Action::Unchanged,
                started: at,
                finished: end,
                time: TaskTime {
                    server: Duration::from_micros(500),
                    ..TaskTime::default()
                },
            });
            at = end;
        }
        if !node.is_join() {
            nodes[id.0] = Some((node_start, at));
        }
    }
    PassTimeline {
        graph: std::sync::Arc::new(graph),
        started,
        finished: at,
        nodes,
        tasks: runs,
    }
}

fn benches(c: &mut Criterion) {
    let dir = common::generated(5_000);
    let release = cvo::release::load(dir.path(), &LoadOptions::default()).expect("load");
    let pass = timeline(
        cvo::apply::run_level_graph(&release),
        release.manifests.len(),
    );
    let passes = [pass];
    let mut group = c.benchmark_group("timings (5,040 tasks)");
    group.sample_size(20);
    group.bench_function("figures", |b| {
        b.iter(|| cvo::timings::Timings::of(&release, &passes, 16))
    });
    let timings = cvo::timings::Timings::of(&release, &passes, 16);
    group.bench_function("page", |b| b.iter(|| cvo::timings::page(&timings).len()));
    group.finish();
}

criterion_group!(timings, benches);
criterion_main!(timings);
