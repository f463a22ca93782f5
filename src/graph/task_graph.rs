//! The [`TaskGraph`] data structure: tasks, the nodes that group them and the edges that
//! order the nodes. Built by [`super::build`]; read by the executor and the renderers.

use std::fmt;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

/// The ordering key a task's file name gives it: `0000_<runlevel>_<component>_…`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TaskKey {
    /// The run level (`0000_50_x_` → 50).
    pub runlevel: u32,
    /// The component (`0000_50_cluster-monitoring-operator_` → `cluster-monitoring-operator`).
    pub component: String,
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02} {}", self.runlevel, self.component)
    }
}

/// One task as the graph sees it: where it sorts and how to show it.
///
/// Tasks are given to [`super::build`] in apply order; a task's position in that list is its
/// index, which is what nodes hold and what the executor hands back to the caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskInput {
    /// Run level and component from the file name; `None` when the file name does not
    /// follow the convention (such tasks run serially, between their neighbours).
    pub key: Option<TaskKey>,
    /// File name the task comes from (several tasks may share one file).
    pub file: String,
    /// Short human label, e.g. `Namespace openshift-foo` or `doc 2: ConfigMap ns/name`.
    pub label: String,
    /// The task deletes its object. Only affects rendering: deletions take the same
    /// positions in the graph as creates.
    pub delete: bool,
}

impl TaskInput {
    /// A task without ordering key that creates/updates its object.
    pub fn new(file: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            key: None,
            file: file.into(),
            label: label.into(),
            delete: false,
        }
    }

    /// Sets the `(runlevel, component)` key.
    pub fn with_key(mut self, runlevel: u32, component: impl Into<String>) -> Self {
        self.key = Some(TaskKey {
            runlevel,
            component: component.into(),
        });
        self
    }

    /// Marks the task as a deletion (for display only).
    pub fn with_delete(mut self, delete: bool) -> Self {
        self.delete = delete;
        self
    }
}

/// Stable identifier of a node: its position in creation order, `0..graph.len()`.
///
/// The same input always yields the same ids.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct NodeId(pub usize);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A node of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Tasks run one after another, in the given order (indices into [`TaskGraph::tasks`]).
    Serial {
        /// Task indices, in apply order.
        tasks: Vec<usize>,
    },
    /// A barrier without work between two groups of parallel nodes: it completes as soon
    /// as all its predecessors succeeded. Avoids M×N edges between run levels.
    Join,
}

impl Node {
    /// The node's task indices (empty for a join).
    pub fn tasks(&self) -> &[usize] {
        match self {
            Node::Serial { tasks } => tasks,
            Node::Join => &[],
        }
    }

    /// Whether this is a [`Node::Join`].
    pub fn is_join(&self) -> bool {
        matches!(self, Node::Join)
    }
}

/// Which ordering a graph was built with.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Run levels in order with barriers between them ([`super::build`]): installs and updates.
    RunLevels,
    /// Every serial chain independent, no barriers ([`super::build_flattened`]): reconciling.
    Flattened,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::RunLevels => "run-levels",
            Layout::Flattened => "flattened",
        })
    }
}

/// At most this many run level/component keys are named in a node's title
/// ([`TaskGraph::node_title`]); a longer chain names its first and last ones.
const TITLE_KEYS: usize = 6;

/// A release's tasks grouped into nodes and ordered by edges (a DAG).
#[derive(Clone, Debug)]
pub struct TaskGraph {
    layout: Layout,
    tasks: Vec<TaskInput>,
    graph: DiGraph<Node, ()>,
}

impl TaskGraph {
    pub(super) fn from_parts(
        layout: Layout,
        tasks: Vec<TaskInput>,
        graph: DiGraph<Node, ()>,
    ) -> Self {
        Self {
            layout,
            tasks,
            graph,
        }
    }

    /// The layout this graph was built with.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// All tasks, in apply order; node task indices point into this slice.
    pub fn tasks(&self) -> &[TaskInput] {
        &self.tasks
    }

