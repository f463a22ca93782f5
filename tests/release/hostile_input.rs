//! Hostile input (docs/limits.md): special files, oversized input, pathological YAML and odd file
//! names never hang the loader, never exhaust memory, and never reach the user as parser
//! internals.

#![cfg(unix)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use cvo::release::{Limits, LoadError, LoadOptions, Release, load};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n  namespace: ns\n";

/// Loads on another thread; a hang fails the test instead of blocking the suite.
fn load_within(dir: &Path, options: LoadOptions) -> Result<Release, LoadError> {
    let (tx, rx) = mpsc::channel();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(load(&dir, &options));
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("load did not finish within 30 s")
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(status.success());
}

fn diagnostic_for<'a>(release: &'a Release, name: &str) -> &'a cvo::diagnostic::Diagnostic {
    release
        .diagnostics
        .iter()
        .find(|d| d.location.file.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("no diagnostic for {name}: {:?}", release.diagnostics))
}

#[test]
fn fifos_are_reported_not_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0000_10_a_good.yaml"), CM).unwrap();
    for name in [
        "0000_20_b_fifo.yaml",
        "release-metadata",
        "image-references",
    ] {
        mkfifo(&dir.path().join(name));
    }
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    assert_eq!(release.manifests.len(), 1, "the good file still loads");
    for name in [
        "0000_20_b_fifo.yaml",
        "release-metadata",
        "image-references",
    ] {
        let d = diagnostic_for(&release, name);
        assert!(d.message.contains("not a regular file"), "{d}");
        assert!(d.message.contains("FIFO"), "{d}");
    }
}

#[test]
fn symlinks_to_devices_are_reported_not_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0000_10_a_good.yaml"), CM).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink("/dev/urandom", dir.path().join("random.yaml")).unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    assert_eq!(release.manifests.len(), 1);
    for name in ["zero.yaml", "random.yaml"] {
        let d = diagnostic_for(&release, name);
        assert!(d.message.contains("character device"), "{d}");
    }
}

#[test]
fn a_symlink_to_a_regular_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let target = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(target.path(), CM).unwrap();
    std::os::unix::fs::symlink(target.path(), dir.path().join("linked.yaml")).unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    assert_eq!(release.manifests.len(), 1, "{:?}", release.diagnostics);
}

#[test]
fn files_over_the_per_file_cap_are_refused_with_a_plain_message() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0000_10_a_good.yaml"), CM).unwrap();
    let big = format!("{CM}data:\n  x: \"{}\"\n", "a".repeat(4096));
    std::fs::write(dir.path().join("big.yaml"), &big).unwrap();
    let options = LoadOptions {
        limits: Limits {
            max_file_bytes: 1024,
            ..Limits::default()
        },
        ..Default::default()
    };
    let release = load_within(dir.path(), options).unwrap();
    assert_eq!(release.manifests.len(), 1);
    let d = diagnostic_for(&release, "big.yaml");
    assert!(d.message.contains("larger than"), "{d}");
    assert!(
        d.help.as_deref().unwrap().contains("--max-file-bytes"),
        "{d}"
    );
}

#[test]
fn a_release_over_the_total_cap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..4 {
        std::fs::write(dir.path().join(format!("{i}.yaml")), CM.repeat(10)).unwrap();
    }
    let options = LoadOptions {
        limits: Limits {
            max_release_bytes: 3 * CM.len() as u64 * 10,
            ..Limits::default()
        },
        ..Default::default()
    };
    let err = load_within(dir.path(), options).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("--max-release-bytes"), "{text}");
    assert!(!text.contains("TooLarge"), "{text}");
}

/// Past 10,000 under-indented continuation lines the old repair gave up: a longer file was
/// refused where a shorter one passed.
#[test]
fn long_underindented_quoted_scalars_load() {
    let mut text = String::from(CM);
    text.push_str("  annotations:\n    d: 'first\n");
    for _ in 0..12_000 {
        text.push_str("  more\n");
    }
    text.push_str("  end'\n");
    let parsed_dir = tempfile::tempdir().unwrap();
    std::fs::write(parsed_dir.path().join("long.yaml"), &text).unwrap();
    let release = load_within(parsed_dir.path(), LoadOptions::default()).unwrap();
    assert!(release.diagnostics.is_empty(), "{:?}", release.diagnostics);
    let d = release.manifests[0].annotation("d").unwrap();
    assert!(d.starts_with("first more more") && d.ends_with("more end"));
}

