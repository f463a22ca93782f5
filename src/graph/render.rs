//! Drawing a [`TaskGraph`] for `cvo graph`: plain text, Graphviz DOT, Mermaid and JSON.
//!
//! Pure functions returning a `String`. Every node is labelled with its id, its run
//! level/component title and its tasks (file and label); delete tasks are marked
//! `✗ delete` (and drawn red in DOT and Mermaid). File names and labels come from release
//! authors, so each format escapes them its own way.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::str::FromStr;

use serde::Serialize;

use super::task_graph::{Layout, NodeId, TaskGraph, TaskInput};

/// Output formats of `cvo graph --format`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// Stages, nodes and files for a person to read.
    #[default]
    Text,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
    /// Mermaid `flowchart TD`.
    Mermaid,
    /// Nodes and edges as JSON.
    Json,
}

impl Format {
    /// Every format with its command-line name.
    pub const ALL: [(Format, &'static str); 4] = [
        (Format::Text, "text"),
        (Format::Dot, "dot"),
        (Format::Mermaid, "mermaid"),
        (Format::Json, "json"),
    ];

    /// Command-line name (`text`, `dot`, `mermaid`, `json`).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .map(|(_, n)| *n)
            .unwrap_or("text")
    }
}

/// A `--format` value that names no [`Format`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown graph format {0:?} (expected text, dot, mermaid or json)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(s))
            .map(|(f, _)| *f)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// Renders `graph` in `format`.
pub fn render(graph: &TaskGraph, format: Format) -> String {
    match format {
        Format::Text => render_text(graph),
        Format::Dot => render_dot(graph),
        Format::Mermaid => render_mermaid(graph),
        Format::Json => render_json(graph),
    }
}

const DELETE_MARK: &str = "✗ delete";

