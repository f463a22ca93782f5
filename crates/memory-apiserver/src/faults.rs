//! Fault injection for reliability tests: rules that make chosen verbs/kinds/names fail with
//! 500/503/504/429(+`Retry-After`)/409 or answer late, for N times or with a probability
//! (seeded, reproducible); and finalizer handling for the built-in fake operator: by default a
//! finalizer nobody handles stays forever (like a real cluster with its operator gone);
//! [`Faults::release_finalizer_after`] makes the fake operator remove it from deleting objects
//! after a delay, [`Faults::hold_finalizer`] pins it again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::errors::ApiError;
use super::rng::Rng;

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Fail with this HTTP status: 500 (InternalError), 503 (ServiceUnavailable),
    /// 504 (Timeout), 409 (Conflict) or any other code (InternalError reason).
    Status(u16),
    /// 429 TooManyRequests with `Retry-After: secs`.
    TooManyRequests {
        /// Seconds in `Retry-After` and `details.retryAfterSeconds`.
        retry_after_secs: u64,
    },
    /// Serve the request normally, after this delay.
    Delay(Duration),
}

/// A fault rule. Empty matchers match everything.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    verb: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    action: FaultAction,
    times: Option<u32>,
    probability: f64,
}

impl FaultRule {
    /// A rule that always fires `action` on every request.
    pub fn new(action: FaultAction) -> Self {
        FaultRule {
            verb: None,
            kind: None,
            namespace: None,
            name: None,
            action,
            times: None,
            probability: 1.0,
        }
    }
    /// Only this verb: get, list, watch, create, update, patch (includes apply), apply, delete,
    /// deletecollection.
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.to_string());
        self
    }
    /// Only this Kind (e.g. `ConfigMap`).
    pub fn kind(mut self, kind: &str) -> Self {
        self.kind = Some(kind.to_string());
        self
    }
    /// Only this namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespace = Some(ns.to_string());
        self
    }
    /// Only this object name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
    /// Fire at most `n` times, then the rule is spent.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }
    /// Fire with this probability (0.0–1.0) per matching request.
    pub fn probability(mut self, p: f64) -> Self {
        self.probability = p.clamp(0.0, 1.0);
        self
    }

    fn matches(&self, r: &RequestInfo<'_>) -> bool {
        let verb_ok = match self.verb.as_deref() {
            None => true,
            Some("patch") => r.verb == "patch" || r.verb == "apply",
            Some(v) => v == r.verb,
        };
        verb_ok
            && self.kind.as_deref().is_none_or(|k| k == r.kind)
            && self.namespace.as_deref().is_none_or(|n| n == r.namespace)
            && self.name.as_deref().is_none_or(|n| n == r.name)
    }
}

/// What the router knows about a request when checking rules.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// Verb (see [`FaultRule::verb`]).
    pub verb: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace ("" if none).
    pub namespace: &'a str,
    /// Name ("" for collections).
    pub name: &'a str,
}

/// Id of an added rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FaultId(u64);

#[derive(Debug)]
struct Inner {
    next: u64,
    rules: BTreeMap<u64, FaultRule>,
    /// How often each rule fired (kept after a rule is spent or removed).
    hits: BTreeMap<u64, u32>,
    rng: Rng,
    /// finalizer → Some(delay): released after delay; None: held.
    finalizers: BTreeMap<String, Option<Duration>>,
}

/// Handle to the fault rules and finalizer behaviour of one server (cheap to clone).
#[derive(Debug, Clone)]
pub struct Faults(Arc<Mutex<Inner>>);

