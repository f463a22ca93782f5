//! `cvo operator`: run the in-cluster release operator until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::apply::{PassArgs, parse_duration};
use super::{CliError, Console, GlobalArgs, ReleaseArgs};
use crate::cluster::request_error::Target;
use crate::exit::Exit;
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
    /// Serve /metrics, /healthz, /startupz, /readyz and /timings here.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:9099")]
    pub metrics_addr: SocketAddr,
    /// Between two full passes (jittered by ±25 %); drift is repaired from watches meanwhile.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "3m")]
    pub resync_interval: Duration,
    /// Name of the leader-election Lease.
    #[arg(long, value_name = "NAME", default_value = crate::rbac::DEFAULT_LEASE_NAME)]
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
    /// A kubernetes.io/dockerconfigjson Secret whose credentials are used to pull the
    /// releases spec.desiredUpdate.image names (read at every pull, never printed; the Docker
    /// config's credentials still serve other registries).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub pull_secret: Option<crate::cluster::NamespacedName>,
    /// A ConfigMap in the operator's namespace (--namespace) whose keys add to these flags
    /// what this cluster's pulls need: `verify-keys` (PEM public keys), `insecure-registries`
    /// (one HOST[:PORT] a line), `pull-secret` (a Secret's name there). Read at every pull;
    /// absent, it adds nothing; unreadable, the pull fails. `cvo fleet install` writes it:
    /// the operator keeps its own Deployment as its release says, so a cluster's keys cannot
    /// live in the Deployment's flags.
    #[arg(long, value_name = "NAME")]
    pub pull_config: Option<String>,
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

/// Exit codes: 0 stopped by SIGINT/SIGTERM (also while still waiting for the API server);
/// 2 a bad flag, a kubeconfig that cannot be used, or a metrics address that cannot be bound.
/// An API server that cannot be reached does not end the operator: `/healthz`, `/livez`,
/// `/metrics` and `/readyz` are served before it connects, and it connects for as long as
/// it takes ([`crate::operator::connect`]). A release that cannot be used does not stop it
/// either: it reports why in ClusterVersion. The release's diagnostics go to the global
/// flags' console (in JSON mode, events too).
pub fn run(global: &GlobalArgs, args: &OperatorArgs) -> Result<Exit, CliError> {
    let timings = args.check()?;
    super::runtime()?.block_on(async {
        // Installed at once: SIGTERM from here on is a clean stop, also while connecting.
        let shutdown = super::shutdown_signal();
        tokio::pin!(shutdown);
        // The probes answer before anything slow: reading a large release, the API server.
        let metrics = Arc::new(Metrics::new());
        let listener = metrics::bind(args.metrics_addr)
            .await
            .map_err(CliError::usage)?;
        let addr = listener.local_addr().unwrap_or(args.metrics_addr);
        tokio::spawn(metrics::serve(metrics.clone(), listener));
        // --verify-key verifies OCI releases; a directory release is the image's own.
        args.release.trust_directory();
        // The feature gates are the cluster's, read by each pass, unless a flag gives them.
        args.release.defer_feature_gates();
        let (client, target) = client(global, args).await?;
        let options = args.options(&client, &timings)?;
        tracing::info!(
            release = %args.release.release,
            server = %target.server,
            namespace = %options.lease.namespace,
            lease = %options.lease.name,
            identity = %options.lease.identity,
            metrics = %addr,
            "operator starting"
        );
        if crate::operator::connect::connect(&client, &target, &mut shutdown)
            .await
            .is_none()
        {
            tracing::info!(server = %target.server, "stopped before the API server answered");
            return Ok(Exit::Success);
        }
        metrics.readiness.connected();
        crate::operator::connect::identity(&client).await;
        args.hold_pull_secret(&client).await;
        // Read while the election runs (the release may be large, or pulled from a registry):
        // /readyz follows the election from the start.
        let release = async {
            let release =
                tokio::task::block_in_place(|| load_release(&args.release, global.console));
            match &release {
                Ok(r) => tracing::info!(
                    version = %crate::status::conditions::version_text(r),
                    manifests = r.manifests.len(),
                    "release read"
                ),
                Err(why) => tracing::error!(reason = why.reason, "the release cannot be used"),
            }
            release
        };
        crate::operator::run(client.clone(), client, release, &options, metrics, shutdown).await;
        Ok(Exit::Success)
    })
}

impl OperatorArgs {
    /// With `--pull-secret` and a registry `--release`, reads the Secret's credentials for the
    /// start release's pull (the Docker config's still serve other registries). A Secret that
    /// cannot be read is logged, and the pull goes on without it: a registry that then refuses
    /// access makes the release unusable, reported as such.
    async fn hold_pull_secret(&self, client: &kube::Client) {
        let Some(secret) = &self.pull_secret else {
            return;
        };
        if !matches!(
            crate::oci::Source::parse(&self.release.release),
            Ok(Some(crate::oci::Source::Registry(_)))
        ) {
            return;
        }
        match crate::operator::pull::pull_secret_credentials(client, secret).await {
            Ok(credentials) => self.release.hold_credentials(credentials),
            Err(why) => {
                tracing::error!(release = %self.release.release, "{why}; reading the release without it");
            }
        }
    }

