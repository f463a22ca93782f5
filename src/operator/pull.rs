//! Releases pulled from a registry: `spec.desiredUpdate.image` naming a **release artifact**
//! (cvo's or Flux's shape, [`crate::oci::shape`]) makes the leader pull it, load it exactly as
//! `cvo operator --release` loads a release (same profile, feature set, exclusions and limits),
//! and lead with it from then on — no new pod. An image that is a container image keeps its
//! old meaning (the operator's Deployment moves there: [`super::self_update`]).
//!
//! - The pullspec is the CVO's: `HOST[:PORT]/REPO@sha256:HEX` or `HOST[:PORT]/REPO:TAG` (no
//!   `oci://`); the first path component names a registry when it has a `.` or a `:` or is
//!   `localhost` (Docker's rule); anything else is not looked up (an image, as before).
//! - A tag is resolved to a digest **once per request** (`spec.desiredUpdate`'s image,
//!   version and force): a tag moved later changes nothing until the request changes, and
//!   other spec edits (a channel, overrides) do not resolve it again. The digest a tag named
//!   is recorded in ClusterVersion's status (condition [`RELEASE_IMAGE_RESOLVED`], naming the
//!   request), so that an operator restarted on its `--release` uses that digest for the same
//!   request instead of resolving the tag again (the "rebuilt from the cluster" rule).
//! - An image in the repository of the container image the operator's Pod runs (its
//!   `operator` container: `ghcr.io/cvo-project/cvo:1.5.0` for an operator running
//!   `ghcr.io/cvo-project/cvo:1.4.0`) is an operator image, and the Deployment moves there
//!   without the registry being asked: the kubelet may reach registries (mirrors, node
//!   credentials) the operator cannot, and moving between its own images worked so before
//!   releases were artifacts. Release artifacts belong in other repositories. Without a Pod
//!   (`POD_NAME`/`POD_NAMESPACE` unset) every pullspec is looked up.
//! - Registry access: loopback registries over plain HTTP, `--insecure-registry`, the Docker
//!   config's credentials, and `--pull-secret NAMESPACE/NAME` (a `kubernetes.io/dockerconfigjson`
//!   Secret, read at every pull — and by `cvo operator` for an OCI `--release` at start,
//!   [`pull_secret_credentials`] — never printed); blobs cached by digest under `--cache-dir`.
//!   Every [`FetchOptions`] the operator uses is built by [`Config::fetch_options`].
//! - Signatures: with `--verify-key`, the resolved digest's cosign signature is checked
//!   before the release is read; one that does not verify is reason
//!   [`IMAGE_VERIFICATION_FAILED`] — unless `spec.desiredUpdate.force`: then the release is
//!   used, [`Verification::Forced`] carrying the CVO's accepted-risk message into its history
//!   entry (`verified: false`); a verified release's entry is `verified: true`.
//! - Failures never stop the release being enforced: a registry that cannot be reached, a
//!   manifest that is not there, a manifest that is neither a release nor an image, a size cap,
//!   an unsafe layer → `ReleaseAccepted=False` reason [`RETRIEVE_PAYLOAD`]; a release that
//!   cannot be loaded or has errors → reason [`PAYLOAD_INTEGRITY`] (the CVO's reasons). A
//!   registry that cannot be reached is "cannot tell": the Deployment is not moved either.
//!   The pull is tried again at a later full pass, not before [`Backoff::RELEASE_PULL`] says
//!   (a spec change tries at once).

use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use tokio::time::Instant;

use crate::cluster::NamespacedName;
use crate::oci::{
    Credentials, Digest, FetchOptions, Kind, Opened, RegistryRef, Resolved, SignatureCheck, Source,
};
use crate::release::{LoadOptions, Release, Verification};
use crate::retry::Backoff;
use crate::status::conditions::RELEASE_ACCEPTED;
use crate::status::{Condition, ConditionStatus};

/// `ReleaseAccepted` / `Progressing` reason when the release image cannot be retrieved (the
/// CVO's).
pub const RETRIEVE_PAYLOAD: &str = "RetrievePayload";
/// `ReleaseAccepted` reason when the retrieved release cannot be loaded or has errors (the
/// CVO's reason for a payload it cannot load).
pub const PAYLOAD_INTEGRITY: &str = "UpdatePayloadIntegrity";
/// `ReleaseAccepted` reason when the release image's signature does not verify with the
/// operator's `--verify-key` keys (the CVO's), and the update is not forced.
pub const IMAGE_VERIFICATION_FAILED: &str = "ImageVerificationFailed";
/// The ClusterVersion condition recording the digest a tag in `spec.desiredUpdate.image` was
/// resolved to, for the request (image, version, force) it was resolved for: a restarted
/// operator uses that digest instead of resolving the tag again (status `True`, reason
/// [`TAG_RESOLVED`]).
pub const RELEASE_IMAGE_RESOLVED: &str = "ReleaseImageResolved";
/// The reason of [`RELEASE_IMAGE_RESOLVED`].
pub const TAG_RESOLVED: &str = "TagResolved";
/// The longest cause a failure's message quotes (a registry's answer may be long).
const MAX_CAUSE: usize = 1024;
/// The key of a `kubernetes.io/dockerconfigjson` Secret.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";
/// The type of a pull Secret.
const DOCKER_CONFIG_TYPE: &str = "kubernetes.io/dockerconfigjson";

