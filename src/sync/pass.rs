//! The pass of a sync, with its progress: the walk of the task graph the mode asks for (an
//! install's rounds included), a heartbeat that says what a stalled pass waits for and why
//! (the most frequent error of the last round, with its count), and the Progressing message
//! of ClusterVersion kept current while it runs (through the `gate`, which writes it).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;

use crate::apply::{
    Applier, ManifestResult, PassReport, PassTimeline, flattened_graph, run_level_graph, run_pass,
};
use crate::release::Release;
use crate::status::conditions::{self, ErrorTally};
use crate::status::update::name_list;

use super::gate::Gate;
use super::{Mode, SyncOptions};

/// Runs the pass `mode` asks for and returns its report and the timeline of each pass (1, or
/// an install's rounds); `on_result` sees each manifest's final result, and
/// [`Progress::done`] counts them.
///
/// While it runs: with [`SyncOptions::heartbeat`], a warning says every interval what the
/// pass waits for and the most frequent error of the last round; through [`Progress::gate`],
/// ClusterVersion's Progressing message is refreshed as often, with the same error (a failed
/// refresh is logged, never in the pass's way).
pub(super) async fn run<F>(
    applier: &Applier<'_>,
    options: &SyncOptions,
    mode: Mode,
    progress: Progress<'_>,
    on_result: F,
) -> (PassReport, Vec<PassTimeline>)
where
    F: Fn(&ManifestResult),
{
    let Progress {
        version,
        gate,
        done,
    } = progress;
    let release = applier.release();
    let errors = RoundErrors::default();
    let counted = |r: &ManifestResult| {
        done.fetch_add(1, Ordering::Relaxed);
        on_result(r)
    };
    let pass = walk(applier, options, mode, &errors, &counted);
    // While the pass runs: say what it waits for and why (heartbeat), and keep
    // ClusterVersion's Progressing message current.
    let tick = || {
        let waiting = applier.waiting();
        let done = done.load(Ordering::Relaxed);
        let why = errors.why();
        if options.heartbeat.is_some() {
            tracing::warn!(
                "still working towards {version}: {done} of {} done; waiting on {}{why}",
                release.manifests.len(),
                waiting_on(applier, &waiting),
            );
        }
        let message = format!(
            "{}{why}",
            conditions::waiting_message(version, done, release.manifests.len(), &waiting)
        );
        async move {
            if let Some(gate) = gate {
                gate.tick(message).await;
            }
        }
    };
    let every = options.heartbeat.unwrap_or(PROGRESS_EVERY);
    heartbeat(pass, every, tick).await
}

/// The progress of a pass, as ClusterVersion states it.
pub(super) struct Progress<'a> {
    /// The release as status names it.
    pub version: &'a str,
    /// Writes the progress (and the gate) to ClusterVersion; `None` in a dry run.
    pub gate: Option<&'a Gate>,
    /// Manifests done so far (shared with the `gate`, which writes it with Upgradeable).
    pub done: &'a AtomicUsize,
}

/// The errors of the round under way and of the last finished one, grouped
/// ([`conditions::ErrorTally`]): what the progress lines name.
#[derive(Default)]
struct RoundErrors {
    current: Mutex<ErrorTally>,
    last: Mutex<Option<ErrorTally>>,
}

impl RoundErrors {
    fn add(&self, release: &Release, r: &ManifestResult) {
        lock(&self.current).add(release, r);
    }

    /// The round under way is over: its errors are now the last round's.
    fn end_round(&self) {
        let finished = std::mem::take(&mut *lock(&self.current));
        *lock(&self.last) = Some(finished);
    }

    /// The most frequent error of the last finished round, else of the round under way.
    fn most_frequent(&self) -> Option<conditions::ErrorGroup> {
        match &*lock(&self.last) {
            Some(last) => last.most_frequent(),
            None => lock(&self.current).most_frequent(),
        }
    }

    /// What a progress line adds: `; last round: 5000 failed: …` once an install round
    /// finished, `; so far: 3 failed: …` before (an update's single walk), or nothing.
    fn why(&self) -> String {
        let finished = lock(&self.last).is_some();
        match (self.most_frequent(), finished) {
            (Some(g), true) => format!("; last round: {g}"),
            (Some(g), false) => format!("; so far: {g}"),
            (None, _) => String::new(),
        }
    }
}

/// The guard of `m`, also after a panic elsewhere (the tallies stay usable).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The walk of the task graph `mode` asks for.
async fn walk<F>(
    applier: &Applier<'_>,
    options: &SyncOptions,
    mode: Mode,
    errors: &RoundErrors,
    on_result: &F,
) -> (PassReport, Vec<PassTimeline>)
where
    F: Fn(&ManifestResult),
{
    let release = applier.release();
    let on_result = &|r: &ManifestResult| {
        errors.add(release, r);
        on_result(r)
    };
    match mode {
        Mode::Initializing => install(applier, options, errors, on_result).await,
        Mode::Updating => {
            let graph = std::sync::Arc::new(run_level_graph(release));
            one(run_pass(applier, &graph, options.parallelism, None, on_result).await)
        }
        // One round of the install's walk: a failure stops nothing after it, not even in
        // its node (adjacent run levels share one there).
        Mode::Reconciling => {
            let graph = std::sync::Arc::new(flattened_graph(release));
            one(run_pass(applier, &graph, options.parallelism, Some(None), on_result).await)
        }
    }
}

/// A sync of one pass: its report and its timeline.
fn one((report, timeline): (PassReport, PassTimeline)) -> (PassReport, Vec<PassTimeline>) {
    (report, vec![timeline])
}

