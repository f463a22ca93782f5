//! `spec.desiredUpdate.mode: Preflight` and `acceptRisks` with OpenShift's own ClusterVersion
//! CRD (issue 43, item 2: "OpenShift's DevPreviewNoUpgrade ClusterVersion CRD accepts every
//! status write"). The cluster runs manifests-example 1.4.0 with OpenShift's CRDs from the
//! corpus (`common::example::with_openshift_crds_of`) and no optional capability enabled
//! (`baselineCapabilitySet: None`); release 1.5.0, served from a real registry
//! (`common::registry`), moves the example's ConfigMap `cluster-config/cluster-settings` into
//! the capability `Storage`, so the risk `CapabilityImplicitlyEnabled` applies to that minor
//! update (docs/capabilities.md) and no other does.
//!
//! - DevPreviewNoUpgrade CRD, `mode: Preflight`: the risks, the target's conditional update
//!   and `UpdatePreflight` are written and accepted by the server (CEL `exists_one` Applies,
//!   enums, required fields, `format: uri`, lengths), the operator logs no refused write, no
//!   object of 1.4.0 changes and the cluster stays at 1.4.0;
//! - DevPreviewNoUpgrade CRD, the update itself: refused (`ReleaseAccepted=False
//!   RisksNotAccepted` naming the risk) until `acceptRisks` names it, then Completed with the
//!   history entry's `acceptedRisks` in OpenShift's words;
//! - Default CRD: the server prunes `mode` and `acceptRisks` from the spec and the preflight's
//!   status fields it does not know; what is left (a request for the update itself) is refused
//!   as above, the operator says so in the fields the CRD has, and keeps repairing drift.

use std::collections::BTreeMap;

use super::*;
use common::registry::Registry;

/// The one risk 1.5.0 brings to a cluster at 1.4.0 without optional capabilities.
const RISK: &str = "CapabilityImplicitlyEnabled";
/// The feature set whose ClusterVersion CRD has the preflight's fields.
const DEV_PREVIEW: &str = "DevPreviewNoUpgrade";
/// The image of the operator and its release 1.4.0 (`--release-image`).
const START_IMAGE: &str = "quay.io/cvo-project/release:1.4.0";
/// The example's ConfigMap that 1.5.0 moves into `Storage`.
const SETTINGS: (&str, &str) = ("cluster-config", "cluster-settings");

/// A cluster at manifests-example 1.4.0 (OpenShift's CRDs of one feature set) led by a
/// running operator, and release 1.5.0 in a registry.
struct Cluster {
    /// Before `env`: dropped first, while its log file (in `env.dir`) is still there.
    op: Operator,
    env: Env,
    /// The feature set of its ClusterVersion CRD (`--feature-set`).
    feature_set: &'static str,
    /// 1.5.0 by digest (`HOST/cvo/release@sha256:…`).
    target: String,
    registry: Registry,
}

