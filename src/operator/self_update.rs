//! Moving the operator to another image: when `ClusterVersion spec.desiredUpdate` asks for an
//! image other than the one this process runs — its `image`, or the image a `version` alone
//! resolves to ([`desired_image`]) — the leader sets its own Deployment's
//! operator container to that image; the Deployment's new pod then runs the release baked
//! into it. The release is the image's: an operator cannot apply a release it does not hold,
//! so this is how an update reaches the operator (OpenShift's CVO does the same by applying
//! the new payload's own Deployment manifest).
//!
//! - The operator's Deployment is `--self-deployment NAMESPACE/NAME`. Without it the operator
//!   never moves itself, and says so when asked to.
//! - The image it runs: its Pod's operator container image when `POD_NAME` and
//!   `POD_NAMESPACE` are set (the Deployment passes them from the downward API), else
//!   `--release-image`. Without either it cannot tell whether it must move: it does not
//!   (fail closed), and says so.
//! - The operator container: the one named `operator`, else the only one.
//!
//! Once its Deployment names the new image, the old leader has **handed over**: it applies and
//! repairs nothing more (its release would put its own Deployment back to the old image) and
//! reports the move in `ReleaseAccepted` and `Progressing`; the new pod takes the Lease when the
//! old one stops. The Deployment is written only when its image differs from the one asked for.
//! A move that cannot be made is reported (`ReleaseAccepted=False`, reason
//! [`MOVE_FAILED`]) and the current release stays enforced; the next full pass tries again.
//!
//! An operator that runs the image asked for, but whose release sets its own Deployment to
//! another pullspec (a tag where a digest was asked for, say), would be moved there by its own
//! pass, then back by the next pod, for ever: it applies nothing and says so
//! (`ReleaseAccepted=False`, reason [`IMAGE_CONFLICT`]).

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::cluster::{Cluster, NamespacedName};
use crate::release::Release;
use crate::status::conditions::RELEASE_ACCEPTED;
use crate::status::{Condition, ConditionStatus};

/// `ReleaseAccepted` / `Progressing` reason while the operator moves to another image.
pub const MOVING: &str = "OperatorImageUpdating";
/// `ReleaseAccepted` reason when it cannot move.
pub const MOVE_FAILED: &str = "OperatorImageUpdateFailed";
/// `ReleaseAccepted` reason when the release would move the operator away from the image
/// asked for.
pub const IMAGE_CONFLICT: &str = "OperatorImageConflict";
/// The name of the operator's container, when its Deployment has more than one.
pub const CONTAINER: &str = "operator";
/// Field manager of the write that moves the Deployment.
const FIELD_MANAGER: &str = "cvo-operator-self-update";

/// What the operator knows about itself.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Its Deployment (`--self-deployment`); `None`: it never moves itself.
    pub deployment: Option<NamespacedName>,
    /// Its Pod (`POD_NAMESPACE`/`POD_NAME`), whose operator container names the image it runs.
    pub pod: Option<NamespacedName>,
    /// `--release-image`: the image it runs, when it has no Pod to read it from.
    pub release_image: Option<String>,
}

impl Config {
    /// The Pod from `POD_NAMESPACE` and `POD_NAME` (both set and not empty), else `None`.
    pub fn pod_from_env() -> Option<NamespacedName> {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Some(NamespacedName {
            namespace: get("POD_NAMESPACE")?,
            name: get("POD_NAME")?,
        })
    }
}

/// What a full pass does about `spec.desiredUpdate.image`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No image asked for, or the one this process runs: apply the release.
    Stay,
    /// The Deployment names the image asked for (now, or already): apply nothing more.
    HandedOver {
        to: String,
        from: String,
        /// The Deployment was written by this pass.
        written: bool,
    },
    /// Asked to move but it could not: apply the release, and report why.
    CannotMove { to: String, why: String },
    /// Runs the image asked for, but the release sets the Deployment to `release_image`:
    /// apply nothing (it would move the operator away, and the next pod back).
    Conflict {
        image: String,
        release_image: String,
    },
}

