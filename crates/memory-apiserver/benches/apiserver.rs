//! Requests/s of the in-memory API server through a real `kube::Client` (in-process service):
//! get, server-side apply (changing and no-op) and list, on 20,000 ConfigMaps in 20 namespaces,
//! with 50 watchers consuming every ConfigMap event. `*_raw_json` variants skip the client-side
//! decoding into k8s-openapi types. Run with `cargo bench -p memory-apiserver --profile dev --bench
//! apiserver` (the numbers in cvo's docs/performance.md) or plain `cargo bench -p memory-apiserver
//! --bench apiserver` (optimised).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchParams};
use memory_apiserver::{Config, MemoryServer};
use serde_json::json;

fn bench(c: &mut Criterion) {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs bench targets without it.
    let (namespaces, per_ns) = if std::env::args().any(|a| a == "--bench") {
        (20, 1000)
    } else {
        (2, 100)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(async { MemoryServer::start(Config::default()) });
    let client = rt.block_on(async { server.client() });
    let events = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let nss: Api<Namespace> = Api::all(client.clone());
        for n in 0..namespaces {
            let ns = serde_json::from_value(json!({"metadata": {"name": format!("ns-{n}")}})).unwrap();
            nss.create(&PostParams::default(), &ns).await.unwrap();
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &format!("ns-{n}"));
            for i in 0..per_ns {
                let cm = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}"), "labels": {"shard": (i % 10).to_string()}}, "data": {"k": "v"}})).unwrap();
                cms.create(&PostParams::default(), &cm).await.unwrap();
            }
        }
        let all: Api<ConfigMap> = Api::all(client.clone());
        let rv = all.list_metadata(&ListParams::default().limit(1)).await.unwrap().metadata.resource_version.unwrap();
        for _ in 0..50 {
            let mut s = all.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
            let events = events.clone();
            tokio::spawn(async move {
                while let Some(Ok(_)) = s.next().await {
                    events.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns-1");
    let mut g = c.benchmark_group("apiserver_20k");
    g.throughput(Throughput::Elements(1))
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    let mut i = 0usize;
    g.bench_function("get", |b| {
        b.iter(|| {
            i = (i + 7919) % per_ns;
            black_box(rt.block_on(cms.get(&format!("cm-{i}"))).unwrap())
        })
    });
    let pp = PatchParams::apply("bench").force();
    let mut n = 0u64;
    g.bench_function("ssa_change", |b| {
        b.iter(|| {
            n += 1;
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{}", n % per_ns as u64)}, "data": {"k": n.to_string()}});
            black_box(rt.block_on(cms.patch(&format!("cm-{}", n % per_ns as u64), &pp, &Patch::Apply(&cm))).unwrap())
        })
    });
    let fixed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k": "fixed"}});
    rt.block_on(cms.patch("cm-1", &pp, &Patch::Apply(&fixed)))
        .unwrap();
    g.bench_function("ssa_noop", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(cms.patch("cm-1", &pp, &Patch::Apply(&fixed)))
                    .unwrap(),
            )
        })
    });
    g.sample_size(10);
    g.bench_function("list_namespace_1000", |b| {
        b.iter(|| black_box(rt.block_on(cms.list(&ListParams::default())).unwrap()))
    });
    g.bench_function("list_namespace_1000_raw_json", |b| {
        b.iter(|| {
            let req = http::Request::get("/api/v1/namespaces/ns-1/configmaps")
                .body(Vec::new())
                .unwrap();
            black_box(rt.block_on(client.request_text(req)).unwrap())
        })
    });
    g.bench_function("list_label_selector_100", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(cms.list(&ListParams::default().labels("shard=3")))
                    .unwrap(),
            )
        })
    });
    g.bench_function("list_page_500_of_20000", |b| {
        let all: Api<ConfigMap> = Api::all(client.clone());
        b.iter(|| {
            black_box(
                rt.block_on(all.list(&ListParams::default().limit(500)))
                    .unwrap(),
            )
        })
    });
    g.finish();
    eprintln!(
        "watch events delivered to 50 watchers: {}",
        events.load(Ordering::Relaxed)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
