//! `cvo graph`: draw the run-level task graph of a release.

use clap::Args;

use super::{CliError, Console, ReleaseArgs};
use crate::exit::Exit;
use crate::graph::{Format, render};

#[derive(Debug, Args)]
pub struct GraphArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// Output format: text (for people), dot (Graphviz), mermaid, json.
    #[arg(long, default_value = "text", value_parser = parse_format)]
    pub format: Format,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
        .map_err(|e: crate::graph::UnknownFormat| e.to_string())
}

/// Exit codes: 0 the graph of the whole release, 1 drawn without what failed to load (its
/// errors on `console`, as `validate` reports them), 2 the release cannot be read.
pub fn run(args: &GraphArgs, console: Console) -> Result<Exit, CliError> {
    let release = args.release.load(console)?;
    for d in &release.diagnostics {
        console.diagnostic(d);
    }
    let graph = render(&crate::apply::run_level_graph(&release), args.format);
    super::print_stdout(&graph)?;
    Ok(if release.has_errors() {
        Exit::Failed
    } else {
        Exit::Success
    })
}
