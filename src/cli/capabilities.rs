//! `cvo capabilities`: what a release holds for a cluster, capability by capability — known
//! (in the release's catalogue), enabled (by the baseline set, the additional ones, or
//! implicitly), in which sets, and the manifests each gates (docs/capabilities.md).
//!
//! The cluster is the release's default (every capability of `vCurrent`) without flags, a
//! ClusterVersion file with `--cluster-version`, or ClusterVersion `version` read from the
//! cluster with `--live`. Fail closed: a ClusterVersion that cannot be read ends the command
//! (exit code 2) with the cause; it is never taken as "every capability enabled". With
//! `--previous`, the update from that release is taken into account: the capabilities it
//! enables implicitly (objects the cluster has that the update moves into a capability).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Args;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::{CliError, GlobalArgs, OutputFormat, ReleaseArgs};
use crate::exit::Exit;
use crate::release::capability::{Capabilities, Gates, implicitly_enabled};
use crate::release::feature_gate::{EnabledGates, GateSource};
use crate::release::{DEFAULT_CLUSTER_PROFILE, Manifest, Release, Selectors};
use crate::status::spec::{Spec, cluster_capabilities, enabled_before};
use crate::validate::LeftOut;

/// Files named per capability in the text output before "and N more" (`-o json` lists all).
const FILES_SHOWN: usize = 3;
/// Largest ClusterVersion file read.
const MAX_CLUSTER_VERSION_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Args)]
pub struct CapabilitiesArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// Take the cluster's capabilities from this ClusterVersion (YAML or JSON, as `kubectl
    /// get clusterversion version -o yaml` writes it): spec.capabilities and
    /// status.capabilities.enabledCapabilities. Without it (and without --live): the
    /// release's default, every capability of its vCurrent set.
    #[arg(long, value_name = "FILE", conflicts_with = "live")]
    pub cluster_version: Option<PathBuf>,
    /// Read ClusterVersion `version` from the cluster (--kubeconfig, --context); a cluster
    /// that cannot be read, or has no ClusterVersion, ends the command with exit code 2.
    #[arg(long)]
    pub live: bool,
    /// The release the cluster runs now: also show which capabilities the update from it to
    /// --release enables implicitly. Loaded with the same options.
    #[arg(long, value_name = "DIR")]
    pub previous: Option<PathBuf>,
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Where the cluster's capabilities come from.
enum Source {
    /// No ClusterVersion: the release's default.
    Default,
    /// The ClusterVersion the release ships (an install creates it).
    Shipped,
    File(PathBuf),
    Live,
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Default => {
                "the release's default (no ClusterVersion given: every capability of vCurrent)"
                    .to_owned()
            }
            Source::Shipped => {
                "the ClusterVersion the release ships (what an install enables)".to_owned()
            }
            Source::File(path) => format!("ClusterVersion from {}", path.display()),
            Source::Live => "ClusterVersion version in the cluster".to_owned(),
        }
    }

    fn key(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::Shipped => "release",
            Source::File(_) => "file",
            Source::Live => "live",
        }
    }
}

