//! `cvo apply`: make a cluster match a release.

use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;

use super::{CliError, Console, GlobalArgs, OutputFormat, ReleaseArgs};
use crate::apply::{Options, Strategy};
use crate::exit::Exit;
use crate::health::WaitMode;
use crate::release::Release;
use crate::release::capability::Gates;
use crate::sync::report::{JsonReport, text_report};
use crate::sync::{SyncOptions, sync};
use crate::timings::Timings;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub pass: PassArgs,
    /// Apply even when a precondition refuses the update.
    #[arg(long)]
    pub force: bool,
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub timings: TimingsArgs,
}

/// `--timings[=FILE]` of `apply` and `plan`.
#[derive(Debug, Args)]
pub struct TimingsArgs {
    /// Write where the time went as one self-contained HTML page (FILE, default
    /// cvo-timings.html): every task on a time line by run level and component, the critical
    /// path, the ordered limit, the slowest tasks (docs/performance.md). With -o json, the same
    /// figures are the report's `timings`.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "cvo-timings.html")]
    pub timings: Option<std::path::PathBuf>,
}

/// Where to apply: a kubeconfig cluster (global flags) or a fresh in-memory server.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Run against a fresh embedded in-memory API server instead of a cluster. The server is
    /// first seeded with the objects the release's delete manifests name (as a previous
    /// release would have left them, finalizers included, and nothing releases them), so the
    /// deletion paths — in progress, stuck — are visible.
    #[cfg(feature = "in-memory")]
    #[arg(long)]
    pub in_memory: bool,
    /// Namespace of the deletion record (ConfigMap cvo-deletion-record): which deletions cvo
    /// completed, under which release. Only used when the release has delete manifests.
    #[arg(long, value_name = "NS", default_value = "cluster-version")]
    pub state_namespace: String,
    /// The release directory the cluster is at, when this is an update from it: an object it
    /// applies that the new release gates behind a capability the cluster does not enable
    /// enables that capability implicitly, as the CVO does on update (docs/capabilities.md).
    /// Read with the same --profile, --feature-set and --exclude. Without it, the release
    /// ClusterVersion's history names by digest is read (verified with --verify-key), else
    /// the cluster is asked: objects cvo applied that the release moves into a capability.
    #[arg(long, value_name = "DIR")]
    pub updating_from: Option<std::path::PathBuf>,
    /// Preflight risks accepted for this update (comma-separated names, docs/preflight.md):
    /// an update proceeds only when every risk that applies is accepted (exit code 4
    /// otherwise). `apply` records them in ClusterVersion spec.desiredUpdate.acceptRisks.
    #[arg(long, value_name = "RISK,...", value_delimiter = ',', value_parser = super::values::parse_risk_name)]
    pub accept_risks: Vec<String>,
}

/// The knobs of a pass, shared by `cvo apply` and `cvo operator` (each full pass).
#[derive(Debug, Args)]
pub struct PassArgs {
    /// How delete manifests wait for finalizers (per manifest: annotation
    /// cvo.io/deletion-strategy).
    #[arg(long, value_enum, default_value_t = Strategy::NonBlocking)]
    pub deletion_strategy: Strategy,
    /// How long a synchronous deletion may take (e.g. 10m, 30s).
    #[arg(long, value_parser = parse_duration, default_value = "10m", allow_hyphen_values = true)]
    pub deletion_timeout: Duration,
    /// A deletion pending longer than this (from its deletionTimestamp) is stuck.
    #[arg(long, value_parser = parse_duration, default_value = "10m", allow_hyphen_values = true)]
    pub stuck_after: Duration,
    /// An install (no completed ClusterVersion history) retries failed manifests in further
    /// rounds until everything is applied or this much time has passed.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub install_timeout: Duration,
    /// Nodes of the task graph applied at once (1 to 256).
    #[arg(long, default_value_t = crate::graph::DEFAULT_PARALLELISM, value_parser = super::values::parse_parallelism, allow_hyphen_values = true)]
    pub parallelism: usize,
    /// What a node of the graph waits for after its writes: `failures` (the CVO's semantics:
    /// fail on unhealthy objects, wait for ClusterOperators, Jobs, CRDs and APIServices),
    /// `ready` (also wait for workload rollouts and Ready conditions) or `none`.
    #[arg(long, value_enum, default_value_t = WaitMode::Failures)]
    pub wait: WaitMode,
    /// How long one node may wait for its objects to become healthy.
    #[arg(long, value_parser = parse_duration, default_value = "10m", allow_hyphen_values = true)]
    pub health_timeout: Duration,
    /// How long ClusterOperators may stay degraded or updating (from the start of the update)
    /// before Failing turns True; other failures are Failing at once.
    #[arg(long, value_parser = parse_duration, default_value = "30m", allow_hyphen_values = true)]
    pub failing_after: Duration,
}

