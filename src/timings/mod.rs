//! Where a sync's time went (`--timings`, docs/performance.md): every task of every pass on
//! a time line, grouped by the node (run level and component) it ran in, with what it waited
//! on (the API server, health, a deletion) and the rest, cvo's own work; per pass the
//! critical path, the ordered limit ([`critical`]), the slowest tasks and the longest serial
//! component. [`Timings`] is what `-o json` prints as `timings`; [`page`] draws it as one
//! self-contained HTML page.
//!
//! Built after the sync from the timelines the passes recorded ([`PassTimeline`]); it asks
//! nothing of the cluster.

pub mod critical;
mod html;

use std::time::Duration;

use serde::Serialize;

use crate::apply::{Action, PassTimeline};
use crate::graph::{Layout, NodeId};
use crate::release::Release;

pub use html::page;

/// How many of the slowest tasks a pass names.
pub const SLOWEST: usize = 10;

/// Where a sync's time went.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// The release's version, when it has one.
    pub release: Option<String>,
    /// Wall time of the whole command (reading the release, preflight, passes, status).
    pub seconds: f64,
    /// CPU time cvo's process used meanwhile (user and system), where the platform says.
    pub cpu_seconds: Option<f64>,
    /// Nodes run at once at most.
    pub parallelism: usize,
    /// One per pass over the graph (an install's rounds each have one).
    pub passes: Vec<PassTimings>,
}

/// One pass on its time line; times in seconds from the pass's start.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassTimings {
    pub layout: Layout,
    /// Wall time of the walk over the graph.
    pub seconds: f64,
    /// The time the graph needs when every task takes only what it waited on outside cvo in
    /// this pass (server answers, health, deletions) and any number of nodes run at once:
    /// the fastest an applier that keeps this order could be.
    pub ordered_limit_seconds: f64,
    /// The ordered limit with the slots the pass had ([`Timings::parallelism`]), nodes started
    /// in the executor's order: the fastest this pass could have been with those slots.
    pub ordered_limit_in_slots_seconds: f64,
    pub critical_path: CriticalPath,
    /// The node that ran longest: one component's tasks, one after another.
    pub longest_component: Option<NodeTiming>,
    /// The [`SLOWEST`] slowest tasks, slowest first.
    pub slowest: Vec<TaskTiming>,
    /// Nodes that ran, in graph order.
    pub nodes: Vec<NodeTiming>,
    /// Tasks that ran in this pass, in release order.
    pub tasks: Vec<TaskTiming>,
}

/// The chain of nodes that decided when the pass ended ([`critical::critical_path`]).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CriticalPath {
    /// From the pass's start to the end of the path's last task.
    pub seconds: f64,
    /// The path's nodes, by title, in run order.
    pub nodes: Vec<String>,
    /// Its tasks.
    pub tasks: usize,
    /// Of [`CriticalPath::seconds`]: waiting on the API server's answers.
    pub server_seconds: f64,
    /// … waiting for health.
    pub health_seconds: f64,
    /// … waiting for deletions to finish.
    pub deletion_seconds: f64,
    /// … cvo's own work inside the tasks (bodies, comparisons; and being scheduled).
    pub cvo_seconds: f64,
    /// … between the tasks: a node waiting for a free slot or for the walk to start it.
    pub between_seconds: f64,
}

/// One node as it ran.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTiming {
    pub id: usize,
    /// As `cvo graph` names it: `50 monitoring`, `00 a → 05 b`.
    pub title: String,
    /// Its first task's run level (`None`: files outside the naming convention).
    pub runlevel: Option<u32>,
    pub start_seconds: f64,
    pub seconds: f64,
    /// Its tasks that ran in this pass.
    pub tasks: usize,
    pub critical: bool,
}

/// One task as it ran.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskTiming {
    /// `Kind ns/name`.
    pub manifest: String,
    pub file: String,
    /// The node it ran in ([`NodeTiming::id`]).
    pub node: usize,
    pub action: Action,
    pub start_seconds: f64,
    pub seconds: f64,
    pub server_seconds: f64,
    pub health_seconds: f64,
    pub deletion_seconds: f64,
    /// On the critical path.
    pub critical: bool,
}

impl TaskTiming {
    /// The rest of the task's time: cvo's own work and scheduling.
    pub fn cvo_seconds(&self) -> f64 {
        (self.seconds - self.server_seconds - self.health_seconds - self.deletion_seconds).max(0.0)
    }
}

