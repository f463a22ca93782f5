//! `cvo github-action`: what the GitHub Action (`action.yml`, a composite action that builds
//! cvo and runs this as the runner's user) runs; it reads the action's inputs from the
//! `INPUT_*` environment variables the action's step sets, as a Docker action's would be: `INPUT_RELEASE` (required),
//! `INPUT_PREVIOUS`, `INPUT_FORMAT` (default `github`) and `INPUT_ARGS` (more `cvo validate`
//! flags, split on white space).
//!
//! It always prints the findings as workflow commands, which the runner turns into
//! annotations. With `format: sarif` it also writes them as SARIF to
//! `$GITHUB_WORKSPACE/cvo-results.sarif` and sets the step output `sarif-file` (in
//! `$GITHUB_OUTPUT`) for `github/codeql-action/upload-sarif`; with another format it also
//! prints the report in that format. The release is validated once and rendered in each
//! format. The exit code is `cvo validate`'s.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Parser as _};

use super::validate::Validated;
use super::{Cli, CliError, Command, GlobalArgs};
use crate::exit::Exit;
use crate::validate::Format;

/// The SARIF file written with `format: sarif`, in the workspace.
pub const SARIF_FILE: &str = "cvo-results.sarif";

#[derive(Debug, Args)]
pub struct ActionArgs {}

fn input(name: &str) -> Option<String> {
    std::env::var(format!("INPUT_{name}"))
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// `cvo validate` with `args`, validated once whatever the formats it is rendered in.
fn validate(global: &GlobalArgs, args: &[String]) -> Result<Validated, CliError> {
    let mut argv = vec!["cvo".to_owned(), "validate".to_owned()];
    argv.extend(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        CliError::usage(format_args!(
            "the action's inputs: {}",
            e.to_string().lines().next().unwrap_or_default()
        ))
    })?;
    let Command::Validate(args) = cli.command else {
        unreachable!("parsed as validate")
    };
    super::validate::validated(global, args)
}

pub fn run(global: &GlobalArgs, _: &ActionArgs) -> Result<Exit, CliError> {
    let release = input("RELEASE").ok_or_else(|| {
        CliError::usage("the action's input `release` is empty: set it to the release directory")
    })?;
    let mut args = vec!["--release".to_owned(), release];
    if let Some(previous) = input("PREVIOUS") {
        args.extend(["--previous".to_owned(), previous]);
    }
    if let Some(more) = input("ARGS") {
        args.extend(more.split_whitespace().map(str::to_owned));
    }
    let format = input("FORMAT").unwrap_or_else(|| "github".to_owned());
    let format = <Format as clap::ValueEnum>::from_str(&format, false).map_err(|_| {
        CliError::usage(format_args!(
            "the action's input `format` is {format:?}: use github, sarif, text, json, junit or gitlab"
        ))
    })?;
    let findings = match validate(global, &args)? {
        Validated::Config(settings) => {
            super::print_stdout(&settings)?;
            return Ok(Exit::Success);
        }
        Validated::Findings(findings) => findings,
    };
    super::print_stdout(&findings.render(Format::Github))?;
    match format {
        Format::Github => {}
        Format::Sarif => {
            let sarif = findings.render(Format::Sarif);
            let workspace = std::env::var_os("GITHUB_WORKSPACE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            let file = workspace.join(SARIF_FILE);
            std::fs::write(&file, sarif).map_err(|e| {
                CliError::failed(format_args!(
                    "cannot write the SARIF file {}: {e}",
                    file.display()
                ))
            })?;
            let path = file.display();
            say!(global.console, note { sarif = %path }, "SARIF written to {path}");
            if let Some(output) = std::env::var_os("GITHUB_OUTPUT") {
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&output)
                    .and_then(|mut f| writeln!(f, "sarif-file={}", file.display()))
                    .map_err(|e| {
                        CliError::failed(format_args!(
                            "cannot write the step output to {}: {e}",
                            PathBuf::from(&output).display()
                        ))
                    })?;
            }
        }
        other => super::print_stdout(&findings.render(other))?,
    }
    Ok(findings.exit())
}
