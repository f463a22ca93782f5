//! HTTP in and out: parses a request path and query into a discovery document or a verb on a
//! resource, applies fault rules, calls [`handler`](super::handler) under the state lock and
//! renders JSON or `Status` responses. Provides the in-process `tower::Service` used by
//! `kube::Client` and the loopback-only HTTP/1.1 server.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use serde_json::Value;

use super::Shared;
use super::errors::{ApiError, is_protobuf, media_type};
use super::faults::RequestInfo;
use super::handler::{DeleteOpts, ListOpts, Policy, Target, WriteOpts};
use super::patch::PatchKind;
use super::protobuf;
use super::selectors::{FieldSelector, LabelSelector};
use super::{discovery, watch};

/// Response body type: a full JSON document, or a watch stream.
pub type RespBody = UnsyncBoxBody<Bytes, Infallible>;

/// Decoded query string.
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    /// Parse `a=b&c=d`.
    pub fn parse(q: Option<&str>) -> Self {
        Query(
            q.unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }
    /// First value of `k`.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }
    /// `k=true` or `k=1`.
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

enum Route {
    Json(Value),
    Resource {
        group: String,
        version: String,
        namespace: Option<String>,
        rest: Vec<String>,
    },
    NotFound,
}

fn json_response(code: u16, v: &Value) -> Response<RespBody> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .expect("valid response")
}

/// True when the client asked for metadata only, as kube-apiserver understands `Accept:
/// application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (kube-rs
/// `PartialObjectMeta`, client-go's metadata client).
fn wants_metadata(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params
                .iter()
                .any(|p| p.starts_with("as=PartialObjectMetadata"))
                && params.contains(&"g=meta.k8s.io")
                && params.contains(&"v=v1")
        })
}

/// An object as a `meta.k8s.io/v1` `PartialObjectMetadata`: its metadata only.
pub(crate) fn partial_object(obj: &Value) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
    })
}

/// A list as a `PartialObjectMetadataList` (the list's metadata kept: resourceVersion,
/// continue).
fn partial_list(list: &Value) -> Value {
    let items: Vec<Value> = list
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(partial_object)
        .collect();
    serde_json::json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
        "items": items,
    })
}

/// Render an error as kube-apiserver does.
pub fn error_response(e: &ApiError) -> Response<RespBody> {
    let mut r = json_response(e.code, &e.to_status());
    if let Some(s) = e.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(s));
    }
    r
}

fn route(shared: &Shared, path: &str) -> Route {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let types = || shared.lock().served();
    match s.as_slice() {
        ["version"] => Route::Json(discovery::version()),
        ["healthz"] | ["livez"] | ["readyz"] => Route::Json(Value::String("ok".into())),
        ["api"] => Route::Json(discovery::core_versions()),
        ["api", v] => discovery::resources(&types(), "", v).map_or(Route::NotFound, Route::Json),
        ["apis"] => Route::Json(discovery::groups(&types())),
        ["apis", g] => discovery::group(&types(), g).map_or(Route::NotFound, Route::Json),
        ["apis", g, v] => discovery::resources(&types(), g, v).map_or(Route::NotFound, Route::Json),
        ["openapi", "v3"] => Route::Json(discovery::openapi_root(&types())),
        ["openapi", "v3", "api", v] => {
            discovery::openapi_gv(&types(), "", v).map_or(Route::NotFound, Route::Json)
        }
        ["openapi", "v3", "apis", g, v] => {
            discovery::openapi_gv(&types(), g, v).map_or(Route::NotFound, Route::Json)
        }
        ["api", v, rest @ ..] => resource_route("", v, rest),
        ["apis", g, v, rest @ ..] => resource_route(g, v, rest),
        _ => Route::NotFound,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let ns_subresource =
        group.is_empty() && rest.len() == 3 && matches!(rest[2], "status" | "finalize");
    let (namespace, rest) = if rest.len() >= 3 && rest[0] == "namespaces" && !ns_subresource {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return Route::NotFound;
    }
    Route::Resource {
        group: group.into(),
        version: version.into(),
        namespace,
        rest: rest.iter().map(|s| s.to_string()).collect(),
    }
}

fn list_opts(q: &Query, kind: &str) -> Result<ListOpts, ApiError> {
    Ok(ListOpts {
        labels: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?,
        fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or(""), kind)?,
        limit: q.get("limit").and_then(|l| l.parse().ok()),
        continue_token: q.get("continue").map(str::to_string),
    })
}

fn dry_run(q: &Query) -> Result<bool, ApiError> {
    match q.get("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid dry run value: {other:?} (only \"All\" is supported)"
        ))),
    }
}

