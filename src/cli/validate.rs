//! `cvo validate`: CI checks over a release, optionally against the release it updates from.
//!
//! Exit codes: 0 no errors (warnings and notes allowed), 1 errors found, 2 the release or the
//! previous release cannot be read, or `--profile`/`--feature-set` select nothing.
//!
//! Without `--profile`, a release that uses cluster profiles is validated in each of them on
//! its own (a release holds per-profile twins of one object, which only clash when profiles
//! are mixed); a finding made in only some profiles names them.
//!
//! Settings not given on the command line come from `.cvo.yaml` (see `validate_config`),
//! found from the release directory upwards, or from the current directory for an OCI release.
//!
//! With `--live`, every CRD is read from the cluster (`--kubeconfig`, `--context`): the CRD
//! rules check the release against their `status.storedVersions` and, without `--previous`,
//! compare the release's CRDs with them as OLM v1's preflight does; a cluster that cannot be
//! read is exit code 2 (nothing is assumed).
//!
//! The report also says what the release leaves out in each profile it was read in, by
//! reason (profile, feature set, capability with the release's default capabilities,
//! `--exclude`): a line per profile before the text summary, `summary.excluded` in JSON.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args;

use super::validate_config::{Config, SearchFrom, Sourced};
use super::{CliError, Console, GlobalArgs, ReleaseArgs};
use crate::diagnostic::Diagnostic;
use crate::exit::Exit;
use crate::validate::{self, Format, LeftOut, Level, LiveCrds, RuleLevels, Summary};

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
    /// Report rule ID at LEVEL: error, warning, note or off (repeatable; overrides the config
    /// file's `rules:`). Ids are listed in docs/validation.md.
    #[arg(long = "rule", value_name = "ID=LEVEL", value_parser = parse_rule)]
    pub rules: Vec<(&'static str, Level)>,
    /// Read settings from this file instead of the first .cvo.yaml found from the release
    /// directory upwards to the repository root.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective settings and where each came from (config file line, command line,
    /// default), then exit without validating.
    #[arg(long)]
    pub print_config: bool,
    /// Read every CRD from the cluster (--kubeconfig, --context): check the release's CRDs
    /// against their status.storedVersions and, without --previous, compare them with the
    /// cluster's. A cluster that cannot be read ends the command with exit code 2.
    #[arg(long)]
    pub live: bool,
}

fn parse_rule(arg: &str) -> Result<(&'static str, Level), String> {
    validate::levels::parse_rule_level(arg)
}

pub fn run(global: &GlobalArgs, args: ValidateArgs) -> Result<Exit, CliError> {
    let (out, exit) = report(global, args)?;
    super::print_stdout(&out)?;
    Ok(exit)
}

/// What [`run`] prints, and how it ends.
pub(super) fn report(global: &GlobalArgs, args: ValidateArgs) -> Result<(String, Exit), CliError> {
    let format = args.format;
    Ok(match validated(global, args)? {
        Validated::Config(settings) => (settings, Exit::Success),
        Validated::Findings(findings) => (findings.render(format), findings.exit()),
    })
}

/// What `cvo validate` with some arguments comes to, before it is rendered.
pub(super) enum Validated {
    /// `--print-config`: the effective settings, printed instead of validating.
    Config(String),
    /// The release's findings, which render in any format.
    Findings(Findings),
}

/// The findings of one validation of a release: rendered in one format or several
/// ([`Findings::render`]) without validating again.
pub(super) struct Findings {
    diagnostics: Vec<Diagnostic>,
    left_out: Vec<LeftOut>,
    /// The release was an OCI artifact: its files are named inside it.
    from_oci: bool,
}

/// Loads and validates the release `args` name (with the config file's settings where the
/// command line gives none), once; `args.format` is not used.
pub(super) fn validated(
    global: &GlobalArgs,
    mut args: ValidateArgs,
) -> Result<Validated, CliError> {
    let config = config_of(&args)?;
    let settings = Settings::resolve(&mut args, &config);
    let (levels, level_sources) = config.levels(&args.rules);
    if args.print_config {
        return Ok(Validated::Config(settings.print(&levels, &level_sources)));
    }
    let live = if args.live {
        Some(read_live_crds(global)?)
    } else {
        None
    };
    let (mut diagnostics, left_out) = check(
        &args.release,
        args.previous.as_deref(),
        live.as_ref(),
        &levels,
        global.console,
    )?;
    // Every format names the files of an OCI release inside the artifact, not in its
    // temporary directory.
    let from_oci = match args.release.origin() {
        Some(opened) => {
            let root = opened.dir();
            for d in &mut diagnostics {
                if let Ok(rel) = d.location.file.strip_prefix(&root) {
                    d.location.file = rel.to_path_buf();
                }
            }
            true
        }
        None => false,
    };
    Ok(Validated::Findings(Findings {
        diagnostics,
        left_out,
        from_oci,
    }))
}

