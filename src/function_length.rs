//! The house rule on function length, checked: no function of the product's code is longer than
//! [`MAX_LINES`] lines, and at most [`LONG_ALLOWED`] are longer than [`LONG_LINES`].
//!
//! A function's length is its lines from `fn` to its closing brace, as a reader scrolls them:
//! blank and comment lines inside count, the doc comment and attributes above do not. Every
//! function with a body counts (free, associated, trait defaults, nested), except test code: an
//! item under `#[cfg(test)]`, and the files of a `#[cfg(test)] mod name;`.
//!
//! Comments, strings, raw strings and char literals are blanked out before braces are counted
//! ([`code_only`]), so `"}"`, `'{'` or a brace in a comment never moves a count.
//!
//! Why a test and not clippy's `too_many_lines`: that lint has one threshold, so it cannot say
//! "at most five over 100", and it counts code lines only — another measure than the one the
//! project's goal is stated in. Why not `syn`: its line numbers need proc-macro2's
//! `span-locations`, a feature that rebuilds every proc macro of the tree (and the crates that
//! use them) for one test.

use std::path::{Path, PathBuf};

/// No function is longer.
const MAX_LINES: usize = 150;
/// Functions longer than this are the exception...
const LONG_LINES: usize = 100;
/// ...and there are at most this many.
const LONG_ALLOWED: usize = 5;

/// How a test-only item starts (rustfmt writes it this way, and `cargo fmt` is checked).
const CFG_TEST: &str = "#[cfg(test)]";

/// One function: its name, the line of its `fn` (from 1) and its length in lines.
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// `source` with comments, string, raw-string and char literals replaced by spaces (line
/// breaks kept, so lines stay where they were): what is left is code.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out: Vec<char> = chars.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(chars.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |k: usize| chars[k].is_alphanumeric() || chars[k] == '_';
    let at = |k: usize| chars.get(k).copied();
    let mut i = 0;
    while i < chars.len() {
        let end = match chars[i] {
            '/' if at(i + 1) == Some('/') => Some(
                (i..chars.len())
                    .find(|&k| chars[k] == '\n')
                    .unwrap_or(chars.len()),
            ),
            '/' if at(i + 1) == Some('*') => Some(block_comment_end(&chars, i)),
            '"' => Some(string_end(&chars, i)),
            'r' if raw_string_at(&chars, i) && (i == 0 || !ident(i - 1) || prefix(&chars, i)) => {
                Some(raw_string_end(&chars, i))
            }
            // An escape ('\n', '\'', '\u{7d}'): up to the closing quote.
            '\'' if at(i + 1) == Some('\\') => Some(
                (i + 3..chars.len())
                    .find(|&k| chars[k] == '\'')
                    .map_or(chars.len(), |k| k + 1),
            ),
            // 'x'; a lifetime or label ('a, 'outer:) has no quote two characters on.
            '\'' if at(i + 2) == Some('\'') => Some(i + 3),
            _ => None,
        };
        match end {
            Some(end) => {
                blank(&mut out, i, end);
                i = end;
            }
            None => i += 1,
        }
    }
    out.into_iter().collect()
}

/// A `b` or `c` before the `r` at `i` that starts the literal (`br"…"`, `cr"…"`).
fn prefix(chars: &[char], i: usize) -> bool {
    i >= 1
        && matches!(chars[i - 1], 'b' | 'c')
        && (i == 1 || !(chars[i - 2].is_alphanumeric() || chars[i - 2] == '_'))
}

/// Whether `r`, then any number of `#`, then `"` starts at `i`.
fn raw_string_at(chars: &[char], i: usize) -> bool {
    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
    chars.get(i + 1 + hashes) == Some(&'"')
}

/// The end (exclusive) of the raw string starting at `i` (`r##"…"##`).
fn raw_string_end(chars: &[char], i: usize) -> usize {
    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
    let mut k = i + hashes + 2;
    while k < chars.len() {
        if chars[k] == '"'
            && chars[k + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return k + 1 + hashes;
        }
        k += 1;
    }
    chars.len()
}

/// The end (exclusive) of the string starting at `i`, escapes skipped.
fn string_end(chars: &[char], i: usize) -> usize {
    let mut k = i + 1;
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            '"' => return k + 1,
            _ => k += 1,
        }
    }
    chars.len()
}

