//! `cvo`: a cluster-version manifest applier.
//!
//! The code follows the data: [`release`] loads a release directory, [`graph`] plans it as a
//! run-level task graph, [`validate`] checks it for CI, [`cluster`] talks to API servers (and
//! holds the embedded in-memory one), [`retry`] says how long every retry loop waits,
//! [`apply`] writes each manifest and [`health`] judges what it wrote, [`status`] derives
//! ClusterVersion status, [`sync`] orchestrates one sync (both for `cvo apply` and the
//! [`operator`], which keeps running it in the cluster), [`oci`] reads and pushes releases as
//! OCI artifacts (registries, OCI layouts), [`rbac`] derives the least-privilege RBAC the
//! operator needs for a release, [`olm`] cleans up OLM operands, [`lifecycle`] uninstalls
//! operators and signals cluster deletion, [`fleet`] rolls a release out to many clusters on Open
//! Cluster Management, [`version`] reads semantic versions with plain-worded errors, and [`cli`] is the thin command-line shell on top.

pub mod apply;
pub mod cli;
pub mod cluster;
pub mod dev;
pub mod diagnostic;
pub mod exit;
pub mod fleet;
#[cfg(test)]
mod function_length;
pub mod graph;
pub mod health;
#[cfg(test)]
mod import_rules;
pub mod lifecycle;
pub mod oci;
pub mod olm;
pub mod operator;
pub mod preflight;
pub mod rbac;
pub mod release;
pub mod retry;
pub mod status;
pub mod sync;
pub mod timings;
pub mod updates;
pub mod validate;
pub mod version;
