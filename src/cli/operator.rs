//! `cvo operator`: run the in-cluster release operator until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::apply::{PassArgs, parse_duration};
use super::{GlobalArgs, ReleaseArgs};
use crate::operator::leader::{LeaseConfig, default_identity};
use crate::operator::metrics::{self, Metrics};
use crate::sync::SyncOptions;

#[derive(Debug, Args)]
pub struct OperatorArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// Run against a fresh embedded in-memory API server instead of a cluster (for trying
    /// the operator out; it starts empty).
    #[cfg(feature = "in-memory")]
    #[arg(long)]
    pub in_memory: bool,
    /// The operator's namespace, where its leader Lease lives (default: the kubeconfig
    /// context's namespace, in a pod its own).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,
    /// Namespace of the deletion record (ConfigMap cvo-deletion-record) [default: the
    /// operator's namespace].
    #[arg(long, value_name = "NS")]
    pub state_namespace: Option<String>,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:9099")]
    pub metrics_addr: SocketAddr,
    /// Between two full passes (jittered by ±25 %); drift is repaired from watches meanwhile.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "3m")]
    pub resync_interval: Duration,
    /// Name of the leader-election Lease.
    #[arg(long, value_name = "NAME", default_value = "cvo-operator")]
    pub lease_name: String,
    /// A Lease not renewed for this long may be taken over by a standby.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "15s")]
    pub lease_duration: Duration,
    /// The leader stops writing when it could not renew its Lease for this long.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "10s")]
    pub lease_renew_deadline: Duration,
    /// How often candidates try to take the Lease, and the leader renews it.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "2s")]
    pub lease_retry: Duration,
    /// How long a pass in flight at SIGTERM may take to finish before the Lease is released.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "20s")]
    pub shutdown_grace: Duration,
    /// The knobs of each full pass, as for `cvo apply`.
    #[command(flatten)]
    pub pass: PassArgs,
    /// The operator's own Deployment: moved to ClusterVersion spec.desiredUpdate.image when
    /// that names another image than the one the operator runs (its Pod's, from POD_NAME and
    /// POD_NAMESPACE, else --release-image). Without it the operator never moves itself.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub self_deployment: Option<crate::cluster::NamespacedName>,
    /// What the leader runs: the release (always), and with operand-cleanup also the OLM
    /// operand-cleanup reconciler of `cvo operand-cleanup` (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "release")]
    pub components: Vec<Component>,
    /// With --components operand-cleanup: watch ClusterServiceVersions of this namespace only
    /// (its safety checks still look at the whole cluster).
    #[arg(long, value_name = "NS")]
    pub operand_cleanup_namespace: Option<String>,
}

/// A part of the operator's work, run by the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Component {
    /// Keep the cluster at the release.
    Release,
    /// The OLM operand-cleanup reconciler (docs/operand-cleanup.md).
    OperandCleanup,
}

