//! The release the cluster is at, read to judge what an update enables implicitly (judgement
//! (a) of [`crate::sync::implicit`]), for `cvo operator` and `cvo apply` alike: ClusterVersion's
//! newest history entry names it by image, and when that image is a release artifact pinned by
//! digest (`HOST[:PORT]/REPO@sha256:…`, as a release pulled or applied from a registry is
//! recorded) it is read as [`super::pull`] reads one — from the blob cache, else the registry,
//! with the same registry access and pull Secret — checked with the same `--verify-key` keys
//! (always enforced: a release whose signature does not verify decides nothing), and loaded with
//! the same profile, feature set, exclusions and limits. Anything else (a tag, a container image)
//! is not read: the sync then judges from the cluster.

use futures::future::BoxFuture;

use super::pull::{Config, Puller, pullspec};
use crate::oci::{Kind, RegistryRef, Source};
use crate::release::LoadOptions;
use crate::release::capability::Gates;
use crate::sync::implicit::PreviousRelease;

/// Reads releases by digest for [`crate::sync::SyncOptions::previous_release`].
pub struct Previous {
    config: Config,
    /// Reads the pull Secret (`--pull-secret`), with `client`.
    puller: Puller,
    /// The operator's client, for its pull Secret; `None` (`cvo apply`): no pull Secret.
    client: Option<kube::Client>,
}

impl std::fmt::Debug for Previous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Previous")
            .field("config", &self.config)
            .field("client", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

impl Previous {
    pub fn new(config: Config, client: Option<kube::Client>) -> Self {
        Previous {
            puller: Puller::new(config.clone()),
            config,
            client,
        }
    }

    /// The release of `reference` (pinned by digest), or why it cannot be used; `None` when
    /// it is a container image, not a release.
    async fn read_pinned(
        &self,
        image: &str,
        reference: RegistryRef,
    ) -> Option<Result<Gates, String>> {
        let access = match &self.client {
            Some(client) => match self.puller.access(client).await {
                Ok(a) => a,
                Err(why) => return Some(Err(why)),
            },
            None => super::pull::PullAccess::default(),
        };
        let mut options = self.config.fetch_options(access);
        if let Some(verify) = &mut options.verify {
            verify.enforce = true;
        }
        let resolved = match crate::oci::resolve(&reference, &options).await {
            Ok(resolved) => resolved,
            Err(e) => return Some(Err(e.to_string())),
        };
        if let Kind::Image(what) = resolved.kind {
            tracing::debug!(%image, "the release the cluster is at is {what}, not a release artifact");
            return None;
        }
        let opened = match crate::oci::open(&Source::Registry(reference), &options).await {
            Ok(opened) => opened,
            Err(e) => return Some(Err(e.to_string())),
        };
        let dir = opened.dir();
        let load = LoadOptions {
            release_image: Some(image.to_owned()),
            ..self.config.load.clone()
        };
        let loaded =
            tokio::task::spawn_blocking(move || crate::release::load_selected(&dir, &load))
                .await
                .map_err(|e| format!("loading was interrupted: {e}"))
                .and_then(|r| r.map_err(|e| format!("it cannot be loaded: {e}")));
        drop(opened);
        Some(match loaded {
            Ok((release, _)) if release.has_errors() => {
                Err(format!("it has {}", release.errors_line()))
            }
            Ok((release, _)) => Ok(Gates::of(&release)),
            Err(why) => Err(why),
        })
    }
}

impl PreviousRelease for Previous {
    fn read<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Option<Result<Gates, String>>> {
        Box::pin(async move {
            let reference = pullspec(image).filter(|r| r.digest.is_some())?;
            self.read_pinned(image, reference).await
        })
    }
}
