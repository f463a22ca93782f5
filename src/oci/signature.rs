//! cosign's key-based signature artifact, and judging it. The signature of the manifest
//! `sha256:HEX` in a repository is the image tagged `sha256-HEX.sig` in the same repository
//! (or the same OCI layout): an OCI image manifest whose config is an image config
//! (`application/vnd.oci.image.config.v1+json`, its `rootfs.diff_ids` the layers' digests, as
//! cosign's go-containerregistry writes it) and whose every layer is one signature: a
//! simple-signing payload ([`super::payload`], media type
//! `application/vnd.dev.cosign.simplesigning.v1+json`) with the annotation
//! `dev.cosignproject.cosign/signature`, the base64 ASN.1 DER ECDSA P-256 SHA-256 signature of
//! the payload's bytes. Several signatures may sit on one tag: one layer that verifies with
//! one of the given keys, and names the right digest, suffices (the repository it names is
//! not checked: see [`check`]).
//!
//! This file knows the format only; [`super::attach`] reads and writes it in registries and
//! layouts.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::keys::{PublicKey, SigningKey};
use super::shape::MANIFEST_MEDIA_TYPE;
use super::{Digest, payload};

/// The media type of a signature layer (the payload).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The config media type of a signature image.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// The largest payload read.
pub const MAX_PAYLOAD_BYTES: u64 = 256 << 10;
/// The most signatures of one tag looked at.
pub const MAX_SIGNATURES: usize = 64;

/// The tag of the signature of `digest`: `sha256-HEX.sig`.
pub fn tag(digest: &Digest) -> String {
    format!("sha256-{}.sig", digest.hex())
}

/// Which keys verify a release, and whether a failure refuses it.
#[derive(Clone, Debug)]
pub struct Verify {
    /// Any one of them suffices.
    pub keys: Vec<PublicKey>,
    /// `true`: a failed verification is an error ([`super::OciError::Verification`]);
    /// `false` (the operator's `force`): the release is read and the failure reported in
    /// [`SignatureCheck::Failed`].
    pub enforce: bool,
}

/// What the signature check of a release found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureCheck {
    /// No verification was asked for.
    NotAsked,
    /// A signature verified with the key file `key`.
    Verified {
        /// The key file that matched.
        key: String,
    },
    /// Verification failed (and was not enforced): why, in plain words.
    Failed {
        /// What failed.
        why: String,
    },
}

/// A descriptor of a signature manifest (config or layer), annotations kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer {
    /// Its media type.
    pub media_type: String,
    /// `sha256:…` of its bytes.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its annotations (the signature, and whatever other tools add).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Layer {
    /// The [`super::shape::Descriptor`] to fetch this layer with.
    pub fn descriptor(&self) -> super::shape::Descriptor {
        super::shape::Descriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: self.size,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignatureManifest {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    config: Layer,
    #[serde(default)]
    layers: Vec<Layer>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

/// The layers of the signature manifest `bytes`; a message when it is not one.
pub fn layers(bytes: &[u8]) -> Result<Vec<Layer>, String> {
    let manifest: SignatureManifest = serde_json::from_slice(bytes)
        .map_err(|e| format!("the signature manifest is malformed ({e})"))?;
    if manifest.schema_version != 2 {
        return Err(format!(
            "the signature manifest is malformed (schemaVersion {})",
            manifest.schema_version
        ));
    }
    Ok(manifest.layers)
}

/// The signature layer of `payload` signed with `key` (the payload's bytes are the blob).
pub fn signed_layer(key: &SigningKey, payload: &[u8]) -> Layer {
    let signature = base64::engine::general_purpose::STANDARD.encode(key.sign(payload));
    Layer {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
        digest: Digest::of(payload).to_string(),
        size: payload.len() as u64,
        annotations: [(SIGNATURE_ANNOTATION.to_owned(), signature)].into(),
    }
}

/// The signature manifest and its config holding `layers`, as cosign writes them (an image
/// config with zero times, one history entry and one diff ID per layer).
pub fn artifact(layers: &[Layer]) -> (Vec<u8>, Vec<u8>) {
    let config = serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": layers.iter().map(|_| serde_json::json!({"created": "0001-01-01T00:00:00Z"})).collect::<Vec<_>>(),
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>()},
        "config": {},
    });
    let config = serde_json::to_vec(&config).expect("a config serializes");
    let manifest = SignatureManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        config: Layer {
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            digest: Digest::of(&config).to_string(),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
        },
        layers: layers.to_vec(),
        annotations: BTreeMap::new(),
    };
    let manifest = serde_json::to_vec(&manifest).expect("a manifest serializes");
    (manifest, config)
}

