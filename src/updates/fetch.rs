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
    let remote =
        |why: String| Failure::new("RemoteFailed", format!("Get {:?}: {why}", request.shown));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| {
            remote(format!(
                "no root CA certificates could be read on this system: {e}"
            ))
        })?
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
            format!(
                "the response is larger than {} bytes, the most cvo reads",
                max_body
            ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::updates::query::{Source, request};
    use std::io::{Read, Write};

    /// A one-connection server on loopback (a thread): reads the request head, sends it back
    /// through the channel, then writes `response` (after `delay`).
    async fn serve(
        response: Vec<u8>,
        delay: Duration,
    ) -> (u16, tokio::sync::oneshot::Receiver<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let Ok((mut socket, _)) = listener.accept() else {
                return;
            };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
            // The client gives up first when `delay` is long: this thread ends with the test.
            std::thread::sleep(delay);
            let _ = socket.write_all(&response);
            let _ = socket.shutdown(std::net::Shutdown::Both);
        });
        (port, rx)
    }

    fn to(port: u16, scheme: &str) -> Request {
        let source = Source {
            upstream: format!("{scheme}://user:pw@127.0.0.1:{port}/graph"),
            channel: "stable-1".into(),
            cluster_id: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into(),
        };
        request(&source, Some("1.4.0"), "amd64").expect("request")
    }

    const SHORT: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_graph_is_fetched_with_the_query_and_accept_header() {
        let body = br#"{"nodes": []}"#;
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        response.extend_from_slice(body);
        let (port, head) = serve(response, Duration::ZERO).await;
        let got = get(&to(port, "http"), Duration::from_secs(5), 1024)
            .await
            .expect("body");
        assert_eq!(&got[..], body);
        let head = head.await.expect("request head");
        assert!(
            head.starts_with("GET /graph?arch=amd64&channel=stable-1&id=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0&version=1.4.0 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(
            head.to_ascii_lowercase()
                .contains("\r\naccept: application/json\r\n"),
            "{head}"
        );
        assert!(
            !head.contains("pw") && !head.to_ascii_lowercase().contains("authorization"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn not_200_is_response_failed() {
        let (port, _head) = serve(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
            Duration::ZERO,
        )
        .await;
        let f = get(&to(port, "http"), Duration::from_secs(5), 1024)
            .await
            .expect_err("404");
        assert_eq!(
            f,
            Failure::new("ResponseFailed", "unexpected HTTP status: 404 Not Found")
        );
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_response_failed_declared_or_not() {
        let declared = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n".to_vec();
        let (port, _h) = serve(declared, Duration::ZERO).await;
        let f = get(&to(port, "http"), Duration::from_secs(5), 1024)
            .await
            .expect_err("too big");
        assert_eq!(f.reason, "ResponseFailed");
        assert!(
            f.message.contains("larger than 1024 bytes"),
            "{}",
            f.message
        );
        // No length: the body ends when the connection closes.
        let mut undeclared = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        undeclared.extend(std::iter::repeat_n(b' ', 5000));
        let (port, _h) = serve(undeclared, Duration::ZERO).await;
        let f = get(&to(port, "http"), Duration::from_secs(5), 1024)
            .await
            .expect_err("too big");
        assert!(
            f.message.contains("larger than 1024 bytes"),
            "{}",
            f.message
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out_as_remote_failed() {
        let (port, _h) = serve(Vec::new(), Duration::from_secs(30)).await;
        let started = std::time::Instant::now();
        let f = get(&to(port, "http"), SHORT, 1024)
            .await
            .expect_err("timeout");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(f.reason, "RemoteFailed");
        assert!(
            f.message.starts_with("Get \"http://***@127.0.0.1:"),
            "{}",
            f.message
        );
        assert!(
            f.message.ends_with("no response within 300ms (timed out)"),
            "{}",
            f.message
        );
    }

    #[tokio::test]
    async fn no_server_and_a_failed_tls_handshake_are_remote_failed() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let f = get(&to(port, "http"), Duration::from_secs(5), 1024)
            .await
            .expect_err("refused");
        assert_eq!(f.reason, "RemoteFailed", "{}", f.message);
        // https to a server that answers in plain HTTP.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            if let Ok((mut socket, _)) = listener.accept() {
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
        });
        let f = get(&to(port, "https"), Duration::from_secs(5), 1024)
            .await
            .expect_err("not TLS");
        assert!(!f.message.contains("timed out"), "{}", f.message);
        assert_eq!(f.reason, "RemoteFailed", "{}", f.message);
        assert!(!f.message.contains("pw"), "{}", f.message);
    }
}
