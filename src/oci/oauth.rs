//! Authorization at a registry, asked for by `cvo` itself: the registry's challenge and the
//! distribution token protocol. `oci-client` reads a token server's answer whole and cannot
//! exchange a Docker identity token (it would send the identity token itself to the registry,
//! which refuses it); here every answer is read under a cap ([`super::http`]).
//!
//! A client asks the registry (`GET /v2/`) for its challenge. `Basic realm=…`: the user name
//! and password go to the registry itself. `Bearer realm=…,service=…`: a token for one
//! repository and operation (scope `repository:NAME:pull` or `…:pull,push`) is asked from the
//! realm, the token server:
//! - with a user name and password, `GET realm?scope=…&service=…` with Basic auth (docker's
//!   default); without credentials, the same anonymously;
//! - with an identity token (`identitytoken` in the Docker config, what `docker login` stores
//!   when the token server issues an OAuth2 refresh token), a `POST` of the form
//!   `grant_type=refresh_token`, `refresh_token`, `service`, `scope` and `client_id`;
//!
//! and the answer (`{"token": …}` or `{"access_token": …}`, at most
//! [`MAX_TOKEN_ANSWER_BYTES`]) is the bearer token for the registry.
//!
//! A password or an identity token is only sent to a realm over HTTPS, or over plain HTTP when
//! the realm's host is one cvo reaches over plain HTTP anyway (loopback, or named by
//! `--insecure-registry`). No credential or token is ever printed or logged; a refusal names
//! the registry, the realm and the HTTP status, never the answer's body.

use super::http::{MAX_TOKEN_ANSWER_BYTES, ReadFailure, SMALL_ANSWER_TIMEOUT, read_capped};
use crate::retry::Backoff;

/// The `client_id` sent with the exchange (distribution's clients send one; it is required).
const CLIENT_ID: &str = "cvo";

/// What cvo holds for a registry (never printed).
#[derive(Clone)]
pub(super) enum Secret {
    /// Nothing: anonymous access.
    None,
    /// A user name and password.
    Password(String, String),
    /// An identity token (an OAuth2 refresh token).
    RefreshToken(String),
}

/// How requests to the registry are authorized (never printed).
#[derive(Clone)]
pub(super) enum Authorization {
    /// Not at all.
    None,
    /// HTTP Basic auth with this user name and password.
    Basic(String, String),
    /// This bearer token.
    Bearer(String),
}

/// Why no authorization was had.
#[derive(Debug)]
pub(super) enum Denied {
    /// The token server refused the user name and password, or anonymous access (its HTTP
    /// status: 401 or 403).
    Refused(u16),
    /// Its answer is over [`MAX_TOKEN_ANSWER_BYTES`] (the message says so).
    TooLarge(String),
    /// Anything else, in plain words.
    Failed(String),
}

/// A registry's challenge: how it wants to be authorized.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Challenge {
    /// HTTP Basic auth.
    Basic,
    /// Bearer tokens from a token server.
    Bearer {
        /// The token server's URL.
        realm: String,
        /// The `service` to name (the tokens' audience).
        service: Option<String>,
    },
}

/// The challenge among `WWW-Authenticate` header values, if any: a bearer challenge before a
/// Basic one.
pub(super) fn challenge<'a>(headers: impl Iterator<Item = &'a str>) -> Option<Challenge> {
    let mut basic = false;
    for header in headers {
        for challenge in http_auth::ChallengeParser::new(header).flatten() {
            if challenge.scheme.eq_ignore_ascii_case("basic") {
                basic = true;
            }
            if !challenge.scheme.eq_ignore_ascii_case("bearer") {
                continue;
            }
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            if let Some(realm) = param("realm") {
                return Some(Challenge::Bearer {
                    realm,
                    service: param("service"),
                });
            }
        }
    }
    basic.then_some(Challenge::Basic)
}

/// The form `POST`ed to the realm to exchange an identity token.
fn form(refresh_token: &str, service: Option<&str>, scope: &str) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", refresh_token)
        .append_pair("client_id", CLIENT_ID)
        .append_pair("scope", scope);
    if let Some(service) = service {
        form.append_pair("service", service);
    }
    form.finish()
}