impl Decision {
    /// The conditions reporting it (none for [`Decision::Stay`]).
    pub fn conditions(&self, deployment: Option<&NamespacedName>, version: &str) -> Vec<Condition> {
        let deployment = deployment.map_or_else(|| "?".to_owned(), ToString::to_string);
        match self {
            Decision::Stay => Vec::new(),
            Decision::HandedOver { to, from, .. } => vec![
                Condition::new(
                    RELEASE_ACCEPTED,
                    ConditionStatus::Unknown,
                    MOVING,
                    format!(
                        "The release in image {to} is read by the operator's new pod; this one (image {from}, release {version}) applies nothing more"
                    ),
                ),
                Condition::new(
                    "Progressing",
                    ConditionStatus::True,
                    MOVING,
                    format!(
                        "Moving the operator to image {to}: Deployment {deployment} now runs it (was {from})"
                    ),
                ),
            ],
            Decision::Conflict {
                image,
                release_image,
            } => vec![Condition::new(
                RELEASE_ACCEPTED,
                ConditionStatus::False,
                IMAGE_CONFLICT,
                format!(
                    "spec.desiredUpdate.image is {image}, the image the operator runs, but release {version} sets Deployment {deployment} to {release_image}: applying it would move the operator away and back for ever; nothing is applied (name {release_image} in spec.desiredUpdate.image)"
                ),
            )],
            Decision::CannotMove { to, why } => vec![Condition::new(
                RELEASE_ACCEPTED,
                ConditionStatus::False,
                MOVE_FAILED,
                format!(
                    "Cannot move the operator to image {to}: {why}; release {version} stays applied"
                ),
            )],
        }
    }
}

/// The image `spec.desiredUpdate` asks for: its `image`, or the image its `version` alone
/// resolves to (`status.availableUpdates`, else `status.history`); `None` when it asks for no
/// image or is invalid (an invalid request is not acted on).
pub fn desired_image(cv: &DynamicObject) -> Option<String> {
    crate::status::spec::Spec::of(cv)
        .desired_update
        .map(|d| d.image)
        .filter(|s| !s.is_empty())
}

/// Decides, and moves the Deployment when it must. Reads the operator's own image once (a
/// Pod's image does not change).
pub struct SelfUpdate {
    config: Config,
    own_image: OnceCell<String>,
}

impl SelfUpdate {
    pub fn new(config: Config) -> Self {
        SelfUpdate {
            config,
            own_image: OnceCell::new(),
        }
    }

    pub fn deployment(&self) -> Option<&NamespacedName> {
        self.config.deployment.as_ref()
    }

    /// What to do about `desired` (`spec.desiredUpdate.image`), moving the Deployment to it
    /// when this process runs another image. `release`: the release this process applies
    /// (`None` when it cannot be used), checked against the image asked for.
    pub async fn decide(
        &self,
        cluster: &Cluster,
        desired: Option<&str>,
        release: Option<&Release>,
    ) -> Decision {
        let Some(to) = desired else {
            return Decision::Stay;
        };
        let cannot = |why: String| Decision::CannotMove {
            to: to.to_owned(),
            why,
        };
        let from = match self.own_image(cluster).await {
            Ok(Some(image)) => image,
            Ok(None) => {
                return cannot(
                    "the operator cannot tell which image it runs (neither POD_NAME/POD_NAMESPACE nor --release-image is set)".into(),
                );
            }
            Err(e) => return cannot(e.to_string()),
        };
        if from == to {
            let in_release = self
                .config
                .deployment
                .as_ref()
                .zip(release)
                .and_then(|(d, r)| image_in_release(r, d));
            return match in_release {
                Some(other) if other != to => Decision::Conflict {
                    image: to.to_owned(),
                    release_image: other,
                },
                _ => Decision::Stay,
            };
        }
        let Some(deployment) = &self.config.deployment else {
            return cannot(
                "the operator does not know its Deployment (no --self-deployment)".into(),
            );
        };
        match move_deployment(cluster, deployment, to).await {
            Ok(written) => Decision::HandedOver {
                to: to.to_owned(),
                from,
                written,
            },
            Err(e) => cannot(e.to_string()),
        }
    }

    /// Whether this process runs `image` (`false` when it cannot tell).
    pub async fn runs(&self, cluster: &Cluster, image: &str) -> bool {
        matches!(self.own_image(cluster).await, Ok(Some(own)) if own == image)
    }

