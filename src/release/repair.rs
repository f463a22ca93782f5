//! One linear pass that indents the under-indented continuation lines of multi-line quoted
//! scalars, so that the YAML parser reads them as libyaml (and so kubectl and CVO) does.
//!
//! YAML 1.2 requires each continuation line of a quoted scalar in block context to be
//! indented past the enclosing block; libyaml and go-yaml do not check, and real payloads
//! rely on that (OpenShift's `scc-nested-container` description). The leading white space of
//! a continuation line is never part of the value (line folding), so indenting such a line
//! further cannot change what the document means.
//!
//! The scan is a small YAML lexer: it tracks quoted scalars, block scalars (`|`, `>`),
//! multi-line plain scalars, comments and flow collections well enough to know, for every
//! line, whether it continues a quoted scalar. It is only used for a document the parser has
//! already refused for exactly this reason, and the repaired text is parsed again in full,
//! so a document the scan misreads is still reported, never silently accepted.

/// The repaired text of a document and what was changed.
pub struct Repaired {
    pub text: String,
    /// Spaces added at the start of each line (zero-based line index), for error columns.
    pub pads: Vec<usize>,
    /// One-based line (the parser's: a lone CR ends one) and column of a quote that is never
    /// closed.
    pub unclosed: Option<(usize, usize)>,
}

/// Indents continuation lines of quoted scalars; `None` when nothing needed it, or when the
/// padding would more than double the text (a pathological document is not amplified).
pub fn indent_quoted_continuations(text: &str) -> Option<Repaired> {
    let mut scan = Scan::default();
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut pads = Vec::new();
    let mut added = 0usize;
    for (index, line) in super::lines::split_parser_inclusive(text).enumerate() {
        let pad = scan.line(line.as_bytes(), index + 1);
        added += pad;
        if added > text.len() {
            return None;
        }
        pads.push(pad);
        out.extend(std::iter::repeat_n(' ', pad));
        out.push_str(line);
    }
    let unclosed = match scan.state {
        State::Quoted { line, col, .. } => Some((line, col + 1)),
        _ => None,
    };
    if added == 0 && unclosed.is_none() {
        return None;
    }
    Some(Repaired {
        text: out,
        pads,
        unclosed,
    })
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Normal,
    /// Inside a quoted scalar opened at (line, col); continuation lines must start at
    /// `min_col` or later.
    Quoted {
        quote: u8,
        min_col: usize,
        line: usize,
        col: usize,
    },
    /// Inside a block scalar: lines indented past `parent` (and blank lines) are its content.
    Block { parent: usize },
}