impl Findings {
    /// The report in `format`.
    pub(super) fn render(&self, format: Format) -> String {
        let cwd = if self.from_oci {
            None
        } else {
            std::env::current_dir().ok()
        };
        match (cwd, format) {
            // GitHub annotations and GitLab reports name files from the repository root.
            (Some(cwd), Format::Github | Format::Gitlab) => {
                let mut diagnostics = self.diagnostics.clone();
                for d in &mut diagnostics {
                    d.location.file = cwd.join(&d.location.file);
                }
                let root = repository_root(&cwd).unwrap_or(cwd);
                validate::report::render_report(format, &diagnostics, &self.left_out, Some(&root))
            }
            // SARIF URIs are relative to the current directory.
            (cwd, _) => validate::report::render_report(
                format,
                &self.diagnostics,
                &self.left_out,
                cwd.as_deref(),
            ),
        }
    }

    /// How the command ends: failed when there are errors.
    pub(super) fn exit(&self) -> Exit {
        if Summary::of(&self.diagnostics).has_errors() {
            Exit::Failed
        } else {
            Exit::Success
        }
    }
}

/// The config file of `cvo validate ARGS`: [`config_for`] its release and `--config`.
fn config_of(args: &ValidateArgs) -> Result<Config, CliError> {
    config_for(&args.release.release, args.config.as_deref())
}

/// The config file of the release `release` (as `--release` gives it): `explicit`, else the
/// first `.cvo.yaml` from the release directory upwards, or from the current directory for an
/// OCI release; `cvo push` reads the same one.
pub(super) fn config_for(
    release: &str,
    explicit: Option<&std::path::Path>,
) -> Result<Config, CliError> {
    let oci = crate::oci::Source::parse(release).ok().flatten().is_some();
    let start = if oci {
        SearchFrom::CurrentDir
    } else {
        SearchFrom::ReleaseDir(std::path::Path::new(release))
    };
    Config::find(explicit, start)
}

/// The repository `dir` lies in: the nearest ancestor (or `dir` itself) that holds `.git`.
fn repository_root(dir: &std::path::Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(std::path::Path::to_path_buf)
}

/// What `cvo validate` finds in the release of `release` (each profile it uses on its own)
/// with the rules at `levels` (suppressions applied): the check `cvo push` runs first. Notes
/// go to `console`.
pub(super) fn findings(
    release: &ReleaseArgs,
    levels: &RuleLevels,
    console: Console,
) -> Result<Vec<Diagnostic>, CliError> {
    check(release, None, None, levels, console).map(|(diagnostics, _)| diagnostics)
}

/// [`findings`] with the rules at `levels` (and the cluster's CRDs with
/// `--live`), and what the release leaves out in each profile it was read in.
fn check(
    release: &ReleaseArgs,
    previous: Option<&std::path::Path>,
    live: Option<&LiveCrds>,
    levels: &RuleLevels,
    console: Console,
) -> Result<(Vec<Diagnostic>, Vec<LeftOut>), CliError> {
    // Each release is read and parsed once; every profile is a selection of it.
    let super::EachProfile { read, selections } = release.read_each_profile(console)?;
    let previous = match previous {
        Some(dir) => Some(
            crate::release::read(dir, &release.options_in(release.profile.as_deref()))
                .map_err(|e| CliError::usage(format_args!("--previous: {e}")))?,
        ),
        None => None,
    };
    let mut runs = Vec::with_capacity(selections.len());
    let mut left_out = Vec::with_capacity(selections.len());
    let mut usages = Vec::with_capacity(selections.len());
    let filters: Vec<_> = selections.iter().map(|p| release.filters_in(p)).collect();
    let mut previous = previous.map(|p| p.into_selections(filters.clone()));
    let mut checked = validate::Checked::default();
    for (profile, loaded) in selections.iter().zip(read.into_selections(filters)) {
        let loaded = release.gated(loaded)?;
        let previous = previous.as_mut().and_then(Iterator::next);
        left_out.push(LeftOut::with_default_capabilities(
            &loaded,
            profile.as_deref(),
        ));
        let found = validate::validate_with_live(&loaded, previous.as_ref(), live, &mut checked);
        let (found, usage) =
            validate::report_at_levels(&loaded, found, levels, (previous.as_ref(), live));
        usages.push(usage);
        runs.push((profile.clone(), found));
    }
    if runs.len() > 1 {
        let profiles: Vec<&str> = runs.iter().filter_map(|(p, _)| p.as_deref()).collect();
        let profiles = profiles.join(", ");
        say!(
            console,
            note { %profiles },
            "the release uses cluster profiles ({profiles}): each was validated on its own (choose one with --profile)"
        );
        if live.is_some() {
            say!(
                console,
                note,
                "--live compares every profile's CRDs with the cluster's, which holds one profile's: give the cluster's profile with --profile"
            );
        }
    }
    // A suppression is stale only when it matched nothing in every profile.
    let mut found = merge_profiles(runs);
    found.extend(validate::suppression::stale(&usages, levels));
    validate::sort(&mut found);
    Ok((found, left_out))
}

