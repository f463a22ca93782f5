//! The controllers that run inside the server, as kube-controller-manager and the apiextensions
//! server do on a real cluster: [`crd`] (Established after a delay, cleanup of custom resources
//! on CRD deletion), [`namespace`] (namespace lifecycle), [`gc`] (ownerReference garbage
//! collection, background and foreground), [`workloads`] (the status kube-controller-manager
//! writes on Deployments, StatefulSets, DaemonSets and Jobs of a cluster without nodes),
//! [`apiservice`] (APIService availability, as kube-aggregator reports it there) and
//! [`operator`] (the fake operator that removes finalizers configured through
//! [`Faults`](super::Faults)).
//!
//! One task runs them all: it wakes when the store changes (coalesced through a `Notify`) or
//! when a timer is due, takes the state lock, and reconciles. Controllers write through the same
//! handler entry points as clients, so every rule and event applies to them too.

pub mod apiservice;
pub mod crd;
pub mod gc;
pub mod namespace;
pub mod operator;
pub mod workloads;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Shared;

/// Controller-local memory (timers), not part of the cluster state.
#[derive(Debug, Default)]
pub struct Timers {
    /// When each pending thing (keyed by an id) was first seen.
    pub first_seen: HashMap<String, Instant>,
    /// The earliest deadline a controller wants to be woken for.
    pub next_wake: Option<Instant>,
}

impl Timers {
    /// Has `delay` elapsed since `id` was first seen? Registers a wake-up otherwise.
    pub fn due(&mut self, id: &str, delay: Duration) -> bool {
        let now = Instant::now();
        let seen = *self.first_seen.entry(id.to_string()).or_insert(now);
        let at = seen + delay;
        if now >= at {
            return true;
        }
        self.next_wake = Some(self.next_wake.map_or(at, |w| w.min(at)));
        false
    }
}

pub(crate) fn spawn(shared: Weak<Shared>, changed: Arc<Notify>) {
    tokio::spawn(async move {
        let mut timers = Timers::default();
        let mut workloads = workloads::Workloads::default();
        loop {
            let wake = timers
                .next_wake
                .take()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            tokio::select! {
                _ = changed.notified() => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
            let Some(shared) = shared.upgrade() else {
                return;
            };
            reconcile(&shared, &mut timers, &mut workloads);
            if timers.first_seen.len() > 10_000 {
                timers.first_seen.clear();
            }
        }
    });
}

fn reconcile(shared: &Shared, timers: &mut Timers, workloads: &mut workloads::Workloads) {
    let mut st = shared.lock();
    crd::reconcile(&mut st, timers, shared.config.establish_delay);
    apiservice::reconcile(&mut st);
    namespace::reconcile(&mut st);
    gc::reconcile(&mut st);
    workloads::reconcile(&mut st, timers, workloads);
    operator::reconcile(&mut st, timers, &shared.faults);
}