/// Why one signature layer did not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Not a signature layer cvo can read (what is wrong).
    Malformed(String),
    /// No given key verifies its signature.
    NoKey,
    /// A given key verifies it, but its payload claims something else (what).
    Claims(String),
}

/// Checks one signature layer whose blob is `payload` (already verified against the layer's
/// digest): the key file whose key verifies it, if its payload names `digest`. The repository
/// the payload names is not checked, as neither cosign nor OpenShift's CVO checks it: the
/// digest is what is signed, and a release mirrored into another registry or repository (an
/// air-gapped cluster's) is the same release.
pub fn check(
    layer: &Layer,
    payload: &[u8],
    keys: &[PublicKey],
    digest: &Digest,
) -> Result<String, Rejection> {
    if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
        return Err(Rejection::Malformed(format!(
            "a layer of media type {}, not {SIMPLE_SIGNING_MEDIA_TYPE}",
            layer.media_type
        )));
    }
    let Some(encoded) = layer.annotations.get(SIGNATURE_ANNOTATION) else {
        return Err(Rejection::Malformed(format!(
            "a layer without the annotation {SIGNATURE_ANNOTATION}"
        )));
    };
    let signature = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| {
            Rejection::Malformed(format!(
                "the annotation {SIGNATURE_ANNOTATION} is not base64"
            ))
        })?;
    let Some(key) = keys.iter().find(|k| k.verifies(payload, &signature)) else {
        return Err(Rejection::NoKey);
    };
    let by = &key.name;
    let claims = payload::parse(payload)
        .map_err(|e| Rejection::Claims(format!("the signature by {by} is valid but {e}")))?;
    if claims.digest != digest.to_string() {
        return Err(Rejection::Claims(format!(
            "the signature by {by} is valid but signs another release, {} (a signature copied from another release's tag)",
            claims.digest
        )));
    }
    Ok(key.name.clone())
}

