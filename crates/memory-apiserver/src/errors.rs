//! API errors as kube-apiserver reports them: a `meta/v1` `Status` object with `status:
//! Failure`, a machine-readable `reason`, the HTTP `code` and `details` naming the object.
//!
//! Every failure path of the server goes through [`ApiError`], so clients (kube-rs, kubectl)
//! see exactly the shapes a real API server sends and map them to `kube::Error::Api`.

use serde_json::{Map, Value, json};

/// One failure, rendered as a `Status` body with the matching HTTP status code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (also `Status.code`).
    pub code: u16,
    /// `Status.reason` (e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`).
    pub reason: &'static str,
    /// Human-readable `Status.message`.
    pub message: String,
    /// `Status.details` (name, group, kind, causes, retryAfterSeconds), if any.
    pub details: Option<Box<Map<String, Value>>>,
    /// Value of a `Retry-After` header (seconds), for 429 responses.
    pub retry_after: Option<u64>,
}

/// Identity of the object an error is about, used to fill `details`.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// API group ("" for core).
    pub group: &'a str,
    /// Plural resource name, as kube-apiserver puts it in `details.kind` for most errors.
    pub resource: &'a str,
    /// Object name (may be empty).
    pub name: &'a str,
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(s: Subject<'_>) -> Map<String, Value> {
    let mut d = Map::new();
    if !s.name.is_empty() {
        d.insert("name".into(), json!(s.name));
    }
    if !s.group.is_empty() {
        d.insert("group".into(), json!(s.group));
    }
    d.insert("kind".into(), json!(s.resource));
    d
}

impl ApiError {
    /// A bare error without details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 404 `NotFound` for a missing object: `configmaps "x" not found`.
    pub fn not_found(s: Subject<'_>) -> Self {
        ApiError {
            details: Some(Box::new(details(s))),
            ..Self::new(
                404,
                "NotFound",
                format!(
                    "{} \"{}\" not found",
                    qualified(s.group, s.resource),
                    s.name
                ),
            )
        }
    }

    /// 404 for a path that serves nothing (unknown resource, unestablished CRD).
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 409 `AlreadyExists` on create.
    pub fn already_exists(s: Subject<'_>) -> Self {
        ApiError {
            details: Some(Box::new(details(s))),
            ..Self::new(
                409,
                "AlreadyExists",
                format!(
                    "{} \"{}\" already exists",
                    qualified(s.group, s.resource),
                    s.name
                ),
            )
        }
    }

    /// 409 `Conflict` for a stale resourceVersion.
    pub fn conflict_stale(s: Subject<'_>) -> Self {
        Self::conflict(
            s,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 `Conflict` with a custom reason message: `Operation cannot be fulfilled on ...`.
    pub fn conflict(s: Subject<'_>, why: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(s))),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{}\": {why}",
                    qualified(s.group, s.resource),
                    s.name
                ),
            )
        }
    }

    /// 422 `Invalid` with field causes; `kind` is the Kind (kube-apiserver uses the kind here).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let list = causes
            .iter()
            .map(Cause::render)
            .collect::<Vec<_>>()
            .join(", ");
        let list = if causes.len() > 1 {
            format!("[{list}]")
        } else {
            list
        };
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        d.insert(
            "causes".into(),
            Value::Array(
                causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect(),
            ),
        );
        ApiError {
            details: Some(Box::new(d)),
            ..Self::new(
                422,
                "Invalid",
                format!("{gk} \"{name}\" is invalid: {list}"),
            )
        }
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 `Forbidden` (e.g. creating in a terminating namespace).
    pub fn forbidden(s: Subject<'_>, message: impl Into<String>) -> Self {
        ApiError {
            details: Some(Box::new(details(s))),
            ..Self::new(403, "Forbidden", message)
        }
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415 `UnsupportedMediaType` for a PATCH whose `Content-Type` is no patch type the resource
    /// takes, worded as kube-apiserver words it: bare for built-in kinds, with the accepted patch
    /// types for custom resources (which take no strategic merge patch).
    pub fn unsupported_patch(custom: bool) -> Self {
        if custom {
            return Self::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            );
        }
        ApiError {
            details: Some(Box::default()),
            ..Self::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
        }
    }

    /// 415 `UnsupportedMediaType` for a create or update body in a format this server does not
    /// decode, with kube-apiserver's message. (Protobuf bodies of built-in kinds are decoded,
    /// or refused, by `protobuf::to_json`; custom resources take no protobuf, as in kube.)
    pub fn unsupported_body() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        )
    }

    /// 410 `Expired`: a watch or continue token from a compacted resourceVersion.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut d = self.details.clone();
        if let Some(secs) = self.retry_after {
            d.get_or_insert_with(Default::default)
                .insert("retryAfterSeconds".into(), json!(secs));
        }
        if let Some(d) = d {
            v["details"] = Value::Object(*d);
        }
        v
    }
}

/// One `details.causes[]` entry of a 422.
#[derive(Debug, Clone)]
pub struct Cause {
    /// e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`.
    pub reason: &'static str,
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// The full cause message (`metadata.name: Invalid value: ...`).
    pub message: String,
}

impl Cause {
    /// `field: Invalid value: <value>: detail`.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {detail}"),
        }
    }
    /// `field: Required value: detail`.
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message,
        }
    }
    /// `field: Forbidden: detail`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }
    fn render(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// True for Kubernetes' protobuf media type (`application/vnd.kubernetes.protobuf`, with or
/// without parameters).
pub fn is_protobuf(content_type: &str) -> bool {
    media_type(content_type) == "application/vnd.kubernetes.protobuf"
}

/// The media type of a `Content-Type` value, lowercased and without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// A `Status` object for successful deletes.
pub fn success_status(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut d = details(Subject {
        group,
        resource,
        name,
    });
    d.insert("uid".into(), json!(uid));
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_shape() {
        let e = ApiError::not_found(Subject {
            group: "apps",
            resource: "deployments",
            name: "x",
        });
        let s = e.to_status();
        assert_eq!(s["message"], "deployments.apps \"x\" not found");
        assert_eq!(s["details"]["group"], "apps");
        assert_eq!(s["code"], 404);
    }

    #[test]
    fn invalid_shape() {
        let e = ApiError::invalid(
            "",
            "ConfigMap",
            "A",
            vec![Cause::invalid("metadata.name", &json!("A"), "bad")],
        );
        assert_eq!(
            e.message,
            "ConfigMap \"A\" is invalid: metadata.name: Invalid value: \"A\": bad"
        );
        assert_eq!(
            e.to_status()["details"]["causes"][0]["field"],
            "metadata.name"
        );
    }
}
