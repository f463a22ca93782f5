//! `cvo validate-files [VALIDATE FLAGS] FILE...`: `cvo validate` on each release directory
//! that holds one of FILE — the entry of the pre-commit hooks (`.pre-commit-hooks.yaml`), which
//! pass the changed files.
//!
//! A file's release directory is the nearest directory, from its own upwards to the
//! repository root, that holds a release (a `0000_*` manifest, `release-metadata`, or a
//! payload's `manifests/` or `release-manifests/`) — the payload root for a file in those —
//! else its own directory: a changed file in a sub-directory the release ignores
//! (`subdirectory-ignored`) validates the release. Files whose name starts with a dot
//! (`.cvo.yaml`, `.pre-commit-config.yaml`) and files that are not YAML or JSON select nothing.
//! Each directory is validated once, in the order first named, with the flags given (which
//! may not include `--release`); the exit code is the worst of them.

use std::path::{Path, PathBuf};

use clap::{Args, Parser as _};

use super::{Cli, CliError, Command};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct ValidateFilesArgs {
    /// `cvo validate` flags (as `--format github`, `--rule ID=LEVEL`), then the files.
    #[arg(
        value_name = "[VALIDATE FLAGS] FILE",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

/// The release directory of `file`, or `None` for a file that selects none: the nearest
/// directory, from the file's own upwards to the repository root (the directory holding
/// `.git`), that is a payload's `manifests/` or `release-manifests/` (then the payload root),
/// or holds a release ([`holds_release`]); the file's own directory when none is.
fn release_dir(file: &Path) -> Option<PathBuf> {
    let name = file.file_name()?.to_str()?;
    let ext = Path::new(name).extension().and_then(|e| e.to_str());
    if name.starts_with('.') || !matches!(ext, Some("yaml" | "yml" | "json")) {
        return None;
    }
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let shown = |d: &Path| {
        if d.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            d.to_path_buf()
        }
    };
    for dir in parent.ancestors() {
        let payload = matches!(
            dir.file_name().and_then(|n| n.to_str()),
            Some("manifests" | "release-manifests")
        );
        if payload {
            return Some(shown(dir.parent().unwrap_or(Path::new(""))));
        }
        let dir = shown(dir);
        if holds_release(&dir) {
            return Some(dir);
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    Some(parent.to_path_buf())
}

/// Whether `dir` is a release: it holds a `0000_*` manifest, a `release-metadata` file, or a
/// payload's `manifests/` or `release-manifests/`.
fn holds_release(dir: &Path) -> bool {
    if dir.join("manifests").is_dir()
        || dir.join("release-manifests").is_dir()
        || dir.join("release-metadata").is_file()
    {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.starts_with("0000_")
            && [".yaml", ".yml", ".json"].iter().any(|x| name.ends_with(x))
            && e.file_type().is_ok_and(|t| t.is_file())
    })
}

pub fn run(global: &super::GlobalArgs, args: ValidateFilesArgs) -> Result<Exit, CliError> {
    // Flags (with the value of those that take one), then the files.
    let mut cvo = <Cli as clap::CommandFactory>::command();
    cvo.build();
    let validate = cvo
        .find_subcommand("validate")
        .expect("validate is a subcommand");
    let takes_value = |flag: &str| {
        validate.get_arguments().any(|a| {
            let long = a.get_long().is_some_and(|l| flag == format!("--{l}"));
            let short = a.get_short().is_some_and(|s| flag == format!("-{s}"));
            (long || short) && a.get_action().takes_values()
        })
    };
    let mut flags: Vec<&String> = Vec::new();
    let mut files: Vec<&String> = Vec::new();
    let mut value_next = false;
    for a in &args.args {
        if value_next {
            flags.push(a);
            value_next = false;
        } else if a.starts_with('-') {
            flags.push(a);
            value_next = !a.contains('=') && takes_value(a);
        } else {
            files.push(a);
        }
    }
    if flags
        .iter()
        .any(|f| *f == "--release" || f.starts_with("--release="))
    {
        return Err(CliError::usage(
            "cvo validate-files: --release is taken from the files' directories; give the files instead",
        ));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for file in files {
        if let Some(dir) = release_dir(Path::new(file))
            && !dirs.contains(&dir)
        {
            dirs.push(dir);
        }
    }
    let mut worst = Exit::Success;
    for dir in dirs {
        let mut argv: Vec<std::ffi::OsString> = vec!["cvo".into(), "validate".into()];
        argv.extend(flags.iter().map(|f| f.into()));
        argv.push("--release".into());
        argv.push(dir.clone().into_os_string());
        let cli = Cli::try_parse_from(argv).map_err(|e| {
            CliError::usage(format_args!(
                "cvo validate-files: {}",
                e.to_string().lines().next().unwrap_or_default()
            ))
        })?;
        let Command::Validate(validate_args) = cli.command else {
            unreachable!("parsed as validate")
        };
        let release = dir.display();
        say!(global.console, line { %release }, "cvo validate --release {release}");
        let exit = match super::validate::run(global, validate_args) {
            Ok(exit) => exit,
            Err(e) => {
                let exit_code = e.exit() as u8;
                say!(global.console, error { exit_code }, "{e}");
                e.exit()
            }
        };
        if exit_rank(exit) > exit_rank(worst) {
            worst = exit;
        }
    }
    Ok(worst)
}

/// Which exit wins when several releases are validated: usage (unreadable) over failed over
/// success.
fn exit_rank(exit: Exit) -> u8 {
    match exit {
        Exit::Success => 0,
        Exit::Failed => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_directories_of_files() {
        let repo = tempfile::tempdir().unwrap();
        let at = |p: &str| repo.path().join(p);
        for d in [
            ".git",
            "rel/sub/deeper",
            "p/manifests/sub",
            "p/release-manifests",
            "plain",
        ] {
            std::fs::create_dir_all(at(d)).unwrap();
        }
        for f in [
            "rel/0000_50_a.yaml",
            "p/manifests/0000_50_a.yaml",
            "plain/x.yaml",
        ] {
            std::fs::write(at(f), "").unwrap();
        }
        let dir = |f: &str| release_dir(&at(f));
        assert_eq!(dir("rel/0000_50_a.yaml"), Some(at("rel")));
        // A file in a sub-directory (which the release ignores) belongs to the release.
        assert_eq!(dir("rel/sub/x.yaml"), Some(at("rel")));
        assert_eq!(dir("rel/sub/deeper/x.yaml"), Some(at("rel")));
        assert_eq!(dir("p/manifests/0000_50_a.yaml"), Some(at("p")));
        assert_eq!(dir("p/manifests/sub/x.yaml"), Some(at("p")));
        assert_eq!(dir("p/release-manifests/image-references"), None);
        // A directory with no release up to the repository root: its own.
        assert_eq!(dir("plain/x.yaml"), Some(at("plain")));
        assert_eq!(dir("rel/.cvo.yaml"), None);
        assert_eq!(dir("rel/README.md"), None);
        // Relative paths stay relative; "." is the current directory.
        assert_eq!(release_dir(Path::new("manifests/a.json")), Some(".".into()));
    }
}
