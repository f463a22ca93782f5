//! The cluster-deletion signal (`Alive`) against an API server — the embedded one, or a real
//! one with `CVO_TEST_KUBECONFIG` (`tests/common`): the shipped admission guard, `cvo
//! cluster-deletion signal|status` as a user runs them (the real binary), and operators that
//! hold `Alive` with `cvo::lifecycle::finalizer`.
//!
//! Each test uses its own namespace for its `Alive` object; the CRD and the admission policy
//! are the shipped ones (manifests-example), shared. A signal first takes `Alive` out of cvo's
//! management (a ClusterVersion override), so that the operator does not create it again.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::lifecycle::install_alive_component;
use common::run_cvo;
use common::{TestCluster, poll_until};
use cvo::lifecycle::alive::{Alive, CONFIRM_ANNOTATION, NAME, PRESERVE_ANNOTATION};
use kube::api::{Api, ApiResource, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn alives(tc: &TestCluster, ns: &str) -> Api<Alive> {
    Api::namespaced(tc.client.clone(), ns)
}

fn alive_resource() -> ApiResource {
    ApiResource::erase::<Alive>(&())
}

/// A namespace with the shipped `Alive` object (manifests-example, in that namespace, applied
/// as `cvo apply` does); its finalizers are stripped when the test ends (on a real cluster), so
/// the namespace can go.
async fn alive_in(tc: &TestCluster, prefix: &str) -> String {
    let ns = tc.namespace(prefix).await;
    let mut doc =
        common::lifecycle::example_documents("0000_05_cluster-lifecycle_03_cluster.alive.yaml")
            .remove(0);
    doc["metadata"]["namespace"] = json!(ns);
    alives(tc, &ns)
        .patch(
            NAME,
            &PatchParams::apply("cvo").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap_or_else(|e| panic!("apply Alive {ns}/{NAME}: {e}"));
    tc.hold(&alive_resource(), Some(&ns), NAME);
    ns
}

/// Annotates `Alive` so the guard lets the namespace's deletion remove it at the end.
async fn confirm(tc: &TestCluster, ns: &str) {
    let _ = alives(tc, ns)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {CONFIRM_ANNOTATION: "true"}}})),
        )
        .await;
}

/// An operator holding `Alive` with `finalizer`; its cleanup counts its runs. Dropping the
/// returned sender stops it.
fn operator(
    tc: &TestCluster,
    ns: &str,
    finalizer: &str,
) -> (tokio::sync::oneshot::Sender<()>, Arc<AtomicUsize>) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let client = tc.client.clone();
    let ns = ns.to_owned();
    let finalizer = finalizer.to_owned();
    tokio::spawn(async move {
        cvo::lifecycle::finalizer::on_cluster_deletion(
            client,
            &ns,
            &finalizer,
            move |_alive| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), std::io::Error>(())
                }
            },
            async move {
                let _ = rx.await;
            },
        )
        .await
        .expect("finalizer helper");
    });
    (tx, runs)
}

