//! The registry client: the OCI distribution protocol over reqwest (rustls with the ring
//! provider), with `cvo`'s rules on top. Reading — manifests, blobs, tokens — is `cvo`'s own
//! requests, every answer read under a cap ([`super::http`], docs/limits.md); pushing goes
//! through `oci-client` (chunked and streamed uploads), given the token `cvo` got.
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
//!   per repository and operation (`super::oauth`). Without any, access is anonymous (with an
//!   anonymous token where the registry asks for one). No credential or token is ever
//!   printed or logged.
//! - Timeouts and retries: connecting times out after 10 s and a stalled read after 60 s; a
//!   transport error, a timeout, 429 or 5xx is retried under the project's one request
//!   backoff ([`Backoff::REQUEST`]: 200 ms doubling to 5 s, 6 attempts); anything else
//!   fails at once. A registry that cannot be reached is a plain message naming it.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use oci_client::Reference;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::token_cache::{RegistryOperation, RegistryToken, RegistryTokenType};

use super::http::ReadFailure;
use super::oauth::{Authorization, Denied, Secret};
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
    /// Pushes (`oci-client`).
    client: oci_client::Client,
    /// Reads and tokens ([`super::http`]): answers read under a cap.
    http: reqwest::Client,
    registry: String,
    scheme: &'static str,
    /// What `oci-client` falls back to when a push outlives the token cvo gave it: anonymous,
    /// or a user name and password.
    auth: RegistryAuth,
    /// What cvo holds for this registry.
    secret: Secret,
    tokens: super::oauth::Tokens,
    /// The authorization last had for each `(repository, push)`, and when.
    authorized: tokio::sync::Mutex<BTreeMap<(String, bool), (Authorization, Instant)>>,
    access: Access,
}

/// How long an authorization (a bearer token) is used before it is asked for again:
/// distribution's shortest token lifetime (its clients assume at least 60 s).
const TOKEN_USE: Duration = Duration::from_secs(50);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("registry", &self.registry)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

/// Why a read failed.
enum Failure {
    /// The registry answered this HTTP status, with these error codes and messages.
    Answer {
        code: u16,
        errors: Vec<(String, String)>,
    },
    /// No answer (connecting, timing out, reading).
    Transport(reqwest::Error),
    /// Already in plain words (a refused size, the token server's failure).
    Done(OciError),
}

impl Failure {
    /// Whether it may clear on its own: transport errors, timeouts, 429 and 5xx.
    fn transient(&self) -> bool {
        match self {
            Failure::Answer { code, .. } => *code == 429 || *code >= 500,
            Failure::Transport(e) => {
                e.is_connect() || e.is_timeout() || e.is_request() || e.is_body()
            }
            Failure::Done(_) => false,
        }
    }

    fn cause(&self) -> Cause {
        match self {
            Failure::Answer { code, errors } => {
                let has = |codes: &[&str]| errors.iter().any(|(c, _)| codes.contains(&c.as_str()));
                if matches!(code, 401 | 403) || has(&["UNAUTHORIZED", "DENIED"]) {
                    Cause::Refused(if *code == 403 { 403 } else { 401 })
                } else if *code == 404 || has(&["MANIFEST_UNKNOWN", "NAME_UNKNOWN", "BLOB_UNKNOWN"])
                {
                    Cause::NotFound
                } else {
                    let said: Vec<String> = errors
                        .iter()
                        .map(|(c, m)| format!("{c}: {}", excerpt(m)))
                        .collect();
                    Cause::Other(if said.is_empty() {
                        format!("it answered HTTP {code}")
                    } else {
                        format!("it answered HTTP {code} ({})", said.join("; "))
                    })
                }
            }
            Failure::Transport(e) if e.is_connect() || e.is_timeout() || e.is_request() => {
                Cause::Unreachable(describe_cause(e))
            }
            Failure::Transport(e) => Cause::Other(describe_cause(e)),
            Failure::Done(_) => Cause::Other(String::new()),
        }
    }
}

/// What went wrong with a request, whichever client made it.
enum Cause {
    /// Access refused (HTTP 401 or 403).
    Refused(u16),
    /// No such manifest, blob or repository.
    NotFound,
    /// The registry could not be reached (the cause).
    Unreachable(String),
    /// Content that does not match its digest (the cause).
    Mismatch(String),
    /// Anything else (the cause).
    Other(String),
}