/// The one sentence that says why no layer of `tag` verified, from each layer's
/// [`Rejection`]: a valid signature naming something else first, then keys, then malformed
/// layers.
pub fn why(tag: &str, rejections: &[Rejection], keys: &[PublicKey]) -> String {
    if rejections.is_empty() {
        return format!("the signature image {tag} holds no signature");
    }
    if let Some(Rejection::Claims(c)) = rejections
        .iter()
        .find(|r| matches!(r, Rejection::Claims(_)))
    {
        return format!("{tag}: {c}");
    }
    let names = keys
        .iter()
        .map(|k| k.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let unverified = rejections
        .iter()
        .filter(|r| **r == Rejection::NoKey)
        .count();
    if unverified > 0 {
        return format!(
            "{tag}: none of its {} signature{} verifies with {names}: it was signed by another key, or the signed payload was changed",
            rejections.len(),
            if rejections.len() == 1 { "" } else { "s" },
        );
    }
    let first = rejections
        .iter()
        .find_map(|r| match r {
            Rejection::Malformed(m) => Some(m.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    format!("{tag}: malformed signature ({first})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::keys::tests::new_key;

    const REPO: &str = "127.0.0.1:5000/cvo/x";

    fn signed(key: &SigningKey, digest: &Digest, repo: &str) -> (Layer, Vec<u8>) {
        let payload = payload::write(repo, digest);
        (signed_layer(key, &payload), payload)
    }

    #[test]
    fn a_signature_verifies_with_its_key_and_names_the_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let (_, key) = new_key(dir.path(), "k.pem");
        let digest = Digest::of(b"release");
        let (layer, payload) = signed(&key, &digest, REPO);
        assert_eq!(layer.digest, Digest::of(&payload).to_string());
        let got = check(&layer, &payload, &[key.public_key()], &digest).unwrap();
        assert_eq!(got, key.path().display().to_string());
    }

    #[test]
    fn another_key_or_another_digest_are_rejected_another_repository_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (_, key) = new_key(dir.path(), "k.pem");
        let (_, other) = new_key(dir.path(), "other.pem");
        let digest = Digest::of(b"release");
        let (layer, payload) = signed(&key, &digest, REPO);
        let keys = [other.public_key()];
        assert_eq!(
            check(&layer, &payload, &keys, &digest),
            Err(Rejection::NoKey)
        );
        let why = why("sha256-x.sig", &[Rejection::NoKey], &keys);
        assert!(
            why.contains("signed by another key") && why.contains("other.pem"),
            "{why}"
        );
        let keys = [key.public_key()];
        let moved = Digest::of(b"another release");
        let Err(Rejection::Claims(c)) = check(&layer, &payload, &keys, &moved) else {
            panic!("a moved signature verified")
        };
        assert!(
            c.contains("signs another release") && c.contains(&digest.to_string()),
            "{c}"
        );
        // The repository the payload names is not checked (a mirror's is another).
        assert_eq!(
            check(&layer, &payload, &keys, &digest),
            Ok(key.public_key().name.clone())
        );
        // A payload changed after signing.
        let mut changed = payload.clone();
        changed[10] ^= 1;
        assert_eq!(
            check(&layer, &changed, &keys, &digest),
            Err(Rejection::NoKey)
        );
    }

    #[test]
    fn corrupted_signatures_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let (_, key) = new_key(dir.path(), "k.pem");
        let keys = [key.public_key()];
        let digest = Digest::of(b"release");
        let (layer, payload) = signed(&key, &digest, REPO);
        let mut bad = layer.clone();
        bad.annotations
            .insert(SIGNATURE_ANNOTATION.into(), "not base64!".into());
        let r = check(&bad, &payload, &keys, &digest).unwrap_err();
        assert!(
            matches!(&r, Rejection::Malformed(m) if m.contains("not base64")),
            "{r:?}"
        );
        assert!(why("t", &[r], &keys).contains("malformed signature"));
        // Valid base64, but not a DER signature (its first byte changed).
        let mut der = base64::engine::general_purpose::STANDARD
            .decode(&layer.annotations[SIGNATURE_ANNOTATION])
            .unwrap();
        der[0] ^= 0xff;
        bad.annotations.insert(
            SIGNATURE_ANNOTATION.into(),
            base64::engine::general_purpose::STANDARD.encode(der),
        );
        assert_eq!(check(&bad, &payload, &keys, &digest), Err(Rejection::NoKey));
        bad.annotations.clear();
        assert!(matches!(
            check(&bad, &payload, &keys, &digest),
            Err(Rejection::Malformed(_))
        ));
        assert!(layers(b"{").unwrap_err().contains("malformed"));
        assert!(why("t", &[], &keys).contains("holds no signature"));
    }

    #[test]
    fn several_signatures_on_one_tag_any_key_suffices() {
        let dir = tempfile::tempdir().unwrap();
        let (_, a) = new_key(dir.path(), "a.pem");
        let (_, b) = new_key(dir.path(), "b.pem");
        let (_, c) = new_key(dir.path(), "c.pem");
        let digest = Digest::of(b"release");
        let (la, pa) = signed(&a, &digest, REPO);
        let (lb, pb) = signed(&b, &digest, REPO);
        let (manifest, config) = artifact(&[la.clone(), lb.clone()]);
        let read = layers(&manifest).unwrap();
        assert_eq!(read, vec![la, lb]);
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"],
            serde_json::json!([Digest::of(&pa).to_string(), Digest::of(&pb).to_string()])
        );
        // Keys c and b: the first layer fails, the second verifies with b.
        let keys = [c.public_key(), b.public_key()];
        let results: Vec<_> = [(&read[0], &pa), (&read[1], &pb)]
            .iter()
            .map(|(l, p)| check(l, p, &keys, &digest))
            .collect();
        assert_eq!(results[0], Err(Rejection::NoKey));
        assert_eq!(
            results[1].as_deref(),
            Ok(b.path().display().to_string().as_str())
        );
    }

    /// A signature `cosign sign --key` made (a published test vector of sigstore-rs, from its
    /// cosign signature-layer tests: the public key, the base64 signature, the image): it
    /// verifies over the payload cvo writes for the same image, byte for byte.
    #[test]
    fn a_signature_made_by_cosign_verifies_over_cvos_payload() {
        let cosign_pub = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAENptdY/l3nB0yqkXLBWkZWQwo6+cu\nOSWS1X9vPavpiQOoTTGC0xX57OojUadxF1cdQmrsiReWg2Wn4FneJfa8xw==\n-----END PUBLIC KEY-----\n";
        let signature = "MEUCIQD6q/COgzOyW0YH1Dk+CCYSt4uAhm3FDHUwvPI55zwnlwIgE0ZK58ZOWpZw8YVmBapJhBqCfdPekIknimuO0xH8Jh8=";
        let digest = Digest::parse(
            "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b",
        )
        .unwrap();
        let repository = "registry-testing.svc.lan/busybox";
        let key =
            PublicKey::from_spki(pem::parse(cosign_pub).unwrap().contents(), "cosign.pub").unwrap();
        let payload = payload::write(repository, &digest);
        let layer = Layer {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
            digest: Digest::of(&payload).to_string(),
            size: payload.len() as u64,
            annotations: [(SIGNATURE_ANNOTATION.to_owned(), signature.to_owned())].into(),
        };
        assert_eq!(
            check(&layer, &payload, std::slice::from_ref(&key), &digest),
            Ok("cosign.pub".to_owned())
        );
        let other = Digest::of(b"other");
        assert!(check(&layer, &payload::write(repository, &other), &[key], &other).is_err());
    }
}