impl PassArgs {
    /// The sync options these flags set; the rest are the defaults.
    pub fn sync_options(&self) -> SyncOptions {
        SyncOptions {
            apply: Options {
                strategy: self.deletion_strategy,
                deletion_timeout: self.deletion_timeout,
                health: crate::health::Options {
                    wait: self.wait,
                    timeout: self.health_timeout,
                    ..Default::default()
                },
                ..Options::default()
            },
            parallelism: self.parallelism,
            stuck_after: self.stuck_after,
            install_timeout: self.install_timeout,
            failing_after: self.failing_after,
            ..SyncOptions::default()
        }
    }
}

/// The largest duration a flag accepts (`100y`, humantime's years of 365.25 days): far
/// beyond any wait that is meant, and far below where timestamps and timers overflow.
const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

/// Parses a duration flag with `humantime`: `500ms`, `30s`, `10m`, `1h`, `2h 30m`, `1d`, or
/// plain seconds (`45`). Errors are plain sentences for clap to print (exit code 2).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    use humantime::DurationError as E;
    let s = s.trim();
    let hint = "write a number and a unit, such as 500ms, 30s, 10m or 1h";
    let parsed = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        humantime::parse_duration(&format!("{s}s"))
    } else {
        humantime::parse_duration(s)
    };
    match parsed {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        Ok(_) | Err(E::NumberOverflow) => Err("too long: at most 100 years (100y)".to_owned()),
        Err(E::Empty) => Err(format!("empty duration: {hint}")),
        Err(_) if s.starts_with('-') => Err(format!("cannot be negative: {hint}")),
        Err(E::UnknownUnit { unit, .. }) if !unit.is_empty() => {
            Err(format!("unknown unit {unit:?}: use ms, s, m, h or d"))
        }
        Err(_) => Err(format!("not a duration: {hint}")),
    }
}

pub fn run(global: &GlobalArgs, args: &ApplyArgs) -> Result<Exit, CliError> {
    let options = SyncOptions {
        force: args.force,
        // Without a progress bar, say what a stalled run waits for.
        heartbeat: (!progress_bar(args.output, global.console)).then_some(Duration::from_secs(10)),
        ..args.pass.sync_options()
    };
    let report = Report {
        output: args.output,
        timings: args.timings.timings.as_deref(),
    };
    execute(global, &args.release, &args.target, options, report)
}

/// What `apply` and `plan` print, and where the `--timings` page goes.
pub(super) struct Report<'a> {
    pub output: OutputFormat,
    pub timings: Option<&'a std::path::Path>,
}

