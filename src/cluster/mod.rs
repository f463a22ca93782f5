//! Everything that talks to a Kubernetes API server.
//!
//! - [`Cluster`] (this module's [`objects`]): get, server-side apply and delete of one object
//!   addressed by `apiVersion`/kind/namespace/name, through the discovery cache;
//! - [`discovery`]: the GVK → resource cache, refreshed when a kind is missing;
//! - [`crd`]: waiting for a CustomResourceDefinition to be `Established`;
//! - [`wait`]: waiting for one object to reach a state, with watches;
//! - [`list`]: every object of a kind, page by page, under the retry policy;
//! - [`name`]: `NAMESPACE/NAME` of a namespaced object, as command lines take it;
//! - [`request_error`]: what failed, in words (connection refused, unknown authority, 401);
//! - [`retry`]: which request errors are retried, for every request `cvo` sends (kube-client's
//!   own retry layer is switched off by [`client`]), waiting as [`crate::retry`] says;
//!
//! Verbs send one request per call and never retry: the caller runs them under [`retry`],
//! knowing what the request was for. Discovery retries its own lookups under the same policy. Waits are the exception by
//! nature: they end when the state is reached or their deadline passes.

pub mod crd;
pub mod discovery;
pub mod list;
pub mod name;
pub mod objects;
pub mod request_error;
pub mod retry;
pub mod selector;
pub mod wait;

pub use discovery::{Discovery, Resolved};
pub use name::NamespacedName;
pub use objects::{Cluster, DeleteOutcome, FIELD_MANAGER};

/// A client for `config` with kube-client's built-in retry layer switched off, so that
/// [`retry::RetryPolicy`] is the only policy (docs/apply.md): two stacked layers multiply
/// attempts and hide throttling from the report.
pub fn client(mut config: kube::Config) -> kube::Result<kube::Client> {
    config.default_retry = false;
    kube::Client::try_from(config)
}