pub fn run(global: &GlobalArgs, args: &CapabilitiesArgs) -> Result<Exit, CliError> {
    let given = args.release.gate_source()?;
    if args.live && given.is_none() {
        // The cluster's FeatureGate says, once read.
        args.release.defer_feature_gates();
    }
    let console = global.console;
    let mut release = args.release.load(console)?;
    let errors = release.errors().count();
    if errors > 0 {
        say!(
            console,
            warning,
            "the release has {errors} error{} (see `cvo validate`): what follows is of the manifests that could be read",
            if errors == 1 { "" } else { "s" }
        );
    }
    // The feature gates the release was read with (the previous release is read under them).
    let mut gates = match &given {
        Some(source) => source.enabled(release.version()).map_err(CliError::Usage)?,
        None => EnabledGates::new(),
    };
    let (source, cv) = if let Some(path) = &args.cluster_version {
        (Source::File(path.clone()), Some(read_file(path)?))
    } else if args.live {
        let (cv, live) = read_live(global, &release, given.as_ref())?;
        release.leave_out_by_feature_gates(&live);
        gates = live;
        (Source::Live, Some(cv))
    } else if let Some(own) = crate::status::clusterversion::shipped_object(&release) {
        // What an install of this release enables: the spec of the ClusterVersion it ships.
        (Source::Shipped, Some(own))
    } else {
        (Source::Default, None)
    };
    let spec = cv.as_ref().map(Spec::of).unwrap_or_default();
    let (mut caps, problems) = cluster_capabilities(&release.capabilities, &spec, cv.as_ref());
    let mut warnings: Vec<String> = spec
        .invalid
        .iter()
        .filter(|p| p.starts_with("spec.capabilities"))
        .cloned()
        .collect();
    warnings.extend(problems);
    let by_update = match &args.previous {
        Some(dir) => {
            let options = args.release.options_in(args.release.profile.as_deref());
            let (previous, _) = crate::release::load_selected(dir, &options)
                .map_err(|e| CliError::usage(format_args!("--previous: {e}")))?;
            let implicit = implicitly_enabled(&release, &Gates::of(&previous), &caps, Some(&gates));
            let new: BTreeSet<String> = implicit
                .difference(&caps.implicitly_enabled)
                .cloned()
                .collect();
            caps.enable_implicitly(implicit);
            Some(new)
        }
        None => None,
    };
    let profile = args.release.profile.clone().or_else(|| {
        (!Selectors::of(release.all_manifests()).profiles.is_empty())
            .then(|| DEFAULT_CLUSTER_PROFILE.to_owned())
    });
    let view = View {
        release: &release,
        caps: &caps,
        rows: rows(&release, &caps, by_update.as_ref()),
        left_out: LeftOut::of(&release, profile.as_deref(), &caps, None),
        by_update: by_update.as_ref(),
        source: &source,
        spec: &spec,
        enabled_before: cv
            .as_ref()
            .map(|cv| enabled_before(cv).0)
            .unwrap_or_default(),
        warnings: &warnings,
    };
    for w in &warnings {
        say!(console, warning, "{w}");
    }
    let out = match args.output {
        OutputFormat::Text => view.text(),
        OutputFormat::Json => {
            let mut v = view.json();
            let (source, digest) = args.release.origin_json();
            v["release"] = json!({"source": source, "digest": digest});
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
    };
    super::print_stdout(&out)?;
    Ok(Exit::Success)
}

/// A ClusterVersion from a YAML or JSON file; anything else is a usage error naming the file.
fn read_file(path: &Path) -> Result<DynamicObject, CliError> {
    let fail = |why: String| {
        CliError::usage(format_args!(
            "--cluster-version {}: {why}; cannot tell which capabilities the cluster enables",
            path.display()
        ))
    };
    let size = std::fs::metadata(path)
        .map_err(|e| fail(e.to_string()))?
        .len();
    if size > MAX_CLUSTER_VERSION_BYTES {
        return Err(fail(format!(
            "{size} bytes, more than a ClusterVersion holds ({MAX_CLUSTER_VERSION_BYTES} at most)"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let value: Value = serde_saphyr::from_str(&text)
        .map_err(|e| fail(format!("not one YAML or JSON document: {e}")))?;
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind != crate::status::clusterversion::KIND
        || !api_version.starts_with("config.openshift.io/")
    {
        return Err(fail(format!(
            "expected a ClusterVersion (apiVersion config.openshift.io/v1, kind ClusterVersion), found apiVersion `{}` kind `{}`",
            crate::diagnostic::excerpt(api_version),
            crate::diagnostic::excerpt(kind)
        )));
    }
    serde_json::from_value(value).map_err(|e| {
        fail(format!(
            "not a Kubernetes object: {}",
            crate::release::typed::plain_serde_message(&e.to_string())
        ))
    })
}

/// ClusterVersion `version` from the cluster; any failure, and its absence, is exit code 2.
/// ClusterVersion `version` and the feature gates enabled for `release` (`given` by a flag,
/// else the cluster's FeatureGate, as a sync reads them), read from the cluster.
fn read_live(
    global: &GlobalArgs,
    release: &Release,
    given: Option<&GateSource>,
) -> Result<(DynamicObject, EnabledGates), CliError> {
    use crate::status::clusterversion::{self, NAME};
    let cannot = |why: String| {
        CliError::usage(format_args!(
            "--live: {why}; cannot tell which capabilities the cluster enables (nothing is assumed: run again when the cluster answers, or use --cluster-version FILE)"
        ))
    };
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let client = super::kube_client(global).await.map_err(|e| cannot(e.to_string()))?;
        let cluster = crate::cluster::Cluster::new(client);
        let retry = crate::apply::RetryPolicy::default();
        let gates = crate::sync::feature_gates::enabled(&cluster, &retry, release, given)
            .await
            .map_err(|e| cannot(e.to_string()))?;
        match clusterversion::read(&cluster, &retry).await {
            Ok(Some(cv)) => Ok((cv, gates)),
            Ok(None) => Err(cannot(format!(
                "the cluster has no ClusterVersion {NAME} (without one, cvo apply enables every capability of the release: run without --live to see that)"
            ))),
            Err(e) => Err(cannot(match std::error::Error::source(&e) {
                Some(cause) => format!("reading ClusterVersion {NAME}: {cause}"),
                None => e.to_string(),
            })),
        }
    })
}

/// One capability, as shown.
struct Row<'a> {
    name: String,
    known: bool,
    enabled: bool,
    implicitly: bool,
    by_update: bool,
    sets: Vec<&'a str>,
    manifests: Vec<&'a Manifest>,
}

/// A row per capability the catalogue knows and per unknown name a kept manifest uses.
fn rows<'a>(
    release: &'a Release,
    caps: &Capabilities,
    by_update: Option<&BTreeSet<String>>,
) -> Vec<Row<'a>> {
    let catalogue = &release.capabilities;
    let mut gated: BTreeMap<String, Vec<&Manifest>> = catalogue
        .known
        .iter()
        .map(|c| (c.clone(), Vec::new()))
        .collect();
    for m in &release.manifests {
        let mut seen = BTreeSet::new();
        for c in m.capabilities.iter().filter(|c| seen.insert(*c)) {
            gated.entry(c.clone()).or_default().push(m);
        }
    }
    gated
        .into_iter()
        .map(|(name, manifests)| Row {
            known: catalogue.known.contains(&name),
            enabled: caps.enabled.contains(&name),
            implicitly: caps.implicitly_enabled.contains(&name),
            by_update: by_update.is_some_and(|u| u.contains(&name)),
            sets: catalogue
                .sets
                .iter()
                .filter(|(_, members)| members.contains(&name))
                .map(|(set, _)| set.as_str())
                .collect(),
            manifests,
            name,
        })
        .collect()
}