impl Cluster {
    /// Needs the corpus and docker-registry; `prefix` names the test's namespace.
    async fn at_1_4_0(prefix: &str, feature_set: &'static str) -> Cluster {
        common::needs::corpus("openshift-api");
        let registry = Registry::start();
        let env = Env::new(prefix).await;
        common::example::prepare(&env.tc).await;
        common::example::with_openshift_crds_of(&env.release, "1.4.0", "1.3.0", feature_set);
        let target = env.dir.path().join("release-1.5.0");
        write_target(&target, feature_set);
        let digest = registry.push_release("cvo/release", "1.5.0", &target).await;
        let target = registry.pullspec("cvo/release", &format!("@{digest}"));
        // No optional capability: an object moved into one enables it implicitly.
        env.cvs
            .patch(
                "version",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"capabilities": {
                    "baselineCapabilitySet": "None", "additionalEnabledCapabilities": []}}})),
            )
            .await
            .expect("spec.capabilities");
        let op = env.start(&[
            "--resync-interval",
            "1h",
            "--lease-name",
            &env.lease,
            "--feature-set",
            feature_set,
            "--release-image",
            START_IMAGE,
        ]);
        history(&env.cvs, "1.4.0", "Completed").await;
        Cluster {
            env,
            op,
            feature_set,
            target,
            registry,
        }
    }

    /// Sets `spec.desiredUpdate` to exactly `desired` (a JSON patch: nothing of an earlier
    /// request stays) and returns what the server stored.
    async fn desire(&self, desired: Value) -> Value {
        let stored = self
            .env
            .cvs
            .patch(
                "version",
                &PatchParams::default(),
                &Patch::Json::<()>(
                    serde_json::from_value(json!([
                        {"op": "add", "path": "/spec/desiredUpdate", "value": desired}
                    ]))
                    .expect("JSON patch"),
                ),
            )
            .await
            .expect("spec.desiredUpdate");
        stored.data["spec"]["desiredUpdate"].clone()
    }

    /// Every object of release 1.4.0 but ClusterVersion (create-only; the tests write its
    /// spec), as [`written_by_cvo`] sees it, with its resourceVersion.
    async fn objects(&self) -> BTreeMap<String, (String, Value)> {
        let options = cvo::release::LoadOptions {
            filters: cvo::release::Filters {
                profile: Some(cvo::release::DEFAULT_CLUSTER_PROFILE.to_owned()),
                feature_set: self.feature_set.to_owned(),
                ..Default::default()
            },
            ..Default::default()
        };
        let release = cvo::release::load(&self.env.release, &options).expect("load 1.4.0");
        let discovery = cvo::cluster::Discovery::new(self.env.tc.client.clone());
        let mut out = BTreeMap::new();
        for m in release.manifests.iter().filter(|m| !m.is_delete()) {
            if m.id.kind == "ClusterVersion" {
                continue;
            }
            let resolved = discovery
                .resolve(&m.api_version, &m.id.kind)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", m.id));
            let api = match &m.id.namespace {
                Some(ns) => self.env.tc.dynamic(&resolved.resource, Some(ns)),
                None => self.env.tc.dynamic(&resolved.resource, None),
            };
            let object = api
                .get(&m.id.name)
                .await
                .unwrap_or_else(|e| panic!("get {}: {e}", m.id));
            let version = object.metadata.resource_version.clone().unwrap_or_default();
            out.insert(m.id.to_string(), (version, written_by_cvo(object)));
        }
        out
    }

    /// The ClusterVersion `version`.
    async fn cv(&self) -> DynamicObject {
        self.env.cvs.get("version").await.expect("ClusterVersion")
    }

    /// Fails on a line of the operator's log that says a write was refused or not made.
    fn assert_no_refused_write(&self) {
        for line in self.op.log().lines() {
            assert!(
                !line.contains(" 422 ")
                    && !line.contains("status not written")
                    && !line.contains("not recorded")
                    && !line.contains("could not record"),
                "{line}"
            );
        }
    }

    async fn finish(self) {
        let Cluster {
            env, op, registry, ..
        } = self;
        op.terminate().await;
        common::example::clean_up_and_wait(&env.tc, &env.cvs).await;
        env.finish().await;
        drop(registry);
    }
}

/// Writes release 1.5.0 into `dest`: manifests-example with OpenShift's CRDs of `feature_set`,
/// without 1.4.0's delete manifests (carried into a minor update they would be stale), its
/// ConfigMap `cluster-settings` in the capability `Storage`.
fn write_target(dest: &Path, feature_set: &str) {
    common::example::with_openshift_crds_of(dest, "1.5.0", "1.4.0", feature_set);
    for entry in std::fs::read_dir(dest).expect("release 1.5.0") {
        let path = entry.expect("entry").path();
        if path.to_string_lossy().ends_with(".delete.yaml") {
            std::fs::remove_file(&path).expect("remove a delete manifest");
        }
    }
    let settings = dest.join("0000_10_cluster-config_01_settings.configmap.yaml");
    let text = std::fs::read_to_string(&settings).expect("the settings ConfigMap");
    let annotations = "  annotations:\n";
    assert_eq!(text.matches(annotations).count(), 1, "{text}");
    std::fs::write(
        &settings,
        text.replace(
            annotations,
            "  annotations:\n    capability.openshift.io/name: Storage\n",
        ),
    )
    .expect("settings in Storage");
    let info = dest.join("0000_90_cluster-config_00_release-info.configmap.yaml");
    let text = std::fs::read_to_string(&info).expect("the release-info ConfigMap");
    assert!(text.contains("version: \"1.4.0\""), "{text}");
    std::fs::write(
        &info,
        text.replace("version: \"1.4.0\"", "version: \"1.5.0\""),
    )
    .expect("info");
}

