//! `cvo`: a cluster-version manifest applier.
//!
//! The code follows the data: [`release`] loads a release directory, [`graph`] plans it as a
//! run-level task graph, [`validate`] checks it for CI, [`cluster`] talks to API servers (and
//! holds the embedded in-memory one), and [`cli`] is the thin command-line shell on top.

pub mod apply;
pub mod cli;
pub mod cluster;
pub mod diagnostic;
pub mod graph;
pub mod lifecycle;
pub mod olm;
pub mod release;
pub mod status;
pub mod sync;
pub mod validate;
