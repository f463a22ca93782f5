//! `cvo man [COMMAND]`: the man page (roff) of `cvo` or of one subcommand (`cvo-validate(1)`),
//! generated from the one clap definition. View it with `cvo man validate | man -l -`.

use clap::{Args, CommandFactory as _};

use super::{Cli, CliError};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (e.g. validate); without it, the page of `cvo`.
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

pub fn run(args: &ManArgs) -> Result<Exit, CliError> {
    let cvo = Cli::command();
    let (page, title) = match &args.command {
        None => (cvo, "cvo".to_owned()),
        Some(name) => {
            let Some(sub) = cvo.find_subcommand(name) else {
                let names: Vec<String> = cvo
                    .get_subcommands()
                    .map(|c| c.get_name().to_owned())
                    .collect();
                return Err(CliError::usage(format_args!(
                    "cvo man {name}: no such command; the commands are {}",
                    names.join(", ")
                )));
            };
            let full = format!("cvo-{}", sub.get_name());
            (
                sub.clone()
                    .bin_name(format!("cvo {}", sub.get_name()))
                    .display_name(full.clone())
                    .version(env!("CARGO_PKG_VERSION")),
                full,
            )
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .title(title)
        .render(&mut out)
        .map_err(|e| CliError::failed(format_args!("cannot render the man page: {e}")))?;
    super::print_stdout(&String::from_utf8_lossy(&out))?;
    Ok(Exit::Success)
}
