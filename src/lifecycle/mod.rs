//! Managed components that remove things, beside [`crate::sync`] (not in it): each prints what
//! it will do first, is safe by default, and refuses rather than guesses.
//!
//! - [`uninstall`]: `cvo uninstall` — remove an OLM-installed operator in the order of OLM's
//!   guide, with the judgement the guide leaves to the admin (docs/uninstall.md);
//! - [`alive`]: the cluster-deletion signal — the `Alive` object, its deletion, who holds it
//!   (docs/cluster-deletion.md);
//! - [`finalizer`]: for Rust operators, hold `Alive` with a finalizer and clean up when the
//!   cluster's deletion starts;
//! - [`scan`]: objects of every served kind, by label or annotation;
//! - [`gone`]: waiting, with watches, until a set of objects is gone.
//!
//! Uses [`crate::cluster`] and [`crate::olm`]; only the CLI uses this module.

pub mod alive;
pub mod finalizer;
pub mod gone;
pub mod scan;
pub mod uninstall;
