//! Releases as OCI artifacts (issue 18): a release directory pushed to a registry (or an OCI
//! image layout) as one reproducible `tar+gzip` layer, and read back by digest.
//!
//! The data flows: a `--release` source ([`reference`]: `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`
//! or `oci-layout:PATH[:TAG|@sha256:HEX]`) is resolved to a manifest digest once ([`fetch`]);
//! everything after that names the digest, so a tag moved meanwhile changes nothing. The
//! manifest must have one of the shapes of [`shape`] (cvo's or Flux's); its layer is read from
//! the [`cache`] when a verified copy is there, else from the [`registry`] or the [`layout`],
//! its SHA-256 ([`digest`]) checked while it streams and its size capped; then [`extract`]
//! unpacks it into a temporary directory (regular files and directories only), renamed into
//! place when complete. The caller loads that directory exactly as a release directory.
//!
//! With a [`Verify`] in the [`FetchOptions`], the release's cosign signature (the tag
//! `sha256-HEX.sig` beside it: [`signature`] the format, [`payload`] what it signs, [`keys`] the
//! key files, [`attach`] reading and writing it in a registry or layout) is checked once the
//! digest is resolved and before its layer is read.
//!
//! [`layer`] writes the reproducible layer and [`push`] sends it, with the manifest, to a
//! registry or a layout, and signs it; [`mirror`] copies a release artifact unchanged (same
//! digest) with its signature, e.g. from a registry into an OCI layout; [`registry`] exchanges a
//! Docker identity token for bearer tokens through `oauth`. This module knows nothing of
//! manifests' contents, of the cluster or of the engine: it only moves verified bytes.

pub mod attach;
pub mod cache;
pub mod digest;
pub mod error;
pub mod extract;
pub mod fetch;
mod http;
pub mod keys;
pub mod layer;
pub mod layout;
pub mod mirror;
mod oauth;
pub mod payload;
pub mod push;
pub mod reference;
pub mod registry;
pub mod shape;
pub mod signature;

pub use digest::Digest;
pub use error::OciError;
pub use fetch::{FetchOptions, Kind, Opened, Resolved, open, resolve, verify_signature};
pub use keys::{PublicKey, SigningKey};
pub use mirror::mirror;
pub use push::{Pushed, push_artifact, push_release, sign_pushed};
pub use reference::{LayoutRef, RegistryRef, Source};
pub use registry::{Access, Credentials};
pub use signature::{SignatureCheck, Verify};

/// Size caps of what is read: the release loader's limits (`--max-file-bytes`,
/// `--max-release-bytes`, docs/limits.md) applied to the artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Bytes of one extracted file.
    pub max_file_bytes: u64,
    /// Bytes of the compressed layer, and of all extracted files together.
    pub max_release_bytes: u64,
}

/// The largest manifest read (4 MiB, the distribution spec's recommended limit).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
