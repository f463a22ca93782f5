//! `cvo fleet observe|status|preflight|rollout|install|pause|resume|abort|retry|uninstall`: one release rolled out to the clusters of an
//! Open Cluster Management Placement, in its decision groups (docs/fleet.md). The kubeconfig
//! is the hub's.
//!
//! Exit codes: `status` 0 all at the target, 3 in progress (or paused), 1 held by a failure or
//! a deadline, or aborted (without a rollout: 0 when every cluster is reachable and none
//! fails); `preflight` 0 every cluster clean or its risks accepted, 3 not every cluster has
//! answered yet, 1 risks not accepted (or a preflight that could not run), 4 refused (a rollout
//! under way, a release that does not verify); `rollout` 0 written (or, with `--dry-run`,
//! would be), 4 refused on a cluster whose operator would refuse it, on a first-wave cluster
//! with preflight risks not accepted or no preflight answer (or a release that does not
//! verify), 1 a request failed, 2 usage;
//! `pause`, `resume`, `abort`, `retry` 0 done (or already so), 1 refused or failed; `install`
//! 4 refused on a cluster whose ClusterVersion OpenShift's own operator manages (`--force`).

use std::time::Duration;

use clap::{Args, Subcommand};

use super::apply::parse_duration;
use super::{CliError, GlobalArgs, OciArgs, OutputFormat, pretty, print_stdout};
use crate::cluster::NamespacedName;
use crate::exit::Exit;
use crate::fleet::control::{State, Verb};
use crate::fleet::preflight::{self as fleet_preflight, Answer, FleetPreflight};
use crate::fleet::status::{ClusterRollout, FleetStatus, Reachability};
use crate::fleet::work::{MaxFailures, Purpose, Rollout};
use crate::fleet::{self, rollout, status};

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Have every cluster of the Placement report its ClusterVersion to the hub (a read-only
    /// ManifestWorkReplicaSet, `cvo-observe-PLACEMENT`); writes nothing to the clusters.
    Observe(ObserveArgs),
    /// Show each cluster's wave, reachability, version, Upgradeable and first failure, each
    /// wave's progress, and what holds a running rollout.
    Status(StatusArgs),
    /// Ask every cluster of the Placement at once for the preflight of a release (read-only:
    /// its operator checks the update without starting it) and show, by wave, the risks that
    /// apply to each and whether each is accepted.
    Preflight(PreflightArgs),
    /// Roll a release out: `spec.desiredUpdate` of every cluster's ClusterVersion, one
    /// decision group after the other, each gated on the previous one's ClusterVersions.
    Rollout(RolloutArgs),
    /// Put the cvo operator (and the rollout's executor) on every cluster of the Placement.
    Install(InstallArgs),
    /// Start no new wave of the rollout; clusters already asked go on.
    Pause(PlacementArgs),
    /// Let a paused rollout go on with its next wave.
    Resume(PlacementArgs),
    /// Stop the rollout for good: no cluster not asked yet is ever asked (a new `rollout`
    /// starts over).
    Abort(PlacementArgs),
    /// Ask one cluster of the rollout again (after a fix): its ManifestWork is written anew and
    /// its progress deadline counts from then.
    Retry(RetryArgs),
    /// Remove cvo from every cluster of the Placement: the rollout and observe sets, then the
    /// operator, its RBAC, keys and pull secret, and the executor (each cluster's work agent
    /// deletes them); the CRDs, ClusterVersion `version` and the namespaces stay.
    Uninstall(PlacementArgs),
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// The managed cluster to ask again.
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
}

