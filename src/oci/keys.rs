//! Signing and verification key files, in cosign's key-based format: a signing key is an
//! unencrypted PKCS#8 PEM ECDSA P-256 private key (`openssl ecparam -name prime256v1 -genkey |
//! openssl pkcs8 -topk8 -nocrypt`), a public key a PEM SubjectPublicKeyInfo of a P-256 key
//! (`cosign.pub`, `openssl ec -pubout`). Anything else (RSA, other curves, encrypted keys,
//! cosign's own encrypted key format, certificates) is refused in plain words naming the file
//! and what it holds. No message ever carries key material.
//!
//! ring parses the PKCS#8 key and does the ECDSA arithmetic; `pem` (already built for kube)
//! decodes PEM. A P-256 SubjectPublicKeyInfo is read by hand: DER is canonical, so every such
//! key is the same 26-byte header followed by the 65-byte uncompressed point.

use std::path::{Path, PathBuf};

use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
use ring::signature::{KeyPair, UnparsedPublicKey};

/// The DER header of a P-256 SubjectPublicKeyInfo (id-ecPublicKey, prime256v1, a 66-byte
/// BIT STRING): what precedes the uncompressed point.
const P256_SPKI_HEADER: &[u8] = &[
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The largest key file read (a PEM key is far smaller).
const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// A signing key: ECDSA P-256 with SHA-256, from a PKCS#8 PEM file.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    path: PathBuf,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A verification key: a P-256 public key, and the file it came from (what reports name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    point: Vec<u8>,
    /// The key file, as given.
    pub name: String,
}

impl SigningKey {
    /// Reads the signing key file `path` (see the module doc); a message naming the file and
    /// what it holds when it is not an unencrypted PKCS#8 P-256 key.
    pub fn load(path: &Path) -> Result<SigningKey, String> {
        let text = read_key_file(path)?;
        let what = path.display();
        let blocks = pem::parse_many(&text)
            .map_err(|_| format!("the signing key {what} is not a PEM file: {MAKE_KEY}"))?;
        let block = blocks
            .iter()
            .find(|b| b.tag() != "EC PARAMETERS")
            .ok_or_else(|| format!("the signing key {what} is not a PEM file: {MAKE_KEY}"))?;
        match block.tag() {
            "PRIVATE KEY" => SigningKey::from_pkcs8(block.contents(), path),
            "ENCRYPTED PRIVATE KEY" => Err(format!(
                "the signing key {what} is encrypted: cvo reads unencrypted PKCS#8 keys; decrypt it (openssl pkcs8 -in {what} -out PLAIN.pem) into a file only you can read"
            )),
            "EC PRIVATE KEY" => Err(format!(
                "the signing key {what} is an EC key in the SEC1 format: convert it to PKCS#8 with openssl pkcs8 -topk8 -nocrypt -in {what} -out KEY.pem"
            )),
            "RSA PRIVATE KEY" => Err(format!(
                "the signing key {what} is an RSA key: cvo signs with ECDSA P-256 keys, as cosign does; {MAKE_KEY}"
            )),
            tag if tag.contains("COSIGN") || tag.contains("SIGSTORE") => Err(format!(
                "the signing key {what} is in cosign's encrypted key format, which cvo does not read: {MAKE_KEY} (cosign import-key-pair --key KEY.pem gives cosign the same key)"
            )),
            "PUBLIC KEY" => Err(format!(
                "the signing key {what} is a public key: --sign-key takes the private key (give the public key to --verify-key)"
            )),
            tag => Err(format!(
                "the signing key {what} holds a PEM block of type {tag:?}, not a PKCS#8 private key: {MAKE_KEY}"
            )),
        }
    }

