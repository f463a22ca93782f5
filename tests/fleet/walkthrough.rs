//! The walkthrough in docs/fleet.md ("A rollout, as it ran") is what this tier ran: steps record
//! the commands a user types and what cvo printed, at states that do not depend on timing; the
//! last step compares the recording, made stable (registry ports, digests, temporary paths),
//! with the block between the doc's markers, and fails on any difference.
//! `CVO_FLEET_WALKTHROUGH=write` writes the recording into the doc instead.

use std::path::Path;
use std::sync::Mutex;

/// What the steps recorded: `$ command` lines, each followed by its output.
#[derive(Default)]
pub struct Transcript(Mutex<String>);

/// The markers around the generated block in docs/fleet.md.
const BEGIN: &str = "<!-- walkthrough: written by tests/fleet (CVO_FLEET_WALKTHROUGH=write), checked by it -->\n```\n";
const END: &str = "```\n<!-- end of walkthrough -->";

impl Transcript {
    /// Records `command` (as a user types it) and its `output`, made stable.
    pub fn record(&self, command: &str, output: &str) {
        let mut text = self.0.lock().unwrap_or_else(|p| p.into_inner());
        text.push_str(&format!("$ {command}\n"));
        let output = stable(output);
        text.push_str(&output);
        if !output.is_empty() && !output.ends_with('\n') {
            text.push('\n');
        }
    }

    /// Records `text` as a comment line: what happened between commands.
    pub fn note(&self, text: &str) {
        let mut out = self.0.lock().unwrap_or_else(|p| p.into_inner());
        out.push_str(&format!("# {text}\n"));
    }

    /// What was recorded.
    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// `text` without what changes from run to run: loopback and bridge registry ports, digests,
/// generated names, temporary and repository paths.
pub fn stable(text: &str) -> String {
    let rules: [(&str, &str); 7] = [
        (r"(127\.0\.0\.1|10\.244\.\d+\.1):\d+", "127.0.0.1:5000"),
        (r"sha256:[0-9a-f]{64}", "sha256:…"),
        (r"sha256-[0-9a-f]{64}", "sha256-…"),
        // A ManifestWork's generated name.
        (r"(cvo-rollout-[a-z0-9-]*waves)[a-z0-9]{5}\b", "${1}xxxxx"),
        (r"/[^\s:]*/tests/fixtures/oci/keys/", ""),
        (r"/[^\s:]*?/manifests-example", "manifests-example"),
        (r"/tmp/[^\s:]*/", ""),
    ];
    let mut out = text.to_owned();
    for (pattern, with) in rules {
        out = regex::Regex::new(pattern)
            .expect("a pattern")
            .replace_all(&out, with)
            .into_owned();
    }
    out
}

/// Compares `recorded` with docs/fleet.md's block (or writes it there).
pub fn check(doc: &Path, recorded: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(doc).map_err(|e| format!("{}: {e}", doc.display()))?;
    let start = text
        .find(BEGIN)
        .ok_or_else(|| format!("{}: no walkthrough marker {BEGIN:?}", doc.display()))?
        + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .ok_or_else(|| format!("{}: no end marker {END:?}", doc.display()))?;
    if std::env::var_os("CVO_FLEET_WALKTHROUGH").is_some_and(|v| v == "write") {
        let written = format!("{}{recorded}{}", &text[..start], &text[end..]);
        return std::fs::write(doc, written).map_err(|e| format!("{}: {e}", doc.display()));
    }
    let documented = &text[start..end];
    if documented == recorded {
        return Ok(());
    }
    let first = documented
        .lines()
        .zip(recorded.lines())
        .position(|(d, r)| d != r)
        .unwrap_or_else(|| documented.lines().count().min(recorded.lines().count()));
    Err(format!(
        "docs/fleet.md's walkthrough is not what this tier ran (first difference at its line {}: documented {:?}, ran {:?}); run the tier with CVO_FLEET_WALKTHROUGH=write to write it:\n{recorded}",
        first + 1,
        documented.lines().nth(first),
        recorded.lines().nth(first),
    ))
}
