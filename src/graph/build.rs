//! Building a [`TaskGraph`] from tasks in apply order.
//!
//! Same semantics as CVO's `ByNumberAndComponent` (installs and updates) and
//! `FlattenByNumberAndComponent` (reconciling):
//!
//! 1. A *segment* is a maximal run of consecutive keyed tasks sharing one run level.
//! 2. A segment with two or more components becomes parallel nodes, one serial node per
//!    component. (CVO starts a new node at every component change, so a component whose
//!    files are not contiguous would run in two parallel pieces; we keep one serial node per
//!    component so its files never race each other. Lexically sorted input never differs.)
//! 3. Everything else — single-component segments and tasks without a key — is serial and
//!    merges with its serial neighbours into one node, so adjacent single-component run
//!    levels (`07_a`, `08_a`) form one node, as do unkeyed files between them.
//! 4. [`build`] chains these groups in order: every node of a group waits for every node of
//!    the previous group. Between two groups of parallel nodes a [`Node::Join`] carries the
//!    barrier (M + N edges instead of M × N).
//! 5. [`build_flattened`] makes the same nodes without any edge: all chains run in parallel.
//!
//! Node ids follow creation order, which follows apply order: same input, same graph.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};

use super::task_graph::{Layout, Node, TaskGraph, TaskInput};

/// Builds the run-level graph used for installs and updates: run level N+1 starts only after
/// every node of run level N succeeded; components of one run level run in parallel.
pub fn build(tasks: Vec<TaskInput>) -> TaskGraph {
    assemble(tasks, Layout::RunLevels)
}

/// Builds the flattened graph used for reconciling: the same serial nodes as [`build`], all
/// independent (no edges, no run-level barriers).
pub fn build_flattened(tasks: Vec<TaskInput>) -> TaskGraph {
    assemble(tasks, Layout::Flattened)
}

/// A step of the apply order: one serial chain, or parallel chains.
#[derive(Debug, PartialEq, Eq)]
enum Group {
    Serial(Vec<usize>),
    Parallel(Vec<Vec<usize>>),
}

fn groups(tasks: &[TaskInput]) -> Vec<Group> {
    let mut out = Vec::new();
    let mut serial: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < tasks.len() {
        let Some(key) = &tasks[i].key else {
            serial.push(i);
            i += 1;
            continue;
        };
        // The segment: consecutive keyed tasks of this run level, chains by component in
        // order of first appearance.
        let mut chains: Vec<Vec<usize>> = Vec::new();
        let mut by_component: HashMap<&str, usize> = HashMap::new();
        let mut j = i;
        while let Some(k) = tasks.get(j).and_then(|t| t.key.as_ref())
            && k.runlevel == key.runlevel
        {
            let chain = *by_component.entry(&k.component).or_insert_with(|| {
                chains.push(Vec::new());
                chains.len() - 1
            });
            chains[chain].push(j);
            j += 1;
        }
        if chains.len() == 1 {
            serial.append(&mut chains[0]);
        } else {
            if !serial.is_empty() {
                out.push(Group::Serial(std::mem::take(&mut serial)));
            }
            out.push(Group::Parallel(chains));
        }
        i = j;
    }
    if !serial.is_empty() {
        out.push(Group::Serial(serial));
    }
    out
}

fn assemble(tasks: Vec<TaskInput>, layout: Layout) -> TaskGraph {
    let mut graph: DiGraph<Node, ()> = DiGraph::new();
    let mut frontier: Vec<NodeIndex> = Vec::new();
    for group in groups(&tasks) {
        let chains = match group {
            Group::Serial(tasks) => vec![tasks],
            Group::Parallel(chains) => chains,
        };
        if layout == Layout::Flattened {
            for tasks in chains {
                graph.add_node(Node::Serial { tasks });
            }
            continue;
        }
        let mut before = std::mem::take(&mut frontier);
        if before.len() > 1 && chains.len() > 1 {
            let join = graph.add_node(Node::Join);
            for &p in &before {
                graph.add_edge(p, join, ());
            }
            before = vec![join];
        }
        for tasks in chains {
            let node = graph.add_node(Node::Serial { tasks });
            for &p in &before {
                graph.add_edge(p, node, ());
            }
            frontier.push(node);
        }
    }
    TaskGraph::from_parts(layout, tasks, graph)
}

#[cfg(test)]
mod tests {
    use super::super::task_graph::NodeId;
    use super::*;

    /// Tasks named like CVO's tests: a name following the convention gets its key.
    pub(crate) fn tasks(names: &[&str]) -> Vec<TaskInput> {
        names
            .iter()
            .map(|name| {
                let t = TaskInput::new(*name, format!("object {name}"));
                let parts: Vec<&str> = name.split('_').collect();
                match parts.as_slice() {
                    ["0000", rl, comp, _, ..] => t.with_key(rl.parse().unwrap(), *comp),
                    _ => t,
                }
            })
            .collect()
    }

