//! Walking a [`TaskGraph`] with bounded parallelism.
//!
//! A node starts once all its predecessors succeeded; at most `parallelism` nodes run at a
//! time; a failed node blocks its descendants and nothing else; join nodes complete as soon
//! as they are reached, without calling the work function and without taking a slot. Ready
//! nodes start in ascending id order (apply order), so a run is as predictable as the work
//! allows.
//!
//! The node futures are polled concurrently inside the future returned by [`run`] (a
//! `FuturesUnordered`, no spawning), so the work may borrow from the caller, needs no
//! `'static` or `Send` bound of its own, and the walk works the same on a current-thread and a
//! multi-thread tokio runtime. Work that needs a CPU core of its own can `tokio::spawn`
//! inside the closure and await the handle. Dropping the future returned by [`run`] drops
//! (cancels) every node in flight; [`run_until`] stops starting new nodes and lets the
//! running ones finish.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::pin;

use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};

use super::task_graph::{NodeId, TaskGraph};

/// Default number of nodes run at once, as in CVO.
pub const DEFAULT_PARALLELISM: usize = 16;

/// A node whose work returned an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure<E> {
    /// The failed node.
    pub node: NodeId,
    /// What the work function returned.
    pub error: E,
}

/// A node that never started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStarted {
    /// The node.
    pub node: NodeId,
    /// Failed ancestors that blocked it, ascending. Empty when the run was stopped
    /// ([`run_until`]) before the node's turn came.
    pub blocked_by: Vec<NodeId>,
}

/// Outcome of a walk; every node of the graph appears in exactly one list, each ascending
/// by id. Join nodes are listed like the others (check [`super::Node::is_join`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport<E> {
    /// Nodes whose work succeeded (and joins that were passed).
    pub completed: Vec<NodeId>,
    /// Nodes whose work failed, with the error.
    pub failed: Vec<NodeFailure<E>>,
    /// Nodes that never started.
    pub not_started: Vec<NotStarted>,
}

impl<E> RunReport<E> {
    /// True when every node completed.
    pub fn is_success(&self) -> bool {
        self.failed.is_empty() && self.not_started.is_empty()
    }
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    Done,
    Failed,
}

/// Walks `graph`, calling `work(node, tasks)` for every non-join node whose predecessors all
/// succeeded, with at most `parallelism` calls in flight (`0` counts as 1). `tasks` are the
/// node's task indices in order (into [`TaskGraph::tasks`]); running them one after another
/// and stopping at the first error is the work function's job.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use cvo::graph::{TaskInput, build, run};
/// let graph = build(vec![
///     TaskInput::new("0000_10_a_ns.yaml", "Namespace a").with_key(10, "a"),
///     TaskInput::new("0000_10_b_ns.yaml", "Namespace b").with_key(10, "b"),
/// ]);
/// let report = run(&graph, 16, |_node, tasks| async move {
///     for &t in tasks { let _ = t; /* apply task t */ }
///     Ok::<(), String>(())
/// })
/// .await;
/// assert!(report.is_success());
/// # });
/// ```
pub async fn run<'g, E, F, Fut>(graph: &'g TaskGraph, parallelism: usize, work: F) -> RunReport<E>
where
    F: FnMut(NodeId, &'g [usize]) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    run_until(graph, parallelism, std::future::pending::<()>(), work).await
}

/// Like [`run`], but once `stop` completes no further node starts; nodes already running
/// finish and are reported, the rest are listed as never started (with empty `blocked_by`
/// unless a failure blocked them too).
pub async fn run_until<'g, E, F, Fut, S>(
    graph: &'g TaskGraph,
    parallelism: usize,
    stop: S,
    mut work: F,
) -> RunReport<E>
where
    F: FnMut(NodeId, &'g [usize]) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    S: Future<Output = ()>,
{
    let parallelism = parallelism.max(1);
    let mut walk = Walk::new(graph);
    let mut errors: Vec<NodeFailure<E>> = Vec::new();
    let mut in_flight = FuturesUnordered::new();
    let mut stop = pin!(stop.fuse());
    let mut stopped = false;

    loop {
        if !stopped && stop.as_mut().now_or_never().is_some() {
            stopped = true;
        }
        while !stopped && in_flight.len() < parallelism {
            let Some(id) = walk.start_next() else { break };
            let tasks: &'g [usize] = graph.node(id).tasks();
            in_flight.push(work(id, tasks).map(move |result| (id, result)));
        }
        if in_flight.is_empty() {
            break;
        }
        let finished = if stopped {
            in_flight.next().await
        } else {
            tokio::select! {
                biased;
                finished = in_flight.next() => finished,
                () = &mut stop => {
                    stopped = true;
                    continue;
                }
            }
        };
        let Some((id, result)) = finished else { break };
        match result {
            Ok(()) => walk.complete(id),
            Err(error) => {
                walk.state[id.0] = State::Failed;
                errors.push(NodeFailure { node: id, error });
            }
        }
    }

    errors.sort_by_key(|f| f.node);
    let completed = graph
        .node_ids()
        .filter(|id| walk.state[id.0] == State::Done)
        .collect();
    let not_started = not_started(graph, &walk.state, &errors);
    RunReport {
        completed,
        failed: errors,
        not_started,
    }
}

/// Where a walk of a graph stands: each node's state, how many predecessors each still
/// waits for, and the nodes ready to start.
struct Walk<'g> {
    graph: &'g TaskGraph,
    state: Vec<State>,
    waiting_on: Vec<usize>,
    ready: BTreeSet<NodeId>,
}

