//! `cvo push --release DIR TARGET`: validate a release directory (errors refuse the push, as
//! `cvo validate` reports them, with the rule levels of the same `.cvo.yaml` or `--config`
//! and the release's suppressions), then push it as cvo's OCI artifact to
//! `oci://HOST[:PORT]/REPO:TAG` or write it into `oci-layout:PATH:TAG`. Prints
//! `REPO:TAG@sha256:…` (`-o json`: `{"repository","tag","digest"}`). With `--sign-key KEY.pem`
//! it then signs that digest in cosign's format (the tag `sha256-HEX.sig` beside it) and prints
//! the signature as a second line `REPO:sha256-HEX.sig@sha256:…` (`-o json`: `"signature"`).
//!
//! `cvo push --release oci://…|oci-layout:… TARGET` mirrors a release artifact instead: the
//! same manifest bytes (so the same digest) and its signature tag, copied unchanged (e.g. into
//! an OCI layout for an air-gapped cluster); `--verify-key` checks the signature first.
//!
//! Exit codes: 0 pushed, 1 the release has errors or the push failed, 2 a wrong command line
//! (a target that is not an OCI reference, a signing key that cannot be read or is not a
//! PKCS#8 P-256 key), 4 a mirrored release whose signature does not verify with --verify-key.

use clap::Args;

use super::{CliError, Console, OutputFormat, ReleaseArgs, block_on, oci_error};
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
    /// Take the rule levels of the validation from this file instead of the first .cvo.yaml
    /// found from the release directory upwards to the repository root (as `cvo validate`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
}

pub fn run(args: &PushArgs, console: Console) -> Result<Exit, CliError> {
    let target = Source::parse(&args.target)
        .map_err(CliError::Usage)?
        .ok_or_else(|| {
            CliError::usage(format_args!(
                "{:?} is not an OCI target: write oci://HOST[:PORT]/REPO:TAG or oci-layout:PATH:TAG",
                args.target
            ))
        })?;
    let key = args
        .sign_key
        .as_deref()
        .map(crate::oci::SigningKey::load)
        .transpose()
        .map_err(CliError::Usage)?;
    if let Some(source) = Source::parse(&args.release.release).map_err(CliError::Usage)? {
        let access = args.release.oci.access();
        let verify = args.release.oci.verify()?;
        let mut pushed = block_on(crate::oci::mirror(
            &source,
            &target,
            &access,
            args.release.caps(),
            verify.as_ref(),
        ))?
        .map_err(oci_error)?;
        if let Some(key) = &key {
            sign(&target, &mut pushed, key, &access)?;
        }
        return print(&pushed, args.output);
    }
    // The rule levels of the release's config file, as `cvo validate` reads them.
    let config = super::validate::config_for(&args.release.release, args.config.as_deref())?;
    let (levels, _) = config.levels(&[]);
    let diagnostics = super::validate::findings(&args.release, &levels, console)?;
    let summary = Summary::of(&diagnostics);
    if summary.has_errors() {
        let cwd = std::env::current_dir().ok();
        let errors: Vec<_> = diagnostics
            .into_iter()
            .filter(|d| d.severity == crate::diagnostic::Severity::Error)
            .collect();
        if console.is_json() {
            console.diagnostics(&errors);
        } else {
            let text = crate::validate::report::render(Format::Text, &errors, cwd.as_deref());
            stderr_line!("{}", text.trim_end());
        }
        return Err(CliError::failed(format_args!(
            "the release {} has {} error{} (above, as `cvo validate` reports them): not pushed",
            args.release.release,
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        )));
    }
    let dir = std::path::Path::new(&args.release.release);
    let access = args.release.oci.access();
    // cvo's own config file, checked in beside the manifests, is no part of the release.
    let mut pushed = block_on(crate::oci::push_release(
        dir,
        &target,
        &access,
        args.release.caps(),
        &crate::release::is_config_file,
    ))?
    .map_err(oci_error)?;
    if let Some(key) = &key {
        sign(&target, &mut pushed, key, &access)?;
    }
    print(&pushed, args.output)
}

/// Signs what was pushed to `target` with `key`.
fn sign(
    target: &Source,
    pushed: &mut crate::oci::Pushed,
    key: &crate::oci::SigningKey,
    access: &crate::oci::Access,
) -> Result<(), CliError> {
    block_on(crate::oci::sign_pushed(target, pushed, key, access))?.map_err(|e| {
        oci_error(e.context(format_args!(
            "pushed {}:{}@{} but could not sign it",
            pushed.repository, pushed.tag, pushed.digest
        )))
    })
}

/// Prints `REPO:TAG@sha256:…` (and the signature's line), or the JSON object.
fn print(pushed: &crate::oci::Pushed, output: OutputFormat) -> Result<Exit, CliError> {
    let out = match output {
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
            serde_json::to_string_pretty(pushed).unwrap_or_default()
        ),
    };
    super::print_stdout(&out)?;
    Ok(Exit::Success)
}
