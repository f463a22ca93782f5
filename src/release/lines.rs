//! Lines of a release file as editors number them, and the YAML parser's lines mapped to them.
//!
//! Editors (vim, emacs, VS Code), git, GitHub, `wc -l` and `grep -n` detect a file's line ends
//! from the whole file: a file that contains any LF has its lines end at LF (a CRLF is one
//! line end; a lone CR is a character inside the line, shown as `^M`); a file with no LF but
//! with CRs (classic Mac) has its lines end at CR; a file with neither is one line. Every line
//! number the loader reports (parse errors, where a document starts, the line of a field,
//! template errors, invalid UTF-8, `.json` and `release-metadata` errors) is counted by this
//! rule, here, so they all name the line an editor shows and never one past the file's end.
//!
//! The YAML parser reads every lone CR as a line break too (YAML's own rule), so in a file
//! that mixes LF with lone CRs its lines are not the editor's. Documents are split and parsed
//! the parser's way (a lone CR must not change what a document means), and [`ParserLines`]
//! maps the parser's line numbers back to the editor's. [`normalize`] makes a CR-only file's
//! line ends LFs once, so that the parsers and the template renderer see the lines an editor
//! shows; both rules number such a file alike.

use std::borrow::Cow;

/// The byte that ends a line of `text`: LF when the text has one, else CR.
fn end_byte(text: &[u8]) -> u8 {
    match text.iter().position(|&b| b == b'\n') {
        Some(at) => {
            super::work::scanned(at + 1);
            b'\n'
        }
        None => {
            super::work::scanned(text.len());
            b'\r'
        }
    }
}

/// `text` with every CR made a LF when it has CRs but no LF (a classic Mac file); any other
/// text unchanged. Byte offsets do not move, the lines an editor numbers stay the same, and
/// YAML reads CR and LF alike, so the meaning is unchanged.
pub fn normalize(text: &str) -> Cow<'_, str> {
    if end_byte(text.as_bytes()) == b'\r' && text.contains('\r') {
        Cow::Owned(text.replace('\r', "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// [`normalize`] for an owned text: the same `String` when nothing changes.
pub fn normalize_owned(text: String) -> String {
    match normalize(&text) {
        Cow::Owned(n) => n,
        Cow::Borrowed(_) => text,
    }
}

/// The lines of `text`, as an editor numbers them, with their line ends; the last one may
/// have none. Joined, they are `text` again.
pub fn split_inclusive(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(char::from(end_byte(text.as_bytes())))
}

/// How many lines an editor shows for `text` (a final line end does not start another one;
/// an empty text has none).
pub fn count(text: &str) -> usize {
    split_inclusive(text).count()
}

/// The one-based line, as an editor numbers it, that byte offset `byte` of `text` is on (the
/// end of the text is on its last line, or on the line after a final line end). `text` is
/// the whole file (bytes that need not be UTF-8): which byte ends a line depends on all of it.
///
/// It counts from the start: for many offsets of one text, use a [`LineCursor`].
pub fn line_of(text: &(impl AsRef<[u8]> + ?Sized), byte: usize) -> usize {
    LineCursor::new(text.as_ref()).line_at(byte)
}

/// [`line_of`] for offsets that only grow, such as each template action of a file in turn:
/// it counts on from the last offset, so all of them together cost one pass over the text.
pub struct LineCursor<'a> {
    text: &'a [u8],
    end: u8,
    /// The offset counted up to, and the line it is on.
    at: usize,
    line: usize,
}

impl<'a> LineCursor<'a> {
    /// A cursor at the start of `text`, the whole file (which byte ends a line depends on all
    /// of it).
    pub fn new(text: &'a [u8]) -> Self {
        Self {
            end: end_byte(text),
            text,
            at: 0,
            line: 1,
        }
    }

    /// The one-based line of byte offset `byte`, as [`line_of`] numbers it. An offset before
    /// the last one asked for counts again from the start.
    pub fn line_at(&mut self, byte: usize) -> usize {
        let byte = byte.min(self.text.len());
        if byte < self.at {
            (self.at, self.line) = (0, 1);
        }
        let part = &self.text[self.at..byte];
        super::work::scanned(part.len());
        self.line += part.iter().filter(|&&b| b == self.end).count();
        self.at = byte;
        self.line
    }
}

/// The lines of `text` as the YAML parser reads them, with their line ends: LF, CRLF and a
/// lone CR each end one. Only for splitting text the parser reads (documents, repairs) so
/// that its line numbers match; map them with [`ParserLines`] before reporting them.
pub fn split_parser_inclusive(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let from = start;
        let end = match bytes[from..].iter().position(|&b| b == b'\n' || b == b'\r') {
            None => bytes.len(),
            Some(i) if bytes[from + i] == b'\r' && bytes.get(from + i + 1) == Some(&b'\n') => {
                from + i + 2
            }
            Some(i) => from + i + 1,
        };
        start = end;
        super::work::scanned(end - from);
        Some(&text[from..end])
    })
}