/// How the operator pulls releases: from its flags.
#[derive(Clone, Debug)]
pub struct Config {
    /// How OCI sources are read: the options `--release` was read with (`--cache-dir` — in
    /// the shipped Deployment an `emptyDir` —, `--insecure-registry`, the size caps), built by
    /// the command line's one function for them.
    pub fetch: FetchOptions,
    /// `--pull-secret NAMESPACE/NAME`.
    pub pull_secret: Option<NamespacedName>,
    /// `--pull-config NAME`, in the operator's namespace: [`PullAccess`] read from it.
    pub pull_config: Option<NamespacedName>,
    /// How a pulled release is loaded: the profile, feature set, exclusions and limits the
    /// operator's `--release` was loaded with (the release image is set per pull).
    pub load: LoadOptions,
}

impl Config {
    /// A configuration reading with `fetch` and loading with `load`, without a pull Secret.
    pub fn new(fetch: FetchOptions, load: LoadOptions) -> Self {
        Config {
            fetch,
            pull_secret: None,
            pull_config: None,
            load,
        }
    }

    /// The fetch options of a pull: [`Config::fetch`] with what `access` adds: the pull
    /// Secret's credentials (the Docker config's stay in use for other registries), and the
    /// pull configuration's keys (beside `--verify-key`'s: any one suffices) and plain-HTTP
    /// registries.
    pub fn fetch_options(&self, access: PullAccess) -> FetchOptions {
        let mut options = self.fetch.clone();
        options.access.credentials = access.credentials;
        options.access.insecure.extend(access.insecure);
        if !access.keys.is_empty() {
            match &mut options.verify {
                Some(verify) => verify.keys.extend(access.keys),
                None => {
                    options.verify = Some(crate::oci::Verify {
                        keys: access.keys,
                        enforce: true,
                    });
                }
            }
        }
        options
    }
}

/// What a pull adds to the operator's flags, read when it pulls: the pull Secret's
/// credentials and the pull configuration's (`--pull-config`) keys and registries.
#[derive(Clone, Debug, Default)]
pub struct PullAccess {
    pub credentials: Credentials,
    pub keys: Vec<crate::oci::PublicKey>,
    pub insecure: Vec<String>,
}

/// The keys of a pull configuration ConfigMap (`--pull-config`).
pub const PULL_CONFIG_KEYS: &str = "verify-keys";
pub const PULL_CONFIG_INSECURE: &str = "insecure-registries";
pub const PULL_CONFIG_SECRET: &str = "pull-secret";

/// The pull configuration `data` of ConfigMap `name`: its keys (every PEM block of
/// `verify-keys`), registries and pull Secret (in `name`'s namespace); why not, naming the
/// ConfigMap and the key.
fn pull_config_of(
    name: &NamespacedName,
    data: &std::collections::BTreeMap<String, String>,
) -> Result<(PullAccess, Option<NamespacedName>), String> {
    let mut access = PullAccess::default();
    if let Some(text) = data.get(PULL_CONFIG_KEYS) {
        let blocks = pem::parse_many(text).map_err(|e| {
            format!("the pull configuration {name} ({PULL_CONFIG_KEYS}) is not PEM: {e}")
        })?;
        for (i, block) in blocks.iter().enumerate() {
            let key = crate::oci::PublicKey::from_spki(
                block.contents(),
                &format!("{name} {PULL_CONFIG_KEYS} #{}", i + 1),
            )?;
            access.keys.push(key);
        }
    }
    if let Some(text) = data.get(PULL_CONFIG_INSECURE) {
        access.insecure = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
    }
    let secret = data.get(PULL_CONFIG_SECRET).map(|s| NamespacedName {
        namespace: name.namespace.clone(),
        name: s.trim().to_owned(),
    });
    Ok((access, secret))
}

/// `spec.desiredUpdate.image` as a registry reference, when it names one: `HOST[:PORT]/REPO`
/// with `@sha256:HEX` or `:TAG`, the first component a registry host (it has a `.` or a `:`,
/// or is `localhost`). `None`: not a pullspec the operator looks up.
pub fn pullspec(image: &str) -> Option<RegistryRef> {
    let (host, _) = image.split_once('/')?;
    if !(host.contains('.') || host.contains(':') || host == "localhost") {
        return None;
    }
    match Source::parse(&format!("oci://{image}")) {
        Ok(Some(Source::Registry(r))) => Some(r),
        _ => None,
    }
}

/// A release pulled and loaded: what the operator leads with once it switched to it. The
/// extracted directory lives as long as this does.
#[derive(Debug)]
pub struct Pulled {
    /// The release, its image `HOST[:PORT]/REPO@sha256:…`.
    pub release: Release,
    /// The pullspec asked for (a tag, or the digest).
    pub asked: String,
    _opened: Opened,
}

impl Pulled {
    /// `HOST[:PORT]/REPO@sha256:…`.
    pub fn image(&self) -> &str {
        self.release.image.as_deref().unwrap_or_default()
    }
}

/// What the leader switches to, ending its work with the current release.
#[derive(Debug)]
pub enum Switch {
    /// A release pulled from a registry.
    Pulled(Box<Pulled>),
    /// The release the operator started with (`--release`): the spec names the image the
    /// operator runs again, while it led with a pulled release.
    Start,
}

/// What the image asked for means for the leader.
#[derive(Debug)]
pub enum Outcome {
    /// It is the release the operator leads with: apply it.
    Lead,
    /// A container image (or not a pullspec looked up): the operator's Deployment moves there
    /// (a container image is not checked against `--verify-key`: the kubelet runs it).
    Image,
    /// A release artifact, pulled and loaded: lead with it from now on.
    Switch(Box<Pulled>),
    /// It could not be pulled or used: report, keep the current release.
    Failed(PullError),
}

