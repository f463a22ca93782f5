//! Everything that talks to a Kubernetes API server.
//!
//! - [`Cluster`] (this module's [`objects`]): get, server-side apply and delete of one object
//!   addressed by `apiVersion`/kind/namespace/name, through the discovery cache;
//! - [`discovery`]: the GVK → resource cache, refreshed when a kind is missing;
//! - [`crd`]: waiting for a CustomResourceDefinition to be `Established`;
//! - [`wait`]: waiting for one object to reach a state, with watches;
//! - [`memory`]: the embedded in-memory API server used by `cvo apply --in-memory`,
//!   `cvo dev-apiserver` and the test suites.
//!
//! Verbs send one request per call and never retry: retry policy belongs to the caller
//! (`crate::apply::retry`), which knows what the request was for. Waits are the exception by
//! nature: they end when the state is reached or their deadline passes.

pub mod crd;
pub mod discovery;
pub mod memory;
pub mod objects;
pub mod wait;

pub use discovery::{Discovery, Resolved};
pub use objects::{Cluster, DeleteOutcome, FIELD_MANAGER};
