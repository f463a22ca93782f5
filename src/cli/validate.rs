//! `cvo validate`: CI checks over a release, optionally against the release it updates from.
//!
//! Exit codes: 0 no errors (warnings and notes allowed), 1 errors found, 2 the release or the
//! previous release cannot be read, or `--profile`/`--feature-set` select nothing.
//!
//! Without `--profile`, a release that uses cluster profiles is validated in each of them on
//! its own (a release holds per-profile twins of one object, which only clash when profiles
//! are mixed); a finding made in only some profiles names them.
//!
//! With `--live`, the `status.storedVersions` of every CRD is read from the cluster
//! (`--kubeconfig`, `--context`) and the CRD rules check the release against them, with or
//! without `--previous`; a cluster that cannot be read is exit code 2 (nothing is assumed).
//!
//! The report also says what the release leaves out in each profile it was read in, by
//! reason (profile, feature set, capability with the release's default capabilities,
//! `--exclude`): a line per profile before the text summary, `summary.excluded` in JSON.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args;

use super::{CliError, GlobalArgs, ReleaseArgs};
use crate::diagnostic::Diagnostic;
use crate::exit::Exit;
use crate::validate::{self, Format, LeftOut, StoredVersions, Summary};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// The release this one updates from: enables the update checks (orphaned objects,
    /// unknown and stale delete manifests). Loaded with the same options.
    #[arg(long, value_name = "DIR")]
    pub previous: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Read status.storedVersions of every CRD from the cluster (--kubeconfig, --context)
    /// and check the release's CRDs against them (no --previous needed). A cluster that
    /// cannot be read ends the command with exit code 2.
    #[arg(long)]
    pub live: bool,
}

pub fn run(global: &GlobalArgs, args: &ValidateArgs) -> Result<Exit, CliError> {
    let stored = if args.live {
        Some(read_stored_versions(global)?)
    } else {
        None
    };
    let (mut diagnostics, left_out) =
        check(&args.release, args.previous.as_deref(), stored.as_ref())?;
    // Every format names the files of an OCI release inside the artifact, not in its
    // temporary directory.
    let base = match args.release.origin() {
        Some(opened) => {
            let root = opened.dir();
            for d in &mut diagnostics {
                if let Ok(rel) = d.location.file.strip_prefix(&root) {
                    d.location.file = rel.to_path_buf();
                }
            }
            None
        }
        None => std::env::current_dir().ok(),
    };
    let out =
        validate::report::render_report(args.format, &diagnostics, &left_out, base.as_deref());
    super::print_stdout(&out)?;
    Ok(if Summary::of(&diagnostics).has_errors() {
        Exit::Failed
    } else {
        Exit::Success
    })
}

/// What `cvo validate` finds in the release of `release` (each profile it uses on its own),
/// against `previous` when given; also the check `cvo push` runs first.
pub(super) fn findings(
    release: &ReleaseArgs,
    previous: Option<&std::path::Path>,
) -> Result<Vec<Diagnostic>, CliError> {
    check(release, previous, None).map(|(diagnostics, _)| diagnostics)
}

/// [`findings`], and what the release leaves out in each profile it was read in.
fn check(
    release: &ReleaseArgs,
    previous: Option<&std::path::Path>,
    stored: Option<&StoredVersions>,
) -> Result<(Vec<Diagnostic>, Vec<LeftOut>), CliError> {
    // Each release is read and parsed once; every profile is a selection of it.
    let each = release.read_each_profile()?;
    let previous = match previous {
        Some(dir) => Some(
            crate::release::read(dir, &release.options_in(release.profile.as_deref()))
                .map_err(|e| CliError::usage(format_args!("--previous: {e}")))?,
        ),
        None => None,
    };
    let mut runs = Vec::with_capacity(each.selections.len());
    let mut left_out = Vec::with_capacity(each.selections.len());
    for profile in &each.selections {
        let loaded = release.select(&each.read, profile.as_deref())?;
        left_out.push(LeftOut::with_default_capabilities(
            &loaded,
            profile.as_deref(),
        ));
        let previous = previous
            .as_ref()
            .map(|p| p.select(&release.options_in(profile.as_deref()).filters));
        runs.push((
            profile.clone(),
            validate::validate_with_stored(&loaded, previous.as_ref(), stored),
        ));
    }
    if runs.len() > 1 {
        let profiles: Vec<&str> = runs.iter().filter_map(|(p, _)| p.as_deref()).collect();
        stderr_line!(
            "note: the release uses cluster profiles ({}): each was validated on its own (choose one with --profile)",
            profiles.join(", ")
        );
    }
    Ok((merge_profiles(runs), left_out))
}

/// `status.storedVersions` of every CRD on the cluster; a CRD without that status (not yet
/// reconciled) counts every version of its spec as possibly stored. Any failure is exit code
/// 2: the stored versions are never assumed.
fn read_stored_versions(global: &GlobalArgs) -> Result<StoredVersions, CliError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let cannot = |why: String| {
        CliError::usage(format_args!(
            "--live: {why}; cannot tell which versions the cluster stores its custom resources in (nothing is assumed: run again when the cluster answers, or use --previous without --live)"
        ))
    };
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let client = super::kube_client(global)
            .await
            .map_err(|e| cannot(e.to_string()))?;
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client);
        let retry = crate::cluster::retry::RetryPolicy::default();
        let params = kube::api::ListParams::default();
        let list = retry
            .run(|| api.list(&params))
            .await
            .map_err(|(e, _)| cannot(format!("listing CustomResourceDefinitions: {e}")))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|crd| {
                let name = crd.metadata.name?;
                let stored = crd
                    .status
                    .and_then(|s| s.stored_versions)
                    .unwrap_or_else(|| crd.spec.versions.into_iter().map(|v| v.name).collect());
                Some((name, stored))
            })
            .collect())
    })
}

/// The findings of several profiles as one list: a finding made in every profile once, as
/// is; one made in only some of them with `(profiles a, b)` after its message.
fn merge_profiles(runs: Vec<(Option<String>, Vec<Diagnostic>)>) -> Vec<Diagnostic> {
    let total = runs.len();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut merged: Vec<(Diagnostic, Vec<String>)> = Vec::new();
    for (profile, diagnostics) in runs {
        for d in diagnostics {
            let key = format!("{}\0{d}", d.severity);
            let i = *index.entry(key).or_insert_with(|| {
                merged.push((d, Vec::new()));
                merged.len() - 1
            });
            merged[i].1.extend(profile.clone());
        }
    }
    let mut out: Vec<Diagnostic> = merged
        .into_iter()
        .map(|(mut d, profiles)| {
            if total > 1 && profiles.len() < total {
                let s = if profiles.len() == 1 { "" } else { "s" };
                d.message
                    .push_str(&format!(" (profile{s} {})", profiles.join(", ")));
            }
            d
        })
        .collect();
    validate::sort(&mut out);
    out
}
