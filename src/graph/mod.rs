//! The run-level task graph: how a release's tasks are ordered, and the executor that walks
//! that order with bounded parallelism.
//!
//! This module owns three things, one submodule each:
//! - [`build`] / [`build_flattened`] turn tasks in apply order, each with an optional
//!   `(runlevel, component)` [`TaskKey`], into a [`TaskGraph`] (the semantics of CVO's
//!   `ByNumberAndComponent` / `FlattenByNumberAndComponent`, see `build.rs`);
//! - [`run`] / [`run_until`] walk a [`TaskGraph`]: a node starts once all its predecessors
//!   succeeded, a failure blocks only that node's descendants, and the [`RunReport`] lists
//!   completed, failed and never-started nodes;
//! - [`render`] draws a graph as text, Graphviz DOT, Mermaid or JSON for `cvo graph`.
//!
//! It knows nothing about Kubernetes: a task is an index into the caller's list plus the
//! file name and label used for display. Deletions are ordinary tasks; their
//! [`TaskInput::delete`] flag only changes how they are drawn.

mod build;
mod executor;
#[cfg(test)]
mod invariants;
mod render;
mod task_graph;

pub use build::{build, build_flattened};
pub use executor::{DEFAULT_PARALLELISM, NodeFailure, NotStarted, RunReport, run, run_until};
pub use render::{
    Format, UnknownFormat, html_escaped, render, render_dot, render_json, render_mermaid,
    render_text,
};

pub use task_graph::{Layout, Node, NodeId, TaskGraph, TaskInput, TaskKey};