    /// The repository (`HOST[:PORT]/REPO`) of the container image this process's Pod runs;
    /// `None` without a Pod (`--release-image` names a release, not a container image), or
    /// when it cannot be read.
    pub async fn pod_repository(&self, cluster: &Cluster) -> Option<String> {
        self.config.pod.as_ref()?;
        let own = self.own_image(cluster).await.ok().flatten()?;
        super::pull::pullspec(&own).map(|r| r.name())
    }

    /// The image this process runs: its Pod's operator container, else `--release-image`.
    async fn own_image(&self, cluster: &Cluster) -> Result<Option<String>, SelfUpdateError> {
        let Some(pod) = &self.config.pod else {
            return Ok(self.config.release_image.clone());
        };
        self.own_image
            .get_or_try_init(|| async {
                let api: Api<DynamicObject> = Api::namespaced_with(
                    cluster.client().clone(),
                    &pod.namespace,
                    &ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
                );
                let found = api
                    .get_opt(&pod.name)
                    .await
                    .map_err(|source| SelfUpdateError::ReadPod {
                        pod: pod.clone(),
                        source,
                    })?
                    .ok_or_else(|| SelfUpdateError::NoPod(pod.clone()))?;
                let containers = found
                    .data
                    .pointer("/spec/containers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let i = operator_container(&containers).map_err(|source| {
                    SelfUpdateError::PodContainer {
                        pod: pod.clone(),
                        source,
                    }
                })?;
                containers[i]
                    .get("image")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| SelfUpdateError::NoImage(pod.clone()))
            })
            .await
            .map(|image| Some(image.clone()))
    }
}

/// The image `release` sets the operator container of `deployment` to, if it holds that
/// Deployment (not as a delete manifest).
pub fn image_in_release(release: &Release, deployment: &NamespacedName) -> Option<String> {
    let manifest = release.manifests.iter().find(|m| {
        !m.is_delete()
            && m.id.group == "apps"
            && m.id.kind == "Deployment"
            && m.id.namespace.as_deref() == Some(deployment.namespace.as_str())
            && m.id.name == deployment.name
    })?;
    let containers = manifest
        .object
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)?;
    let i = operator_container(containers).ok()?;
    containers[i]
        .get("image")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Index of the operator's container in `containers`: the one named [`CONTAINER`], else the
/// only one.
pub fn operator_container(containers: &[Value]) -> Result<usize, AmbiguousContainer> {
    if let Some(i) = containers
        .iter()
        .position(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))
    {
        return Ok(i);
    }
    match containers.len() {
        1 => Ok(0),
        n => Err(AmbiguousContainer(n)),
    }
}

/// Sets the operator container of `deployment` to `image`; `Ok(false)` when it already was.
/// The write is a merge patch of the whole container list as read, carrying the
/// resourceVersion read: a Deployment changed meanwhile is refused (409), not overwritten.
async fn move_deployment(
    cluster: &Cluster,
    deployment: &NamespacedName,
    image: &str,
) -> Result<bool, SelfUpdateError> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client().clone(),
        &deployment.namespace,
        &ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let found = api
        .get_opt(&deployment.name)
        .await
        .map_err(|source| SelfUpdateError::ReadDeployment {
            deployment: deployment.clone(),
            source,
        })?
        .ok_or_else(|| SelfUpdateError::NoDeployment(deployment.clone()))?;
    let mut containers = found
        .data
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let i =
        operator_container(&containers).map_err(|source| SelfUpdateError::DeploymentContainer {
            deployment: deployment.clone(),
            source,
        })?;
    if containers[i].get("image").and_then(Value::as_str) == Some(image) {
        return Ok(false);
    }
    containers[i]["image"] = json!(image);
    let patch = json!({
        "metadata": {"resourceVersion": found.metadata.resource_version},
        "spec": {"template": {"spec": {"containers": containers}}},
    });
    api.patch(
        &deployment.name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        },
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| SelfUpdateError::Update {
        deployment: deployment.clone(),
        source,
    })?;
    Ok(true)
}

