//! The two figures a pass's time line is judged by, over its task graph: the **critical
//! path** (the chain of nodes that decided when the pass ended, read from when each node
//! actually ran) and the **ordered limit** (how long the graph takes when each node costs only
//! what it waited on outside cvo, with unbounded parallelism: the fastest any applier that
//! keeps the CVO's order could be).
//!
//! The ordered limit is also given for the slots cvo had (`--parallelism`,
//! [`ordered_limit_in_slots`]): the graph run as the executor runs it, each node costing only
//! its waits. A pass far above the unbounded limit but near this one was bound by its slots.
//!
//! All work on [`Node`]s indexed as the task graph's nodes; they know nothing of manifests.

/// One node of the graph as it ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    /// The nodes that must finish before this one starts.
    pub preds: Vec<usize>,
    /// A barrier without work: finished as soon as its predecessors are.
    pub join: bool,
    /// When the node's work ran, in seconds from the pass's start; `None` for joins and for
    /// nodes that never started.
    pub span: Option<(f64, f64)>,
    /// What the node costs in the ordered limit (its tasks' waits on the server, on health and
    /// on deletions, one after another).
    pub cost: f64,
}

/// Who waits for whom: each node's successors, and how many predecessors each node still
/// waits for. Kahn's algorithm ([`topological`]) and the slot-bound walk
/// ([`ordered_limit_in_slots`]) both release nodes through it.
struct Waits {
    succs: Vec<Vec<usize>>,
    waiting: Vec<usize>,
}

impl Waits {
    fn new(nodes: &[Node]) -> Self {
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for &p in &n.preds {
                if let Some(s) = succs.get_mut(p) {
                    s.push(i);
                }
            }
        }
        let waiting = nodes.iter().map(|n| n.preds.len()).collect();
        Self { succs, waiting }
    }

    /// The nodes that wait for nothing, in id order.
    fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.waiting.len()).filter(|&i| self.waiting[i] == 0)
    }

    /// `done` finished: its successors that now wait for nothing go to `ready`.
    fn done(&mut self, done: usize, ready: &mut impl Extend<usize>) {
        for &s in &self.succs[done] {
            self.waiting[s] -= 1;
            if self.waiting[s] == 0 {
                ready.extend([s]);
            }
        }
    }
}

/// The nodes in an order where every node comes after its predecessors (Kahn's algorithm);
/// nodes on a cycle (never in a task graph) are left out.
fn topological(nodes: &[Node]) -> Vec<usize> {
    let mut waits = Waits::new(nodes);
    let mut ready: Vec<usize> = waits.roots().collect();
    ready.reverse();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop() {
        order.push(i);
        waits.done(i, &mut ready);
    }
    order
}

/// When each node finished, joins included (as their last predecessor); `None` for a node
/// that never ran.
fn ends(nodes: &[Node]) -> Vec<Option<f64>> {
    let mut end: Vec<Option<f64>> = vec![None; nodes.len()];
    for i in topological(nodes) {
        let n = &nodes[i];
        end[i] = match n.span {
            Some((_, finished)) => Some(finished),
            None if n.join && n.preds.iter().all(|&p| end[p].is_some()) => {
                Some(n.preds.iter().filter_map(|&p| end[p]).fold(0.0, f64::max))
            }
            None => None,
        };
    }
    end
}

/// How much later than its last predecessor a node may start and still count as started by
/// it; a later start waited for a free slot.
const SLACK: f64 = 0.002;

