//! `cvo completion SHELL` and `cvo man [COMMAND]`: generated from the one clap definition;
//! the bash script completes in a real bash.

use std::process::Command as Process;

use crate::common;

/// Completes `words` (the last one being completed) in a real bash with `cvo completion bash`
/// loaded; the candidates, one per line.
fn complete(words: &[&str]) -> Vec<String> {
    let script = common::cli::stdout(common::cli::cvo().args(["completion", "bash"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cvo.bash");
    std::fs::write(&file, script).unwrap();
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        r#"source '{}'
spec=$(complete -p cvo) || exit 3
fn=$(printf '%s' "$spec" | sed -E 's/.*-F ([^ ]+).*/\1/')
COMP_WORDS=({})
COMP_CWORD={}
COMP_LINE='{line}'
COMP_POINT=${{#COMP_LINE}}
"$fn" cvo "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        file.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let out = Process::new("bash")
        .args(["--norc", "--noprofile", "-c", &driver])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_a_subcommand_and_a_flag_value() {
    // `validate` and `validate-files`: bash inserts their common prefix, `validate`.
    let mut candidates = complete(&["cvo", "val"]);
    candidates.sort();
    assert_eq!(candidates, ["validate", "validate-files"]);
    assert_eq!(complete(&["cvo", "capa"]), ["capabilities"]);
    let formats = complete(&["cvo", "validate", "--format", ""]);
    for f in ["text", "json", "sarif", "junit", "github", "gitlab"] {
        assert!(formats.iter().any(|c| c == f), "{f} not in {formats:?}");
    }
    assert_eq!(
        complete(&["cvo", "validate", "--format", "gi"]),
        ["github", "gitlab"]
    );
    assert!(complete(&["cvo", "validate", "--print-c"]).contains(&"--print-config".to_owned()));
}

#[test]
fn every_shell_gets_a_script_and_unknown_shells_are_refused() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let script = common::cli::stdout(common::cli::cvo().args(["completion", shell]));
        assert!(script.contains("validate"), "{shell}");
    }
    common::cli::cvo()
        .args(["completion", "tcsh"])
        .assert()
        .code(2);
}

#[test]
fn man_pages_for_cvo_and_a_command() {
    let page = common::cli::stdout(common::cli::cvo().arg("man"));
    assert!(page.contains(".TH cvo 1"), "{page}");
    assert!(page.contains("validate"));
    let page = common::cli::stdout(common::cli::cvo().args(["man", "validate"]));
    assert!(page.contains(".TH cvo-validate 1"), "{page}");
    assert!(page.contains("print\\-config"), "{page}");
    let out = common::cli::cvo()
        .args(["man", "valdate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cvo man valdate: no such command"));
}
