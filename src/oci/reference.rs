//! `--release` sources that are OCI artifacts: `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`
//! (a registry) and `oci-layout:PATH[:TAG|@sha256:HEX]` (an OCI image layout directory).
//! Anything else is not an OCI source (a release directory).

use std::fmt;
use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;

use super::Digest;

/// The distribution spec's repository name: lower-case path components.
static REPOSITORY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$",
    )
    .expect("repository pattern")
});
/// The distribution spec's tag.
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$").expect("tag pattern"));
/// A registry host: a DNS name or IPv4 address, or a bracketed IPv6 address, and a port.
static HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
        .expect("host pattern")
});

/// An OCI source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An artifact in a registry.
    Registry(RegistryRef),
    /// An artifact in an OCI image layout directory.
    Layout(LayoutRef),
}

/// `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryRef {
    /// `HOST[:PORT]` as written.
    pub registry: String,
    /// The repository in the registry (`cvo/example`).
    pub repository: String,
    /// The tag, when given.
    pub tag: Option<String>,
    /// The manifest digest, when given (it wins over the tag).
    pub digest: Option<Digest>,
}

/// `oci-layout:PATH[:TAG|@sha256:HEX]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutRef {
    /// The layout directory.
    pub path: PathBuf,
    /// The tag (`org.opencontainers.image.ref.name` in index.json), when given.
    pub tag: Option<String>,
    /// The manifest digest, when given.
    pub digest: Option<Digest>,
}

impl Source {
    /// Parses `text` as an OCI source: `Ok(None)` when it is not one (no `oci://` or
    /// `oci-layout:` prefix), an error in plain words when it is one, written wrong.
    pub fn parse(text: &str) -> Result<Option<Source>, String> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return parse_registry(rest)
                .map(|r| Some(Source::Registry(r)))
                .map_err(|why| {
                    format!("{text:?}: {why}; write oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]")
                });
        }
        if let Some(rest) = text.strip_prefix("oci-layout:") {
            return parse_layout(rest)
                .map(|r| Some(Source::Layout(r)))
                .map_err(|why| {
                    format!("{text:?}: {why}; write oci-layout:PATH[:TAG|@sha256:HEX]")
                });
        }
        Ok(None)
    }

    /// The tag the source names, if any.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Source::Registry(r) => r.tag.as_deref(),
            Source::Layout(l) => l.tag.as_deref(),
        }
    }

    /// The digest the source pins, if any.
    pub fn digest(&self) -> Option<&Digest> {
        match self {
            Source::Registry(r) => r.digest.as_ref(),
            Source::Layout(l) => l.digest.as_ref(),
        }
    }
}

impl RegistryRef {
    /// `HOST[:PORT]/REPO`: the repository as image pull specs name it.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// What to ask the registry for: the digest when pinned, else the tag.
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => unreachable!("a parsed reference has a tag or a digest"),
        }
    }

    /// The host without its port (brackets of an IPv6 address removed).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }
}

/// The host of `HOST[:PORT]` (`[::1]:5000` → `::1`).
pub fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Registry(r) => {
                write!(f, "oci://{}/{}", r.registry, r.repository)?;
                if let Some(tag) = &r.tag {
                    write!(f, ":{tag}")?;
                }
                if let Some(d) = &r.digest {
                    write!(f, "@{d}")?;
                }
                Ok(())
            }
            Source::Layout(l) => {
                write!(f, "oci-layout:{}", l.path.display())?;
                if let Some(tag) = &l.tag {
                    write!(f, ":{tag}")?;
                }
                if let Some(d) = &l.digest {
                    write!(f, "@{d}")?;
                }
                Ok(())
            }
        }
    }
}

/// `rest` with an `@sha256:…` suffix split off.
fn split_digest(rest: &str) -> Result<(&str, Option<Digest>), String> {
    match rest.rsplit_once('@') {
        Some((head, digest)) => Ok((head, Some(Digest::parse(digest)?))),
        None => Ok((rest, None)),
    }
}