/// Every CRD on the cluster, as served (read as raw JSON, so that it compares with a
/// manifest's as written), with its `status.storedVersions`; a CRD without that status (not
/// yet reconciled) counts every version of its spec as possibly stored. Any failure is exit
/// code 2: neither the CRDs nor where their objects are stored is ever assumed.
fn read_live_crds(global: &GlobalArgs) -> Result<LiveCrds, CliError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject};
    let cannot = |why: String| {
        CliError::usage(format_args!(
            "--live: {why}; cannot tell which CRDs the cluster has and which versions it stores their resources in (nothing is assumed: run again when the cluster answers, or use --previous without --live)"
        ))
    };
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let (client, target) = super::unconnected_client(global)
            .await
            .map_err(|e| cannot(e.to_string()))?;
        let resource = ApiResource::erase::<CustomResourceDefinition>(&());
        let api: kube::Api<DynamicObject> = kube::Api::all_with(client, &resource);
        let retry = crate::cluster::retry::RetryPolicy::default();
        let params = kube::api::ListParams::default();
        let list = retry.run(|| api.list(&params)).await.map_err(|(e, _)| {
            cannot(format!(
                "listing CustomResourceDefinitions: {}",
                super::request_failed(&e, &target)
            ))
        })?;
        let mut live = LiveCrds::default();
        for crd in list.items {
            let Some(name) = crd.metadata.name.clone() else {
                continue;
            };
            let stored = crate::preflight::crds::stored_versions(&crd.data);
            let object = serde_json::to_value(&crd)
                .map_err(|e| cannot(format!("reading CustomResourceDefinition {name}: {e}")))?;
            live.insert(name, stored, object);
        }
        Ok(live)
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

/// The release settings `cvo validate` runs with, each with where it came from.
struct Settings {
    config: Option<PathBuf>,
    profile: Sourced<Option<String>>,
    feature_set: Sourced<String>,
    exclude: Sourced<Vec<String>>,
    previous: Sourced<Option<PathBuf>>,
}

const COMMAND_LINE: &str = "command line";
const DEFAULT: &str = "default";

impl Settings {
    /// Fills what the command line left unset from `config` (into `args`), and says where each
    /// setting came from.
    fn resolve(args: &mut ValidateArgs, config: &Config) -> Settings {
        let profile = layered(&mut args.release.profile, config.profile.as_ref());
        let feature_set = layered(&mut args.release.feature_set, config.feature_set.as_ref());
        let feature_set = Sourced {
            value: args.release.feature_set().to_owned(),
            source: feature_set.source,
        };
        let exclude = match (args.release.exclude.is_empty(), &config.exclude) {
            (true, Some(c)) => {
                args.release.exclude = c.value.clone();
                c.clone()
            }
            (empty, _) => Sourced {
                value: args.release.exclude.clone(),
                source: if empty { DEFAULT } else { COMMAND_LINE }.into(),
            },
        };
        let previous = layered(&mut args.previous, config.previous.as_ref());
        Settings {
            config: config.file.clone(),
            profile,
            feature_set,
            exclude,
            previous,
        }
    }

    /// `--print-config`: one `setting: value  (source)` line each, then every rule's level.
    fn print(&self, levels: &RuleLevels, sources: &HashMap<&'static str, String>) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "config file: {}",
            self.config
                .as_deref()
                .map(crate::diagnostic::escaped_path)
                .unwrap_or_else(|| "none found".into())
        );
        let line = |out: &mut String, key: &str, value: String, source: &str| {
            let _ = writeln!(out, "{key}: {value}  ({source})");
        };
        line(
            &mut out,
            "profile",
            self.profile
                .value
                .clone()
                .unwrap_or_else(|| "each profile the release uses".into()),
            &self.profile.source,
        );
        line(
            &mut out,
            "feature-set",
            self.feature_set.value.clone(),
            &self.feature_set.source,
        );
        line(
            &mut out,
            "exclude",
            format!("[{}]", self.exclude.value.join(", ")),
            &self.exclude.source,
        );
        line(
            &mut out,
            "previous",
            self.previous
                .value
                .as_deref()
                .map(crate::diagnostic::escaped_path)
                .unwrap_or_else(|| "none".into()),
            &self.previous.source,
        );
        out.push_str("rules:\n");
        for rule in validate::RULES {
            let level = levels.level(rule.id).unwrap_or(rule.default_level());
            let source = sources.get(rule.id).map(String::as_str).unwrap_or(DEFAULT);
            let _ = writeln!(out, "  {}: {level}  ({source})", rule.id);
        }
        out
    }
}

/// A setting the command line may give (`flag`), else the config file (`config`, then copied
/// into `flag`), else none: its value and where it came from.
fn layered<T: Clone>(flag: &mut Option<T>, config: Option<&Sourced<T>>) -> Sourced<Option<T>> {
    match (flag.clone(), config) {
        (Some(value), _) => Sourced {
            value: Some(value),
            source: COMMAND_LINE.into(),
        },
        (None, Some(c)) => {
            *flag = Some(c.value.clone());
            Sourced {
                value: Some(c.value.clone()),
                source: c.source.clone(),
            }
        }
        (None, None) => Sourced {
            value: None,
            source: DEFAULT.into(),
        },
    }
}
