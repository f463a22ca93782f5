//! What a pass means for the cluster as a whole: conditions (Available, Progressing,
//! Failing, Upgradeable), the update type and its preconditions, and the ClusterVersion
//! status writer.
//!
//! - [`conditions`]: building the four conditions from a pass (pure);
//! - [`update`]: install / patch / minor-or-major and the preconditions that refuse an update
//!   (pure);
//! - [`clusterversion`]: reading and writing `ClusterVersion/version` status;
//! - [`spec`]: ClusterVersion spec — overrides that take objects out of management, and
//!   what in it is invalid (pure);
//! - [`record`]: the deletion record (which deletions `cvo` completed, under which release).

pub mod clusterversion;
pub mod conditions;
pub mod record;
pub mod spec;
pub mod update;

pub use conditions::{Condition, ConditionStatus};
pub use update::{Precondition, PreconditionFailure, UpdateType};
