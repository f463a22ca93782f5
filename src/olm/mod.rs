//! OLM operand cleanup: when an admin opts a ClusterServiceVersion in (finalizer
//! [`plan::FINALIZER`] plus `spec.cleanup.enabled: true`), delete its operator's custom
//! resources before the CSV goes away — only when that is provably safe.
//!
//! - [`types`]: hand-written serde subsets of CSV, OperatorGroup and Subscription.
//! - [`plan`]: the pure decision; every safety rule lives there.
//! - [`reconciler`]: the kube-runtime controller that gathers snapshots and applies decisions.
//!
//! See `docs/operand-cleanup.md` for the admin's view.

pub mod plan;
pub mod reconciler;
pub mod types;

pub use reconciler::{Config, Error, run, run_with_config};
