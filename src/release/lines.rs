//! Lines of a release file as editors and YAML count them: LF, CRLF and a lone CR each end
//! one line (old Mac files end lines with CR; files edited on several systems mix all three).
//!
//! Every line number the loader reports (parse errors, where a document starts, the line of a
//! field, template errors, invalid UTF-8) is counted here, so they all name the line an editor
//! shows and never one past the end of the file. [`normalize`] turns each lone CR into a LF
//! (same length, so byte offsets and columns do not move); the YAML and JSON parsers then count
//! lines as this module does.

use std::borrow::Cow;

/// `text` with every lone CR (one not followed by LF) made a LF. Byte offsets are unchanged;
/// YAML reads a lone CR as a line break and JSON as white space, so the meaning is unchanged.
pub fn normalize(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let lone = |i: usize| bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n');
    if !(0..bytes.len()).any(lone) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut start = 0;
    for i in (0..bytes.len()).filter(|&i| lone(i)) {
        out.push_str(&text[start..i]);
        out.push('\n');
        start = i + 1;
    }
    out.push_str(&text[start..]);
    Cow::Owned(out)
}

/// [`normalize`] for an owned text: the same `String` when it has no lone CR.
pub fn normalize_owned(text: String) -> String {
    let normalized = match normalize(&text) {
        Cow::Owned(n) => Some(n),
        Cow::Borrowed(_) => None,
    };
    normalized.unwrap_or(text)
}

/// The lines of `text` with their line ends (LF, CRLF or a lone CR); the last one may have
/// none. Joined, they are `text` again.
pub fn split_inclusive(text: &str) -> impl Iterator<Item = &str> {
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
        Some(&text[from..end])
    })
}

/// The lines of `text` without their line ends.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    split_inclusive(text).map(|l| {
        l.strip_suffix("\r\n")
            .or_else(|| l.strip_suffix(['\n', '\r']))
            .unwrap_or(l)
    })
}

/// How many lines `text` has (a final line end does not start another one).
pub fn count(text: &str) -> usize {
    split_inclusive(text).count()
}

/// The one-based line that byte offset `byte` of `text` is on (the end of the text is on its
/// last line, or on the line after a final line end).
pub fn line_of(text: &str, byte: usize) -> usize {
    let byte = byte.min(text.len());
    let before = &text.as_bytes()[..byte];
    let ends = before
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\n' || b == b'\r' && text.as_bytes().get(i + 1) != Some(&b'\n'))
        .count();
    ends + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LF, CRLF and lone CR, mixed: six lines as an editor shows them.
    const MIXED: &str = "a\r\nb\rc\nd\r\re";

    #[test]
    fn each_line_end_ends_one_line() {
        assert_eq!(
            lines(MIXED).collect::<Vec<_>>(),
            ["a", "b", "c", "d", "", "e"]
        );
        assert_eq!(count(MIXED), 6);
        assert_eq!(split_inclusive(MIXED).collect::<String>(), MIXED);
        assert_eq!(count("a\r\r\n"), 2, "a lone CR, then CRLF");
        assert_eq!(count("a\n"), 1);
        assert_eq!(count(""), 0);
        assert_eq!(count("\r"), 1);
    }

    #[test]
    fn line_of_agrees_with_lines() {
        let mut offset = 0;
        for (i, line) in split_inclusive(MIXED).enumerate() {
            for b in offset..offset + line.len() {
                assert_eq!(line_of(MIXED, b), i + 1, "byte {b}");
            }
            offset += line.len();
        }
        assert_eq!(line_of("a\r\n", 3), 2);
        assert_eq!(line_of("a\r", 1), 1, "the CR itself is on its line");
        assert_eq!(line_of("a\r", 2), 2);
        assert_eq!(line_of("x", 99), 1);
    }

    #[test]
    fn normalize_keeps_offsets_and_crlf() {
        assert_eq!(normalize(MIXED), "a\r\nb\nc\nd\n\ne");
        assert_eq!(normalize(MIXED).len(), MIXED.len());
        assert!(matches!(normalize("a\r\nb\n"), Cow::Borrowed(_)));
        let n = normalize(MIXED);
        assert_eq!(
            lines(&n).collect::<Vec<_>>(),
            lines(MIXED).collect::<Vec<_>>()
        );
        // Rust's own `str::lines` agrees once lone CRs are gone.
        assert_eq!(n.lines().count(), count(MIXED));
    }
}