/// Why the release image asked for could not be used, in plain words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullError {
    /// The pullspec asked for.
    pub image: String,
    /// The manifest digest, when resolved.
    pub digest: Option<Digest>,
    /// [`RETRIEVE_PAYLOAD`], [`IMAGE_VERIFICATION_FAILED`] or [`PAYLOAD_INTEGRITY`].
    pub reason: &'static str,
    /// What went wrong.
    pub cause: String,
}

impl PullError {
    /// `ReleaseAccepted=False` and `Progressing=False` saying the release `version` (the one
    /// led with) stays applied. `asked_version`: `spec.desiredUpdate.version` (may be empty).
    pub fn conditions(
        &self,
        cv: Option<&DynamicObject>,
        meanwhile: Meanwhile<'_>,
        asked_version: &str,
    ) -> Vec<Condition> {
        let meanwhile = match meanwhile {
            Meanwhile::Stays(version) => format!("release {version} stays applied"),
            Meanwhile::Nothing { at } => format!(
                "nothing is applied: the cluster is at the release of image {at}, which this operator does not hold"
            ),
        };
        let at = match &self.digest {
            Some(d) => format!(" (digest {d})"),
            None => String::new(),
        };
        let step = if self.reason == PAYLOAD_INTEGRITY {
            "Loading payload failed"
        } else {
            "Retrieving payload failed"
        };
        let accepted = Condition::new(
            RELEASE_ACCEPTED,
            ConditionStatus::False,
            self.reason,
            format!(
                "{step} version={asked_version:?} image={:?} failure={}{at}; {meanwhile}",
                self.image, self.cause
            ),
        );
        let current = cv.and_then(crate::status::clusterversion::current_version);
        let at_version = match current {
            Some(c) => format!("Cluster version is {c}: "),
            None => String::new(),
        };
        let progressing = Condition::new(
            "Progressing",
            ConditionStatus::False,
            self.reason,
            format!(
                "{at_version}{meanwhile}; the release image {}{at} cannot be used yet (see ReleaseAccepted), tried again at a later full pass",
                self.image
            ),
        );
        vec![accepted, progressing]
    }
}

/// What the operator does while a release image cannot be used.
#[derive(Clone, Copy, Debug)]
pub enum Meanwhile<'a> {
    /// The release it leads with (this version), which the cluster is at, stays applied.
    Stays(&'a str),
    /// Nothing: the cluster is at the release of image `at`, which it does not hold (a
    /// release pulled before a restart), and applying its own would put an older one back.
    Nothing { at: &'a str },
}

/// The release image the cluster is at (`status.desired.image`) when it may be a release
/// pulled earlier (before a restart or a failover) and is not `leading`: a pulled release is
/// always recorded by digest. (A tag there is the image of a release baked into an operator
/// image, which the cluster updates from as before.)
pub fn cluster_at(cv: Option<&DynamicObject>, leading: Option<&str>) -> Option<String> {
    cv.and_then(crate::status::clusterversion::desired_image)
        .filter(|at| Some(at.as_str()) != leading && at.contains("@sha256:"))
}

/// What a full pass looks up: the image `spec.desiredUpdate` asks for; without one, the
/// release image the cluster is at (`cluster_at`, when the caller may go back to it: rebuilt
/// from the cluster, so that a restart never puts the start release back over a pulled one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub image: String,
    /// The image is the cluster's (`status.desired.image`), not one asked for: a container
    /// image there moves nothing, and `force` does not apply.
    pub from_status: bool,
    version: String,
    force: bool,
}

impl Lookup {
    /// The lookup of `desired` (`spec.desiredUpdate`), else of `cluster_at`.
    pub fn of(
        desired: Option<&crate::status::spec::DesiredUpdate>,
        cluster_at: Option<&str>,
    ) -> Option<Lookup> {
        let version = desired.map_or_else(String::new, |d| d.version.clone());
        match desired.filter(|d| !d.image.is_empty()) {
            Some(d) => Some(Lookup {
                image: d.image.clone(),
                from_status: false,
                version,
                force: d.force,
            }),
            None => cluster_at.map(|at| Lookup {
                image: at.to_owned(),
                from_status: true,
                version,
                force: false,
            }),
        }
    }

    /// The request this lookup makes of [`Puller::consider`].
    pub fn asked(&self) -> Asked<'_> {
        Asked {
            image: &self.image,
            version: &self.version,
            force: self.force,
        }
    }
}

/// What is asked for: `spec.desiredUpdate`'s image, version and force (or the image of
/// `status.desired` the cluster is at, with no force).
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub image: &'a str,
    pub version: &'a str,
    pub force: bool,
}

/// Which request a resolution or a failure is for: another `desiredUpdate` resolves a tag
/// again and tries at once; other spec edits (a channel, overrides) change nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    image: String,
    version: String,
    force: bool,
}

impl Key {
    /// The record of this request resolved to `digest` in `reference`'s repository: the
    /// [`RELEASE_IMAGE_RESOLVED`] condition.
    fn record(&self, reference: &RegistryRef, digest: &Digest) -> Condition {
        Condition::new(
            RELEASE_IMAGE_RESOLVED,
            ConditionStatus::True,
            TAG_RESOLVED,
            format!(
                "{}{digest}; that digest is used until spec.desiredUpdate changes",
                self.record_prefix(reference)
            ),
        )
    }

    /// What the record of this request says before the digest.
    fn record_prefix(&self, reference: &RegistryRef) -> String {
        format!(
            "spec.desiredUpdate image={:?} version={:?} force={} resolved to {}@",
            self.image,
            self.version,
            self.force,
            reference.name()
        )
    }
}

