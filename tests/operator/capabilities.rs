//! What an update enables implicitly when a new operator starts on a cluster at an older
//! release (issue 34): the new operator image holds the new release only, so its first pass
//! judges from what the cluster says — the release ClusterVersion names by digest, else the
//! objects cvo applied (docs/capabilities.md).

use super::*;

/// An operator image with release 1.0.0 baked in (`--release-image` a tag, which is not read)
/// applies `base`; the next image, with 1.0.1, moves `base` into Storage, which the cluster
/// does not enable. The new operator's first pass finds `base` applied by cvo: the update
/// would enable Storage implicitly, a preflight risk the administrator accepts; then Storage
/// is enabled implicitly, `base` stays managed and Storage's other object is created, and the
/// condition says it was judged from the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_operator_image_enables_the_capability_an_object_it_has_moved_into() {
    let env = Env::new("operator-caps-moved").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"capabilities": {
            "baselineCapabilitySet": "None", "additionalEnabledCapabilities": []}}})),
    )
    .await
    .expect("spec.capabilities");
    let in_storage = |name: &str| {
        common::configmap(
            ns,
            name,
            "  annotations:\n    capability.openshift.io/name: Storage\n",
            &[("a", "2")],
        )
    };
    env.write_release(
        "1.0.0",
        &[("0000_10_a_00_base.yaml", configmap(ns, "base", "1"))],
    );
    let flags = |image: &'static str| {
        [
            "--resync-interval",
            "1h",
            "--lease-name",
            lease.as_str(),
            "--release-image",
            image,
        ]
    };
    let op = env.start(&flags("example.com/cvo:1.0.0"));
    history(cvs, "1.0.0", "Completed").await;
    assert_eq!(cm_value(tc, ns, "base").await.as_deref(), Some("1"));
    op.terminate().await;

    env.write_release(
        "1.0.1",
        &[
            ("0000_10_a_00_base.yaml", in_storage("base")),
            ("0000_20_b_00_storage.yaml", in_storage("storage")),
        ],
    );
    let op = env.start(&flags("example.com/cvo:1.0.1"));
    // The update's preflight names the capability it would enable: refused until accepted.
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "RisksNotAccepted").await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m
                .contains("CapabilityImplicitlyEnabled: the update enables Storage implicitly")),
        "{refused}"
    );
    assert_eq!(
        cm_value(tc, ns, "base").await.as_deref(),
        Some("1"),
        "nothing applied"
    );
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": {
            "acceptRisks": [{"name": "CapabilityImplicitlyEnabled"}]}}})),
    )
    .await
    .expect("accept the risk");
    let cv = history(cvs, "1.0.1", "Completed").await;
    assert_eq!(
        cm_value(tc, ns, "base").await.as_deref(),
        Some("2"),
        "still managed"
    );
    assert_eq!(cm_value(tc, ns, "storage").await.as_deref(), Some("2"));
    assert_eq!(
        cv.data["status"]["capabilities"]["enabledCapabilities"],
        json!(["Storage"])
    );
    let c = condition_is(
        cvs,
        "ImplicitlyEnabledCapabilities",
        "True",
        "CapabilitiesImplicitlyEnabled",
    )
    .await;
    assert_eq!(
        c["message"],
        format!(
            "The following capabilities could not be disabled: Storage; enabled by this update: Storage, judged from the cluster (the release it is at is not known): cvo applied objects that move into them (ConfigMap {ns}/base)"
        )
    );
    op.terminate().await;
    env.finish().await;
}