    /// Each node as the list of its tasks' file names.
    fn shape(g: &TaskGraph) -> Vec<Vec<&str>> {
        g.nodes()
            .map(|(_, n)| {
                n.tasks()
                    .iter()
                    .map(|&t| g.tasks()[t].file.as_str())
                    .collect()
            })
            .collect()
    }

    fn edges(g: &TaskGraph) -> Vec<(usize, usize)> {
        g.edges().into_iter().map(|(a, b)| (a.0, b.0)).collect()
    }

    #[test]
    fn empty_input_gives_empty_graph() {
        let g = build(vec![]);
        assert!(g.is_empty());
        assert!(g.roots().is_empty());
        assert!(build_flattened(vec![]).is_empty());
    }

    #[test]
    fn cvo_example_shape() {
        // CVO's Test_TaskGraph_example: adjacent single-component run levels merge, two
        // components in one run level run in parallel, and the next run level waits for both.
        let g = build(tasks(&[
            "0000_07_a_0",
            "0000_08_a_0",
            "0000_09_a_0",
            "0000_09_a_1",
            "0000_09_b_0",
            "0000_09_b_1",
            "0000_10_a_0",
            "0000_10_a_1",
            "0000_11_a_0",
            "0000_11_a_1",
        ]));
        assert_eq!(
            shape(&g),
            vec![
                vec!["0000_07_a_0", "0000_08_a_0"],
                vec!["0000_09_a_0", "0000_09_a_1"],
                vec!["0000_09_b_0", "0000_09_b_1"],
                vec!["0000_10_a_0", "0000_10_a_1", "0000_11_a_0", "0000_11_a_1"],
            ]
        );
        assert_eq!(edges(&g), vec![(0, 1), (0, 2), (1, 3), (2, 3)]);
        assert_eq!(g.roots(), vec![NodeId(0)]);
        assert_eq!(g.node_title(NodeId(0)), "07–08 a");
        assert_eq!(g.node_title(NodeId(2)), "09 b");
    }

    #[test]
    fn join_node_between_parallel_run_levels() {
        let g = build(tasks(&[
            "0000_10_a_0",
            "0000_10_b_0",
            "0000_10_c_0",
            "0000_20_d_0",
            "0000_20_e_0",
        ]));
        assert_eq!(g.len(), 6);
        assert!(g.node(NodeId(3)).is_join());
        assert_eq!(shape(&g)[3], Vec::<&str>::new());
        // 3 edges into the join, 2 out of it: no 3×2 mesh.
        assert_eq!(edges(&g), vec![(0, 3), (1, 3), (2, 3), (3, 4), (3, 5)]);
        assert_eq!(g.roots(), vec![NodeId(0), NodeId(1), NodeId(2)]);
        assert_eq!(
            g.predecessors(NodeId(3)),
            vec![NodeId(0), NodeId(1), NodeId(2)]
        );
        assert_eq!(g.successors(NodeId(3)), vec![NodeId(4), NodeId(5)]);
    }

    #[test]
    fn cvo_job_example_without_jobs() {
        // Shape of CVO's example "a, 50_a_0, 50_b_0, 50_b_1, 50_c_0, b" (jobs aside): serial
        // head, three parallel components, serial tail waiting for all three.
        let g = build(tasks(&[
            "a",
            "0000_50_a_0",
            "0000_50_b_0",
            "0000_50_b_1",
            "0000_50_c_0",
            "b",
        ]));
        assert_eq!(
            shape(&g),
            vec![
                vec!["a"],
                vec!["0000_50_a_0"],
                vec!["0000_50_b_0", "0000_50_b_1"],
                vec!["0000_50_c_0"],
                vec!["b"],
            ]
        );
        assert_eq!(
            edges(&g),
            vec![(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)]
        );
    }