    /// Checks the flags that can be checked before connecting; returns the Lease timings (the
    /// namespace is known only once connected).
    fn check(&self) -> Result<LeaseConfig, CliError> {
        if !self.components.contains(&Component::Release) {
            return Err(CliError::usage(
                "--components must include release (to run the operand-cleanup reconciler alone, use `cvo operand-cleanup`)",
            ));
        }
        if self.operand_cleanup_namespace.is_some()
            && !self.components.contains(&Component::OperandCleanup)
        {
            return Err(CliError::usage(
                "--operand-cleanup-namespace needs --components release,operand-cleanup",
            ));
        }
        if self.resync_interval.is_zero() {
            return Err(CliError::usage("--resync-interval must be longer than 0"));
        }
        let timings = LeaseConfig {
            lease_duration: self.lease_duration,
            renew_deadline: self.lease_renew_deadline,
            retry_period: self.lease_retry,
            ..LeaseConfig::new("", &self.lease_name, "")
        };
        timings.check().map_err(CliError::usage)?;
        Ok(timings)
    }

    /// The operator's options from these flags, the Lease `timings` and `client`'s default
    /// namespace.
    fn options(
        &self,
        client: &kube::Client,
        timings: &LeaseConfig,
    ) -> Result<crate::operator::Options, CliError> {
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let lease = LeaseConfig {
            namespace,
            identity: default_identity(),
            ..timings.clone()
        };
        let state_namespace = self
            .state_namespace
            .clone()
            .unwrap_or_else(|| lease.namespace.clone());
        let pull = crate::operator::pull::Config {
            pull_secret: self.pull_secret.clone(),
            pull_config: self
                .pull_config
                .as_ref()
                .map(|name| crate::cluster::NamespacedName {
                    namespace: lease.namespace.clone(),
                    name: name.clone(),
                }),
            ..crate::operator::pull::Config::new(
                self.release.fetch_options()?,
                self.release.options_in(self.release.profile.as_deref()),
            )
        };
        // The release the cluster is at, when its history names one by digest: what the
        // first pass enables implicitly is judged from it (docs/capabilities.md).
        let previous = crate::operator::previous::Previous::new(pull.clone(), Some(client.clone()));
        Ok(crate::operator::Options {
            sync: SyncOptions {
                release_accepted: true,
                previous_release: Some(std::sync::Arc::new(previous)),
                feature_gates: self.release.gate_source()?,
                record: Some(crate::status::record::Location {
                    namespace: state_namespace,
                }),
                ..self.pass.sync_options()
            },
            resync_interval: self.resync_interval,
            lease,
            shutdown_grace: self.shutdown_grace,
            self_update: crate::operator::self_update::Config {
                deployment: self.self_deployment.clone(),
                pod: crate::operator::self_update::Config::pod_from_env(),
                release_image: self.release.release_image.clone(),
            },
            operand_cleanup: self
                .components
                .contains(&Component::OperandCleanup)
                .then(|| crate::olm::Config {
                    namespace: self.operand_cleanup_namespace.clone(),
                    ..Default::default()
                }),
            pull,
        })
    }
}

/// The release, or why it cannot be used (the `ReleaseAccepted` reason and message: an OCI
/// release whose signature does not verify is `ImageVerificationFailed`). Its diagnostics,
/// or the reason it cannot be read, go to `console`: rustc-style text, or one event each (the
/// diagnostic's severity as the level, its rule, file and line as fields).
fn load_release(
    args: &ReleaseArgs,
    console: Console,
) -> Result<crate::release::Release, crate::operator::Unusable> {
    use crate::operator::Unusable;
    match args.load(console) {
        Ok(release) => {
            for d in &release.diagnostics {
                console.diagnostic(d);
            }
            if release.has_errors() {
                Err(Unusable::invalid(format!(
                    "The release has {}",
                    release.errors_line()
                )))
            } else {
                Ok(release)
            }
        }
        Err(e) => {
            say!(console, error { release = %args.release }, "{e}");
            if e.exit() == Exit::Refused {
                // Only a signature that does not verify refuses a release being read.
                Err(Unusable::unverified(format!(
                    "The release {} cannot be verified: {e}",
                    args.release
                )))
            } else {
                Err(Unusable::invalid(unreadable_release(args, console)))
            }
        }
    }
}

/// The `ReleaseAccepted` message of a release that cannot be read (the loader's error).
fn unreadable_release(args: &ReleaseArgs, console: Console) -> String {
    let options = args.options_in(args.profile.as_deref());
    let loaded = args
        .dir(console)
        .map_err(|e| e.to_string())
        .and_then(|dir| crate::release::load(&dir, &options).map_err(|e| e.to_string()));
    match loaded {
        Err(e) => format!("The release {} cannot be read: {e}", args.release),
        Ok(_) => format!(
            "The release {} cannot be used with these flags (see the operator's log)",
            args.release
        ),
    }
}

/// The kubeconfig cluster's client, or with `--in-memory` a fresh embedded server's, and
/// where it points; not used yet (the operator connects after serving its probes). A
/// kubeconfig that cannot be used is exit code 2.
#[cfg_attr(not(feature = "in-memory"), allow(unused_variables))]
async fn client(
    global: &GlobalArgs,
    args: &OperatorArgs,
) -> Result<(kube::Client, Target), CliError> {
    #[cfg(feature = "in-memory")]
    if args.in_memory {
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        let target = Target {
            server: "memory://embedded".to_owned(),
            context: None,
        };
        return Ok((server.client(), target));
    }
    super::unconnected_client(global).await
}