/// Many separate under-indented scalars, each one repaired: still one pass.
#[test]
fn many_underindented_quoted_scalars_load() {
    let mut text = String::from(CM);
    text.push_str("data:\n");
    for i in 0..3_000 {
        text.push_str(&format!("  k{i}: \"a\n  b\"\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("many.yaml"), &text).unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    assert!(release.diagnostics.is_empty(), "{:?}", release.diagnostics);
    assert_eq!(release.manifests[0].object["data"]["k2999"], "a b");
}

#[test]
fn file_names_with_newlines_and_invalid_utf8_are_escaped_and_distinct() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let names: [&[u8]; 3] = [b"a\nb.yaml", b"x\xff.yaml", b"x\xfe.yaml"];
    for name in names {
        std::fs::write(
            dir.path().join(std::ffi::OsStr::from_bytes(name)),
            "kind: [\n",
        )
        .unwrap();
    }
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    let shown: std::collections::BTreeSet<String> = release
        .diagnostics
        .iter()
        .map(|d| d.location.to_string())
        .collect();
    assert_eq!(shown.len(), 3, "{shown:?}");
    for s in &shown {
        assert!(!s.contains('\n') && !s.contains('\u{fffd}'), "{s:?}");
    }
    assert!(shown.iter().any(|s| s.contains(r"a\nb.yaml")), "{shown:?}");
    assert!(shown.iter().any(|s| s.contains(r"x\xFF.yaml")), "{shown:?}");
    // JSON output can carry them too.
    for d in &release.diagnostics {
        serde_json::to_string(d).expect("a diagnostic serializes");
    }
}

#[test]
fn schema_mismatch_names_the_field_path_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_deploy.yaml"),
        "# a comment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: ns\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n        image: x\n      - name: b\n        image: quay.io/b\n        ports:\n        - containerPort: eighty\n",
    )
    .unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    let found = cvo::validate::validate(&release, None);
    let d = found
        .iter()
        .find(|d| d.rule == "schema-mismatch")
        .expect("schema-mismatch");
    assert!(
        d.message
            .starts_with("`spec.template.spec.containers[1].ports[0].containerPort`: "),
        "{d}"
    );
    assert!(d.message.contains("whole number"), "{d}");
    assert_eq!(d.location.line, Some(16), "{d}");
}

#[test]
fn parser_limits_and_odd_characters_read_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, String, &str)] = &[
        (
            "deep.yaml",
            format!("{CM}data: {}{}\n", "[".repeat(70), "]".repeat(70)),
            "nested more than 64 levels",
        ),
        (
            "aliases.yaml",
            format!("{CM}x: &a v\ny: [{}]\n", "*a,".repeat(150)),
            "alias bomb",
        ),
        (
            "vt.yaml",
            format!("{CM}x: a\u{b}b\n"),
            "U+000B (vertical tab)",
        ),
        ("binary.yaml", format!("{CM}x: !!binary /w==\n"), "YAML tag"),
        (
            "int.yaml",
            format!("{CM}x: !!int abc\n"),
            "out of range or not a number",
        ),
        (
            "uint.yaml",
            format!("{CM}x: !!int 99999999999999999999\n"),
            "out of range or not a number",
        ),
        (
            "inf.yaml",
            format!("{CM}x: [1e999999]\n"),
            "not a finite number",
        ),
    ];
    for (name, text, _) in cases {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    // Old Mac line endings: two documents, not one refused file.
    std::fs::write(
        dir.path().join("cr.yaml"),
        CM.replace('\n', "\r") + "---\r" + &CM.replace("good", "other").replace('\n', "\r"),
    )
    .unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    for (name, _, words) in cases {
        let d = diagnostic_for(&release, name);
        assert!(d.message.contains(words), "{d}");
    }
    let cr: Vec<_> = release
        .manifests
        .iter()
        .filter(|m| m.file_name() == "cr.yaml")
        .collect();
    assert_eq!(cr.len(), 2, "{:?}", release.diagnostics);
}

