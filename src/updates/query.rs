//! The request an update service is asked: `GET <upstream>?arch=A&channel=C&id=ID&version=V`,
//! built as OpenShift's cluster-version operator builds it, and the checks that come before it
//! (each a `RetrievedUpdates=False` reason of its own: `NoUpstream`, `InvalidURI`, `InvalidID`,
//! `NoCurrentVersion`, `NoChannel`, `InvalidCurrentVersion`, in the CVO's order).
//!
//! The query keeps the parameters the upstream URL already has, adds the four, and is encoded
//! with keys sorted (Go's `url.Values.Encode`). The cluster ID must be a UUID (the forms Go's
//! `uuid.Parse` accepts) and is sent in its canonical lower-case form. A URL's user
//! information is never sent nor shown: [`Request::shown`] is the URL with it replaced by `***`.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::Failure;

/// What ClusterVersion's spec says about the update service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    /// `spec.upstream` (empty: none).
    pub upstream: String,
    /// `spec.channel` (empty: none).
    pub channel: String,
    /// `spec.clusterID`.
    pub cluster_id: String,
}

impl Source {
    /// The source `ClusterVersion.spec` names (absent fields read as empty).
    pub fn of_spec(spec: &serde_json::Value) -> Self {
        let text = |k: &str| spec.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        Source {
            upstream: text("upstream").to_owned(),
            channel: text("channel").to_owned(),
            cluster_id: text("clusterID").to_owned(),
        }
    }
}

/// A request ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The URL sent (no user information).
    pub uri: http::Uri,
    /// The URL as it may be shown in messages and logs (user information as `***`).
    pub shown: String,
    /// The current version, as the graph is searched for it.
    pub version: semver::Version,
    pub channel: String,
}

/// Go's name of the architecture this binary was built for (`GOARCH`), as the update
/// service expects it in `arch`.
pub fn arch() -> &'static str {
    go_arch(std::env::consts::ARCH, cfg!(target_endian = "little"))
}

