//! Reading an OCI source as a release directory: resolve to a manifest digest once, check the
//! manifest's shape, get the layer (from the cache when a verified copy is there), extract it
//! into a temporary directory and rename that into place. What is read afterwards is exactly
//! that digest's content: a tag moved after resolution changes nothing. With [`Verify`], the
//! signature of that digest is checked before the layer is read ([`super::attach::verify`]).

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::PathBuf;

use super::attach::Place;
use super::cache::Cache;
use super::registry::Registry;
use super::shape::{Descriptor, Shape, release_layer};
use super::signature::{SignatureCheck, Verify};
use super::{Access, Caps, Digest, LayoutRef, MAX_MANIFEST_BYTES, OciError, RegistryRef, Source};

/// How to read OCI sources: the flags of the reading commands.
#[derive(Clone, Debug)]
pub struct FetchOptions {
    /// `--cache-dir`; `None`: [`Cache::default_root`].
    pub cache_dir: Option<PathBuf>,
    /// How registries are reached.
    pub access: Access,
    /// Size caps.
    pub caps: Caps,
    /// Check the release's signature with these keys; `None`: no check
    /// ([`SignatureCheck::NotAsked`]).
    pub verify: Option<Verify>,
}

/// A release read from an OCI source: its extracted directory (removed when this is
/// dropped) and where it came from.
#[derive(Debug)]
pub struct Opened {
    root: tempfile::TempDir,
    /// The source as written on the command line.
    pub source: String,
    /// The manifest digest the source resolved to.
    pub digest: Digest,
    /// The tag it was resolved from, if any.
    pub tag: Option<String>,
    /// `HOST[:PORT]/REPO@sha256:…` for a registry source (the release image recorded in
    /// ClusterVersion); `None` for a layout.
    pub image: Option<String>,
    /// The artifact's shape.
    pub shape: Shape,
    /// What the signature check found.
    pub signature: SignatureCheck,
}

impl Opened {
    /// The extracted release directory.
    pub fn dir(&self) -> PathBuf {
        self.root.path().join("release")
    }
}

/// Reads `source` into a release directory (see the module doc).
pub async fn open(source: &Source, options: &FetchOptions) -> Result<Opened, OciError> {
    let cache_root = cache_root(options)?;
    let cache = Cache::open(&cache_root)?;
    let source_text = source.to_string();
    let (read, image) = match source {
        Source::Registry(r) => {
            let read = from_registry(r, options, &cache).await?;
            let image = Some(format!("{}@{}", r.name(), read.digest));
            (read, image)
        }
        Source::Layout(l) => (from_layout(l, options, &cache).await?, None),
    };
    let Read {
        digest,
        shape,
        layer: layer_path,
        signature,
    } = read;
    let root = tempfile::Builder::new()
        .prefix("release-")
        .tempdir_in(cache.extract_dir())
        .map_err(|e| {
            OciError::Unavailable(format!(
                "the cache directory {}: cannot create a directory in it: {e}",
                cache_root.display()
            ))
        })?;
    let partial = root.path().join("partial");
    std::fs::create_dir(&partial)
        .map_err(|e| OciError::Unavailable(format!("{}: {e}", partial.display())))?;
    let file = File::open(&layer_path)
        .map_err(|e| OciError::Unavailable(format!("{}: {e}", layer_path.display())))?;
    let what = format!("{source_text} ({digest})");
    super::extract::extract(BufReader::new(file), &partial, options.caps, &what)
        .map_err(OciError::Refused)?;
    std::fs::rename(&partial, root.path().join("release"))
        .map_err(|e| OciError::Unavailable(format!("{}: {e}", partial.display())))?;
    Ok(Opened {
        root,
        source: source_text,
        digest,
        tag: source.tag().map(str::to_owned),
        image,
        shape,
        signature,
    })
}

/// What a registry reference names, once resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A release artifact of this shape: [`open`] reads it.
    Release(Shape),
    /// A container image (or an image index): what it is, in words.
    Image(&'static str),
}

