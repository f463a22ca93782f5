//! The line of a field inside a manifest's document, for messages that name a field path
//! (`spec.template.spec.containers[0].ports`).
//!
//! The parsed object keeps no per-field positions (that would cost memory for every value of
//! every release to help the rare broken one), so the file is read again and the path walked
//! over the document's block-style lines by indentation. Flow-style values (`{a: 1}`) are not
//! walked into: the line found is then that of the deepest field reached, which is still on
//! the path. Best effort by design: `None` only when the file cannot be read again.

use super::Manifest;
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

/// The one-based line of `path` (dotted, with `[i]` indexes) in `manifest`'s document.
pub fn field_line(manifest: &Manifest, path: &str) -> Option<usize> {
    let start = manifest.location.line?;
    let bytes = read_capped(&manifest.location.file, DEFAULT_MAX_FILE_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    // The document is walked on the parser's lines (a lone CR among LFs ends one, as in
    // YAML); the line found is then numbered as an editor does.
    let editor = super::lines::ParserLines::new(&text);
    let first = editor.first_parser_line(start);
    let lines: Vec<&str> = super::lines::split_parser_inclusive(&text)
        .map(|l| l.trim_end_matches(['\n', '\r']))
        .skip(first - 1)
        .take_while({
            let mut first = true;
            move |l| std::mem::take(&mut first) || !l.starts_with("---")
        })
        .collect();
    Some(
        editor
            .editor_line(first + walk(&lines, &steps(path)))
            .max(start),
    )
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
