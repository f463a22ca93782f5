//! `cvo plan`: what `cvo apply` would do, computed with server-side dry-run (`dryRun=All`),
//! with a field-level diff for updates. Writes nothing.

use clap::Args;

use super::apply::{Report, TargetArgs, TimingsArgs, execute};
use super::{CliError, GlobalArgs, OutputFormat, ReleaseArgs};
use crate::apply::Options;
use crate::exit::Exit;
use crate::sync::SyncOptions;

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Nodes of the task graph planned at once (1 to 256).
    #[arg(long, default_value_t = crate::graph::DEFAULT_PARALLELISM, value_parser = super::values::parse_parallelism, allow_hyphen_values = true)]
    pub parallelism: usize,
    /// Plan even when a precondition would refuse the update.
    #[arg(long)]
    pub force: bool,
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub timings: TimingsArgs,
}

pub fn run(global: &GlobalArgs, args: &PlanArgs) -> Result<Exit, CliError> {
    let options = SyncOptions {
        apply: Options {
            dry_run: true,
            ..Options::default()
        },
        parallelism: args.parallelism,
        force: args.force,
        ..SyncOptions::default()
    };
    let report = Report {
        output: args.output,
        timings: args.timings.timings.as_deref(),
    };
    execute(global, &args.release, &args.target, options, report)
}