/// The digest `conditions` record for the request `key` ([`Key::record`]), if any.
fn recorded(conditions: &[Condition], key: &Key, reference: &RegistryRef) -> Option<Digest> {
    let record = conditions
        .iter()
        .find(|c| c.type_ == RELEASE_IMAGE_RESOLVED)?;
    let rest = record.message.strip_prefix(&key.record_prefix(reference))?;
    Digest::parse(rest.split(';').next()?).ok()
}

/// Records in ClusterVersion that `key`'s tag was resolved to `digest` ([`Key::record`]); a
/// failure is logged (the process remembers it still; a restart would resolve the tag again).
async fn write_record(
    cluster: &crate::cluster::Cluster,
    key: &Key,
    reference: &RegistryRef,
    digest: &Digest,
) {
    let written = crate::status::clusterversion::write_update(
        cluster,
        &crate::apply::RetryPolicy::default(),
        crate::status::clusterversion::Update::Conditions {
            conditions: &[key.record(reference, digest)],
            observed: None,
        },
    )
    .await;
    if let Err(e) = written {
        tracing::warn!(image = %key.image, %digest, error = %e, "could not record the digest the tag resolved to in ClusterVersion: a restart resolves the tag again");
    }
}

/// A failure, and when the next attempt may be made.
#[derive(Debug)]
struct Failure {
    key: Key,
    attempts: u32,
    retry_at: Instant,
    error: PullError,
}

/// What the puller remembers while the process lives (never across a restart).
#[derive(Debug, Default)]
struct Memory {
    /// The last pullspec resolved, for the request it was resolved for.
    resolved: Option<(Key, Resolved)>,
    /// The last failure.
    failure: Option<Failure>,
}

/// Pulls the releases `spec.desiredUpdate.image` names; kept by [`super::run`] across
/// leaders and switches.
#[derive(Debug)]
pub struct Puller {
    config: Config,
    memory: Mutex<Memory>,
}

impl Puller {
    pub fn new(config: Config) -> Self {
        Puller {
            config,
            memory: Mutex::new(Memory::default()),
        }
    }