    /// A key from PKCS#8 DER; `path` names it in messages.
    pub fn from_pkcs8(der: &[u8], path: &Path) -> Result<SigningKey, String> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der, &SystemRandom::new())
            .map_err(|_| {
                format!(
                    "the signing key {} is {}: cvo signs with ECDSA P-256 keys, as cosign does; {MAKE_KEY}",
                    path.display(),
                    describe_algorithm(der).unwrap_or("not a PKCS#8 ECDSA P-256 key")
                )
            })?;
        Ok(SigningKey {
            pair,
            path: path.to_owned(),
        })
    }

    /// The key file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The ASN.1 DER ECDSA P-256 SHA-256 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .expect("ECDSA signing with the system's random numbers")
            .as_ref()
            .to_vec()
    }

    /// The public key of this key, named after the signing key file.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            point: self.pair.public_key().as_ref().to_vec(),
            name: self.path.display().to_string(),
        }
    }
}

impl PublicKey {
    /// Reads the public key file `path` (PEM SubjectPublicKeyInfo of a P-256 key, as
    /// `cosign.pub`); a message naming the file and what it holds otherwise.
    pub fn load(path: &Path) -> Result<PublicKey, String> {
        let text = read_key_file(path)?;
        let what = path.display();
        let make = "make one from the signing key with openssl pkey -in KEY.pem -pubout -out KEY.pub (or use cosign.pub)";
        let block = pem::parse(&text)
            .map_err(|_| format!("the public key {what} is not a PEM file: {make}"))?;
        match block.tag() {
            "PUBLIC KEY" => {}
            "CERTIFICATE" => {
                return Err(format!(
                    "the public key {what} is a certificate: give its public key (openssl x509 -in {what} -pubkey -noout)"
                ));
            }
            tag if tag.contains("PRIVATE KEY") => {
                return Err(format!(
                    "{what} is a private key: --verify-key takes the public key; {make}"
                ));
            }
            tag => {
                return Err(format!(
                    "the public key {what} holds a PEM block of type {tag:?}, not a public key: {make}"
                ));
            }
        }
        PublicKey::from_spki(block.contents(), &what.to_string())
    }

    /// A key from SubjectPublicKeyInfo DER; `name` names it.
    pub fn from_spki(der: &[u8], name: &str) -> Result<PublicKey, String> {
        match der.strip_prefix(P256_SPKI_HEADER) {
            Some(point) if point.len() == 65 && point[0] == 4 => Ok(PublicKey {
                point: point.to_vec(),
                name: name.to_owned(),
            }),
            _ => Err(format!(
                "the public key {name} is {}: cvo verifies ECDSA P-256 signatures, as cosign's key-based signing makes",
                describe_algorithm(der).unwrap_or("not an uncompressed ECDSA P-256 public key")
            )),
        }
    }

    /// The PEM SubjectPublicKeyInfo of this key (the `cosign.pub` format, Unix line ends).
    pub fn to_pem(&self) -> String {
        let mut der = P256_SPKI_HEADER.to_vec();
        der.extend_from_slice(&self.point);
        let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
        pem::encode_config(&pem::Pem::new("PUBLIC KEY", der), config)
    }

    /// Whether `signature` (ASN.1 DER) is this key's ECDSA P-256 SHA-256 signature of
    /// `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }
}

const MAKE_KEY: &str = "make a key with openssl ecparam -name prime256v1 -genkey | openssl pkcs8 -topk8 -nocrypt -out KEY.pem";

fn read_key_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| format!("the key file {}: cannot read it: {e}", path.display()))?;
    let mut text = Vec::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("the key file {}: cannot read it: {e}", path.display()))?;
    if text.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(format!(
            "the key file {} has more than {MAX_KEY_FILE_BYTES} bytes: not a PEM key",
            path.display()
        ));
    }
    Ok(text)
}

