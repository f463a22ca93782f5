//! `cvo validate`: CI checks over a release (placeholder until the validate module lands).

use std::process::ExitCode;

use clap::Args;

use super::ReleaseArgs;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
}

pub fn run(args: &ValidateArgs) -> ExitCode {
    match crate::release::load(&args.release.release, &args.release.load_options()) {
        Ok(release) => {
            for d in &release.diagnostics {
                println!("{d}");
            }
            ExitCode::from(u8::from(release.has_errors()))
        }
        Err(e) => super::input_error(&e),
    }
}