fn delete_opts(q: &Query, body: &[u8]) -> Result<DeleteOpts, ApiError> {
    let parse_policy = |p: &str| match p {
        "Background" => Ok(Policy::Background),
        "Foreground" => Ok(Policy::Foreground),
        "Orphan" => Ok(Policy::Orphan),
        other => Err(ApiError::bad_request(format!(
            "unsupported propagationPolicy {other:?}"
        ))),
    };
    let mut d = DeleteOpts {
        dry_run: dry_run(q)?,
        ..Default::default()
    };
    if let Some(p) = q.get("propagationPolicy") {
        d.policy = Some(parse_policy(p)?);
    }
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            d.policy = Some(parse_policy(p)?);
        } else if let Some(o) = v.get("orphanDependents").and_then(Value::as_bool) {
            d.policy = Some(if o {
                Policy::Orphan
            } else {
                Policy::Background
            });
        }
        if v.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"))
        {
            d.dry_run = true;
        }
        d.uid = v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        d.resource_version = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    Ok(d)
}

/// Handle one request (body fully read).
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Bytes>) -> Response<RespBody> {
    match handle_inner(shared, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn handle_inner(
    shared: Arc<Shared>,
    req: Request<Bytes>,
) -> Result<Response<RespBody>, ApiError> {
    let (parts, body) = req.into_parts();
    let q = Query::parse(parts.uri.query());
    let (group, version, namespace, rest) = match route(&shared, parts.uri.path()) {
        Route::Json(v) if parts.method == Method::GET => return Ok(json_response(200, &v)),
        Route::Json(_) => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
        Route::NotFound => return Err(ApiError::path_not_found()),
        Route::Resource {
            group,
            version,
            namespace,
            rest,
        } => (group, version, namespace, rest),
    };
    let t = target(&shared, group, version, namespace, &rest)?;
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let patch_kind = PatchKind::from_content_type(ct);
    let verb = verb(&parts.method, &t, &q, patch_kind)?;
    check_media(verb, &t, ct, patch_kind)?;
    let body = match verb {
        "create" | "update" if is_protobuf(ct) => Bytes::from(protobuf::to_json(&body)?),
        _ => body,
    };
    inject_faults(&shared, verb, &t).await?;
    let default_manager = default_manager(&parts.headers);
    let wo = || -> Result<WriteOpts, ApiError> {
        Ok(WriteOpts {
            dry_run: dry_run(&q)?,
            field_manager: q.get("fieldManager").map(str::to_string),
            default_manager: default_manager.clone(),
            force: q.flag("force"),
            strict: q.get("fieldValidation") == Some("Strict"),
        })
    };
    let meta_only = t.subresource.is_none() && wants_metadata(&parts.headers);
    let (code, v) = match verb {
        "watch" => {
            let lo = list_opts(&q, &t.info.kind)?;
            return watch::start(shared.clone(), t, lo, &q, meta_only);
        }
        "get" if meta_only => (200, partial_object(&shared.lock().get(&t)?)),
        "list" if meta_only => {
            let list = shared.lock().list(&t, &list_opts(&q, &t.info.kind)?)?;
            (200, partial_list(&list))
        }
        "get" if t.subresource.as_deref() == Some("scale") => (200, shared.lock().scale_get(&t)?),
        "update" if t.subresource.as_deref() == Some("scale") => {
            shared.lock().scale_update(&t, &body, &wo()?)?
        }
        "patch" | "apply" if t.subresource.as_deref() == Some("scale") => {
            let k = patch_kind.ok_or_else(|| ApiError::unsupported_patch(t.info.custom))?;
            shared.lock().scale_patch(&t, k, &body, &wo()?)?
        }
        "get" => (200, shared.lock().get(&t)?),
        "list" => (200, shared.lock().list(&t, &list_opts(&q, &t.info.kind)?)?),
        "create" => shared.lock().create_from_body(&t, &body, &wo()?)?,
        "update" => shared.lock().update(&t, &body, &wo()?)?,
        "patch" | "apply" => {
            let k = patch_kind.ok_or_else(|| ApiError::unsupported_patch(t.info.custom))?;
            if k == PatchKind::Apply && q.get("force").is_some_and(|f| f != "true" && f != "false")
            {
                return Err(ApiError::bad_request("force must be true or false"));
            }
            shared.lock().patch(&t, k, &body, &wo()?)?
        }
        "delete" => shared.lock().delete(&t, &delete_opts(&q, &body)?)?,
        _ => {
            let lo = list_opts(&q, &t.info.kind)?;
            shared
                .lock()
                .delete_collection(&t, &lo, &delete_opts(&q, &body)?)?
        }
    };
    Ok(json_response(code, &v))
}

/// The object (or collection) a request addresses: a served type, in a namespace only if the
/// type is namespaced, and a subresource the type has.
fn target(
    shared: &Shared,
    group: String,
    version: String,
    namespace: Option<String>,
    rest: &[String],
) -> Result<Target, ApiError> {
    let info = shared
        .lock()
        .lookup(&group, &version, &rest[0])
        .ok_or_else(ApiError::path_not_found)?;
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::path_not_found());
    }
    let name = rest.get(1).cloned().unwrap_or_default();
    let subresource = rest.get(2).cloned();
    match subresource.as_deref() {
        None => {}
        Some("status") if info.status_subresource => {}
        Some("finalize") if info.group.is_empty() && info.kind == "Namespace" => {}
        Some("scale") if info.scale => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    Ok(Target {
        info,
        version,
        namespace: namespace.unwrap_or_default(),
        name,
        subresource,
    })
}

/// The verb of a request (kube's names: `get`, `list`, `watch`, `create`, …), refused where
/// kube-apiserver refuses it.
fn verb(
    method: &Method,
    t: &Target,
    q: &Query,
    patch_kind: Option<PatchKind>,
) -> Result<&'static str, ApiError> {
    let verb = match (method, t.name.is_empty()) {
        (&Method::GET, false) => "get",
        (&Method::GET, true) if q.flag("watch") => "watch",
        (&Method::GET, true) => "list",
        (&Method::POST, true) => "create",
        (&Method::PUT, false) => "update",
        (&Method::PATCH, false) if patch_kind == Some(PatchKind::Apply) => "apply",
        (&Method::PATCH, false) => "patch",
        (&Method::DELETE, false) => "delete",
        (&Method::DELETE, true) => "deletecollection",
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    if t.info.namespaced && t.namespace.is_empty() && !matches!(verb, "list" | "watch") {
        return Err(ApiError::path_not_found());
    }
    if t.subresource.is_some() && !matches!(verb, "get" | "update" | "patch" | "apply") {
        return Err(ApiError::method_not_allowed(format!(
            "{verb} is not supported on subresources"
        )));
    }
    Ok(verb)
}

/// The body must be in a media type the server decodes for the verb, else 415 as kube-apiserver
/// answers: JSON, YAML or protobuf (some kinds, see `protobuf`) for create and update (no
/// `Content-Type` means JSON), and no strategic merge patch for custom resources. Unknown patch types are refused where the patch is applied.
fn check_media(
    verb: &str,
    t: &Target,
    content_type: &str,
    patch_kind: Option<PatchKind>,
) -> Result<(), ApiError> {
    match verb {
        "create" | "update" => match media_type(content_type).as_str() {
            "" | "application/json" | "application/yaml" => Ok(()),
            "application/vnd.kubernetes.protobuf" if !t.info.custom => Ok(()),
            _ => Err(ApiError::unsupported_body()),
        },
        "patch" if t.info.custom && patch_kind == Some(PatchKind::Strategic) => {
            Err(ApiError::unsupported_patch(true))
        }
        _ => Ok(()),
    }
}

/// The faults that match the request: wait out their delay, then answer their error if any.
async fn inject_faults(shared: &Shared, verb: &str, t: &Target) -> Result<(), ApiError> {
    let fired = shared.faults.check(&RequestInfo {
        verb,
        kind: &t.info.kind,
        namespace: &t.namespace,
        name: &t.name,
    });
    if !fired.delay.is_zero() {
        tokio::time::sleep(fired.delay).await;
    }
    if let Some(e) = fired.error {
        return Err(e);
    }
    Ok(())
}

/// The field manager of a write that names none: the User-Agent's product.
fn default_manager(headers: &http::HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match ua.split('/').next().unwrap_or("").trim() {
        "" => "unknown".to_string(),
        m => m.to_string(),
    }
}

/// The in-process `tower::Service` a `kube::Client` is built on.
#[derive(Clone)]
pub struct ApiService {
    shared: Arc<Shared>,
}

impl ApiService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ApiService { shared }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<B> tower::Service<Request<B>> for ApiService
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<RespBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let bytes = match body.collect().await {
                Ok(c) => c.to_bytes(),
                Err(e) => {
                    let e: BoxError = e.into();
                    return Ok(error_response(&ApiError::bad_request(format!(
                        "reading request body: {e}"
                    ))));
                }
            };
            // A bug must cost one request, not the server: panics become 500s.
            let fut =
                std::panic::AssertUnwindSafe(handle(shared, Request::from_parts(parts, bytes)));
            match futures::FutureExt::catch_unwind(fut).await {
                Ok(r) => Ok(r),
                Err(_) => Ok(error_response(&ApiError::internal(
                    "Internal error occurred: the in-memory API server failed on this request",
                ))),
            }
        })
    }
}