/// The token in a token server's successful `answer` (`what` names the server), read under
/// [`MAX_TOKEN_ANSWER_BYTES`].
async fn read_token(answer: reqwest::Response, what: &str) -> Result<String, Denied> {
    let bytes = read_capped(answer, MAX_TOKEN_ANSWER_BYTES)
        .await
        .map_err(|e| match e {
            ReadFailure::TooLarge => Denied::TooLarge(format!(
                "{what} answered more than {MAX_TOKEN_ANSWER_BYTES} bytes, the most a token answer may hold: refused"
            )),
            ReadFailure::Transport(e) => Denied::Failed(format!(
                "{what}: reading its answer: {}",
                super::registry::describe_cause(&e)
            )),
        })?;
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        access_token: Option<String>,
        #[serde(default)]
        token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(&bytes).map_err(|_| {
        Denied::Failed(format!(
            "{what} answered something that is not a token (not JSON)"
        ))
    })?;
    answer
        .access_token
        .or(answer.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Denied::Failed(format!("{what} answered without a token")))
}

/// How to reach the registry and its token server.
pub(super) struct Tokens {
    http: reqwest::Client,
    /// `scheme://HOST[:PORT]` of the registry.
    base: String,
    /// `HOST[:PORT]`, for messages.
    registry: String,
    /// The registry's challenge, asked for once.
    challenge: tokio::sync::OnceCell<Option<Challenge>>,
}

impl Tokens {
    /// Tokens for `registry` reached at `scheme://registry` with `http`.
    pub fn new(registry: &str, scheme: &str, http: reqwest::Client) -> Tokens {
        Tokens {
            http,
            base: format!("{scheme}://{registry}"),
            registry: registry.to_owned(),
            challenge: tokio::sync::OnceCell::new(),
        }
    }

    /// How to authorize requests for `scope` holding `secret`. `plain_http_ok` says whether
    /// a realm's `HOST[:PORT]` may be reached over plain HTTP with a credential.
    pub async fn authorize(
        &self,
        secret: &Secret,
        scope: &str,
        plain_http_ok: impl Fn(&str) -> bool,
    ) -> Result<Authorization, Denied> {
        let challenge = self
            .challenge
            .get_or_try_init(|| self.ask_challenge())
            .await
            .map_err(Denied::Failed)?;
        match (challenge, secret) {
            (None, _) => Ok(Authorization::None),
            (Some(Challenge::Basic), Secret::Password(user, password)) => {
                Ok(Authorization::Basic(user.clone(), password.clone()))
            }
            // An identity token has no use with Basic auth.
            (Some(Challenge::Basic), _) => Ok(Authorization::None),
            (Some(Challenge::Bearer { realm, service }), secret) => self
                .token(realm, service.as_deref(), secret, scope, plain_http_ok)
                .await
                .map(Authorization::Bearer),
        }
    }

