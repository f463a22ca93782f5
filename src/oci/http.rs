//! Answers of registries and token servers read under a cap: a body is read as it streams,
//! chunk by chunk, and reading stops one chunk past the cap (at once when its
//! `Content-Length` is over it). `oci-client` reads a manifest, a token server's answer and
//! any error answer whole before anything can look at its size, so `cvo` asks for those itself,
//! with the same HTTP client (reqwest) and the same timeouts ([`client`]). Pushing still goes
//! through `oci-client` (see docs/oci-status.md).

use std::time::Duration;

/// The largest token-server answer read: a JWT with its certificate chain is a few KiB.
pub const MAX_TOKEN_ANSWER_BYTES: u64 = 1 << 20;
/// How much of an error answer is read for its message: the rest is not read.
pub const MAX_ERROR_BYTES: u64 = 64 << 10;
/// The longest a request for a small answer (a manifest, a token, an error) may take, its body
/// included: an answer that trickles in a byte at a time ends here (a stalled read ends after
/// the 60 s read timeout already).
pub const SMALL_ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// The HTTP client of registry reads and token requests: connecting times out after 10 s and
/// a stalled read after 60 s, as `oci-client`'s.
pub(super) fn client(registry: &str) -> Result<reqwest::Client, String> {
    // reqwest's rustls needs a process-wide crypto provider: ring, the one kube uses.
    // (Installing it twice is harmless: the first one stays.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("cvo/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            format!(
                "cannot set up a client for the registry {registry}: {} (a container needs the system's CA certificates, /etc/ssl/certs)",
                super::registry::describe_cause(&e)
            )
        })
}

/// Why a body was not read.
#[derive(Debug)]
pub(super) enum ReadFailure {
    /// More than the cap (said by `Content-Length`, or counted while reading).
    TooLarge,
    /// The connection failed or timed out while reading.
    Transport(reqwest::Error),
}

/// The body of `answer`, at most `cap` bytes; [`ReadFailure::TooLarge`] past it, without
/// reading more than one chunk beyond it.
pub(super) async fn read_capped(
    mut answer: reqwest::Response,
    cap: u64,
) -> Result<Vec<u8>, ReadFailure> {
    if answer.content_length().is_some_and(|n| n > cap) {
        return Err(ReadFailure::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(ReadFailure::Transport)? {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(ReadFailure::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first [`MAX_ERROR_BYTES`] of an error answer's body (what could be read of it; the
/// rest is never read).
pub(super) async fn error_body(mut answer: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = answer.chunk().await {
        let room = MAX_ERROR_BYTES as usize - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() as u64 >= MAX_ERROR_BYTES {
            break;
        }
    }
    body
}

/// The codes and messages of a registry's error answer (the distribution spec's
/// `{"errors": [{"code": …, "message": …}]}`); empty when it is not one.
pub(super) fn error_codes(body: &[u8]) -> Vec<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    serde_json::from_slice::<Envelope>(body)
        .map(|e| e.errors.into_iter().map(|x| (x.code, x.message)).collect())
        .unwrap_or_default()
}

/// Stand-in servers on loopback that misbehave as a real registry never does: shared by the
/// tests of this module, [`super::oauth`] and [`super::registry`].
#[cfg(test)]
pub(super) mod stand_in {
    use std::convert::Infallible;
    use std::sync::Arc;

    use bytes::Bytes;
    use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
    use hyper::body::Frame;

    /// A response body.
    pub type Body = BoxBody<Bytes, Infallible>;

    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        http_body_util::Full::new(bytes.into()).boxed()
    }

    /// A body that never ends (chunks of 64 KiB, as fast as they are taken) and has no
    /// `Content-Length`.
    pub fn endless() -> Body {
        let chunk = Bytes::from(vec![b'x'; 64 << 10]);
        let stream = futures::stream::repeat_with(move || Ok(Frame::data(chunk.clone())));
        StreamBody::new(stream).boxed()
    }

    /// A request as the stand-in saw it: method, path and query, `Authorization` header.
    pub type Seen = (String, String, Option<String>);

    /// A server on 127.0.0.1 answering every request with `answer`; its `HOST:PORT`, and the
    /// requests it had.
    pub async fn serve<F>(answer: F) -> (String, Arc<std::sync::Mutex<Vec<Seen>>>)
    where
        F: Fn(&hyper::Request<hyper::body::Incoming>, &str) -> hyper::Response<Body>
            + Send
            + Sync
            + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let answer = Arc::new(answer);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (host, log) = (addr.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (answer, log, host) = (answer.clone(), log.clone(), host.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let path = req
                            .uri()
                            .path_and_query()
                            .map_or_else(String::new, |p| p.to_string());
                        let auth = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        log.lock()
                            .unwrap()
                            .push((req.method().to_string(), path, auth));
                        let response = answer(&req, &host);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (addr, seen)
    }

    /// A response of `status` with `headers` and `body`.
    pub fn respond(status: u16, headers: &[(&str, &str)], body: Body) -> hyper::Response<Body> {
        let mut builder = hyper::Response::builder().status(status);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(body).expect("a response")
    }
}

#[cfg(test)]
mod tests {
    use super::stand_in::{endless, full, respond, serve};
    use super::*;

    #[tokio::test]
    async fn an_endless_body_stops_at_the_cap_and_a_declared_one_is_not_read() {
        let (addr, _) = serve(|req, _| match req.uri().path() {
            "/endless" => respond(200, &[], endless()),
            "/declared" => respond(200, &[("content-length", "999999999")], endless()),
            _ => respond(200, &[], full("small")),
        })
        .await;
        let http = client(&addr).unwrap();
        let get = |path: &str| http.get(format!("http://{addr}{path}")).send();
        let started = std::time::Instant::now();
        let answer = get("/endless").await.unwrap();
        assert!(matches!(
            read_capped(answer, 1 << 20).await,
            Err(ReadFailure::TooLarge)
        ));
        let answer = get("/declared").await.unwrap();
        assert!(matches!(
            read_capped(answer, 1 << 20).await,
            Err(ReadFailure::TooLarge)
        ));
        assert!(started.elapsed() < Duration::from_secs(10));
        let answer = get("/small").await.unwrap();
        assert_eq!(read_capped(answer, 5).await.unwrap(), b"small");
        // An error answer that never ends: its first 64 KiB.
        let answer = get("/endless").await.unwrap();
        assert_eq!(error_body(answer).await.len() as u64, MAX_ERROR_BYTES);
    }

    #[test]
    fn error_codes_are_read_from_the_envelope() {
        assert_eq!(
            error_codes(br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#),
            [("MANIFEST_UNKNOWN".to_owned(), "unknown".to_owned())]
        );
        assert!(error_codes(b"<html>").is_empty());
    }
}
