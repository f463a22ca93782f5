//! What failed when the API server could not be used, in words: the address and "connection
//! refused", "certificate signed by an unknown authority", "the credentials of context X were
//! rejected (401)". Never prints a credential: only the server address, the context name and
//! the server's own status message are used.

use std::error::Error as _;

/// Where the client was pointed: for messages.
#[derive(Clone, Debug)]
pub struct Target {
    /// The API server URL from the kubeconfig (or the in-cluster one).
    pub server: String,
    /// The kubeconfig context, when there is one.
    pub context: Option<String>,
}

impl Target {
    fn context(&self) -> String {
        match &self.context {
            Some(c) => format!("context {c}"),
            None => "the in-cluster service account".to_owned(),
        }
    }
}

/// One sentence for a failed request to `target`.
pub fn describe(err: &kube::Error, target: &Target) -> String {
    let server = &target.server;
    if let kube::Error::Api(status) = err {
        // The server's own words, when they say more than the status line.
        let detail = [&status.message, &status.reason]
            .into_iter()
            .find(|s| !s.is_empty() && !matches!(s.as_str(), "Unauthorized" | "Forbidden"))
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        return match status.code {
            401 => format!(
                "{server}: the credentials of {} were rejected (401 Unauthorized{detail}); renew the token or client certificate of that kubeconfig user",
                target.context()
            ),
            403 => format!(
                "{server}: {} is not allowed to do this (403 Forbidden{detail})",
                target.context()
            ),
            code => format!("{server}: the API server answered {code}{detail}"),
        };
    }
    format!("cannot reach the API server at {server}: {}", cause(err))
}

/// The root cause of a transport error, as kubectl words it where it can.
pub fn cause(err: &kube::Error) -> String {
    let mut chain: Vec<String> = Vec::new();
    let mut io_kind = None;
    let mut source: Option<&(dyn std::error::Error + 'static)> = err.source();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind.get_or_insert(io.kind());
        }
        chain.push(e.to_string());
        source = e.source();
    }
    let text = chain.join(": ");
    let unknown_authority = "certificate signed by an unknown authority (the kubeconfig's certificate-authority did not sign the server's certificate)";
    let tls = [
        ("UnknownIssuer", unknown_authority),
        // A CA of the same name that did not sign it (certificates made again).
        ("BadSignature", unknown_authority),
        (
            "CaUsedAsEndEntity",
            "the server presents a CA certificate as its own certificate",
        ),
        (
            "NotValidForName",
            "the server's certificate is not valid for this address",
        ),
        ("Expired", "the server's certificate has expired"),
        ("NotValidYet", "the server's certificate is not valid yet"),
        (
            "CorruptMessage",
            "the server does not speak TLS at this address (use http:// or the right port)",
        ),
        (
            "InvalidContentType",
            "the server does not speak TLS at this address (use http:// or the right port)",
        ),
    ];
    if let Some((_, words)) = tls.iter().find(|(marker, _)| text.contains(marker)) {
        return (*words).to_owned();
    }
    use std::io::ErrorKind as K;
    match io_kind {
        Some(K::ConnectionRefused) => {
            "connection refused (is the API server running, and is this its address?)".to_owned()
        }
        Some(K::TimedOut) => "connection timed out".to_owned(),
        Some(K::ConnectionReset) => "the connection was reset by the server".to_owned(),
        Some(K::UnexpectedEof) => "the server closed the connection".to_owned(),
        _ => {
            // The innermost messages say the most; skip the wrappers' generic words.
            let last = chain
                .iter()
                .rev()
                .find(|s| !s.is_empty())
                .cloned()
                .unwrap_or_else(|| err.to_string());
            if last.contains("dns error") || last.contains("failed to lookup address") {
                format!("the host name does not resolve ({last})")
            } else {
                last
            }
        }
    }
}
