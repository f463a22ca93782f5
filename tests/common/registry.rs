//! A real OCI registry for the tests: Debian's `docker-registry` (docker/distribution 2.8,
//! `apt-get install docker-registry`, installed by `.ci/run`), bound to 127.0.0.1 on a free
//! port with a temporary root and config file, stopped (and its root removed) on drop; with
//! htpasswd Basic auth or distribution's token auth (a `super::token` server). The tests that
//! start one are `#[ignore = "needs docker-registry …"]`; without the binary,
//! [`Registry::start`] fails the test ([`super::needs::missing`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs the registry.
pub const BINARY: &str = "/usr/bin/docker-registry";

/// A running registry.
pub struct Registry {
    child: Child,
    root: tempfile::TempDir,
    /// The address it listens on: 127.0.0.1 unless [`Registry::start_on`] said otherwise.
    ip: std::net::Ipv4Addr,
    /// Its port.
    pub port: u16,
}

impl Registry {
    /// Starts a registry and waits (up to 30 s) until it answers `GET /v2/`; fails the test
    /// when the binary is absent.
    pub fn start() -> Registry {
        Self::start_with(None)
    }

    /// Like [`Registry::start`], listening on `ip` instead of loopback (for instance a real
    /// node's pod bridge address, which its pods reach and loopback they do not): a registry
    /// that is not on loopback is reached over plain HTTP only with `--insecure-registry`.
    pub fn start_on(ip: std::net::Ipv4Addr) -> Registry {
        Self::start_at(ip, None)
    }

    /// Like [`Registry::start`], asking for HTTP Basic auth checked against `htpasswd` (a
    /// bcrypt htpasswd file, such as tests/fixtures/oci/htpasswd).
    pub fn start_with_htpasswd(htpasswd: &Path) -> Registry {
        Self::start_with(Some(format!(
            "auth:\n  htpasswd:\n    realm: cvo-test\n    path: {}\n",
            htpasswd.display()
        )))
    }

    /// Like [`Registry::start`], asking for bearer tokens from `tokens` (distribution's token
    /// auth: its realm, service and issuer, tokens checked against its certificate).
    pub fn start_with_token(tokens: &super::token::TokenServer) -> Registry {
        Self::start_with(Some(format!(
            "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
            tokens.realm(),
            super::token::SERVICE,
            super::token::ISSUER,
            tokens.certificate().display()
        )))
    }

    /// `auth`: the config's `auth:` section, if any.
    fn start_with(auth: Option<String>) -> Registry {
        Self::start_at(std::net::Ipv4Addr::LOCALHOST, auth)
    }

    fn start_at(ip: std::net::Ipv4Addr, auth: Option<String>) -> Registry {
        if !Path::new(BINARY).exists() {
            super::needs::missing(
                &format!("a real OCI registry ({BINARY})"),
                "apt-get install docker-registry (.ci/run installs it)",
            );
        }
        // A port taken between probing and binding: try again with another.
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(ip, auth.as_deref()) {
                Ok(r) => return r,
                Err(e) => last = e,
            }
        }
        panic!("the registry did not start: {last}");
    }

    fn try_start(ip: std::net::Ipv4Addr, auth: Option<&str>) -> Result<Registry, String> {
        let root = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind((ip, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let config = root.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {ip}:{port}\n{}",
                root.path().join("data").display(),
                auth.unwrap_or_default()
            ),
        )
        .expect("write the registry's config");
        let log = std::fs::File::create(root.path().join("registry.log")).expect("log file");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{BINARY}: {e}"))?;
        let mut registry = Registry {
            child,
            root,
            ip,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut wait = Duration::from_millis(10);
        loop {
            if registry.answers() {
                return Ok(registry);
            }
            if let Ok(Some(status)) = registry.child.try_wait() {
                return Err(format!("it exited ({status}): {}", registry.log()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no answer on port {port} in 30 s: {}",
                    registry.log()
                ));
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_millis(500));
        }
    }

    /// Whether `GET /v2/` answers (200, or 401 when it asks for credentials).
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect((self.ip, self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut head = [0u8; 12];
        s.read_exact(&mut head).is_ok() && (head.ends_with(b"200") || head.ends_with(b"401"))
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("registry.log")).unwrap_or_default()
    }

    /// `IP:PORT` (`127.0.0.1:PORT` unless started on another address).
    pub fn host(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// `oci://HOST/REPO` followed by `tail` (`:TAG`, `@sha256:…`).
    pub fn url(&self, repo: &str, tail: &str) -> String {
        format!("oci://{}/{repo}{tail}", self.host())
    }

    /// The file holding blob `digest` (`sha256:…`) in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.root
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Registry {
    /// `127.0.0.1:PORT/REPO` followed by `tail`: the CVO's pullspec form (no `oci://`), as
    /// ClusterVersion `spec.desiredUpdate.image` names it.
    pub fn pullspec(&self, repo: &str, tail: &str) -> String {
        format!("{}/{repo}{tail}", self.host())
    }

    /// Pushes the release directory `dir` to `REPO:TAG` as cvo's artifact (the library's
    /// push, which `cvo push` runs); its manifest digest (`sha256:…`).
    pub async fn push_release(&self, repo: &str, tag: &str, dir: &Path) -> String {
        self.push_release_as(repo, tag, dir, &cvo::oci::Access::default())
            .await
    }

    /// [`Registry::push_release`] with `access` (credentials for a registry with htpasswd).
    pub async fn push_release_as(
        &self,
        repo: &str,
        tag: &str,
        dir: &Path,
        access: &cvo::oci::Access,
    ) -> String {
        let target = cvo::oci::Source::parse(&self.url(repo, &format!(":{tag}")))
            .expect("a reference")
            .expect("an OCI reference");
        let caps = cvo::oci::Caps {
            max_file_bytes: 1 << 20,
            max_release_bytes: 16 << 20,
        };
        cvo::oci::push_release(dir, &target, access, caps, &cvo::release::is_config_file)
            .await
            .expect("push the release")
            .digest
            .to_string()
    }

    /// Pushes a (tiny) container image to `REPO:TAG`: an OCI image manifest with an image
    /// config and one layer, what an operator's own image is; its manifest digest.
    pub async fn push_image(&self, repo: &str, tag: &str) -> String {
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","config":{{"Labels":{{"tag":"{tag}"}}}}}}"#
        );
        let layer =
            cvo::oci::extract::raw_layer(&[("bin/cvo", tar::EntryType::Regular, tag.as_bytes())]);
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cvo::oci::Digest::of(config.as_bytes()).to_string(), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": cvo::oci::Digest::of(&layer).to_string(), "size": layer.len()}]
        })
        .to_string();
        let target = cvo::oci::Source::parse(&self.url(repo, &format!(":{tag}")))
            .expect("a reference")
            .expect("an OCI reference");
        cvo::oci::push_artifact(
            &target,
            manifest.as_bytes(),
            &[&layer, config.as_bytes()],
            &cvo::oci::Access::default(),
        )
        .await
        .expect("push the image")
        .digest
        .to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
