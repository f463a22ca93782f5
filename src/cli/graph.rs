//! `cvo graph`: draw the run-level task graph of a release.

use std::process::ExitCode;

use clap::Args;

use super::ReleaseArgs;
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

pub fn run(args: &GraphArgs) -> ExitCode {
    let release = match crate::release::load(&args.release.release, &args.release.load_options()) {
        Ok(release) => release,
        Err(e) => return super::input_error(&e),
    };
    for d in &release.diagnostics {
        eprintln!("{d}");
    }
    print!(
        "{}",
        render(&crate::apply::run_level_graph(&release), args.format)
    );
    ExitCode::SUCCESS
}
