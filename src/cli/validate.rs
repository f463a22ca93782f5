//! `cvo validate`: CI checks over a release, optionally against the release it updates from.
//!
//! Exit codes: 0 no errors (warnings and notes allowed), 1 errors found, 2 the release or the
//! previous release cannot be read.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ReleaseArgs;
use crate::validate::{self, Format, Summary};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// The release this one updates from: enables the update checks (orphaned objects,
    /// unknown and stale delete manifests). Loaded with the same options.
    #[arg(long, value_name = "DIR")]
    pub previous: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub fn run(args: &ValidateArgs) -> ExitCode {
    let options = args.release.load_options();
    let release = match crate::release::load(&args.release.release, &options) {
        Ok(release) => release,
        Err(e) => return super::input_error(&e),
    };
    let previous = match &args.previous {
        Some(dir) => match crate::release::load(dir, &options) {
            Ok(previous) => Some(previous),
            Err(e) => return super::input_error(&format_args!("--previous: {e}")),
        },
        None => None,
    };
    let diagnostics = validate::validate(&release, previous.as_ref());
    let cwd = std::env::current_dir().ok();
    let out = validate::report::render(args.format, &diagnostics, cwd.as_deref());
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) does not change the validation result.
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    ExitCode::from(u8::from(Summary::of(&diagnostics).has_errors()))
}