#[derive(Default)]
struct Scan {
    state: State,
    /// Depth of `[`/`{` flow collections.
    flow: usize,
    /// The previous line ended inside a plain scalar: lines indented at least this much
    /// continue it.
    plain_min_indent: Option<usize>,
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn is_break(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

impl Scan {
    /// Scans one line (with its line break); returns how many spaces to put before it.
    fn line(&mut self, line: &[u8], number: usize) -> usize {
        let end = line.iter().position(|&b| is_break(b)).unwrap_or(line.len());
        let line = &line[..end];
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let first = line.iter().position(|&b| !is_blank(b));
        match self.state {
            State::Block { parent } => {
                if first.is_none() || indent > parent {
                    return 0;
                }
                self.state = State::Normal;
            }
            State::Quoted { min_col, .. } => {
                let pad = match first {
                    Some(col) if self.flow == 0 && col < min_col => min_col - col,
                    _ => 0,
                };
                if let Some(pos) = self.quoted(line, 0) {
                    self.rest(line, pos, false, indent, number);
                }
                return pad;
            }
            State::Normal => {}
        }
        let Some(first) = first else {
            return 0;
        };
        if let Some(min) = self.plain_min_indent.take()
            && self.flow == 0
            && indent >= min
            && line[first] != b'#'
        {
            // A continuation line of a multi-line plain scalar: all text.
            self.plain_min_indent = Some(min);
            return 0;
        }
        self.rest(line, first, true, indent, number);
        0
    }

    /// Scans inside a quoted scalar from `pos`; the position after its closing quote, or
    /// `None` when the line ends inside it.
    fn quoted(&mut self, line: &[u8], mut pos: usize) -> Option<usize> {
        let State::Quoted { quote, .. } = self.state else {
            return Some(pos);
        };
        while pos < line.len() {
            let b = line[pos];
            if quote == b'"' && b == b'\\' {
                pos += 2;
                continue;
            }
            if b == quote {
                if quote == b'\'' && line.get(pos + 1) == Some(&b'\'') {
                    pos += 2;
                    continue;
                }
                self.state = State::Normal;
                return Some(pos + 1);
            }
            pos += 1;
        }
        None
    }

    /// Scans the rest of a line in normal state. `node_start`: a node may begin at `pos`;
    /// `parent`: the column of the block the next node belongs to.
    fn rest(
        &mut self,
        line: &[u8],
        mut pos: usize,
        mut node_start: bool,
        mut parent: usize,
        number: usize,
    ) {
        let mut value_col = pos;
        let mut plain_open = false;
        let at = |i: usize| line.get(i).copied();
        let separated = |i: usize| at(i).is_none_or(is_blank);
        while pos < line.len() {
            let b = line[pos];
            if is_blank(b) {
                pos += 1;
                continue;
            }
            plain_open = false;
            if b == b'#' {
                return;
            }
            if !node_start {
                match b {
                    b':' if separated(pos + 1) || self.flow > 0 => {
                        parent = value_col;
                        node_start = true;
                    }
                    b',' if self.flow > 0 => node_start = true,
                    b']' | b'}' => self.flow = self.flow.saturating_sub(1),
                    _ => {}
                }
                pos += 1;
                continue;
            }
            value_col = pos;
            match b {
                b'\'' | b'"' => {
                    self.state = State::Quoted {
                        quote: b,
                        min_col: parent + 1,
                        line: number,
                        col: pos,
                    };
                    match self.quoted(line, pos + 1) {
                        Some(next) => {
                            pos = next;
                            node_start = false;
                        }
                        None => return,
                    }
                }
                b'|' | b'>' if self.flow == 0 => {
                    self.state = State::Block { parent };
                    return;
                }
                b'[' | b'{' => {
                    self.flow += 1;
                    pos += 1;
                }
                b']' | b'}' | b',' if self.flow > 0 => {
                    if b != b',' {
                        self.flow -= 1;
                        node_start = false;
                    }
                    pos += 1;
                }
                b'-' | b'?' if self.flow == 0 && separated(pos + 1) => {
                    parent = pos;
                    pos += 1;
                }
                b'&' | b'!' | b'*' => {
                    while pos < line.len() && !is_blank(line[pos]) {
                        pos += 1;
                    }
                    node_start = b != b'*';
                }
                _ => {
                    pos = self.plain(line, pos);
                    node_start = false;
                    plain_open = pos >= line.len();
                }
            }
        }
        if plain_open && self.flow == 0 {
            // A plain value after `key:` or `- ` continues on lines indented past its
            // parent; one that starts its line, on lines indented as much as it is.
            self.plain_min_indent = Some(if value_col > parent {
                parent + 1
            } else {
                parent
            });
        }
    }

    /// The end of a plain scalar starting at `pos`: before `: `, ` #` or, in flow, an
    /// indicator.
    fn plain(&self, line: &[u8], mut pos: usize) -> usize {
        while pos < line.len() {
            let b = line[pos];
            let next_separates = line.get(pos + 1).is_none_or(|&n| is_blank(n));
            match b {
                b':' if next_separates || self.flow > 0 => return pos,
                b'#' if pos > 0 && is_blank(line[pos - 1]) => return pos,
                b',' | b'[' | b']' | b'{' | b'}' if self.flow > 0 => return pos,
                _ => pos += 1,
            }
        }
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pads(text: &str) -> Vec<usize> {
        indent_quoted_continuations(text).map_or_else(Vec::new, |r| r.pads)
    }

    #[test]
    fn pads_only_underindented_continuations() {
        assert_eq!(
            pads("m:\n  a:\n    d: 'one\n    two\n  three'\n  n: x\n"),
            [0, 0, 0, 1, 3, 0]
        );
        assert_eq!(pads("- \"a\nb\"\n"), [0, 1]);
        assert_eq!(pads("k: \"a\\\"\nb\"\n"), [0, 1]);
        assert_eq!(pads("k: 'it''s\nb'\n"), [0, 1]);
    }

    #[test]
    fn quotes_that_do_not_open_scalars_are_ignored() {
        // Block scalar content, comments, plain scalars with quotes inside them.
        assert!(pads("a: |\n  'x\nb: 1\n").is_empty());
        assert!(pads("a: 1 # it's\nb: 'x'\n").is_empty());
        assert!(pads("a: don't\nb: 'x\n  y'\n").is_empty());
        assert!(pads("a: x\n  'y\nb: z\n").is_empty());
        assert!(pads("- a\n  'b\n- c\n").is_empty());
        assert!(pads("a: [x, 'y',\n'z']\n").is_empty());
    }

    #[test]
    fn an_unclosed_quote_is_located() {
        let r = indent_quoted_continuations("x: 1\na: 'open\nb: 2\n").unwrap();
        assert_eq!(r.unclosed, Some((2, 4)));
    }

    #[test]
    fn amplification_is_refused() {
        let text = format!("{}k: 'x\n{}'\n", " ".repeat(1000), "a\n".repeat(100));
        assert!(indent_quoted_continuations(&text).is_none());
    }
}