/// The end (exclusive) of the block comment starting at `i`; block comments nest.
fn block_comment_end(chars: &[char], i: usize) -> usize {
    let (mut depth, mut k) = (0, i);
    while k + 1 < chars.len() {
        match (chars[k], chars[k + 1]) {
            ('/', '*') => {
                depth += 1;
                k += 2;
            }
            ('*', '/') => {
                depth -= 1;
                k += 2;
                if depth == 0 {
                    return k;
                }
            }
            _ => k += 1,
        }
    }
    chars.len()
}

/// Code (from [`code_only`]) read item by item.
struct Code {
    chars: Vec<char>,
    /// The line (from 1) of each character.
    lines: Vec<usize>,
}

impl Code {
    fn new(source: &str) -> Code {
        let chars: Vec<char> = code_only(source).chars().collect();
        let lines = chars
            .iter()
            .scan(1, |line, c| {
                let this = *line;
                *line += usize::from(*c == '\n');
                Some(this)
            })
            .collect();
        Code { chars, lines }
    }

    fn line_at(&self, i: usize) -> usize {
        self.lines[i]
    }

    fn starts_with(&self, i: usize, s: &str) -> bool {
        s.chars()
            .enumerate()
            .all(|(k, c)| self.chars.get(i + k) == Some(&c))
    }

    fn is_ident(&self, i: usize) -> bool {
        self.chars
            .get(i)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_')
    }

    /// The identifier starting at `i`.
    fn ident(&self, i: usize) -> String {
        self.chars[i..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect()
    }

    /// Where the item whose text continues at `i` ends: after its `;`, or after the brace
    /// closing its body (the first `;` or `{` outside parentheses and brackets).
    fn item_end(&self, i: usize) -> usize {
        match self.body_start(i) {
            Some((k, '{')) => self.closing_brace(k) + 1,
            Some((k, _)) => k + 1,
            None => self.chars.len(),
        }
    }

    /// The first `;` or `{` from `i` outside parentheses and brackets (`[u8; 4]`).
    fn body_start(&self, i: usize) -> Option<(usize, char)> {
        let mut depth = 0i32;
        for (k, c) in self.chars.iter().enumerate().skip(i) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' | '{' if depth == 0 => return Some((k, *c)),
                _ => {}
            }
        }
        None
    }

    /// The `}` matching the `{` at `open`.
    fn closing_brace(&self, open: usize) -> usize {
        let mut depth = 0;
        for (k, c) in self.chars.iter().enumerate().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        self.chars.len() - 1
    }

    /// `fn NAME` at `i` (a definition, not a `fn(u8)` pointer type): the name.
    fn fn_at(&self, i: usize) -> Option<String> {
        let keyword = self.starts_with(i, "fn")
            && (i == 0 || !self.is_ident(i - 1))
            && self.chars.get(i + 2).is_some_and(|c| c.is_whitespace());
        if !keyword {
            return None;
        }
        let name_at = (i + 2..self.chars.len()).find(|&k| !self.chars[k].is_whitespace())?;
        let name = self.ident(name_at);
        (!name.is_empty()).then_some(name)
    }

    /// The functions outside test-only items, and the modules declared test-only
    /// (`#[cfg(test)] mod name;`, whose files are test code).
    fn functions(&self) -> (Vec<Function>, Vec<String>) {
        let (mut functions, mut test_modules) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < self.chars.len() {
            if self.starts_with(i, CFG_TEST) {
                let item = i + CFG_TEST.chars().count();
                let end = self.item_end(item);
                let text: String = self.chars[item..end].iter().collect();
                let words: Vec<&str> = text.split_whitespace().collect();
                if let [.., "mod", name] = words.as_slice() {
                    test_modules.push(name.trim_end_matches(';').to_owned());
                }
                i = end;
            } else if let Some(name) = self.fn_at(i) {
                if let Some((open, '{')) = self.body_start(i) {
                    let line = self.line_at(i);
                    let lines = self.line_at(self.closing_brace(open)) + 1 - line;
                    functions.push(Function { name, line, lines });
                }
                // Nested functions are found as the scan goes on inside this one.
                i += 2;
            } else {
                i += 1;
            }
        }
        (functions, test_modules)
    }
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("read src/").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Where the submodules of the module in `file` live: `src/a/` for `src/a/mod.rs`,
/// `src/lib.rs` and `src/main.rs`; `src/a/b/` for `src/a/b.rs`.
fn submodule_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new(""));
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") | None => dir.to_path_buf(),
        Some(stem) => dir.join(stem),
    }
}

