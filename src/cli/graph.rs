//! `cvo graph`: the run-level task graph of a release (placeholder until graph lands).

use std::process::ExitCode;

use clap::Args;

use super::ReleaseArgs;

#[derive(Debug, Args)]
pub struct GraphArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
}

pub fn run(args: &GraphArgs) -> ExitCode {
    match crate::release::load(&args.release.release, &args.release.load_options()) {
        Ok(release) => {
            println!("{} manifests", release.manifests.len());
            ExitCode::SUCCESS
        }
        Err(e) => super::input_error(&e),
    }
}
