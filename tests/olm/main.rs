//! OLM: the operand-cleanup reconciler against an API server (`olm_cleanup`), the planner's
//! randomized safety test (`olm_safety`) over a model cluster (`model`), and the OLM types on
//! real CSVs (`olm_types`).

#[path = "../common/mod.rs"]
mod common;

mod model;
mod olm_cleanup;
mod olm_safety;
mod olm_types;
