//! The registry client: the OCI distribution protocol through `oci-client` (reqwest, rustls
//! with the ring provider), with `cvo`'s rules on top.
//!
//! - Transport: a loopback registry (127.0.0.0/8, `::1`, `localhost`) is reached over plain
//!   HTTP, as Docker does; any other host only over HTTPS, unless `--insecure-registry
//!   HOST[:PORT]` names it (then plain HTTP). Server certificates are checked against the
//!   system's roots (rustls-platform-verifier).
//! - Credentials: from the Docker config (`$DOCKER_CONFIG/config.json`, else
//!   `~/.docker/config.json`, with its credential helpers and store), looked up by `HOST[:PORT]`;
//!   a user name and password are used for Basic auth or to get a bearer token from the
//!   registry's token server (its realm), as the registry's challenge asks; an identity token
//!   (`identitytoken`, an OAuth2 refresh token) is exchanged at the realm for a bearer token
//!   per repository and operation (`super::oauth`). Without any, access is anonymous. No
//!   credential or token is ever printed or logged.
//! - Timeouts and retries: connecting times out after 10 s and a stalled read after 60 s; a
//!   transport error, a timeout, 429 or 5xx is retried under the project's one request
//!   backoff ([`Backoff::REQUEST`]: 200 ms doubling to 5 s, 6 attempts); anything else
//!   fails at once. A registry that cannot be reached is a plain message naming it.

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use futures::StreamExt;
use oci_client::Reference;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::token_cache::RegistryOperation;

use super::shape::{ACCEPTED_MEDIA_TYPES, Descriptor};
use super::{Digest, MAX_MANIFEST_BYTES, OciError};
use crate::retry::Backoff;

/// How registries are reached: the flags of every command that reads or pushes.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// `--insecure-registry`: `HOST[:PORT]`s reached over plain HTTP.
    pub insecure: Vec<String>,
    /// Credentials the caller holds (the operator's pull Secret), used before the Docker
    /// config's for the registries they name.
    pub credentials: Credentials,
}

/// Registry credentials from a Docker config document (`{"auths": {"HOST[:PORT]": {...}}}`,
/// the content of a `kubernetes.io/dockerconfigjson` Secret), by registry. Never printed:
/// its `Debug` names the registries only.
#[derive(Clone, Default)]
pub struct Credentials {
    by_registry: std::collections::BTreeMap<String, Credential>,
}

#[derive(Clone)]
enum Credential {
    Basic(String, String),
    Token(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("registries", &self.by_registry.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Credentials {
    /// Reads a Docker config document. Its entries may give `auth` (base64 of
    /// `user:password`), `username` and `password`, or `identitytoken`; a key written as a URL
    /// (`https://HOST[:PORT]/v1/`) counts as its `HOST[:PORT]`. An error says what is wrong in
    /// plain words, never quoting a value.
    pub fn from_docker_config(bytes: &[u8]) -> Result<Credentials, String> {
        use base64::Engine as _;
        #[derive(serde::Deserialize)]
        struct Config {
            #[serde(default)]
            auths: std::collections::BTreeMap<String, Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            #[serde(default)]
            auth: Option<String>,
            #[serde(default)]
            username: Option<String>,
            #[serde(default)]
            password: Option<String>,
            #[serde(default)]
            identitytoken: Option<String>,
        }
        let config: Config = serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "it is not a Docker config (JSON with \"auths\") at line {} column {}",
                e.line(),
                e.column()
            )
        })?;
        let mut by_registry = std::collections::BTreeMap::new();
        for (key, entry) in config.auths {
            let registry = registry_key(&key);
            let credential = if let Some(token) = entry.identitytoken.filter(|t| !t.is_empty()) {
                Credential::Token(token)
            } else if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
                Credential::Basic(user.clone(), password.clone())
            } else if let Some(auth) = entry.auth.filter(|a| !a.is_empty()) {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| {
                        format!("the auth field for {registry} is not base64 of user:password")
                    })?;
                let Some((user, password)) = decoded.split_once(':') else {
                    return Err(format!(
                        "the auth field for {registry} is not base64 of user:password"
                    ));
                };
                Credential::Basic(user.to_owned(), password.to_owned())
            } else {
                continue;
            };
            by_registry.insert(registry, credential);
        }
        Ok(Credentials { by_registry })
    }

    /// The registries credentials are held for.
    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.by_registry.keys().map(String::as_str)
    }

    fn get(&self, registry: &str) -> Option<RegistryAuth> {
        self.by_registry.get(registry).map(|c| match c {
            Credential::Basic(u, p) => RegistryAuth::Basic(u.clone(), p.clone()),
            Credential::Token(t) => RegistryAuth::Bearer(t.clone()),
        })
    }
}