fn go_arch(rust: &'static str, little_endian: bool) -> &'static str {
    match (rust, little_endian) {
        ("x86_64", _) => "amd64",
        ("x86", _) => "386",
        ("aarch64", _) => "arm64",
        ("powerpc64", true) => "ppc64le",
        ("powerpc64", false) => "ppc64",
        ("loongarch64", _) => "loong64",
        ("mips64", true) => "mips64le",
        ("mipsle", _) | ("mips", true) => "mipsle",
        (other, _) => other,
    }
}

/// The request for `source` from a cluster at `version` (the release the operator runs), or
/// the condition saying why there is none.
pub fn request(source: &Source, version: Option<&str>, arch: &str) -> Result<Request, Failure> {
    if source.upstream.is_empty() {
        return Err(Failure::new(
            "NoUpstream",
            "No updateService server has been set to retrieve updates.",
        ));
    }
    let (base, shown) = parse_upstream(&source.upstream)?;
    let id = parse_uuid(&source.cluster_id)
        .map_err(|e| Failure::new("InvalidID", format!("invalid cluster ID: {e}")))?;
    let Some(version) = version.filter(|v| !v.is_empty()) else {
        return Err(Failure::new(
            "NoCurrentVersion",
            "The cluster version does not have a semantic version assigned and cannot calculate valid upgrades.",
        ));
    };
    if source.channel.is_empty() {
        return Err(Failure::new(
            "NoChannel",
            "The update channel has not been configured.",
        ));
    }
    let version: semver::Version = version.parse().map_err(|_| {
        Failure::new(
            "InvalidCurrentVersion",
            "The current cluster version is not a valid semantic version and cannot be used to calculate upgrades.",
        )
    })?;
    let mut params: Vec<(String, String)> = base
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    params.push(("arch".into(), arch.into()));
    params.push(("channel".into(), source.channel.clone()));
    params.push(("id".into(), id));
    params.push(("version".into(), version.to_string()));
    let query = encode(params);
    let with_query = |url: &str| {
        let path = url.split_once('?').map_or(url, |(p, _)| p);
        format!("{path}?{query}")
    };
    let sent = with_query(&strip_userinfo(&base));
    let uri: http::Uri = sent.parse().map_err(|e| {
        Failure::new(
            "InvalidURI",
            format!("failed to parse update service URL: parse {shown:?}: {e}"),
        )
    })?;
    Ok(Request {
        uri,
        shown: with_query(&shown),
        version,
        channel: source.channel.clone(),
    })
}

/// The upstream URL and how it may be shown, or `InvalidURI`.
fn parse_upstream(upstream: &str) -> Result<(http::Uri, String), Failure> {
    let shown = redact(upstream);
    let invalid = |why: String| {
        Failure::new(
            "InvalidURI",
            format!("failed to parse update service URL: parse {shown:?}: {why}"),
        )
    };
    let uri: http::Uri = upstream.parse().map_err(|e| invalid(format!("{e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(invalid(format!(
                "unsupported protocol scheme {other:?} (use http or https)"
            )));
        }
        None => {
            return Err(invalid(
                "the URL needs a scheme (http or https) and a host".into(),
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host".into()));
    }
    Ok((uri, shown))
}

/// `url` with the user information (`user:password@`) replaced by `***`.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let host = &authority[at + 1..];
    match scheme {
        Some(s) => format!("{s}://***@{host}{tail}"),
        None => format!("***@{host}{tail}"),
    }
}

/// The URL without user information.
fn strip_userinfo(uri: &http::Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("https");
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    let path = uri.path();
    format!("{scheme}://{host}{port}{path}")
}

/// What Go's `url.QueryEscape` leaves as it is: letters, digits, `-`, `_`, `.`, `~`.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `key=value&…` sorted by key (values of one key keep their order), escaped as Go escapes a
/// query (space as `+`).
fn encode(mut params: Vec<(String, String)>) -> String {
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let escape = |s: &str| {
        utf8_percent_encode(s, QUERY)
            .to_string()
            .replace("%20", "+")
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A UUID in the forms Go's `uuid.Parse` accepts (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`,
/// with `urn:uuid:` or braces around it, or 32 hex digits), in canonical lower-case form;
/// else Go's error text.
fn parse_uuid(text: &str) -> Result<String, String> {
    let dashed = match text.len() {
        36 => text,
        45 if text
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("urn:uuid:")) =>
        {
            &text[9..]
        }
        38 if text.starts_with('{') && text.ends_with('}') => &text[1..37],
        32 => {
            return if text.bytes().all(|b| b.is_ascii_hexdigit()) {
                let t = text.to_ascii_lowercase();
                Ok(format!(
                    "{}-{}-{}-{}-{}",
                    &t[..8],
                    &t[8..12],
                    &t[12..16],
                    &t[16..20],
                    &t[20..]
                ))
            } else {
                Err("invalid UUID format".into())
            };
        }
        n => return Err(format!("invalid UUID length: {n}")),
    };
    let ok = dashed.bytes().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => b == b'-',
        _ => b.is_ascii_hexdigit(),
    });
    if ok && dashed.len() == 36 {
        Ok(dashed.to_ascii_lowercase())
    } else {
        Err("invalid UUID format".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0F1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

    fn source(upstream: &str, channel: &str, id: &str) -> Source {
        Source {
            upstream: upstream.into(),
            channel: channel.into(),
            cluster_id: id.into(),
        }
    }

    fn reason(r: Result<Request, Failure>) -> (String, String) {
        let f = r.expect_err("a failure");
        (f.reason.to_owned(), f.message)
    }

    #[test]
    fn the_query_has_the_four_parameters_sorted_and_escaped_as_go_does() {
        let r = request(
            &source(
                "https://graph.example.com:8443/api/graph?zone=eu+west&a=1",
                "stable 1.5/&x",
                ID,
            ),
            Some("1.4.0+build.7"),
            "amd64",
        )
        .expect("a request");
        assert_eq!(
            r.uri.to_string(),
            "https://graph.example.com:8443/api/graph?a=1&arch=amd64&channel=stable+1.5%2F%26x&id=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0&version=1.4.0%2Bbuild.7&zone=eu+west"
        );
        assert_eq!(r.shown, r.uri.to_string());
        assert_eq!(r.version, semver::Version::parse("1.4.0+build.7").unwrap());
    }

    #[test]
    fn credentials_in_the_url_are_neither_sent_nor_shown() {
        let r = request(
            &source("https://me:s3cret@graph.example.com/g", "c", ID),
            Some("1.0.0"),
            "amd64",
        )
        .expect("a request");
        assert!(!r.uri.to_string().contains("s3cret"), "{}", r.uri);
        assert!(!r.uri.to_string().contains("me"), "{}", r.uri);
        assert!(
            r.shown.starts_with("https://***@graph.example.com/g?"),
            "{}",
            r.shown
        );
        let (reason, message) = reason(request(
            &source("https://me:s3cret@bad host/", "c", ID),
            Some("1.0.0"),
            "amd64",
        ));
        assert_eq!(reason, "InvalidURI");
        assert!(!message.contains("s3cret"), "{message}");
        assert_eq!(redact("http://a:b@h:1/p?q=x@y"), "http://***@h:1/p?q=x@y");
        assert_eq!(redact("http://h/p"), "http://h/p");
    }

    #[test]
    fn each_missing_or_invalid_setting_has_the_cvo_reason_and_message() {
        let v = Some("1.4.0");
        assert_eq!(
            reason(request(&source("", "", ""), v, "amd64")),
            (
                "NoUpstream".into(),
                "No updateService server has been set to retrieve updates.".into()
            )
        );
        for bad in [
            "graph.example.com/api",
            "ftp://graph.example.com/",
            "http://",
            "https://a b/",
        ] {
            let (r, m) = reason(request(&source(bad, "c", ID), v, "amd64"));
            assert_eq!(r, "InvalidURI", "{bad}: {m}");
            assert!(m.starts_with("failed to parse update service URL: "), "{m}");
        }
        assert_eq!(
            reason(request(&source("http://g/", "c", "x"), v, "amd64")),
            (
                "InvalidID".into(),
                "invalid cluster ID: invalid UUID length: 1".into()
            )
        );
        assert_eq!(
            reason(request(
                &source("http://g/", "c", &ID.replace('-', "_")),
                v,
                "amd64"
            ))
            .1,
            "invalid cluster ID: invalid UUID format"
        );
        assert_eq!(
            reason(request(&source("http://g/", "c", ID), None, "amd64")).0,
            "NoCurrentVersion"
        );
        assert_eq!(
            reason(request(&source("http://g/", "", ID), v, "amd64")),
            (
                "NoChannel".into(),
                "The update channel has not been configured.".into()
            )
        );
        assert_eq!(
            reason(request(
                &source("http://g/", "c", ID),
                Some("v1.4"),
                "amd64"
            ))
            .0,
            "InvalidCurrentVersion"
        );
    }

    #[test]
    fn cluster_ids_in_the_forms_go_accepts() {
        let canonical = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        for form in [
            ID.to_owned(),
            format!("urn:uuid:{ID}"),
            format!("URN:UUID:{ID}"),
            format!("{{{ID}}}"),
            ID.replace('-', ""),
        ] {
            assert_eq!(parse_uuid(&form).as_deref(), Ok(canonical), "{form}");
        }
        for bad in [
            "",
            "x",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg",
            "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0]",
        ] {
            assert!(parse_uuid(bad).is_err(), "{bad}");
        }
        // Multi-byte text never splits a character.
        assert!(parse_uuid("ééééééééééééééééééééééééééééééééééééé").is_err());
        assert!(parse_uuid("urn:uuid:éééééééééééééééééé").is_err());
    }

    #[test]
    fn go_architecture_names() {
        assert_eq!(go_arch("x86_64", true), "amd64");
        assert_eq!(go_arch("aarch64", true), "arm64");
        assert_eq!(go_arch("powerpc64", true), "ppc64le");
        assert_eq!(go_arch("s390x", false), "s390x");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(arch(), "amd64");
    }
}
