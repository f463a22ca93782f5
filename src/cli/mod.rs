//! The `cvo` command line: clap definitions and thin glue to the library.
//!
//! Every subcommand lives in its own file with its argument struct and a `run` function that
//! returns how it ended ([`Exit`], README "Exit codes") or why it ended early ([`CliError`],
//! which carries its exit code). [`main`] is the one place that prints such an error and
//! turns it into the process exit code.

/// `eprintln!` that does not panic when stderr is closed (`cvo … 2>&1 | head`).
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

#[macro_use]
mod console;
mod action;
mod apply;
mod capabilities;
mod cluster_deletion;
mod completion;
#[cfg(feature = "in-memory")]
mod dev_apiserver;
mod error;
mod fleet;
mod fleet_install;
mod graph;
mod man;
mod operand_cleanup;
mod operator;
mod plan;
mod push;
mod rbac;
use crate::cluster::request_error;
#[cfg(feature = "in-memory")]
mod seed;
mod uninstall;
mod validate;
mod validate_config;
mod validate_files;
mod values;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit::Exit;
use crate::release::feature_gate::GateSource;
use crate::release::{DEFAULT_CLUSTER_PROFILE, Filters, Limits, LoadOptions, Release, Selectors};
pub use console::Console;
pub use error::CliError;

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
    /// Log format on stderr [default: text; `cvo operator` in a pod: json].
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Writes the command's notes, warnings, errors and progress in the log format in force
    /// (set by [`main`] once the command line is read).
    #[arg(skip)]
    pub console: Console,
}