/// Serve over plain HTTP/1.1; refuses non-loopback addresses.
pub(crate) async fn serve(shared: Arc<Shared>, addr: SocketAddr) -> std::io::Result<()> {
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "refusing to serve the in-memory API server on {addr}: it has no authentication, use a loopback address such as 127.0.0.1"
            ),
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_listener(shared, listener).await
}

/// Serve on an already bound listener.
pub(crate) async fn serve_listener(
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let svc = ApiService::new(shared.clone());
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let mut svc = svc.clone();
                tower::Service::call(&mut svc, req)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends one request to a fresh server; returns the status code and the JSON body.
    async fn send(
        server: &crate::MemoryServer,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: &'static [u8],
    ) -> (u16, Value) {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let resp = handle(
            server.shared.clone(),
            req.body(Bytes::from_static(body)).unwrap(),
        )
        .await;
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice(&bytes).unwrap())
    }

    /// kubectl 1.32+ creates built-in kinds with a protobuf body (`kubectl create ns bar`, the
    /// bytes below are kubectl 1.32's) and client-go does not fall back to JSON after a 415: the
    /// server decodes it (it used to answer 400 "could not be decoded as JSON or YAML"). A kind
    /// it does not decode is a 415 that says what to do, and nothing is written.
    #[tokio::test]
    async fn kubectl_protobuf_creates_are_decoded() {
        let server = crate::MemoryServer::start(crate::Config::default());
        let (code, ns) = send(
            &server,
            Method::POST,
            "/api/v1/namespaces?fieldManager=kubectl-create",
            Some("application/vnd.kubernetes.protobuf"),
            crate::protobuf::tests::KUBECTL_CREATE_NS_BAR,
        )
        .await;
        assert_eq!(code, 201, "{ns}");
        assert_eq!(ns["metadata"]["name"], "bar", "{ns}");
        assert_eq!(ns["status"]["phase"], "Active", "{ns}");

        let rv = server.resource_version();
        let deployment = b"k8s\x00\n\x15\n\x07apps/v1\x12\nDeployment\x12\x05\n\x03\n\x01d";
        let (code, status) = send(
            &server,
            Method::POST,
            "/apis/apps/v1/namespaces/default/deployments",
            Some("application/vnd.kubernetes.protobuf"),
            deployment,
        )
        .await;
        assert_eq!(code, 415, "{status}");
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["reason"], "UnsupportedMediaType", "{status}");
        let message = status["message"].as_str().unwrap();
        assert!(
            message.starts_with("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"),
            "{message}"
        );
        assert!(message.contains("not apps/v1 Deployment"), "{message}");
        assert!(message.contains("kubectl create -f -"), "{message}");
        assert_eq!(server.resource_version(), rv, "nothing is written");
        // An update (PUT) in another unknown type gets kube's message alone.
        let (code, status) = send(
            &server,
            Method::PUT,
            "/api/v1/namespaces/default",
            Some("text/plain"),
            b"{}",
        )
        .await;
        assert_eq!(code, 415, "{status}");
        assert!(!status["message"].as_str().unwrap().contains("protobuf"));
    }

    /// JSON (with parameters or in any case), YAML and a body without `Content-Type` are
    /// decoded, as by kube-apiserver.
    #[tokio::test]
    async fn json_and_yaml_bodies_are_decoded() {
        let server = crate::MemoryServer::start(crate::Config::default());
        for (ct, body) in [
            (
                Some("application/json; charset=utf-8"),
                &br#"{"metadata":{"name":"a"}}"#[..],
            ),
            (Some("Application/JSON"), br#"{"metadata":{"name":"b"}}"#),
            (Some("application/yaml"), b"metadata:\n  name: c\n"),
            (None, br#"{"metadata":{"name":"d"}}"#),
        ] {
            let path = "/api/v1/namespaces/default/configmaps";
            let (code, obj) = send(&server, Method::POST, path, ct, body).await;
            assert_eq!(code, 201, "{ct:?}: {obj}");
        }
    }

    #[test]
    fn query_decoding() {
        let q = Query::parse(Some(
            "labelSelector=a%20in%20(x%2Cy)&watch=1&fieldSelector=metadata.name%3Dz",
        ));
        assert_eq!(q.get("labelSelector"), Some("a in (x,y)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=z"));
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