/// An unclosed quote early in a long document: reported where it opens, in one pass (the old
/// repair indented the rest of the document one line per re-parse first).
#[test]
fn an_unclosed_quote_is_reported_where_it_opens() {
    let mut text = format!("{CM}data:\n  a: 'never closed\n");
    for i in 0..5_000 {
        text.push_str(&format!("  k{i}: v\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("open.yaml"), &text).unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    let d = diagnostic_for(&release, "open.yaml");
    assert_eq!(d.location.line, Some(7), "{d}");
    assert!(
        d.message
            .contains("quoted string that starts here is not closed"),
        "{d}"
    );
}

/// Found by the hostile-input run: a version number past 64 bits was reported in the semver
/// crate's words ("exceeds u64::MAX").
#[test]
fn a_version_number_past_64_bits_is_too_large_in_plain_words() {
    let huge = "99999999999999999999999";
    for (version, previous, part) in [
        (format!("{huge}.0.0"), "1.0.0".to_owned(), "major"),
        (format!("1.{huge}.0"), "1.0.0".to_owned(), "minor"),
        ("2.0.0".to_owned(), format!("1.0.{huge}"), "patch"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0000_10_a_good.yaml"), CM).unwrap();
        std::fs::write(
            dir.path().join("release-metadata"),
            format!(
                r#"{{"kind":"cincinnati-metadata-v0","version":"{version}","previous":["{previous}"]}}"#
            ),
        )
        .unwrap();
        let release = load_within(dir.path(), LoadOptions::default()).unwrap();
        let d = diagnostic_for(&release, "release-metadata");
        assert!(
            d.message.contains(&format!(
                "the {part} version number is too large (at most 18446744073709551615)"
            )),
            "{d}"
        );
        assert!(!d.message.contains("u64"), "{d}");
        assert_eq!(release.manifests.len(), 1, "the manifests still load");
    }
}

/// The lines of `text` as an editor numbers them (written here apart from the loader's own
/// counter): a file with any LF ends its lines at LF (CRLF is one line end, a lone CR is
/// inside a line), a file without LF ends them at CR.
fn editor_lines(text: &str) -> Vec<&str> {
    let end = if text.contains('\n') { '\n' } else { '\r' };
    let body = text.strip_suffix(end).unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    body.split(end)
        .map(|l| {
            if end == '\n' {
                l.strip_suffix('\r').unwrap_or(l)
            } else {
                l
            }
        })
        .collect()
}

/// The editor's one-based line of byte `byte` of `text` (see [`editor_lines`]).
fn editor_line_at(text: &str, byte: usize) -> usize {
    let end = if text.contains('\n') { '\n' } else { '\r' };
    text[..byte].matches(end).count() + 1
}

/// Found by the hostile-input run: a syntax error in a file with CRLF mixed with lone CRs was
/// reported past the end of the file. The line named is the broken one, as an editor numbers it.
#[test]
fn mixed_line_ends_name_the_broken_line() {
    let good = CM.trim_end().split('\n').collect::<Vec<_>>();
    let dir = tempfile::tempdir().unwrap();
    // (file, its text, one kind of line end).
    let mut files = Vec::new();
    for (name, ends) in [
        ("crlf_cr.yaml", &["\r\n", "\r"][..]),
        ("cr_crlf_lf.yaml", &["\r", "\r\n", "\n"]),
        ("cr_crlf.yaml", &["\r\r\n"]),
        ("cr.yaml", &["\r"]),
        ("crlf.yaml", &["\r\n"]),
        ("lf.yaml", &["\n"]),
    ] {
        // Three documents; the broken line is in the third, 19 lines in.
        let mut lines: Vec<String> = Vec::new();
        for doc in 0..3 {
            if doc > 0 {
                lines.push("---".into());
            }
            lines.extend(good.iter().map(|l| l.replace("good", &format!("cm{doc}"))));
        }
        lines.push("data:".into());
        lines.push("  key: value: x".into());
        lines.push("  other: y".into());
        let text: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("{l}{}", ends[i % ends.len()]))
            .collect();
        std::fs::write(dir.path().join(name), &text).unwrap();
        files.push((name, text, ends.len() == 1));
    }
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    for (name, text, one_kind) in &files {
        let d = diagnostic_for(&release, name);
        let lines = editor_lines(text);
        let line = d.location.line.expect("a line");
        assert!(
            line <= lines.len(),
            "{name}: line {line} of {}: {d}",
            lines.len()
        );
        assert_eq!(d.location.document, Some(2), "{name}: {d}");
        assert_eq!(
            line,
            editor_line_at(text, text.find("  key: value: x").unwrap()),
            "{name}: {d}"
        );
        assert!(
            lines[line - 1].split('\r').any(|l| l == "  key: value: x"),
            "{name}: {d}"
        );
        if *one_kind {
            assert_eq!(line, 19, "{name}: {d}");
            // (`\r\r\n`: the first CR is inside the line, shown as `^M`.)
            assert_eq!(
                lines[line - 1].trim_end_matches('\r'),
                "  key: value: x",
                "{name}: {d}"
            );
        }
        let loaded = release
            .manifests
            .iter()
            .filter(|m| m.file_name() == *name)
            .map(|m| m.location.line.unwrap())
            .collect::<Vec<_>>();
        // The two good documents start on the line of their `apiVersion`.
        let starts: Vec<usize> = text
            .match_indices("apiVersion")
            .map(|(i, _)| editor_line_at(text, i))
            .take(2)
            .collect();
        assert_eq!(loaded, starts, "{name}");
    }
}

/// The file the hostile-input run reported ("line 29 beyond file end (15 lines)"): 15 lines,
/// each ending `\r\r\n`, broken on the last. Editors, `wc -l` and `grep -n` count 15 lines;
/// the error is on line 15.
#[test]
fn a_file_of_cr_crlf_lines_is_reported_on_its_own_last_line() {
    let mut text: String = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: cr-crlf",
        "  namespace: ns",
        "data:",
    ]
    .iter()
    .map(|l| format!("{l}\r\r\n"))
    .collect();
    for i in 0..8 {
        text.push_str(&format!("  k{i}: v{i}\r\r\n"));
    }
    text.push_str("  broken: [\r\r\n");
    assert_eq!(editor_lines(&text).len(), 15);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0000_10_a_cr_crlf.yaml"), &text).unwrap();
    let release = load_within(dir.path(), LoadOptions::default()).unwrap();
    let d = diagnostic_for(&release, "0000_10_a_cr_crlf.yaml");
    assert_eq!(d.rule, "parse-error", "{d}");
    assert_eq!(d.location.line, Some(15), "{d}");
}

/// `field_line` re-reads the file: it walks the document as the parser reads it and names
/// the line an editor shows.
#[test]
fn schema_mismatch_lines_are_the_editors() {
    let text = "# a comment\rapiVersion: apps/v1\r\nkind: Deployment\rmetadata:\r\n  name: d\r  namespace: ns\r\nspec:\r  template:\r\n    spec:\r      containers:\r\n      - name: a\r        image: x\r\n        ports:\r        - containerPort: eighty\r\n";
    // The same lines without any LF (a classic Mac file).
    let cr_only = text.replace("\r\n", "\r");
    for (text, line) in [(text, 7), (cr_only.as_str(), 14)] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0000_10_a_deploy.yaml"), text).unwrap();
        let release = load_within(dir.path(), LoadOptions::default()).unwrap();
        let found = cvo::validate::validate(&release, None);
        let d = found
            .iter()
            .find(|d| d.rule == "schema-mismatch")
            .expect("schema-mismatch");
        assert_eq!(d.location.line, Some(line), "{text:?}: {d}");
        assert_eq!(
            line,
            editor_line_at(text, text.find("- containerPort").unwrap())
        );
        assert!(editor_lines(text)[line - 1].ends_with("- containerPort: eighty"));
    }
}