/// The critical path of a pass: from the node that finished last back to the first, each
/// step to what the node waited for: the predecessor that finished last, or, when the node
/// started later than that (all slots were taken), the node whose end freed its slot. Joins
/// are passed through and left out. In run order; empty when no node ran.
pub fn critical_path(nodes: &[Node]) -> Vec<usize> {
    let end = ends(nodes);
    let latest = |candidates: &mut dyn Iterator<Item = usize>| {
        candidates.max_by(|&a, &b| end[a].unwrap_or(0.0).total_cmp(&end[b].unwrap_or(0.0)))
    };
    let last = latest(&mut (0..nodes.len()).filter(|&i| nodes[i].span.is_some()));
    let mut path = Vec::new();
    let mut seen = vec![false; nodes.len()];
    let mut at = last;
    // Each node once: tasks shorter than the slack could otherwise lead back to one.
    while let Some(i) = at.filter(|&i| !std::mem::replace(&mut seen[i], true)) {
        if !nodes[i].join {
            path.push(i);
        }
        let pred = latest(&mut nodes[i].preds.iter().copied().filter(|&p| end[p].is_some()));
        let pred_end = pred.and_then(|p| end[p]).unwrap_or(0.0);
        at = match nodes[i].span {
            Some((start, _)) if start - pred_end > SLACK => {
                // The node that freed the slot: the last to end before this one started.
                let freed = latest(&mut (0..nodes.len()).filter(|&u| {
                    u != i
                        && !seen[u]
                        && nodes[u]
                            .span
                            .is_some_and(|(_, e)| e > pred_end && e <= start + SLACK)
                }));
                freed.or(pred)
            }
            _ => pred,
        };
    }
    path.reverse();
    path
}

/// The ordered limit: the longest path through the graph when each node costs
/// [`Node::cost`] and any number of nodes run at once.
pub fn ordered_limit(nodes: &[Node]) -> f64 {
    let mut finish = vec![0.0_f64; nodes.len()];
    let mut limit = 0.0_f64;
    for i in topological(nodes) {
        let start = nodes[i]
            .preds
            .iter()
            .map(|&p| finish[p])
            .fold(0.0, f64::max);
        finish[i] = start + nodes[i].cost;
        limit = limit.max(finish[i]);
    }
    limit
}

