//! Reaching the API server at start-up: `cvo operator` asks the server for its version until
//! it answers, for as long as the process lives (docs/operator.md, "Start-up").
//!
//! An operator that exits because its server is down only trades the outage for a
//! CrashLoopBackOff: the kubelet restarts it with growing delays, and it comes back late. So
//! nothing the server answers, or fails to answer, ends the wait: not a refused connection,
//! not a timeout, not a 5xx or 429 (the server's `Retry-After` is honoured), and not 401 or
//! 403 either — at start-up those are usually transient (a pod's service-account token just
//! rotated, the operator's RBAC not applied yet) and are logged as errors saying what to
//! check. Only the stop signal ends it. The waits are [`Backoff::CONNECT`] (1 s doubling to
//! 30 s, the one retry policy's backoff, no jitter); every failed attempt is one log line
//! naming the server, the cause and when the next attempt is.

use std::future::Future;
use std::time::Duration;

use crate::cluster::request_error::{self, Target};
use crate::cluster::retry::{RequestError, RetryPolicy, Verdict, classify};
use crate::retry::Backoff;

/// Asks `client`'s server for its version until it answers (each attempt bounded by the one
/// retry policy's request timeout), waiting [`Backoff::CONNECT`] between attempts; `target`
/// names the server in the log. Returns the attempts it took, or `None` when `stop` resolved
/// first.
pub async fn connect(
    client: &kube::Client,
    target: &Target,
    stop: impl Future<Output = ()>,
) -> Option<u32> {
    let timeout = RetryPolicy::default().request_timeout;
    let probe = || async move {
        match tokio::time::timeout(timeout, client.apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(RequestError::Kube(e)),
            Err(_) => Err(RequestError::Timeout(timeout)),
        }
    };
    wait_for(probe, target, Backoff::CONNECT, stop).await
}

/// Who the API server takes this process for (a `SelfSubjectReview`, what `kubectl auth
/// whoami` asks), logged once connected: in a pod, its service account — proof that the
/// mounted token is what it uses. `None` when the server does not answer it (then nothing is
/// logged but at debug level): it is information, never a reason to wait.
pub async fn identity(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let reviews: kube::Api<SelfSubjectReview> = kube::Api::all(client.clone());
    let timeout = RetryPolicy::default().request_timeout;
    let review = tokio::time::timeout(
        timeout,
        reviews.create(
            &kube::api::PostParams::default(),
            &SelfSubjectReview::default(),
        ),
    )
    .await;
    let user = match review {
        Ok(Ok(review)) => review.status?.user_info?.username?,
        Ok(Err(e)) => {
            tracing::debug!("who the API server takes this operator for is unknown: {e}");
            return None;
        }
        Err(_) => {
            tracing::debug!(
                "who the API server takes this operator for is unknown: no answer within {timeout:?}"
            );
            return None;
        }
    };
    tracing::info!(%user, "the API server authenticates this operator as {user}");
    Some(user)
}

/// Runs `probe` until it succeeds, waiting as `backoff` says after each failure (at least
/// what a 429 asks for), and logging each failure; `None` when `stop` resolves first.
async fn wait_for<F, Fut>(
    mut probe: F,
    target: &Target,
    backoff: Backoff,
    stop: impl Future<Output = ()>,
) -> Option<u32>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), RequestError>>,
{
    tokio::pin!(stop);
    let mut delays = backoff.delays();
    let mut attempt: u32 = 1;
    loop {
        let result = tokio::select! {
            () = &mut stop => return None,
            result = probe() => result,
        };
        let err = match result {
            Ok(()) => {
                let server = &target.server;
                let attempts = if attempt == 1 {
                    "1 attempt".to_owned()
                } else {
                    format!("{attempt} attempts")
                };
                tracing::info!(
                    %server,
                    attempts = attempt,
                    "connected to the API server at {server}, after {attempts}"
                );
                return Some(attempt);
            }
            Err(err) => err,
        };
        let after = match classify(&err) {
            Verdict::Retry { after } => after,
            Verdict::Fail => None,
        };
        let wait = delays.next_wait().max(after.unwrap_or_default());
        log_failure(&err, target, attempt, wait);
        tokio::select! {
            () = &mut stop => return None,
            () = tokio::time::sleep(wait) => {}
        }
        attempt = attempt.saturating_add(1);
    }
}

/// How bad one failed attempt is, and what it says: what failed (the server named), then
/// what to check when the failure is the operator's own credentials or permissions.
fn failure(err: &RequestError, target: &Target) -> (tracing::Level, String) {
    let server = &target.server;
    match err {
        RequestError::Timeout(after) => (
            tracing::Level::WARN,
            format!("the API server at {server} did not answer within {after:?}"),
        ),
        RequestError::Kube(e) => {
            let said = request_error::describe(e, target);
            match err.code() {
                Some(401) => (
                    tracing::Level::ERROR,
                    format!(
                        "{said}. In a pod this is usually a service-account token that was just rotated, and passes; if it lasts, check the token the operator runs with"
                    ),
                ),
                Some(403) => (
                    tracing::Level::ERROR,
                    format!(
                        "{said}. The operator's RBAC may not be applied yet; if it lasts, check the operator's ServiceAccount and its bindings (`cvo rbac` prints what it needs)"
                    ),
                ),
                _ => (tracing::Level::WARN, said),
            }
        }
    }
}

