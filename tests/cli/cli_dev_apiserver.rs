//! `cvo dev-apiserver`: refuses non-loopback addresses, and serves a kubeconfig that another
//! `cvo` process (or kubectl) can use.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use predicates::prelude::*;

#[test]
fn refuses_non_loopback_addresses() {
    common::cli::cvo()
        .args(["dev-apiserver", "--listen", "0.0.0.0:18080"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "refusing to listen on 0.0.0.0:18080",
        ));
}

/// Kills the server when the test ends, pass or fail.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serves_http_on_loopback_and_writes_a_kubeconfig() {
    // A free port: bind, read it, release it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let addr = format!("127.0.0.1:{port}");
    let _server = Child(
        common::cli::process()
            .args(["dev-apiserver", "--listen", &addr, "--kubeconfig-out"])
            .arg(&kubeconfig)
            .spawn()
            .unwrap(),
    );
    // Poll until the server answers /version (deadline, no fixed sleep).
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Ok(mut stream) = TcpStream::connect(&addr) {
            write!(
                stream,
                "GET /version HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "dev-apiserver did not answer on {addr}"
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval, bounded by the deadline
    };
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("\"gitVersion\""), "{body}");
    let config = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        config.contains(&format!("server: http://{addr}")),
        "{config}"
    );
}
