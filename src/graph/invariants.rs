//! Randomised checks of the builder and the executor against their contracts (tests only).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use fastrand::Rng;

use super::{Layout, NodeId, TaskGraph, TaskInput, build, build_flattened, run};

fn random_tasks(rng: &mut Rng) -> Vec<TaskInput> {
    let n = rng.u64(..30) as usize;
    let mut runlevel = 0;
    (0..n)
        .map(|i| {
            let t = TaskInput::new(format!("f{i}"), format!("t{i}"));
            if rng.u64(..6) == 0 {
                return t;
            }
            // Mostly ascending run levels, sometimes a step back (unsorted input).
            match rng.u64(..5) {
                0 => runlevel += 10,
                1 if runlevel >= 10 => runlevel -= 10,
                _ => {}
            }
            let comp = ["a", "b", "c"][rng.u64(..3) as usize];
            t.with_key(runlevel, comp).with_delete(rng.u64(..4) == 0)
        })
        .collect()
}

fn reachable(g: &TaskGraph, from: NodeId) -> HashSet<NodeId> {
    let mut seen = HashSet::new();
    let mut stack = g.successors(from);
    while let Some(id) = stack.pop() {
        if seen.insert(id) {
            stack.extend(g.successors(id));
        }
    }
    seen
}

/// Whether tasks `i < j` are in one segment: keyed, same run level, nothing else between.
fn same_segment(tasks: &[TaskInput], i: usize, j: usize) -> bool {
    let Some(rl) = tasks[i].key.as_ref().map(|k| k.runlevel) else {
        return false;
    };
    tasks[i..=j]
        .iter()
        .all(|t| t.key.as_ref().is_some_and(|k| k.runlevel == rl))
}

fn check_graph(g: &TaskGraph) {
    let tasks = g.tasks();
    let mut node_of = vec![None; tasks.len()];
    for (id, node) in g.nodes() {
        assert!(
            node.tasks().windows(2).all(|w| w[0] < w[1]),
            "apply order kept in {id}"
        );
        for &t in node.tasks() {
            assert!(node_of[t].replace(id).is_none(), "task {t} in two nodes");
        }
        if node.is_join() {
            assert!(g.predecessors(id).len() > 1 && g.successors(id).len() > 1);
        } else {
            assert!(!node.tasks().is_empty());
        }
    }
    assert!(node_of.iter().all(Option::is_some), "every task placed");
    for (from, to) in g.edges() {
        assert!(from < to, "ids are a topological order");
    }
    match g.layout() {
        Layout::Flattened => assert!(g.edges().is_empty()),
        Layout::RunLevels => {
            for i in 0..tasks.len() {
                let ni = node_of[i].unwrap();
                let after = reachable(g, ni);
                for j in i + 1..tasks.len() {
                    let nj = node_of[j].unwrap();
                    if ni != nj && !same_segment(tasks, i, j) {
                        assert!(
                            after.contains(&nj),
                            "task {i} ({ni}) must precede task {j} ({nj})"
                        );
                    }
                    if ni != nj && same_segment(tasks, i, j) {
                        // Different components of one run level: independent.
                        assert!(!after.contains(&nj));
                        assert_ne!(tasks[i].key, tasks[j].key);
                    }
                }
            }
        }
    }
}

#[test]
fn random_graphs_keep_apply_order() {
    // Seeded: the same cases on every run.
    let mut rng = Rng::with_seed(7);
    for _ in 0..300 {
        let tasks = random_tasks(&mut rng);
        check_graph(&build(tasks.clone()));
        check_graph(&build_flattened(tasks));
    }
}

#[tokio::test]
async fn random_runs_keep_executor_contract() {
    let mut rng = Rng::with_seed(11);
    for _ in 0..200 {
        let tasks = random_tasks(&mut rng);
        let g = if rng.u64(..3) == 0 {
            build_flattened(tasks)
        } else {
            build(tasks)
        };
        let failing: HashSet<NodeId> = g.node_ids().filter(|_| rng.u64(..5) == 0).collect();
        let parallelism = 1 + rng.u64(..4) as usize;
        let (current, max) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = Mutex::new(Vec::new());
        let report = run(&g, parallelism, |id, _| {
            started.lock().unwrap().push(id);
            let (current, max, fail) = (&current, &max, failing.contains(&id));
            async move {
                max.fetch_max(current.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                current.fetch_sub(1, Ordering::SeqCst);
                if fail { Err(id) } else { Ok(()) }
            }
        })
        .await;
        assert!(max.load(Ordering::SeqCst) <= parallelism);

        let completed: HashSet<NodeId> = report.completed.iter().copied().collect();
        let failed: HashSet<NodeId> = report.failed.iter().map(|f| f.node).collect();
        let not_started: HashSet<NodeId> = report.not_started.iter().map(|n| n.node).collect();
        assert_eq!(completed.len() + failed.len() + not_started.len(), g.len());
        assert_eq!(failed, failing.intersection(&failed).copied().collect());
        let started: HashSet<NodeId> = started.into_inner().unwrap().into_iter().collect();
        for id in g.node_ids() {
            let preds_ok = g.predecessors(id).iter().all(|p| completed.contains(p));
            if completed.contains(&id) || failed.contains(&id) {
                assert!(preds_ok, "{id} ran before its predecessors succeeded");
                assert_eq!(started.contains(&id), !g.node(id).is_join());
            } else {
                assert!(!preds_ok, "{id} was ready but never started");
                assert!(!started.contains(&id));
            }
        }
        for ns in &report.not_started {
            assert!(!ns.blocked_by.is_empty());
            for b in &ns.blocked_by {
                assert!(failed.contains(b) && reachable(&g, *b).contains(&ns.node));
            }
        }
        for f in &report.failed {
            assert_eq!(f.error, f.node);
        }
    }
}