/// What the pass waits for, for the heartbeat: the health checks' findings, else the
/// manifests in flight, else the next install round.
fn waiting_on(applier: &Applier<'_>, waiting: &[crate::health::Finding]) -> String {
    if !waiting.is_empty() {
        return waiting
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
    }
    let release: &Release = applier.release();
    let in_flight: Vec<String> = applier
        .in_flight()
        .iter()
        .map(|&i| release.manifests[i].id.to_string())
        .collect();
    if in_flight.is_empty() {
        "the next install round".to_owned()
    } else {
        name_list(&in_flight)
    }
}

/// How often a pass refreshes ClusterVersion's Progressing message when no heartbeat
/// interval is set.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Awaits `work`, calling `tick` every `every` while it runs (a run stalled on the server still
/// says what it is waiting for). The futures `tick` returns run beside `work`, never in its way;
/// those still running when `work` ends are dropped.
async fn heartbeat<T, Fut>(
    work: impl std::future::Future<Output = T>,
    every: Duration,
    tick: impl Fn() -> Fut,
) -> T
where
    Fut: std::future::Future<Output = ()>,
{
    tokio::pin!(work);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut side = futures::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = ticker.tick() => side.push(tick()),
            Some(()) = side.next(), if !side.is_empty() => {}
        }
    }
}

/// An install: the flattened graph, then further rounds over what failed or was not reached
/// until nothing is left or the install timeout passes. Each round starts from a fresh view
/// of the cluster.
async fn install<F>(
    applier: &Applier<'_>,
    options: &SyncOptions,
    errors: &RoundErrors,
    on_result: &F,
) -> (PassReport, Vec<PassTimeline>)
where
    F: Fn(&crate::apply::ManifestResult),
{
    let deadline = tokio::time::Instant::now() + options.install_timeout;
    let release = applier.release();
    let graph = std::sync::Arc::new(flattened_graph(release));
    // Every result of a round counts for its errors; only final ones are reported.
    let report_final = |r: &crate::apply::ManifestResult| {
        if r.is_final() {
            on_result(r)
        } else {
            errors.add(release, r);
        }
    };
    let (mut report, first) = run_pass(
        applier,
        &graph,
        options.parallelism,
        Some(None),
        &report_final,
    )
    .await;
    let mut timelines = vec![first];
    // 1 s between rounds, doubling up to 30 s.
    let mut delays = crate::retry::Backoff::INSTALL_ROUND.delays();
    let mut delay = delays.next_wait();
    loop {
        errors.end_round();
        let left = report.results.iter().filter(|r| !r.is_final()).count();
        if left == 0 || tokio::time::Instant::now() + delay >= deadline {
            break;
        }
        let why = errors
            .most_frequent()
            .map(|g| format!("; {g}"))
            .unwrap_or_default();
        let rounds = timelines.len();
        tracing::info!(
            round = rounds,
            left,
            retry_in = ?delay,
            "install: {left} manifests not done after round {rounds}; retrying in {delay:?}{why}"
        );
        tokio::time::sleep(delay).await;
        delay = delays.next_wait();
        applier.new_pass();
        let (next, timeline) = run_pass(
            applier,
            &graph,
            options.parallelism,
            Some(Some(&report)),
            &report_final,
        )
        .await;
        report = next;
        timelines.push(timeline);
    }
    for r in report.results.iter().filter(|r| !r.is_final()) {
        on_result(r);
    }
    (report, timelines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn progress_lines_name_the_errors_so_far_then_the_last_rounds() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..3 {
            std::fs::write(
                dir.path().join(format!("0000_10_c{i}_cm.yaml")),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns\n"
                ),
            )
            .unwrap();
        }
        let release = crate::release::load(dir.path(), &Default::default()).unwrap();
        let failed = |i: usize| {
            let mut r = ManifestResult::new(i, crate::apply::Action::Failed);
            r.error = Some(format!("configmaps \"cm-{i}\" is forbidden"));
            r
        };
        let errors = RoundErrors::default();
        assert_eq!(errors.why(), "");
        errors.add(&release, &failed(0));
        errors.add(&release, &failed(1));
        assert_eq!(
            errors.why(),
            "; so far: 2 failed: configmaps \"cm-0\" is forbidden"
        );
        errors.add(&release, &failed(2));
        errors.end_round();
        // The next round's first error does not hide the last round's count.
        errors.add(&release, &failed(0));
        assert_eq!(
            errors.why(),
            "; last round: 3 failed: configmaps \"cm-0\" is forbidden"
        );
        errors.end_round();
        assert_eq!(
            errors.why(),
            "; last round: 1 failed: configmaps \"cm-0\" is forbidden"
        );
        errors.end_round();
        assert_eq!(errors.why(), "");
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_pass_says_what_it_waits_for_every_interval() {
        let said = AtomicUsize::new(0);
        let work = tokio::time::sleep(Duration::from_secs(35));
        heartbeat(work, Duration::from_secs(10), || {
            said.fetch_add(1, Ordering::Relaxed);
            std::future::ready(())
        })
        .await;
        assert_eq!(said.load(Ordering::Relaxed), 3);
        let quick = async { 7 };
        assert_eq!(
            heartbeat(
                quick,
                Duration::from_secs(10),
                || -> std::future::Ready<()> { panic!("too early") }
            )
            .await,
            7
        );
        // What a tick starts runs beside the work and does not hold it up.
        let slow_ticks = AtomicUsize::new(0);
        let work = tokio::time::sleep(Duration::from_secs(25));
        let started = tokio::time::Instant::now();
        heartbeat(work, Duration::from_secs(10), || {
            slow_ticks.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(100))
        })
        .await;
        assert_eq!(started.elapsed(), Duration::from_secs(25));
        assert_eq!(slow_ticks.load(Ordering::Relaxed), 2);
    }
}