impl<'g> Walk<'g> {
    /// The start of a walk: roots are ready, join roots passed at once.
    fn new(graph: &'g TaskGraph) -> Self {
        let mut walk = Walk {
            graph,
            state: vec![State::Waiting; graph.len()],
            waiting_on: graph
                .node_ids()
                .map(|id| graph.predecessors(id).len())
                .collect(),
            ready: BTreeSet::new(),
        };
        for id in graph.roots() {
            if graph.node(id).is_join() {
                walk.complete(id);
            } else {
                walk.ready.insert(id);
            }
        }
        walk
    }

    /// The ready node with the lowest id, marked running.
    fn start_next(&mut self) -> Option<NodeId> {
        let id = self.ready.pop_first()?;
        self.state[id.0] = State::Running;
        Some(id)
    }

    /// Marks `id` done and moves successors whose predecessors all succeeded to `ready`,
    /// passing through join nodes at once.
    fn complete(&mut self, id: NodeId) {
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            self.state[id.0] = State::Done;
            for next in self.graph.successors(id) {
                self.waiting_on[next.0] -= 1;
                if self.waiting_on[next.0] == 0 {
                    if self.graph.node(next).is_join() {
                        stack.push(next);
                    } else {
                        self.ready.insert(next);
                    }
                }
            }
        }
    }
}