#[test]
fn no_function_is_too_long_and_few_are_long() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    // Test-only modules: `name.rs` and everything under `name/`.
    let mut test_only: Vec<PathBuf> = Vec::new();
    for path in &files {
        let source = std::fs::read_to_string(path).expect("read source file");
        let (functions, test_modules) = Code::new(&source).functions();
        for name in test_modules {
            let dir = submodule_dir(path);
            test_only.push(dir.join(format!("{name}.rs")));
            test_only.push(dir.join(name));
        }
        found.push((path, functions));
    }
    // (lines, "src/…:line `name`"), every function over LONG_LINES.
    let mut long = Vec::new();
    for (path, functions) in found {
        if test_only.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        let shown = path.strip_prefix(root).unwrap_or(path).display();
        for f in functions.into_iter().filter(|f| f.lines > LONG_LINES) {
            long.push((f.lines, format!("{shown}:{} `{}`", f.line, f.name)));
        }
    }
    long.sort_by(|a, b| b.cmp(a));
    let list = |fs: &[&(usize, String)]| {
        fs.iter()
            .map(|(lines, at)| format!("  {at}: {lines} lines"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let too_long: Vec<_> = long.iter().filter(|(n, _)| *n > MAX_LINES).collect();
    assert!(
        too_long.is_empty(),
        "functions over {MAX_LINES} lines (the limit); split them into functions that each do \
         one thing:\n{}",
        list(&too_long)
    );
    let long: Vec<_> = long.iter().collect();
    assert!(
        long.len() <= LONG_ALLOWED,
        "{} functions are over {LONG_LINES} lines, at most {LONG_ALLOWED} may be; shorten \
         some of them:\n{}",
        long.len(),
        list(&long)
    );
}

#[test]
fn literals_and_comments_are_not_code() {
    let code = code_only(
        "a(\"}\\\"{\", '{', b'}', '\\'', '\\u{7d}', r#\"\"}\"#, br\"{\", x'a); // }\n/* { /* } */ } */ b",
    );
    assert_eq!(
        code.chars().filter(|c| "{}".contains(*c)).count(),
        0,
        "{code:?}"
    );
    assert!(code.starts_with("a("), "{code:?}");
    assert!(code.contains("x'a"), "a lifetime stays: {code:?}");
    assert!(code.ends_with(" b"), "{code:?}");
    assert_eq!(code.lines().count(), 2, "line breaks are kept");
}

#[test]
fn lengths_count_lines_from_fn_to_its_brace_and_skip_test_code() {
    let source = r##"
/// Doc lines are not counted.
#[inline]
fn braces_in_literals<'a>(x: &'a [u8; 4], f: fn(u8) -> u8) {
    let a = "}}} fn not_a_function() {";
    let b = r#"}"#;
    let c = '}';
    // }
    /* } */
}

impl S {
    pub async fn method(&self) -> u8 {
        fn nested() {}
        0
    }
}

trait T {
    fn required(&self);
    fn provided(&self) {
    }
}

#[cfg(test)]
mod tests {
    fn helper() {
        let x = 1;
    }
}

#[cfg(test)]
mod fixtures;

#[cfg(not(test))]
fn product() {}
"##;
    let (functions, test_modules) = Code::new(source).functions();
    let found: Vec<(String, usize, usize)> = functions
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect();
    let want = [
        ("braces_in_literals", 4, 7),
        ("method", 13, 4),
        ("nested", 14, 1),
        ("provided", 21, 2),
        ("product", 36, 1),
    ]
    .map(|(name, line, lines)| (name.to_owned(), line, lines));
    assert_eq!(found, want);
    assert_eq!(
        test_modules,
        ["fixtures"],
        "inline test modules are skipped where they are"
    );
    assert_eq!(submodule_dir(Path::new("src/a/mod.rs")), Path::new("src/a"));
    assert_eq!(submodule_dir(Path::new("src/a/b.rs")), Path::new("src/a/b"));
    assert_eq!(submodule_dir(Path::new("src/lib.rs")), Path::new("src"));
}