#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// The Placement (NAMESPACE/NAME on the hub) whose decision groups are the waves.
    #[arg(long, value_name = "NS/NAME")]
    pub placement: NamespacedName,
    /// Output format (stdout).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct ObserveArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The Placement (NAMESPACE/NAME on the hub) [default: the one cvo's sets on the hub name,
    /// when there is exactly one].
    #[arg(long, value_name = "NS/NAME")]
    pub placement: Option<NamespacedName>,
    /// Output format (stdout).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// List every cluster, not only those that need a look (failing, unreachable, not
    /// Upgradeable, behind, no report yet).
    #[arg(long)]
    pub all: bool,
    /// Print again whenever the status changes, until the rollout is done, held, paused or
    /// aborted (exit code as without it).
    #[arg(long, short = 'w')]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// The release: oci://HOST[:PORT]/REPO@sha256:HEX (a tag is resolved once, here, and the
    /// clusters are given the digest).
    #[arg(long, value_name = "oci://…")]
    pub release: String,
    #[command(flatten)]
    pub oci: OciArgs,
    /// The version the release must have (its release-metadata): a check, not an override.
    #[arg(long, value_name = "V")]
    pub version: Option<String>,
    /// Clusters of a wave that may fail (or pass the deadline) before the rollout stops: a
    /// number (at most the smallest wave's size) or a percentage of each wave. With the default
    /// of none, a failing first wave holds the rest.
    #[arg(long, value_name = "N|N%", value_parser = parse_max_failures, default_value = "0")]
    pub max_failures: MaxFailures,
    /// A cluster still progressing after this long counts as failed [default: none].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub progress_deadline: Option<Duration>,
    /// How long a wave must stay done before the next one starts.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "0s")]
    pub min_success_time: Duration,
    /// Preflight risks accepted on every cluster (comma-separated names, docs/preflight.md):
    /// spec.desiredUpdate.acceptRisks of each ClusterVersion, and the first wave's preflight
    /// judged with them.
    #[arg(long, value_name = "RISK,...", value_delimiter = ',', value_parser = super::values::parse_risk_name)]
    pub accept_risks: Vec<String>,
    /// Write the rollout even where a cluster's operator would refuse the update, or a
    /// first-wave cluster has preflight risks not accepted or no preflight answer (recorded on
    /// the rollout set, annotation fleet.cvo.io/forced).
    #[arg(long)]
    pub force: bool,
    /// Print the waves and clusters and what would be refused; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct PreflightArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// The release: oci://HOST[:PORT]/REPO@sha256:HEX (a tag is resolved once, here, and the
    /// clusters are given the digest).
    #[arg(long, value_name = "oci://…")]
    pub release: String,
    #[command(flatten)]
    pub oci: OciArgs,
    /// The version the release must have (its release-metadata): a check, not an override.
    #[arg(long, value_name = "V")]
    pub version: Option<String>,
    /// Preflight risks accepted (comma-separated names): spec.desiredUpdate.acceptRisks of
    /// each ClusterVersion for this preflight.
    #[arg(long, value_name = "RISK,...", value_delimiter = ',', value_parser = super::values::parse_risk_name)]
    pub accept_risks: Vec<String>,
    /// List every cluster, not only those that need a look.
    #[arg(long)]
    pub all: bool,
    /// Print again whenever the answers change, until every cluster has answered (exit code
    /// as without it).
    #[arg(long, short = 'w')]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// The operator's image (built from the release it holds at /release).
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// The release whose operator objects are installed (a directory or an OCI source).
    #[arg(long, value_name = "SOURCE")]
    pub release: String,
    /// Also the keys every cluster's operator verifies each release it pulls with (repeatable):
    /// a ConfigMap mounted into its Deployment, passed with `cvo operator --verify-key`; and
    /// the registries it reaches over plain HTTP (`--insecure-registry`). An OCI `--release`
    /// is read with them here first.
    #[command(flatten)]
    pub oci: OciArgs,
    /// A registry credential (a Docker config file, as `docker login` writes) every cluster's
    /// operator pulls releases with: a Secret in its namespace, passed with `--pull-secret`.
    /// Never printed (`--dry-run` shows its size).
    #[arg(long, value_name = "FILE")]
    pub pull_secret: Option<std::path::PathBuf>,
    /// Install even on clusters whose ClusterVersion `version` OpenShift's own
    /// cluster-version operator manages (two operators would fight over it).
    #[arg(long)]
    pub force: bool,
    /// Print the ManifestWorkReplicaSet (Secret data redacted); write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_max_failures(text: &str) -> Result<MaxFailures, String> {
    let hint = "write a number of clusters (2) or a percentage of the wave (10%)";
    if let Some(p) = text.strip_suffix('%') {
        return match p.parse::<u8>() {
            Ok(p) if p <= 100 => Ok(MaxFailures::Percent(p)),
            _ => Err(format!(
                "{text:?} is not a percentage from 0% to 100%; {hint}"
            )),
        };
    }
    text.parse::<u32>()
        .map(MaxFailures::Count)
        .map_err(|_| format!("{text:?} is not a number of clusters; {hint}"))
}

pub fn run(global: &GlobalArgs, args: &FleetArgs) -> Result<Exit, CliError> {
    match &args.command {
        FleetCommand::Install(a) => super::fleet_install::run(global, a),
        command => super::runtime()?.block_on(async {
            let client = super::kube_client(global).await?;
            match command {
                FleetCommand::Observe(a) => observe(global, &client, a).await,
                FleetCommand::Status(a) => show_status(&client, a).await,
                FleetCommand::Rollout(a) => roll_out(global, &client, a).await,
                FleetCommand::Preflight(a) => preflight(global, &client, a).await,
                FleetCommand::Pause(a) => control(global, &client, a, Verb::Pause).await,
                FleetCommand::Resume(a) => control(global, &client, a, Verb::Resume).await,
                FleetCommand::Abort(a) => control(global, &client, a, Verb::Abort).await,
                FleetCommand::Retry(a) => retry(global, &client, a).await,
                FleetCommand::Uninstall(a) => uninstall(global, &client, a).await,
                FleetCommand::Install(_) => unreachable!("handled above"),
            }
        }),
    }
}

async fn observe(
    global: &GlobalArgs,
    client: &kube::Client,
    args: &ObserveArgs,
) -> Result<Exit, CliError> {
    let p = &args.placement.placement;
    // The Placement must exist: a set naming a missing one would wait silently.
    status::read(client, &p.namespace, &p.name)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    let set = fleet::work::observe(&p.namespace, &p.name);
    let written = fleet::write(client, &set)
        .await
        .map_err(|e| CliError::failed(format_args!("writing the observe set: {e}")))?;
    let name = format!("{}/{}", p.namespace, Purpose::Observe.name(&p.name));
    match args.placement.output {
        OutputFormat::Json => print_stdout(&pretty(&serde_json::json!({
            "manifestWorkReplicaSet": name, "result": written,
        })))?,
        OutputFormat::Text => say!(
            global.console,
            note,
            "ManifestWorkReplicaSet {name} {written}: every cluster of Placement {p} reports its ClusterVersion (`cvo fleet status --placement {p}`)"
        ),
    }
    Ok(Exit::Success)
}

