//! The one way the semantics tests get a cluster: the crate's own [`memory_apiserver::testing`],
//! run against a real cluster when `MEMORY_APISERVER_TEST_KUBECONFIG` or `CVO_TEST_KUBECONFIG`
//! (what the workspace's CI sets) names a kubeconfig file.

pub use memory_apiserver::testing::*;

use memory_apiserver::Config as MemoryConfig;

/// Environment variables naming a kubeconfig, the first non-empty one wins.
const KUBECONFIG_ENVS: [&str; 2] = [KUBECONFIG_ENV, "CVO_TEST_KUBECONFIG"];

/// A cluster with the default in-memory configuration (or the real one, see the module doc).
pub async fn cluster() -> TestCluster {
    cluster_with(MemoryConfig::default()).await
}

/// Like [`cluster`], with a custom in-memory configuration; `config` is ignored on a real
/// cluster.
pub async fn cluster_with(config: MemoryConfig) -> TestCluster {
    cluster_from_env(&KUBECONFIG_ENVS, config).await
}
