//! The apply engine and the sync through `kube::Client`, on both servers (`common`): one
//! module per area. Every test that runs a sync or owns ClusterVersion holds
//! `common::sync_turn` / `common::cluster_version`: the tests of this binary run concurrently
//! in one process, and ClusterVersion `version` is one object for the whole cluster.

#[path = "../common/mod.rs"]
mod common;

mod apply_clusterversion;
mod apply_engine;
mod apply_faults;
mod apply_health;
mod apply_steady_state;
mod apply_sync;
mod capabilities;
mod cluster_version_spec;
mod deletion_record;
mod feature_gates;
mod openshift_corpus;
mod openshift_schema;
mod payload_semantics;
mod preflight;
mod status_truth;
