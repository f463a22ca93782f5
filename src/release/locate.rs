//! The line of a field inside a manifest's document, for messages that name a field path
//! (`spec.template.spec.containers[0].ports`).
//!
//! The parsed object keeps no per-field positions (that would cost memory for every value of
//! every release to help the rare broken one), so the file is read again and the path walked
//! over the document's block-style lines by indentation. Flow-style values (`{a: 1}`) are not
//! walked into: the line found is then that of the deepest field reached, which is still on
//! the path. Best effort by design: `None` only when the file cannot be read again.
//! [`FieldLines`] reads each file once for all the fields asked of it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::Manifest;
use super::lines::{ParserLines, split_parser_inclusive};
use super::read::{DEFAULT_MAX_FILE_BYTES, read_capped};

/// One step of a field path.
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some((index, tail)) = rest.split_once(']') {
            if let Ok(i) = index.parse() {
                out.push(Step::Index(i));
            }
            rest = tail.strip_prefix('[').unwrap_or(tail);
        }
    }
    out
}

/// The lines of fields in a release's manifests, each file read and indexed once however many
/// of its fields are asked for: a walk then costs one document, not the whole file (a file of
/// 20,000 documents, each with a finding, read itself 20,000 times).
#[derive(Default)]
pub struct FieldLines {
    /// By path; `None` when the file could not be read again.
    files: RefCell<HashMap<PathBuf, Option<Rc<Indexed>>>>,
}

/// A file's text with the byte offset where each of the parser's lines starts.
struct Indexed {
    text: String,
    editor: ParserLines,
    starts: Vec<usize>,
}

impl Indexed {
    fn read(path: &Path) -> Option<Self> {
        let bytes = read_capped(path, DEFAULT_MAX_FILE_BYTES).ok()?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let editor = ParserLines::new(&text);
        let mut starts = Vec::new();
        let mut at = 0;
        for line in split_parser_inclusive(&text) {
            starts.push(at);
            at += line.len();
        }
        Some(Self {
            text,
            editor,
            starts,
        })
    }
}

impl FieldLines {
    /// The one-based line of `path` (dotted, with `[i]` indexes) in `manifest`'s document.
    pub fn line(&self, manifest: &Manifest, path: &str) -> Option<usize> {
        let start = manifest.location.line?;
        let file = self
            .files
            .borrow_mut()
            .entry(manifest.location.file.clone())
            .or_insert_with(|| Indexed::read(&manifest.location.file).map(Rc::new))
            .clone()?;
        // The document is walked on the parser's lines (a lone CR among LFs ends one, as in
        // YAML); the line found is then numbered as an editor does.
        let first = file.editor.first_parser_line(start);
        let from = *file.starts.get(first - 1)?;
        let lines: Vec<&str> = split_parser_inclusive(&file.text[from..])
            .map(|l| l.trim_end_matches(['\n', '\r']))
            .take_while({
                let mut first = true;
                move |l| std::mem::take(&mut first) || !l.starts_with("---")
            })
            .collect();
        Some(
            file.editor
                .editor_line(first + walk(&lines, &steps(path)))
                .max(start),
        )
    }
}