fn not_started<E>(
    graph: &TaskGraph,
    state: &[State],
    failed: &[NodeFailure<E>],
) -> Vec<NotStarted> {
    let mut blocked_by: Vec<Vec<NodeId>> = vec![Vec::new(); graph.len()];
    // Failures are ascending, so each node's blockers come out ascending.
    for failure in failed {
        let mut seen = vec![false; graph.len()];
        let mut stack = graph.successors(failure.node);
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut seen[id.0], true) {
                continue;
            }
            blocked_by[id.0].push(failure.node);
            stack.extend(graph.successors(id));
        }
    }
    graph
        .node_ids()
        .filter(|id| matches!(state[id.0], State::Waiting | State::Running))
        .map(|node| NotStarted {
            node,
            blocked_by: std::mem::take(&mut blocked_by[node.0]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::oneshot;

    use super::super::build::{build, build_flattened};
    use super::super::task_graph::TaskInput;
    use super::*;

    fn keyed(names: &[(u32, &str)]) -> Vec<TaskInput> {
        names
            .iter()
            .enumerate()
            .map(|(i, (rl, c))| {
                TaskInput::new(format!("0000_{rl:02}_{c}_{i}.yaml"), "x").with_key(*rl, *c)
            })
            .collect()
    }

    fn ids(v: &[usize]) -> Vec<NodeId> {
        v.iter().copied().map(NodeId).collect()
    }

    /// 40 components in one run level, then one more run level.
    fn wide() -> TaskGraph {
        let comps: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
        let mut names: Vec<(u32, &str)> = comps.iter().map(|c| (10, c.as_str())).collect();
        names.push((20, "tail"));
        build(keyed(&names))
    }

    async fn max_concurrency(graph: &TaskGraph, parallelism: usize) -> (usize, RunReport<()>) {
        let current = AtomicUsize::new(0);
        let max = AtomicUsize::new(0);
        let report = run(graph, parallelism, |_, _| {
            let (current, max) = (&current, &max);
            async move {
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                // Give every other started node a chance to run before this one ends.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
                current.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .await;
        (max.load(Ordering::SeqCst), report)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn parallelism_is_bounded_and_used() {
        let g = wide();
        for p in [1, 4, 16] {
            let (max, report) = max_concurrency(&g, p).await;
            assert_eq!(max, p, "parallelism {p}");
            assert!(report.is_success());
            assert_eq!(report.completed.len(), g.len());
        }
        // 0 is treated as 1.
        assert_eq!(max_concurrency(&g, 0).await.0, 1);
        // Above the width of the graph: all 40 at once.
        assert_eq!(max_concurrency(&g, 100).await.0, 40);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn works_on_multi_thread_runtime_and_is_send() {
        let g = std::sync::Arc::new(wide());
        let handle = tokio::spawn({
            let g = g.clone();
            async move {
                run(&g, 8, |_, tasks| async move {
                    tokio::task::yield_now().await;
                    if tasks.is_empty() {
                        Err("empty")
                    } else {
                        Ok(())
                    }
                })
                .await
            }
        });
        let report = handle.await.unwrap();
        assert!(report.is_success());
        assert_eq!(report.completed, g.node_ids().collect::<Vec<_>>());
        assert_eq!(max_concurrency(&g, 8).await.0, 8);
    }

    #[tokio::test]
    async fn node_starts_only_after_predecessors_succeeded() {
        let g = build(keyed(&[
            (0, "a"),
            (10, "b"),
            (10, "c"),
            (10, "d"),
            (20, "e"),
            (20, "f"),
            (30, "g"),
        ]));
        let log = Mutex::new(Vec::new());
        let report = run(&g, 3, |id, _| {
            let log = &log;
            async move {
                log.lock().unwrap().push(("start", id));
                tokio::task::yield_now().await;
                log.lock().unwrap().push(("end", id));
                Ok::<(), ()>(())
            }
        })
        .await;
        assert!(report.is_success());
        let log = log.into_inner().unwrap();
        let pos = |ev: &str, id: NodeId| log.iter().position(|e| *e == (ev, id));
        for (from, to) in g.edges() {
            let preds = if g.node(from).is_join() {
                g.predecessors(from)
            } else {
                vec![from]
            };
            if g.node(to).is_join() {
                continue;
            }
            for p in preds {
                assert!(
                    pos("end", p).unwrap() < pos("start", to).unwrap(),
                    "{p} before {to}"
                );
            }
        }
        // Joins never reach the work function.
        let joins: Vec<NodeId> = g
            .nodes()
            .filter(|(_, n)| n.is_join())
            .map(|(id, _)| id)
            .collect();
        assert!(!joins.is_empty());
        assert!(joins.iter().all(|j| pos("start", *j).is_none()));
        assert!(joins.iter().all(|j| report.completed.contains(j)));
    }

    #[tokio::test]
    async fn failure_blocks_only_descendants() {
        // Nodes: 0 = 10 a, 1 = 10 b, 2 = 20 c (after both).
        let flat = |v: &[(u32, &str)]| build(keyed(v));
        let g = flat(&[(10, "a"), (10, "b"), (20, "c")]);
        let started = Mutex::new(Vec::new());
        // Parallelism 1: `a` runs and fails first, `b` must still start afterwards.
        let report = run(&g, 1, |id, _| {
            started.lock().unwrap().push(id);
            async move { if id == NodeId(0) { Err("boom") } else { Ok(()) } }
        })
        .await;
        assert_eq!(started.into_inner().unwrap(), ids(&[0, 1]));
        assert_eq!(report.completed, ids(&[1]));
        assert_eq!(
            report.failed,
            vec![NodeFailure {
                node: NodeId(0),
                error: "boom"
            }]
        );
        assert_eq!(
            report.not_started,
            vec![NotStarted {
                node: NodeId(2),
                blocked_by: ids(&[0])
            }]
        );
        assert!(!report.is_success());
    }

    #[tokio::test]
    async fn independent_branches_complete_and_blockers_are_named() {
        // 0: 00 head; 1..3: 10 {a,b,c}; 4: join; 5,6: 20 {d,e}; 7: 30 f.
        let g = build(keyed(&[
            (0, "head"),
            (10, "a"),
            (10, "b"),
            (10, "c"),
            (20, "d"),
            (20, "e"),
            (30, "f"),
        ]));
        assert!(g.node(NodeId(4)).is_join());
        let report = run(&g, 16, |id, _| async move {
            if id == NodeId(2) || id == NodeId(3) {
                Err(id.0)
            } else {
                Ok(())
            }
        })
        .await;
        assert_eq!(report.completed, ids(&[0, 1]));
        assert_eq!(
            report
                .failed
                .iter()
                .map(|f| (f.node, f.error))
                .collect::<Vec<_>>(),
            vec![(NodeId(2), 2), (NodeId(3), 3)]
        );
        let blocked: Vec<(NodeId, Vec<NodeId>)> = report
            .not_started
            .iter()
            .map(|n| (n.node, n.blocked_by.clone()))
            .collect();
        assert_eq!(
            blocked,
            vec![
                (NodeId(4), ids(&[2, 3])),
                (NodeId(5), ids(&[2, 3])),
                (NodeId(6), ids(&[2, 3])),
                (NodeId(7), ids(&[2, 3])),
            ]
        );

        // Flattened: everything is independent, one failure blocks nothing.
        let g = build_flattened(keyed(&[(10, "a"), (10, "b"), (20, "c"), (20, "d")]));
        let report = run(&g, 2, |id, _| async move {
            if id == NodeId(0) { Err(()) } else { Ok(()) }
        })
        .await;
        assert_eq!(report.completed, ids(&[1, 2, 3]));
        assert_eq!(report.failed.len(), 1);
        assert!(report.not_started.is_empty());
    }

    #[tokio::test]
    async fn other_branches_run_while_one_is_stuck() {
        // Flattened a, b, c: `a` waits for a signal that `c`'s completion sends.
        let g = build_flattened(keyed(&[(10, "a"), (10, "b"), (20, "c")]));
        let (tx, rx) = oneshot::channel::<()>();
        let rx = Mutex::new(Some(rx));
        let tx = Mutex::new(Some(tx));
        let order = Mutex::new(Vec::new());
        let report = run(&g, 3, |id, _| {
            let (rx, tx, order) = (&rx, &tx, &order);
            async move {
                if id == NodeId(0) {
                    let rx = rx.lock().unwrap().take().unwrap();
                    rx.await.unwrap();
                } else if id == NodeId(2) {
                    tx.lock().unwrap().take().unwrap().send(()).unwrap();
                }
                order.lock().unwrap().push(id);
                Ok::<(), ()>(())
            }
        })
        .await;
        assert!(report.is_success());
        let order = order.into_inner().unwrap();
        assert_eq!(order.last(), Some(&NodeId(0)));
    }

    #[tokio::test]
    async fn work_receives_node_tasks_in_order() {
        let g = build(vec![
            TaskInput::new("x", "x"),
            TaskInput::new("0000_10_a_1", "a").with_key(10, "a"),
            TaskInput::new("0000_10_a_2", "a").with_key(10, "a"),
            TaskInput::new("0000_10_b_1", "b").with_key(10, "b"),
        ]);
        let seen = Mutex::new(Vec::new());
        let report = run(&g, 4, |id, tasks| {
            seen.lock().unwrap().push((id, tasks.to_vec()));
            async { Ok::<(), ()>(()) }
        })
        .await;
        assert!(report.is_success());
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (NodeId(0), vec![0]),
                (NodeId(1), vec![1, 2]),
                (NodeId(2), vec![3])
            ]
        );
    }

    #[tokio::test]
    async fn empty_graph() {
        let g = build(vec![]);
        let report = run(&g, 16, |_, _| async { Ok::<(), ()>(()) }).await;
        assert!(report.is_success());
        assert!(report.completed.is_empty());
        assert!(report.failed.is_empty());
        assert!(report.not_started.is_empty());
    }

    #[tokio::test]
    async fn stop_lets_running_nodes_finish_and_starts_nothing_new() {
        // 0 → {1, 2} → join 3 → {4, 5}.
        let g = build(keyed(&[
            (0, "a"),
            (10, "b"),
            (10, "c"),
            (20, "d"),
            (20, "e"),
        ]));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let stop_tx = Mutex::new(Some(stop_tx));
        let report = run_until(
            &g,
            16,
            async {
                stop_rx.await.ok();
            },
            |id, _| {
                let stop_tx = &stop_tx;
                async move {
                    if id == NodeId(1) {
                        // Stop while 1 and 2 are running; both still complete.
                        stop_tx.lock().unwrap().take().unwrap().send(()).unwrap();
                        tokio::task::yield_now().await;
                    }
                    Ok::<(), ()>(())
                }
            },
        )
        .await;
        // The join (3) has no work: it passes as soon as 1 and 2 are done.
        assert_eq!(report.completed, ids(&[0, 1, 2, 3]));
        assert!(report.failed.is_empty());
        assert_eq!(
            report.not_started,
            vec![
                NotStarted {
                    node: NodeId(4),
                    blocked_by: vec![]
                },
                NotStarted {
                    node: NodeId(5),
                    blocked_by: vec![]
                },
            ]
        );
    }
}