/// How the process writes to stderr: plain lines, or one JSON object per line (tracing's
/// JSON events; the CLI's own notes, progress lines, release diagnostics, fatal errors and a
/// panic become events too: see [`Console`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a release for mistakes before it ships (for CI).
    Validate(validate::ValidateArgs),
    /// Show the run-level task graph of a release.
    Graph(graph::GraphArgs),
    /// Show a release's capabilities for a cluster: known, enabled, implicitly enabled, the
    /// manifests each gates.
    Capabilities(capabilities::CapabilitiesArgs),
    /// Make a cluster match a release (create, update, delete), then report.
    Apply(apply::ApplyArgs),
    /// Show what `apply` would do, from server-side dry-run; writes nothing.
    Plan(plan::PlanArgs),
    /// Run the in-cluster release operator: keep the cluster at the release, repair drift
    /// from watches, leader-elected, with metrics; until SIGINT/SIGTERM.
    Operator(Box<operator::OperatorArgs>),
    /// Validate a release directory, then push it as an OCI artifact (reproducible: the same
    /// directory gives the same digest); prints REPO:TAG@sha256:….
    Push(push::PushArgs),
    /// Print the least-privilege RBAC (ClusterRole, Role, bindings) `cvo operator` needs for
    /// a release.
    Rbac(rbac::RbacArgs),
    /// Run the OLM CSV operand-cleanup reconciler until SIGINT/SIGTERM.
    OperandCleanup(operand_cleanup::OperandCleanupArgs),
    /// Remove an OLM-installed operator safely: Subscription, CSV, and what you ask for.
    Uninstall(uninstall::UninstallArgs),
    /// The cluster-deletion signal: delete the Alive object and wait for its finalizers.
    ClusterDeletion(cluster_deletion::ClusterDeletionArgs),
    /// Roll a release out to the clusters of an Open Cluster Management Placement, in waves,
    /// and show where it is (the kubeconfig is the hub's).
    Fleet(fleet::FleetArgs),
    /// Serve the embedded in-memory API server on loopback (for kubectl and tests).
    #[cfg(feature = "in-memory")]
    DevApiserver(dev_apiserver::DevApiserverArgs),
    /// `cvo validate` on each release directory holding one of the files (pre-commit's entry).
    ValidateFiles(validate_files::ValidateFilesArgs),
    /// The GitHub Action's entrypoint (action.yml): validate with the INPUT_* variables the
    /// runner sets; annotations, and a SARIF file with format: sarif.
    GithubAction(action::ActionArgs),
    /// Print the shell completion script (bash, zsh, fish, powershell, elvish).
    Completion(completion::CompletionArgs),
    /// Print the man page of cvo, or of one command (`cvo man validate | man -l -`).
    Man(man::ManArgs),
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
    /// The release: a directory (a flat directory of manifests, or a CVO payload root with
    /// manifests/ and release-manifests/), or an OCI artifact:
    /// oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX] or oci-layout:PATH[:TAG|@sha256:HEX]
    /// (resolved to a digest once, then read exactly as a directory).
    #[arg(long, value_name = "SOURCE")]
    pub release: String,
    #[command(flatten)]
    pub oci: OciArgs,
    /// Keep only manifests with include.release.openshift.io/NAME: "true". Without it, a
    /// release that uses profiles is read in self-managed-high-availability, the CVO's
    /// default (validate checks each profile the release uses).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Drop manifests whose release.openshift.io/feature-set does not list NAME [default:
    /// Default].
    #[arg(long, value_name = "NAME")]
    pub feature_set: Option<String>,
    /// Drop manifests with exclude.release.openshift.io/ID: "true" (repeatable).
    #[arg(long, value_name = "ID")]
    pub exclude: Vec<String>,
    /// The feature gates enabled, comma-separated ("" for none): a manifest with
    /// release.openshift.io/feature-gate: "A,-B" is kept only when A is enabled and B is not.
    /// Without it (and without --feature-gates-file), apply, plan and operator read the
    /// cluster's FeatureGate `cluster` (its status for the release's version); the other
    /// commands take no gate as enabled, as a cluster without a FeatureGate (rbac leaves out
    /// nothing by feature gate: its rules cover what any cluster's gates admit).
    #[arg(long, value_name = "A,B", conflicts_with = "feature_gates_file")]
    pub feature_gates: Option<String>,
    /// The feature gates enabled, from a FeatureGate object (YAML or JSON): its
    /// status.featureGates entry for the release's version (the only entry of a rendered one),
    /// else spec.customNoUpgrade.enabled for the CustomNoUpgrade feature set.
    #[arg(long, value_name = "FILE")]
    pub feature_gates_file: Option<PathBuf>,
    /// The major version release.openshift.io/major-version is compared with [default: the
    /// release version's major].
    #[arg(long, value_name = "N")]
    pub major_version: Option<u64>,
    /// The release image's pull spec: rendered into {{.ReleaseImage}} in a payload's
    /// manifests/, and recorded as ClusterVersion status desired.image and history[].image.
    #[arg(long, value_name = "PULLSPEC", value_parser = values::parse_release_image)]
    pub release_image: Option<String>,
    /// Refuse a file larger than this many bytes (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = crate::release::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// Refuse a release whose files hold more than this many bytes together (docs/limits.md).
    #[arg(long, value_name = "BYTES", default_value_t = crate::release::DEFAULT_MAX_RELEASE_BYTES)]
    pub max_release_bytes: u64,
    /// Parse every file of the release: read nothing from the parse cache (--cache-dir's
    /// parsed/) and write nothing to it.
    #[arg(long)]
    pub no_cache: bool,
    /// The OCI source read, once resolved and extracted (kept for the command's lifetime).
    #[arg(skip)]
    opened: std::sync::OnceLock<crate::oci::Opened>,
    /// A directory `--release` is taken as it is even with `--verify-key` (the operator's:
    /// its keys verify the releases `spec.desiredUpdate.image` names, and a directory release
    /// is its image's own). Other commands refuse the combination.
    #[arg(skip)]
    directory_trusted: std::sync::atomic::AtomicBool,
    /// The feature gates are not applied when loading ([`ReleaseArgs::defer_feature_gates`]);
    /// otherwise the flags' (or none) are.
    #[arg(skip)]
    gates_deferred: std::sync::atomic::AtomicBool,
    /// Registry credentials held beside the Docker config's ([`ReleaseArgs::hold_credentials`]).
    #[arg(skip)]
    credentials: std::sync::OnceLock<crate::oci::Credentials>,
}

/// Largest FeatureGate file read (`--feature-gates-file`).
const MAX_FEATURE_GATE_BYTES: u64 = 4 * 1024 * 1024;