impl Timings {
    /// The timings of the passes a sync of `release` ran; `seconds` and `cpu_seconds` are the
    /// caller's to fill in.
    pub fn of(release: &Release, passes: &[PassTimeline], parallelism: usize) -> Self {
        Timings {
            release: release.version().map(ToString::to_string),
            seconds: 0.0,
            cpu_seconds: None,
            parallelism,
            passes: passes
                .iter()
                .map(|p| PassTimings::of(release, p, parallelism))
                .collect(),
        }
    }
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl PassTimings {
    fn of(release: &Release, pass: &PassTimeline, parallelism: usize) -> Self {
        let graph = &pass.graph;
        let at = |i: tokio::time::Instant| seconds(i.saturating_duration_since(pass.started));
        let mut node_of = vec![0; release.manifests.len()];
        let mut nodes: Vec<critical::Node> = Vec::with_capacity(graph.len());
        for (id, node) in graph.nodes() {
            let ran = node
                .tasks()
                .iter()
                .filter_map(|&t| pass.tasks.get(t)?.as_ref());
            for &t in node.tasks() {
                if let Some(slot) = node_of.get_mut(t) {
                    *slot = id.0;
                }
            }
            nodes.push(critical::Node {
                preds: graph.predecessors(id).into_iter().map(|p| p.0).collect(),
                join: node.is_join(),
                span: pass
                    .nodes
                    .get(id.0)
                    .copied()
                    .flatten()
                    .map(|(s, e)| (at(s), at(e))),
                cost: ran.map(|r| seconds(r.time.waited())).sum(),
            });
        }
        let path = critical::critical_path(&nodes);
        let mut critical = vec![false; nodes.len()];
        for &node in &path {
            critical[node] = true;
        }
        let on_path = |node: usize| critical.get(node).copied().unwrap_or(false);
        let tasks: Vec<TaskTiming> = pass
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(i, run)| {
                let run = run.as_ref()?;
                Some(TaskTiming {
                    manifest: release.manifests.get(i)?.id.to_string(),
                    file: release.manifests[i].file_name().to_owned(),
                    node: node_of[i],
                    action: run.action,
                    start_seconds: at(run.started),
                    seconds: seconds(run.finished.saturating_duration_since(run.started)),
                    server_seconds: seconds(run.time.server),
                    health_seconds: seconds(run.time.health),
                    deletion_seconds: seconds(run.time.deletion),
                    critical: on_path(node_of[i]),
                })
            })
            .collect();
        let mut tasks_in = vec![0; nodes.len()];
        for t in &tasks {
            if let Some(n) = tasks_in.get_mut(t.node) {
                *n += 1;
            }
        }
        let node_timings: Vec<NodeTiming> = nodes
            .iter()
            .enumerate()
            .filter_map(|(id, n)| {
                let (start, end) = n.span?;
                let first = graph.node(NodeId(id)).tasks().first().copied();
                Some(NodeTiming {
                    id,
                    title: graph.node_title(NodeId(id)),
                    runlevel: first.and_then(|t| Some(graph.tasks()[t].key.as_ref()?.runlevel)),
                    start_seconds: start,
                    seconds: end - start,
                    tasks: tasks_in[id],
                    critical: on_path(id),
                })
            })
            .collect();
        // The slowest few, without copying every task to sort them.
        let mut by_time: Vec<&TaskTiming> = tasks.iter().collect();
        by_time.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        let slowest: Vec<TaskTiming> = by_time.into_iter().take(SLOWEST).cloned().collect();
        PassTimings {
            layout: graph.layout(),
            seconds: seconds(pass.finished.saturating_duration_since(pass.started)),
            ordered_limit_seconds: critical::ordered_limit(&nodes),
            ordered_limit_in_slots_seconds: critical::ordered_limit_in_slots(&nodes, parallelism),
            critical_path: CriticalPath::of(&path, &node_timings, &tasks),
            longest_component: node_timings
                .iter()
                .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
                .cloned(),
            slowest,
            nodes: node_timings,
            tasks,
        }
    }
}

impl CriticalPath {
    fn of(path: &[usize], nodes: &[NodeTiming], tasks: &[TaskTiming]) -> Self {
        let on: Vec<&TaskTiming> = tasks.iter().filter(|t| t.critical).collect();
        let sum = |f: fn(&TaskTiming) -> f64| on.iter().map(|t| f(t)).sum::<f64>();
        let end = on
            .iter()
            .map(|t| t.start_seconds + t.seconds)
            .fold(0.0, f64::max);
        CriticalPath {
            seconds: end,
            nodes: path
                .iter()
                .filter_map(|&id| nodes.iter().find(|n| n.id == id))
                .map(|n| n.title.clone())
                .collect(),
            tasks: on.len(),
            server_seconds: sum(|t| t.server_seconds),
            health_seconds: sum(|t| t.health_seconds),
            deletion_seconds: sum(|t| t.deletion_seconds),
            cvo_seconds: sum(TaskTiming::cvo_seconds),
            between_seconds: (end - sum(|t| t.seconds)).max(0.0),
        }
    }
}

/// CPU time this process has used so far (user and system, all threads), where the
/// platform says.
pub fn process_cpu() -> Option<Duration> {
    cpu_time::ProcessTime::try_now()
        .ok()
        .map(|t| t.as_duration())
}
