//! An update service on loopback for the tests of available updates: [`GraphServer`] serves
//! whatever [`Reply`] it is set to (a graph, an HTTP status, or silence) over plain HTTP/1.1
//! from threads of the test process, and records each request line. [`example_graph`] is the
//! graph the tests serve.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What the server answers.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 OK` with this body (`Content-Type: application/json`).
    Json(String),
    /// This status, no body.
    Status(u16),
    /// Nothing: the connection stays open, unanswered, until the client gives up (or a
    /// minute passes).
    Silent,
}

/// A running update service; stopped when dropped.
pub struct GraphServer {
    /// `http://127.0.0.1:PORT/graph`.
    pub url: String,
    reply: Arc<Mutex<Reply>>,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl GraphServer {
    pub fn start(reply: Reply) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the graph server");
        let port = listener.local_addr().expect("addr").port();
        let server = GraphServer {
            url: format!("http://127.0.0.1:{port}/graph"),
            reply: Arc::new(Mutex::new(reply)),
            requests: Arc::default(),
            stop: Arc::default(),
            port,
        };
        let (reply, requests, stop) = (
            server.reply.clone(),
            server.requests.clone(),
            server.stop.clone(),
        );
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(socket) = socket else { continue };
                let (reply, requests, stop) = (reply.clone(), requests.clone(), stop.clone());
                std::thread::spawn(move || answer(socket, &reply, &requests, &stop));
            }
        });
        server
    }

    /// What the next requests get.
    pub fn set(&self, reply: Reply) {
        *self.reply.lock().unwrap_or_else(|p| p.into_inner()) = reply;
    }

    /// The request lines so far (`GET /graph?… HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for GraphServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn answer(
    mut socket: TcpStream,
    reply: &Mutex<Reply>,
    requests: &Mutex<Vec<String>>,
    stop: &AtomicBool,
) {
    let _ = socket.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or_default().to_owned();
    requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(line);
    let reply = reply.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let response = match reply {
        Reply::Json(body) => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Reply::Status(code) => {
            format!("HTTP/1.1 {code} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
        Reply::Silent => {
            // Held open without an answer: the client's timeout is what ends it.
            let until = Instant::now() + Duration::from_secs(60);
            let _ = socket.set_read_timeout(Some(Duration::from_millis(200)));
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                match socket.read(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return,
                }
            }
            return;
        }
    };
    let _ = socket.write_all(response.as_bytes());
    let _ = socket.shutdown(Shutdown::Write);
}

/// The payload of version `v` in [`example_graph`].
pub fn payload(v: &str) -> String {
    format!("registry.example.com/cvo/release:{v}")
}

/// A graph around 1.4.0: edges to 1.4.1 and 1.5.0 (with a URL and channels), a conditional
/// edge to 1.6.0 whose risk always applies (`WidgetsBreak`), and one to 1.6.1 whose risk is a
/// PromQL rule (not evaluated by cvo).
pub fn example_graph() -> Value {
    let node = |v: &str| json!({"version": v, "payload": payload(v), "metadata": {}});
    json!({
        "nodes": [
            node("1.4.0"),
            node("1.4.1"),
            {"version": "1.5.0", "payload": payload("1.5.0"),
             "metadata": {"url": "https://example.com/releases/1.5.0",
                          "io.openshift.upgrades.graph.release.channels": "stable-1,fast-1"}},
            node("1.6.0"),
            node("1.6.1"),
        ],
        "edges": [[0, 1], [0, 2], [1, 2]],
        "conditionalEdges": [
            {"edges": [{"from": "1.4.0", "to": "1.6.0"}],
             "risks": [{"url": "https://example.com/widgets", "name": "WidgetsBreak",
                        "message": "Widgets stop working.", "matchingRules": [{"type": "Always"}]}]},
            {"edges": [{"from": "1.4.0", "to": "1.6.1"}],
             "risks": [{"url": "https://example.com/slow", "name": "SlowDisks",
                        "message": "Slow disks get slower.",
                        "matchingRules": [{"type": "PromQL", "promql": {"promql": "max(disk_slow) == 1"}}]}]}
        ]
    })
}

/// A cluster ID in the form the update service expects (a UUID).
pub const CLUSTER_ID: &str = "4f8c9a1e-2b3d-4c5e-8f70-9a1b2c3d4e5f";