/// What of `object` only a write of cvo's could change: all of it but `status`, the
/// resourceVersion, the managed fields of other managers (kube-controller-manager writes
/// status, and a Deployment's revision annotation) and that annotation.
fn written_by_cvo(object: DynamicObject) -> Value {
    let mut v = serde_json::to_value(object).expect("object");
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    let metadata = &mut v["metadata"];
    if let Some(m) = metadata.as_object_mut() {
        m.remove("resourceVersion");
    }
    if let Some(fields) = metadata
        .get_mut("managedFields")
        .and_then(Value::as_array_mut)
    {
        fields.retain(|f| f["manager"] == cvo::cluster::FIELD_MANAGER);
    }
    if let Some(a) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove("deployment.kubernetes.io/revision");
    }
    v
}

/// The objects whose resourceVersion moved from `before` to `after` for a write of cvo's.
fn changed_by_cvo(
    before: &BTreeMap<String, (String, Value)>,
    after: &BTreeMap<String, (String, Value)>,
) -> Vec<String> {
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    before
        .iter()
        .filter(|(id, (version, view))| {
            let (version_after, view_after) = &after[*id];
            version != version_after && view != view_after
        })
        .map(|(id, (_, view))| format!("{id}: {view} -> {}", after[id].1))
        .collect()
}

/// The entry of `list` (an array of objects with `field`) whose `field` is `value`.
fn entry<'a>(list: &'a Value, field: &str, value: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|e| e[field] == value)
}

/// The condition `type_` of a list of conditions.
fn condition_in<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    entry(conditions, "type", type_).unwrap_or_else(|| panic!("no {type_} in {conditions}"))
}

/// The entry of `status.conditionalUpdates` for the release `image`.
fn conditional_update<'a>(status: &'a Value, image: &str) -> &'a Value {
    status["conditionalUpdates"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["release"]["image"] == image))
        .unwrap_or_else(|| panic!("no conditional update for {image}: {status}"))
}

/// The names of the catalogue's checks, in order.
fn catalogue() -> Vec<&'static str> {
    cvo::preflight::CATALOGUE.iter().map(|c| c.name).collect()
}

