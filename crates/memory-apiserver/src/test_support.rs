//! Test setup shared by the memory server's unit tests.

use std::sync::Arc;

use serde_json::json;

use super::handler::{State, Target, WriteOpts};
use super::store::Store;

/// A fresh state keeping `history` watch events, seeded with `seed`.
pub(crate) fn state(history: usize, seed: u64) -> State {
    State::new(
        Store::new(history, Arc::new(tokio::sync::Notify::new())),
        seed,
    )
}

/// The target of `name` in `ns` of the served type `group`/`plural`, at its first version.
pub(crate) fn target(st: &State, group: &str, plural: &str, ns: &str, name: &str) -> Target {
    let info = st
        .served()
        .into_iter()
        .find(|i| i.group == group && i.plural == plural)
        .unwrap();
    Target {
        version: info.versions[0].clone(),
        info,
        namespace: ns.into(),
        name: name.into(),
        subresource: None,
    }
}

/// Creates the namespace `name`.
pub(crate) fn create_namespace(st: &mut State, name: &str) {
    let t = target(st, "", "namespaces", "", "");
    st.create(
        &t,
        json!({"metadata": {"name": name}}),
        &WriteOpts::default(),
        false,
    )
    .unwrap();
}