    /// Issue 34 item 8: run levels that share a node (one component each) are all named, in
    /// order; a long chain names its ends and how many are between, never a bare `+1`.
    #[test]
    fn a_title_names_each_run_level_of_its_node_in_order() {
        let names: Vec<String> = "abcdefghi"
            .chars()
            .enumerate()
            .map(|(i, c)| format!("0000_{i:02}_{c}_0"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let four = build(tasks(&names[..4]));
        assert_eq!(four.len(), 1);
        assert_eq!(four.node_title(NodeId(0)), "00 a → 01 b → 02 c → 03 d");
        let six = build(tasks(&names[..6]));
        assert_eq!(
            six.node_title(NodeId(0)),
            "00 a → 01 b → 02 c → 03 d → 04 e → 05 f"
        );
        let nine = build(tasks(&names));
        assert_eq!(
            nine.node_title(NodeId(0)),
            "00 a → 01 b → 02 c → (4 more) → 07 h → 08 i"
        );
    }

    #[test]
    fn unkeyed_tasks_are_serial_between_neighbours() {
        // CVO's ByNumberAndComponent case: unkeyed "a" and the single-component tail merge.
        let g = build(tasks(&[
            "0000_01_a-b-c_file1",
            "0000_01_x-y-z_file1",
            "0000_01_x-y-z_file2",
            "a",
            "0000_01_x-y-z_file2",
            "0000_01_x-y-z_file3",
        ]));
        assert_eq!(
            shape(&g),
            vec![
                vec!["0000_01_a-b-c_file1"],
                vec!["0000_01_x-y-z_file1", "0000_01_x-y-z_file2"],
                vec!["a", "0000_01_x-y-z_file2", "0000_01_x-y-z_file3"],
            ]
        );
        assert_eq!(edges(&g), vec![(0, 2), (1, 2)]);
        assert_eq!(g.node_title(NodeId(2)), "unordered → 01 x-y-z");

        // Only unkeyed tasks: one serial node, in order.
        let g = build(tasks(&["c", "a", "b"]));
        assert_eq!(shape(&g), vec![vec!["c", "a", "b"]]);
        assert!(g.edges().is_empty());
    }

    #[test]
    fn non_contiguous_component_stays_one_serial_node() {
        let g = build(tasks(&["0000_05_a_0", "0000_05_b_0", "0000_05_a_1"]));
        assert_eq!(
            shape(&g),
            vec![vec!["0000_05_a_0", "0000_05_a_1"], vec!["0000_05_b_0"]]
        );
        assert!(g.edges().is_empty());
    }

    #[test]
    fn deterministic() {
        let names = [
            "x",
            "0000_00_cvo_0",
            "0000_10_a_0",
            "0000_10_b_0",
            "0000_10_b_1",
            "0000_20_c_0",
            "0000_20_d_0",
            "0000_30_e_0",
            "y",
            "0000_40_f_0",
            "0000_40_g_0",
        ];
        let a = build(tasks(&names));
        let b = build(tasks(&names));
        assert_eq!(shape(&a), shape(&b));
        assert_eq!(a.edges(), b.edges());
        let kinds = |g: &TaskGraph| g.nodes().map(|(_, n)| n.is_join()).collect::<Vec<_>>();
        assert_eq!(kinds(&a), kinds(&b));
        assert_eq!(
            edges(&a),
            vec![
                (0, 1),
                (0, 2),
                (1, 3),
                (2, 3),
                (3, 4),
                (3, 5),
                (4, 6),
                (5, 6),
                (6, 7),
                (6, 8),
            ]
        );
    }

    #[test]
    fn flattened_has_same_chains_and_no_edges() {
        let names = [
            "0000_01_a-b-c_file1",
            "0000_01_x-y-z_file1",
            "0000_01_x-y-z_file2",
            "0000_02_x-y-z_file2",
            "0000_02_x-y-z_file3",
        ];
        let g = build_flattened(tasks(&names));
        assert_eq!(g.layout(), Layout::Flattened);
        // CVO's TestFlattenByNumberAndComponent expectation.
        assert_eq!(
            shape(&g),
            vec![
                vec!["0000_01_a-b-c_file1"],
                vec!["0000_01_x-y-z_file1", "0000_01_x-y-z_file2"],
                vec!["0000_02_x-y-z_file2", "0000_02_x-y-z_file3"],
            ]
        );
        assert!(g.edges().is_empty());
        assert_eq!(g.roots().len(), 3);

        let g = build_flattened(tasks(&["a", "0000_01_x-y-z_file1", "c"]));
        assert_eq!(shape(&g), vec![vec!["a", "0000_01_x-y-z_file1", "c"]]);

        let g = build_flattened(tasks(&[
            "0000_10_a_0",
            "0000_10_b_0",
            "0000_20_d_0",
            "0000_20_e_0",
        ]));
        assert!(g.nodes().all(|(_, n)| !n.is_join()));
        assert_eq!(g.len(), 4);
    }

    #[test]
    fn every_task_in_exactly_one_node() {
        let names = [
            "0000_10_a_0",
            "z",
            "0000_10_b_0",
            "0000_10_a_1",
            "0000_20_d_0",
            "0000_20_e_0",
        ];
        for g in [build(tasks(&names)), build_flattened(tasks(&names))] {
            let mut seen: Vec<usize> = g.nodes().flat_map(|(_, n)| n.tasks().to_vec()).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..names.len()).collect::<Vec<_>>());
        }
    }
}
