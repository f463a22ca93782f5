//! A token server for the tests: docker/distribution's token auth, served on loopback by
//! hyper in the test process, for a registry started with
//! [`Registry::start_with_token`](super::registry::Registry::start_with_token).
//!
//! The protocol (distribution 2.8, `registry/auth/token`): the registry answers a request
//! without a valid token with 401 and `WWW-Authenticate: Bearer realm=…,service=…,scope=…`;
//! the client GETs the realm with `service` and `scope` (`repository:NAME:pull,push`) query
//! parameters, with Basic credentials or none, and receives `{"token": JWT}`. The JWT is
//! ES256 (raw `r‖s` signature), its header carries the signing certificate in `x5c` (which
//! the registry checks against its `rootcertbundle`), and its claims are `iss`, `sub`, `aud`
//! (one string: the service), `exp`, `nbf`, `iat`, `jti` and `access`
//! (`[{"type":"repository","name":…,"actions":[…]}]`).
//!
//! The signing key and its self-signed certificate are made with the `openssl` CLI at start
//! (the test fails without it: nearly every machine has it). Each [`User`] is granted the actions it may do out of those
//! asked for; wrong credentials get 401; an anonymous request gets a token granting nothing.
//! A user may also hold an OAuth2 refresh token (what `docker login` stores as
//! `identitytoken`): `POST` to the realm with `grant_type=refresh_token` exchanges it for an
//! `access_token`, granted as that user. Every answer is recorded ([`TokenServer::issued`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http_body_util::BodyExt as _;

/// The `service` the registry names and the tokens' `aud`.
pub const SERVICE: &str = "cvo-test-registry";
/// The tokens' `iss`.
pub const ISSUER: &str = "cvo-test-token-server";

/// A user of the token server.
#[derive(Clone, Debug)]
pub struct User {
    /// Its name (Basic auth user, the token's `sub`).
    pub name: &'static str,
    /// Its password (Basic auth).
    pub password: &'static str,
    /// An OAuth2 refresh token it may exchange instead (`grant_type=refresh_token`).
    pub refresh_token: Option<&'static str>,
    /// The actions it may do on every repository (`pull`, `push`).
    pub actions: &'static [&'static str],
}

/// What the token server answered one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// `GET` (Basic or anonymous) or `POST` (an OAuth2 grant).
    pub method: String,
    /// The user it was granted to (`None`: anonymous, or credentials refused).
    pub user: Option<String>,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The access granted (`(repository, actions)`), empty when refused or anonymous.
    pub granted: Vec<(String, Vec<String>)>,
    /// The HTTP status answered.
    pub status: u16,
    /// The token it issued (to check that no output shows it).
    pub token: Option<String>,
}