/// How OCI sources and targets are reached: shared by `--release` readers and `cvo push`.
#[derive(Debug, Args)]
pub struct OciArgs {
    /// Where OCI artifacts' blobs are cached by digest (verified again before reuse), and the
    /// release's files as parsed, by content (parsed/; see --no-cache) [default: the user
    /// cache dir's cvo/, e.g. ~/.cache/cvo].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Reach this registry over plain HTTP (repeatable). Loopback registries (127.0.0.0/8,
    /// ::1, localhost) always are; any other host only over HTTPS without this flag.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub insecure_registry: Vec<String>,
    /// Verify the OCI release's cosign signature (the tag sha256-HEX.sig beside it) with this
    /// public key (PEM, as cosign.pub) before reading it; repeatable, any one key suffices. A
    /// release that is unsigned or whose signature does not verify is refused (exit code 4).
    #[arg(long, value_name = "PUB.pem")]
    pub verify_key: Vec<PathBuf>,
}

impl OciArgs {
    /// The registry access of these flags.
    pub fn access(&self) -> crate::oci::Access {
        crate::oci::Access {
            insecure: self.insecure_registry.clone(),
            ..crate::oci::Access::default()
        }
    }

    /// How an OCI source is read with these flags and the default size caps (commands that
    /// take no `--max-*-bytes`: `cvo fleet`).
    pub fn fetch_options(&self) -> Result<crate::oci::FetchOptions, CliError> {
        Ok(crate::oci::FetchOptions {
            cache_dir: self.cache_dir.clone(),
            access: self.access(),
            caps: crate::oci::Caps {
                max_file_bytes: crate::release::DEFAULT_MAX_FILE_BYTES,
                max_release_bytes: crate::release::DEFAULT_MAX_RELEASE_BYTES,
            },
            verify: self.verify()?,
        })
    }

    /// The enforced signature check of `--verify-key`, `None` without the flag; a usage error
    /// when a key file cannot be read or is not a P-256 public key.
    pub fn verify(&self) -> Result<Option<crate::oci::Verify>, CliError> {
        if self.verify_key.is_empty() {
            return Ok(None);
        }
        let keys = self
            .verify_key
            .iter()
            .map(|path| crate::oci::PublicKey::load(path).map_err(CliError::Usage))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(crate::oci::Verify {
            keys,
            enforce: true,
        }))
    }
}

/// An OCI error as the CLI reports it: a wrong reference is a usage error (exit code 2), a
/// failed signature verification a refusal (exit code 4), anything else a failure (exit
/// code 1).
fn oci_error(e: crate::oci::OciError) -> CliError {
    match e {
        crate::oci::OciError::Usage(m) => CliError::Usage(m),
        e @ crate::oci::OciError::Verification { .. } => {
            CliError::Several(vec![e.to_string()], Exit::Refused)
        }
        other => CliError::Failed(other.to_string()),
    }
}

/// Runs `f` to completion from synchronous code: inside the command's (multi-thread) runtime
/// without blocking its other tasks, else on a runtime of its own.
fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, CliError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => Ok(tokio::task::block_in_place(|| handle.block_on(f))),
        Err(_) => Ok(tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::failed(format_args!("cannot start the async runtime: {e}")))?
            .block_on(f)),
    }
}

impl ReleaseArgs {
    /// The feature set manifests are kept for: `--feature-set`, else `Default`.
    pub fn feature_set(&self) -> &str {
        self.feature_set
            .as_deref()
            .unwrap_or(crate::release::DEFAULT_FEATURE_SET)
    }

    /// The size caps of these flags.
    pub fn caps(&self) -> crate::oci::Caps {
        crate::oci::Caps {
            max_file_bytes: self.max_file_bytes,
            max_release_bytes: self.max_release_bytes,
        }
    }

    /// How OCI sources are read with these flags: the one place a reading command's (and the
    /// operator's) fetch options are built. Fails when a `--verify-key` cannot be read.
    pub fn fetch_options(&self) -> Result<crate::oci::FetchOptions, CliError> {
        Ok(crate::oci::FetchOptions {
            cache_dir: self.oci.cache_dir.clone(),
            access: crate::oci::Access {
                credentials: self.credentials.get().cloned().unwrap_or_default(),
                ..self.oci.access()
            },
            caps: self.caps(),
            verify: self.oci.verify()?,
        })
    }