async fn control(
    global: &GlobalArgs,
    client: &kube::Client,
    args: &PlacementArgs,
    verb: Verb,
) -> Result<Exit, CliError> {
    let p = &args.placement;
    let changed = fleet::control::control(client, &p.namespace, &p.name, verb)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    let name = format!("{}/{}", p.namespace, Purpose::Rollout.name(&p.name));
    match args.output {
        OutputFormat::Json => print_stdout(&pretty(&serde_json::json!({
            "manifestWorkReplicaSet": name, "before": changed.before, "after": changed.after,
        })))?,
        OutputFormat::Text if changed.before == changed.after => say!(
            global.console,
            note,
            "rollout {name} was already {}: unchanged",
            changed.after
        ),
        OutputFormat::Text => say!(
            global.console,
            note,
            "rollout {name} {} (was {}): {}",
            changed.after,
            changed.before,
            match changed.after {
                State::Paused => "no new wave starts; clusters already asked go on",
                State::Aborted => "no cluster not asked yet will be asked",
                State::Running => "its next wave starts when the running one is done",
            }
        ),
    }
    Ok(Exit::Success)
}

async fn retry(
    global: &GlobalArgs,
    client: &kube::Client,
    args: &RetryArgs,
) -> Result<Exit, CliError> {
    let p = &args.placement.placement;
    let work = fleet::control::retry(client, &p.namespace, &p.name, &args.cluster)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    match args.placement.output {
        OutputFormat::Json => print_stdout(&pretty(&serde_json::json!({
            "cluster": args.cluster, "deletedManifestWork": work,
        })))?,
        OutputFormat::Text => say!(
            global.console,
            note,
            "cluster {} asked again: ManifestWork {work} deleted; OCM writes it anew once no other cluster of the rollout is progressing (`cvo fleet status --placement {p}`)",
            args.cluster
        ),
    }
    Ok(Exit::Success)
}

async fn uninstall(
    global: &GlobalArgs,
    client: &kube::Client,
    args: &PlacementArgs,
) -> Result<Exit, CliError> {
    let p = &args.placement;
    let done = fleet::install::uninstall(client, &p.namespace, &p.name)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    match args.output {
        OutputFormat::Json => print_stdout(&pretty(&done))?,
        OutputFormat::Text if done.deleted_sets.is_empty() => say!(
            global.console,
            note,
            "no set of cvo's for Placement {p} on the hub: nothing to uninstall"
        ),
        OutputFormat::Text => {
            say!(
                global.console,
                note,
                "deleted {}; each cluster's work agent deletes {} object(s) of the install and keeps {}",
                done.deleted_sets.join(", "),
                done.removed.len(),
                if done.kept.is_empty() {
                    "nothing".to_owned()
                } else {
                    done.kept.join(", ")
                }
            );
        }
    }
    Ok(Exit::Success)
}

/// How often `status --watch` reads the hub again.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