impl Row<'_> {
    /// `yes`, `no`, `implicitly`, `by update` (enabled implicitly by the update).
    fn enabled_word(&self) -> &'static str {
        match (self.enabled, self.by_update, self.implicitly) {
            (false, ..) => "no",
            (true, true, _) => "by update",
            (true, false, true) => "implicitly",
            (true, false, false) => "yes",
        }
    }

    /// The distinct files of its manifests, in apply order.
    fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = Vec::new();
        for m in &self.manifests {
            let f = crate::diagnostic::escaped_path(&m.location.file);
            if !files.contains(&f) {
                files.push(f);
            }
        }
        files
    }
}

/// Everything the output shows.
struct View<'a> {
    release: &'a Release,
    caps: &'a Capabilities,
    rows: Vec<Row<'a>>,
    left_out: LeftOut,
    by_update: Option<&'a BTreeSet<String>>,
    source: &'a Source,
    spec: &'a Spec,
    enabled_before: Vec<String>,
    warnings: &'a [String],
}

/// A name as shown in text: quoted when it is empty or has spaces around it.
fn shown(name: &str) -> String {
    if name.is_empty() || name.trim() != name {
        format!("{name:?}")
    } else {
        crate::diagnostic::excerpt(name)
    }
}

fn join<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let text: Vec<String> = names.into_iter().map(|n| shown(n)).collect();
    if text.is_empty() {
        "none".to_owned()
    } else {
        text.join(", ")
    }
}

