//! The `--timings` page: one self-contained HTML file (inline CSS and SVG, no script, a
//! Content-Security-Policy that lets it load nothing), as cargo's `--timings` page is. Per
//! pass: a summary table, the time line (one row per node, grouped by run level; one bar per
//! task coloured by what it did, its waits for health or deletion drawn on its end, the
//! critical path outlined), the slowest tasks, the longest serial component and the critical
//! path's nodes. Every name from the release is escaped.
//!
//! What a browser test reads back (tests/timings): `rect.task` (one per task, `data-manifest`,
//! class `critical` on the critical path), `table.summary td[data-key]`, `table.slowest`,
//! `ol.critical-path li`.

use std::fmt::Write;

use super::{PassTimings, TaskTiming, Timings};
use crate::apply::Action;
use crate::graph::html_escaped as esc;

/// Width of the time axis, in pixels.
const AXIS: f64 = 1000.0;
/// Width of the node titles left of the axis.
const LABELS: f64 = 260.0;
const ROW: f64 = 16.0;
const TOP: f64 = 24.0;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:2em}h3{font-size:1em}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd}\
td.n{text-align:right;font-variant-numeric:tabular-nums}\
.legend span{display:inline-block;margin-right:1em}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}\
svg text{font-size:11px;fill:#333}svg text.critical{font-weight:bold;fill:#000}\
.created{fill:#4c9f38;background:#4c9f38}.updated{fill:#2b7bb9;background:#2b7bb9}\
.unchanged{fill:#b8c4cc;background:#b8c4cc}.deleted{fill:#8e44ad;background:#8e44ad}\
.failed{fill:#d62728;background:#d62728}.other{fill:#e0e0e0;background:#e0e0e0}\
.wait-health{fill:#f0a30a;background:#f0a30a}.wait-deletion{fill:#c39bd3;background:#c39bd3}\
td.n{white-space:nowrap}\
rect.critical{stroke:#000;stroke-width:1.5}line.grid{stroke:#eee}line.level{stroke:#999}";

/// The page for `timings`.
pub fn page(timings: &Timings) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let release = timings.release.as_deref().unwrap_or("(no version)");
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>cvo timings: {r}</title><style>{STYLE}</style></head><body>\n\
         <h1>Where the time went: release {r}</h1>\n<p id=\"command\">The command took {s}",
        r = esc(release),
        s = secs(timings.seconds),
    );
    if let Some(cpu) = timings.cpu_seconds {
        let _ = write!(out, ", of which cvo used {} of CPU", secs(cpu));
    }
    let _ = writeln!(
        out,
        "; {} pass(es) over the task graph, at most {} nodes at once.</p>",
        timings.passes.len(),
        timings.parallelism
    );
    out.push_str(LEGEND);
    for (i, pass) in timings.passes.iter().enumerate() {
        section(&mut out, i + 1, pass);
    }
    out.push_str("</body></html>\n");
    out
}

const LEGEND: &str = "<p class=\"legend\">\
<span><i class=\"created\"></i>created</span><span><i class=\"updated\"></i>updated</span>\
<span><i class=\"unchanged\"></i>unchanged</span><span><i class=\"deleted\"></i>deleted</span>\
<span><i class=\"wait-health\"></i>waiting for health</span><span><i class=\"wait-deletion\"></i>waiting for a deletion</span>\
<span><i class=\"failed\"></i>failed</span><span><i class=\"other\"></i>left alone</span>\
<span>outlined: on the critical path</span></p>\n";

fn section(out: &mut String, n: usize, pass: &PassTimings) {
    let _ = writeln!(
        out,
        "<section class=\"pass\" id=\"pass-{n}\"><h2>Pass {n} ({}): {}</h2>",
        pass.layout,
        secs(pass.seconds)
    );
    summary(out, pass);
    out.push_str("<h3>Time line</h3>\n");
    timeline(out, pass);
    slowest(out, &pass.slowest);
    if let Some(c) = &pass.longest_component {
        let _ = writeln!(
            out,
            "<h3>Longest serial component</h3><p class=\"longest\">{}: {} task(s) one after another, {}</p>",
            esc(&c.title),
            c.tasks,
            secs(c.seconds)
        );
    }
    out.push_str("<h3>Critical path</h3><ol class=\"critical-path\">");
    for node in &pass.critical_path.nodes {
        let _ = write!(out, "<li>{}</li>", esc(node));
    }
    out.push_str("</ol></section>\n");
}

fn summary(out: &mut String, pass: &PassTimings) {
    let c = &pass.critical_path;
    let rows: [(&str, &str, f64); 11] = [
        ("wall", "Wall time of the pass", pass.seconds),
        ("critical", "Critical path", c.seconds),
        ("server", "… waiting on the API server", c.server_seconds),
        ("health", "… waiting for health", c.health_seconds),
        ("deletion", "… waiting for deletions", c.deletion_seconds),
        ("cvo", "… cvo's own work in its tasks", c.cvo_seconds),
        (
            "between",
            "… between its tasks (slots, scheduling)",
            c.between_seconds,
        ),
        (
            "limit",
            "Ordered limit (each request as fast as this pass's answers, unbounded parallelism in the CVO's order)",
            pass.ordered_limit_seconds,
        ),
        (
            "gap",
            "Pass above its ordered limit",
            pass.seconds - pass.ordered_limit_seconds,
        ),
        (
            "limit-in-slots",
            "Ordered limit with this pass's slots (--parallelism, nodes started in the executor's order)",
            pass.ordered_limit_in_slots_seconds,
        ),
        (
            "gap-in-slots",
            "Pass above its ordered limit with its slots",
            pass.seconds - pass.ordered_limit_in_slots_seconds,
        ),
    ];
    out.push_str("<table class=\"summary\">");
    for (key, label, value) in rows {
        let _ = write!(
            out,
            "<tr><th>{label}</th><td class=\"n\" data-key=\"{key}\">{}</td></tr>",
            secs(value)
        );
    }
    let _ = writeln!(
        out,
        "<tr><th>Tasks run</th><td class=\"n\" data-key=\"tasks\">{}</td></tr>\
         <tr><th>Tasks on the critical path</th><td class=\"n\" data-key=\"critical-tasks\">{}</td></tr></table>",
        pass.tasks.len(),
        c.tasks
    );
}

fn timeline(out: &mut String, pass: &PassTimings) {
    let scale = AXIS / pass.seconds.max(1e-3);
    let rows = pass.nodes.len();
    let height = TOP + ROW * rows as f64 + 4.0;
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\">",
        w = LABELS + AXIS + 10.0
    );
    for tick in ticks(pass.seconds) {
        let x = LABELS + tick * scale;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{height}\"/><text x=\"{x:.1}\" y=\"14\">{}</text>",
            secs(tick)
        );
    }
    let mut row_of = std::collections::HashMap::new();
    let mut level = None;
    for (row, node) in pass.nodes.iter().enumerate() {
        row_of.insert(node.id, row);
        let y = TOP + ROW * row as f64;
        if node.runlevel != level && row > 0 {
            let _ = write!(
                out,
                "<line class=\"level\" x1=\"0\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>",
                LABELS + AXIS
            );
        }
        level = node.runlevel;
        let _ = write!(
            out,
            "<text x=\"2\" y=\"{:.1}\"{}>{}</text>",
            y + ROW - 4.0,
            if node.critical {
                " class=\"critical\""
            } else {
                ""
            },
            esc(&clip(&node.title, 40))
        );
    }
    out.push('\n');
    for task in &pass.tasks {
        let Some(&row) = row_of.get(&task.node) else {
            continue;
        };
        bar(out, task, TOP + ROW * row as f64 + 2.0, scale);
    }
    out.push_str("</svg>\n");
}

/// One task's bar: what it did, then its waits for health or deletion at its end.
fn bar(out: &mut String, task: &TaskTiming, y: f64, scale: f64) {
    let x = LABELS + task.start_seconds * scale;
    let w = (task.seconds * scale).max(1.0);
    let waited = (task.health_seconds + task.deletion_seconds) * scale;
    let _ = write!(
        out,
        "<rect class=\"task {}{}\" data-manifest=\"{}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h}\"><title>{} ({}): {} {}, server {}, health {}, deletion {}, cvo {}</title></rect>",
        class(task.action),
        if task.critical { " critical" } else { "" },
        esc(&task.manifest),
        esc(&task.manifest),
        esc(&task.file),
        task.action,
        secs(task.seconds),
        secs(task.server_seconds),
        secs(task.health_seconds),
        secs(task.deletion_seconds),
        secs(task.cvo_seconds()),
        h = ROW - 4.0,
    );
    if waited >= 1.0 {
        let wait = if task.deletion_seconds > task.health_seconds {
            "wait-deletion"
        } else {
            "wait-health"
        };
        let _ = write!(
            out,
            "<rect class=\"{wait}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{}\"/>",
            x + w - waited.min(w),
            y + 3.0,
            waited.min(w),
            ROW - 10.0
        );
    }
    out.push('\n');
}

fn slowest(out: &mut String, tasks: &[TaskTiming]) {
    out.push_str(
        "<h3>Slowest tasks</h3><table class=\"slowest\"><tr><th>Task</th><th>File</th><th>Did</th>\
         <th>Took</th><th>Server</th><th>Health</th><th>Deletion</th><th>cvo</th></tr>",
    );
    for t in tasks {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&t.manifest),
            esc(&t.file),
            t.action,
            secs(t.seconds),
            secs(t.server_seconds),
            secs(t.health_seconds),
            secs(t.deletion_seconds),
            secs(t.cvo_seconds()),
        );
    }
    out.push_str("</table>\n");
}

