//! One GET of an update graph: `Accept: application/json`, over http or https (rustls with
//! the system's root CAs), bounded in time ([`super::TIMEOUT`] for the whole exchange) and in
//! size ([`super::MAX_BODY`]). Failures carry the CVO's reasons: `RemoteFailed` (no answer:
//! connection, TLS, timeout before the response), `ResponseFailed` (not `200`, a body too big
//! or cut short), and the messages name the URL as it may be shown (no credentials). No
//! proxy is used and redirects are not followed (a `3xx` is `ResponseFailed`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use super::Failure;
use super::query::Request;

/// The media type asked for, as the CVO asks for it.
const GRAPH_MEDIA_TYPE: &str = "application/json";

/// The body of the graph at `request`, or why not.
pub async fn get(request: &Request, timeout: Duration, max_body: usize) -> Result<Bytes, Failure> {
    let deadline = Instant::now() + timeout;
    let remote = |why: String| {
        Failure::new("RemoteFailed", format!("Get {:?}: {why}", request.shown))
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| remote(format!("no root CA certificates could be read on this system: {e}")))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let sent = http::Request::get(request.uri.clone())
        .header(http::header::ACCEPT, GRAPH_MEDIA_TYPE)
        .header(
            http::header::USER_AGENT,
            concat!("cvo/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::new())
        .map_err(|e| Failure::new("InvalidRequest", e.to_string()))?;
    let response = match tokio::time::timeout_at(deadline, client.request(sent)).await {
        Err(_) => {
            return Err(remote(format!(
                "no response within {} (timed out)",
                humantime::format_duration(timeout)
            )));
        }
        Ok(Err(e)) => return Err(remote(chain(&e))),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    if status != http::StatusCode::OK {
        return Err(Failure::new(
            "ResponseFailed",
            format!(
                "unexpected HTTP status: {} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or_default()
            )
            .trim_end()
            .to_owned(),
        ));
    }
    let too_big = || {
        Failure::new(
            "ResponseFailed",
            format!("the response is larger than {} bytes, the most cvo reads", max_body),
        )
    };
    let declared = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        return Err(too_big());
    }
    let body = Limited::new(response.into_body(), max_body);
    match tokio::time::timeout_at(deadline, body.collect()).await {
        Err(_) => Err(Failure::new(
            "ResponseFailed",
            format!(
                "the response was not read within {} (timed out)",
                humantime::format_duration(timeout)
            ),
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_big()),
        Ok(Err(e)) => Err(Failure::new("ResponseFailed", chain(e.as_ref()))),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// An error and its causes, `: `-separated.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
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
