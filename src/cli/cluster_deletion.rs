//! `cvo cluster-deletion signal|status`: the cluster-deletion signal (docs/cluster-deletion.md).
//!
//! `signal` exit codes: 0 `Alive` is gone (teardown may start), 1 failed (not served, denied,
//! a request failed), 2 usage, 3 timed out (`Alive` still held; the cluster is left as it is).
//! `status` exits 0 when it could read the state, 1 otherwise.

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;

use super::apply::parse_duration;
use super::{CliError, GlobalArgs, OutputFormat, pretty, print_stdout};
use crate::cluster::retry::RetryPolicy;
use crate::exit::Exit;
use crate::lifecycle::alive::{self, DEFAULT_NAMESPACE, Signalled, Status};

#[derive(Debug, Args)]
pub struct ClusterDeletionArgs {
    #[command(subcommand)]
    pub command: ClusterDeletionCommand,
}

#[derive(Debug, Subcommand)]
pub enum ClusterDeletionCommand {
    /// Confirm and delete the Alive object, then wait (a watch) until every operator released
    /// its finalizer.
    Signal(SignalArgs),
    /// Show the Alive object, its finalizers and who set them, how long its deletion has been
    /// running, and the objects teardown must keep.
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub struct Target {
    /// Namespace of the Alive object `cluster`.
    #[arg(long, short = 'n', value_name = "NS", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Output format (stdout).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SignalArgs {
    #[command(flatten)]
    pub target: Target,
    /// How long to wait for the finalizers to be released.
    #[arg(long, value_parser = parse_duration, default_value = "10m", allow_hyphen_values = true)]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: Target,
}

pub fn run(global: &GlobalArgs, args: &ClusterDeletionArgs) -> Result<Exit, CliError> {
    super::runtime()?.block_on(async {
        let client = super::kube_client(global).await?;
        let retry = RetryPolicy::default();
        match &args.command {
            ClusterDeletionCommand::Status(a) => {
                let st = alive::status(&client, &a.target.namespace, &retry)
                    .await
                    .map_err(CliError::failed)?;
                let text = match a.target.output {
                    OutputFormat::Json => pretty(&json!(st)),
                    OutputFormat::Text => status_text(&st),
                };
                print_stdout(&text)?;
                Ok(Exit::Success)
            }
            ClusterDeletionCommand::Signal(a) => {
                let ns = &a.target.namespace;
                let text_out = a.target.output == OutputFormat::Text;
                let console = global.console;
                let on_deleting = |holders: &[alive::Holder]| {
                    if !text_out {
                        return;
                    }
                    let (name, count) = (alive::NAME, holders.len());
                    if holders.is_empty() {
                        say!(console, line { namespace = %ns, name }, "Alive {ns}/{name} deleted; no finalizer holds it");
                    } else {
                        say!(
                            console,
                            line { namespace = %ns, name, count },
                            "Alive {ns}/{name} is being deleted; waiting for {count} finalizer(s):"
                        );
                        for h in holders {
                            say!(console, line { finalizer = %h.finalizer }, "  {}", h.line());
                        }
                    }
                };
                let (result, st) = alive::signal(&client, ns, a.timeout, &retry, on_deleting)
                    .await
                    .map_err(CliError::failed)?;
                let text = match a.target.output {
                    OutputFormat::Json => pretty(&json!({"result": result, "status": st})),
                    OutputFormat::Text => signal_text(&result, &st),
                };
                print_stdout(&text)?;
                Ok(match result {
                    Signalled::Gone { .. } | Signalled::AlreadyGone => Exit::Success,
                    Signalled::TimedOut { .. } => Exit::InProgress,
                })
            }
        }
    })
}

fn preserved_text(st: &Status) -> String {
    let mut out = String::new();
    if st.preserved.is_empty() {
        out.push_str(&format!(
            "kept by teardown ({}: \"true\"): none\n",
            alive::PRESERVE_ANNOTATION
        ));
    } else {
        out.push_str(&format!(
            "kept by teardown ({}: \"true\"):\n",
            alive::PRESERVE_ANNOTATION
        ));
        for f in &st.preserved {
            out.push_str(&format!("  keep {}\n", f.describe()));
        }
    }
    for u in &st.preserved_unlisted {
        out.push_str(&format!(
            "warning: could not look for preserved objects of {u}: the list above may be incomplete\n"
        ));
    }
    out
}

fn status_text(st: &Status) -> String {
    let who = format!("Alive {}/{}", st.namespace, st.name);
    let mut out = if !st.exists {
        format!("{who}: absent (deletion signalled and finished, or never created)\n")
    } else {
        match (&st.deletion_started, st.deleting_for_seconds) {
            (Some(at), Some(secs)) => format!(
                "{who}: deletion running since {at} ({})\n",
                humantime::format_duration(Duration::from_secs(secs))
            ),
            _ => format!(
                "{who}: alive (no deletion signalled){}\n",
                if st.confirmed {
                    "; deletion confirmed by annotation"
                } else {
                    ""
                }
            ),
        }
    };
    if st.exists {
        if st.finalizers.is_empty() {
            out.push_str("finalizers: none\n");
        } else {
            out.push_str("finalizers:\n");
            for h in &st.finalizers {
                out.push_str(&format!("  {}\n", h.line()));
            }
        }
    }
    out.push_str(&preserved_text(st));
    out
}

fn signal_text(result: &Signalled, st: &Status) -> String {
    let who = format!("Alive {}/{}", st.namespace, st.name);
    let mut out = match result {
        Signalled::Gone { waited_seconds } => format!(
            "{who} is gone after {:.1}s: every operator released its finalizer; teardown may start\n",
            waited_seconds
        ),
        Signalled::AlreadyGone => format!(
            "{who} does not exist: nothing holds the deletion (signalled before, or never created); teardown may start\n"
        ),
        Signalled::TimedOut { timeout_seconds } => {
            let mut s = format!(
                "timed out after {}: {who} is still held by {} finalizer(s):\n",
                humantime::format_duration(Duration::from_secs_f64(*timeout_seconds)),
                st.finalizers.len()
            );
            for h in &st.finalizers {
                s.push_str(&format!("  {}\n", h.line()));
            }
            s.push_str(
                "the cluster is left as it is (the deletion stays under way): check those operators, wait longer (run signal again), or decide to tear down anyway\n",
            );
            s
        }
    };
    out.push_str(&preserved_text(st));
    out
}