/// What kind of key DER `der` seems to hold, by the algorithm identifiers it names (only to
/// word a refusal; ring decides what is accepted).
fn describe_algorithm(der: &[u8]) -> Option<&'static str> {
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
    const P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];
    const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    const ED25519: &[u8] = &[0x06, 0x03, 0x2b, 0x65, 0x70];
    let has = |oid: &[u8]| der.windows(oid.len()).any(|w| w == oid);
    if has(RSA) {
        Some("an RSA key")
    } else if has(P384) {
        Some("an ECDSA P-384 key")
    } else if has(P521) {
        Some("an ECDSA P-521 key")
    } else if has(ED25519) {
        Some("an Ed25519 key")
    } else if has(P256) {
        Some("a P-256 key that cannot be read (damaged, or without its public key)")
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh P-256 signing key written as PKCS#8 PEM into `dir/name`.
    pub(crate) fn new_key(dir: &Path, name: &str) -> (PathBuf, SigningKey) {
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
                .unwrap();
        let path = dir.join(name);
        std::fs::write(
            &path,
            pem::encode(&pem::Pem::new("PRIVATE KEY", doc.as_ref())),
        )
        .unwrap();
        let key = SigningKey::load(&path).unwrap();
        (path, key)
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/oci/keys")
            .join(name)
    }

    #[test]
    fn openssl_keys_sign_and_their_public_keys_verify() {
        let key = SigningKey::load(&fixture("p256.pem")).unwrap();
        let public = PublicKey::load(&fixture("p256.pub")).unwrap();
        assert_eq!(public.point, key.public_key().point);
        let sig = key.sign(b"payload");
        assert!(public.verifies(b"payload", &sig));
        assert!(!public.verifies(b"payloaD", &sig));
        // `openssl ecparam -genkey` output (EC PARAMETERS before the key) in SEC1 form.
        let err = SigningKey::load(&fixture("p256-sec1.pem")).unwrap_err();
        assert!(
            err.contains("SEC1") && err.contains("openssl pkcs8 -topk8"),
            "{err}"
        );
        // The PEM written back is the file openssl wrote.
        assert_eq!(
            public.to_pem(),
            std::fs::read_to_string(fixture("p256.pub")).unwrap()
        );
    }

    #[test]
    fn another_key_does_not_verify() {
        let dir = tempfile::tempdir().unwrap();
        let (_, a) = new_key(dir.path(), "a.pem");
        let (_, b) = new_key(dir.path(), "b.pem");
        let sig = a.sign(b"m");
        assert!(a.public_key().verifies(b"m", &sig));
        assert!(!b.public_key().verifies(b"m", &sig));
        assert!(!a.public_key().verifies(b"m", b"not DER"));
    }

    #[test]
    fn other_key_types_are_refused_in_plain_words() {
        for (file, words) in [
            ("rsa.pem", "is an RSA key"),
            ("rsa-traditional.pem", "is an RSA key"),
            ("p384.pem", "is an ECDSA P-384 key"),
            ("ed25519.pem", "is an Ed25519 key"),
            ("encrypted.pem", "is encrypted"),
            ("p256.cosign.key", "cosign's encrypted key format"),
            ("p256.pub", "is a public key"),
        ] {
            let err = SigningKey::load(&fixture(file)).unwrap_err();
            assert!(err.contains(words), "{file}: {err}");
            assert!(err.contains(&fixture(file).display().to_string()), "{err}");
            assert!(!err.contains("BEGIN"), "{err}");
        }
        for (file, words) in [
            ("rsa.pub", "is an RSA key"),
            ("p384.pub", "is an ECDSA P-384 key"),
            ("p256.pem", "is a private key"),
        ] {
            let err = PublicKey::load(&fixture(file)).unwrap_err();
            assert!(err.contains(words), "{file}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk");
        std::fs::write(&junk, "not a key").unwrap();
        assert!(
            SigningKey::load(&junk)
                .unwrap_err()
                .contains("not a PEM file")
        );
        assert!(
            PublicKey::load(&junk)
                .unwrap_err()
                .contains("not a PEM file")
        );
        let missing = dir.path().join("missing.pem");
        assert!(
            SigningKey::load(&missing)
                .unwrap_err()
                .contains("cannot read it")
        );
    }
}