    /// The release directory: `--release` itself, or the OCI source it names resolved to a
    /// digest and extracted (once per command; a note on `console` names the digest and the
    /// tag it came from).
    pub fn dir(&self, console: Console) -> Result<PathBuf, CliError> {
        let Some(source) = crate::oci::Source::parse(&self.release).map_err(CliError::Usage)?
        else {
            let trusted = self
                .directory_trusted
                .load(std::sync::atomic::Ordering::Relaxed);
            if let Some(key) = self.oci.verify_key.first().filter(|_| !trusted) {
                return Err(CliError::usage(format_args!(
                    "--verify-key {}: the release {} is a directory, which has no digest or signature to verify; verify an OCI release (oci://… or oci-layout:…)",
                    key.display(),
                    self.release
                )));
            }
            return Ok(PathBuf::from(&self.release));
        };
        if let Some(opened) = self.opened.get() {
            return Ok(opened.dir());
        }
        let opened =
            block_on(crate::oci::open(&source, &self.fetch_options()?))?.map_err(oci_error)?;
        let from = match &opened.tag {
            Some(tag) => format!(" (tag {tag})"),
            None => String::new(),
        };
        let verified = match &opened.signature {
            crate::oci::SignatureCheck::Verified { key } => format!(", verified by {key}"),
            _ => String::new(),
        };
        let note = format!(
            "release {} is {}{from}{verified}",
            opened.source, opened.digest
        );
        let tag = opened.tag.as_deref();
        say!(console, note { source = %opened.source, digest = %opened.digest, tag }, "{note}");
        let dir = opened.dir();
        let _ = self.opened.set(opened);
        Ok(dir)
    }

    /// Reads an OCI `--release` with `credentials` too (before the Docker config's, for the
    /// registries they name): the operator's pull Secret. Call before the release is read.
    pub fn hold_credentials(&self, credentials: crate::oci::Credentials) {
        let _ = self.credentials.set(credentials);
    }