/// `HOST[:PORT]` of a Docker config's key (`https://quay.io/v1/` → `quay.io`).
fn registry_key(key: &str) -> String {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

impl Access {
    /// Whether `registry` (`HOST[:PORT]`) is reached over plain HTTP.
    pub fn plain_http(&self, registry: &str) -> bool {
        is_loopback(super::reference::host_of(registry))
            || self
                .insecure
                .iter()
                .any(|i| i == registry || i == super::reference::host_of(registry))
    }
}

/// Whether `host` is a loopback address or `localhost`.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A connection to one registry.
pub struct Registry {
    client: oci_client::Client,
    registry: String,
    scheme: &'static str,
    /// What `oci-client` is given: anonymous, or a user name and password.
    auth: RegistryAuth,
    /// An identity token to exchange, and when it was last exchanged for each
    /// `(repository, push)` pair.
    identity: Option<Identity>,
    access: Access,
}

struct Identity {
    refresh_token: String,
    exchanger: super::oauth::Exchanger,
    done: tokio::sync::Mutex<std::collections::BTreeMap<(String, bool), std::time::Instant>>,
}

/// How long an exchanged token is used before it is exchanged again: distribution's shortest
/// token lifetime (its clients assume at least 60 s).
const EXCHANGED_TOKEN_USE: Duration = Duration::from_secs(50);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("registry", &self.registry)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A client for `registry` (`HOST[:PORT]`) under `access`, with the Docker config's
    /// credentials for it.
    pub fn new(registry: &str, access: &Access) -> Result<Registry, OciError> {
        // reqwest's rustls needs a process-wide crypto provider: ring, the one kube uses.
        // (Installing it twice is harmless: the first one stays.)
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plain = access.plain_http(registry);
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            platform_resolver: None,
            ..Default::default()
        };
        let client = oci_client::Client::try_from(config).map_err(|e| {
            OciError::Unavailable(format!(
                "cannot set up a client for the registry {registry}: {e}"
            ))
        })?;
        let scheme = if plain { "http" } else { "https" };
        let held = match access.credentials.get(registry) {
            Some(auth) => auth,
            None => credentials(registry)?,
        };
        // Both sources give a bearer token only for an identity token.
        let (auth, identity) = match held {
            RegistryAuth::Bearer(refresh_token) => (
                RegistryAuth::Anonymous,
                Some(Identity {
                    refresh_token,
                    exchanger: super::oauth::Exchanger::new(registry, scheme)
                        .map_err(OciError::Unavailable)?,
                    done: Default::default(),
                }),
            ),
            other => (other, None),
        };
        Ok(Registry {
            client,
            registry: registry.to_owned(),
            scheme,
            auth,
            identity,
            access: access.clone(),
        })
    }

    /// `HOST[:PORT]`.
    pub fn name(&self) -> &str {
        &self.registry
    }

    /// The manifest `reference` (a tag or a digest) names in `repository`, and its digest
    /// (computed from the bytes; when `reference` is a digest, the bytes must have it).
    pub async fn manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<(Vec<u8>, Digest), OciError> {
        let (what, got) = self.fetch_manifest(repository, reference).await?;
        let bytes = got.map_err(|e| self.describe(Operation::Pull, &what, &e))?;
        Self::checked_manifest(&what, reference, &bytes)
    }

    /// [`Registry::manifest`], `None` when the registry has no such manifest (the registry
    /// answered "not found"; any other failure is an error).
    pub async fn manifest_if_exists(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Option<(Vec<u8>, Digest)>, OciError> {
        let (what, got) = self.fetch_manifest(repository, reference).await?;
        match got {
            Ok(bytes) => Self::checked_manifest(&what, reference, &bytes).map(Some),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(self.describe(Operation::Pull, &what, &e)),
        }
    }

    /// The manifest `reference` names in `repository` as the registry answered it (transient
    /// failures retried), and what messages call it.
    async fn fetch_manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<(String, Result<bytes::Bytes, OciDistributionError>), OciError> {
        let image = self.reference(repository, reference);
        let what = format!(
            "{}/{repository}{}{reference}",
            self.registry,
            sep(reference)
        );
        self.store_auth(&image, Operation::Pull).await?;
        let got = self
            .retry_raw(&what, || {
                self.client
                    .pull_manifest_raw(&image, &self.auth, ACCEPTED_MEDIA_TYPES)
            })
            .await
            .map(|(bytes, _)| bytes);
        Ok((what, got))
    }

    /// `bytes` as the manifest `reference` names: capped, its digest computed and, when
    /// `reference` is a digest, checked.
    fn checked_manifest(
        what: &str,
        reference: &str,
        bytes: &[u8],
    ) -> Result<(Vec<u8>, Digest), OciError> {
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(OciError::Refused(format!(
                "{what}: the manifest has {} bytes, more than {MAX_MANIFEST_BYTES}: refused",
                bytes.len()
            )));
        }
        let digest = Digest::of(bytes);
        if let Ok(expected) = Digest::parse(reference)
            && expected != digest
        {
            return Err(OciError::Refused(format!(
                "{what}: the registry answered a manifest whose digest is {digest}: refused"
            )));
        }
        Ok((bytes.to_vec(), digest))
    }

    /// Streams the blob `descriptor` names from `repository` into `out`, hashing as it goes:
    /// refused when it is larger than `cap` (or than the descriptor says) or its digest is not
    /// the descriptor's.
    pub async fn blob(
        &self,
        repository: &str,
        descriptor: &Descriptor,
        cap: u64,
        out: &mut impl std::io::Write,
    ) -> Result<(), OciError> {
        let digest = descriptor.digest().map_err(OciError::Refused)?;
        let what = format!("{}/{repository}@{digest}", self.registry);
        if descriptor.size > cap {
            return Err(OciError::Refused(format!(
                "{what}: the layer has {} bytes, more than --max-release-bytes {cap}: refused",
                descriptor.size
            )));
        }
        let image = self.reference(repository, &digest.to_string());
        self.store_auth(&image, Operation::Pull).await?;
        let layer = oci_client::manifest::OciDescriptor {
            media_type: descriptor.media_type.clone(),
            digest: digest.to_string(),
            size: descriptor.size as i64,
            ..Default::default()
        };
        let mut stream = self
            .retry(Operation::Pull, &what, || {
                self.client.pull_blob_stream(&image, &layer)
            })
            .await?;
        let mut hasher = super::digest::Hasher::new();
        let mut total: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                if e.to_string().to_lowercase().contains("digest") {
                    OciError::Mismatch(format!(
                        "{what}: the registry sent content that does not match its digest ({e}): its blob changed or was corrupted, refused"
                    ))
                } else {
                    OciError::Unavailable(format!("{what}: reading the layer from {}: {e}", self.address()))
                }
            })?;
            total += chunk.len() as u64;
            if total > descriptor.size {
                return Err(OciError::Mismatch(format!(
                    "{what}: the registry sent more than the {} bytes the manifest gives: refused",
                    descriptor.size
                )));
            }
            hasher.update(&chunk);
            out.write_all(&chunk)
                .map_err(|e| OciError::Unavailable(format!("{what}: storing the layer: {e}")))?;
        }
        let got = hasher.finish();
        if got != digest {
            return Err(OciError::Mismatch(format!(
                "{what}: the registry sent content whose digest is {got}: its blob changed or was corrupted, refused"
            )));
        }
        Ok(())
    }

    /// Pushes `bytes` as a blob of `repository` (skipped when the registry has it).
    pub async fn push_blob(&self, repository: &str, bytes: &[u8]) -> Result<Digest, OciError> {
        let digest = Digest::of(bytes);
        let image = self.reference(repository, &digest.to_string());
        self.store_auth(&image, Operation::Push).await?;
        let what = format!("{}/{repository}@{digest}", self.registry);
        let digest_text = digest.to_string();
        let exists = self
            .retry(Operation::Push, &what, || {
                self.client.blob_exists(&image, &digest_text)
            })
            .await?;
        if !exists {
            let data = bytes::Bytes::copy_from_slice(bytes);
            self.retry(Operation::Push, &what, || {
                self.client.push_blob(&image, data.clone(), &digest_text)
            })
            .await?;
        }
        Ok(digest)
    }

    /// Pushes the manifest `bytes` (media type `media_type`) to `repository` under `tag`.
    pub async fn push_manifest(
        &self,
        repository: &str,
        tag: &str,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<(), OciError> {
        let image = self.reference(repository, tag);
        self.store_auth(&image, Operation::Push).await?;
        let what = format!("{}/{repository}:{tag}", self.registry);
        let content_type = http::HeaderValue::from_str(media_type)
            .map_err(|e| OciError::Usage(format!("media type {media_type:?}: {e}")))?;
        let body = bytes::Bytes::copy_from_slice(bytes);
        self.retry(Operation::Push, &what, || {
            self.client
                .push_manifest_raw(&image, body.clone(), content_type.clone())
        })
        .await?;
        Ok(())
    }

    /// Gives the client this registry's credentials before a request on `image` for
    /// `operation`: oci-client uses them (Basic, or to get a bearer token for the operation)
    /// only once stored. With an identity token, first exchanges it for a bearer token for
    /// the repository and operation (again when the last one is older than
    /// [`EXCHANGED_TOKEN_USE`]), which the client then uses.
    async fn store_auth(&self, image: &Reference, operation: Operation) -> Result<(), OciError> {
        if let Some(identity) = &self.identity {
            let push = operation == Operation::Push;
            let key = (image.repository().to_owned(), push);
            let mut done = identity.done.lock().await;
            if done
                .get(&key)
                .is_none_or(|at| at.elapsed() >= EXCHANGED_TOKEN_USE)
            {
                let scope = format!(
                    "repository:{}:{}",
                    image.repository(),
                    if push { "pull,push" } else { "pull" }
                );
                let token = identity
                    .exchanger
                    .exchange(&identity.refresh_token, &scope, |host| {
                        self.access.plain_http(host)
                    })
                    .await
                    .map_err(|why| {
                        OciError::Unavailable(format!(
                            "{}/{}: {why}",
                            self.registry,
                            image.repository()
                        ))
                    })?;
                if let Some(token) = token {
                    // A push also reads (whether a blob is there): the token for pull and
                    // push serves both.
                    let ops: &[RegistryOperation] = if push {
                        &[RegistryOperation::Pull, RegistryOperation::Push]
                    } else {
                        &[RegistryOperation::Pull]
                    };
                    for op in ops {
                        self.client
                            .auth(image, &RegistryAuth::Bearer(token.clone()), *op)
                            .await
                            .map_err(|e| self.describe(operation, &self.registry, &e))?;
                    }
                }
                done.insert(key, std::time::Instant::now());
            }
        }
        self.client
            .store_auth_if_needed(image.resolve_registry(), &self.auth)
            .await;
        Ok(())
    }

    fn reference(&self, repository: &str, reference: &str) -> Reference {
        if reference.starts_with("sha256:") {
            Reference::with_digest(
                self.registry.clone(),
                repository.to_owned(),
                reference.to_owned(),
            )
        } else {
            Reference::with_tag(
                self.registry.clone(),
                repository.to_owned(),
                reference.to_owned(),
            )
        }
    }

    /// `scheme://HOST[:PORT]`, for messages.
    fn address(&self) -> String {
        format!("{}://{}", self.scheme, self.registry)
    }

    /// Runs `op` under the request backoff, retrying transient failures; the last failure
    /// in plain words, naming `what` and the registry.
    async fn retry<T, F, Fut>(&self, operation: Operation, what: &str, op: F) -> Result<T, OciError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, OciDistributionError>>,
    {
        self.retry_raw(what, op)
            .await
            .map_err(|e| self.describe(operation, what, &e))
    }

    /// [`Registry::retry`], the last error as the client gave it.
    async fn retry_raw<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, OciDistributionError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, OciDistributionError>>,
    {
        let mut delays = Backoff::REQUEST.delays();
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if transient(&e) => match delays.next() {
                    Some(wait) => {
                        tracing::debug!(registry = %self.registry, "{what}: {}; retrying in {wait:?}", describe_cause(&e));
                        tokio::time::sleep(wait).await;
                    }
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// `e` in plain words; `operation` is what was being done.
    fn describe(&self, operation: Operation, what: &str, e: &OciDistributionError) -> OciError {
        use OciDistributionError as E;
        let registry = &self.registry;
        if let Some(status) = refusal(e) {
            return OciError::Unavailable(self.refused(operation, what, status));
        }
        match e {
            E::RequestError(re) if re.is_connect() || re.is_timeout() || re.is_request() => {
                let hint = if self.scheme == "https"
                    && !is_loopback(super::reference::host_of(registry))
                {
                    format!(" (a registry serving plain HTTP needs --insecure-registry {registry})")
                } else {
                    String::new()
                };
                OciError::Unavailable(format!(
                    "{what}: cannot reach the registry {registry} at {}: {}; check that it runs and the address is right{hint}",
                    self.address(),
                    describe_cause(e)
                ))
            }
            E::ImageManifestNotFoundError(_) => OciError::Unavailable(format!(
                "{what}: not found in the registry {registry}: check the repository, tag or digest"
            )),
            E::ServerError { code: 404, .. } => OciError::Unavailable(format!(
                "{what}: not found in the registry {registry}: check the repository, tag or digest"
            )),
            E::RegistryError { envelope, .. }
                if envelope.errors.iter().any(|x| {
                    matches!(
                        x.code,
                        oci_client::errors::OciErrorCode::ManifestUnknown
                            | oci_client::errors::OciErrorCode::NameUnknown
                            | oci_client::errors::OciErrorCode::BlobUnknown
                    )
                }) =>
            {
                OciError::Unavailable(format!(
                    "{what}: not found in the registry {registry}: check the repository, tag or digest"
                ))
            }
            E::DigestError(_) => OciError::Mismatch(format!(
                "{what}: {}: the registry's content does not match its digest, refused",
                describe_cause(e)
            )),
            _ => OciError::Unavailable(format!(
                "{what}: the registry {registry}: {}",
                describe_cause(e)
            )),
        }
    }
}

/// What a request was for: reading, or pushing (which also needs pull access).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Pull,
    Push,
}

impl Registry {
    /// A refusal (HTTP `status`, 401 or 403) in plain words: without credentials, how to log
    /// in; with them, that they are wrong or do not allow `operation`.
    fn refused(&self, operation: Operation, what: &str, status: u16) -> String {
        let registry = &self.registry;
        let (verb, permission) = match operation {
            Operation::Pull => ("read", "pull"),
            Operation::Push => ("push", "push"),
        };
        if matches!(self.auth, RegistryAuth::Anonymous) && self.identity.is_none() {
            format!(
                "{what}: the registry {registry} refused access without credentials (HTTP {status}): log in with `docker login {registry}` (cvo uses the Docker config's credentials) as a user who may {permission} the repository"
            )
        } else {
            format!(
                "{what}: the registry {registry} refused access (HTTP {status}) to {verb} with the credentials cvo holds for it: either they are wrong (log in again with `docker login {registry}`) or that user may not {permission} the repository (ask the registry's owner for {permission} access)"
            )
        }
    }
}

/// The HTTP status when the registry (or its token server) refused access: 401 or 403.
fn refusal(e: &OciDistributionError) -> Option<u16> {
    use OciDistributionError as E;
    match e {
        E::RequestError(re) => re
            .status()
            .map(|s| s.as_u16())
            .filter(|s| *s == 401 || *s == 403),
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => Some(401),
        E::ServerError {
            code: code @ (401 | 403),
            ..
        } => Some(*code),
        E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|x| {
                matches!(
                    x.code,
                    oci_client::errors::OciErrorCode::Unauthorized
                        | oci_client::errors::OciErrorCode::Denied
                )
            }) =>
        {
            Some(401)
        }
        _ => None,
    }
}

