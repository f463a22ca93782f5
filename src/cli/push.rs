//! `cvo push --release DIR TARGET`: validate a release directory (errors refuse the push, as
//! `cvo validate` reports them), then push it as cvo's OCI artifact to
//! `oci://HOST[:PORT]/REPO:TAG` or write it into `oci-layout:PATH:TAG`. Prints
//! `REPO:TAG@sha256:…` (`-o json`: `{"repository","tag","digest"}`).
//!
//! Exit codes: 0 pushed, 1 the release has errors or the push failed, 2 a wrong command line
//! (a target that is not an OCI reference, a release that is not a directory).

use clap::Args;

use super::{CliError, OutputFormat, ReleaseArgs, block_on, oci_error};
use crate::exit::Exit;
use crate::oci::Source;
use crate::validate::{Format, Summary};

#[derive(Debug, Args)]
pub struct PushArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// Where to push: oci://HOST[:PORT]/REPO:TAG, or oci-layout:PATH:TAG (an OCI image layout
    /// directory, created when missing).
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

pub fn run(args: &PushArgs) -> Result<Exit, CliError> {
    let target = Source::parse(&args.target)
        .map_err(CliError::Usage)?
        .ok_or_else(|| {
            CliError::usage(format_args!(
                "{:?} is not an OCI target: write oci://HOST[:PORT]/REPO:TAG or oci-layout:PATH:TAG",
                args.target
            ))
        })?;
    if Source::parse(&args.release.release)
        .map_err(CliError::Usage)?
        .is_some()
    {
        return Err(CliError::usage(format_args!(
            "--release {}: cvo push reads a release directory (to copy an artifact, pull it with --release and push its directory)",
            args.release.release
        )));
    }
    let diagnostics = super::validate::findings(&args.release, None)?;
    let summary = Summary::of(&diagnostics);
    if summary.has_errors() {
        let cwd = std::env::current_dir().ok();
        let errors: Vec<_> = diagnostics
            .into_iter()
            .filter(|d| d.severity == crate::diagnostic::Severity::Error)
            .collect();
        let text = crate::validate::report::render(Format::Text, &errors, cwd.as_deref());
        stderr_line!("{}", text.trim_end());
        return Err(CliError::failed(format_args!(
            "the release {} has {} error{} (above, as `cvo validate` reports them): not pushed",
            args.release.release,
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        )));
    }
    let dir = std::path::Path::new(&args.release.release);
    let pushed = block_on(crate::oci::push_release(
        dir,
        &target,
        &args.release.oci.access(),
        args.release.caps(),
    ))?
    .map_err(oci_error)?;
    let out = match args.output {
        OutputFormat::Text => format!("{}:{}@{}\n", pushed.repository, pushed.tag, pushed.digest),
        OutputFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&pushed).unwrap_or_default()
        ),
    };
    super::print_stdout(&out)?;
    Ok(Exit::Success)
}