/// Shared by `apply` and `plan`: load, connect, sync, print, exit code.
pub(super) fn execute(
    global: &GlobalArgs,
    release_args: &ReleaseArgs,
    target: &TargetArgs,
    mut options: SyncOptions,
    Report { output, timings }: Report<'_>,
) -> Result<Exit, CliError> {
    let (started, cpu) = (std::time::Instant::now(), crate::timings::process_cpu());
    // The feature gates are the cluster's (read by the sync) unless a flag gives them.
    release_args.defer_feature_gates();
    options.feature_gates = release_args.gate_source()?;
    let console = global.console;
    let release = load_usable(release_args, console)?;
    if let Some(source) = &options.feature_gates {
        // A FeatureGate file that does not say for this release: refused before connecting.
        source.enabled(release.version()).map_err(CliError::Usage)?;
    }
    if let Some(dir) = &target.updating_from {
        let load_options = release_args.options_in(release_args.profile.as_deref());
        // Read as the release itself is: in the CVO's default profile when it uses profiles.
        let (from, _) = crate::release::load_selected(dir, &load_options)
            .map_err(|e| CliError::usage(format_args!("--updating-from: {e}")))?;
        // A file it cannot read would hide objects the cluster has: refused, as the release is.
        if from.has_errors() {
            return Err(CliError::usage(format_args!(
                "--updating-from: {}",
                from.errors_line()
            )));
        }
        options.updating_from = Some(std::sync::Arc::new(Gates::of(&from)));
    } else {
        // Else the release ClusterVersion's history names, when it is one by digest.
        let read_as = crate::operator::pull::Config::new(
            release_args.fetch_options()?,
            release_args.options_in(release_args.profile.as_deref()),
        );
        options.previous_release = Some(std::sync::Arc::new(
            crate::operator::previous::Previous::new(read_as, None),
        ));
    }
    let runtime = super::runtime()?;
    options.accept_risks = target.accept_risks.clone();
    options.record = Some(crate::status::record::Location {
        namespace: target.state_namespace.clone(),
    });
    runtime.block_on(async {
        let client = connect(global, target, &release).await?;
        let cluster = crate::cluster::Cluster::new(client);
        // On the embedded server nothing runs: play the release's operators (their
        // ClusterOperators report the release), stopped when the sync ends.
        #[cfg(feature = "in-memory")]
        let operators = target.in_memory.then(|| {
            tokio::spawn(crate::dev::operators::play(
                cluster.clone(),
                release.clone(),
            ))
        });
        #[cfg(feature = "in-memory")]
        if target.in_memory {
            super::seed::previous_state(&cluster, &release, options.parallelism).await;
        }
        let progress = Progress::new(&release, output, console);
        if let Some(bar) = progress.bar.clone() {
            // The bar says what the pass waits for.
            options.apply.health.observer = Some(crate::health::Observer(std::sync::Arc::new(
                move |waiting| match crate::health::waiting_summary(waiting) {
                    s if s.is_empty() => bar.set_message(""),
                    s => bar.set_message(format!("waiting on {s}")),
                },
            )));
        }
        let outcome = sync(&cluster, &release, &options, |r| {
            progress.result(&release, r)
        })
        .await;
        progress.finish();
        let mut outcome = outcome.map_err(CliError::failed)?;
        if !options.apply.dry_run && !options.accept_risks.is_empty() && outcome.report.is_some() {
            record_accepted(&cluster, &options, &mut outcome).await;
        }
        if !options.apply.dry_run {
            retrieve_updates(&cluster, &release, &options, &mut outcome, console).await;
        }
        #[cfg(feature = "in-memory")]
        if let Some(operators) = operators {
            operators.abort();
        }
        let timed = timings.map(|file| {
            let mut t = Timings::of(&release, &outcome.passes, options.parallelism);
            t.seconds = started.elapsed().as_secs_f64();
            t.cpu_seconds = crate::timings::process_cpu()
                .zip(cpu)
                .map(|(now, before)| now.saturating_sub(before).as_secs_f64());
            (file, t)
        });
        if let Some((file, t)) = &timed {
            write_page(file, t, console)?;
        }
        match output {
            OutputFormat::Json => {
                let mut report = JsonReport::of(&release, &outcome);
                let (source, digest) = release_args.origin_json();
                report.head["release"]["source"] = serde_json::json!(source);
                report.head["release"]["digest"] = serde_json::json!(digest);
                /// The report with the timings last, each serialized as it is written.
                #[derive(serde::Serialize)]
                struct WithTimings<'a> {
                    #[serde(flatten)]
                    report: JsonReport<'a>,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    timings: Option<&'a Timings>,
                }
                super::print_json_stdout(&WithTimings {
                    report,
                    timings: timed.as_ref().map(|(_, t)| t),
                })?;
            }
            OutputFormat::Text => {
                super::print_stdout(&text_report(&release, &outcome, options.apply.dry_run))?
            }
        }
        if let Some(Err(e)) = &outcome.cluster_version {
            say!(console, error, "{e}");
        }
        Ok(outcome.exit())
    })
}