/// The ordered limit with `slots` nodes at most running at once, started as the executor
/// starts them ([`crate::graph::executor`]): the ready node with the lowest id first, a join
/// passed at once without a slot. The fastest cvo could be with the slots it had, against
/// this pass's answers; [`ordered_limit`] is its value for unbounded slots.
pub fn ordered_limit_in_slots(nodes: &[Node], slots: usize) -> f64 {
    use std::cmp::Reverse;
    use std::collections::{BTreeSet, BinaryHeap};
    let mut waits = Waits::new(nodes);
    let mut ready: BTreeSet<usize> = waits.roots().collect();
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let (mut now, mut limit) = (0.0_f64, 0.0_f64);
    loop {
        // Start what may start: joins pass at once (their successors may become ready).
        while let Some(&i) = ready.first() {
            if !nodes[i].join && running.len() >= slots.max(1) {
                break;
            }
            ready.pop_first();
            if nodes[i].join {
                waits.done(i, &mut ready);
            } else {
                running.push(Reverse(((now + nodes[i].cost.max(0.0)).to_bits(), i)));
            }
        }
        let Some(Reverse((end, i))) = running.pop() else {
            break;
        };
        let end = f64::from_bits(end);
        (now, limit) = (end, limit.max(end));
        waits.done(i, &mut ready);
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` independent nodes costing 1 s each, then one after all of them (through a join).
    fn wide(n: usize) -> Vec<Node> {
        let mut nodes: Vec<Node> = (0..n)
            .map(|_| Node {
                cost: 1.0,
                ..Node::default()
            })
            .collect();
        nodes.push(Node {
            preds: (0..n).collect(),
            join: true,
            ..Node::default()
        });
        nodes.push(Node {
            preds: vec![n],
            cost: 0.5,
            ..Node::default()
        });
        nodes
    }

    #[test]
    fn the_limit_in_slots_runs_as_many_waves_as_the_slots_need() {
        // 40 components in a run level, 16 slots: three waves, then the next run level.
        assert_eq!(ordered_limit(&wide(40)), 1.5);
        assert_eq!(ordered_limit_in_slots(&wide(40), 16), 3.5);
        assert_eq!(ordered_limit_in_slots(&wide(40), 40), 1.5);
        assert_eq!(ordered_limit_in_slots(&wide(40), 1), 40.5);
        // A chain needs no more than one slot.
        let chain: Vec<Node> = (0..3)
            .map(|i| Node {
                preds: if i == 0 { vec![] } else { vec![i - 1] },
                cost: 1.0,
                ..Node::default()
            })
            .collect();
        assert_eq!(ordered_limit_in_slots(&chain, 1), ordered_limit(&chain));
        assert_eq!(ordered_limit_in_slots(&[], 16), 0.0);
    }

    #[test]
    fn the_limit_in_slots_starts_the_lowest_ready_id_first() {
        // Slot-bound, the order decides: node 0 (1 s) and node 1 (3 s) take the two slots,
        // node 2 (3 s) waits for node 0. Unbounded, 3 s.
        let nodes: Vec<Node> = [1.0, 3.0, 3.0]
            .into_iter()
            .map(|cost| Node {
                cost,
                ..Node::default()
            })
            .collect();
        assert_eq!(ordered_limit(&nodes), 3.0);
        assert_eq!(ordered_limit_in_slots(&nodes, 2), 4.0);
    }

    fn node(preds: &[usize], span: (f64, f64), cost: f64) -> Node {
        Node {
            preds: preds.to_vec(),
            join: false,
            span: Some(span),
            cost,
        }
    }

    fn join(preds: &[usize]) -> Node {
        Node {
            preds: preds.to_vec(),
            join: true,
            ..Node::default()
        }
    }

    #[test]
    fn a_chain_is_its_own_critical_path_and_its_limit_is_the_sum_of_its_waits() {
        let nodes = [
            node(&[], (0.0, 1.0), 0.5),
            node(&[0], (1.0, 3.0), 1.5),
            node(&[1], (3.0, 4.0), 0.25),
        ];
        assert_eq!(critical_path(&nodes), [0, 1, 2]);
        assert_eq!(ordered_limit(&nodes), 2.25);
    }

    #[test]
    fn a_fork_follows_the_branch_that_finished_last_through_the_join() {
        // 0 → {1, 2} → join 3 → 4: branch 2 ends last, so the path goes through it.
        let nodes = [
            node(&[], (0.0, 1.0), 1.0),
            node(&[0], (1.0, 2.0), 1.0),
            node(&[0], (1.0, 5.0), 3.0),
            join(&[1, 2]),
            node(&[3], (5.0, 6.0), 1.0),
        ];
        assert_eq!(critical_path(&nodes), [0, 2, 4]);
        // The limit takes the longer branch too: 1 + 3 + 1.
        assert_eq!(ordered_limit(&nodes), 5.0);
    }

    #[test]
    fn a_slow_node_on_a_side_branch_is_the_path_when_it_ends_last() {
        // Two independent chains (a flattened graph): 0 → 1 fast, 2 alone but slow.
        let nodes = [
            node(&[], (0.0, 1.0), 1.0),
            node(&[0], (1.0, 2.0), 1.0),
            node(&[], (0.0, 9.0), 8.0),
        ];
        assert_eq!(critical_path(&nodes), [2]);
        assert_eq!(ordered_limit(&nodes), 8.0);
    }

    #[test]
    fn a_node_that_waited_for_a_slot_follows_the_node_that_freed_it() {
        // With one slot, 1 started only after 0 although it needs nothing from it: the path
        // is both, the limit (unbounded parallelism) only one.
        let nodes = [node(&[], (0.0, 2.0), 2.0), node(&[], (2.0, 4.0), 2.0)];
        assert_eq!(critical_path(&nodes), [0, 1]);
        assert_eq!(ordered_limit(&nodes), 2.0);
        // A node started by its predecessor's end is not credited to another that ended
        // just before it.
        let nodes = [
            node(&[], (0.0, 1.0), 1.0),
            node(&[], (0.0, 0.999), 1.0),
            node(&[0], (1.0, 2.0), 1.0),
        ];
        assert_eq!(critical_path(&nodes), [0, 2]);
    }

    #[test]
    fn nodes_that_never_ran_are_not_on_the_path() {
        // 1 failed; 2 (after it) never started; the path ends at the failure.
        let mut blocked = node(&[1], (0.0, 0.0), 0.0);
        blocked.span = None;
        let nodes = [
            node(&[], (0.0, 1.0), 1.0),
            node(&[0], (1.0, 3.0), 2.0),
            blocked,
        ];
        assert_eq!(critical_path(&nodes), [0, 1]);
        assert!(critical_path(&[]).is_empty());
        assert_eq!(ordered_limit(&[]), 0.0);
    }
}
