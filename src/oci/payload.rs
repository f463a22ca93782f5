//! The simple-signing payload a cosign signature signs: which image (by manifest digest) under
//! which name. cosign writes
//! `{"critical":{"identity":{"docker-reference":"HOST/REPO"},"image":{"docker-manifest-digest":"sha256:…"},"type":"cosign container image signature"},"optional":null}`;
//! other writers (skopeo) put more in `optional` and may name a tag in `docker-reference`.

use serde::{Deserialize, Serialize};

use super::Digest;

/// `critical.type` of a cosign container image signature.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// What a payload claims: the image's name and manifest digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    /// `critical.identity.docker-reference`, as written.
    pub reference: String,
    /// `critical.image.docker-manifest-digest`, as written.
    pub digest: String,
}

impl Claims {
    /// The repository the reference names (`HOST[:PORT]/REPO`), without a tag or digest.
    pub fn repository(&self) -> &str {
        let r = self.reference.as_str();
        let r = r.split_once('@').map_or(r, |(name, _)| name);
        match r.rfind(':') {
            Some(colon) if !r[colon..].contains('/') => &r[..colon],
            _ => r,
        }
    }
}

/// The payload of a signature of the manifest `digest` named `reference` (`HOST[:PORT]/REPO`),
/// byte for byte as cosign writes it.
pub fn write(reference: &str, digest: &Digest) -> Vec<u8> {
    let payload = Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: reference.to_owned(),
            },
            image: Image {
                docker_manifest_digest: digest.to_string(),
            },
            kind: PAYLOAD_TYPE.to_owned(),
        },
        optional: None,
    };
    serde_json::to_vec(&payload).expect("a payload serializes")
}

/// The claims of `bytes`; a message saying what is wrong when it is not a cosign container
/// image signature payload.
pub fn parse(bytes: &[u8]) -> Result<Claims, String> {
    let payload: Payload = serde_json::from_slice(bytes)
        .map_err(|e| format!("its payload is not a simple-signing payload ({e})"))?;
    if payload.critical.kind != PAYLOAD_TYPE {
        return Err(format!(
            "its payload is of type {:?}, not {PAYLOAD_TYPE:?}",
            payload.critical.kind
        ));
    }
    Ok(Claims {
        reference: payload.critical.identity.docker_reference,
        digest: payload.critical.image.docker_manifest_digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_cosigns_and_read_back() {
        let digest = Digest::of(b"m");
        let bytes = write("127.0.0.1:5000/cvo/x", &digest);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"127.0.0.1:5000/cvo/x"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
        let claims = parse(&bytes).unwrap();
        assert_eq!(claims.digest, digest.to_string());
        assert_eq!(claims.repository(), "127.0.0.1:5000/cvo/x");
    }

    #[test]
    fn skopeos_payloads_and_references_with_tags_are_read() {
        let digest = Digest::of(b"m");
        let text = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"localhost:5000/cvo/x:v1"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":{{"creator":"containers/image","timestamp":1700000000}}}}"#
        );
        let claims = parse(text.as_bytes()).unwrap();
        assert_eq!(claims.repository(), "localhost:5000/cvo/x");
        for (reference, repository) in [
            ("localhost:5000/cvo/x", "localhost:5000/cvo/x"),
            ("h/r@sha256:00", "h/r"),
            ("h:1/r:t@sha256:00", "h:1/r"),
        ] {
            let c = Claims {
                reference: reference.into(),
                digest: String::new(),
            };
            assert_eq!(c.repository(), repository);
        }
    }

    #[test]
    fn other_payloads_are_refused() {
        assert!(
            parse(b"{}")
                .unwrap_err()
                .contains("not a simple-signing payload")
        );
        let other = br#"{"critical":{"identity":{"docker-reference":"h/r"},"image":{"docker-manifest-digest":"sha256:00"},"type":"atomic container signature"},"optional":null}"#;
        assert!(
            parse(other)
                .unwrap_err()
                .contains("atomic container signature")
        );
    }
}
