//! `cvo push --release DIR TARGET`: validate a release directory (errors refuse the push, as
//! `cvo validate` reports them), then push it as cvo's OCI artifact to
//! `oci://HOST[:PORT]/REPO:TAG` or write it into `oci-layout:PATH:TAG`. Prints
//! `REPO:TAG@sha256:…` (`-o json`: `{"repository","tag","digest"}`). With `--sign-key KEY.pem`
//! it then signs that digest in cosign's format (the tag `sha256-HEX.sig` beside it) and prints
//! the signature as a second line `REPO:sha256-HEX.sig@sha256:…` (`-o json`: `"signature"`).
//!
//! Exit codes: 0 pushed, 1 the release has errors or the push failed, 2 a wrong command line
//! (a target that is not an OCI reference, a release that is not a directory, a signing key
//! that cannot be read or is not a PKCS#8 P-256 key).

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
    /// Sign the pushed release with this private key (PKCS#8 PEM, ECDSA P-256: openssl
    /// ecparam -name prime256v1 -genkey | openssl pkcs8 -topk8 -nocrypt), in cosign's format:
    /// the tag sha256-HEX.sig beside it, which `cosign verify --key` and skopeo read.
    #[arg(long, value_name = "KEY.pem")]
    pub sign_key: Option<std::path::PathBuf>,
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
    let key = args
        .sign_key
        .as_deref()
        .map(crate::oci::SigningKey::load)
        .transpose()
        .map_err(CliError::Usage)?;
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
    let access = args.release.oci.access();
    let mut pushed = block_on(crate::oci::push_release(
        dir,
        &target,
        &access,
        args.release.caps(),
    ))?
    .map_err(oci_error)?;
    if let Some(key) = &key {
        block_on(crate::oci::sign_pushed(&target, &mut pushed, key, &access))?.map_err(|e| {
            oci_error(e.context(format_args!(
                "pushed {}:{}@{} but could not sign it",
                pushed.repository, pushed.tag, pushed.digest
            )))
        })?;
    }
    let out = match args.output {
        OutputFormat::Text => {
            let mut text = format!("{}:{}@{}\n", pushed.repository, pushed.tag, pushed.digest);
            if let Some(signature) = &pushed.signature {
                text.push_str(signature);
                text.push('\n');
            }
            text
        }
        OutputFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&pushed).unwrap_or_default()
        ),
    };
    super::print_stdout(&out)?;
    Ok(Exit::Success)
}