async fn wait_finalizers(tc: &TestCluster, ns: &str, want: &[&str]) {
    let api = alives(tc, ns);
    poll_until(
        &format!("Alive {ns}/{NAME} to carry {want:?}"),
        tc.deadline(),
        || async {
            let a = api.get(NAME).await.map_err(|e| e.to_string())?;
            let have = a.metadata.finalizers.clone().unwrap_or_default();
            if want.iter().all(|w| have.iter().any(|h| h == w)) {
                Ok(())
            } else {
                Err(format!("finalizers {have:?}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster, which enforces ValidatingAdmissionPolicy (CVO_TEST_KUBECONFIG): run with --include-ignored (.ci/run does)"]
async fn admission_policy_denies_an_unannotated_delete() {
    let tc = common::cluster().await;
    common::needs::real_cluster(
        &tc,
        "the in-memory API server evaluates no CEL, so it does not enforce ValidatingAdmissionPolicy",
    );
    install_alive_component(&tc).await;
    let ns = alive_in(&tc, "alive-guard").await;
    let api = alives(&tc, &ns);
    // A new policy takes effect a moment after it is created: ask with server-side dry-run
    // deletes (admission runs, nothing is deleted) until it denies.
    let dry = DeleteParams::default().dry_run();
    let denied = poll_until(
        "the policy to deny an unannotated delete",
        tc.deadline(),
        || async {
            match api.delete(NAME, &dry).await {
                Err(kube::Error::Api(s)) if s.code == 403 => Ok(*s),
                Err(e) => Err(format!("error: {e}")),
                Ok(_) => Err("allowed".to_owned()),
            }
        },
    )
    .await;
    assert!(
        denied.message.contains(CONFIRM_ANNOTATION),
        "the denial says what to do: {denied:?}"
    );
    // A real delete is denied too, and the object stays.
    let real = api.delete(NAME, &DeleteParams::default()).await;
    common::expect_status(real, 403, "Forbidden", "unannotated delete");
    let still = api.get(NAME).await.expect("Alive still exists");
    assert!(still.metadata.deletion_timestamp.is_none());
    // A collection delete (what the namespace controller sends) is denied for it too …
    let all = api
        .delete_collection(&DeleteParams::default(), &Default::default())
        .await;
    common::expect_status(
        all,
        403,
        "Forbidden",
        "collection delete of an unannotated Alive",
    );
    assert!(
        api.get(NAME).await.is_ok(),
        "Alive survives a collection delete"
    );
    // … but a namespace without an Alive is deleted as usual: the guard must not hold the
    // namespace controller's collection deletes of kinds it has no object of.
    let plain = tc.namespace("alive-guard-plain").await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tc.client.clone());
    namespaces
        .delete(&plain, &DeleteParams::default())
        .await
        .expect("delete a namespace without Alive");
    common::wait_gone(&tc, &namespaces, &plain, "a namespace without Alive").await;
    // Annotated, the delete is allowed.
    confirm(&tc, &ns).await;
    api.delete(NAME, &DeleteParams::default())
        .await
        .expect("annotated delete is allowed");
    common::wait_gone(&tc, &api, NAME, "Alive after an annotated delete").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_completes_when_two_operators_release_their_finalizers() {
    let tc = common::cluster().await;
    // A signal writes ClusterVersion's overrides: one test at a time owns `version`.
    let _turn = common::sync_turn(&tc).await;
    install_alive_component(&tc).await;
    let ns = alive_in(&tc, "alive-signal").await;
    let (stop_a, runs_a) = operator(&tc, &ns, "a.cvo-test.example.com/cloud");
    let (stop_b, runs_b) = operator(&tc, &ns, "b.cvo-test.example.com/dns");
    wait_finalizers(
        &tc,
        &ns,
        &["a.cvo-test.example.com/cloud", "b.cvo-test.example.com/dns"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;

    // Status names both finalizers before the signal.
    let (code, out, err) = run_cvo(&kubeconfig, &["cluster-deletion", "status", "-n", &ns]).await;
    assert_eq!(code, 0, "status: {out}{err}");
    assert!(out.contains("alive (no deletion signalled)"), "{out}");
    // The helper adds its finalizer under a field manager of the finalizer's name.
    assert!(
        out.contains("a.cvo-test.example.com/cloud (set by a.cvo-test.example.com/cloud (Update"),
        "{out}"
    );
    assert!(
        out.contains("b.cvo-test.example.com/dns (set by b.cvo-test.example.com/dns (Update"),
        "{out}"
    );

    let (code, out, err) = run_cvo(
        &kubeconfig,
        &[
            "cluster-deletion",
            "signal",
            "-n",
            &ns,
            "--timeout",
            "60s",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0, "signal: {out}{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["result"]["result"], "gone", "{v}");
    assert_eq!(v["status"]["exists"], false, "{v}");
    // Cleanups must be idempotent: kube-runtime runs one again when removing its finalizer
    // conflicted with the other operator's removal.
    assert!(runs_a.load(Ordering::SeqCst) >= 1, "operator a cleaned up");
    assert!(runs_b.load(Ordering::SeqCst) >= 1, "operator b cleaned up");
    assert!(alives(&tc, &ns).get_opt(NAME).await.unwrap().is_none());

    // Signalling again finds nothing to wait for.
    let (code, out, _) = run_cvo(&kubeconfig, &["cluster-deletion", "signal", "-n", &ns]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("does not exist"), "{out}");
    drop((stop_a, stop_b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_times_out_naming_the_stuck_finalizer() {
    let tc = common::cluster().await;
    // A signal writes ClusterVersion's overrides: one test at a time owns `version`.
    let _turn = common::sync_turn(&tc).await;
    install_alive_component(&tc).await;
    let ns = alive_in(&tc, "alive-stuck").await;
    // An operator that never releases its finalizer, added with its own field manager …
    let stuck = "stuck.cvo-test.example.com/never";
    alives(&tc, &ns)
        .patch(
            NAME,
            &PatchParams {
                field_manager: Some("stuck-operator".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"metadata": {"finalizers": [stuck]}})),
        )
        .await
        .expect("add the stuck finalizer");
    // … and one that does.
    let good = "good.cvo-test.example.com/cleanup";
    let (stop, runs) = operator(&tc, &ns, good);
    wait_finalizers(&tc, &ns, &[stuck, good]).await;
    // Something to keep.
    let cms = tc.dynamic(&common::configmaps(), Some(&ns));
    cms.create(
        &PostParams::default(),
        &common::object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "backup-location", "namespace": ns,
                "annotations": {PRESERVE_ANNOTATION: "true"}},
            "data": {"bucket": "b"}})),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;

    let (code, out, err) = run_cvo(
        &kubeconfig,
        &["cluster-deletion", "signal", "-n", &ns, "--timeout", "3s"],
    )
    .await;
    assert_eq!(code, 3, "timed out: {out}{err}");
    assert!(out.contains(stuck), "names the stuck finalizer: {out}");
    assert!(out.contains("stuck-operator"), "names who set it: {out}");
    assert!(
        !out.contains(good),
        "the released finalizer is not listed: {out}"
    );
    assert!(
        out.contains(&format!("keep ConfigMap {ns}/backup-location")),
        "preserved objects are listed as kept: {out}"
    );
    assert!(
        runs.load(Ordering::SeqCst) >= 1,
        "the cooperating operator cleaned up"
    );

    // The cluster is left as it is: Alive is still there, being deleted, held by the one.
    let alive = alives(&tc, &ns).get(NAME).await.expect("Alive stays");
    assert!(alive.metadata.deletion_timestamp.is_some());
    assert_eq!(alive.metadata.finalizers, Some(vec![stuck.to_owned()]));

    let (code, out, err) = run_cvo(
        &kubeconfig,
        &["cluster-deletion", "status", "-n", &ns, "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "status: {out}{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["exists"], true);
    assert!(v["deletionStarted"].is_string(), "{v}");
    assert!(v["deletingForSeconds"].as_u64().is_some(), "{v}");
    assert_eq!(v["finalizers"][0]["finalizer"], stuck);
    assert_eq!(v["finalizers"][0]["setBy"][0]["manager"], "stuck-operator");
    assert!(
        v["preserved"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "backup-location" && p["namespace"] == ns.as_str()),
        "{v}"
    );
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_fails_plainly_when_the_kind_is_not_served() {
    // On a shared real cluster other tests install the Alive kind: a server that does not
    // serve it is the embedded one, in both passes.
    let tc = common::memory_cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let (code, out, err) = run_cvo(&kubeconfig, &["cluster-deletion", "signal"]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("Alive kind"), "{err}");
    assert!(err.contains("not served"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_takes_alive_out_of_cvo_management_first() {
    let tc = common::cluster().await;
    install_alive_component(&tc).await;
    let (_turn, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = alive_in(&tc, "alive-unmanaged").await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let signal = ["cluster-deletion", "signal", "-n", &ns, "--timeout", "60s"];
    let (code, out, err) = run_cvo(&kubeconfig, &signal).await;
    assert_eq!(code, 0, "signal: {out}{err}");
    let cv = cvs.get("version").await.expect("cv");
    let want = json!({"kind": "Alive", "group": "lifecycle.cvo.io", "namespace": ns,
        "name": NAME, "unmanaged": true});
    assert_eq!(cv.data["spec"]["overrides"], json!([want]), "{}", cv.data);

    // The release's Alive manifest (as the operator's next pass would apply it) is left alone:
    // the cluster stays signalled.
    let mut doc =
        common::lifecycle::example_documents("0000_05_cluster-lifecycle_03_cluster.alive.yaml")
            .remove(0);
    doc["metadata"]["namespace"] = json!(ns);
    std::fs::write(
        dir.path().join("0000_05_x_cluster.alive.yaml"),
        doc.to_string(),
    )
    .unwrap();
    let release = cvo::release::load(dir.path(), &Default::default()).expect("load");
    let out = cvo::sync::sync(
        &cvo::cluster::Cluster::new(tc.client.clone()),
        &release,
        &common::sync_options(std::time::Duration::from_millis(10)),
        |_| {},
    )
    .await
    .expect("sync");
    assert_eq!(
        common::report::actions(&out),
        [cvo::apply::Action::Unmanaged]
    );
    assert!(alives(&tc, &ns).get_opt(NAME).await.unwrap().is_none());

    // Signalling again adds no second override.
    let (code, out, err) = run_cvo(&kubeconfig, &signal).await;
    assert_eq!(code, 0, "{out}{err}");
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(
        cv.data["spec"]["overrides"].as_array().map(Vec::len),
        Some(1)
    );
    cvs.delete("version", &DeleteParams::default())
        .await
        .expect("delete cv");
}
