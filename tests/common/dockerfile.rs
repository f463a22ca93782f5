//! The repository's `Dockerfile`, read without a container engine (none runs where this
//! repository is tested): its instructions per stage, and its final stage as the arguments of
//! `../shared/realk8s/image.py`, which builds that stage's image from local files. The
//! Dockerfile stays the one description of the image: `tests/cli/dockerfile.rs` checks it, and
//! the node tier (`tests/node`) runs the image it describes.

use std::path::{Path, PathBuf};

/// The repository root.
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One instruction: its keyword (upper case) and its arguments, continuation lines joined.
pub type Instruction = (String, String);

/// The instructions of `text`, comments and blank lines left out.
pub fn instructions(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (keyword, args) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((keyword.to_uppercase(), args.trim().to_owned()));
                current.clear();
            }
        }
    }
    out
}

/// The instructions of each stage of the repository's Dockerfile (`FROM` to `FROM`), in
/// order.
pub fn stages() -> Vec<Vec<Instruction>> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile"))
        .unwrap_or_else(|e| panic!("Dockerfile: {e}"));
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for (keyword, args) in instructions(&text) {
        if keyword == "FROM" {
            stages.push(Vec::new());
        }
        if let Some(stage) = stages.last_mut() {
            stage.push((keyword, args));
        }
    }
    assert!(stages.len() >= 2, "a build stage and a runtime stage");
    stages
}

/// The final (runtime) stage.
pub fn runtime_stage() -> Vec<Instruction> {
    stages().pop().expect("runtime stage")
}

/// A stage's `COPY` instructions that take from the build context (not `--from=` a stage):
/// sources and destination.
pub fn context_copies(stage: &[Instruction]) -> Vec<(Vec<String>, String)> {
    stage
        .iter()
        .filter(|(k, args)| k == "COPY" && !args.starts_with("--from"))
        .map(|(_, args)| {
            let mut words: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
            let dest = words.pop().expect("COPY destination");
            (words, dest)
        })
        .collect()
}

/// The words of the runtime stage's last `keyword` instruction in JSON-array (exec) form.
pub fn exec_form(keyword: &str) -> Vec<String> {
    let (_, args) = runtime_stage()
        .into_iter()
        .rfind(|(k, _)| k == keyword)
        .unwrap_or_else(|| panic!("no {keyword} in the Dockerfile"));
    serde_json::from_str(&args)
        .unwrap_or_else(|e| panic!("{keyword} is not in exec form ({e}): {args}"))
}

/// Base images whose content `image.py` provides: a distroless glibc base (`cc`) has only
/// the C runtime, which `image.py --binary` copies from this machine (the libraries `ldd`
/// names), and a passwd entry for the numeric user.
/// The CA bundle of Debian 12 (package ca-certificates), as distroless's Debian 12 bases ship it.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

const EMULATED_BASES: &[&str] = &[
    "gcr.io/distroless/cc-debian12:nonroot",
    "gcr.io/distroless/cc-debian12",
];

/// The `image.py` arguments (after `--name`) that build the Dockerfile's final stage, with
/// `binary` as what the build stage produces (`target/release/cvo`) and `release` as the
/// source of the `COPY` to `/release` (another release than the repository's own, for an
/// image of another version). An instruction the emulation cannot honour is an error naming
/// it, so that the Dockerfile and the image the tests run cannot drift apart.
pub fn final_stage_args(binary: &Path, release: &Path) -> Result<Vec<String>, String> {
    let stages = stages();
    let build = stages[..stages.len() - 1].concat();
    let mut args = Vec::new();
    for (keyword, rest) in runtime_stage() {
        match keyword.as_str() {
            // What of the base the binary needs beside glibc (which image.py copies by
            // ldd): distroless ships Debian's CA bundle, which rustls reads.
            "FROM" if EMULATED_BASES.contains(&rest.as_str()) => {
                args.push(format!("--add={CA_BUNDLE}:{CA_BUNDLE}"));
            }
            "FROM" => return Err(format!("FROM {rest}: not a base image.py can emulate")),
            "COPY" if rest.starts_with("--from=") => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [from, source, dest] = words[..] else {
                    return Err(format!("COPY {rest}: expected --from=STAGE SOURCE DEST"));
                };
                // The build stage installs cargo's release binary at SOURCE.
                let built = build.iter().any(|(k, a)| {
                    k == "RUN" && a.contains(&format!("target/release/cvo {source}"))
                });
                if from != "--from=build" || !built {
                    return Err(format!(
                        "COPY {rest}: not the build stage's target/release/cvo"
                    ));
                }
                args.push(format!("--binary={}:{dest}", binary.display()));
            }
            "COPY" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [source, dest] = words[..] else {
                    return Err(format!("COPY {rest}: expected SOURCE DEST"));
                };
                let from: PathBuf = if dest == "/release" {
                    release.to_owned()
                } else {
                    Path::new(ROOT).join(source)
                };
                args.push(format!("--add={}:{dest}", from.display()));
            }
            "USER" => args.push(format!("--user={rest}")),
            "WORKDIR" => args.push(format!("--workdir={rest}")),
            "ENV" if rest.contains('=') && !rest.contains(' ') => {
                args.push(format!("--env={rest}"));
            }
            "ENTRYPOINT" | "CMD" => {
                let words: Vec<String> = serde_json::from_str(&rest)
                    .map_err(|e| format!("{keyword} {rest}: not in exec form ({e})"))?;
                let flag = if keyword == "CMD" {
                    "--cmd"
                } else {
                    "--entrypoint"
                };
                args.extend(words.iter().map(|w| format!("{flag}={w}")));
            }
            other => return Err(format!("{other} {rest}: image.py cannot emulate it")),
        }
    }
    Ok(args)
}
