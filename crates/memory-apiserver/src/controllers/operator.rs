//! The fake operator: removes finalizers that [`Faults`] marks as released from objects being
//! deleted, after the configured delay. Finalizers it does not handle stay forever, like on a
//! cluster whose operator is slow or gone.

use serde_json::Value;

use super::Timers;
use crate::faults::Faults;
use crate::handler::State;
use crate::store::ObjKey;

/// One pass.
pub fn reconcile(st: &mut State, timers: &mut Timers, faults: &Faults) {
    let deleting: Vec<ObjKey> = st.store.deleting().cloned().collect();
    for k in deleting {
        let Some(obj) = st.store.get(&k) else {
            continue;
        };
        let uid = State::uid_of(obj);
        let due: Vec<String> = State::finalizers_of(obj)
            .into_iter()
            .filter(|f| {
                faults
                    .release_delay(f)
                    .is_some_and(|d| timers.due(&format!("fin/{uid}/{f}"), d))
            })
            .collect();
        if !due.is_empty() {
            st.controller_update(&k, "fake-operator", None, |o| {
                if let Some(f) = o
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|x| !x.as_str().is_some_and(|s| due.iter().any(|d| d == s)));
                }
            });
        }
    }
}
