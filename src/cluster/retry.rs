//! Which API request errors are worth retrying: the one retry policy of every request `cvo`
//! sends to an API server (kube-client's own retry layer is off, see [`super::client`]),
//! waiting between attempts as [`crate::retry::Backoff::REQUEST`] says.
//!
//! Which errors (documented in `docs/apply.md`): transient answers — 429 (waiting at least
//! the server's `Retry-After` / `details.retryAfterSeconds`), 500, 502, 503, 504, 409
//! Conflict, a request that timed out ([`RetryPolicy::request_timeout`]) and transport errors
//! — are retried; everything else (400, 403, 404, 422, …) fails at once: repeating it cannot
//! help.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::retry::Backoff;

/// How often requests were retried under a policy (shared by its clones), for the report.
#[derive(Debug, Default)]
pub struct RetryCounts {
    retries: AtomicU64,
    throttled: AtomicU64,
}

/// A snapshot of [`RetryCounts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Retries {
    /// Attempts after the first, all requests together.
    pub retries: u64,
    /// Answers 429 TooManyRequests among them.
    pub throttled: u64,
}

impl std::ops::Sub for Retries {
    type Output = Retries;
    fn sub(self, other: Retries) -> Retries {
        Retries {
            retries: self.retries.saturating_sub(other.retries),
            throttled: self.throttled.saturating_sub(other.throttled),
        }
    }
}

impl std::ops::Add for Retries {
    type Output = Retries;
    fn add(self, other: Retries) -> Retries {
        Retries {
            retries: self.retries + other.retries,
            throttled: self.throttled + other.throttled,
        }
    }
}

/// Backoff parameters, and the counts of what was retried under them.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Wait before the second attempt.
    pub initial: Duration,
    /// Multiplier per attempt.
    pub factor: u32,
    /// Longest wait between two attempts (a larger `Retry-After` is still honoured).
    pub max_delay: Duration,
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// Deadline of one request.
    pub request_timeout: Duration,
    /// Shared by every clone of this policy.
    pub counts: Arc<RetryCounts>,
}

impl PartialEq for RetryPolicy {
    /// Compares the parameters, not the counts.
    fn eq(&self, other: &Self) -> bool {
        (
            self.initial,
            self.factor,
            self.max_delay,
            self.attempts,
            self.request_timeout,
        ) == (
            other.initial,
            other.factor,
            other.max_delay,
            other.attempts,
            other.request_timeout,
        )
    }
}

impl Default for RetryPolicy {
    /// [`Backoff::REQUEST`], 30 s per request.
    fn default() -> Self {
        let b = Backoff::REQUEST;
        RetryPolicy {
            initial: b.initial,
            factor: b.factor as u32,
            max_delay: b.max,
            attempts: b.attempts.unwrap_or(1),
            request_timeout: Duration::from_secs(30),
            counts: Arc::default(),
        }
    }
}

/// A request error with the timeout case made explicit. Shown in words: the server's status
/// and message, or what kept the request from reaching it (never a library's debug text).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{}", describe(.0))]
    Kube(#[from] kube::Error),
    #[error("the request timed out after {0:?}")]
    Timeout(Duration),
}

fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(s) => {
            let reason = if s.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", s.reason)
            };
            format!("{}{reason}: {}", s.code, s.message)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => format!(
            "cannot reach the API server: {}",
            super::request_error::cause(err)
        ),
        other => other.to_string(),
    }
}

impl RequestError {
    /// The API server's `Status`, when the server answered with an error.
    pub fn status(&self) -> Option<&kube::core::Status> {
        match self {
            RequestError::Kube(kube::Error::Api(s)) => Some(s),
            _ => None,
        }
    }

    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }
}

/// Whether to retry an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Transient: try again, waiting at least `after` when the server said so.
    Retry { after: Option<Duration> },
    /// Permanent: report it.
    Fail,
}

/// Classifies one error (see the module doc).
pub fn classify(err: &RequestError) -> Verdict {
    match err {
        RequestError::Timeout(_) => Verdict::Retry { after: None },
        RequestError::Kube(kube::Error::Api(status)) => match status.code {
            429 => Verdict::Retry {
                after: status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s))),
            },
            409 if status.reason == "Conflict" => Verdict::Retry { after: None },
            500 | 502 | 503 | 504 => Verdict::Retry { after: None },
            _ => Verdict::Fail,
        },
        RequestError::Kube(kube::Error::HyperError(_) | kube::Error::Service(_)) => {
            Verdict::Retry { after: None }
        }
        RequestError::Kube(_) => Verdict::Fail,
    }
}

