//! The cluster lifecycle against an API server (`common`): the deletion signal (`Alive`) and
//! `cvo uninstall`.

#[path = "../common/mod.rs"]
mod common;

mod lifecycle_alive;
mod lifecycle_uninstall;