/// A registry reference resolved to a manifest digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The manifest digest (the reference's own when it pins one).
    pub digest: Digest,
    /// What the manifest is.
    pub kind: Kind,
}

/// Resolves `r` to its manifest digest (a tag is resolved now; a pinned digest is checked
/// against the bytes) and tells a release artifact from a container image. The manifest is
/// kept in the cache, so that [`open`] of the digest does not ask for it again. A manifest
/// that is neither is refused naming its media types.
pub async fn resolve(r: &RegistryRef, options: &FetchOptions) -> Result<Resolved, OciError> {
    let cache = Cache::open(&cache_root(options)?)?;
    let mut registry = Lazy::new(r, &options.access);
    let (manifest, digest) = manifest(r, &cache, &mut registry).await?;
    let kind = match release_layer(&manifest) {
        Ok((shape, _)) => Kind::Release(shape),
        Err(why) => match super::shape::container_image(&manifest) {
            Some(what) => Kind::Image(what),
            None => {
                return Err(OciError::Refused(format!(
                    "{}@{digest}: {why}; nor is it a container image",
                    r.name()
                )));
            }
        },
    };
    Ok(Resolved { digest, kind })
}

/// `--cache-dir`, else the user's cache directory.
fn cache_root(options: &FetchOptions) -> Result<PathBuf, OciError> {
    match &options.cache_dir {
        Some(dir) => Ok(dir.clone()),
        None => Cache::default_root().ok_or_else(|| {
            OciError::Usage("no user cache directory (HOME is unset): pass --cache-dir".to_owned())
        }),
    }
}

/// What resolving a source found: the manifest digest, the shape, the (verified, cached)
/// layer file and the signature check.
struct Read {
    digest: Digest,
    shape: Shape,
    layer: PathBuf,
    signature: SignatureCheck,
}

/// The signature check of the manifest `digest` in `r`'s repository with `options.verify`
/// (none asked: `NotAsked`): for an image that is not a release artifact (a release's is
/// checked by [`open`]). A failure is [`OciError::Verification`] when enforced.
pub async fn verify_signature(
    r: &RegistryRef,
    digest: &Digest,
    options: &FetchOptions,
) -> Result<SignatureCheck, OciError> {
    let Some(verify) = &options.verify else {
        return Ok(SignatureCheck::NotAsked);
    };
    let registry = Registry::new(&r.registry, &options.access)?;
    let place = Place::Registry {
        registry: &registry,
        repository: &r.repository,
    };
    check_signature(place, digest, Some(verify)).await
}

/// The signature check of `digest` at `place` with `verify` (none asked: `NotAsked`).
async fn check_signature(
    place: Place<'_>,
    digest: &Digest,
    verify: Option<&Verify>,
) -> Result<SignatureCheck, OciError> {
    match verify {
        Some(v) => super::attach::verify(place, digest, v).await,
        None => Ok(SignatureCheck::NotAsked),
    }
}

/// A registry's client, made when first needed: a pinned digest whose blobs are all cached
/// needs no registry (not even its credentials).
struct Lazy<'a> {
    r: &'a RegistryRef,
    access: &'a Access,
    client: Option<Registry>,
}

impl<'a> Lazy<'a> {
    fn new(r: &'a RegistryRef, access: &'a Access) -> Self {
        Lazy {
            r,
            access,
            client: None,
        }
    }

    fn get(&mut self) -> Result<&Registry, OciError> {
        if self.client.is_none() {
            self.client = Some(Registry::new(&self.r.registry, self.access)?);
        }
        Ok(self.client.as_ref().expect("made above"))
    }
}

/// The manifest `r` names and its digest: from the cache when `r` pins a digest whose
/// manifest is there (verified again), else from the registry, then kept in the cache.
async fn manifest(
    r: &RegistryRef,
    cache: &Cache,
    registry: &mut Lazy<'_>,
) -> Result<(Vec<u8>, Digest), OciError> {
    if let Some(d) = &r.digest
        && let Some(path) = cache.get(d, MAX_MANIFEST_BYTES)
    {
        let bytes = std::fs::read(&path)
            .map_err(|e| OciError::Unavailable(format!("{}: {e}", path.display())))?;
        return Ok((bytes, d.clone()));
    }
    let got = registry
        .get()?
        .manifest(&r.repository, &r.reference())
        .await?;
    cache.put(&got.1, &got.0)?;
    Ok(got)
}