async fn show_status(client: &kube::Client, args: &StatusArgs) -> Result<Exit, CliError> {
    let p = match &args.placement {
        Some(p) => p.clone(),
        None => the_placement(client).await?,
    };
    let p = &p;
    let mut last = String::new();
    loop {
        let view = status::read(client, &p.namespace, &p.name)
            .await
            .map_err(|e| CliError::failed(e.to_string()))?;
        let st = status::judge(&view, jiff::Timestamp::now());
        let text = match args.output {
            OutputFormat::Json => pretty(&serde_json::json!({
                "status": st, "exitCode": st.exit() as i32,
            })),
            OutputFormat::Text => status_text(&st, args.all),
        };
        if text != last {
            print_stdout(&text)?;
            last = text;
        }
        let paused = st.target.as_ref().is_some_and(|t| t.state == State::Paused);
        if !args.watch || st.exit() != Exit::InProgress || paused {
            return Ok(st.exit());
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
    }
}

/// The one Placement cvo's sets on the hub name; a usage error when there is none or several.
async fn the_placement(client: &kube::Client) -> Result<NamespacedName, CliError> {
    let placements = fleet::placements(client).await.map_err(|e| {
        CliError::failed(format_args!("listing cvo's ManifestWorkReplicaSets: {e}"))
    })?;
    match placements.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(CliError::usage(
            "no ManifestWorkReplicaSet of cvo's on this hub: name the Placement with --placement NS/NAME",
        )),
        several => Err(CliError::usage(format_args!(
            "cvo's sets on this hub name {} Placements ({}): choose one with --placement",
            several.len(),
            several
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// How many lines of `held by` and of clusters that need a look the text shows without
/// `--all`: the status of 1,000 clusters fits a screen.
const SHOWN: usize = 20;

/// `… and N more` when `left` lines were not shown.
fn more(out: &mut String, left: usize, what: &str) {
    if left > 0 {
        out.push_str(&format!(
            "  … and {left} more {what} (`--all` lists them)\n"
        ));
    }
}

/// The rollout `t`, what holds it, and its waves with their counts.
fn rollout_text(st: &FleetStatus, t: &status::Target, all: bool) -> String {
    let mut out = String::new();
    let state = match (st.exit(), t.state) {
        (Exit::Success, _) => "done".to_owned(),
        (_, State::Aborted) => "aborted".to_owned(),
        (Exit::Failed, _) => "held by a failure".to_owned(),
        (_, State::Paused) => format!(
            "paused (`cvo fleet resume --placement {}` goes on)",
            st.placement
        ),
        _ => "in progress".to_owned(),
    };
    out.push_str(&format!(
        "rollout {}: {} ({}) to Placement {}: {state}\n",
        t.rollout, t.version, t.image, st.placement
    ));
    if let Some(forced) = &t.forced {
        out.push_str(&format!("  forced past: {}\n", forced.replace('\n', "; ")));
    }
    let shown = if all { st.held_by.len() } else { SHOWN };
    for h in st.held_by.iter().take(shown) {
        out.push_str(&format!("  held by {}: {}\n", h.cluster, h.reason));
    }
    more(&mut out, st.held_by.len().saturating_sub(shown), "holding");
    out.push('\n');
    let rows: Vec<Vec<String>> = st
        .waves
        .iter()
        .map(|w| {
            let n = w.counts;
            vec![
                w.wave.index.to_string(),
                w.wave.name.clone(),
                w.clusters.len().to_string(),
                n.done.to_string(),
                n.progressing.to_string(),
                n.failed.to_string(),
                n.not_started.to_string(),
                w.progress.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "WAVE",
            "NAME",
            "CLUSTERS",
            "DONE",
            "PROGRESSING",
            "FAILED",
            "NOT STARTED",
            "PROGRESS",
        ],
        &rows,
    ));
    out
}

/// Without a rollout: the clusters counted by the version they are at.
fn versions_text(st: &FleetStatus) -> String {
    let mut out = format!("Placement {}: no rollout\n\n", st.placement);
    let mut versions: std::collections::BTreeMap<String, usize> = Default::default();
    for c in &st.clusters {
        let v = c.report.as_ref().and_then(|r| r.current_version());
        *versions.entry(v.unwrap_or("-").to_owned()).or_default() += 1;
    }
    let rows: Vec<Vec<String>> = versions
        .into_iter()
        .map(|(v, n)| vec![v, n.to_string()])
        .collect();
    out.push_str(&table(&["VERSION", "CLUSTERS"], &rows));
    out
}

/// The status as a person reads it: the rollout and what holds it, the waves with their
/// counts, then the clusters that need a look (`all`: every cluster).
pub fn status_text(st: &FleetStatus, all: bool) -> String {
    let mut out = match &st.target {
        Some(t) => rollout_text(st, t, all),
        None => versions_text(st),
    };
    out.push('\n');
    for problem in &st.problems {
        out.push_str(&format!("cannot read: {problem}\n"));
    }
    if !st.problems.is_empty() {
        out.push('\n');
    }
    let header = [
        "CLUSTER",
        "WAVE",
        "REACHABLE",
        "VERSION",
        "STATE",
        "DESIRED",
        "UPGRADEABLE",
        "ROLLOUT",
        "MESSAGE",
    ];
    if all {
        let rows: Vec<Vec<String>> = st.clusters.iter().map(cluster_row).collect();
        out.push_str(&table(&header, &rows));
        return out;
    }
    let attention = st.attention();
    out.push_str(&needing_a_look(attention.len(), st.clusters.len()));
    if attention.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = attention
        .iter()
        .take(SHOWN)
        .map(|(c, why)| {
            let mut row = cluster_row(c);
            if let Some(message) = row.last_mut() {
                message.clone_from(why);
            }
            row
        })
        .collect();
    out.push_str(&table(&header, &rows));
    more(
        &mut out,
        attention.len().saturating_sub(SHOWN),
        "needing a look",
    );
    out
}

fn cluster_row(c: &status::ClusterState) -> Vec<String> {
    let dash = || "-".to_owned();
    let report = c.report.as_ref();
    let newest = report.and_then(|r| r.history.first());
    vec![
        c.name.clone(),
        c.wave
            .as_ref()
            .map_or_else(|| "(not selected)".to_owned(), ToString::to_string),
        match &c.reachable {
            Reachability::Reachable => "yes".to_owned(),
            Reachability::Unreachable(_) => "no".to_owned(),
            Reachability::Unknown(_) => "unknown".to_owned(),
        },
        report
            .and_then(|r| r.current_version())
            .map_or_else(dash, str::to_owned),
        newest.and_then(|e| e.state.clone()).map_or_else(dash, |s| {
            format!(
                "{s} {}",
                newest.and_then(|e| e.version.as_deref()).unwrap_or("")
            )
        }),
        report
            .and_then(|r| r.desired_version.clone())
            .unwrap_or_else(dash),
        report
            .and_then(|r| r.condition("Upgradeable"))
            .map_or_else(dash, |u| {
                let mut s = u.status.clone().unwrap_or_default();
                if let Some(reason) = u
                    .reason
                    .as_deref()
                    .filter(|r| !u.is("True") && !r.is_empty())
                {
                    s.push_str(&format!(" ({reason})"));
                }
                s
            }),
        match &c.rollout {
            ClusterRollout::None => dash(),
            ClusterRollout::Pending => "pending".to_owned(),
            ClusterRollout::Progressing(_) => "progressing".to_owned(),
            ClusterRollout::Done => "done".to_owned(),
            ClusterRollout::Failed(_) => "failed".to_owned(),
        },
        match (&c.reachable, c.message()) {
            (Reachability::Unreachable(why) | Reachability::Unknown(why), _) => why.clone(),
            (_, Some(m)) => m,
            (_, None) if report.is_none() => "no ClusterVersion report yet".to_owned(),
            _ => String::new(),
        },
    ]
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The release resolved and verified at the hub: its version and the digest pull spec the
/// clusters are given.
struct Resolved {
    version: semver::Version,
    image: String,
    verified: Option<String>,
}

/// The release in `dir` (named `what` in errors), refused when it has errors: no cluster
/// would accept it.
pub(super) fn load_release(
    dir: &std::path::Path,
    what: &str,
) -> Result<crate::release::Release, CliError> {
    let release = crate::release::load(dir, &crate::release::LoadOptions::default())
        .map_err(|e| CliError::failed(format_args!("--release {what}: {e}")))?;
    if release.has_errors() {
        return Err(CliError::failed(format_args!(
            "--release {what} has errors, so no cluster would accept it: {}",
            release.errors_line()
        )));
    }
    Ok(release)
}

async fn resolve_release(release: &str, oci: &OciArgs) -> Result<Resolved, CliError> {
    let source = match crate::oci::Source::parse(release).map_err(CliError::Usage)? {
        Some(s @ crate::oci::Source::Registry(_)) => s,
        _ => {
            return Err(CliError::usage(format_args!(
                "--release {release}: a fleet rollout or preflight needs a release in a registry (oci://HOST[:PORT]/REPO@sha256:HEX) that every cluster can pull"
            )));
        }
    };
    let options = oci.fetch_options()?;
    let opened = crate::oci::open(&source, &options)
        .await
        .map_err(super::oci_error)?;
    let image = opened
        .image
        .clone()
        .ok_or_else(|| CliError::failed("the release has no registry pull spec"))?;
    let dir = opened.dir();
    let loaded = load_release(&dir, &format!("{release} ({})", opened.digest))?;
    let version = loaded.version().cloned().ok_or_else(|| {
        CliError::failed(format_args!(
            "--release {release} has no version (release-metadata): the clusters could not tell what they update to"
        ))
    })?;
    let verified = match &opened.signature {
        crate::oci::SignatureCheck::Verified { key } => Some(key.clone()),
        _ => None,
    };
    Ok(Resolved {
        version,
        image,
        verified,
    })
}

async fn roll_out(
    global: &GlobalArgs,
    client: &kube::Client,
    args: &RolloutArgs,
) -> Result<Exit, CliError> {
    let console = global.console;
    let p = &args.placement.placement;
    let resolved =
        resolve_checked(global, &args.release, &args.oci, args.version.as_deref()).await?;
    let view = fleet_preflight::read(client, &p.namespace, &p.name)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    let st = status::judge(&view.hub, jiff::Timestamp::now());
    if st.waves.is_empty() {
        return Err(CliError::failed(format_args!(
            "Placement {p} selects no cluster (no PlacementDecision names one): nothing to roll out to"
        )));
    }
    check_max_failures(&args.max_failures, &st)?;
    let answers = fleet_preflight::answers(&view.works, &resolved.image);
    let refusals = rollout::merge(
        rollout::refusals(&st, &resolved.version, &args.accept_risks)
            .into_iter()
            .chain(fleet_preflight::first_wave_refusals(
                &st,
                &answers,
                &resolved.image,
                &args.accept_risks,
            ))
            .collect(),
    );
    let plan = Rollout {
        namespace: p.namespace.clone(),
        placement: p.name.clone(),
        version: resolved.version.to_string(),
        image: resolved.image.clone(),
        clusters: st.waves.iter().flat_map(|w| w.clusters.clone()).collect(),
        max_failures: args.max_failures.clone(),
        progress_deadline: args.progress_deadline,
        min_success_time: args.min_success_time,
        forced: (args.force && !refusals.is_empty()).then(|| rollout::forced_record(&refusals)),
        accept_risks: args.accept_risks.clone(),
    };
    let refused = !refusals.is_empty() && !args.force;
    let was = st.target.as_ref().map(|t| t.state).unwrap_or_default();
    let mut set = plan.manifest();
    if was == State::Paused {
        fleet::control::keep(&mut set, State::Paused);
    }
    let written = if refused || args.dry_run {
        None
    } else {
        // The preflight set writes desiredUpdate through the same field manager: deleted
        // first (its works orphan), so that the two never write it in turn. The rollout's
        // apply then removes the preflight's mode.
        let name = Purpose::Preflight.name(&p.name);
        if view.set.is_some()
            && fleet_preflight::delete_set(client, &p.namespace, &name)
                .await
                .map_err(|e| {
                    CliError::failed(format_args!(
                        "deleting the preflight set {}/{name}: {e}",
                        p.namespace
                    ))
                })?
        {
            say!(
                console,
                note,
                "ManifestWorkReplicaSet {}/{name} deleted: the preflight is over (its answers were read)",
                p.namespace
            );
        }
        Some(
            fleet::write(client, &set)
                .await
                .map_err(|e| CliError::failed(format_args!("writing the rollout set: {e}")))?,
        )
    };
    report_rollout(args, &st, &plan, &refusals, written)?;
    match was {
        State::Paused if written.is_some() => say!(
            console,
            note,
            "the rollout stays paused: `cvo fleet resume --placement {p}` lets it go on"
        ),
        State::Aborted if written.is_some() => say!(
            console,
            note,
            "the aborted rollout is replaced by this one, which starts from its first wave not done"
        ),
        _ => {}
    }
    Ok(if refused {
        Exit::Refused
    } else {
        Exit::Success
    })
}

/// The release resolved and verified at the hub, checked against `--version`, with a note
/// (or a warning when no key verified it).
async fn resolve_checked(
    global: &GlobalArgs,
    release: &str,
    oci: &OciArgs,
    version: Option<&str>,
) -> Result<Resolved, CliError> {
    let console = global.console;
    let resolved = resolve_release(release, oci).await?;
    if let Some(v) = version
        && crate::version::parse(v).ok().as_ref() != Some(&resolved.version)
    {
        return Err(CliError::usage(format_args!(
            "--version {v}: the release {} is version {}",
            resolved.image, resolved.version
        )));
    }
    match &resolved.verified {
        Some(key) => say!(
            console,
            note,
            "release {} {} verified by {key}",
            resolved.image,
            resolved.version
        ),
        None => say!(
            console,
            warning,
            "release {} {} is not verified at the hub (no --verify-key): each cluster's operator verifies it with its own keys, if it has any",
            resolved.image,
            resolved.version
        ),
    }
    Ok(resolved)
}

async fn preflight(
    global: &GlobalArgs,
    client: &kube::Client,
    args: &PreflightArgs,
) -> Result<Exit, CliError> {
    let console = global.console;
    let p = &args.placement.placement;
    let resolved =
        resolve_checked(global, &args.release, &args.oci, args.version.as_deref()).await?;
    let view = status::read(client, &p.namespace, &p.name)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    let st = status::judge(&view, jiff::Timestamp::now());
    if st.waves.is_empty() {
        return Err(CliError::failed(format_args!(
            "Placement {p} selects no cluster (no PlacementDecision names one): no cluster to ask"
        )));
    }
    match fleet_preflight::rollout_in_the_way(&st) {
        Err(why) => {
            say!(console, error, "{why}");
            return Ok(Exit::Refused);
        }
        Ok(Some(rollout_set)) => {
            let name = Purpose::Rollout.name(&p.name);
            fleet_preflight::delete_set(client, &p.namespace, &name)
                .await
                .map_err(|e| {
                    CliError::failed(format_args!("deleting the rollout set {rollout_set}: {e}"))
                })?;
            let was = st.target.as_ref().map_or(State::Running, |t| t.state);
            say!(
                console,
                note,
                "ManifestWorkReplicaSet {rollout_set} deleted: its rollout was {} (its works orphan what they applied), and its works and the preflight's would write spec.desiredUpdate in turn",
                if was == State::Aborted {
                    "aborted"
                } else {
                    "done"
                }
            );
        }
        Ok(None) => {}
    }
    let request = fleet_preflight::Request {
        namespace: p.namespace.clone(),
        placement: p.name.clone(),
        version: resolved.version.to_string(),
        image: resolved.image.clone(),
        accept_risks: args.accept_risks.clone(),
    };
    let written = fleet::write(client, &request.manifest())
        .await
        .map_err(|e| CliError::failed(format_args!("writing the preflight set: {e}")))?;
    say!(
        console,
        note,
        "ManifestWorkReplicaSet {}/{} {written}: every cluster of Placement {p} asked for the preflight of {} ({})",
        p.namespace,
        Purpose::Preflight.name(&p.name),
        resolved.version,
        resolved.image
    );
    let mut last = String::new();
    loop {
        let view = fleet_preflight::read(client, &p.namespace, &p.name)
            .await
            .map_err(|e| CliError::failed(e.to_string()))?;
        let Some(pf) = fleet_preflight::judge(&view, jiff::Timestamp::now()) else {
            return Err(CliError::failed(format_args!(
                "the preflight set of Placement {p} is gone from the hub (deleted by a rollout?)"
            )));
        };
        let text = match args.placement.output {
            OutputFormat::Json => pretty(&serde_json::json!({
                "preflight": pf, "exitCode": pf.exit() as i32,
            })),
            OutputFormat::Text => preflight_text(&pf, args.all),
        };
        if text != last {
            print_stdout(&text)?;
            last = text;
        }
        // Until every cluster has answered: a first bad answer (exit code 1) does not end it.
        let waiting = pf.problems.is_empty()
            && pf
                .clusters
                .iter()
                .any(|c| c.verdict == fleet_preflight::Verdict::NotReported);
        if !args.watch || !waiting {
            return Ok(pf.exit());
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
    }
}

/// A preflight as a person reads it: its state, each wave's clusters counted by answer, then
/// the clusters that need a look (`all`: every cluster, those first).
pub fn preflight_text(pf: &FleetPreflight, all: bool) -> String {
    let state = preflight_state(pf);
    let mut out = format!(
        "preflight {}: {} ({}) on Placement {}: {state}\n",
        pf.preflight, pf.version, pf.image, pf.placement
    );
    if !pf.accept_risks.is_empty() {
        out.push_str(&format!("  accepting: {}\n", pf.accept_risks.join(",")));
    }
    out.push('\n');
    out.push_str(&preflight_waves(pf));
    out.push('\n');
    for problem in &pf.problems {
        out.push_str(&format!("cannot read: {problem}\n"));
    }
    let header = ["CLUSTER", "WAVE", "REACHABLE", "PREFLIGHT", "RISKS"];
    let attention = pf.attention();
    if all {
        // Those that need a look first, then the rest in wave order.
        let mut shown: Vec<&fleet_preflight::ClusterPreflight> = attention.clone();
        shown.extend(
            pf.clusters
                .iter()
                .filter(|c| !attention.iter().any(|a| a.name == c.name)),
        );
        let rows: Vec<Vec<String>> = shown.into_iter().map(preflight_row).collect();
        out.push_str(&table(&header, &rows));
        return out;
    }
    out.push_str(&needing_a_look(attention.len(), pf.clusters.len()));
    if attention.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = attention
        .iter()
        .take(SHOWN)
        .map(|c| preflight_row(c))
        .collect();
    out.push_str(&table(&header, &rows));
    more(
        &mut out,
        attention.len().saturating_sub(SHOWN),
        "needing a look",
    );
    out
}

/// The preflight's state in words, from its exit code.
fn preflight_state(pf: &FleetPreflight) -> String {
    use fleet_preflight::Verdict;
    let count = |v: Verdict| pf.clusters.iter().filter(|c| c.verdict == v).count();
    match pf.exit() {
        Exit::Success => "every cluster clean or its risks accepted".to_owned(),
        Exit::InProgress => format!(
            "{} of {} cluster(s) not reported yet",
            count(Verdict::NotReported),
            pf.clusters.len()
        ),
        _ => {
            let mut parts = Vec::new();
            let (risky, failed) = (count(Verdict::NotAccepted), count(Verdict::Failed));
            if risky > 0 {
                parts.push(format!("risks not accepted on {risky} cluster(s)"));
            }
            if failed > 0 {
                parts.push(format!("could not run on {failed} cluster(s)"));
            }
            if !pf.problems.is_empty() {
                parts.push("the hub could not be read".to_owned());
            }
            parts.join(", ")
        }
    }
}

/// Each wave's clusters counted by answer.
fn preflight_waves(pf: &FleetPreflight) -> String {
    let rows: Vec<Vec<String>> = pf
        .waves
        .iter()
        .map(|w| {
            let n = &w.counts;
            vec![
                w.wave.index.to_string(),
                w.wave.name.clone(),
                w.clusters.len().to_string(),
                n.clean.to_string(),
                n.accepted.to_string(),
                n.not_accepted.to_string(),
                n.failed.to_string(),
                n.not_reported.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "WAVE",
            "NAME",
            "CLUSTERS",
            "CLEAN",
            "ACCEPTED",
            "NOT ACCEPTED",
            "COULD NOT RUN",
            "NOT REPORTED",
        ],
        &rows,
    )
}

fn preflight_row(c: &fleet_preflight::ClusterPreflight) -> Vec<String> {
    let risks = match &c.answer {
        Answer::NotReported { reason } => reason.clone(),
        Answer::Failed { message } => message.clone(),
        Answer::Assessed { risks, .. } if risks.is_empty() => "-".to_owned(),
        Answer::Assessed { risks, .. } => risks
            .iter()
            .map(|r| {
                let mut s = format!(
                    "{} ({}{})",
                    r.name,
                    if r.accepted {
                        "accepted"
                    } else {
                        "not accepted"
                    },
                    if r.applies == "True" {
                        ""
                    } else {
                        ", cannot tell"
                    }
                );
                if let Some(m) = &r.message {
                    s.push_str(": ");
                    s.push_str(m);
                }
                s
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    vec![
        c.name.clone(),
        c.wave.to_string(),
        match &c.reachable {
            Reachability::Reachable => "yes".to_owned(),
            Reachability::Unreachable(_) => "no".to_owned(),
            Reachability::Unknown(_) => "unknown".to_owned(),
        },
        c.verdict.to_string(),
        risks,
    ]
}

/// OCM reads a number of failures larger than a wave as none: refused rather than silently
/// meaning the opposite.
fn check_max_failures(max: &MaxFailures, st: &FleetStatus) -> Result<(), CliError> {
    let MaxFailures::Count(n) = max else {
        return Ok(());
    };
    match st.waves.iter().find(|w| *n as usize > w.clusters.len()) {
        Some(w) => Err(CliError::usage(format_args!(
            "--max-failures {n} is more than wave {}'s {} cluster(s), which OCM reads as 0 failures allowed; write a percentage (e.g. 50%)",
            w.wave,
            w.clusters.len()
        ))),
        None => Ok(()),
    }
}

fn report_rollout(
    args: &RolloutArgs,
    st: &FleetStatus,
    plan: &Rollout,
    refusals: &[rollout::Refusal],
    written: Option<fleet::Written>,
) -> Result<(), CliError> {
    let name = format!(
        "{}/{}",
        plan.namespace,
        Purpose::Rollout.name(&plan.placement)
    );
    if args.placement.output == OutputFormat::Json {
        let waves: Vec<serde_json::Value> = st
            .waves
            .iter()
            .map(|w| serde_json::json!({"index": w.wave.index, "name": w.wave.name, "clusters": w.clusters}))
            .collect();
        return print_stdout(&pretty(&serde_json::json!({
            "manifestWorkReplicaSet": name,
            "version": plan.version,
            "image": plan.image,
            "waves": waves,
            "refused": refusals,
            "forced": plan.forced.is_some(),
            "acceptRisks": plan.accept_risks,
            "dryRun": args.dry_run,
            "result": written,
        })));
    }
    let mut out = format!(
        "rollout of {} ({}) to Placement {}/{}, {} waves:\n",
        plan.version,
        plan.image,
        plan.namespace,
        plan.placement,
        st.waves.len()
    );
    for w in &st.waves {
        out.push_str(&format!("  wave {}: {}\n", w.wave, w.clusters.join(", ")));
    }
    if !refusals.is_empty() {
        let verb = if args.force { "forced past" } else { "refused" };
        out.push_str(&format!("{verb} on {} cluster(s):\n", refusals.len()));
        for r in refusals {
            out.push_str(&format!("  {}: {}\n", r.cluster, r.reason));
        }
        if !args.force {
            out.push_str(
                "nothing written (--force writes it anyway, and records what it overrode)\n",
            );
        }
    }
    match written {
        Some(w) => out.push_str(&format!("ManifestWorkReplicaSet {name} {w}\n")),
        None if args.dry_run => out.push_str("dry run: nothing written\n"),
        None => {}
    }
    print_stdout(&out)
}

/// The line before the clusters that need a look (`needing` of `total`), or that none does.
fn needing_a_look(needing: usize, total: usize) -> String {
    if needing == 0 {
        format!("{total} cluster(s), none needs a look (`--all` lists every cluster)\n")
    } else {
        format!("{needing} of {total} cluster(s) need a look (`--all` lists every cluster):\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_failures_takes_a_count_or_a_percentage() {
        assert_eq!(parse_max_failures("2"), Ok(MaxFailures::Count(2)));
        assert_eq!(parse_max_failures("10%"), Ok(MaxFailures::Percent(10)));
        assert!(parse_max_failures("101%").is_err());
        assert!(parse_max_failures("x").unwrap_err().contains("percentage"));
    }

    #[test]
    fn a_thousand_clusters_fit_a_screen_and_those_that_need_a_look_are_named() {
        use crate::fleet::feedback::{Entry, Report};
        use crate::fleet::status::{ClusterState, Target, Wave};
        let report = |version: &str| Report {
            history: vec![Entry {
                version: Some(version.to_owned()),
                state: Some("Completed".to_owned()),
                ..Entry::default()
            }],
            ..Report::default()
        };
        let clusters: Vec<ClusterState> = (0..1000)
            .map(|i| ClusterState {
                name: format!("c{i:04}"),
                wave: Some(Wave {
                    index: u32::from(i >= 10),
                    name: if i < 10 { "canary" } else { "rest" }.to_owned(),
                }),
                reachable: if i == 500 {
                    Reachability::Unreachable("lease not renewed".to_owned())
                } else {
                    Reachability::Reachable
                },
                report: Some(report(if i < 10 { "1.1.0" } else { "1.0.0" })),
                rollout: match i {
                    0..=8 => ClusterRollout::Done,
                    9 => ClusterRollout::Failed("Failing=True ManifestFailed: boom".to_owned()),
                    _ => ClusterRollout::Pending,
                },
            })
            .collect();
        let mut st = FleetStatus {
            placement: "fleet/waves".to_owned(),
            target: Some(Target {
                rollout: "fleet/cvo-rollout-waves".to_owned(),
                version: "1.1.0".to_owned(),
                image: "r@sha256:ab".to_owned(),
                deadline: None,
                forced: None,
                clusters: Vec::new(),
                state: State::Running,
            }),
            waves: Vec::new(),
            clusters,
            held_by: Vec::new(),
            problems: Vec::new(),
        };
        st.waves = status::wave_states(&st.clusters);
        let text = status_text(&st, false);
        assert!(text.lines().count() <= 30, "{text}");
        assert!(text.contains("c0009") && text.contains("boom"), "{text}");
        assert!(
            text.contains("c0500") && text.contains("lease not renewed"),
            "{text}"
        );
        assert!(text.contains("2 of 1000 cluster(s) need a look"), "{text}");
        assert!(!text.contains("c0010 "), "{text}");
        // The waves' counts: the canary 9 done and 1 failed, the rest not started.
        let canary = text.lines().find(|l| l.starts_with("0 ")).expect("wave 0");
        let cells: Vec<&str> = canary.split_whitespace().collect();
        assert_eq!(
            cells[..7],
            ["0", "canary", "10", "9", "0", "1", "0"],
            "{canary}"
        );
        assert_eq!(
            status_text(&st, true).lines().count(),
            1000 + 7,
            "every cluster"
        );
    }

    #[test]
    fn a_preflight_shows_the_waves_and_the_clusters_that_need_a_look_first() {
        use crate::fleet::preflight::{
            ClusterPreflight, RiskState, Verdict, WaveCounts, WavePreflight,
        };
        use crate::fleet::status::Wave;
        let wave = |index: u32, name: &str| Wave {
            index,
            name: name.to_owned(),
        };
        let stuck = Answer::Assessed {
            risks: vec![RiskState {
                name: "MinorUpdateWhileDeletionInProgress".to_owned(),
                applies: "True".to_owned(),
                accepted: false,
                message: Some("ConfigMap fleet-stuck/held is still being deleted".to_owned()),
            }],
            recommended: Some("False".to_owned()),
        };
        let pf = FleetPreflight {
            placement: "fleet/waves".to_owned(),
            preflight: "fleet/cvo-preflight-waves".to_owned(),
            version: "1.6.0".to_owned(),
            image: "r@sha256:ab".to_owned(),
            accept_risks: Vec::new(),
            waves: vec![
                WavePreflight {
                    wave: wave(0, "canary"),
                    clusters: vec!["c1".to_owned()],
                    counts: WaveCounts {
                        not_accepted: 1,
                        ..WaveCounts::default()
                    },
                },
                WavePreflight {
                    wave: wave(1, "rest"),
                    clusters: vec!["c0".to_owned()],
                    counts: WaveCounts {
                        clean: 1,
                        ..WaveCounts::default()
                    },
                },
            ],
            clusters: vec![
                ClusterPreflight {
                    name: "c0".to_owned(),
                    wave: wave(1, "rest"),
                    reachable: Reachability::Reachable,
                    verdict: Verdict::Clean,
                    answer: Answer::Assessed {
                        risks: Vec::new(),
                        recommended: Some("True".to_owned()),
                    },
                },
                ClusterPreflight {
                    name: "c1".to_owned(),
                    wave: wave(0, "canary"),
                    reachable: Reachability::Reachable,
                    verdict: Verdict::NotAccepted,
                    answer: stuck,
                },
            ],
            problems: Vec::new(),
        };
        let text = preflight_text(&pf, false);
        assert!(
            text.starts_with("preflight fleet/cvo-preflight-waves: 1.6.0 (r@sha256:ab) on Placement fleet/waves: risks not accepted on 1 cluster(s)\n"),
            "{text}"
        );
        assert!(text.contains("1 of 2 cluster(s) need a look"), "{text}");
        assert!(
            text.contains("c1       0 (canary)  yes        risks not accepted  MinorUpdateWhileDeletionInProgress (not accepted): ConfigMap fleet-stuck/held is still being deleted"),
            "{text}"
        );
        assert!(!text.contains("c0 "), "{text}");
        // --all: every cluster, those that need a look first.
        let all = preflight_text(&pf, true);
        let c1 = all.find("\nc1 ").expect("c1");
        let c0 = all.find("\nc0 ").expect("c0");
        assert!(c1 < c0, "{all}");
    }

    #[test]
    fn table_pads_all_but_the_last_column() {
        let t = table(&["A", "BB"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A    BB\nxyz  1\n");
    }
}
