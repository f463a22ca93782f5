//! Helpers that give an empty embedded API server (`cvo apply|operator|operand-cleanup
//! --in-memory`, `cvo dev-apiserver`, the tests) what a real cluster would have. None of it is
//! part of the engine: a real cluster gets no such help.
//!
//! - [`operators`]: the operators behind a release's ClusterOperators, played so that their
//!   ClusterOperators report the release (only with the `in-memory` feature);
//! - [`olm_crds`]: minimal CRDs of OLM's kinds, and installing them (also used by the tests on a
//!   cluster without OLM).

pub mod olm_crds;
#[cfg(feature = "in-memory")]
pub mod operators;