/// The manifest digest, shape and cached layer file of a registry source.
async fn from_registry(
    r: &RegistryRef,
    options: &FetchOptions,
    cache: &Cache,
) -> Result<Read, OciError> {
    let mut registry = Lazy::new(r, &options.access);
    // Resolve once: the digest if pinned, else the tag's manifest's digest.
    let (manifest, digest) = manifest(r, cache, &mut registry).await?;
    // The signature of the resolved digest, before anything of the release is used.
    let signature = match &options.verify {
        Some(v) => {
            let place = Place::Registry {
                registry: registry.get()?,
                repository: &r.repository,
            };
            check_signature(place, &digest, Some(v)).await?
        }
        None => SignatureCheck::NotAsked,
    };
    let name = format!("oci://{}@{digest}", r.name());
    let (shape, layer) =
        release_layer(&manifest).map_err(|e| OciError::Refused(format!("{name}: {e}")))?;
    let layer_digest = layer_digest(&layer, &name)?;
    if let Some(path) = cache.get(&layer_digest, options.caps.max_release_bytes) {
        return Ok(Read {
            digest,
            shape,
            layer: path,
            signature,
        });
    }
    let mut tmp = cache.temp_file()?;
    registry
        .get()?
        .blob(
            &r.repository,
            &layer,
            options.caps.max_release_bytes,
            tmp.as_file_mut(),
        )
        .await
        .map_err(|e| tampered(e, options.verify.as_ref(), &digest))?;
    let path = cache.keep(tmp, &layer_digest)?;
    Ok(Read {
        digest,
        shape,
        layer: path,
        signature,
    })
}

/// The manifest digest, shape and (verified, copied) layer file of a layout source.
async fn from_layout(
    l: &LayoutRef,
    options: &FetchOptions,
    cache: &Cache,
) -> Result<Read, OciError> {
    let digest = super::layout::resolve(&l.path, l.tag.as_deref(), l.digest.as_ref())?;
    let manifest = super::layout::read_manifest(&l.path, &digest)?;
    let signature =
        check_signature(Place::Layout(&l.path), &digest, options.verify.as_ref()).await?;
    let name = format!("oci-layout:{}@{digest}", l.path.display());
    let (shape, layer) =
        release_layer(&manifest).map_err(|e| OciError::Refused(format!("{name}: {e}")))?;
    let layer_digest = layer_digest(&layer, &name)?;
    if layer.size > options.caps.max_release_bytes {
        return Err(OciError::Refused(format!(
            "{name}: the layer has {} bytes, more than --max-release-bytes {}: refused",
            layer.size, options.caps.max_release_bytes
        )));
    }
    let mut tmp = cache.temp_file()?;
    super::layout::read_blob(
        &l.path,
        &layer_digest,
        options.caps.max_release_bytes,
        tmp.as_file_mut(),
    )
    .map_err(|e| tampered(e, options.verify.as_ref(), &digest))?;
    tmp.as_file_mut()
        .rewind()
        .map_err(|e| OciError::Unavailable(format!("{}: {e}", tmp.path().display())))?;
    let path = cache.keep(tmp, &layer_digest)?;
    Ok(Read {
        digest,
        shape,
        layer: path,
        signature,
    })
}

/// With an enforced signature check, a layer that does not match the digest or size the
/// verified manifest gives is a verification failure too (exit code 4): the signed release was
/// changed.
fn tampered(e: OciError, verify: Option<&Verify>, digest: &Digest) -> OciError {
    match e {
        OciError::Mismatch(m) if verify.is_some_and(|v| v.enforce) => OciError::Verification {
            digest: digest.clone(),
            why: format!("its signature verified, but its content was changed: {m}"),
        },
        e => e,
    }
}

fn layer_digest(layer: &Descriptor, name: &str) -> Result<Digest, OciError> {
    layer
        .digest()
        .map_err(|e| OciError::Refused(format!("{name}: {e}")))
}