/// Zero-based index (in `lines`) of the deepest step of `steps` found.
fn walk(lines: &[&str], steps: &[Step<'_>]) -> usize {
    // `parent`: indentation the current block's content must exceed; `from`: first line of
    // that block; `col`: column where the content of the current line starts (after `- `).
    let mut parent: isize = -1;
    let mut from = 0;
    let mut found = 0;
    for step in steps {
        let hit = match step {
            Step::Key(key) => find_key(lines, from, parent, key),
            Step::Index(i) => find_item(lines, from, parent, *i),
        };
        let Some((line, col)) = hit else {
            break;
        };
        found = line;
        from = line;
        parent = col as isize;
    }
    found
}

/// The content of a line past its indentation and any `- ` sequence indicators, and the
/// column where it starts.
fn content(line: &str) -> (usize, &str) {
    let mut col = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    while let Some(r) = rest.strip_prefix("- ") {
        let trimmed = r.trim_start();
        col += rest.len() - trimmed.len();
        rest = trimmed;
    }
    (col, rest)
}

fn is_significant(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

fn find_key(lines: &[&str], from: usize, parent: isize, key: &str) -> Option<(usize, usize)> {
    for (i, line) in lines.iter().enumerate().skip(from) {
        if !is_significant(line) {
            continue;
        }
        let indent = (line.len() - line.trim_start().len()) as isize;
        let (col, rest) = content(line);
        if i > from && indent <= parent {
            return None;
        }
        if col as isize <= parent {
            continue;
        }
        let unquoted = rest
            .strip_prefix(['"', '\''])
            .and_then(|r| r.strip_prefix(key))
            .and_then(|r| r.strip_prefix(['"', '\'']));
        let after = unquoted.or_else(|| rest.strip_prefix(key));
        if after.is_some_and(|a| a.starts_with(':')) {
            return Some((i, col));
        }
    }
    None
}

fn find_item(lines: &[&str], from: usize, parent: isize, index: usize) -> Option<(usize, usize)> {
    let mut seen = 0;
    let mut dash_col = None;
    for (i, line) in lines.iter().enumerate().skip(from) {
        if !is_significant(line) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        // On the key's own line (`key: - x` is not YAML), only a `- ` that starts it counts.
        let own_line = i == from;
        if !own_line && (indent as isize) <= parent && !line.trim_start().starts_with("- ") {
            return None;
        }
        if !line.trim_start().starts_with("- ") || own_line && (indent as isize) <= parent {
            continue;
        }
        match dash_col {
            None => dash_col = Some(indent),
            Some(c) if indent < c => return None,
            Some(c) if indent > c => continue,
            Some(_) => {}
        }
        if seen == index {
            return Some((i, indent));
        }
        seen += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_field_costs_its_document_not_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let work = |n: usize| {
            let text: String = (0..n)
                .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  k: v\n"))
                .collect();
            std::fs::write(dir.path().join("0000_10_a_b.yaml"), text).unwrap();
            let release = super::super::load(dir.path(), &Default::default()).unwrap();
            let lines = FieldLines::default();
            let (found, work) = super::super::work::measure(|| {
                release
                    .manifests
                    .iter()
                    .map(|m| lines.line(m, "data.k"))
                    .collect::<Vec<_>>()
            });
            let expected: Vec<_> = (0..n).map(|i| Some(7 * i + 7)).collect();
            assert_eq!(found, expected);
            work.bytes
        };
        let (small, large) = (work(500), work(2_000));
        assert!(
            large <= 4 * small + small / 4,
            "{small} bytes scanned for 500 documents, {large} for 2,000"
        );
    }

    #[test]
    fn paths_split_into_keys_and_indexes() {
        assert_eq!(
            steps("spec.containers[0].ports[12].name"),
            [
                Step::Key("spec"),
                Step::Key("containers"),
                Step::Index(0),
                Step::Key("ports"),
                Step::Index(12),
                Step::Key("name"),
            ]
        );
    }

    #[test]
    fn walks_keys_and_list_items_by_indentation() {
        let doc = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: a\n        image: x\n      - name: b\n        ports:\n        - containerPort: 80\n        - containerPort: eighty\n";
        let lines: Vec<&str> = doc.lines().collect();
        let at = |path: &str| walk(&lines, &steps(path)) + 1;
        assert_eq!(at("spec.replicas"), 6);
        assert_eq!(at("spec.template.spec.containers[1].name"), 12);
        assert_eq!(
            at("spec.template.spec.containers[1].ports[1].containerPort"),
            15
        );
        assert_eq!(at("metadata.name"), 4);
        // Not present: the deepest step found.
        assert_eq!(at("spec.template.missing"), 7);
    }
}
