//! Docker identity tokens: the OAuth2 refresh-token exchange of the distribution token
//! protocol, which `oci-client` does not do (it would send the identity token itself to the
//! registry, which refuses it).
//!
//! `docker login` against a registry whose token server issues refresh tokens stores one as
//! `identitytoken` in the Docker config. To use it, a client asks the registry (`GET /v2/`)
//! for its challenge (`WWW-Authenticate: Bearer realm=…,service=…`), then `POST`s to the realm
//! the form `grant_type=refresh_token`, `refresh_token`, `service`, `scope`
//! (`repository:NAME:pull` or `…:pull,push`) and `client_id`, and receives
//! `{"access_token": …}`: the bearer token for the registry.
//!
//! The refresh token is long-lived, so it is only sent to a realm over HTTPS, or over plain
//! HTTP when the realm's host is one cvo reaches over plain HTTP anyway (loopback, or named by
//! `--insecure-registry`). Neither token is ever printed or logged; a refusal names the
//! registry, the realm and the HTTP status, never the answer's body.

use std::time::Duration;

use crate::retry::Backoff;

/// The `client_id` sent with the exchange (distribution's clients send one; it is required).
const CLIENT_ID: &str = "cvo";

/// A registry's bearer challenge: where to get tokens.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Challenge {
    /// The token server's URL.
    pub realm: String,
    /// The `service` to name (the tokens' audience).
    pub service: Option<String>,
}

/// The bearer challenge among `WWW-Authenticate` header values, if any.
pub(super) fn bearer_challenge<'a>(headers: impl Iterator<Item = &'a str>) -> Option<Challenge> {
    for header in headers {
        for challenge in http_auth::ChallengeParser::new(header).flatten() {
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
                return Some(Challenge {
                    realm,
                    service: param("service"),
                });
            }
        }
    }
    None
}

/// The form `POST`ed to the realm.
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

/// How to reach the registry and its token server.
pub(super) struct Exchanger {
    http: reqwest::Client,
    /// `scheme://HOST[:PORT]` of the registry.
    base: String,
    /// `HOST[:PORT]`, for messages.
    registry: String,
}

impl Exchanger {
    /// An exchanger for `registry` reached at `scheme://registry`.
    pub fn new(registry: &str, scheme: &str) -> Result<Exchanger, String> {
        // reqwest's rustls needs the process-wide provider (ring), as in `Registry::new`.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot set up a client for the registry {registry}: {e}"))?;
        Ok(Exchanger {
            http,
            base: format!("{scheme}://{registry}"),
            registry: registry.to_owned(),
        })
    }

    /// Exchanges `refresh_token` for an access token for `scope`; `None` when the registry
    /// asks for no bearer token (then the identity token has no use there). `plain_http_ok`
    /// says whether a realm's `HOST[:PORT]` may be reached over plain HTTP.
    pub async fn exchange(
        &self,
        refresh_token: &str,
        scope: &str,
        plain_http_ok: impl Fn(&str) -> bool,
    ) -> Result<Option<String>, String> {
        let registry = &self.registry;
        let v2 = format!("{}/v2/", self.base);
        let answer = self
            .send(
                || self.http.get(&v2),
                &format!("the registry {registry} at {v2}"),
            )
            .await?;
        let challenge = bearer_challenge(
            answer
                .headers()
                .get_all(reqwest::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        let Some(challenge) = challenge else {
            return Ok(None);
        };
        let realm = reqwest::Url::parse(&challenge.realm).map_err(|_| {
            format!(
                "the registry {registry} names a token server whose address is not a URL ({:?})",
                challenge.realm
            )
        })?;
        let realm_host = match (realm.host_str(), realm.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        };
        match realm.scheme() {
            "https" => {}
            "http" if plain_http_ok(&realm_host) => {}
            _ => {
                return Err(format!(
                    "the registry {registry} sends credentials to the token server {realm}, which is not reached over HTTPS: the Docker config's identity token is not sent there (--insecure-registry {realm_host} allows it)"
                ));
            }
        }
        let body = form(refresh_token, challenge.service.as_deref(), scope);
        let what = format!("the token server {realm} of the registry {registry}");
        let answer = self
            .send(
                || {
                    self.http
                        .post(realm.clone())
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            "application/x-www-form-urlencoded",
                        )
                        .body(body.clone())
                },
                &what,
            )
            .await?;
        let status = answer.status();
        if !status.is_success() {
            return Err(format!(
                "{what} refused the Docker config's identity token (HTTP {}): it may have expired or been revoked; log in again with `docker login {registry}`",
                status.as_u16()
            ));
        }
        #[derive(serde::Deserialize)]
        struct Answer {
            #[serde(default)]
            access_token: Option<String>,
            #[serde(default)]
            token: Option<String>,
        }
        let bytes = answer
            .bytes()
            .await
            .map_err(|e| format!("{what}: reading its answer: {e}"))?;
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|_| format!("{what} answered something that is not a token (not JSON)"))?;
        answer
            .access_token
            .or(answer.token)
            .filter(|t| !t.is_empty())
            .map(Some)
            .ok_or_else(|| format!("{what} answered without an access_token"))
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
            let failure = match make().send().await {
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
    use super::*;

    #[test]
    fn the_bearer_challenge_is_found_among_others() {
        let headers = [
            r#"Basic realm="x""#,
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#,
        ];
        assert_eq!(
            bearer_challenge(headers.into_iter()),
            Some(Challenge {
                realm: "https://auth.example/token".to_owned(),
                service: Some("registry.example".to_owned()),
            })
        );
        assert_eq!(bearer_challenge([r#"Basic realm="x""#].into_iter()), None);
        assert_eq!(
            bearer_challenge([r#"Bearer service="s""#].into_iter()),
            None
        );
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

    /// A registry on loopback whose `/v2/` answers 401 with `challenge`; the number of
    /// requests it had, shared.
    async fn challenging_registry(
        challenge: &'static str,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let hits = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_req| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(401)
                                    .header("www-authenticate", challenge)
                                    .body(http_body_util::Full::new(bytes::Bytes::new()))
                                    .expect("response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (addr, hits)
    }

    #[tokio::test]
    async fn the_identity_token_goes_to_no_plain_http_realm_but_a_trusted_one() {
        // A plain-HTTP realm on another host: never contacted.
        let (addr, hits) =
            challenging_registry(r#"Bearer realm="http://auth.example.invalid/token",service="s""#)
                .await;
        let exchanger = Exchanger::new(&addr, "http").unwrap();
        let err = exchanger
            .exchange("s3cr3t-refresh", "repository:cvo/x:pull", |_| false)
            .await
            .unwrap_err();
        assert!(
            err.contains("not reached over HTTPS")
                && err.contains("--insecure-registry auth.example.invalid")
                && !err.contains("s3cr3t-refresh"),
            "{err}"
        );
        assert_eq!(
            hits.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "only /v2/"
        );
        // A registry asking for no bearer token: nothing to exchange.
        let (basic, _) = challenging_registry(r#"Basic realm="x""#).await;
        let exchanger = Exchanger::new(&basic, "http").unwrap();
        assert_eq!(
            exchanger
                .exchange("s3cr3t-refresh", "repository:cvo/x:pull", |_| true)
                .await
                .unwrap(),
            None
        );
    }
}