/// One line for one failed attempt: the cause, the attempt, and when the next one is.
fn log_failure(err: &RequestError, target: &Target, attempt: u32, wait: Duration) {
    let (level, said) = failure(err, target);
    let server = &target.server;
    let next = format!("{wait:?}");
    let message = format!("{said}; attempt {attempt} failed, trying again in {next}");
    if level == tracing::Level::ERROR {
        tracing::error!(%server, attempt, next_attempt_in = %next, "{message}");
    } else {
        tracing::warn!(%server, attempt, next_attempt_in = %next, "{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    fn target() -> Target {
        Target {
            server: "https://10.0.0.1".to_owned(),
            context: None,
        }
    }

    fn api(code: u16, reason: &str) -> RequestError {
        RequestError::Kube(kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.into(),
            message: format!("{code} from the test"),
            ..Default::default()
        })))
    }

    /// When a probe was called.
    type Calls = Arc<Mutex<Vec<Instant>>>;

    /// A probe failing with `errors` in turn, then answering; the times it was called.
    fn probe(
        errors: Vec<RequestError>,
    ) -> (
        impl FnMut() -> std::future::Ready<Result<(), RequestError>>,
        Calls,
    ) {
        let calls = Calls::default();
        let seen = calls.clone();
        let mut errors = errors.into_iter();
        let probe = move || {
            seen.lock().unwrap().push(Instant::now());
            std::future::ready(errors.next().map_or(Ok(()), Err))
        };
        (probe, calls)
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_ends_the_wait_and_the_waits_double_up_to_the_cap() {
        // Every kind of failure an operator meets at start, 401 and 403 included: none ends
        // the wait.
        let errors = vec![
            api(503, "ServiceUnavailable"),
            RequestError::Timeout(Duration::from_secs(30)),
            api(500, "InternalError"),
            api(401, "Unauthorized"),
            api(403, "Forbidden"),
            api(404, "NotFound"),
            api(502, ""),
            api(504, ""),
        ];
        let (probe, calls) = probe(errors);
        let started = Instant::now();
        let attempts = wait_for(probe, &target(), Backoff::CONNECT, std::future::pending()).await;
        assert_eq!(attempts, Some(9));
        let waits: Vec<u64> = calls
            .lock()
            .unwrap()
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(started.elapsed(), Duration::from_secs(121));
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_signal_ends_the_wait_between_attempts() {
        let (probe, calls) = probe((0..1000).map(|_| api(503, "")).collect());
        let started = Instant::now();
        let stop = tokio::time::sleep(Duration::from_secs(10));
        assert_eq!(
            wait_for(probe, &target(), Backoff::CONNECT, stop).await,
            None
        );
        assert_eq!(started.elapsed(), Duration::from_secs(10), "at once");
        assert_eq!(calls.lock().unwrap().len(), 4, "at 0, 1, 3 and 7 s");
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_signal_ends_an_attempt_that_hangs() {
        let started = Instant::now();
        let hangs = || std::future::pending::<Result<(), RequestError>>();
        let stop = tokio::time::sleep(Duration::from_secs(2));
        assert_eq!(
            wait_for(hangs, &target(), Backoff::CONNECT, stop).await,
            None
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_attempt_waits_as_long_as_the_server_asks() {
        let throttled = RequestError::Kube(kube::Error::Api(Box::new(kube::core::Status {
            code: 429,
            reason: "TooManyRequests".into(),
            details: Some(kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 7,
            }),
            ..Default::default()
        })));
        let (probe, calls) = probe(vec![throttled]);
        wait_for(probe, &target(), Backoff::CONNECT, std::future::pending()).await;
        let calls = calls.lock().unwrap();
        assert_eq!((calls[1] - calls[0]).as_secs(), 7);
    }

    #[test]
    fn failures_name_the_server_and_say_what_to_check() {
        let (level, text) = failure(&api(401, "Unauthorized"), &target());
        assert_eq!(level, tracing::Level::ERROR);
        assert!(
            text.starts_with("https://10.0.0.1: the credentials of the in-cluster service account were rejected (401 Unauthorized")
                && text.contains("token that was just rotated"),
            "{text}"
        );
        let (level, text) = failure(&api(403, "Forbidden"), &target());
        assert_eq!(level, tracing::Level::ERROR);
        assert!(
            text.contains("403 Forbidden") && text.contains("cvo rbac"),
            "{text}"
        );
        let (level, text) = failure(&api(503, "ServiceUnavailable"), &target());
        assert_eq!(level, tracing::Level::WARN);
        assert!(
            text.starts_with("https://10.0.0.1: the API server answered 503"),
            "{text}"
        );
        let (level, text) = failure(&RequestError::Timeout(Duration::from_secs(30)), &target());
        assert_eq!(level, tracing::Level::WARN);
        assert_eq!(
            text,
            "the API server at https://10.0.0.1 did not answer within 30s"
        );
    }
}