/// Whether the registry answered that the manifest, blob or repository does not exist.
fn not_found(e: &OciDistributionError) -> bool {
    use OciDistributionError as E;
    match e {
        E::ImageManifestNotFoundError(_) | E::ServerError { code: 404, .. } => true,
        E::RegistryError { envelope, .. } => envelope.errors.iter().any(|x| {
            matches!(
                x.code,
                oci_client::errors::OciErrorCode::ManifestUnknown
                    | oci_client::errors::OciErrorCode::NameUnknown
                    | oci_client::errors::OciErrorCode::BlobUnknown
            )
        }),
        _ => false,
    }
}

/// `:` before a tag, `@` before a digest.
fn sep(reference: &str) -> &'static str {
    if reference.starts_with("sha256:") {
        "@"
    } else {
        ":"
    }
}

/// Whether `e` may clear on its own: transport errors, timeouts, 429 and 5xx.
fn transient(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RequestError(re) => {
            re.is_connect() || re.is_timeout() || re.is_request() || re.is_body()
        }
        OciDistributionError::ServerError { code, .. } => *code == 429 || *code >= 500,
        _ => false,
    }
}

/// The error and its causes on one line.
pub(super) fn describe_cause(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// The Docker config's credentials for `registry`; anonymous when it has none. A config that
/// exists but cannot be used is an error naming the registry (never the credential).
fn credentials(registry: &str) -> Result<RegistryAuth, OciError> {
    use docker_credential::{CredentialRetrievalError as C, DockerCredential as D};
    match docker_credential::get_credential(registry) {
        Ok(D::UsernamePassword(user, password)) => Ok(RegistryAuth::Basic(user, password)),
        Ok(D::IdentityToken(token)) => Ok(RegistryAuth::Bearer(token)),
        Err(C::NoCredentialConfigured | C::ConfigNotFound | C::ConfigReadError) => {
            Ok(RegistryAuth::Anonymous)
        }
        Err(C::HelperFailure { helper, .. }) => Err(OciError::Unavailable(format!(
            "the Docker config's credential helper docker-credential-{helper} failed for the registry {registry}: run it by hand or log in again with `docker login {registry}`"
        ))),
        Err(e) => Err(OciError::Unavailable(format!(
            "the Docker config's credentials for the registry {registry} cannot be used ({}): fix $DOCKER_CONFIG/config.json or ~/.docker/config.json",
            match e {
                C::HelperCommunicationError => "the credential helper could not be run",
                C::MalformedHelperResponse => "the credential helper's answer is malformed",
                C::CredentialDecodingError => "its auth field is not base64 of user:password",
                C::CredentialMismatchError => "its auth field and username/password disagree",
                _ => "unreadable",
            }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_plain_http_others_need_the_flag() {
        let access = Access {
            insecure: vec!["mirror.lan:5000".to_owned(), "other.lan".to_owned()],
            ..Access::default()
        };
        for plain in [
            "127.0.0.1:5000",
            "127.1.2.3",
            "localhost:80",
            "[::1]:5000",
            "mirror.lan:5000",
            "other.lan:443",
        ] {
            assert!(access.plain_http(plain), "{plain}");
        }
        for https in [
            "quay.io",
            "mirror.lan:5001",
            "10.0.0.1:5000",
            "localhost.example.com",
        ] {
            assert!(!access.plain_http(https), "{https}");
        }
    }

    #[test]
    fn docker_config_credentials_are_read_and_never_printed() {
        let config = br#"{"auths": {
            "https://quay.io/v1/": {"auth": "dXNlcjpzM2NyM3Q="},
            "127.0.0.1:5000": {"username": "u", "password": "hunter2"},
            "tok.example": {"identitytoken": "tok-s3cr3t"},
            "empty.example": {}
        }}"#;
        let c = Credentials::from_docker_config(config).unwrap();
        assert_eq!(
            c.registries().collect::<Vec<_>>(),
            ["127.0.0.1:5000", "quay.io", "tok.example"]
        );
        assert!(
            matches!(c.get("quay.io"), Some(RegistryAuth::Basic(u, p)) if u == "user" && p == "s3cr3t")
        );
        assert!(matches!(c.get("tok.example"), Some(RegistryAuth::Bearer(t)) if t == "tok-s3cr3t"));
        assert!(c.get("other.example").is_none());
        let shown = format!(
            "{:?}",
            Access {
                credentials: c,
                ..Access::default()
            }
        );
        for secret in ["s3cr3t", "hunter2", "tok-s3cr3t", "dXNlcjpzM2NyM3Q"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let err = Credentials::from_docker_config(br#"{"auths": {"q.io": {"auth": "!!!"}}}"#)
            .unwrap_err();
        assert!(err.contains("q.io") && !err.contains("!!!"), "{err}");
        let err = Credentials::from_docker_config(b"hunter2").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
    }
}