pub fn run(global: &GlobalArgs, args: &OperatorArgs) -> ExitCode {
    if !args.components.contains(&Component::Release) {
        stderr_line!(
            "error: --components must include release (to run the operand-cleanup reconciler alone, use `cvo operand-cleanup`)"
        );
        return ExitCode::from(super::EXIT_INPUT);
    }
    let operand_cleanup = args.components.contains(&Component::OperandCleanup);
    if args.operand_cleanup_namespace.is_some() && !operand_cleanup {
        stderr_line!(
            "error: --operand-cleanup-namespace needs --components release,operand-cleanup"
        );
        return ExitCode::from(super::EXIT_INPUT);
    }
    if args.resync_interval.is_zero() {
        stderr_line!("error: --resync-interval must be longer than 0");
        return ExitCode::from(super::EXIT_INPUT);
    }
    // The namespace is known only once connected; the timings can be checked now.
    let timings = LeaseConfig {
        lease_duration: args.lease_duration,
        renew_deadline: args.lease_renew_deadline,
        retry_period: args.lease_retry,
        ..LeaseConfig::new("", &args.lease_name, "")
    };
    if let Err(e) = timings.check() {
        stderr_line!("error: {e}");
        return ExitCode::from(super::EXIT_INPUT);
    }
    // A release that cannot be used does not stop the operator: it reports why in
    // ClusterVersion (ReleaseAccepted=False) and applies nothing.
    let release = match args.release.load() {
        Ok(release) => {
            for d in &release.diagnostics {
                stderr_line!("{d}");
            }
            if release.has_errors() {
                Err(invalid_release(&release))
            } else {
                Ok(release)
            }
        }
        Err(_) => Err(unreadable_release(&args.release)),
    };
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let client = match client(global, args).await {
            Ok(c) => c,
            Err(e) => return e.report(),
        };
        let namespace = args
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let lease = LeaseConfig {
            namespace,
            identity: default_identity(),
            ..timings.clone()
        };
        let options = crate::operator::Options {
            sync: SyncOptions {
                release_accepted: true,
                record: Some(crate::status::record::Location {
                    namespace: args
                        .state_namespace
                        .clone()
                        .unwrap_or_else(|| lease.namespace.clone()),
                }),
                ..args.pass.sync_options()
            },
            resync_interval: args.resync_interval,
            lease,
            shutdown_grace: args.shutdown_grace,
            self_update: crate::operator::self_update::Config {
                deployment: args.self_deployment.clone(),
                pod: crate::operator::self_update::Config::pod_from_env(),
                release_image: args.release.release_image.clone(),
            },
            operand_cleanup: operand_cleanup.then(|| crate::olm::Config {
                namespace: args.operand_cleanup_namespace.clone(),
                ..Default::default()
            }),
        };
        let metrics = Arc::new(Metrics::new());
        let listener = match metrics::bind(args.metrics_addr).await {
            Ok(l) => l,
            Err(e) => {
                stderr_line!("error: {e}");
                return ExitCode::from(super::EXIT_INPUT);
            }
        };
        let addr = listener.local_addr().unwrap_or(args.metrics_addr);
        tokio::spawn(metrics::serve(metrics.clone(), listener));
        tracing::info!(
            release = %release
                .as_ref()
                .map_or_else(|_| "invalid".to_owned(), crate::status::conditions::version_text),
            manifests = release.as_ref().map_or(0, |r| r.manifests.len()),
            namespace = %options.lease.namespace,
            lease = %options.lease.name,
            identity = %options.lease.identity,
            metrics = %addr,
            "operator starting"
        );
        match &release {
            Ok(release) => {
                crate::operator::run(
                    client.clone(),
                    client,
                    release,
                    &options,
                    metrics,
                    super::shutdown_signal(),
                )
                .await
            }
            Err(why) => {
                crate::operator::run_invalid(
                    client.clone(),
                    client,
                    why,
                    &options,
                    metrics,
                    super::shutdown_signal(),
                )
                .await
            }
        }
        ExitCode::SUCCESS
    })
}

/// How many errors of an invalid release `ReleaseAccepted` names before counting the rest.
const ERRORS_SHOWN: usize = 10;

/// The `ReleaseAccepted` message of a release with errors: each as `file:line: message`.
fn invalid_release(release: &crate::release::Release) -> String {
    let errors: Vec<String> = release
        .diagnostics
        .iter()
        .filter(|d| d.severity == crate::diagnostic::Severity::Error)
        .map(|d| format!("{}: {}", d.location, d.message))
        .collect();
    let mut message = format!(
        "The release has {} errors (see `cvo validate`): {}",
        errors.len(),
        errors
            .iter()
            .take(ERRORS_SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    );
    if errors.len() > ERRORS_SHOWN {
        message.push_str(&format!("; and {} more", errors.len() - ERRORS_SHOWN));
    }
    message
}

/// The `ReleaseAccepted` message of a release that cannot be read (the loader's error).
fn unreadable_release(args: &ReleaseArgs) -> String {
    let options = args.options_in(args.profile.as_deref());
    match crate::release::load(&args.release, &options) {
        Err(e) => format!("The release {} cannot be read: {e}", args.release.display()),
        Ok(_) => format!(
            "The release {} cannot be used with these flags (see the operator's log)",
            args.release.display()
        ),
    }
}

/// The kubeconfig cluster's client, or with `--in-memory` a fresh embedded server's.
#[cfg_attr(not(feature = "in-memory"), allow(unused_variables))]
async fn client(
    global: &GlobalArgs,
    args: &OperatorArgs,
) -> Result<kube::Client, super::ClientError> {
    #[cfg(feature = "in-memory")]
    if args.in_memory {
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        return Ok(server.client());
    }
    super::kube_client(global).await
}
