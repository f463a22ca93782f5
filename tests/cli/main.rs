//! The `cvo` command line as a user runs it (the real binary, `env!("CARGO_BIN_EXE_cvo")`):
//! one module per area (flags, validate, capabilities, graph, rbac, apply, operand-cleanup, hardening, the
//! Dockerfile). Tests that reach a cluster use `common` (in-memory by default, a real control
//! plane with `CVO_TEST_KUBECONFIG`); those that sync hold `common::sync_turn`.

#[path = "../common/mod.rs"]
mod common;

mod apply_cli;
mod ci_python_venv;
mod cli_cache;
mod cli_capabilities;
mod cli_ci;
mod cli_completion;
mod cli_config_file;
mod cli_dev_apiserver;
mod cli_feature_gates;
mod cli_flags;
mod cli_graph;
mod cli_hardening;
mod cli_logs;
mod cli_oci;
mod cli_operand_cleanup;
mod cli_progress;
mod cli_rbac;
mod cli_sign;
mod cli_timings;
mod cli_validate;
mod dockerfile;