/// Why the operator cannot move itself to the image `spec.desiredUpdate.image` names.
#[derive(Debug, thiserror::Error)]
pub enum SelfUpdateError {
    #[error("reading the operator's Pod {pod}: {source}")]
    ReadPod {
        pod: NamespacedName,
        #[source]
        source: kube::Error,
    },
    #[error("the operator's Pod {0} does not exist")]
    NoPod(NamespacedName),
    #[error("Pod {pod} {source}")]
    PodContainer {
        pod: NamespacedName,
        #[source]
        source: AmbiguousContainer,
    },
    #[error("Pod {0}: its operator container has no image")]
    NoImage(NamespacedName),
    #[error("reading Deployment {deployment}: {source}")]
    ReadDeployment {
        deployment: NamespacedName,
        #[source]
        source: kube::Error,
    },
    #[error("Deployment {0} does not exist")]
    NoDeployment(NamespacedName),
    #[error("Deployment {deployment} {source}")]
    DeploymentContainer {
        deployment: NamespacedName,
        #[source]
        source: AmbiguousContainer,
    },
    #[error("updating Deployment {deployment}: {source}")]
    Update {
        deployment: NamespacedName,
        #[source]
        source: kube::Error,
    },
}

/// Several containers, none named [`CONTAINER`]: which one is the operator cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("has {0} containers and none named {CONTAINER:?}: cannot tell which one is the operator")]
pub struct AmbiguousContainer(pub usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_container_is_named_or_alone() {
        let c = |n: &str| json!({"name": n, "image": "x"});
        assert_eq!(operator_container(&[c("sidecar"), c("operator")]), Ok(1));
        assert_eq!(operator_container(&[c("main")]), Ok(0));
        assert!(operator_container(&[c("a"), c("b")]).is_err());
        assert!(operator_container(&[]).is_err());
    }

    #[tokio::test]
    async fn the_same_image_or_none_stays_and_an_unknown_own_image_cannot_move() {
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        let cluster = Cluster::new(server.client());
        let known = SelfUpdate::new(Config {
            deployment: Some("ns/op".parse().unwrap()),
            pod: None,
            release_image: Some("img:1".into()),
        });
        assert_eq!(known.decide(&cluster, None, None).await, Decision::Stay);
        assert_eq!(
            known.decide(&cluster, Some("img:1"), None).await,
            Decision::Stay
        );
        // Another image, but the Deployment does not exist: reported, not fatal.
        match known.decide(&cluster, Some("img:2"), None).await {
            Decision::CannotMove { why, .. } => assert!(why.contains("does not exist"), "{why}"),
            other => panic!("{other:?}"),
        }
        let blind = SelfUpdate::new(Config::default());
        match blind.decide(&cluster, Some("img:2"), None).await {
            Decision::CannotMove { why, .. } => {
                assert!(why.contains("cannot tell which image"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_release_that_would_move_the_operator_away_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let deployment = |image: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: ns\nspec:\n  template:\n    spec:\n      containers:\n      - name: sidecar\n        image: side:1\n      - name: operator\n        image: {image}\n"
            )
        };
        let load = |image: &str| {
            std::fs::write(dir.path().join("0000_00_a_00_op.yaml"), deployment(image)).unwrap();
            crate::release::load(dir.path(), &Default::default()).unwrap()
        };
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        let cluster = Cluster::new(server.client());
        let mover = SelfUpdate::new(Config {
            deployment: Some("ns/op".parse().unwrap()),
            pod: None,
            release_image: Some("img@sha256:1".into()),
        });
        let same = load("img@sha256:1");
        assert_eq!(
            image_in_release(&same, &"ns/op".parse().unwrap()).as_deref(),
            Some("img@sha256:1")
        );
        assert_eq!(
            mover
                .decide(&cluster, Some("img@sha256:1"), Some(&same))
                .await,
            Decision::Stay
        );
        let tagged = load("img:1.5.0");
        assert_eq!(
            mover
                .decide(&cluster, Some("img@sha256:1"), Some(&tagged))
                .await,
            Decision::Conflict {
                image: "img@sha256:1".into(),
                release_image: "img:1.5.0".into()
            }
        );
        // Without an image asked for, the release's own Deployment is simply applied.
        assert_eq!(
            mover.decide(&cluster, None, Some(&tagged)).await,
            Decision::Stay
        );
    }
}
