//! The one error of this module: what went wrong, in plain words, and whose fault it is
//! (the command line's, the registry's, or the artifact's).

/// Why an OCI source could not be read or written. Each message names the source or the
/// registry, the cause and what to do; none carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference or a flag is wrong (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// The registry or the layout could not be reached or read (exit code 1).
    #[error("{0}")]
    Unavailable(String),
    /// The artifact was read but refused: wrong shape, wrong digest, too large, or an
    /// unsafe tar entry (exit code 1).
    #[error("{0}")]
    Refused(String),
    /// Bytes read do not match the digest (or the size) their manifest or reference gives: a
    /// blob changed or corrupted in the registry, the layout or on the way (exit code 1; with
    /// an enforced `--verify-key`, a [`OciError::Verification`]: the signed release changed).
    #[error("{0}")]
    Mismatch(String),
    /// The release's signature did not verify with the given keys (exit code 4): `why` says
    /// what failed (no signature tag, another key, another digest or repository in the
    /// payload, a malformed signature).
    #[error("the release {digest} failed signature verification: {why}; nothing of it was used")]
    Verification {
        /// The manifest digest of the release.
        digest: super::Digest,
        /// What failed, in plain words.
        why: String,
    },
}

impl OciError {
    /// The same error with `context: ` before its message.
    pub fn context(self, context: impl std::fmt::Display) -> OciError {
        match self {
            OciError::Usage(m) => OciError::Usage(format!("{context}: {m}")),
            OciError::Unavailable(m) => OciError::Unavailable(format!("{context}: {m}")),
            OciError::Refused(m) => OciError::Refused(format!("{context}: {m}")),
            OciError::Mismatch(m) => OciError::Mismatch(format!("{context}: {m}")),
            OciError::Verification { digest, why } => OciError::Verification {
                digest,
                why: format!("{context}: {why}"),
            },
        }
    }
}
