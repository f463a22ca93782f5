//! The `cvo` command line: clap definitions and thin glue to the library.
//!
//! Every subcommand lives in its own file with its argument struct and a `run` function that
//! returns an [`ExitCode`]. Exit codes are documented in the README:
//! 0 success, 1 errors found / manifests failed, 2 input unreadable or usage error,
//! 3 deletions still in progress, 4 refused by a precondition.

mod apply;
mod dev_apiserver;
mod graph;
mod operand_cleanup;
mod plan;
mod seed;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::release::{Filters, Limits, LoadOptions};

/// Exit code: the input could not be read, or the command line is wrong.
pub const EXIT_INPUT: u8 = 2;

#[derive(Debug, Parser)]
#[command(name = "cvo", version, about = "Cluster-version manifest applier: ordered releases, safe deletions", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (kubectl rules: this file, else the files listed in
    /// $KUBECONFIG merged, else ~/.kube/config, else in-cluster).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// More logging (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a release for mistakes before it ships (for CI).
    Validate(validate::ValidateArgs),
    /// Show the run-level task graph of a release.
    Graph(graph::GraphArgs),
    /// Make a cluster match a release (create, update, delete), then report.
    Apply(apply::ApplyArgs),
    /// Show what `apply` would do, from server-side dry-run; writes nothing.
    Plan(plan::PlanArgs),
    /// Run the OLM CSV operand-cleanup reconciler until SIGINT/SIGTERM.
    OperandCleanup(operand_cleanup::OperandCleanupArgs),
    /// Serve the embedded in-memory API server on loopback (for kubectl and tests).
    DevApiserver(dev_apiserver::DevApiserverArgs),
}

/// `-o` of apply and plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// How to read a release: shared by every subcommand that takes `--release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Release directory: a flat directory of manifests, or a CVO payload root with
    /// manifests/ and release-manifests/.
    #[arg(long, value_name = "DIR")]
    pub release: PathBuf,
    /// Keep only manifests with include.release.openshift.io/NAME: "true".
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Drop manifests whose release.openshift.io/feature-set does not list NAME.
    #[arg(long, value_name = "NAME", default_value = "Default")]
    pub feature_set: String,
    /// Drop manifests with exclude.release.openshift.io/ID: "true" (repeatable).
    #[arg(long, value_name = "ID")]
    pub exclude: Vec<String>,
    /// Pull spec rendered into {{.ReleaseImage}} in a payload's manifests/.
    #[arg(long, value_name = "PULLSPEC")]
    pub release_image: Option<String>,
    /// Refuse a file larger than this many bytes (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = crate::release::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// Refuse a release whose files hold more than this many bytes together (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = crate::release::DEFAULT_MAX_RELEASE_BYTES)]
    pub max_release_bytes: u64,
}

impl ReleaseArgs {
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            filters: Filters {
                profile: self.profile.clone(),
                feature_set: self.feature_set.clone(),
                exclude: self.exclude.clone(),
            },
            release_image: self.release_image.clone(),
            limits: Limits {
                max_file_bytes: self.max_file_bytes,
                max_release_bytes: self.max_release_bytes,
            },
        }
    }
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_INPUT)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    init_logging(&cli.global);
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Graph(args) => graph::run(&args),
        Command::Apply(args) => apply::run(&cli.global, &args),
        Command::Plan(args) => plan::run(&cli.global, &args),
        Command::OperandCleanup(args) => operand_cleanup::run(&cli.global, &args),
        Command::DevApiserver(args) => dev_apiserver::run(&args),
    }
}

fn init_logging(global: &GlobalArgs) {
    let default = match global.verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CVO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match global.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Prints a load error the way every subcommand does and returns exit code 2.
fn input_error(err: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {err}");
    ExitCode::from(EXIT_INPUT)
}

/// A client like kubectl's: the kubeconfig from `--kubeconfig` (that one file), else the
/// files listed in `$KUBECONFIG` (merged: the first file to set a value wins), else
/// `~/.kube/config`; with none of them, the in-cluster service account. `--context` picks a
/// context of that kubeconfig instead of its `current-context`.
async fn kube_client(global: &GlobalArgs) -> Result<kube::Client, String> {
    let config = client_config(global).await?;
    kube::Client::try_from(config).map_err(|e| format!("client: {e}"))
}

async fn client_config(global: &GlobalArgs) -> Result<kube::Config, String> {
    let Some((kubeconfig, source)) = find_kubeconfig(global.kubeconfig.as_deref())? else {
        if let Some(context) = &global.context {
            return Err(format!(
                "--context {context}: no kubeconfig found (no --kubeconfig, KUBECONFIG is unset and ~/.kube/config does not exist)"
            ));
        }
        return kube::Config::incluster().map_err(|e| {
            format!(
                "no cluster configuration: no --kubeconfig, KUBECONFIG is unset, ~/.kube/config does not exist, and not running in a cluster ({e})"
            )
        });
    };
    if let Some(context) = &global.context
        && !kubeconfig.contexts.iter().any(|c| &c.name == context)
    {
        let known: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        return Err(format!(
            "--context {context}: no such context in {source} (it has: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    }
    let options = kube::config::KubeConfigOptions {
        context: global.context.clone(),
        ..Default::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("{source}: {e}"))?;
    config.apply_debug_overrides();
    Ok(config)
}

/// The kubeconfig kubectl would read, and where it came from (for error messages); `None`
/// when there is none at all.
fn find_kubeconfig(
    flag: Option<&std::path::Path>,
) -> Result<Option<(kube::config::Kubeconfig, String)>, String> {
    use kube::config::{Kubeconfig, KubeconfigError};
    if let Some(path) = flag {
        let source = format!("kubeconfig {}", path.display());
        return Kubeconfig::read_from(path)
            .map(|k| Some((k, source.clone())))
            .map_err(|e| format!("{source}: {e}"));
    }
    if let Some(list) = std::env::var_os("KUBECONFIG") {
        let source = format!("KUBECONFIG={}", list.to_string_lossy());
        match Kubeconfig::from_env() {
            Ok(Some(k)) => return Ok(Some((k, source))),
            Ok(None) => {} // empty: as if unset
            Err(e) => return Err(format!("{source}: {e}")),
        }
    }
    match Kubeconfig::read() {
        Ok(k) => Ok(Some((k, "~/.kube/config".to_owned()))),
        Err(KubeconfigError::FindPath) => Ok(None),
        Err(KubeconfigError::ReadConfig(e, _)) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(format!("~/.kube/config: {e}")),
    }
}

/// A multi-threaded tokio runtime for the commands that talk to API servers.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM: the signal to stop gracefully.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