    /// What the image `asked` for means, for an operator leading with the release of image
    /// `leading`: pulls and loads a release artifact it does not lead with yet. Without
    /// `--verify-key`, an image of `operator_repository` (the repository of the container
    /// image the operator's Pod runs) is an operator image without asking the registry (see
    /// the module doc); with it, every image is looked up and its signature checked.
    /// `asked.force`: a signature that does not verify is used anyway, the failure recorded as
    /// an accepted risk.
    pub async fn consider(
        &self,
        client: &kube::Client,
        asked: Asked<'_>,
        leading: Option<&str>,
        operator_repository: Option<&str>,
    ) -> Outcome {
        let image = asked.image;
        if leading == Some(image) {
            return Outcome::Lead;
        }
        let Some(reference) = pullspec(image) else {
            return Outcome::Image;
        };
        if self.config.fetch.verify.is_none()
            && operator_repository == Some(reference.name().as_str())
        {
            return Outcome::Image;
        }
        let key = Key {
            image: image.to_owned(),
            version: asked.version.to_owned(),
            force: asked.force,
        };
        let force = asked.force;
        if let Some(error) = self.waiting(&key) {
            return Outcome::Failed(error);
        }
        match self.pull(client, &key, &reference, leading, force).await {
            Ok(outcome) => {
                self.lock().failure = None;
                outcome
            }
            Err(error) => {
                self.failed(key, error.clone());
                Outcome::Failed(error)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last failure for `key`, while its backoff runs.
    fn waiting(&self, key: &Key) -> Option<PullError> {
        let memory = self.lock();
        let f = memory.failure.as_ref()?;
        (f.key == *key && Instant::now() < f.retry_at).then(|| f.error.clone())
    }

    /// Records a failure for `key` (the attempts counted while the key stays the same).
    fn failed(&self, key: Key, error: PullError) {
        let mut memory = self.lock();
        let attempts = match &memory.failure {
            Some(f) if f.key == key => f.attempts + 1,
            _ => 1,
        };
        let wait = Backoff::RELEASE_PULL.delay(attempts);
        tracing::error!(image = %error.image, digest = ?error.digest.as_ref().map(ToString::to_string), reason = error.reason, retry_in = ?wait, "{}", error.cause);
        memory.failure = Some(Failure {
            key,
            attempts,
            retry_at: Instant::now() + wait,
            error,
        });
    }

    /// The resolution of `key` remembered for its request, else the digest recorded for it
    /// in ClusterVersion (a tag resolved before a restart: [`RELEASE_IMAGE_RESOLVED`]), else a
    /// new one — recorded there when a tag names a release artifact. Why not, in plain words.
    async fn resolve(
        &self,
        client: &kube::Client,
        key: &Key,
        reference: &RegistryRef,
        options: &FetchOptions,
    ) -> Result<Resolved, String> {
        if let Some((k, r)) = &self.lock().resolved
            && k == key
        {
            return Ok(r.clone());
        }
        let tag = reference
            .tag
            .as_deref()
            .filter(|_| reference.digest.is_none());
        let cluster = crate::cluster::Cluster::new(client.clone());
        let recorded = match tag {
            Some(_) => self.recorded(&cluster, key, reference).await?,
            None => None,
        };
        let pinned = RegistryRef {
            digest: recorded.clone().or_else(|| reference.digest.clone()),
            ..reference.clone()
        };
        let resolved = crate::oci::resolve(&pinned, options)
            .await
            .map_err(|e| self.access_hint(e.to_string()))?;
        match (tag, recorded) {
            (Some(tag), Some(_)) => {
                tracing::info!(image = %key.image, %tag, digest = %resolved.digest, "the tag spec.desiredUpdate.image names was resolved before (ClusterVersion records it): using that digest until the spec changes");
            }
            (Some(tag), None) => {
                tracing::info!(image = %key.image, %tag, digest = %resolved.digest, "resolved the tag spec.desiredUpdate.image names: kept until the spec changes");
                if matches!(resolved.kind, Kind::Release(_)) {
                    write_record(&cluster, key, reference, &resolved.digest).await;
                }
            }
            (None, _) => {}
        }
        self.lock().resolved = Some((key.clone(), resolved.clone()));
        Ok(resolved)
    }

    /// The digest ClusterVersion records for the request `key` (its tag resolved by an
    /// earlier process), if any. ClusterVersion that cannot be read is an error: resolving
    /// the tag again could move the cluster to another release (fail closed).
    async fn recorded(
        &self,
        cluster: &crate::cluster::Cluster,
        key: &Key,
        reference: &RegistryRef,
    ) -> Result<Option<Digest>, String> {
        let retry = crate::apply::RetryPolicy::default();
        let cv = crate::status::clusterversion::read(cluster, &retry)
            .await
            .map_err(|e| format!("looking up the digest recorded for this tag: {e}"))?;
        Ok(cv.and_then(|cv| {
            recorded(
                &crate::status::clusterversion::conditions(&cv),
                key,
                reference,
            )
        }))
    }

    /// The options of a pull: the pull Secret's credentials, and `--verify-key` enforced
    /// unless `force`.
    async fn options(&self, client: &kube::Client, force: bool) -> Result<FetchOptions, String> {
        let access = self.access(client).await?;
        let mut options = self.config.fetch_options(access);
        if let Some(verify) = &mut options.verify {
            verify.enforce = !force;
        }
        Ok(options)
    }

    async fn pull(
        &self,
        client: &kube::Client,
        key: &Key,
        reference: &RegistryRef,
        leading: Option<&str>,
        force: bool,
    ) -> Result<Outcome, PullError> {
        // A registry's or token server's text is cut: it reaches ClusterVersion.
        let fail = |digest: Option<&Digest>, reason, cause: String| PullError {
            image: key.image.clone(),
            digest: digest.cloned(),
            reason,
            cause: crate::status::conditions::truncate(&cause, MAX_CAUSE),
        };
        let options = self
            .options(client, force)
            .await
            .map_err(|cause| fail(None, RETRIEVE_PAYLOAD, cause))?;
        let resolved = self
            .resolve(client, key, reference, &options)
            .await
            .map_err(|cause| fail(None, RETRIEVE_PAYLOAD, cause))?;
        let digest = resolved.digest.clone();
        let at = format!("{}@{digest}", reference.name());
        // Reading the signature or the release of `digest` failed: a signature that does not
        // verify (and no force) is ImageVerificationFailed, anything else RetrievePayload.
        let retrieval = |e: crate::oci::OciError| match e {
            crate::oci::OciError::Verification { why, .. } => fail(
                Some(&digest),
                IMAGE_VERIFICATION_FAILED,
                format!("The update cannot be verified: {why}"),
            ),
            e => fail(
                Some(&digest),
                RETRIEVE_PAYLOAD,
                self.access_hint(e.to_string()),
            ),
        };
        match resolved.kind {
            Kind::Image(what) => {
                tracing::debug!(image = %key.image, %digest, "spec.desiredUpdate.image is {what}, not a release artifact");
                // With --verify-key, an operator image is held to the keys as a release is:
                // the operator's Deployment would run it.
                if options.verify.is_some() {
                    let check = crate::oci::verify_signature(reference, &digest, &options)
                        .await
                        .map_err(retrieval)?;
                    if let SignatureCheck::Failed { why } = check {
                        tracing::warn!(image = %key.image, %digest, "the operator image cannot be verified, but continuing anyway because the update was forced: {why}");
                    }
                }
                return Ok(Outcome::Image);
            }
            Kind::Release(_) if leading == Some(at.as_str()) => return Ok(Outcome::Lead),
            Kind::Release(_) => {}
        }
        let pinned = Source::Registry(RegistryRef {
            digest: Some(digest.clone()),
            ..reference.clone()
        });
        let started = Instant::now();
        let opened = crate::oci::open(&pinned, &options)
            .await
            .map_err(retrieval)?;
        let release = self
            .load(&opened, &at)
            .await
            .map_err(|cause| fail(Some(&digest), PAYLOAD_INTEGRITY, cause))?;
        tracing::info!(image = %at, asked = %key.image, version = %crate::status::conditions::version_text(&release), manifests = release.manifests.len(), seconds = started.elapsed().as_secs_f64(), "pulled the release spec.desiredUpdate.image names: leading with it from now on");
        Ok(Outcome::Switch(Box::new(Pulled {
            release,
            asked: key.image.clone(),
            _opened: opened,
        })))
    }

    /// The release `opened` (image `at`) loaded as `--release` is, with what its signature
    /// check found; why it cannot be used, in plain words.
    async fn load(&self, opened: &Opened, at: &str) -> Result<Release, String> {
        let dir = opened.dir();
        let load = LoadOptions {
            release_image: Some(at.to_owned()),
            ..self.config.load.clone()
        };
        let (mut release, _) =
            tokio::task::spawn_blocking(move || crate::release::load_selected(&dir, &load))
                .await
                .map_err(|e| format!("loading was interrupted: {e}"))
                .and_then(|r| r)
                .map_err(|cause| format!("the release cannot be loaded: {cause}"))?;
        release.name_files_relative_to_root();
        if release.has_errors() {
            return Err(format!("the release has {}", release.errors_line()));
        }
        release.verification = match &opened.signature {
            SignatureCheck::NotAsked => Verification::NotChecked,
            SignatureCheck::Verified { .. } => Verification::Verified,
            SignatureCheck::Failed { why } => {
                let version = crate::status::conditions::version_text(&release);
                let risk = format!(
                    "Target release version={version:?} image={at:?} cannot be verified, but continuing anyway because the update was forced: The update cannot be verified: {why}"
                );
                tracing::warn!(image = %at, "{risk}");
                Verification::Forced(risk)
            }
        };
        for d in &release.diagnostics {
            tracing::warn!(image = %at, "{d}");
        }
        Ok(release)
    }

    /// `cause`, with where the operator's credentials come from when the registry refused
    /// access (the registry's message speaks of `docker login`, the command line's way).
    fn access_hint(&self, cause: String) -> String {
        if !cause.contains("refused access") {
            return cause;
        }
        match &self.config.pull_secret {
            Some(secret) => format!(
                "{cause}; the operator used the credentials of the pull Secret {secret} for it, if it names this registry"
            ),
            None => format!(
                "{cause}; the operator takes credentials from a kubernetes.io/dockerconfigjson Secret named by --pull-secret NAMESPACE/NAME"
            ),
        }
    }

    /// What this pull adds to the flags ([`PullAccess`]): the pull configuration (when
    /// `--pull-config` names one; absent, nothing) and the pull Secret's credentials (the
    /// flag's, else the configuration's), read now. Fails closed: a configuration or Secret
    /// that cannot be read fails the pull.
    pub(super) async fn access(&self, client: &kube::Client) -> Result<PullAccess, String> {
        let mut secret = self.config.pull_secret.clone();
        let mut access = PullAccess::default();
        if let Some(name) = &self.config.pull_config {
            let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
                Api::namespaced(client.clone(), &name.namespace);
            let found = api.get_opt(&name.name).await.map_err(|e| {
                let why = match &e {
                    kube::Error::Api(s) if s.code == 403 => "the operator may not read it (403 Forbidden): grant get on this ConfigMap (`cvo rbac` prints the rule when the operator's Deployment passes --pull-config)".to_owned(),
                    e => api_error(e),
                };
                format!("reading the pull configuration {name} (--pull-config): {why}")
            })?;
            if let Some(found) = found {
                let (read, named) = pull_config_of(name, &found.data.unwrap_or_default())?;
                access = read;
                secret = secret.or(named);
            }
        }
        if let Some(secret) = &secret {
            access.credentials = pull_secret_credentials(client, secret).await?;
        }
        Ok(access)
    }
}

/// The credentials of the pull Secret `secret` (`--pull-secret`), read now; why not, in plain
/// words (never quoting its data).
pub async fn pull_secret_credentials(
    client: &kube::Client,
    secret: &NamespacedName,
) -> Result<Credentials, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let found = api
        .get_opt(&secret.name)
        .await
        .map_err(|e| format!("reading the pull Secret {secret} (--pull-secret): {}", api_error(&e)))?
        .ok_or_else(|| format!("the pull Secret {secret} (--pull-secret) does not exist: create it (kubectl create secret docker-registry) or fix the flag"))?;
    credentials_of(secret, &found)
}

/// A failed read of the pull Secret in plain words.
fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => "the operator may not read it (403 Forbidden): grant get on this Secret (`cvo rbac` prints the rule when the operator's Deployment passes --pull-secret)".to_owned(),
        kube::Error::Api(s) => format!("the API server answered {}: {}", s.code, s.message),
        other => format!(
            "cannot reach the API server: {}",
            crate::cluster::request_error::cause(other)
        ),
    }
}

