//! Why one manifest failed, worded for the person who has to fix it.

use std::time::Duration;

use super::retry::RequestError;
use crate::cluster::crd::CrdWaitError;
use crate::cluster::discovery::DiscoveryError;

/// A manifest's failure. The file and object are added by the caller when printing
/// ([`super::ManifestResult`] carries both).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// `release.openshift.io/delete` with a value other than `"true"`: the object is not
    /// touched.
    #[error(
        "release.openshift.io/delete must be exactly \"true\", found \"{}\"; the object was not touched",
        crate::diagnostic::excerpt(.0)
    )]
    InvalidDeleteAnnotation(String),
    /// The per-manifest strategy annotation has an unknown value.
    #[error(
        "{annotation} must be \"synchronous\" or \"non-blocking\", found \"{}\"; the object was not touched",
        crate::diagnostic::excerpt(.value)
    )]
    InvalidStrategy {
        annotation: &'static str,
        value: String,
    },
    /// A built-in kind whose manifest does not decode into its type.
    #[error(transparent)]
    Decode(#[from] crate::release::typed::DecodeError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error(transparent)]
    CrdWait(#[from] CrdWaitError),
    /// The namespace the object lives in does not exist (and is not created earlier).
    #[error("namespace {namespace:?} does not exist (create it earlier in the release): {message}")]
    MissingNamespace { namespace: String, message: String },
    /// The server refused the request permanently.
    #[error("{verb} rejected by the server ({code} {reason}): {message}{hint}")]
    Rejected {
        verb: &'static str,
        code: u16,
        reason: String,
        message: String,
        /// Extra advice (immutable fields).
        hint: &'static str,
    },
    /// A transient error outlasted the retries.
    #[error("{verb} failed after {attempts} attempts: {source}")]
    GaveUp {
        verb: &'static str,
        attempts: u32,
        #[source]
        source: RequestError,
    },
    /// The delete's uid precondition failed: the object read was replaced by a new one under
    /// the same name before the DELETE arrived.
    #[error(
        "the object was replaced (same name, new uid) between reading and deleting it; nothing was deleted, run again to delete the new object"
    )]
    Replaced,
    /// Written, but not healthy ([`crate::health`]): the finding says what is wrong or
    /// still missing.
    #[error("{0}")]
    Unhealthy(crate::health::Finding),
    /// The object exists but is being deleted (it carries a deletionTimestamp): applying it
    /// would change an object about to disappear, so it counts as not applied until its
    /// deletion finishes and it can be created again (an install retries it in its next round).
    #[error(
        "the object is being deleted (since {}; finalizers: {}); it is created again once its deletion finishes",
        .since.map_or_else(|| "an unknown time".to_owned(), |t| t.to_string()),
        finalizers_text(.finalizers)
    )]
    BeingDeleted {
        since: Option<jiff::Timestamp>,
        finalizers: Vec<String>,
    },
    /// Synchronous deletion did not finish in time.
    #[error("deletion did not finish within {waited:?}; remaining finalizers: {}", finalizers_text(.finalizers))]
    DeletionTimeout {
        waited: Duration,
        finalizers: Vec<String>,
    },
}

fn finalizers_text(f: &[String]) -> String {
    if f.is_empty() {
        "none".into()
    } else {
        f.join(", ")
    }
}

/// Advice appended to a 422 about an immutable field.
pub const IMMUTABLE_HINT: &str = "; the field is immutable: the object must be deleted and recreated \
     — mark it release.openshift.io/delete: \"true\" in one release and add it back in the next";

impl ManifestError {
    /// True when trying the same manifest again cannot help: the release itself is wrong
    /// (bad annotation values, a body the type rejects), the server refused the content
    /// (400, 422), or a synchronous deletion already waited its whole timeout (another round
    /// would wait the same timeout on the same finalizer: the install ends as an update does,
    /// the manifest failed once and Upgradeable=False). Everything else — a kind or namespace
    /// not there yet, 403/404 while something is being set up, an object still being deleted
    /// by someone else, transient errors — may clear, so an install retries it in its next
    /// round.
    pub fn is_permanent(&self) -> bool {
        match self {
            ManifestError::InvalidDeleteAnnotation(_)
            | ManifestError::InvalidStrategy { .. }
            | ManifestError::DeletionTimeout { .. }
            | ManifestError::Decode(_) => true,
            ManifestError::Unhealthy(f) => {
                f.reason == crate::health::Reason::ClusterOperatorNoVersions
            }
            ManifestError::Rejected { code, .. } => matches!(code, 400 | 422),
            _ => false,
        }
    }

    /// Builds the error for a failed request (after retries).
    pub fn from_request(verb: &'static str, err: RequestError, attempts: u32) -> Self {
        match err.status() {
            Some(status) if super::retry::classify(&err) == super::retry::Verdict::Fail => {
                let immutable = status.code == 422 && status.message.contains("immutable");
                ManifestError::Rejected {
                    verb,
                    code: status.code,
                    reason: status.reason.clone(),
                    message: status.message.clone(),
                    hint: if immutable { IMMUTABLE_HINT } else { "" },
                }
            }
            _ => ManifestError::GaveUp {
                verb,
                attempts,
                source: err,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str, message: &str) -> RequestError {
        RequestError::Kube(kube::Error::Api(Box::new(Status {
            code,
            reason: reason.into(),
            message: message.into(),
            ..Default::default()
        })))
    }

    #[test]
    fn immutable_422_points_at_delete_then_recreate() {
        let e = ManifestError::from_request(
            "apply",
            api(
                422,
                "Invalid",
                "Job.batch \"x\" is invalid: spec.template: field is immutable",
            ),
            1,
        );
        let text = e.to_string();
        assert!(
            text.starts_with("apply rejected by the server (422 Invalid): Job.batch"),
            "{text}"
        );
        assert!(text.contains("deleted and recreated"), "{text}");
        let other =
            ManifestError::from_request("apply", api(403, "Forbidden", "no"), 1).to_string();
        assert_eq!(other, "apply rejected by the server (403 Forbidden): no");
    }

    #[test]
    fn exhausted_transient_errors_say_how_often_they_were_tried() {
        let e = ManifestError::from_request("delete", api(503, "ServiceUnavailable", "busy"), 6);
        assert!(
            e.to_string().starts_with("delete failed after 6 attempts"),
            "{e}"
        );
    }
}