impl View<'_> {
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let catalogue = &self.release.capabilities;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "catalogue: {} (sets: {})",
            if catalogue.declared {
                "capabilities.yaml"
            } else {
                "derived from the manifests' capability.openshift.io/name annotations"
            },
            join(catalogue.sets.keys())
        );
        let _ = writeln!(out, "cluster: {}", self.source.describe());
        if !matches!(self.source, Source::Default) {
            let asked = self.spec.capabilities.as_ref();
            let _ = writeln!(
                out,
                "  spec.capabilities: baselineCapabilitySet {}, additionalEnabledCapabilities {}",
                asked
                    .and_then(|a| a.baseline.as_deref())
                    .map_or_else(|| "unset (vCurrent)".to_owned(), shown),
                join(asked.map(|a| a.additional.iter()).into_iter().flatten())
            );
            let _ = writeln!(
                out,
                "  status.capabilities.enabledCapabilities: {}",
                join(&self.enabled_before)
            );
        }
        for w in self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        let _ = writeln!(out);
        if self.rows.is_empty() {
            let _ = writeln!(
                out,
                "no capabilities: no manifest names one (capability.openshift.io/name) and the release has no capabilities.yaml\n"
            );
        }
        let names: Vec<String> = self.rows.iter().map(|r| shown(&r.name)).collect();
        let sets: Vec<String> = self
            .rows
            .iter()
            .map(|r| {
                if r.sets.is_empty() {
                    "-".to_owned()
                } else {
                    r.sets.join(",")
                }
            })
            .collect();
        let width = |col: &[String], head: &str| {
            col.iter()
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
                .max(head.len())
        };
        let (wn, ws) = (width(&names, "CAPABILITY"), width(&sets, "SETS"));
        if !self.rows.is_empty() {
            let _ = writeln!(
                out,
                "{:wn$}  KNOWN  ENABLED     {:ws$}  MANIFESTS",
                "CAPABILITY", "SETS"
            );
        }
        for ((row, name), sets) in self.rows.iter().zip(&names).zip(&sets) {
            let files = row.files();
            let mut listed = files
                .iter()
                .take(FILES_SHOWN)
                .map(|f| {
                    Path::new(f)
                        .file_name()
                        .map_or(f.clone(), |n| n.to_string_lossy().into_owned())
                })
                .collect::<Vec<_>>()
                .join(", ");
            if files.len() > FILES_SHOWN {
                let _ = write!(listed, " and {} more files", files.len() - FILES_SHOWN);
            }
            let _ = writeln!(
                out,
                "{name:wn$}  {:5}  {:10}  {sets:ws$}  {}{}",
                if row.known { "yes" } else { "no" },
                row.enabled_word(),
                row.manifests.len(),
                if listed.is_empty() {
                    String::new()
                } else {
                    format!("  {listed}")
                }
            );
        }
        if !self.rows.is_empty() {
            let _ = writeln!(out);
        }
        if let Some(by_update) = self.by_update {
            let _ = writeln!(
                out,
                "enabled implicitly by the update from --previous: {}",
                join(by_update)
            );
        }
        let c = crate::status::conditions::implicitly_enabled(self.caps);
        let _ = writeln!(
            out,
            "{}: {:?} ({}): {}",
            c.type_, c.status, c.reason, c.message
        );
        let _ = writeln!(out, "{}", self.left_out.line());
        out
    }

    fn json(&self) -> Value {
        let catalogue = &self.release.capabilities;
        let asked = self.spec.capabilities.as_ref();
        let condition = crate::status::conditions::implicitly_enabled(self.caps);
        json!({
            "catalogue": {
                "declared": catalogue.declared,
                "known": catalogue.known,
                "sets": catalogue.sets,
            },
            "cluster": {
                "source": self.source.key(),
                "file": match self.source {
                    Source::File(p) => Some(crate::diagnostic::escaped_path(p)),
                    _ => None,
                },
                "baselineCapabilitySet": asked.and_then(|a| a.baseline.clone()),
                "additionalEnabledCapabilities": asked.map(|a| a.additional.clone()).unwrap_or_default(),
                "enabledBefore": self.enabled_before,
            },
            "warnings": self.warnings,
            "capabilities": self.rows.iter().map(|r| json!({
                "name": r.name,
                "known": r.known,
                "enabled": r.enabled,
                "implicitlyEnabled": r.implicitly,
                "enabledByUpdate": r.by_update,
                "sets": r.sets,
                "manifests": r.manifests.len(),
                "files": r.files(),
            })).collect::<Vec<_>>(),
            "enabled": self.caps.enabled,
            "implicitlyEnabled": self.caps.implicitly_enabled,
            "enabledByUpdate": self.by_update,
            "condition": condition,
            "profile": self.left_out.profile,
            "manifests": self.left_out.total,
            "excluded": self.left_out.json(),
        })
    }
}