fn class(action: Action) -> &'static str {
    match action {
        Action::Created => "created",
        Action::Updated => "updated",
        Action::Unchanged => "unchanged",
        Action::Deleted | Action::DeletionInProgress | Action::AlreadyAbsent => "deleted",
        Action::Failed => "failed",
        Action::Unmanaged | Action::Excluded | Action::Skipped => "other",
    }
}

/// About eight round grid lines over `0..total` seconds.
fn ticks(total: f64) -> Vec<f64> {
    let raw = (total / 8.0).max(1e-3);
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(raw);
    (1..)
        .map(|i| f64::from(i) * step)
        .take_while(|t| *t <= total)
        .take(20)
        .collect()
}

/// Seconds as a person reads them: `0.042 s`, `3.21 s`, `95.3 s`.
fn secs(s: f64) -> String {
    match s.abs() {
        a if a < 10.0 => format!("{s:.3} s"),
        a if a < 100.0 => format!("{s:.2} s"),
        _ => format!("{s:.1} s"),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_release_are_escaped() {
        assert_eq!(
            esc("<script>\"a\"&'b'"),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;"
        );
    }

    #[test]
    fn ticks_are_round_and_within_the_pass() {
        assert_eq!(ticks(10.0), [2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.36).len(), 7);
        assert!(ticks(0.0).is_empty());
    }

    #[test]
    fn seconds_read_as_a_person_reads_them() {
        assert_eq!(secs(0.0421), "0.042 s");
        assert_eq!(secs(32.123), "32.12 s");
        assert_eq!(secs(123.44), "123.4 s");
    }
}