/// The faults firing for one request.
#[derive(Debug, Default)]
pub struct Fired {
    /// Total delay to wait before serving.
    pub delay: Duration,
    /// The error to return instead of serving, if any.
    pub error: Option<ApiError>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Faults(Arc::new(Mutex::new(Inner {
            next: 1,
            rules: BTreeMap::new(),
            hits: BTreeMap::new(),
            rng: Rng::new(seed),
            finalizers: BTreeMap::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add a rule.
    pub fn add(&self, rule: FaultRule) -> FaultId {
        let mut i = self.lock();
        let id = i.next;
        i.next += 1;
        i.rules.insert(id, rule);
        FaultId(id)
    }

    /// Remove a rule.
    pub fn remove(&self, id: FaultId) {
        self.lock().rules.remove(&id.0);
    }

    /// How many times a rule has fired so far (also after it is spent or removed).
    pub fn hits(&self, id: FaultId) -> u32 {
        self.lock().hits.get(&id.0).copied().unwrap_or(0)
    }

    /// Remove all rules (finalizer settings stay).
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// Never remove this finalizer (the default for any finalizer not released).
    pub fn hold_finalizer(&self, finalizer: &str) {
        self.lock().finalizers.insert(finalizer.to_string(), None);
    }

    /// Have the fake operator remove this finalizer from objects being deleted, `delay` after
    /// it sees the deletion.
    pub fn release_finalizer_after(&self, finalizer: &str, delay: Duration) {
        self.lock()
            .finalizers
            .insert(finalizer.to_string(), Some(delay));
    }

    /// Release immediately (same as a zero delay).
    pub fn release_finalizer(&self, finalizer: &str) {
        self.release_finalizer_after(finalizer, Duration::ZERO);
    }

    /// The release delay of a finalizer, if the fake operator handles it.
    pub(crate) fn release_delay(&self, finalizer: &str) -> Option<Duration> {
        self.lock().finalizers.get(finalizer).copied().flatten()
    }

    /// Evaluate the rules for one request (consumes `times` budgets).
    pub(crate) fn check(&self, r: &RequestInfo<'_>) -> Fired {
        let mut i = self.lock();
        let mut fired = Fired::default();
        let ids: Vec<u64> = i
            .rules
            .iter()
            .filter(|(_, rule)| rule.matches(r))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let p = i.rules[&id].probability;
            if p < 1.0 && i.rng.next_f64() >= p {
                continue;
            }
            let rule = i.rules.get_mut(&id).expect("present");
            if let Some(t) = rule.times.as_mut() {
                if *t == 0 {
                    continue;
                }
                *t -= 1;
            }
            let action = rule.action.clone();
            let spent = rule.times == Some(0);
            if spent {
                i.rules.remove(&id);
            }
            *i.hits.entry(id).or_default() += 1;
            match action {
                FaultAction::Delay(d) => fired.delay += d,
                FaultAction::TooManyRequests { retry_after_secs } if fired.error.is_none() => {
                    let mut e = ApiError::new(
                        429,
                        "TooManyRequests",
                        "the server has received too many requests and has asked us to try again later (injected fault)",
                    );
                    e.retry_after = Some(retry_after_secs);
                    fired.error = Some(e);
                }
                FaultAction::Status(code) if fired.error.is_none() => {
                    fired.error = Some(match code {
                        503 => ApiError::new(
                            503,
                            "ServiceUnavailable",
                            "the server is currently unable to handle the request (injected fault)",
                        ),
                        504 => ApiError::new(
                            504,
                            "Timeout",
                            "the server was unable to return a response in the time allotted (injected fault)",
                        ),
                        409 => ApiError::new(
                            409,
                            "Conflict",
                            format!(
                                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again (injected fault)",
                                r.kind, r.name
                            ),
                        ),
                        429 => {
                            let mut e = ApiError::new(
                                429,
                                "TooManyRequests",
                                "too many requests (injected fault)",
                            );
                            e.retry_after = Some(1);
                            e
                        }
                        c => ApiError::new(
                            c,
                            "InternalError",
                            "Internal error occurred: injected fault",
                        ),
                    });
                }
                _ => {}
            }
        }
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(verb: &'a str, name: &'a str) -> RequestInfo<'a> {
        RequestInfo {
            verb,
            kind: "ConfigMap",
            namespace: "ns",
            name,
        }
    }

    #[test]
    fn times_and_matching() {
        let f = Faults::new(1);
        f.add(
            FaultRule::new(FaultAction::Status(503))
                .verb("patch")
                .kind("ConfigMap")
                .name("a")
                .times(2),
        );
        assert!(f.check(&req("get", "a")).error.is_none());
        assert!(f.check(&req("patch", "b")).error.is_none());
        assert_eq!(f.check(&req("apply", "a")).error.unwrap().code, 503);
        assert_eq!(f.check(&req("patch", "a")).error.unwrap().code, 503);
        assert!(f.check(&req("patch", "a")).error.is_none());
        assert_eq!(f.hits(FaultId(1)), 2);
    }

    #[test]
    fn probability_is_seeded() {
        let run = || {
            let f = Faults::new(42);
            f.add(
                FaultRule::new(FaultAction::TooManyRequests {
                    retry_after_secs: 2,
                })
                .probability(0.5),
            );
            (0..100)
                .map(|_| f.check(&req("get", "x")).error.is_some())
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let n = a.iter().filter(|x| **x).count();
        assert!((25..75).contains(&n), "{n}");
    }

    #[test]
    fn finalizer_release() {
        let f = Faults::new(1);
        assert_eq!(f.release_delay("x"), None);
        f.release_finalizer_after("x", Duration::from_millis(5));
        assert_eq!(f.release_delay("x"), Some(Duration::from_millis(5)));
        f.hold_finalizer("x");
        assert_eq!(f.release_delay("x"), None);
    }
}