    /// The registry's challenge (`GET /v2/`); `None` when it asks for none.
    async fn ask_challenge(&self) -> Result<Option<Challenge>, String> {
        let v2 = format!("{}/v2/", self.base);
        let answer = self
            .send(
                || self.http.get(&v2),
                &format!("the registry {} at {v2}", self.registry),
            )
            .await?;
        Ok(challenge(
            answer
                .headers()
                .get_all(reqwest::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        ))
    }

    /// A bearer token for `scope` from the token server `realm`.
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        secret: &Secret,
        scope: &str,
        plain_http_ok: impl Fn(&str) -> bool,
    ) -> Result<String, Denied> {
        let registry = &self.registry;
        let mut url = reqwest::Url::parse(realm).map_err(|_| {
            Denied::Failed(format!(
                "the registry {registry} names a token server whose address is not a URL ({realm:?})"
            ))
        })?;
        let realm_host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        };
        let held = match secret {
            Secret::None => None,
            Secret::Password(..) => Some("credentials"),
            Secret::RefreshToken(_) => Some("identity token"),
        };
        if let Some(held) = held
            && !(url.scheme() == "https" || url.scheme() == "http" && plain_http_ok(&realm_host))
        {
            return Err(Denied::Failed(format!(
                "the registry {registry} sends credentials to the token server {url}, which is not reached over HTTPS: the Docker config's {held} is not sent there (--insecure-registry {realm_host} allows it)"
            )));
        }
        let what = format!("the token server {url} of the registry {registry}");
        let answer = match secret {
            Secret::RefreshToken(refresh_token) => {
                let body = form(refresh_token, service, scope);
                let request = || {
                    self.http
                        .post(url.clone())
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            "application/x-www-form-urlencoded",
                        )
                        .body(body.clone())
                };
                self.send(request, &what).await
            }
            Secret::Password(..) | Secret::None => {
                url.query_pairs_mut().append_pair("scope", scope);
                if let Some(service) = service {
                    url.query_pairs_mut().append_pair("service", service);
                }
                let request = || match secret {
                    Secret::Password(user, password) => {
                        self.http.get(url.clone()).basic_auth(user, Some(password))
                    }
                    _ => self.http.get(url.clone()),
                };
                self.send(request, &what).await
            }
        }
        .map_err(Denied::Failed)?;
        let status = answer.status().as_u16();
        match (status, secret) {
            (200..=299, _) => read_token(answer, &what).await,
            (401 | 403, Secret::RefreshToken(_)) => Err(Denied::Failed(format!(
                "{what} refused the Docker config's identity token (HTTP {status}): it may have expired or been revoked; log in again with `docker login {registry}`"
            ))),
            (401 | 403, _) => Err(Denied::Refused(status)),
            _ => Err(Denied::Failed(format!(
                "{what} answered HTTP {status} instead of a token"
            ))),
        }
    }

    /// Sends the request `make` builds, retrying transport errors, 429 and 5xx under the
    /// request backoff; the answer (any other status), or the last failure naming `what`.
    async fn send(
        &self,
        make: impl Fn() -> reqwest::RequestBuilder,
        what: &str,
    ) -> Result<reqwest::Response, String> {
        let mut delays = Backoff::REQUEST.delays();
        loop {
            let failure = match make().timeout(SMALL_ANSWER_TIMEOUT).send().await {
                Ok(answer)
                    if answer.status().as_u16() == 429 || answer.status().is_server_error() =>
                {
                    format!("it answered HTTP {}", answer.status().as_u16())
                }
                Ok(answer) => return Ok(answer),
                // The URL is in `what`; reqwest's text repeats it without the cause.
                Err(e) => super::registry::describe_cause(&e),
            };
            match delays.next() {
                Some(wait) => {
                    tracing::debug!(registry = %self.registry, "{what}: {failure}; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                }
                None => {
                    return Err(format!(
                        "cannot reach {what}: {failure}; check that it runs and the address is right"
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::http::stand_in::{endless, full, respond, serve};
    use super::*;

    #[test]
    fn the_bearer_challenge_is_found_before_a_basic_one() {
        let headers = [
            r#"Basic realm="x""#,
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#,
        ];
        assert_eq!(
            challenge(headers.into_iter()),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".to_owned(),
                service: Some("registry.example".to_owned()),
            })
        );
        assert_eq!(
            challenge([r#"Basic realm="x""#].into_iter()),
            Some(Challenge::Basic)
        );
        assert_eq!(challenge([r#"Bearer service="s""#].into_iter()), None);
        assert_eq!(challenge(std::iter::empty()), None);
    }

    #[test]
    fn the_form_is_distributions_refresh_token_grant() {
        let form = form("r&t=1", Some("svc"), "repository:cvo/x:pull,push");
        let pairs: Vec<(String, String)> = form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("grant_type"), Some("refresh_token"));
        assert_eq!(get("refresh_token"), Some("r&t=1"));
        assert_eq!(get("service"), Some("svc"));
        assert_eq!(get("scope"), Some("repository:cvo/x:pull,push"));
        assert_eq!(get("client_id"), Some(CLIENT_ID));
    }

    /// A registry on loopback whose `/v2/` answers 401 with `challenge` (`{host}` in it is its
    /// own `HOST:PORT`) and whose `/token` answers `token`; its address and the requests it had.
    async fn challenging_registry(
        challenge: &'static str,
        token: fn() -> hyper::Response<super::super::http::stand_in::Body>,
    ) -> (
        String,
        std::sync::Arc<std::sync::Mutex<Vec<super::super::http::stand_in::Seen>>>,
    ) {
        serve(move |req, host| match req.uri().path() {
            "/token" => token(),
            _ => respond(
                401,
                &[("www-authenticate", &challenge.replace("{host}", host))],
                full(""),
            ),
        })
        .await
    }

    fn no_token() -> hyper::Response<super::super::http::stand_in::Body> {
        respond(500, &[], full(""))
    }

    #[tokio::test]
    async fn credentials_go_to_no_plain_http_realm_but_a_trusted_one() {
        // A plain-HTTP realm on another host: never contacted, with an identity token or a
        // password.
        let (addr, seen) = challenging_registry(
            r#"Bearer realm="http://auth.example.invalid/token",service="s""#,
            no_token,
        )
        .await;
        let tokens = Tokens::new(&addr, "http", super::super::http::client(&addr).unwrap());
        for (secret, held) in [
            (
                Secret::RefreshToken("s3cr3t-refresh".to_owned()),
                "identity token",
            ),
            (
                Secret::Password("u".to_owned(), "s3cr3t-refresh".to_owned()),
                "credentials",
            ),
        ] {
            let Err(Denied::Failed(err)) = tokens
                .authorize(&secret, "repository:cvo/x:pull", |_| false)
                .await
            else {
                panic!("not refused")
            };
            assert!(
                err.contains("not reached over HTTPS")
                    && err.contains(&format!("Docker config's {held} is not sent there"))
                    && err.contains("--insecure-registry auth.example.invalid")
                    && !err.contains("s3cr3t-refresh"),
                "{err}"
            );
        }
        assert_eq!(seen.lock().unwrap().len(), 1, "only /v2/, once");
        // A registry asking for Basic auth: the password goes to it; an identity token has no
        // use there.
        let (basic, _) = challenging_registry(r#"Basic realm="x""#, no_token).await;
        let tokens = Tokens::new(&basic, "http", super::super::http::client(&basic).unwrap());
        let password = Secret::Password("u".to_owned(), "p".to_owned());
        assert!(matches!(
            tokens.authorize(&password, "repository:cvo/x:pull", |_| true).await,
            Ok(Authorization::Basic(u, p)) if u == "u" && p == "p"
        ));
        let refresh = Secret::RefreshToken("r".to_owned());
        assert!(matches!(
            tokens
                .authorize(&refresh, "repository:cvo/x:pull", |_| true)
                .await,
            Ok(Authorization::None)
        ));
    }

    /// A token server whose answer never ends, or says it is larger than the cap: refused
    /// naming the cap, at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_server_answering_without_end_is_refused_at_the_cap() {
        let endless_token = || respond(200, &[("content-type", "application/json")], endless());
        let declared = || respond(200, &[("content-length", "99999999999")], endless());
        for token in [endless_token as fn() -> _, declared] {
            let (addr, seen) =
                challenging_registry(r#"Bearer realm="http://{host}/token",service="s""#, token)
                    .await;
            let tokens = Tokens::new(&addr, "http", super::super::http::client(&addr).unwrap());
            let started = std::time::Instant::now();
            for secret in [
                Secret::None,
                Secret::Password("u".to_owned(), "p".to_owned()),
            ] {
                let Err(Denied::TooLarge(err)) = tokens
                    .authorize(&secret, "repository:cvo/x:pull", |_| true)
                    .await
                else {
                    panic!("not refused for its size")
                };
                assert!(
                    err.contains(&format!(
                        "answered more than {MAX_TOKEN_ANSWER_BYTES} bytes, the most a token answer may hold"
                    )) && err.contains("/token"),
                    "{err}"
                );
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
            let seen = seen.lock().unwrap();
            assert!(
                seen.iter().any(|(m, p, a)| m == "GET"
                    && p.starts_with("/token?scope=repository%3Acvo%2Fx%3Apull&service=s")
                    && a.as_deref().is_some_and(|a| a.starts_with("Basic "))),
                "{seen:?}"
            );
        }
    }
}