    /// Number of nodes (join nodes included).
    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    /// Whether the graph has no node (no tasks).
    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// The node with this id. Panics when the id is not from this graph.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.graph[NodeIndex::new(id.0)]
    }

    /// Every node id, ascending.
    pub fn node_ids(&self) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        (0..self.graph.node_count()).map(NodeId)
    }

    /// Every node with its id, ascending.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = (NodeId, &Node)> + '_ {
        self.node_ids().map(|id| (id, self.node(id)))
    }

    /// Direct predecessors of a node, ascending.
    pub fn predecessors(&self, id: NodeId) -> Vec<NodeId> {
        self.neighbors(id, Direction::Incoming)
    }

    /// Direct successors of a node, ascending.
    pub fn successors(&self, id: NodeId) -> Vec<NodeId> {
        self.neighbors(id, Direction::Outgoing)
    }

    fn neighbors(&self, id: NodeId, dir: Direction) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = self
            .graph
            .neighbors_directed(NodeIndex::new(id.0), dir)
            .map(|n| NodeId(n.index()))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every edge `(from, to)`, sorted.
    pub fn edges(&self) -> Vec<(NodeId, NodeId)> {
        let mut out: Vec<(NodeId, NodeId)> = self
            .graph
            .raw_edges()
            .iter()
            .map(|e| (NodeId(e.source().index()), NodeId(e.target().index())))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Nodes without predecessors, ascending: what starts first.
    pub fn roots(&self) -> Vec<NodeId> {
        self.node_ids()
            .filter(|&id| {
                self.graph
                    .neighbors_directed(NodeIndex::new(id.0), Direction::Incoming)
                    .next()
                    .is_none()
            })
            .collect()
    }

    /// The distinct keys of a node's tasks in order, `None` standing for a run of tasks
    /// without key. Empty for a join.
    pub fn node_keys(&self, id: NodeId) -> Vec<Option<&TaskKey>> {
        let mut out: Vec<Option<&TaskKey>> = Vec::new();
        for &t in self.node(id).tasks() {
            let key = self.tasks[t].key.as_ref();
            if out.last() != Some(&key) {
                out.push(key);
            }
        }
        out
    }

    /// A short title for a node, for logs and pictures: `50 monitoring`, `07–08 a`, `join`,
    /// and for a node whose run levels each hold one component (they run one after another,
    /// so they share a node, as in the CVO) each in order: `00 a → 05 b → 10 c`,
    /// `unordered → 01 x`. Beyond six keys, the first and last ones and how many are
    /// between: `00 a → 01 b → 02 c → (5 more) → 08 h → 09 i`.
    pub fn node_title(&self, id: NodeId) -> String {
        if self.node(id).is_join() {
            return "join".to_owned();
        }
        let keys = self.node_keys(id);
        if let (Some(Some(first)), Some(Some(last))) = (keys.first(), keys.last())
            && keys
                .iter()
                .all(|k| k.is_some_and(|k| k.component == first.component))
        {
            return if first.runlevel == last.runlevel {
                first.to_string()
            } else {
                format!(
                    "{:02}–{:02} {}",
                    first.runlevel, last.runlevel, first.component
                )
            };
        }
        let name =
            |k: &Option<&TaskKey>| k.map_or_else(|| "unordered".to_owned(), |k| k.to_string());
        if keys.len() <= TITLE_KEYS {
            return keys.iter().map(name).collect::<Vec<_>>().join(" → ");
        }
        let (head, tail) = (3, 2);
        let mut parts: Vec<String> = keys[..head].iter().map(name).collect();
        parts.push(format!("({} more)", keys.len() - head - tail));
        parts.extend(keys[keys.len() - tail..].iter().map(name));
        parts.join(" → ")
    }

    /// The underlying petgraph graph (node index `i` is [`NodeId`] `i`), for algorithms this
    /// type does not offer.
    pub fn as_petgraph(&self) -> &DiGraph<Node, ()> {
        &self.graph
    }
}