/// At most 200 characters of a registry's message, on one line.
fn excerpt(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

impl Registry {
    /// A client for `registry` (`HOST[:PORT]`) under `access`, with the credentials it holds
    /// for it, else the Docker config's.
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
                "cannot set up a client for the registry {registry}: {} (a container needs the system's CA certificates, /etc/ssl/certs)",
                describe_cause(&e)
            ))
        })?;
        let http = super::http::client(registry).map_err(OciError::Unavailable)?;
        let scheme = if plain { "http" } else { "https" };
        let held = match access.credentials.get(registry) {
            Some(auth) => auth,
            None => credentials(registry)?,
        };
        // Both sources give a bearer token only for an identity token.
        let (auth, secret) = match held {
            RegistryAuth::Basic(user, password) => (
                RegistryAuth::Basic(user.clone(), password.clone()),
                Secret::Password(user, password),
            ),
            RegistryAuth::Bearer(refresh_token) => {
                (RegistryAuth::Anonymous, Secret::RefreshToken(refresh_token))
            }
            _ => (RegistryAuth::Anonymous, Secret::None),
        };
        Ok(Registry {
            client,
            tokens: super::oauth::Tokens::new(registry, scheme, http.clone()),
            http,
            registry: registry.to_owned(),
            scheme,
            auth,
            secret,
            authorized: Default::default(),
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
        let what = self.what(repository, reference);
        let bytes = self
            .fetch_manifest(repository, reference, &what)
            .await
            .map_err(|f| self.explain(Operation::Pull, &what, f))?;
        Self::checked_manifest(&what, reference, bytes)
    }

    /// [`Registry::manifest`], `None` when the registry has no such manifest (the registry
    /// answered "not found"; any other failure is an error).
    pub async fn manifest_if_exists(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Option<(Vec<u8>, Digest)>, OciError> {
        let what = self.what(repository, reference);
        match self.fetch_manifest(repository, reference, &what).await {
            Ok(bytes) => Self::checked_manifest(&what, reference, bytes).map(Some),
            Err(f) if matches!(f.cause(), Cause::NotFound) => Ok(None),
            Err(f) => Err(self.explain(Operation::Pull, &what, f)),
        }
    }

    /// `HOST[:PORT]/REPO:TAG` or `…@sha256:…`, for messages.
    fn what(&self, repository: &str, reference: &str) -> String {
        format!(
            "{}/{repository}{}{reference}",
            self.registry,
            sep(reference)
        )
    }

    /// The manifest `reference` names in `repository`, read under [`MAX_MANIFEST_BYTES`]
    /// (transient failures retried).
    async fn fetch_manifest(
        &self,
        repository: &str,
        reference: &str,
        what: &str,
    ) -> Result<Vec<u8>, Failure> {
        let path = format!("manifests/{reference}");
        let accept = ACCEPTED_MEDIA_TYPES.join(", ");
        self.get(repository, &path, Some(&accept), what, |answer| async move {
            super::http::read_capped(answer, MAX_MANIFEST_BYTES)
                .await
                .map_err(|e| match e {
                    ReadFailure::TooLarge => Failure::Done(OciError::Refused(format!(
                        "{what}: the registry's manifest is larger than {MAX_MANIFEST_BYTES} bytes, the most a manifest may hold (docs/limits.md): refused"
                    ))),
                    ReadFailure::Transport(e) => Failure::Transport(e),
                })
        })
        .await
    }

    /// `bytes` as the manifest `reference` names: its digest computed and, when `reference`
    /// is a digest, checked.
    fn checked_manifest(
        what: &str,
        reference: &str,
        bytes: Vec<u8>,
    ) -> Result<(Vec<u8>, Digest), OciError> {
        let digest = Digest::of(&bytes);
        if let Ok(expected) = Digest::parse(reference)
            && expected != digest
        {
            return Err(OciError::Mismatch(format!(
                "{what}: the registry answered a manifest whose digest is {digest}: its content does not match the digest asked for, refused"
            )));
        }
        Ok((bytes, digest))
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
        let path = format!("blobs/{digest}");
        let mut answer = self
            .get(repository, &path, None, &what, |a| async { Ok(a) })
            .await
            .map_err(|f| self.explain(Operation::Pull, &what, f))?;
        let more = || {
            OciError::Mismatch(format!(
                "{what}: the registry sent more than the {} bytes the manifest gives: refused",
                descriptor.size
            ))
        };
        if answer.content_length().is_some_and(|n| n > descriptor.size) {
            return Err(more());
        }
        let mut hasher = super::digest::Hasher::new();
        let mut total: u64 = 0;
        while let Some(chunk) = answer.chunk().await.map_err(|e| {
            OciError::Unavailable(format!(
                "{what}: reading the layer from {}: {}",
                self.address(),
                describe_cause(&e)
            ))
        })? {
            total += chunk.len() as u64;
            if total > descriptor.size {
                return Err(more());
            }
            hasher.update(&chunk);
            out.write_all(&chunk)
                .map_err(|e| OciError::Unavailable(format!("{what}: storing the layer: {e}")))?;
        }
        let got = hasher.finish();
        if got != digest {
            return Err(OciError::Mismatch(format!(
                "{what}: the content the registry sent does not match its digest (it has {got}): its blob changed or was corrupted, refused"
            )));
        }
        Ok(())
    }

    /// GETs `/v2/REPOSITORY/PATH` authorized for reading (`accept`: the `Accept` header) and
    /// gives a successful answer to `read`; transient failures (of either) are retried under
    /// the request backoff.
    async fn get<T, F, Fut>(
        &self,
        repository: &str,
        path: &str,
        accept: Option<&str>,
        what: &str,
        read: F,
    ) -> Result<T, Failure>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let url = format!("{}/v2/{repository}/{path}", self.address());
        let mut delays = Backoff::REQUEST.delays();
        loop {
            let authorization = self
                .authorization(repository, Operation::Pull)
                .await
                .map_err(Failure::Done)?;
            let mut request = self.http.get(&url);
            if let Some(accept) = accept {
                request = request
                    .header(reqwest::header::ACCEPT, accept)
                    .timeout(super::http::SMALL_ANSWER_TIMEOUT);
            }
            request = match authorization {
                Authorization::None => request,
                Authorization::Basic(user, password) => request.basic_auth(user, Some(password)),
                Authorization::Bearer(token) => request.bearer_auth(token),
            };
            let failure = match request.send().await {
                Ok(answer) if answer.status().is_success() => match read(answer).await {
                    Ok(v) => return Ok(v),
                    Err(f) => f,
                },
                Ok(answer) => {
                    let code = answer.status().as_u16();
                    let body = super::http::error_body(answer).await;
                    Failure::Answer {
                        code,
                        errors: super::http::error_codes(&body),
                    }
                }
                Err(e) => Failure::Transport(e),
            };
            match delays.next() {
                Some(wait) if failure.transient() => {
                    tracing::debug!(registry = %self.registry, "{what}: {}; retrying in {wait:?}", self.explain(Operation::Pull, what, failure));
                    tokio::time::sleep(wait).await;
                }
                _ => return Err(failure),
            }
        }
    }

    /// Pushes `bytes` as a blob of `repository` (skipped when the registry has it).
    pub async fn push_blob(&self, repository: &str, bytes: &[u8]) -> Result<Digest, OciError> {
        let digest = Digest::of(bytes);
        let image = self.reference(repository, &digest.to_string());
        let digest_text = digest.to_string();
        let data = bytes::Bytes::copy_from_slice(bytes);
        self.push_blob_with(&image, || {
            self.client.push_blob(&image, data.clone(), &digest_text)
        })
        .await?;
        Ok(digest)
    }

    /// Pushes the file `path` (its content has `digest`) as a blob of `repository`, streamed
    /// (skipped when the registry has it).
    pub async fn push_blob_file(
        &self,
        repository: &str,
        path: &std::path::Path,
        digest: &Digest,
    ) -> Result<(), OciError> {
        let size = std::fs::metadata(path)
            .map_err(|e| OciError::Unavailable(format!("{}: {e}", path.display())))?
            .len();
        let image = self.reference(repository, &digest.to_string());
        let digest_text = digest.to_string();
        self.push_blob_with(&image, || async {
            let file = std::fs::File::open(path).map_err(|e| {
                OciDistributionError::GenericError(Some(format!("{}: {e}", path.display())))
            })?;
            self.client
                .push_blob_stream(&image, file_chunks(file), &digest_text, Some(size))
                .await
        })
        .await
    }

    /// Pushes the blob `image` names (by digest) with `push`, unless the registry has it.
    async fn push_blob_with<F, Fut>(&self, image: &Reference, push: F) -> Result<(), OciError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<String, OciDistributionError>>,
    {
        self.store_auth(image, Operation::Push).await?;
        let digest = image.digest().unwrap_or_default();
        let what = format!("{}/{}@{digest}", self.registry, image.repository());
        let exists = self
            .retry(Operation::Push, &what, || {
                self.client.blob_exists(image, digest)
            })
            .await?;
        if !exists {
            self.retry(Operation::Push, &what, push).await?;
        }
        Ok(())
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

    /// How requests on `repository` for `operation` are authorized: asked for (a bearer token
    /// from the token server, [`super::oauth`]) when the last one is older than
    /// [`TOKEN_USE`].
    async fn authorization(
        &self,
        repository: &str,
        operation: Operation,
    ) -> Result<Authorization, OciError> {
        let push = operation == Operation::Push;
        let mut held = self.authorized.lock().await;
        let key = (repository.to_owned(), push);
        if let Some((authorization, at)) = held.get(&key)
            && at.elapsed() < TOKEN_USE
        {
            return Ok(authorization.clone());
        }
        let scope = format!(
            "repository:{repository}:{}",
            if push { "pull,push" } else { "pull" }
        );
        let authorization = self
            .tokens
            .authorize(&self.secret, &scope, |host| self.access.plain_http(host))
            .await
            .map_err(|denied| {
                let what = format!("{}/{repository}", self.registry);
                match denied {
                    Denied::Refused(status) => {
                        OciError::Unavailable(self.refused(operation, &what, status))
                    }
                    Denied::TooLarge(why) => OciError::Refused(format!("{what}: {why}")),
                    Denied::Failed(why) => OciError::Unavailable(format!("{what}: {why}")),
                }
            })?;
        held.insert(key, (authorization.clone(), Instant::now()));
        Ok(authorization)
    }

    /// Gives `oci-client` the authorization for a push on `image` (a bearer token for pull
    /// and push: a push also reads whether a blob is there), so that it asks no token server
    /// itself while the token lasts.
    async fn store_auth(&self, image: &Reference, operation: Operation) -> Result<(), OciError> {
        let token = match self.authorization(image.repository(), operation).await? {
            Authorization::None => None,
            Authorization::Basic(user, password) => Some(RegistryTokenType::Basic(user, password)),
            Authorization::Bearer(token) => {
                Some(RegistryTokenType::Bearer(RegistryToken::Token { token }))
            }
        };
        if let Some(token) = token {
            for op in [RegistryOperation::Pull, RegistryOperation::Push] {
                self.client.tokens.insert(image, op, token.clone()).await;
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
    async fn retry<T, F, Fut>(
        &self,
        operation: Operation,
        what: &str,
        mut op: F,
    ) -> Result<T, OciError>
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
                    None => return Err(self.describe(operation, what, &e)),
                },
                Err(e) => return Err(self.describe(operation, what, &e)),
            }
        }
    }

    /// `oci-client`'s error `e` in plain words; `operation` is what was being done.
    fn describe(&self, operation: Operation, what: &str, e: &OciDistributionError) -> OciError {
        self.words(operation, what, cause_of(e))
    }

    /// A failed read in plain words.
    fn explain(&self, operation: Operation, what: &str, failure: Failure) -> OciError {
        match failure {
            Failure::Done(e) => e,
            other => self.words(operation, what, other.cause()),
        }
    }

    /// `cause` in plain words; `operation` is what was being done on `what`.
    fn words(&self, operation: Operation, what: &str, cause: Cause) -> OciError {
        let registry = &self.registry;
        match cause {
            Cause::Refused(status) => OciError::Unavailable(self.refused(operation, what, status)),
            Cause::Unreachable(cause) => {
                let hint = if self.scheme == "https"
                    && !is_loopback(super::reference::host_of(registry))
                {
                    format!(" (a registry serving plain HTTP needs --insecure-registry {registry})")
                } else {
                    String::new()
                };
                OciError::Unavailable(format!(
                    "{what}: cannot reach the registry {registry} at {}: {cause}; check that it runs and the address is right{hint}",
                    self.address(),
                ))
            }
            Cause::NotFound => OciError::Unavailable(format!(
                "{what}: not found in the registry {registry}: check the repository, tag or digest"
            )),
            Cause::Mismatch(cause) => OciError::Mismatch(format!(
                "{what}: {cause}: the registry's content does not match its digest, refused"
            )),
            Cause::Other(cause) => {
                OciError::Unavailable(format!("{what}: the registry {registry}: {cause}"))
            }
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
        if matches!(self.secret, Secret::None) {
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

/// What `oci-client`'s error `e` says went wrong.
fn cause_of(e: &OciDistributionError) -> Cause {
    use OciDistributionError as E;
    use oci_client::errors::OciErrorCode as C;
    let has = |envelope: &oci_client::errors::OciEnvelope, codes: &[C]| {
        envelope.errors.iter().any(|x| codes.contains(&x.code))
    };
    match e {
        E::RequestError(re) if re.status().is_some_and(|s| s == 401 || s == 403) => {
            Cause::Refused(re.status().map_or(401, |s| s.as_u16()))
        }
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => Cause::Refused(401),
        E::ServerError {
            code: code @ (401 | 403),
            ..
        } => Cause::Refused(*code),
        E::RegistryError { envelope, .. } if has(envelope, &[C::Unauthorized, C::Denied]) => {
            Cause::Refused(401)
        }
        E::RequestError(re) if re.is_connect() || re.is_timeout() || re.is_request() => {
            Cause::Unreachable(describe_cause(e))
        }
        E::ImageManifestNotFoundError(_) | E::ServerError { code: 404, .. } => Cause::NotFound,
        E::RegistryError { envelope, .. }
            if has(
                envelope,
                &[C::ManifestUnknown, C::NameUnknown, C::BlobUnknown],
            ) =>
        {
            Cause::NotFound
        }
        E::DigestError(_) => Cause::Mismatch(describe_cause(e)),
        _ => Cause::Other(describe_cause(e)),
    }
}

/// The content of `file` in chunks of 1 MiB, for a streamed push.
fn file_chunks(
    file: std::fs::File,
) -> impl futures::Stream<Item = Result<bytes::Bytes, OciDistributionError>> + Send + 'static {
    futures::stream::unfold(Some(file), |file| async move {
        use std::io::Read as _;
        let mut file = file?;
        let mut buf = vec![0u8; 1 << 20];
        match file.read(&mut buf) {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((
                Err(OciDistributionError::GenericError(Some(e.to_string()))),
                None,
            )),
        }
    })
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
    use super::super::http::stand_in::{endless, full, respond, serve};
    use super::*;

    /// Hostile answers from a stand-in registry (a real registry never sends them): a
    /// manifest that never ends or says it is too large, an error answer that never ends, a
    /// token server that never ends. Each is refused at its cap, at once, naming the limit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_without_end_are_refused_at_their_caps() {
        let (host, _) = serve(|req, _| match req.uri().path() {
            "/v2/" => respond(200, &[], full("{}")),
            "/v2/cvo/endless/manifests/1" => respond(200, &[], endless()),
            "/v2/cvo/declared/manifests/1" => {
                respond(200, &[("content-length", "5000000")], endless())
            }
            "/v2/cvo/error/manifests/1" => respond(400, &[], endless()),
            "/v2/cvo/error/blobs/sha256:0000000000000000000000000000000000000000000000000000000000000000" => {
                respond(404, &[], endless())
            }
            "/v2/cvo/small/manifests/1" => respond(
                200,
                &[("content-type", super::super::shape::MANIFEST_MEDIA_TYPE)],
                full("{}"),
            ),
            _ => respond(404, &[], full("")),
        })
        .await;
        let registry = Registry::new(&host, &Access::default()).unwrap();
        let started = std::time::Instant::now();
        for repository in ["cvo/endless", "cvo/declared"] {
            let err = registry.manifest(repository, "1").await.unwrap_err();
            assert!(
                matches!(&err, OciError::Refused(m) if m.contains(&format!("{host}/{repository}:1: the registry's manifest is larger than {MAX_MANIFEST_BYTES} bytes, the most a manifest may hold"))),
                "{err}"
            );
        }
        let err = registry.manifest("cvo/error", "1").await.unwrap_err();
        assert!(err.to_string().contains("it answered HTTP 400"), "{err}");
        let blob = Descriptor {
            media_type: "application/octet-stream".to_owned(),
            digest: format!("sha256:{}", "0".repeat(64)),
            size: 10,
        };
        let err = registry
            .blob("cvo/error", &blob, 100, &mut Vec::new())
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("not found in the registry"),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        // A good one still reads.
        assert_eq!(registry.manifest("cvo/small", "1").await.unwrap().0, b"{}");
    }

    /// A registry asking for bearer tokens whose token server answers without end: the read
    /// is refused naming the token answer's cap, at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_server_without_end_refuses_the_read() {
        let (host, seen) = serve(|req, host| match req.uri().path() {
            "/token" => respond(200, &[], endless()),
            _ => respond(
                401,
                &[(
                    "www-authenticate",
                    &format!(r#"Bearer realm="http://{host}/token",service="s""#),
                )],
                full(""),
            ),
        })
        .await;
        let registry = Registry::new(&host, &Access::default()).unwrap();
        let started = std::time::Instant::now();
        let err = registry.manifest("cvo/x", "1").await.unwrap_err();
        assert!(
            matches!(&err, OciError::Refused(m) if m.contains(&format!("{host}/cvo/x: the token server http://{host}/token of the registry {host} answered more than {} bytes, the most a token answer may hold", super::super::http::MAX_TOKEN_ANSWER_BYTES))),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        // Not one request for the manifest: nothing was sent without a token.
        assert!(
            seen.lock()
                .unwrap()
                .iter()
                .all(|(_, path, _)| !path.contains("manifests")),
            "{seen:?}"
        );
    }

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