/// Records `--accept-risks` in ClusterVersion `spec.desiredUpdate.acceptRisks` once the
/// update went ahead; what fails is a warning of the report.
async fn record_accepted(
    cluster: &crate::cluster::Cluster,
    options: &SyncOptions,
    outcome: &mut crate::sync::SyncOutcome,
) {
    use crate::status::clusterversion::{self, WriteOutcome};
    let names = &options.accept_risks;
    match clusterversion::record_accepted_risks(cluster, &options.apply.retry, names).await {
        Ok(WriteOutcome::Written | WriteOutcome::Absent) => {}
        Ok(WriteOutcome::Unchanged) => {}
        Err(e) => outcome.warnings.push(format!(
            "the accepted risks ({}) were not recorded in ClusterVersion spec.desiredUpdate.acceptRisks: {e}",
            names.join(",")
        )),
    }
}

/// Writes the `--timings` page to `file` and says where.
fn write_page(file: &std::path::Path, timings: &Timings, console: Console) -> Result<(), CliError> {
    std::fs::write(file, crate::timings::page(timings)).map_err(|e| {
        CliError::failed(format_args!(
            "--timings: cannot write {}: {e}",
            crate::diagnostic::escaped_path(file)
        ))
    })?;
    say!(
        console,
        note,
        "timings written to {}",
        crate::diagnostic::escaped_path(file)
    );
    Ok(())
}

/// Where the sync wrote ClusterVersion status: asks the update service it names once (bounded
/// by [`crate::updates::TIMEOUT`]), records `availableUpdates` and `RetrievedUpdates` there,
/// and adds the condition to the report. What fails is a warning on `console`.
async fn retrieve_updates(
    cluster: &crate::cluster::Cluster,
    release: &Release,
    options: &SyncOptions,
    outcome: &mut crate::sync::SyncOutcome,
    console: Console,
) {
    use crate::status::clusterversion::{self, WriteOutcome};
    if !matches!(
        outcome.cluster_version,
        Some(Ok(WriteOutcome::Written | WriteOutcome::Unchanged))
    ) {
        return;
    }
    let retry = &options.apply.retry;
    let spec = match clusterversion::read(cluster, retry).await {
        Ok(Some(cv)) => cv.data.get("spec").cloned().unwrap_or_default(),
        Ok(None) => return,
        Err(e) => {
            say!(console, warning, "available updates not retrieved: {e}");
            return;
        }
    };
    let source = crate::updates::Source::of_spec(&spec);
    let version = release.version().map(ToString::to_string);
    let retrieval = crate::updates::retrieve(&source, version.as_deref()).await;
    if let Err(e) = clusterversion::write_available_updates(
        cluster,
        retry,
        (&source.upstream, &source.channel),
        retrieval.status_lists(),
        &retrieval.condition,
        crate::preflight::status::carry_over,
    )
    .await
    {
        say!(console, warning, "available updates not recorded: {e}");
    }
    outcome.conditions.push(retrieval.condition);
}

/// Loads the release and writes its diagnostics on `console`; a release with errors is a
/// usage error (nothing is applied).
pub(super) fn load_usable(
    release_args: &ReleaseArgs,
    console: Console,
) -> Result<Release, CliError> {
    let release = release_args.load(console)?;
    for d in &release.diagnostics {
        console.diagnostic(d);
    }
    if release.has_errors() {
        return Err(CliError::usage(
            "the release has errors; fix them first (see `cvo validate`)",
        ));
    }
    if let Some(warning) = mostly_left_out(&release) {
        say!(console, warning, "{warning}");
    }
    Ok(release)
}