/// A running token server; stopped on drop.
pub struct TokenServer {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    issued: Arc<Mutex<Vec<Issued>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Signer {
    key: ring::signature::EcdsaKeyPair,
    rng: ring::rand::SystemRandom,
    /// Standard base64 of the certificate's DER (the `x5c` entry).
    x5c: String,
}

struct State {
    users: Vec<User>,
    signer: Signer,
    issued: Arc<Mutex<Vec<Issued>>>,
}

impl TokenServer {
    /// Makes a signing key and certificate and serves tokens for `users` on a free loopback
    /// port; fails the test without the `openssl` CLI.
    pub fn start(users: &[User]) -> TokenServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let made = openssl(
            dir.path(),
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                "key.pem",
            ],
        ) && openssl(
            dir.path(),
            &[
                "req",
                "-x509",
                "-new",
                "-key",
                "key.pem",
                "-subj",
                "/CN=cvo-test-token-server",
                "-days",
                "2",
                "-out",
                "cert.pem",
            ],
        );
        if !made {
            super::needs::missing(
                "the openssl CLI (to make the token server's key)",
                "install openssl",
            );
        }
        let der = |file: &str| {
            let text = std::fs::read(dir.path().join(file)).expect("read a PEM file");
            pem::parse(text).expect("a PEM file").into_contents()
        };
        let rng = ring::rand::SystemRandom::new();
        let key = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &der("key.pem"),
            &rng,
        )
        .expect("openssl's PKCS#8 P-256 key");
        let signer = Signer {
            key,
            rng,
            x5c: base64::engine::general_purpose::STANDARD.encode(der("cert.pem")),
        };
        let issued = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State {
            users: users.to_vec(),
            signer,
            issued: issued.clone(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("its address");
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let stream = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => stream,
                            Err(_) => continue,
                        },
                    };
                    let state = state.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let state = state.clone();
                            async move { Ok::<_, std::convert::Infallible>(answer(&state, req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        TokenServer {
            dir,
            addr,
            issued,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The realm: `http://127.0.0.1:PORT/token`.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// The PEM certificate whose key signs the tokens (the registry's `rootcertbundle`).
    pub fn certificate(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// Every answer so far, in order.
    pub fn issued(&self) -> Vec<Issued> {
        self.issued.lock().expect("the log").clone()
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

type Body = http_body_util::Full<bytes::Bytes>;

/// One request to the realm.
async fn answer(
    state: &State,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Body> {
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let basic = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
        })
        .and_then(|b| String::from_utf8(b).ok());
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    if method == hyper::Method::POST {
        params.extend(form_urlencoded::parse(&body).into_owned());
    }
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let scopes: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "scope")
        .flat_map(|(_, v)| v.split(' ').map(str::to_owned))
        .filter(|s| !s.is_empty())
        .collect();
    let mut record = Issued {
        method: method.to_string(),
        user: None,
        scopes: scopes.clone(),
        granted: Vec::new(),
        status: 200,
        token: None,
    };
    let user: Result<Option<&User>, &str> = if method == hyper::Method::POST {
        match (param("grant_type"), param("refresh_token")) {
            (Some("refresh_token"), Some(token)) => state
                .users
                .iter()
                .find(|u| u.refresh_token == Some(token))
                .map(Some)
                .ok_or("the refresh token is not known"),
            (Some("password"), _) => state
                .users
                .iter()
                .find(|u| {
                    Some(u.name) == param("username") && Some(u.password) == param("password")
                })
                .map(Some)
                .ok_or("wrong user name or password"),
            _ => Err("unsupported grant_type"),
        }
    } else {
        match &basic {
            None => Ok(None),
            Some(pair) => {
                let (name, password) = pair.split_once(':').unwrap_or((pair, ""));
                state
                    .users
                    .iter()
                    .find(|u| u.name == name && u.password == password)
                    .map(Some)
                    .ok_or("wrong user name or password")
            }
        }
    };
    let (status, text) = match (user, param("service")) {
        (_, Some(service)) if service != SERVICE => {
            (400, r#"{"error":"unknown service"}"#.to_owned())
        }
        (Err(why), _) => (401, format!(r#"{{"error":"{why}"}}"#)),
        (Ok(user), _) => {
            let granted: Vec<(String, Vec<String>)> = match user {
                None => Vec::new(),
                Some(user) => scopes
                    .iter()
                    .filter_map(|scope| {
                        let (kind, rest) = scope.split_once(':')?;
                        let (name, actions) = rest.rsplit_once(':')?;
                        let actions: Vec<String> = actions
                            .split(',')
                            .filter(|a| user.actions.contains(a))
                            .map(str::to_owned)
                            .collect();
                        (kind == "repository" && !actions.is_empty())
                            .then(|| (name.to_owned(), actions))
                    })
                    .collect(),
            };
            record.user = user.map(|u| u.name.to_owned());
            record.granted = granted.clone();
            let jwt = state.signer.jwt(user.map_or("", |u| u.name), &granted);
            record.token = Some(jwt.clone());
            let field = if method == hyper::Method::POST {
                "access_token"
            } else {
                "token"
            };
            (
                200,
                serde_json::json!({field: jwt, "expires_in": 300}).to_string(),
            )
        }
    };
    record.status = status;
    state.issued.lock().expect("the log").push(record);
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::new(bytes::Bytes::from(text)))
        .expect("a response")
}

impl Signer {
    /// A JWT for `subject` granting `access`, valid for five minutes.
    fn jwt(&self, subject: &str, access: &[(String, Vec<String>)]) -> String {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [self.x5c]});
        let claims = serde_json::json!({
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 1,
            "iat": now,
            "jti": format!("{now}-{}", fastrand::u64(..)),
            "access": access
                .iter()
                .map(|(name, actions)| serde_json::json!({"type": "repository", "name": name, "actions": actions}))
                .collect::<Vec<_>>(),
        });
        let signed = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = self
            .key
            .sign(&self.rng, signed.as_bytes())
            .expect("sign the token");
        format!("{signed}.{}", b64(signature.as_ref()))
    }
}