/// Waits until ClusterVersion's `UpdatePreflight` condition is `status` (`reason`) for
/// `target`, and returns the ClusterVersion.
async fn preflight_recorded(
    cvs: &Api<DynamicObject>,
    target: &str,
    status: &str,
    reason: &str,
) -> DynamicObject {
    poll_until(
        &format!("UpdatePreflight={status} ({reason}) for {target}"),
        Duration::from_secs(90),
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            match condition(&cv, cvo::preflight::status::CONDITION) {
                Some(c)
                    if c["status"] == status
                        && c["reason"] == reason
                        && c["message"].as_str().is_some_and(|m| m.contains(target)) =>
                {
                    Ok(cv)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// `Applies` of each risk of `risks` (an array of risks with conditions), by name.
fn applies(risks: &Value) -> Vec<(String, String)> {
    risks
        .as_array()
        .expect("risks")
        .iter()
        .map(|r| {
            let conditions = &r["conditions"];
            assert_eq!(
                conditions.as_array().map(Vec::len),
                Some(1),
                "one condition, Applies: {r}"
            );
            let c = condition_in(conditions, "Applies");
            for field in ["reason", "message", "lastTransitionTime"] {
                assert!(c[field].is_string(), "{field} of {r}");
            }
            (
                r["name"].as_str().expect("name").to_owned(),
                c["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

/// What each risk of the catalogue should say: `True` for [`RISK`] alone.
fn expected_applies() -> Vec<(String, String)> {
    catalogue()
        .into_iter()
        .map(|n| {
            let status = if n == RISK { "True" } else { "False" };
            (n.to_owned(), status.to_owned())
        })
        .collect()
}

/// With OpenShift's DevPreviewNoUpgrade ClusterVersion CRD, `mode: Preflight` for 1.5.0: the
/// server keeps the request; the operator writes every check as a risk in
/// `conditionalUpdateRisks` (only `CapabilityImplicitlyEnabled` applies), the target's entry
/// in `conditionalUpdates` (`riskNames`, `risks` with their `Applies`, `Recommended=False`
/// naming the risk) and `UpdatePreflight=False RisksNotAccepted`; the server accepts every
/// write (no refusal in the operator's log); no object of 1.4.0 changed for it; the cluster
/// stays at 1.4.0 with Storage disabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS) and docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn preflight_with_the_dev_preview_crd_records_the_risks_and_changes_nothing() {
    let c = Cluster::at_1_4_0("operator-preflight", DEV_PREVIEW).await;
    let before = c.objects().await;
    let cv_before = c.cv().await;
    let request = json!({"image": c.target, "mode": "Preflight"});
    assert_eq!(c.desire(request.clone()).await, request, "stored as asked");
    let cv = preflight_recorded(
        &c.env.cvs,
        &c.target,
        "False",
        cvo::preflight::status::NOT_ACCEPTED,
    )
    .await;
    let status = &cv.data["status"];
    let text = status.to_string();

    // Every check is a risk, with OpenShift's required fields.
    let risks = &status["conditionalUpdateRisks"];
    assert_eq!(applies(risks), expected_applies(), "{text}");
    for r in risks.as_array().expect("risks") {
        assert_eq!(r["matchingRules"], json!([{"type": "Always"}]), "{r}");
        let url = r["url"].as_str().expect("url");
        assert!(url.starts_with(cvo::preflight::DOCS), "{r}");
        assert!(!r["message"].as_str().unwrap_or_default().is_empty(), "{r}");
    }
    let risk = entry(risks, "name", RISK).expect("the risk");
    let message = condition_in(&risk["conditions"], "Applies")["message"]
        .as_str()
        .expect("message");
    assert!(
        message.contains("the update enables Storage implicitly"),
        "{risk}"
    );

    // The target's conditional update.
    let target = conditional_update(status, &c.target);
    assert_eq!(target["release"]["version"], "1.5.0", "{target}");
    assert_eq!(target["riskNames"], json!(catalogue()), "{target}");
    assert_eq!(applies(&target["risks"]), expected_applies(), "{target}");
    let recommended = condition_in(&target["conditions"], "Recommended");
    assert_eq!(
        (&recommended["status"], &recommended["reason"]),
        (&json!("False"), &json!(RISK)),
        "{recommended}"
    );
    assert!(
        recommended["message"]
            .as_str()
            .is_some_and(|m| m.contains("the update enables Storage implicitly")),
        "{recommended}"
    );
    let preflight = condition(&cv, cvo::preflight::status::CONDITION).expect("UpdatePreflight");
    assert_eq!(
        preflight["message"],
        format!(
            "Preflight of 1.5.0 ({}): risks apply that are not accepted: {RISK}.",
            c.target
        )
    );
    c.assert_no_refused_write();

    // Nothing moved: the cluster is at 1.4.0, its objects as they were, Storage disabled.
    assert_eq!(
        status["history"].as_array().map(Vec::len),
        Some(1),
        "{text}"
    );
    assert_eq!(status["history"][0]["version"], "1.4.0");
    assert_eq!(status["history"][0]["state"], "Completed");
    assert_eq!(status["desired"], cv_before.data["status"]["desired"]);
    assert_eq!(status["desired"]["version"], "1.4.0");
    assert_ne!(
        status["capabilities"]["enabledCapabilities"]
            .as_array()
            .map(|a| a.contains(&json!("Storage"))),
        Some(true),
        "{text}"
    );
    condition_is(&c.env.cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    let after = c.objects().await;
    let changed = changed_by_cvo(&before, &after);
    assert!(changed.is_empty(), "changed by the preflight: {changed:#?}");
    let (ns, name) = SETTINGS;
    let settings = &after[&format!("ConfigMap {ns}/{name}")].1;
    assert!(
        settings["metadata"]["annotations"]
            .get("capability.openshift.io/name")
            .is_none(),
        "{settings}"
    );
    c.finish().await;
}

/// With OpenShift's DevPreviewNoUpgrade ClusterVersion CRD, the update to 1.5.0 itself
/// (`{image}`, no mode): refused, `ReleaseAccepted=False RisksNotAccepted` naming the risk,
/// nothing applied, and its preflight written to status as a preflight's is; with
/// `acceptRisks` naming the risk it proceeds to Completed, Storage enabled, the history
/// entry's `acceptedRisks` in OpenShift's words, `UpdatePreflight=True AllRisksAccepted` and
/// the target `Recommended=True AllExposedRisksAccepted`. Every write accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS) and docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn preflight_risk_refuses_the_update_until_accepted_with_the_dev_preview_crd() {
    let c = Cluster::at_1_4_0("operator-preflight-accept", DEV_PREVIEW).await;
    let before = c.objects().await;
    let request = json!({"image": c.target});
    assert_eq!(c.desire(request.clone()).await, request);
    let refused = condition_is(
        &c.env.cvs,
        "ReleaseAccepted",
        "False",
        cvo::preflight::RISKS_NOT_ACCEPTED,
    )
    .await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("{RISK}: the update enables Storage implicitly"))
            && message.contains(&format!("--accept-risks {RISK}")),
        "{refused}"
    );
    let cv = preflight_recorded(
        &c.env.cvs,
        &c.target,
        "False",
        cvo::preflight::status::NOT_ACCEPTED,
    )
    .await;
    let status = &cv.data["status"];
    assert_eq!(
        applies(&status["conditionalUpdateRisks"]),
        expected_applies()
    );
    assert_eq!(status["history"][0]["version"], "1.4.0", "{status}");
    assert_eq!(status["history"].as_array().map(Vec::len), Some(1));
    let changed = changed_by_cvo(&before, &c.objects().await);
    assert!(
        changed.is_empty(),
        "changed by a refused update: {changed:#?}"
    );
    c.assert_no_refused_write();

    let request = json!({"image": c.target, "acceptRisks": [{"name": RISK}]});
    assert_eq!(c.desire(request.clone()).await, request);
    let cv = history(&c.env.cvs, "1.5.0", "Completed").await;
    let status = &cv.data["status"];
    let newest = &status["history"][0];
    assert_eq!(newest["image"], c.target.as_str(), "{newest}");
    assert_eq!(status["history"][1]["version"], "1.4.0", "{status}");
    let accepted = newest["acceptedRisks"].as_str().unwrap_or_default();
    assert!(
        accepted.contains(&format!(
            "The target release {} is exposed to the risks [{RISK}] which were all explicitly accepted by the cluster administrator.",
            c.target
        )),
        "{newest}"
    );
    assert_eq!(
        status["capabilities"]["enabledCapabilities"],
        json!(["Storage"]),
        "{status}"
    );
    let preflight = condition(&cv, cvo::preflight::status::CONDITION).expect("UpdatePreflight");
    assert_eq!(
        (&preflight["status"], &preflight["reason"]),
        (&json!("True"), &json!(cvo::preflight::status::ALL_ACCEPTED)),
        "{preflight}"
    );
    let target = conditional_update(status, &c.target);
    let recommended = condition_in(&target["conditions"], "Recommended");
    assert_eq!(
        (&recommended["status"], &recommended["reason"]),
        (&json!("True"), &json!("AllExposedRisksAccepted")),
        "{recommended}"
    );
    condition_is(&c.env.cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    let (ns, name) = SETTINGS;
    let settings = c
        .env
        .tc
        .dynamic(&configmaps(), Some(ns))
        .get(name)
        .await
        .expect("settings");
    assert_eq!(
        settings.metadata.annotations.unwrap_or_default()["capability.openshift.io/name"],
        "Storage",
        "1.5.0 applied"
    );
    c.assert_no_refused_write();
    c.finish().await;
}

/// With OpenShift's Default ClusterVersion CRD (no preflight fields), the same request: the
/// server prunes `mode` and `acceptRisks` from `spec.desiredUpdate`, so what is left asks for
/// the update itself, which is refused for the risk that cannot be accepted there
/// (`ReleaseAccepted=False RisksNotAccepted`). The preflight's status is written and the server
/// keeps what its schema has: `UpdatePreflight=False`, the target's conditional update with
/// its risks and `Recommended=False`, and prunes `conditionalUpdateRisks`, `riskNames` and the
/// risks' `Applies`; no write is refused and nothing of 1.4.0 changes. The request cleared,
/// the operator is back at 1.4.0 and repairs drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS) and docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn preflight_with_the_default_crd_is_pruned_to_an_update_that_is_refused() {
    let c = Cluster::at_1_4_0("operator-preflight-default", "Default").await;
    let before = c.objects().await;
    let stored = c
        .desire(json!({"image": c.target, "mode": "Preflight", "acceptRisks": [{"name": RISK}]}))
        .await;
    assert_eq!(
        stored,
        json!({"image": c.target}),
        "the Default CRD has neither mode nor acceptRisks"
    );
    let refused = condition_is(
        &c.env.cvs,
        "ReleaseAccepted",
        "False",
        cvo::preflight::RISKS_NOT_ACCEPTED,
    )
    .await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("{RISK}: the update enables Storage implicitly"))),
        "{refused}"
    );
    let cv = preflight_recorded(
        &c.env.cvs,
        &c.target,
        "False",
        cvo::preflight::status::NOT_ACCEPTED,
    )
    .await;
    let status = &cv.data["status"];
    assert!(status.get("conditionalUpdateRisks").is_none(), "{status}");
    let target = conditional_update(status, &c.target);
    assert!(target.get("riskNames").is_none(), "{target}");
    let names: Vec<&str> = target["risks"]
        .as_array()
        .expect("risks")
        .iter()
        .map(|r| {
            assert!(r.get("conditions").is_none(), "{r}");
            r["name"].as_str().expect("name")
        })
        .collect();
    assert_eq!(names, catalogue());
    let recommended = condition_in(&target["conditions"], "Recommended");
    assert_eq!(
        (&recommended["status"], &recommended["reason"]),
        (&json!("False"), &json!(RISK)),
        "{recommended}"
    );
    assert_eq!(
        status["history"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert_eq!(status["history"][0]["version"], "1.4.0");
    let changed = changed_by_cvo(&before, &c.objects().await);
    assert!(
        changed.is_empty(),
        "changed by a refused update: {changed:#?}"
    );
    c.assert_no_refused_write();

    // The operator keeps working: the request cleared, it is back at its own release and puts
    // back what drifted meanwhile.
    let (ns, name) = SETTINGS;
    let cms = c.env.tc.dynamic(&configmaps(), Some(ns));
    cms.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"logLevel": "Debug"}})),
    )
    .await
    .expect("edit the settings");
    c.env
        .cvs
        .patch(
            "version",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/spec/desiredUpdate"}]))
                    .expect("JSON patch"),
            ),
        )
        .await
        .expect("remove spec.desiredUpdate (oc adm upgrade --clear)");
    condition_is(&c.env.cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    poll_until("the settings repaired", Duration::from_secs(30), || async {
        let cm = cms.get(name).await.map_err(|e| e.to_string())?;
        match cm.data["data"]["logLevel"].as_str() {
            Some("Normal") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let cv = c.cv().await;
    assert_eq!(cv.data["status"]["history"][0]["version"], "1.4.0");
    c.assert_no_refused_write();
    c.finish().await;
}