/// The credentials of the pull Secret `found` (named `name` in messages).
fn credentials_of(name: &NamespacedName, found: &Secret) -> Result<Credentials, String> {
    let type_ = found.type_.as_deref().unwrap_or("Opaque");
    if type_ != DOCKER_CONFIG_TYPE {
        return Err(format!(
            "the pull Secret {name} (--pull-secret) is of type {type_}, not {DOCKER_CONFIG_TYPE}: create it with kubectl create secret docker-registry"
        ));
    }
    let bytes = found
        .data
        .as_ref()
        .and_then(|d| d.get(DOCKER_CONFIG_KEY))
        .ok_or_else(|| {
            format!("the pull Secret {name} (--pull-secret) has no key {DOCKER_CONFIG_KEY}")
        })?;
    Credentials::from_docker_config(&bytes.0)
        .map_err(|why| format!("the pull Secret {name} (--pull-secret): {why}"))
}

/// How long the last failure's backoff still runs.
#[cfg(test)]
fn retry_in(puller: &Puller) -> Option<std::time::Duration> {
    puller
        .lock()
        .failure
        .as_ref()
        .map(|f| f.retry_at.saturating_duration_since(Instant::now()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn the_pull_configuration_adds_keys_registries_and_a_secret_to_the_flags() {
        let key = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/oci/keys/p256.pub"
        ))
        .unwrap();
        let name = NamespacedName {
            namespace: "cluster-version".into(),
            name: "cvo-pull-config".into(),
        };
        let data: std::collections::BTreeMap<String, String> = [
            (PULL_CONFIG_KEYS.to_owned(), format!("{key}{key}")),
            (
                PULL_CONFIG_INSECURE.to_owned(),
                "10.0.0.9:5000\n\n reg:80 \n".to_owned(),
            ),
            (PULL_CONFIG_SECRET.to_owned(), "pull".to_owned()),
        ]
        .into();
        let (access, secret) = pull_config_of(&name, &data).unwrap();
        assert_eq!(access.keys.len(), 2);
        assert_eq!(access.insecure, ["10.0.0.9:5000", "reg:80"]);
        assert_eq!(secret.unwrap().to_string(), "cluster-version/pull");
        let config = config(std::path::Path::new("/nonexistent"));
        let options = config.fetch_options(access);
        assert_eq!(options.access.insecure, ["10.0.0.9:5000", "reg:80"]);
        let verify = options.verify.expect("keys added: verified");
        assert!(verify.enforce);
        assert_eq!(verify.keys.len(), 2);
        // Not PEM, or not a P-256 key: the pull fails, naming the ConfigMap.
        let bad: std::collections::BTreeMap<String, String> = [(
            PULL_CONFIG_KEYS.to_owned(),
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".to_owned(),
        )]
        .into();
        let err = pull_config_of(&name, &bad).unwrap_err();
        assert!(err.contains("cluster-version/cvo-pull-config"), "{err}");
    }

    #[test]
    fn pullspecs_name_a_registry_host() {
        let hex = "a".repeat(64);
        let r = pullspec(&format!("127.0.0.1:5000/cvo/release@sha256:{hex}")).unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.repository.as_str(),
                r.digest.unwrap().hex()
            ),
            ("127.0.0.1:5000", "cvo/release", hex.as_str())
        );
        let r = pullspec("quay.io/cvo/release:1.1.0").unwrap();
        assert_eq!(r.tag.as_deref(), Some("1.1.0"));
        assert!(pullspec("localhost/cvo:1").is_some());
        // Not looked up: no registry host (Docker Hub short names), or not a pullspec.
        for image in [
            "img:1",
            "cvo/release:1",
            "oci://quay.io/x:1",
            "quay.io/x",
            "",
        ] {
            assert!(pullspec(image).is_none(), "{image}");
        }
    }

    fn config(cache: &std::path::Path) -> Config {
        Config::new(
            FetchOptions {
                cache_dir: Some(cache.to_owned()),
                access: crate::oci::Access::default(),
                caps: crate::oci::Caps {
                    max_file_bytes: 1 << 20,
                    max_release_bytes: 1 << 20,
                },
                verify: None,
            },
            LoadOptions::default(),
        )
    }

    fn puller() -> (Puller, tempfile::TempDir) {
        let cache = tempfile::tempdir().unwrap();
        (Puller::new(config(cache.path())), cache)
    }

    /// `spec.desiredUpdate` asking for `image` and `version`, not forced.
    fn asked<'a>(image: &'a str, version: &'a str) -> Asked<'a> {
        Asked {
            image,
            version,
            force: false,
        }
    }

    fn client() -> (memory_apiserver::MemoryServer, kube::Client) {
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        let client = server.client();
        (server, client)
    }

    #[tokio::test]
    async fn the_release_led_with_and_images_without_a_registry_are_not_looked_up() {
        let (_server, client) = client();
        let (p, _cache) = puller();
        let at = format!("127.0.0.1:1/cvo/x@sha256:{}", "b".repeat(64));
        assert!(matches!(
            p.consider(&client, asked(&at, "1"), Some(&at), None).await,
            Outcome::Lead
        ));
        assert!(matches!(
            p.consider(&client, asked("img:2", "1"), None, None).await,
            Outcome::Image
        ));
        // An image of the repository the operator's Pod runs: an operator image, though its
        // registry (nothing listens on port 1) cannot be reached.
        assert!(matches!(
            p.consider(
                &client,
                asked("127.0.0.1:1/cvo/cvo:1.5.0", "1"),
                None,
                Some("127.0.0.1:1/cvo/cvo")
            )
            .await,
            Outcome::Image
        ));
    }

    #[tokio::test]
    async fn an_unreachable_registry_fails_closed_and_waits_before_trying_again() {
        // Nothing listens on port 1: the registry cannot be reached.
        let (_server, client) = client();
        let (p, _cache) = puller();
        let image = "127.0.0.1:1/cvo/release:1.1.0";
        let Outcome::Failed(e) = p.consider(&client, asked(image, "3"), None, None).await else {
            panic!("not a failure")
        };
        assert_eq!(e.reason, RETRIEVE_PAYLOAD);
        assert!(
            e.cause.contains("cannot reach the registry 127.0.0.1:1"),
            "{}",
            e.cause
        );
        let first = retry_in(&p).unwrap();
        assert!(first > Duration::from_secs(5), "{first:?}");
        // Within the backoff the same failure is reported, without asking the registry.
        let started = std::time::Instant::now();
        let Outcome::Failed(again) = p.consider(&client, asked(image, "3"), None, None).await
        else {
            panic!("not a failure")
        };
        assert_eq!(again, e);
        assert!(started.elapsed() < Duration::from_secs(1));
        // Another request tries at once (and fails again, counted afresh).
        let Outcome::Failed(_) = p.consider(&client, asked(image, "4"), None, None).await else {
            panic!("not a failure")
        };
        assert!(retry_in(&p).unwrap() <= first + Duration::from_secs(1));
        // A pullspec by digest: the same.
        let pinned = format!("127.0.0.1:1/cvo/release@{}", Digest::of(b"m"));
        let Outcome::Failed(e) = p.consider(&client, asked(&pinned, ""), None, None).await else {
            panic!("not a failure")
        };
        assert!(e.cause.contains("cannot reach the registry"), "{}", e.cause);
    }

    #[tokio::test]
    async fn a_tag_is_resolved_once_per_request() {
        let (_server, client) = client();
        let (p, _cache) = puller();
        let digest = Digest::of(b"manifest");
        p.lock().resolved = Some((
            Key {
                image: "127.0.0.1:1/cvo/x:1".to_owned(),
                version: "5".to_owned(),
                force: false,
            },
            Resolved {
                digest: digest.clone(),
                kind: Kind::Release(crate::oci::shape::Shape::Cvo),
            },
        ));
        // The same request (other spec edits change nothing): the remembered digest, which is
        // the release led with.
        let leading = format!("127.0.0.1:1/cvo/x@{digest}");
        assert!(matches!(
            p.consider(
                &client,
                asked("127.0.0.1:1/cvo/x:1", "5"),
                Some(&leading),
                None
            )
            .await,
            Outcome::Lead
        ));
        // Another request resolves again (here: the registry cannot be reached).
        assert!(matches!(
            p.consider(
                &client,
                asked("127.0.0.1:1/cvo/x:1", "6"),
                Some(&leading),
                None
            )
            .await,
            Outcome::Failed(_)
        ));
    }

    /// The record a tag's resolution leaves in ClusterVersion names the request it was made
    /// for: the same request reads the digest back; another one (version, force, image, or
    /// another repository) finds none.
    #[test]
    fn the_recorded_digest_is_read_back_for_the_same_request_only() {
        let reference = pullspec("127.0.0.1:5000/cvo/release:next").unwrap();
        let key = |image: &str, version: &str, force| Key {
            image: image.to_owned(),
            version: version.to_owned(),
            force,
        };
        let asked = key("127.0.0.1:5000/cvo/release:next", "", false);
        let digest = Digest::of(b"manifest");
        let record = asked.record(&reference, &digest);
        assert_eq!(
            (record.type_.as_str(), record.status, record.reason.as_str()),
            (RELEASE_IMAGE_RESOLVED, ConditionStatus::True, TAG_RESOLVED)
        );
        assert_eq!(
            record.message,
            format!(
                "spec.desiredUpdate image=\"127.0.0.1:5000/cvo/release:next\" version=\"\" force=false resolved to 127.0.0.1:5000/cvo/release@{digest}; that digest is used until spec.desiredUpdate changes"
            )
        );
        let others = [
            Condition::new("Available", ConditionStatus::True, "x", "y"),
            record,
        ];
        assert_eq!(recorded(&others, &asked, &reference), Some(digest));
        for other in [
            key("127.0.0.1:5000/cvo/release:next", "1.2.0", false),
            key("127.0.0.1:5000/cvo/release:next", "", true),
            key("127.0.0.1:5000/cvo/release:other", "", false),
        ] {
            assert_eq!(recorded(&others, &other, &reference), None, "{other:?}");
        }
        let elsewhere = pullspec("127.0.0.1:5000/cvo/mirror:next").unwrap();
        assert_eq!(recorded(&others, &asked, &elsewhere), None);
        assert_eq!(recorded(&others[..1], &asked, &reference), None);
    }

    #[test]
    fn failures_are_worded_with_the_pullspec_the_digest_and_the_cause() {
        let e = PullError {
            image: "127.0.0.1:5000/cvo/release:1.1.0".into(),
            digest: Some(Digest::of(b"m")),
            reason: RETRIEVE_PAYLOAD,
            cause: "the layer has 9 bytes, more than --max-release-bytes 1: refused".into(),
        };
        let c = e.conditions(None, Meanwhile::Stays("1.0.0"), "1.1.0");
        assert_eq!(
            (c[0].type_.as_str(), c[0].status, c[0].reason.as_str()),
            (RELEASE_ACCEPTED, ConditionStatus::False, RETRIEVE_PAYLOAD)
        );
        assert_eq!(
            c[0].message,
            format!(
                "Retrieving payload failed version=\"1.1.0\" image=\"127.0.0.1:5000/cvo/release:1.1.0\" failure=the layer has 9 bytes, more than --max-release-bytes 1: refused (digest {}); release 1.0.0 stays applied",
                Digest::of(b"m")
            )
        );
        assert_eq!(
            (c[1].type_.as_str(), c[1].status),
            ("Progressing", ConditionStatus::False)
        );
        assert!(
            c[1].message.starts_with("release 1.0.0 stays applied"),
            "{}",
            c[1].message
        );
        let integrity = PullError {
            reason: PAYLOAD_INTEGRITY,
            digest: None,
            ..e
        };
        assert!(
            integrity.conditions(None, Meanwhile::Stays("1.0.0"), "")[0]
                .message
                .starts_with("Loading payload failed version=\"\"")
        );
    }

    #[test]
    fn the_pull_secret_must_be_a_docker_config_and_is_never_quoted() {
        let name: NamespacedName = "ns/pull".parse().unwrap();
        let secret = |type_: &str, key: &str, value: &[u8]| Secret {
            type_: Some(type_.to_owned()),
            data: Some([(key.to_owned(), ByteString(value.to_vec()))].into()),
            ..Secret::default()
        };
        let good = br#"{"auths":{"127.0.0.1:5000":{"username":"u","password":"hunter2"}}}"#;
        let c =
            credentials_of(&name, &secret(DOCKER_CONFIG_TYPE, DOCKER_CONFIG_KEY, good)).unwrap();
        assert_eq!(c.registries().collect::<Vec<_>>(), ["127.0.0.1:5000"]);
        let err = credentials_of(&name, &secret("Opaque", DOCKER_CONFIG_KEY, good)).unwrap_err();
        assert!(
            err.contains("ns/pull") && err.contains("type Opaque"),
            "{err}"
        );
        let err = credentials_of(&name, &secret(DOCKER_CONFIG_TYPE, "config", good)).unwrap_err();
        assert!(err.contains("no key .dockerconfigjson"), "{err}");
        let err = credentials_of(
            &name,
            &secret(DOCKER_CONFIG_TYPE, DOCKER_CONFIG_KEY, b"hunter2"),
        )
        .unwrap_err();
        assert!(err.contains("ns/pull") && !err.contains("hunter2"), "{err}");
    }
}