    /// Takes a directory `--release` as it is even with `--verify-key` (see the field).
    pub fn trust_directory(&self) {
        self.directory_trusted
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Does not apply the feature gates when loading (call before loading): apply, plan and
    /// operator leave them to each sync (the flags' when given, else the cluster's
    /// FeatureGate); rbac covers what any cluster's gates may admit.
    pub fn defer_feature_gates(&self) {
        self.gates_deferred
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where the feature gates come from: `--feature-gates`, `--feature-gates-file` (read and
    /// checked to be a FeatureGate; a usage error when it cannot be), else `None`.
    pub fn gate_source(&self) -> Result<Option<GateSource>, CliError> {
        if let Some(list) = &self.feature_gates {
            return Ok(Some(GateSource::List(
                crate::release::feature_gate::parse_gate_list(list),
            )));
        }
        let Some(path) = &self.feature_gates_file else {
            return Ok(None);
        };
        let fail = |why: String| {
            CliError::usage(format_args!(
                "--feature-gates-file {}: {why}; cannot tell which feature gates are enabled",
                crate::diagnostic::escaped_path(path)
            ))
        };
        let size = std::fs::metadata(path)
            .map_err(|e| fail(e.to_string()))?
            .len();
        if size > MAX_FEATURE_GATE_BYTES {
            return Err(fail(format!(
                "{size} bytes, more than a FeatureGate holds ({MAX_FEATURE_GATE_BYTES} at most)"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let object: serde_json::Value = serde_saphyr::from_str(&text)
            .map_err(|e| fail(format!("not one YAML or JSON document: {e}")))?;
        let field = |name: &str| {
            object
                .get(name)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (kind, api_version) = (field("kind"), field("apiVersion"));
        if kind != "FeatureGate" || !api_version.starts_with("config.openshift.io/") {
            return Err(fail(format!(
                "expected a FeatureGate (apiVersion config.openshift.io/v1, kind FeatureGate), found apiVersion `{}` kind `{}`",
                crate::diagnostic::excerpt(&api_version),
                crate::diagnostic::excerpt(&kind)
            )));
        }
        Ok(Some(GateSource::Object {
            file: path.clone(),
            object,
        }))
    }

    /// Leaves out what the feature gates exclude, for commands without a cluster: the gates
    /// a flag gives, else none enabled. With a cluster, each sync applies them (its report
    /// then has an `excluded` result for each manifest they leave out).
    fn apply_gates(&self, release: &mut Release) -> Result<(), CliError> {
        if self
            .gates_deferred
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(());
        }
        let source = self
            .gate_source()?
            .unwrap_or_else(|| GateSource::List(Default::default()));
        let enabled = source.enabled(release.version()).map_err(CliError::Usage)?;
        release.leave_out_by_feature_gates(&enabled);
        Ok(())
    }

    /// Where an OCI release came from (`None` for a directory, or before [`ReleaseArgs::dir`]).
    pub fn origin(&self) -> Option<&crate::oci::Opened> {
        self.opened.get()
    }

    /// `release.source` and `release.digest` of the JSON reports.
    pub fn origin_json(&self) -> (String, Option<String>) {
        (
            self.release.clone(),
            self.origin().map(|o| o.digest.to_string()),
        )
    }

    /// The load options of these flags, with `profile` in place of `--profile`. The release
    /// image is `--release-image`, else for a registry source `HOST/REPO@sha256:…`.
    fn options_in(&self, profile: Option<&str>) -> LoadOptions {
        LoadOptions {
            filters: Filters {
                profile: profile.map(str::to_owned),
                feature_set: self.feature_set().to_owned(),
                exclude: self.exclude.clone(),
                major_version: self.major_version,
            },
            release_image: self
                .release_image
                .clone()
                .or_else(|| self.origin().and_then(|o| o.image.clone())),
            limits: Limits {
                max_file_bytes: self.max_file_bytes,
                max_release_bytes: self.max_release_bytes,
            },
            cache: self.parse_cache(),
        }
    }

    /// The parse cache of `--cache-dir` (the blob cache's directory, default included);
    /// `None` with `--no-cache`, or without a user cache directory (HOME unset).
    fn parse_cache(&self) -> Option<crate::release::ParseCache> {
        if self.no_cache {
            return None;
        }
        let root = self
            .oci
            .cache_dir
            .clone()
            .or_else(crate::oci::cache::Cache::default_root)?;
        Some(crate::release::ParseCache::new(&root))
    }

    /// What `--verify-key` proved of the release read (after [`ReleaseArgs::dir`]): a
    /// directory, or an OCI release read without a key, was not checked.
    fn verification(&self) -> crate::release::Verification {
        match self.origin().map(|o| &o.signature) {
            Some(crate::oci::SignatureCheck::Verified { .. }) => {
                crate::release::Verification::Verified
            }
            _ => crate::release::Verification::NotChecked,
        }
    }

    /// The release `graph`, `apply`, `plan` and `operator` work on. Without `--profile`, a
    /// release that uses cluster profiles is read in the CVO's default profile, as a cluster
    /// without one would be (every profile at once would hold each object's per-profile
    /// twins), and a note on `console` says so.
    pub fn load(&self, console: Console) -> Result<Release, CliError> {
        let dir = self.dir(console)?;
        let options = self.options_in(self.profile.as_deref());
        let (mut release, choice) =
            crate::release::load_selected(&dir, &options).map_err(CliError::usage)?;
        release.verification = self.verification();
        self.apply_gates(&mut release)?;
        if self.origin().is_some() {
            // Its files are named inside the artifact, not in the temporary directory.
            release.name_files_relative_to_root();
        }
        feature_set_note(
            &Selectors::of(release.all_manifests()),
            &options.filters,
            &release,
            console,
        );
        if let crate::release::ProfileChoice::Default { profiles } = choice {
            let profiles = profiles.join(", ");
            say!(
                console,
                note { %profiles, profile = DEFAULT_CLUSTER_PROFILE },
                "the release uses cluster profiles ({profiles}): reading it in {DEFAULT_CLUSTER_PROFILE}, the CVO's default (choose another with --profile)"
            );
        }
        Ok(release)
    }

    /// The release `validate` checks, once per profile: with `--profile`, or when the
    /// release uses no profiles, the one release (`None`); without `--profile`, the release
    /// in each profile it uses, on its own.
    pub fn load_each_profile(
        &self,
        console: Console,
    ) -> Result<Vec<(Option<String>, Release)>, CliError> {
        let EachProfile { read, selections } = self.read_each_profile(console)?;
        let filters = selections.iter().map(|p| self.filters_in(p)).collect();
        let releases = read.into_selections(filters);
        selections
            .into_iter()
            .zip(releases)
            .map(|(p, release)| Ok((p, self.gated(release)?)))
            .collect()
    }

    /// The release read and parsed once, and the profiles [`ReleaseArgs::load_each_profile`]
    /// selects from it. A `--profile` or `--feature-set` that no manifest names would
    /// silently select nothing: refused with exit code 2, naming the ones the release uses.
    pub(crate) fn read_each_profile(&self, console: Console) -> Result<EachProfile, CliError> {
        let dir = self.dir(console)?;
        let options = self.options_in(self.profile.as_deref());
        let read = crate::release::read(&dir, &options).map_err(CliError::usage)?;
        let used = Selectors::of(read.all_manifests());
        if let Some(why) = used.refusal(&options.filters) {
            return Err(CliError::usage(why));
        }
        if used.feature_set_note(&options.filters, 0).is_some() {
            let release = self.select(&read, self.profile.as_deref())?;
            feature_set_note(&used, &options.filters, &release, console);
        }
        let selections = if self.profile.is_some() || used.profiles.is_empty() {
            vec![self.profile.clone()]
        } else {
            used.profiles.iter().cloned().map(Some).collect()
        };
        Ok(EachProfile { read, selections })
    }

    /// The release `read` holds, in `profile` (`None`: no profile filtering) and the other
    /// selections of these flags, with the feature gates applied.
    pub(crate) fn select(
        &self,
        read: &crate::release::ReadRelease,
        profile: Option<&str>,
    ) -> Result<Release, CliError> {
        self.gated(read.select(&self.options_in(profile).filters))
    }

    /// The filters of these flags in `profile`, for [`ReadRelease::into_selections`].
    ///
    /// [`ReadRelease::into_selections`]: crate::release::ReadRelease::into_selections
    pub(crate) fn filters_in(&self, profile: &Option<String>) -> crate::release::Filters {
        self.options_in(profile.as_deref()).filters
    }

    /// A selected release with how it was verified and the feature gates applied.
    pub(crate) fn gated(&self, mut release: Release) -> Result<Release, CliError> {
        release.verification = self.verification();
        self.apply_gates(&mut release)?;
        Ok(release)
    }
}

/// A release read once, and the profiles to select from it (`None`: no profile filtering).
pub(crate) struct EachProfile {
    pub read: crate::release::ReadRelease,
    pub selections: Vec<Option<String>>,
}

/// A known `--feature-set` that no manifest names is accepted (as the CVO accepts it): a note
/// says how many manifests it selects, as a note on `console`.
fn feature_set_note(
    used: &Selectors,
    filters: &crate::release::Filters,
    release: &Release,
    console: Console,
) {
    if let Some(note) = used.feature_set_note(filters, release.manifests.len()) {
        say!(console, note { feature_set = %filters.feature_set }, "{note}");
    }
}

/// `v` as indented JSON and a newline: what every `-o json` prints.
fn pretty(v: &impl serde::Serialize) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// `value` as indented JSON and a line end on stdout, written as it is serialized (a report
/// of 50,000 manifests is never held as one string); as [`print_stdout`] otherwise.
fn print_json_stdout(value: &impl serde::Serialize) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    stdout_written(
        serde_json::to_writer_pretty(&mut stdout, value)
            .map_err(std::io::Error::from)
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush()),
    )
}

/// Writes `text` to stdout. A reader that went away (`| head`) is no error: the command
/// ends quietly with the exit code it has; any other write error is exit code 1.
fn print_stdout(text: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout_written(
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush()),
    )
}

/// What a write to stdout comes to for the command ([`print_stdout`]).
fn stdout_written(written: std::io::Result<()>) -> Result<(), CliError> {
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::failed(format_args!("writing to stdout: {e}"))),
    }
}

/// Runs the CLI and returns the process exit code: the one place where an error becomes
/// its message on stderr (in the log format: a JSON event in JSON mode, shown whatever
/// `CVO_LOG` says) and its exit code.
pub fn main() -> ExitCode {
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => return refused_command_line(&e).into(),
        Err(e) => {
            // --help, --version: on stdout, as they are.
            let _ = e.print();
            return Exit::Success.into();
        }
    };
    // A long-running operator says what it does (info); one-shot commands only warn.
    let operator = matches!(cli.command, Command::Operator(_));
    // (The sync's per-manifest notes stay at -v: a pass every few minutes would repeat them.)
    let format = log_format(cli.global.log_format, operator);
    console::init(
        &cli.global,
        format,
        if operator {
            "info,cvo::sync=warn"
        } else {
            "warn"
        },
    );
    let console = Console::new(format);
    cli.global.console = console;
    #[cfg(debug_assertions)]
    panic_for_tests();
    match run(cli) {
        Ok(exit) => exit.into(),
        Err(e) => e.report(console).into(),
    }
}

/// Debug builds only (the tests' binary): `CVO_TEST_PANIC=MESSAGE` panics with MESSAGE once
/// logging is set up, so that the tests can see how a panic is reported (in JSON mode, one
/// event: [`console`]'s panic hook). Bad input never panics, so the tests have no other way
/// to cause one; release builds (no `debug_assertions`) do not contain this at all.
#[cfg(debug_assertions)]
fn panic_for_tests() {
    if let Some(message) = std::env::var_os("CVO_TEST_PANIC") {
        panic!("{}", message.to_string_lossy());
    }
}

/// The log format in force: `--log-format`, else JSON for `cvo operator` in a pod (its logs go
/// to a log collector), else text.
fn log_format(flag: Option<LogFormat>, operator: bool) -> LogFormat {
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    flag.unwrap_or(if operator && in_cluster {
        LogFormat::Json
    } else {
        LogFormat::Text
    })
}

/// Reports a command line clap refused (exit code 2): in clap's words, or in JSON mode (the
/// log format the command line asks for, read as far as it parses) as one `error` event with
/// `exit_code`, so that an operator in a pod with a bad flag still writes only JSON.
fn refused_command_line(e: &clap::Error) -> Exit {
    let partial = <Cli as clap::CommandFactory>::command()
        .ignore_errors(true)
        .try_get_matches()
        .ok();
    let flag = partial
        .as_ref()
        .and_then(|m| m.get_one::<LogFormat>("log_format").copied());
    let operator = partial.as_ref().and_then(|m| m.subcommand_name()) == Some("operator");
    if log_format(flag, operator) == LogFormat::Text {
        let _ = e.print();
        return Exit::Usage;
    }
    let global = GlobalArgs {
        kubeconfig: None,
        context: None,
        verbose: 0,
        log_format: Some(LogFormat::Json),
        console: Console::new(LogFormat::Json),
    };
    console::init(&global, LogFormat::Json, "warn");
    let text = e.render().to_string();
    let message = text.trim().trim_start_matches("error: ");
    CliError::usage(message).report(global.console)
}

/// Runs the command (`cli.global.console` writes in the log format in force).
fn run(cli: Cli) -> Result<Exit, CliError> {
    match cli.command {
        Command::Validate(args) => validate::run(&cli.global, args),
        Command::ValidateFiles(args) => validate_files::run(&cli.global, args),
        Command::GithubAction(args) => action::run(&cli.global, &args),
        Command::Completion(args) => completion::run(&args),
        Command::Man(args) => man::run(&args),
        Command::Graph(args) => graph::run(&args, cli.global.console),
        Command::Capabilities(args) => capabilities::run(&cli.global, &args),
        Command::Apply(args) => apply::run(&cli.global, &args),
        Command::Plan(args) => plan::run(&cli.global, &args),
        Command::Operator(args) => operator::run(&cli.global, &args),
        Command::Rbac(args) => rbac::run(&cli.global, &args),
        Command::Push(args) => push::run(&args, cli.global.console),
        Command::OperandCleanup(args) => operand_cleanup::run(&cli.global, &args),
        Command::Uninstall(args) => uninstall::run(&cli.global, &args),
        Command::ClusterDeletion(args) => cluster_deletion::run(&cli.global, &args),
        Command::Fleet(args) => fleet::run(&cli.global, &args),
        #[cfg(feature = "in-memory")]
        Command::DevApiserver(args) => dev_apiserver::run(&args, cli.global.console),
    }
}

/// A client like kubectl's: the kubeconfig from `--kubeconfig` (that one file), else the
/// files listed in `$KUBECONFIG` (merged: the first file to set a value wins; files that do
/// not exist are skipped, as kubectl does), else
/// `~/.kube/config`; with none of them, the in-cluster service account. `--context` picks a
/// context of that kubeconfig instead of its `current-context`.
///
/// The server is asked for its version first (under the retry policy, so a server down for
/// a moment is waited for), so that an unreachable server or rejected credentials end the
/// command with what failed (exit code 1) rather than as the first request of a run. A
/// kubeconfig that cannot be used is exit code 2.
async fn kube_client(global: &GlobalArgs) -> Result<kube::Client, CliError> {
    let (client, target) = unconnected_client(global).await?;
    // Under the one retry policy: a server that is down for a moment is waited for.
    let retry = crate::cluster::retry::RetryPolicy::default();
    match retry.run(|| client.apiserver_version()).await {
        Ok(_) => Ok(client),
        Err((e, _)) => Err(CliError::Failed(request_failed(&e, &target))),
    }
}

/// A request to `target` that failed under the retry policy, in words: the server's answer
/// or what kept the request from reaching it, with the server's address.
fn request_failed(
    err: &crate::cluster::retry::RequestError,
    target: &request_error::Target,
) -> String {
    match err {
        crate::cluster::retry::RequestError::Kube(e) => request_error::describe(e, target),
        other => format!("the API server at {}: {other}", target.server),
    }
}

/// A client as [`kube_client`] makes it, not yet used, and where it points (for messages):
/// a kubeconfig that cannot be used is a usage error (exit code 2).
async fn unconnected_client(
    global: &GlobalArgs,
) -> Result<(kube::Client, request_error::Target), CliError> {
    let (config, context) = client_config(global).await.map_err(CliError::Usage)?;
    let target = request_error::Target {
        server: config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned(),
        context,
    };
    let client =
        crate::cluster::client(config).map_err(|e| CliError::usage(format_args!("client: {e}")))?;
    Ok((client, target))
}

/// The client configuration, and the kubeconfig context it came from (`None` in-cluster).
async fn client_config(global: &GlobalArgs) -> Result<(kube::Config, Option<String>), String> {
    let Some((kubeconfig, source)) = find_kubeconfig(global.kubeconfig.as_deref())? else {
        if let Some(context) = &global.context {
            return Err(format!(
                "--context {context}: no kubeconfig found (no --kubeconfig, KUBECONFIG is unset and ~/.kube/config does not exist)"
            ));
        }
        return kube::Config::incluster()
            .map(|c| (c, None))
            .map_err(|e| {
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
    let context = global
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone());
    let options = kube::config::KubeConfigOptions {
        context: global.context.clone(),
        ..Default::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("{source}: {e}"))?;
    config.apply_debug_overrides();
    Ok((config, context))
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
        match kubeconfig_list(&list) {
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

/// The files of a `KUBECONFIG` list merged as kubectl merges them (client-go's loading
/// rules): empty entries are ignored, files that do not exist are skipped, the first file to
/// set a value wins, and a file that exists but cannot be read or parsed is an error naming
/// it. `None` when the list names no file at all; an error when it names only missing ones.
fn kubeconfig_list(list: &std::ffi::OsStr) -> Result<Option<kube::config::Kubeconfig>, String> {
    use kube::config::{Kubeconfig, KubeconfigError};
    let paths: Vec<PathBuf> = std::env::split_paths(list)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    if paths.is_empty() {
        return Ok(None);
    }
    let mut merged: Option<Kubeconfig> = None;
    for path in &paths {
        let next = match Kubeconfig::read_from(path) {
            Ok(k) => k,
            Err(KubeconfigError::ReadConfig(e, _)) if e.kind() == std::io::ErrorKind::NotFound => {
                continue;
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        merged = Some(match merged {
            None => next,
            Some(m) => m
                .merge(next)
                .map_err(|e| format!("{}: {e}", path.display()))?,
        });
    }
    merged.map(Some).ok_or_else(|| {
        "none of these kubeconfig files exists; set KUBECONFIG to an existing file or pass --kubeconfig".to_owned()
    })
}

/// A multi-threaded tokio runtime for the commands that talk to API servers.
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format_args!("cannot start the async runtime: {e}")))
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM: the signal to stop gracefully. The handlers are
/// installed when this is called (inside the runtime), not when it is first awaited: a
/// signal that comes while the command is still busy (loading a release, say) is kept for
/// the first await instead of killing the process.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(interrupt) => {}
                () = wait(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