/// How many lines the YAML parser reads in `text` (see [`split_parser_inclusive`]).
pub fn count_parser(text: &str) -> usize {
    split_parser_inclusive(text).count()
}

/// The YAML parser's line numbers of one whole text, mapped to the lines an editor shows.
///
/// The two differ only in a text with LFs and lone CRs; for any other text the mapping is
/// the identity and costs nothing.
pub struct ParserLines {
    /// For each of the parser's lines (index = line - 1), the editor's line it starts on;
    /// `None` when they are the same.
    starts_on: Option<Vec<usize>>,
}

impl ParserLines {
    /// The mapping for `text` (the whole file, as parsed).
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        super::work::scanned(bytes.len());
        let has_lone_cr = || {
            bytes
                .iter()
                .enumerate()
                .any(|(i, &b)| b == b'\r' && bytes.get(i + 1) != Some(&b'\n'))
        };
        if end_byte(bytes) == b'\r' || !has_lone_cr() {
            return Self { starts_on: None };
        }
        let mut starts_on = vec![1];
        let mut line = 1;
        for part in split_parser_inclusive(text) {
            if part.ends_with('\n') {
                line += 1;
            }
            starts_on.push(line);
        }
        // The last entry is the line after a final break (where an error at the end of the
        // text may point); drop it when the text does not end with a break.
        if !text.ends_with(['\n', '\r']) {
            starts_on.pop();
        }
        Self {
            starts_on: Some(starts_on),
        }
    }

    /// The editor's line for the parser's one-based line `line` (a line past the end counts
    /// on from the last line, as the parser does).
    pub fn editor_line(&self, line: usize) -> usize {
        let Some(map) = &self.starts_on else {
            return line;
        };
        let index = line.max(1) - 1;
        match map.get(index) {
            Some(&l) => l,
            None => map.last().copied().unwrap_or(1) + (index + 1 - map.len()),
        }
    }

    /// The parser's first line that starts on the editor's one-based line `line`.
    pub fn first_parser_line(&self, line: usize) -> usize {
        match &self.starts_on {
            None => line,
            Some(map) => map.partition_point(|&l| l < line) + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of `text`, as an editor numbers them, without their line ends (LF or CRLF;
    /// CR in a file without LF): the reference the functions above are checked against.
    fn lines(text: &str) -> impl Iterator<Item = &str> {
        let end = char::from(end_byte(text.as_bytes()));
        split_inclusive(text).map(move |l| match l.strip_suffix(end) {
            Some(l) if end == '\n' => l.strip_suffix('\r').unwrap_or(l),
            Some(l) => l,
            None => l,
        })
    }

    /// LF, CRLF and lone CRs: lines end at LF only.
    const MIXED: &str = "a\r\nb\rc\nd\r\re";

    #[test]
    fn a_file_with_lf_ends_lines_at_lf_only() {
        assert_eq!(lines(MIXED).collect::<Vec<_>>(), ["a", "b\rc", "d\r\re"]);
        assert_eq!(count(MIXED), 3);
        assert_eq!(split_inclusive(MIXED).collect::<String>(), MIXED);
        assert_eq!(count("a\r\r\n"), 1, "a lone CR, then CRLF: one line");
        assert_eq!(lines("a\r\r\n").collect::<Vec<_>>(), ["a\r"]);
        assert_eq!(count(&"x: 1\r\r\n".repeat(15)), 15);
        assert_eq!(count("a\n"), 1);
        assert_eq!(count("a\r\nb"), 2);
        assert_eq!(count(""), 0);
        assert_eq!(count("no end"), 1);
    }

    #[test]
    fn a_file_without_lf_ends_lines_at_cr() {
        assert_eq!(lines("a\rb\r\rc").collect::<Vec<_>>(), ["a", "b", "", "c"]);
        assert_eq!(count("a\rb\r"), 2);
        assert_eq!(count("\r"), 1);
        assert_eq!(line_of("a\rb\r", 2), 2);
        assert_eq!(line_of("a\rb\r", 4), 3);
    }

    #[test]
    fn line_of_agrees_with_lines() {
        for text in [
            MIXED,
            "a\rb\r\rc\r",
            "a\r\nb\r\n",
            "a\nb\n\nc",
            "x: 1\r\r\n",
        ] {
            let mut offset = 0;
            for (i, line) in split_inclusive(text).enumerate() {
                for b in offset..offset + line.len() {
                    assert_eq!(line_of(text, b), i + 1, "{text:?} byte {b}");
                }
                offset += line.len();
            }
        }
        assert_eq!(line_of("a\r\n", 3), 2);
        assert_eq!(line_of("a\rb\n", 3), 1, "a lone CR ends no line");
        assert_eq!(line_of("x", 99), 1);
        // Bytes that are not UTF-8 count alike.
        assert_eq!(line_of(b"a\r\n\xff\r".as_slice(), 3), 2);
        // Rust's own `str::lines` agrees on a file with LF.
        assert_eq!(MIXED.lines().count(), count(MIXED));
    }

    #[test]
    fn normalize_touches_only_cr_only_files() {
        assert_eq!(normalize("a\rb\r\rc"), "a\nb\n\nc");
        for unchanged in [MIXED, "a\r\nb\n", "a\nb", "abc", ""] {
            assert!(
                matches!(normalize(unchanged), Cow::Borrowed(_)),
                "{unchanged:?}"
            );
        }
        let cr = "a\rb\r\rc\r";
        assert_eq!(
            lines(&normalize(cr)).collect::<Vec<_>>(),
            lines(cr).collect::<Vec<_>>()
        );
    }

    #[test]
    fn parser_lines_break_at_every_line_end() {
        assert_eq!(
            split_parser_inclusive(MIXED).collect::<Vec<_>>(),
            ["a\r\n", "b\r", "c\n", "d\r", "\r", "e"]
        );
        assert_eq!(count_parser(MIXED), 6);
        assert_eq!(count_parser("a\r\r\n"), 2);
    }

    #[test]
    fn parser_lines_map_to_editor_lines() {
        let map = ParserLines::new(MIXED);
        let editor: Vec<usize> = (1..=6).map(|l| map.editor_line(l)).collect();
        assert_eq!(editor, [1, 2, 2, 3, 3, 3]);
        assert_eq!(map.editor_line(7), 4, "past the end counts on");
        assert_eq!(
            (1..=3)
                .map(|l| map.first_parser_line(l))
                .collect::<Vec<_>>(),
            [1, 2, 4]
        );
        // 15 lines ending `\r\r\n`: the parser's 30 lines (plus the one after the final
        // break) are the editor's 15 (plus one).
        let text = "x: 1\r\r\n".repeat(15);
        let map = ParserLines::new(&text);
        assert_eq!(map.editor_line(29), 15);
        assert_eq!(map.editor_line(30), 15);
        assert_eq!(map.editor_line(31), 16);
        assert_eq!(map.first_parser_line(15), 29);
        // Files whose two numberings agree map to themselves.
        for text in ["a\rb\r", "a\r\nb\n", "a\nb"] {
            let map = ParserLines::new(text);
            assert!(map.starts_on.is_none(), "{text:?}");
            assert_eq!((map.editor_line(5), map.first_parser_line(5)), (5, 5));
        }
    }
}
