//! Watch streams: newline-delimited JSON `{"type", "object"}` events for one resource type,
//! filtered by namespace and selectors. Starts from a resourceVersion (replaying the bounded
//! history; too old → an `ERROR` event with a 410 `Expired` Status, as kube-apiserver's watch
//! cache does), or with synthetic ADDED events for the current state; sends BOOKMARKs when
//! `allowWatchBookmarks=true` (and the `k8s.io/initial-events-end` bookmark for
//! `sendInitialEvents=true`). Each watcher is a task fed by the store's broadcast channel, so
//! idle watches cost nothing; a watcher that falls too far behind gets 410 and must re-list.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::Shared;
use super::errors::ApiError;
use super::handler::{ListOpts, Target};
use super::router::{Query, RespBody};
use super::store::{Event, EventType};

fn line(kind: &str, object: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

struct Filter {
    t: Target,
    opts: ListOpts,
    /// `as=PartialObjectMetadata`: events carry only the objects' metadata.
    meta_only: bool,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.opts.fields.matches(obj)
            && self
                .opts
                .labels
                .matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }

    /// The event this watcher sees for a store event, if any: an object entering the selector
    /// is ADDED, one leaving it is DELETED, like kube's watch cache.
    fn translate(&self, ev: &Event) -> Option<&'static str> {
        if ev.key.res != self.t.info.key()
            || (!self.t.namespace.is_empty() && ev.key.namespace != self.t.namespace)
        {
            return None;
        }
        let now = self.matches(&ev.object);
        match ev.kind {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => ev
                .prev
                .as_deref()
                .map_or(now, |p| self.matches(p))
                .then_some("DELETED"),
            EventType::Modified => match (ev.prev.as_deref().map_or(now, |p| self.matches(p)), now)
            {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        }
    }

    /// The watch line for an event, reusing the event's one-time encoding when the watcher
    /// asked for the version the object is stored in (the common case).
    fn event_line(&self, kind: &str, ev: &Event) -> Bytes {
        if self.meta_only {
            return line(kind, &super::router::partial_object(&ev.object));
        }
        let api_version = self.t.info.api_version(&self.t.version);
        if ev.object.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str())
            && ev.object.get("kind").and_then(Value::as_str) == Some(self.t.info.kind.as_str())
        {
            let obj = ev
                .encoded
                .get_or_init(|| Bytes::from(serde_json::to_vec(&*ev.object).unwrap_or_default()));
            let mut v = Vec::with_capacity(obj.len() + 32);
            v.extend_from_slice(b"{\"type\":\"");
            v.extend_from_slice(kind.as_bytes());
            v.extend_from_slice(b"\",\"object\":");
            v.extend_from_slice(obj);
            v.extend_from_slice(b"}\n");
            return Bytes::from(v);
        }
        line(kind, &self.render(&ev.object))
    }

    fn render(&self, obj: &Value) -> Value {
        let mut o = obj.clone();
        o["apiVersion"] = json!(self.t.info.api_version(&self.t.version));
        o["kind"] = json!(self.t.info.kind);
        o
    }
    fn bookmark(&self, rv: u64, initial_end: bool) -> Value {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        if self.meta_only {
            return super::router::partial_object(&json!({"metadata": md}));
        }
        json!({"kind": self.t.info.kind, "apiVersion": self.t.info.api_version(&self.t.version), "metadata": md})
    }
}

/// Start a watch; returns the streaming response.
pub(crate) fn start(
    shared: Arc<Shared>,
    t: Target,
    opts: ListOpts,
    q: &Query,
    meta_only: bool,
) -> Result<Response<RespBody>, ApiError> {
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.flag("sendInitialEvents");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let rv_param = q.get("resourceVersion").unwrap_or("").to_string();
    let f = Filter {
        t,
        opts: ListOpts {
            limit: None,
            continue_token: None,
            ..opts
        },
        meta_only,
    };
    let mut initial: Vec<Bytes> = Vec::new();
    let (rx, start_rv) = {
        let st = shared.lock();
        let rx = st.store.subscribe();
        let cur = st.store.rv();
        if rv_param.is_empty() || rv_param == "0" || send_initial {
            let list = st.list(&f.t, &f.opts)?;
            for item in list["items"].as_array().into_iter().flatten() {
                if f.meta_only {
                    initial.push(line("ADDED", &super::router::partial_object(item)));
                } else {
                    initial.push(line("ADDED", item));
                }
            }
            if send_initial && bookmarks {
                initial.push(line("BOOKMARK", &f.bookmark(cur, true)));
            }
        } else {
            let from: u64 = rv_param.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {rv_param:?}"))
            })?;
            if from < st.store.compacted() {
                let e = ApiError::gone(format!(
                    "too old resource version: {from} ({})",
                    st.store.compacted() + 1
                ));
                initial.push(line("ERROR", &e.to_status()));
                return Ok(stream_response(initial, None));
            }
            for ev in st.store.history_since(from) {
                if let Some(kind) = f.translate(ev) {
                    initial.push(f.event_line(kind, ev));
                }
            }
        }
        (rx, cur)
    };
    let interval = shared.config.bookmark_interval;
    let (tx, body_rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(run(
        rx,
        tx,
        f,
        start_rv,
        bookmarks.then_some(interval),
        timeout,
    ));
    Ok(stream_response(initial, Some(body_rx)))
}

fn stream_response(initial: Vec<Bytes>, rx: Option<mpsc::Receiver<Bytes>>) -> Response<RespBody> {
    let first = futures::stream::iter(initial);
    let rest = futures::stream::unfold(rx, |rx| async move {
        let mut rx = rx?;
        let b = rx.recv().await?;
        Some((b, Some(rx)))
    });
    use futures::StreamExt;
    let s = first
        .chain(rest)
        .map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b)));
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(s).boxed_unsync())
        .expect("valid response")
}

async fn run(
    mut rx: broadcast::Receiver<Arc<Event>>,
    tx: mpsc::Sender<Bytes>,
    f: Filter,
    start_rv: u64,
    bookmarks: Option<Duration>,
    timeout: Option<Duration>,
) {
    let mut last_rv = start_rv;
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut tick = tokio::time::interval(bookmarks.unwrap_or(Duration::from_secs(3600)));
    tick.tick().await;
    loop {
        let sleep_until =
            deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86400));
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep_until(sleep_until) => return,
            _ = tick.tick(), if bookmarks.is_some() => {
                if tx.send(line("BOOKMARK", &f.bookmark(last_rv, false))).await.is_err() { return; }
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    if ev.rv <= start_rv { continue; }
                    last_rv = ev.rv;
                    if let Some(kind) = f.translate(&ev)
                        && tx.send(f.event_line(kind, &ev)).await.is_err() {
                            return;
                        }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let e = ApiError::gone("the watcher fell too far behind; re-list and watch again");
                    let _ = tx.send(line("ERROR", &e.to_status())).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