fn parse_registry(rest: &str) -> Result<RegistryRef, String> {
    let (head, digest) = split_digest(rest)?;
    let Some((registry, path)) = head.split_once('/') else {
        return Err("no repository after the registry".to_owned());
    };
    if registry.is_empty() || !HOST.is_match(registry) {
        return Err(format!("{registry:?} is not a registry host[:port]"));
    }
    // A tag follows the last ':' after the last '/'.
    let last = path.rsplit('/').next().unwrap_or(path);
    let (repository, tag) = match last.rsplit_once(':') {
        Some((_, tag)) => (&path[..path.len() - tag.len() - 1], Some(tag)),
        None => (path, None),
    };
    if !REPOSITORY.is_match(repository) {
        return Err(format!(
            "{repository:?} is not a repository name (lower-case letters, digits, '.', '_', '-', separated by '/')"
        ));
    }
    if let Some(tag) = tag
        && !TAG.is_match(tag)
    {
        return Err(format!(
            "{tag:?} is not a tag (letters, digits, '_', '.', '-', at most 128)"
        ));
    }
    if tag.is_none() && digest.is_none() {
        return Err("neither a tag nor a digest".to_owned());
    }
    Ok(RegistryRef {
        registry: registry.to_owned(),
        repository: repository.to_owned(),
        tag: tag.map(str::to_owned),
        digest,
    })
}

fn parse_layout(rest: &str) -> Result<LayoutRef, String> {
    if let Some(at) = rest.rfind("@sha256:") {
        let digest = Digest::parse(&rest[at + 1..])?;
        let path = &rest[..at];
        if path.is_empty() {
            return Err("no path".to_owned());
        }
        return Ok(LayoutRef {
            path: PathBuf::from(path),
            tag: None,
            digest: Some(digest),
        });
    }
    // A tag follows the last ':' when what follows it is a tag (no '/').
    let (path, tag) = match rest.rsplit_once(':') {
        Some((path, tag)) if TAG.is_match(tag) && !path.is_empty() => (path, Some(tag)),
        _ => (rest, None),
    };
    if path.is_empty() {
        return Err("no path".to_owned());
    }
    Ok(LayoutRef {
        path: PathBuf::from(path),
        tag: tag.map(str::to_owned),
        digest: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex() -> String {
        "a".repeat(64)
    }

    #[test]
    fn registry_references() {
        let Some(Source::Registry(r)) =
            Source::parse("oci://127.0.0.1:5000/cvo/example:1.0").unwrap()
        else {
            panic!("registry source")
        };
        assert_eq!(
            (
                r.registry.as_str(),
                r.repository.as_str(),
                r.tag.as_deref(),
                r.digest.as_ref()
            ),
            ("127.0.0.1:5000", "cvo/example", Some("1.0"), None)
        );
        assert_eq!(r.host(), "127.0.0.1");
        let pinned = format!("oci://quay.io/a/b:v1@sha256:{}", hex());
        let Some(Source::Registry(r)) = Source::parse(&pinned).unwrap() else {
            panic!("registry source")
        };
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.digest.as_ref().unwrap().hex(), hex());
        assert_eq!(Source::Registry(r).to_string(), pinned);
        let by_digest = format!("oci://[::1]:5000/x@sha256:{}", hex());
        let Some(Source::Registry(r)) = Source::parse(&by_digest).unwrap() else {
            panic!("registry source")
        };
        assert_eq!((r.host(), r.tag.as_deref()), ("::1", None));
    }

    #[test]
    fn registry_reference_mistakes_are_explained() {
        for (text, why) in [
            ("oci://host", "no repository"),
            ("oci://host/repo", "neither a tag nor a digest"),
            ("oci://host/Repo:1", "not a repository name"),
            ("oci://host/repo:-x", "not a tag"),
            ("oci://host/repo@sha256:12", "not a sha256 digest"),
            ("oci://ho st/repo:1", "not a registry host"),
            ("oci:///repo:1", "not a registry host"),
        ] {
            let err = Source::parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
            assert!(err.contains("oci://HOST"), "{err}");
        }
    }

    #[test]
    fn layout_references() {
        let Some(Source::Layout(l)) = Source::parse("oci-layout:/tmp/mirror:v1").unwrap() else {
            panic!("layout source")
        };
        assert_eq!(
            (l.path, l.tag.as_deref()),
            (PathBuf::from("/tmp/mirror"), Some("v1"))
        );
        let Some(Source::Layout(l)) = Source::parse("oci-layout:mirror").unwrap() else {
            panic!("layout source")
        };
        assert_eq!((l.path, l.tag), (PathBuf::from("mirror"), None));
        let Some(Source::Layout(l)) =
            Source::parse(&format!("oci-layout:/m@sha256:{}", hex())).unwrap()
        else {
            panic!("layout source")
        };
        assert_eq!(l.path, PathBuf::from("/m"));
        assert!(l.digest.is_some());
        assert!(Source::parse("oci-layout:").is_err());
    }

    #[test]
    fn directories_are_not_oci_sources() {
        assert_eq!(Source::parse("manifests-example").unwrap(), None);
        assert_eq!(Source::parse("/abs/dir:with:colons").unwrap(), None);
    }
}