/// Predecessors of a node as a reader thinks of them: joins replaced by what they wait for.
fn waits_for(graph: &TaskGraph, id: NodeId) -> Vec<NodeId> {
    let mut out = Vec::new();
    let mut stack = graph.predecessors(id);
    while let Some(p) = stack.pop() {
        if graph.node(p).is_join() {
            stack.extend(graph.predecessors(p));
        } else {
            out.push(p);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Stage of each node: 1 + the number of non-join nodes on the longest path before it.
fn stages(graph: &TaskGraph) -> Vec<usize> {
    // Node ids are a topological order: every edge goes from a lower to a higher id.
    let mut stage = vec![1; graph.len()];
    for id in graph.node_ids() {
        let step = usize::from(!graph.node(id).is_join());
        for next in graph.successors(id) {
            stage[next.0] = stage[next.0].max(stage[id.0] + step);
        }
    }
    stage
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Control characters (a newline in a file name) shown escaped so they cannot break lines.
fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn summary(graph: &TaskGraph) -> String {
    let joins = graph.nodes().filter(|(_, n)| n.is_join()).count();
    let mut s = format!(
        "{} in {}",
        plural(graph.tasks().len(), "task", "tasks"),
        plural(graph.len() - joins, "node", "nodes")
    );
    let deletes = graph.tasks().iter().filter(|t| t.delete).count();
    if deletes > 0 {
        let _ = write!(s, ", {}", plural(deletes, "deletion", "deletions"));
    }
    s
}

/// Why some node's title names several run levels (`00 a → 05 b`), when one does: the CVO
/// puts consecutive run levels that hold one component each into one node, whose tasks run
/// one after another.
fn chain_legend(graph: &TaskGraph) -> Option<&'static str> {
    graph
        .nodes()
        .any(|(id, node)| !node.is_join() && graph.node_title(id).contains(" → "))
        .then_some(
            "A node runs its tasks one after another: consecutive run levels of one component each share one (\"00 a → 05 b\"), as in the CVO.",
        )
}

/// Human-readable text: nodes grouped by stage, each with its files.
pub fn render_text(graph: &TaskGraph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Task graph ({}): {}", graph.layout(), summary(graph));
    if graph.is_empty() {
        out.push_str("(no tasks)\n");
        return out;
    }
    match graph.layout() {
        Layout::RunLevels => out.push_str(
            "Nodes of one stage run in parallel; a node starts when the nodes it waits for succeeded.\n",
        ),
        Layout::Flattened => {
            out.push_str("Flattened: every node runs in parallel, no run-level barriers.\n")
        }
    }
    if let Some(legend) = chain_legend(graph) {
        let _ = writeln!(out, "{legend}");
    }
    let stage = stages(graph);
    let mut per_stage = vec![0usize; stage.iter().max().map_or(0, |m| m + 1)];
    for (id, node) in graph.nodes() {
        if !node.is_join() {
            per_stage[stage[id.0]] += 1;
        }
    }
    let mut last_stage = 0;
    for (id, node) in graph.nodes() {
        if node.is_join() {
            continue;
        }
        if stage[id.0] != last_stage {
            last_stage = stage[id.0];
            let _ = write!(out, "\nStage {last_stage}");
            let n = per_stage[last_stage];
            if n > 1 {
                let _ = write!(out, " ({n} nodes in parallel)");
            }
            out.push('\n');
        }
        let tasks = node.tasks();
        let _ = write!(
            out,
            "  [{id}] {} · {}",
            graph.node_title(id),
            plural(tasks.len(), "task", "tasks")
        );
        let after = waits_for(graph, id);
        if !after.is_empty() {
            let list: Vec<String> = after.iter().map(|p| format!("[{p}]")).collect();
            let _ = write!(out, " · after {}", list.join(" "));
        }
        out.push('\n');
        let files: Vec<Cow<'_, str>> = tasks
            .iter()
            .map(|&t| clean(&graph.tasks()[t].file))
            .collect();
        let width = files.iter().map(|f| f.chars().count()).max().unwrap_or(0);
        for (&t, file) in tasks.iter().zip(&files) {
            let task = &graph.tasks()[t];
            let mark = if task.delete { DELETE_MARK } else { "" };
            let line = format!(
                "      {mark:<8} {file:<width$}  {}",
                clean(&task.label),
                mark = mark,
                file = file,
                width = width
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

/// Escapes text for a Graphviz HTML-like label.
fn dot_html(s: &str) -> String {
    html_escaped(&clean(s))
}

/// Text made safe for HTML (and XML) content and attribute values: `&`, `<`, `>`, `"` and `'`
/// as entities (a Graphviz label, the `--timings` page).
pub fn html_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a Graphviz double-quoted string (`\n` stays a line break).
fn dot_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn task_line(task: &TaskInput) -> String {
    if task.label.is_empty() {
        task.file.clone()
    } else {
        format!("{} · {}", task.file, task.label)
    }
}

/// The DOT graph's label: the summary, and why nodes hold several run levels if one does.
fn graph_label(graph: &TaskGraph) -> String {
    let mut label = format!("cvo task graph ({}): {}", graph.layout(), summary(graph));
    if let Some(legend) = chain_legend(graph) {
        label.push('\n');
        label.push_str(legend);
    }
    label
}

/// Graphviz DOT: one box per node listing its files, deletions in red, joins as points.
pub fn render_dot(graph: &TaskGraph) -> String {
    let mut out = String::new();
    out.push_str("digraph tasks {\n");
    let _ = writeln!(
        out,
        "  graph [rankdir=TB, labelloc=t, fontname=\"Helvetica\", label={}];",
        dot_quoted(&graph_label(graph))
    );
    out.push_str("  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [color=\"gray40\"];\n");
    for (id, node) in graph.nodes() {
        if node.is_join() {
            let _ = writeln!(
                out,
                "  n{id} [shape=circle, style=filled, fillcolor=\"gray60\", color=\"gray60\", width=0.12, fixedsize=true, label=\"\", tooltip=\"join: wait for every node before\"];"
            );
            continue;
        }
        let tasks: Vec<&TaskInput> = node.tasks().iter().map(|&t| &graph.tasks()[t]).collect();
        let mut label = format!("<B>[{id}] {}</B>", dot_html(&graph.node_title(id)));
        for task in &tasks {
            label.push_str("<BR ALIGN=\"LEFT\"/>");
            if task.delete {
                let _ = write!(
                    label,
                    "<FONT COLOR=\"red3\">{} {}</FONT>",
                    DELETE_MARK,
                    dot_html(&task_line(task))
                );
            } else {
                label.push_str(&dot_html(&task_line(task)));
            }
        }
        label.push_str("<BR ALIGN=\"LEFT\"/>");
        let tooltip: Vec<&str> = tasks.iter().map(|t| t.file.as_str()).collect();
        let color = if tasks.iter().all(|t| t.delete) {
            ", color=\"red3\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  n{id} [label=<{label}>, tooltip={}{color}];",
            dot_quoted(&tooltip.join("\n"))
        );
    }
    for (from, to) in graph.edges() {
        let _ = writeln!(out, "  n{from} -> n{to};");
    }
    out.push_str("}\n");
    out
}

/// Escapes text for a double-quoted Mermaid label, using Mermaid's `#code;` entities.
fn mermaid_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in clean(s).chars() {
        match c {
            '"' | '#' | '&' | '<' | '>' | '`' | '%' | '|' | '\\' | '{' | '}' | '[' | ']' => {
                let _ = write!(out, "#{};", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Mermaid `flowchart TD`: one box per node listing its files, deletions in red.
pub fn render_mermaid(graph: &TaskGraph) -> String {
    let mut out = String::from("flowchart TD\n");
    let mut deleting = Vec::new();
    let mut joins = Vec::new();
    for (id, node) in graph.nodes() {
        if node.is_join() {
            let _ = writeln!(out, "  n{id}((\"join\"))");
            joins.push(format!("n{id}"));
            continue;
        }
        let mut label = format!("<b>[{id}] {}</b>", mermaid_text(&graph.node_title(id)));
        let mut any_delete = false;
        for &t in node.tasks() {
            let task = &graph.tasks()[t];
            label.push_str("<br/>");
            if task.delete {
                any_delete = true;
                let _ = write!(label, "{DELETE_MARK} ");
            }
            label.push_str(&mermaid_text(&task_line(task)));
        }
        if any_delete {
            deleting.push(format!("n{id}"));
        }
        let _ = writeln!(out, "  n{id}[\"{label}\"]");
    }
    for (from, to) in graph.edges() {
        let _ = writeln!(out, "  n{from} --> n{to}");
    }
    if !deleting.is_empty() {
        out.push_str("  classDef deletes stroke:#c00,stroke-width:2px,color:#900\n");
        let _ = writeln!(out, "  class {} deletes", deleting.join(","));
    }
    if !joins.is_empty() {
        out.push_str("  classDef join fill:#ddd,stroke:#999,color:#555\n");
        let _ = writeln!(out, "  class {} join", joins.join(","));
    }
    out
}

#[derive(Serialize)]
struct JsonGraph<'a> {
    layout: Layout,
    tasks: usize,
    nodes: Vec<JsonNode<'a>>,
    edges: Vec<JsonEdge>,
}

#[derive(Serialize)]
struct JsonNode<'a> {
    id: NodeId,
    kind: &'static str,
    title: String,
    stage: usize,
    tasks: Vec<JsonTask<'a>>,
}

#[derive(Serialize)]
struct JsonTask<'a> {
    index: usize,
    file: &'a str,
    label: &'a str,
    runlevel: Option<u32>,
    component: Option<&'a str>,
    delete: bool,
}

#[derive(Serialize)]
struct JsonEdge {
    from: NodeId,
    to: NodeId,
}

/// JSON: `{"layout", "tasks", "nodes": [{"id", "kind": "serial"|"join", "title", "stage",
/// "tasks": [{"index", "file", "label", "runlevel", "component", "delete"}]}],
/// "edges": [{"from", "to"}]}`, pretty-printed.
pub fn render_json(graph: &TaskGraph) -> String {
    let stage = stages(graph);
    let doc = JsonGraph {
        layout: graph.layout(),
        tasks: graph.tasks().len(),
        nodes: graph
            .nodes()
            .map(|(id, node)| JsonNode {
                id,
                kind: if node.is_join() { "join" } else { "serial" },
                title: graph.node_title(id),
                stage: stage[id.0],
                tasks: node
                    .tasks()
                    .iter()
                    .map(|&index| {
                        let t = &graph.tasks()[index];
                        JsonTask {
                            index,
                            file: &t.file,
                            label: &t.label,
                            runlevel: t.key.as_ref().map(|k| k.runlevel),
                            component: t.key.as_ref().map(|k| k.component.as_str()),
                            delete: t.delete,
                        }
                    })
                    .collect(),
            })
            .collect(),
        edges: graph
            .edges()
            .into_iter()
            .map(|(from, to)| JsonEdge { from, to })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("graph JSON serializes");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use super::super::build::{build, build_flattened};
    use super::*;

    fn sample() -> TaskGraph {
        build(vec![
            TaskInput::new("0000_00_cvo_00_ns.yaml", "Namespace openshift-cvo").with_key(0, "cvo"),
            TaskInput::new("0000_10_a_00_cm.yaml", "ConfigMap a/one").with_key(10, "a"),
            TaskInput::new("0000_10_b_00_cm.yaml", "ConfigMap b/one").with_key(10, "b"),
            TaskInput::new("0000_10_b_90_old.yaml", "ConfigMap b/old")
                .with_key(10, "b")
                .with_delete(true),
            TaskInput::new("0000_20_c_00_cm.yaml", "ConfigMap c/one").with_key(20, "c"),
            TaskInput::new("0000_20_d_00_cm.yaml", "ConfigMap d/one").with_key(20, "d"),
            TaskInput::new("extra.yaml", "Secret x/y"),
        ])
    }

    /// Labels with every character that means something in one of the formats.
    fn nasty() -> TaskGraph {
        build(vec![
            TaskInput::new(
                "0000_10_a_\"q\"\\b<i>&amp;#x;.yaml",
                "ConfigMap \"a\" <b>{x}</b> [1] |p| `t` %% end",
            )
            .with_key(10, "a"),
            TaskInput::new("0000_10_b_new\nline.yaml", "Secret b\\c")
                .with_key(10, "b")
                .with_delete(true),
            TaskInput::new("0000_20_c_x.yaml", "end").with_key(20, "c"),
            TaskInput::new("0000_20_d_x.yaml", "subgraph").with_key(20, "d"),
        ])
    }

    #[test]
    fn format_names_round_trip() {
        for (f, name) in Format::ALL {
            assert_eq!(name.parse::<Format>(), Ok(f));
            assert_eq!(f.name(), name);
        }
        assert_eq!("DOT".parse::<Format>(), Ok(Format::Dot));
        assert_eq!("svg".parse::<Format>(), Err(UnknownFormat("svg".into())));
    }

    #[test]
    fn text_lists_stages_nodes_files_and_deletions() {
        let text = render_text(&sample());
        let expected = "\
Task graph (run-levels): 7 tasks in 6 nodes, 1 deletion
Nodes of one stage run in parallel; a node starts when the nodes it waits for succeeded.

Stage 1
  [0] 00 cvo · 1 task
               0000_00_cvo_00_ns.yaml  Namespace openshift-cvo

Stage 2 (2 nodes in parallel)
  [1] 10 a · 1 task · after [0]
               0000_10_a_00_cm.yaml  ConfigMap a/one
  [2] 10 b · 2 tasks · after [0]
               0000_10_b_00_cm.yaml   ConfigMap b/one
      ✗ delete 0000_10_b_90_old.yaml  ConfigMap b/old

Stage 3 (2 nodes in parallel)
  [4] 20 c · 1 task · after [1] [2]
               0000_20_c_00_cm.yaml  ConfigMap c/one
  [5] 20 d · 1 task · after [1] [2]
               0000_20_d_00_cm.yaml  ConfigMap d/one

Stage 4
  [6] unordered · 1 task · after [4] [5]
               extra.yaml  Secret x/y
";
        assert_eq!(text, expected);
    }

    /// Issue 34 item 8: a node of several run levels names each, and the header says why
    /// they share it (text and DOT); a graph without such a node says nothing of it.
    #[test]
    fn a_node_of_several_run_levels_says_why_they_share_it() {
        let g = build(vec![
            TaskInput::new("0000_00_a_0", "x").with_key(0, "a"),
            TaskInput::new("0000_05_b_0", "y").with_key(5, "b"),
        ]);
        let text = render_text(&g);
        assert!(text.contains("\n  [0] 00 a → 05 b · 2 tasks\n"), "{text}");
        let legend = "A node runs its tasks one after another: consecutive run levels of one component each share one (\"00 a → 05 b\"), as in the CVO.\n";
        assert!(text.contains(legend), "{text}");
        assert!(render_dot(&g).contains("as in the CVO."));
        assert!(!render_text(&sample()).contains("share one"));
    }

    #[test]
    fn text_flattened_and_empty() {
        let g = build_flattened(vec![
            TaskInput::new("0000_10_a_0", "x").with_key(10, "a"),
            TaskInput::new("0000_20_b_0", "y").with_key(20, "b"),
            TaskInput::new("0000_20_c_0", "z").with_key(20, "c"),
        ]);
        let text = render_text(&g);
        assert!(text.starts_with("Task graph (flattened): 3 tasks in 3 nodes\n"));
        assert!(text.contains("Stage 1 (3 nodes in parallel)"));
        assert!(!text.contains("after"));
        assert_eq!(
            render_text(&build(vec![])),
            "Task graph (run-levels): 0 tasks in 0 nodes\n(no tasks)\n"
        );
    }

    #[test]
    fn text_escapes_control_characters() {
        let text = render_text(&nasty());
        assert!(text.contains("0000_10_b_new\\nline.yaml"));
        assert!(!text.contains("new\nline"));
    }

    #[test]
    fn dot_escapes_labels() {
        let dot = render_dot(&nasty());
        assert!(dot.starts_with("digraph tasks {\n"));
        assert!(dot.contains(
            "0000_10_a_&quot;q&quot;\\b&lt;i&gt;&amp;amp;#x;.yaml · ConfigMap &quot;a&quot; &lt;b&gt;{x}&lt;/b&gt;"
        ));
        assert!(dot.contains(
            "<FONT COLOR=\"red3\">✗ delete 0000_10_b_new\\nline.yaml · Secret b\\c</FONT>"
        ));
        // The tooltip is a quoted string: quotes and backslashes escaped, newline as \n.
        assert!(dot.contains("tooltip=\"0000_10_a_\\\"q\\\"\\\\b<i>&amp;#x;.yaml\"]"));
        assert!(dot.contains("tooltip=\"0000_10_b_new\\nline.yaml\", color=\"red3\"]"));
        assert!(dot.contains("  n0 -> n2;\n"));
    }

    #[test]
    fn dot_draws_joins_and_edges() {
        let dot = render_dot(&sample());
        assert!(dot.contains("  n3 [shape=circle"));
        for edge in [
            "n0 -> n1", "n0 -> n2", "n1 -> n3", "n2 -> n3", "n3 -> n4", "n3 -> n5", "n4 -> n6",
            "n5 -> n6",
        ] {
            assert!(dot.contains(&format!("  {edge};\n")), "{edge}");
        }
        assert_eq!(dot.matches(" -> ").count(), 8);
    }

    /// Graphviz must accept what we write (a graph of several run levels in a node too, whose
    /// label has two lines). Ignored by default: `dot` may not be installed; run with
    /// `--include-ignored` without it, the test fails.
    #[test]
    #[ignore = "needs Graphviz dot (apt-get install graphviz): run with --include-ignored (.ci/run does)"]
    fn dot_renders_with_graphviz() {
        let chain = build(vec![
            TaskInput::new("0000_00_a_0", "x").with_key(0, "a"),
            TaskInput::new("0000_05_b_0", "y").with_key(5, "b"),
        ]);
        for (name, g) in [
            ("sample", sample()),
            ("nasty", nasty()),
            ("empty", build(vec![])),
            ("chain", chain),
        ] {
            let child = Command::new("dot")
                .arg("-Tsvg")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn();
            let mut child = child.unwrap_or_else(|e| {
                panic!("this test needs Graphviz `dot` ({e}): apt-get install graphviz")
            });
            child
                .stdin
                .take()
                .unwrap()
                .write_all(render_dot(&g).as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{name}: {stderr}");
            assert!(
                stderr.trim().is_empty(),
                "{name}: graphviz warned: {stderr}"
            );
            let svg = String::from_utf8_lossy(&out.stdout);
            assert!(svg.contains("<svg"), "{name}");
            if name == "nasty" {
                assert!(svg.contains("✗ delete"));
                assert!(svg.contains("&lt;b&gt;{x}&lt;/b&gt;"));
            }
        }
    }

    #[test]
    fn mermaid_escapes_labels() {
        let m = render_mermaid(&nasty());
        assert!(m.starts_with("flowchart TD\n"));
        let line = m.lines().find(|l| l.starts_with("  n0[")).unwrap();
        assert_eq!(
            line,
            "  n0[\"<b>[0] 10 a</b><br/>0000_10_a_#34;q#34;#92;b#60;i#62;#38;amp;#35;x;.yaml · \
             ConfigMap #34;a#34; #60;b#62;#123;x#125;#60;/b#62; #91;1#93; #124;p#124; #96;t#96; #37;#37; end\"]"
        );
        // Only the structural quotes remain, in pairs, on every node line.
        for l in m
            .lines()
            .filter(|l| l.starts_with("  n") && l.contains('['))
        {
            assert_eq!(l.matches('"').count(), 2, "{l}");
        }
        assert!(m.contains("<br/>✗ delete 0000_10_b_new#92;nline.yaml · Secret b#92;c\"]"));
        assert!(m.contains("  class n1 deletes\n"));
        assert!(m.contains("  n0 --> n2\n"));
    }

    #[test]
    fn mermaid_draws_joins() {
        let m = render_mermaid(&sample());
        assert!(m.contains("  n3((\"join\"))\n"));
        assert!(m.contains("  class n3 join\n"));
        assert!(m.contains("  n3 --> n4\n"));
        assert_eq!(m.matches(" --> ").count(), 8);
    }

    #[test]
    fn json_has_nodes_edges_and_tasks() {
        let v: serde_json::Value = serde_json::from_str(&render_json(&sample())).unwrap();
        assert_eq!(v["layout"], "run-levels");
        assert_eq!(v["tasks"], 7);
        assert_eq!(v["nodes"].as_array().unwrap().len(), 7);
        assert_eq!(v["nodes"][3]["kind"], "join");
        assert_eq!(v["nodes"][3]["tasks"], serde_json::json!([]));
        assert_eq!(v["nodes"][2]["title"], "10 b");
        assert_eq!(v["nodes"][2]["stage"], 2);
        assert_eq!(
            v["nodes"][2]["tasks"][1],
            serde_json::json!({
                "index": 3, "file": "0000_10_b_90_old.yaml", "label": "ConfigMap b/old",
                "runlevel": 10, "component": "b", "delete": true
            })
        );
        assert_eq!(
            v["nodes"][6]["tasks"][0]["runlevel"],
            serde_json::Value::Null
        );
        assert_eq!(v["edges"][0], serde_json::json!({"from": 0, "to": 1}));
        assert_eq!(v["edges"].as_array().unwrap().len(), 8);

        let v: serde_json::Value = serde_json::from_str(&render_json(&nasty())).unwrap();
        assert_eq!(
            v["nodes"][0]["tasks"][0]["file"],
            "0000_10_a_\"q\"\\b<i>&amp;#x;.yaml"
        );
    }

    #[test]
    fn render_dispatches() {
        let g = sample();
        assert_eq!(render(&g, Format::Text), render_text(&g));
        assert_eq!(render(&g, Format::Dot), render_dot(&g));
        assert_eq!(render(&g, Format::Mermaid), render_mermaid(&g));
        assert_eq!(render(&g, Format::Json), render_json(&g));
    }
}