/// When the profile leaves out more than half of the release's manifests: a release whose
/// manifests mostly name no profile was probably not meant for profiles at all (the CVO
/// applies a manifest only in the profiles it names).
fn mostly_left_out(release: &Release) -> Option<String> {
    use crate::release::ExcludedBy;
    let by_profile: Vec<&crate::release::Excluded> = release
        .excluded
        .iter()
        .filter(|e| e.by == ExcludedBy::Profile)
        .collect();
    let total = release.manifests.len() + release.excluded.len();
    if by_profile.len() * 2 <= total {
        return None;
    }
    Some(format!(
        "{} of {total} manifests are left out: {}; the CVO applies a manifest only in the profiles it names with `include.release.openshift.io/PROFILE: \"true\"` (see `cvo validate`, rule manifest-in-no-profile)",
        by_profile.len(),
        by_profile[0].reason
    ))
}

#[cfg_attr(not(feature = "in-memory"), allow(unused_variables))]
async fn connect(
    global: &GlobalArgs,
    target: &TargetArgs,
    release: &Release,
) -> Result<kube::Client, CliError> {
    #[cfg(feature = "in-memory")]
    if target.in_memory {
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        // Finalizers named in the release stay held (the fake operator releases none), so a
        // deletion of a seeded object shows the in-progress/stuck path.
        for m in &release.manifests {
            for f in m
                .object
                .pointer("/metadata/finalizers")
                .and_then(|f| f.as_array())
                .into_iter()
                .flatten()
            {
                if let Some(f) = f.as_str() {
                    server.faults().hold_finalizer(f);
                }
            }
        }
        return Ok(server.client());
    }
    super::kube_client(global).await
}

/// Whether the progress is a bar: for a person at a terminal who reads text (stderr a
/// terminal, text output, text logs).
fn progress_bar(output: OutputFormat, console: Console) -> bool {
    std::io::stderr().is_terminal() && output == OutputFormat::Text && !console.is_json()
}

/// Progress: a bar on a terminal (text logs, text output), else one line per manifest on the
/// console.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    console: Console,
}

impl Progress {
    fn new(release: &Release, output: OutputFormat, console: Console) -> Self {
        let bar = progress_bar(output, console).then(|| {
            let bar = indicatif::ProgressBar::new(release.manifests.len() as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos} of {len} done {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Progress { bar, console }
    }

    fn result(&self, release: &Release, r: &crate::apply::ManifestResult) {
        match &self.bar {
            Some(bar) => {
                bar.inc(1);
                let m = &release.manifests[r.index];
                if let Some(o) = &m.order {
                    bar.set_message(format!("(runlevel {:02})", o.runlevel));
                }
            }
            None => self.console.result(release, r),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for (text, want) in [
            ("10m", Duration::from_secs(600)),
            ("30s", Duration::from_secs(30)),
            ("45", Duration::from_secs(45)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            (" 250ms ", Duration::from_millis(250)),
            ("500ms", Duration::from_millis(500)),
            ("1h", Duration::from_secs(3600)),
            ("1h 30m", Duration::from_secs(5400)),
            ("2d", Duration::from_secs(2 * 86400)),
            ("100y", MAX_DURATION),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_durations_are_plain_errors() {
        for (text, expected) in [
            ("99999999999999999999h", "too long"),
            ("99999999999999999999", "too long"),
            ("200y", "too long"),
            ("101y", "too long"),
            ("5q", "unknown unit \"q\""),
            ("10 parsecs", "unknown unit \"parsecs\""),
            ("-5s", "cannot be negative"),
            ("-1", "cannot be negative"),
            ("ten", "not a duration"),
            ("1.5.5s", "not a duration"),
            ("", "empty duration"),
        ] {
            let err = parse_duration(text).expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
