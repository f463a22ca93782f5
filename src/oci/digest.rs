//! SHA-256 content digests (`sha256:<64 hex>`), computed with ring while bytes stream.

use std::fmt;

/// A SHA-256 content digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 lower-case hex>`; any other algorithm or form is refused.
    pub fn parse(s: &str) -> Result<Digest, String> {
        let Some(hex) = s.strip_prefix("sha256:") else {
            return Err(format!(
                "{s:?} is not a sha256 digest (write sha256: and 64 hex digits)"
            ));
        };
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!(
                "{s:?} is not a sha256 digest (write sha256: and 64 lower-case hex digits)"
            ));
        }
        Ok(Digest {
            hex: hex.to_owned(),
        })
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let mut h = Hasher::new();
        h.update(bytes);
        h.finish()
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

/// A running SHA-256.
pub struct Hasher(ring::digest::Context);

impl Default for Hasher {
    fn default() -> Self {
        Hasher::new()
    }
}

impl Hasher {
    /// A fresh hash.
    pub fn new() -> Hasher {
        Hasher(ring::digest::Context::new(&ring::digest::SHA256))
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest of everything added.
    pub fn finish(self) -> Digest {
        let d = self.0.finish();
        let hex = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Digest { hex }
    }
}

/// Reads `reader` to the end into `out`, hashing and counting: refused when it holds more
/// than `cap` bytes (nothing past the cap is read) or its digest is not `expected`. `what`
/// names the content in messages.
pub fn copy_verified(
    reader: &mut impl std::io::Read,
    out: &mut impl std::io::Write,
    expected: &Digest,
    cap: u64,
    what: &str,
) -> Result<u64, VerifyError> {
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut total: u64 = 0;
    loop {
        let n = reader.read(&mut buf).map_err(VerifyError::Io)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > cap {
            return Err(VerifyError::TooLarge(format!(
                "{what} holds more than {cap} bytes: refused"
            )));
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(VerifyError::Io)?;
    }
    let got = hasher.finish();
    if &got != expected {
        return Err(VerifyError::Mismatch(format!(
            "{what} has digest {got}, not {expected}: its content changed or was corrupted, refused"
        )));
    }
    Ok(total)
}

/// Why [`copy_verified`] refused.
#[derive(Debug)]
pub enum VerifyError {
    /// Reading or writing failed.
    Io(std::io::Error),
    /// More bytes than the cap.
    TooLarge(String),
    /// The bytes have another digest.
    Mismatch(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest_and_parse() {
        let d = Digest::of(b"{}");
        assert_eq!(
            d.to_string(),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(Digest::parse(&d.to_string()), Ok(d));
        assert!(Digest::parse("sha512:00").is_err());
        assert!(Digest::parse(&format!("sha256:{}", "A".repeat(64))).is_err());
        assert!(Digest::parse("sha256:abc").is_err());
    }

    #[test]
    fn copy_refuses_mismatch_and_oversize() {
        let good = Digest::of(b"hello");
        let mut out = Vec::new();
        assert_eq!(
            copy_verified(&mut &b"hello"[..], &mut out, &good, 5, "blob").unwrap(),
            5
        );
        let mismatch = copy_verified(&mut &b"hellp"[..], &mut Vec::new(), &good, 5, "blob");
        assert!(matches!(mismatch, Err(VerifyError::Mismatch(m)) if m.contains("not sha256:")));
        let big = copy_verified(&mut &b"hello!"[..], &mut Vec::new(), &good, 5, "blob");
        assert!(matches!(big, Err(VerifyError::TooLarge(m)) if m.contains("more than 5 bytes")));
    }
}