/// Malicious registry answers, from an in-process fake registry on loopback (the real
/// registry's tests are in tests/cli/cli_oci.rs).
#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::oci::shape::{Manifest, cvo_manifest};

    type Routes = HashMap<String, (u16, &'static str, Vec<u8>)>;

    /// A registry answering `routes` (path → status, content type, body), 404 elsewhere.
    async fn fake_registry(routes: Routes) -> String {
        let routes = Arc::new(routes);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let routes = routes.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (status, content_type, body) = routes
                            .get(req.uri().path())
                            .cloned()
                            .unwrap_or((404, "application/json", br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#.to_vec()));
                            async move {
                                Ok::<_, std::convert::Infallible>(
                                    hyper::Response::builder()
                                        .status(status)
                                        .header("content-type", content_type)
                                        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                                        .expect("response"),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        addr.to_string()
    }

    fn base_routes() -> Routes {
        [("/v2/".to_owned(), (200, "application/json", b"{}".to_vec()))].into()
    }

    async fn open_from(
        host: &str,
        tail: &str,
        caps: Caps,
    ) -> (Result<Opened, OciError>, tempfile::TempDir) {
        let cache = tempfile::tempdir().unwrap();
        let source = Source::parse(&format!("oci://{host}/cvo/x{tail}"))
            .unwrap()
            .unwrap();
        let options = FetchOptions {
            cache_dir: Some(cache.path().to_owned()),
            access: Access::default(),
            caps,
            verify: None,
        };
        (open(&source, &options).await, cache)
    }

    const CAPS: Caps = Caps {
        max_file_bytes: 1 << 20,
        max_release_bytes: 1 << 20,
    };

    fn layer() -> Vec<u8> {
        crate::oci::extract::raw_layer(&[("a.yaml", tar::EntryType::Regular, b"a: 1\n")])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_good_artifact_is_read() {
        let layer = layer();
        let (manifest, digest) = cvo_manifest(&layer);
        let mut routes = base_routes();
        routes.insert(
            "/v2/cvo/x/manifests/1".into(),
            (200, crate::oci::shape::MANIFEST_MEDIA_TYPE, manifest),
        );
        routes.insert(
            format!("/v2/cvo/x/blobs/{}", Digest::of(&layer)),
            (200, "application/octet-stream", layer),
        );
        let host = fake_registry(routes).await;
        let (opened, _cache) = open_from(&host, ":1", CAPS).await;
        let opened = opened.unwrap();
        assert_eq!(opened.digest, digest);
        assert_eq!(
            opened.image.as_deref(),
            Some(format!("{host}/cvo/x@{digest}").as_str())
        );
        assert_eq!(
            std::fs::read(opened.dir().join("a.yaml")).unwrap(),
            b"a: 1\n"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_manifest_with_another_digest_is_refused() {
        let (manifest, _) = cvo_manifest(&layer());
        let (_, other) = cvo_manifest(b"other");
        let mut routes = base_routes();
        routes.insert(
            format!("/v2/cvo/x/manifests/{other}"),
            (200, crate::oci::shape::MANIFEST_MEDIA_TYPE, manifest),
        );
        let host = fake_registry(routes).await;
        let (opened, _cache) = open_from(&host, &format!("@{other}"), CAPS).await;
        let err = opened.unwrap_err();
        assert!(matches!(err, OciError::Mismatch(_)), "{err}");
        assert!(err.to_string().contains("digest"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_blob_with_another_digest_or_too_many_bytes_is_refused() {
        let layer = layer();
        let (manifest, _) = cvo_manifest(&layer);
        let blob_path = format!("/v2/cvo/x/blobs/{}", Digest::of(&layer));
        for (name, body) in [
            ("tampered", {
                let mut b = layer.clone();
                let last = b.len() - 1;
                b[last] ^= 1;
                b
            }),
            ("huge", vec![0u8; 4 << 20]),
        ] {
            let mut routes = base_routes();
            routes.insert(
                "/v2/cvo/x/manifests/1".into(),
                (
                    200,
                    crate::oci::shape::MANIFEST_MEDIA_TYPE,
                    manifest.clone(),
                ),
            );
            routes.insert(blob_path.clone(), (200, "application/octet-stream", body));
            let host = fake_registry(routes).await;
            let (opened, cache) = open_from(&host, ":1", CAPS).await;
            let err = opened.unwrap_err();
            // Content that is not what the manifest gives (another digest, more bytes).
            assert!(matches!(err, OciError::Mismatch(_)), "{name}: {err}");
            // Nothing kept in the cache.
            assert!(
                std::fs::read_dir(cache.path().join("blobs/sha256"))
                    .unwrap()
                    .all(|e| {
                        e.unwrap().file_name().to_string_lossy() != Digest::of(&layer).hex()
                    })
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_layer_larger_than_the_cap_is_not_downloaded() {
        let mut manifest: Manifest = serde_json::from_slice(&cvo_manifest(&layer()).0).unwrap();
        manifest.layers[0].size = 10 << 20;
        let bytes = serde_json::to_vec(&manifest).unwrap();
        let mut routes = base_routes();
        routes.insert(
            "/v2/cvo/x/manifests/1".into(),
            (200, crate::oci::shape::MANIFEST_MEDIA_TYPE, bytes),
        );
        let host = fake_registry(routes).await;
        let (opened, _cache) = open_from(&host, ":1", CAPS).await;
        let err = opened.unwrap_err().to_string();
        assert!(err.contains("more than --max-release-bytes"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_that_is_not_a_manifest_is_refused() {
        let mut routes = base_routes();
        routes.insert(
            "/v2/cvo/x/manifests/1".into(),
            (200, "text/html", b"<html>login</html>".to_vec()),
        );
        let host = fake_registry(routes).await;
        let (opened, _cache) = open_from(&host, ":1", CAPS).await;
        let err = opened.unwrap_err();
        assert!(matches!(err, OciError::Refused(_)), "{err}");
        assert!(
            err.to_string().contains("not an OCI image manifest"),
            "{err}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn resolve_tells_a_release_from_an_image_from_anything_else() {
        let (release, release_digest) = cvo_manifest(&layer());
        let image = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": crate::oci::shape::MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": []
        })
        .to_string()
        .into_bytes();
        let other = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": crate::oci::shape::MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": "application/vnd.example.thing+json", "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": []
        })
        .to_string()
        .into_bytes();
        let mut routes = base_routes();
        for (tag, body) in [("release", release), ("image", image), ("other", other)] {
            routes.insert(
                format!("/v2/cvo/x/manifests/{tag}"),
                (200, crate::oci::shape::MANIFEST_MEDIA_TYPE, body),
            );
        }
        let host = fake_registry(routes).await;
        let cache = tempfile::tempdir().unwrap();
        let options = FetchOptions {
            cache_dir: Some(cache.path().to_owned()),
            access: Access::default(),
            caps: CAPS,
            verify: None,
        };
        let reference = |tag: &str| match Source::parse(&format!("oci://{host}/cvo/x:{tag}")) {
            Ok(Some(Source::Registry(r))) => r,
            other => panic!("{other:?}"),
        };
        let resolved = resolve(&reference("release"), &options).await.unwrap();
        assert_eq!(
            resolved,
            Resolved {
                digest: release_digest,
                kind: Kind::Release(Shape::Cvo)
            }
        );
        let resolved = resolve(&reference("image"), &options).await.unwrap();
        assert_eq!(resolved.kind, Kind::Image("a container image"));
        let err = resolve(&reference("other"), &options).await.unwrap_err();
        assert!(matches!(err, OciError::Refused(_)), "{err}");
        assert!(
            err.to_string()
                .contains("application/vnd.example.thing+json")
                && err.to_string().contains("nor is it a container image"),
            "{err}"
        );
        let err = resolve(&reference("missing"), &options).await.unwrap_err();
        assert!(
            err.to_string().contains("not found in the registry"),
            "{err}"
        );
    }

    /// A layout holding one release, tagged `1`, and its layer's path.
    fn layout_release(dir: &std::path::Path) -> (Source, crate::oci::Pushed, PathBuf) {
        let layer = layer();
        let (manifest, _) = cvo_manifest(&layer);
        let target = Source::parse(&format!("oci-layout:{}:1", dir.display()))
            .unwrap()
            .unwrap();
        let pushed = futures::executor::block_on(crate::oci::push_artifact(
            &target,
            &manifest,
            &[&layer, crate::oci::shape::EMPTY_CONFIG],
            &Access::default(),
        ))
        .unwrap();
        let blob = crate::oci::layout::blob_path(dir, &Digest::of(&layer));
        (target, pushed, blob)
    }

    async fn open_verified(
        cache: &std::path::Path,
        source: &Source,
        keys: &[&crate::oci::SigningKey],
        enforce: bool,
    ) -> Result<Opened, OciError> {
        let options = FetchOptions {
            cache_dir: Some(cache.to_owned()),
            access: Access::default(),
            caps: CAPS,
            verify: Some(Verify {
                keys: keys.iter().map(|k| k.public_key()).collect(),
                enforce,
            }),
        };
        open(source, &options).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_signature_of_the_resolved_digest_is_checked_before_the_layer_is_read() {
        use crate::oci::keys::tests::new_key;
        let keys = tempfile::tempdir().unwrap();
        let (_, key) = new_key(keys.path(), "release.pem");
        let (_, other) = new_key(keys.path(), "other.pem");
        let dir = tempfile::tempdir().unwrap();
        let (source, mut pushed, blob) = layout_release(dir.path());
        let cache = tempfile::tempdir().unwrap();
        // Unsigned: refused when enforced, read and reported under force.
        let err = open_verified(cache.path(), &source, &[&key], true)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, OciError::Verification { digest, why } if *digest == pushed.digest && why.contains("not signed")),
            "{err}"
        );
        assert!(
            err.to_string().contains(&pushed.digest.to_string()),
            "{err}"
        );
        let forced = open_verified(cache.path(), &source, &[&key], false)
            .await
            .unwrap();
        assert!(
            matches!(&forced.signature, SignatureCheck::Failed { why } if why.contains("not signed")),
            "{:?}",
            forced.signature
        );
        assert!(forced.dir().join("a.yaml").exists());
        // Signed: verified, naming the key file.
        crate::oci::sign_pushed(&source, &mut pushed, &key, &Access::default())
            .await
            .unwrap();
        let opened = open_verified(cache.path(), &source, &[&other, &key], true)
            .await
            .unwrap();
        assert_eq!(
            opened.signature,
            SignatureCheck::Verified {
                key: key.path().display().to_string()
            }
        );
        let err = open_verified(cache.path(), &source, &[&other], true)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("signed by another key"), "{err}");
        // A second signature (another key) joins the first; signing again with the same key
        // replaces its own.
        crate::oci::sign_pushed(&source, &mut pushed, &other, &Access::default())
            .await
            .unwrap();
        crate::oci::sign_pushed(&source, &mut pushed, &key, &Access::default())
            .await
            .unwrap();
        let tag = crate::oci::signature::tag(&pushed.digest);
        let sig = crate::oci::layout::find(dir.path(), &tag).unwrap().unwrap();
        let manifest = crate::oci::layout::read_manifest(dir.path(), &sig).unwrap();
        assert_eq!(crate::oci::signature::layers(&manifest).unwrap().len(), 2);
        for k in [&key, &other] {
            open_verified(cache.path(), &source, &[k], true)
                .await
                .unwrap();
        }
        // A tampered layer: refused as a verification failure.
        let mut bytes = std::fs::read(&blob).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&blob, bytes).unwrap();
        let err = open_verified(cache.path(), &source, &[&key], true)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, OciError::Verification { why, .. } if why.contains("content was changed")),
            "{err}"
        );
        // Under force too, a tampered layer is never read.
        let err = open_verified(cache.path(), &source, &[&key], false)
            .await
            .unwrap_err();
        assert!(matches!(err, OciError::Mismatch(_)), "{err}");
    }
}
