//! `cvo completion SHELL`: the shell completion script of the command line, generated from the
//! one clap definition (subcommands, flags, and the values of flags that take a fixed set).
//!
//! Load it with, for bash, `source <(cvo completion bash)` (or save it in
//! `/etc/bash_completion.d/cvo`); zsh, fish, PowerShell and elvish likewise.

use clap::{Args, CommandFactory as _};

use super::{Cli, CliError};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

pub fn run(args: &CompletionArgs) -> Result<Exit, CliError> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "cvo", &mut out);
    super::print_stdout(&String::from_utf8_lossy(&out))?;
    Ok(Exit::Success)
}