impl RetryPolicy {
    /// This policy's backoff (for the defaults, [`Backoff::REQUEST`]).
    pub fn backoff(&self) -> Backoff {
        Backoff {
            initial: self.initial,
            factor: self.factor as f32,
            max: self.max_delay,
            attempts: Some(self.attempts),
        }
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1), before `Retry-After`.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.backoff().delay(attempt)
    }

    /// What was retried so far under this policy and its clones.
    pub fn retries(&self) -> Retries {
        Retries {
            retries: self.counts.retries.load(Ordering::Relaxed),
            throttled: self.counts.throttled.load(Ordering::Relaxed),
        }
    }

    /// Runs `op` until it succeeds, fails permanently, or the attempts are used up; returns
    /// the last error and the number of attempts made.
    pub async fn run<T, F, Fut>(&self, mut op: F) -> Result<T, (RequestError, u32)>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = kube::Result<T>>,
    {
        let mut attempt = 1;
        let mut delays = self.backoff().delays();
        loop {
            let err = match tokio::time::timeout(self.request_timeout, op()).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => RequestError::Kube(e),
                Err(_) => RequestError::Timeout(self.request_timeout),
            };
            // The backoff ends after the last attempt.
            match (classify(&err), delays.next()) {
                (Verdict::Retry { after }, Some(delay)) => {
                    self.counts.retries.fetch_add(1, Ordering::Relaxed);
                    if err.code() == Some(429) {
                        self.counts.throttled.fetch_add(1, Ordering::Relaxed);
                    }
                    let wait = delay.max(after.unwrap_or_default());
                    tracing::debug!(attempt, ?wait, error = %err, "transient error, retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                _ => return Err((err, attempt)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{Status, response::StatusDetails};

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            reason: reason.into(),
            ..Default::default()
        }))
    }

    fn api(code: u16, reason: &str) -> RequestError {
        RequestError::Kube(api_error(code, reason))
    }

    /// Runs `p` on an operation that always fails with `code`: (attempts reported, calls made).
    async fn run_failing(p: &RetryPolicy, code: u16) -> (u32, u32) {
        let mut calls = 0;
        let r: Result<(), _> = p
            .run(|| {
                calls += 1;
                async move { Err(api_error(code, "")) }
            })
            .await;
        (r.unwrap_err().1, calls)
    }

    #[test]
    fn transient_codes_are_retried_and_client_errors_are_not() {
        for code in [500, 503, 504] {
            assert_eq!(classify(&api(code, "x")), Verdict::Retry { after: None });
        }
        assert_eq!(
            classify(&api(409, "Conflict")),
            Verdict::Retry { after: None }
        );
        for (code, reason) in [
            (400, "BadRequest"),
            (403, "Forbidden"),
            (404, "NotFound"),
            (422, "Invalid"),
            (409, "AlreadyExists"),
        ] {
            assert_eq!(classify(&api(code, reason)), Verdict::Fail, "{code}");
        }
        assert_eq!(
            classify(&RequestError::Timeout(Duration::from_secs(1))),
            Verdict::Retry { after: None }
        );
    }

    #[test]
    fn too_many_requests_honours_retry_after() {
        let err = RequestError::Kube(kube::Error::Api(Box::new(Status {
            code: 429,
            reason: "TooManyRequests".into(),
            details: Some(StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 3,
            }),
            ..Default::default()
        })));
        assert_eq!(
            classify(&err),
            Verdict::Retry {
                after: Some(Duration::from_secs(3))
            }
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        let delays: Vec<_> = (1..=7).map(|a| p.delay(a).as_millis()).collect();
        assert_eq!(delays, [200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(p.backoff(), Backoff::REQUEST);
    }

    #[tokio::test]
    async fn run_stops_after_the_last_attempt_and_at_a_permanent_error() {
        let p = RetryPolicy {
            initial: Duration::from_millis(1),
            attempts: 3,
            ..Default::default()
        };
        let (attempts, calls) = run_failing(&p, 503).await;
        assert_eq!(attempts, 3);
        assert_eq!(calls, 3);
        let (attempts, calls) = run_failing(&p, 422).await;
        assert_eq!(attempts, 1);
        assert_eq!(calls, 1);
        let mut calls = 0;
        let r = p
            .run(|| {
                calls += 1;
                let n = calls;
                async move {
                    if n < 2 {
                        Err(api_error(500, ""))
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
        assert_eq!(r.unwrap(), 2);
    }

    #[test]
    fn errors_read_as_words_not_debug_structs() {
        let e = RequestError::Kube(api_error(503, "ServiceUnavailable"));
        let text = e.to_string();
        assert!(text.starts_with("503 ServiceUnavailable"), "{text}");
        assert!(!text.contains("Status {"), "{text}");
    }
}
