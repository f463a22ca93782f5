//! Least-privilege RBAC for `cvo operator`: what the operator needs to enforce one release,
//! derived from the release and from the requests the engine sends — nothing more (the
//! OpenShift CVO runs as cluster-admin; this one need not).
//!
//! Each manifest asks for a few verbs on its kind's resource ([`resources`] finds the plural),
//! each for a reason ([`Why`]):
//!
//! - an applied manifest: `get`, `patch` and `create` of its object by name — server-side
//!   apply is a PATCH to the object's URL, and a PATCH that creates the object is authorized
//!   as `create` too (with the name, so `resourceNames` restricts it; a POST create carries
//!   no name and cannot be restricted so), and `list`, `watch` of its kind in every namespace
//!   for the operator's drift watches (`src/operator/drift.rs`: label-selected, which RBAC
//!   cannot narrow by name) and each pass's listing of a kind per namespace;
//! - a create-only manifest (not watched for drift) and a delete manifest: `list`, `watch` by
//!   name only, for waits on that one object (health, synchronous deletion: a watch with the
//!   field selector `metadata.name`, which `resourceNames` does restrict); a delete manifest
//!   `get` and `delete` instead of the apply verbs;
//! - a Role or ClusterRole the release ships: `escalate` on it, and a binding: `bind` on the
//!   role it references — the API server lets a client write RBAC only for permissions it
//!   holds itself, unless it may escalate (roles) or bind (bindings) that role by name.
//!
//! And the operator's own requests: `ClusterVersion version` (read, watched by name, status
//! written with PUT), Events when an object the release deletes reappears (only for a release
//! with delete manifests), its leader-election Lease in its namespace and its deletion-record
//! ConfigMap in its state namespace (a Role in each; one when they are the same). With
//! [`Options::operand_cleanup`], also the OLM operand-cleanup reconciler's: CSVs, the safety
//! checks' reads, and list/delete of the custom resources of the CRDs the cluster's CSVs own
//! (known only from the cluster: the CLI reads them with `--discover`).
//!
//! Verbs on the same (group, resource) are merged: one rule for the verbs every name needs,
//! one per set of by-name verbs listing the names. With [`Options::by_name`] false, the
//! manifests' verbs are granted for every name (a shorter role that need not change when a
//! release adds objects); `escalate`, `bind` and the operator's own rules stay by name.
//! [`render`] prints the result as commented YAML or as a JSON `List`.
//!
//! Shipped in a release: a release that uses cluster profiles is derived over the [`union`] of
//! what each profile it uses needs, and every printed object carries the profiles'
//! `include.release.openshift.io/<profile>` annotations ([`Options::profiles`]); [`names`]
//! keeps the printed bindings from colliding with a binding the release already has under the
//! same name (a binding's `roleRef` cannot change, so the server would refuse every update).
//!
//! Where it sits: it reads a release like `graph` and `validate`, and it takes the names of
//! what the operator touches (`ClusterVersion version`) from the modules that send those
//! requests, so in the module order it comes right below `cli`. It never talks to a cluster
//! except through [`Resources::discover`], when asked to.

pub mod names;
pub mod render;
pub mod resources;

use std::collections::{BTreeMap, BTreeSet};

use crate::release::{DeleteIntent, Manifest, Release};
pub use resources::{Resources, Source, UnknownKind};

/// A verb of an RBAC rule, in the order rules list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    Escalate,
    Bind,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Escalate => "escalate",
            Verb::Bind => "bind",
        }
    }
}

/// Why a permission is needed: the comment above its rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// Server-side apply of an object of the release.
    Apply,
    /// Drift watches and per-pass listings, across namespaces.
    Watch,
    /// The same for Secrets, in the namespaces the release ships them to.
    WatchSecrets,
    /// A wait on one object, watched by name.
    WaitByName,
    /// A delete manifest.
    Delete,
    /// A role the release ships.
    Escalate,
    /// A role a binding of the release references.
    Bind,
    /// ClusterVersion read and watched by the operator.
    ClusterVersion,
    /// ClusterVersion status written by the operator.
    ClusterVersionStatus,
    /// FeatureGate `cluster` read by the operator (the feature gates it enables).
    FeatureGate,
    /// The leader-election Lease.
    Lease,
    /// The deletion-record ConfigMap.
    DeletionRecord,
    /// Events about reappearing objects.
    Events,
    /// A create that RBAC cannot restrict to one name (a POST).
    CreateUnnamed,
    /// The operator reads its Pod and moves its Deployment (`--self-deployment`).
    SelfImage,
    /// The operator reads its pull Secret (`--pull-secret`, passed by the release's operator
    /// Deployment).
    PullSecret,
    /// The operator reads its pull configuration (`--pull-config`, passed by the release's
    /// operator Deployment).
    PullConfig,
    /// The operand-cleanup reconciler watches CSVs, writes their status and removes its
    /// finalizer (`--components operand-cleanup`).
    CleanupCsv,
    /// The reconciler's safety checks read OperatorGroups, Subscriptions and Namespaces.
    CleanupRead,
    /// The reconciler reads the CRDs a CSV owns.
    CleanupCrd,
    /// The reconciler lists and deletes the custom resources of the CRDs CSVs own.
    CleanupOperands,
    /// The reconciler's Events on CSVs.
    CleanupEvents,
}

impl Why {
    /// One sentence: the YAML comment.
    pub fn text(self) -> &'static str {
        match self {
            Why::Apply => {
                "get, patch, create: server-side apply of these objects (an apply that creates one is authorized as create too, by name)"
            }
            Why::Watch => {
                "list, watch: the operator's drift watches and each pass's listings, label-selected in all namespaces (RBAC cannot restrict them by name)"
            }
            Why::WaitByName => {
                "list, watch: waits on these objects (health, synchronous deletion) watch them by name (field selector metadata.name)"
            }
            Why::Delete => "get, delete: delete manifests (release.openshift.io/delete: \"true\")",
            Why::Escalate => {
                "escalate: the release ships these roles; writing a role takes every permission in it, or escalate on it"
            }
            Why::Bind => {
                "bind: the release's bindings reference these roles; writing a binding takes every permission of its role, or bind on it"
            }
            Why::ClusterVersion => {
                "get, list, watch: the operator reads ClusterVersion version every pass and watches it (by name) for spec changes"
            }
            Why::ClusterVersionStatus => {
                "update: the operator writes ClusterVersion version's status (PUT to the status subresource)"
            }
            Why::FeatureGate => {
                "get, list, watch: the operator reads FeatureGate cluster every pass for the feature gates it enables (release.openshift.io/feature-gate), and watches it to start a pass when they change"
            }
            Why::Lease => "get, update: leader election reads and renews the operator's Lease",
            Why::DeletionRecord => {
                "get, update, patch: the deletion record, ConfigMap cvo-deletion-record (what cvo deleted, kept across restarts)"
            }
            Why::Events => {
                "create, patch: an Event when an object the release deletes reappears, in its namespace (default for cluster-scoped ones): a POST, then PATCHes of its series under a generated name, neither restrictable by name"
            }
            Why::SelfImage => {
                "get pods, get/patch the Deployment: with --self-deployment the operator reads its own Pod (a generated name) for the image it runs and moves its Deployment to spec.desiredUpdate.image"
            }
            Why::PullSecret => {
                "get: the operator reads its pull Secret (cvo operator --pull-secret, passed by the release's operator Deployment) when it pulls a release spec.desiredUpdate.image names; this one Secret only"
            }
            Why::PullConfig => {
                "get: the operator reads its pull configuration (cvo operator --pull-config, passed by the release's operator Deployment: the keys, plain-HTTP registries and pull Secret of this cluster) when it pulls a release; this one ConfigMap only"
            }
            Why::WatchSecrets => {
                "list, watch: the operator's drift watch on the release's Secrets in this namespace (metadata only, but RBAC cannot tell) and each pass's listing here; Secrets are never read cluster-wide"
            }
            Why::CleanupCsv => {
                "get, list, watch, patch (and patch of status): the operand-cleanup reconciler watches ClusterServiceVersions, records its progress in their status and removes its finalizer"
            }
            Why::CleanupRead => {
                "list: the operand-cleanup reconciler's safety checks read OperatorGroups, Subscriptions and Namespaces"
            }
            Why::CleanupCrd => {
                "get: the operand-cleanup reconciler reads the CRDs the cluster's CSVs own (by name)"
            }
            Why::CleanupOperands => {
                "list, delete: the operand-cleanup reconciler deletes the custom resources of the CRDs the cluster's CSVs own, as found when this was printed (print it again when a CSV owning other CRDs is installed)"
            }
            Why::CleanupEvents => {
                "create, patch: the operand-cleanup reconciler's Events on CSVs (a POST, then PATCHes of its series, not restrictable by name)"
            }
            Why::CreateUnnamed => {
                "create: made once when missing, with a POST, which names no object: RBAC cannot restrict it by name"
            }
        }
    }
}

/// The default name of the printed ClusterRole, Roles and bindings: one name for all, so a
/// binding is always named after the role it binds and its `roleRef` never changes under that
/// name; not `cvo-operator`, the name under which the shipped release binds `cluster-admin`.
pub const DEFAULT_NAME: &str = "cvo-operator-least-privilege";

/// A ServiceAccount: `namespace/name`.
pub type ServiceAccount = crate::cluster::NamespacedName;

/// What to print RBAC for.
/// The name of the operator's leader-election Lease unless `cvo operator --lease-name` says
/// otherwise.
pub const DEFAULT_LEASE_NAME: &str = "cvo-operator";

#[derive(Clone, Debug)]
pub struct Options {
    /// Name of the ClusterRole, the Role and their bindings.
    pub name: String,
    /// The operator's ServiceAccount, the subject of the bindings.
    pub service_account: ServiceAccount,
    /// The operator's namespace, where its Lease lives (`cvo operator --namespace`).
    pub namespace: String,
    /// Where its deletion record lives (`cvo operator --state-namespace`).
    pub state_namespace: String,
    /// Name of the operator's leader-election Lease (`cvo operator --lease-name`).
    pub lease_name: String,
    /// Restrict the manifests' get/list/watch/create/patch/delete to the objects' names.
    pub by_name: bool,
    /// The operator's own Deployment (`cvo operator --self-deployment`), which it moves to
    /// `spec.desiredUpdate.image`.
    pub self_deployment: Option<crate::cluster::NamespacedName>,
    /// `--components operand-cleanup`: what the OLM operand-cleanup reconciler needs, with
    /// the CRDs (`plural.group` names) the cluster's ClusterServiceVersions own.
    pub operand_cleanup: Option<BTreeSet<String>>,
    /// The cluster profiles the rules were derived for: each printed object carries
    /// `include.release.openshift.io/<profile>: "true"` for each, so that a release using
    /// these profiles keeps them. Empty for a release that uses no profiles.
    pub profiles: Vec<String>,
    /// The feature set the rules were derived for (the printed header names it when it is not
    /// `Default`); the objects carry no feature-set annotation (they belong to every one).
    pub feature_set: String,
}

/// One rule of a role, with the reasons for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub api_group: String,
    /// The resource, or `resource/subresource`.
    pub resource: String,
    pub verbs: Vec<Verb>,
    /// Empty: every name.
    pub resource_names: Vec<String>,
    /// Why, in order.
    pub why: Vec<Why>,
    /// For each resource name: the objects it stands for (`namespace (file)`).
    pub objects: BTreeMap<String, BTreeSet<String>>,
    /// A warning about what the rule also allows.
    pub note: Option<String>,
}

/// The RBAC of the operator for one release.
#[derive(Clone, Debug)]
pub struct Rbac {
    pub options: Options,
    /// The release's version (`unknown` without release-metadata), for the header.
    pub version: String,
    /// The ClusterRole's rules.
    pub cluster_rules: Vec<Rule>,
    /// The rules of a Role per namespace (the operator's and its state namespace), sorted.
    pub namespace_rules: BTreeMap<String, Vec<Rule>>,
    /// True when the release ships Roles, ClusterRoles or bindings (escalate/bind granted).
    pub ships_rbac: bool,
}

/// One permission on the way to rules.
#[derive(Clone, Debug)]
struct Grant {
    group: String,
    resource: String,
    verb: Verb,
    /// `None`: every name.
    name: Option<String>,
    why: Why,
    /// The object it is for (`namespace (file)`), for the comment.
    object: Option<String>,
}

impl Grant {
    /// A grant of `verb` on `resource` of `group` (`name` `None`: every name) for no object of
    /// the release: the operator's own requests (set `object` for a release's object).
    fn own(group: &str, resource: &str, verb: Verb, name: Option<&str>, why: Why) -> Grant {
        Grant {
            group: group.to_owned(),
            resource: resource.to_owned(),
            verb,
            name: name.map(str::to_owned),
            why,
            object: None,
        }
    }
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The RBAC the operator needs for `release`, or every kind whose resource is unknown.
/// Manifests with an invalid delete annotation are left out (the engine never touches them).
pub fn derive(
    release: &Release,
    resources: &Resources,
    options: &Options,
) -> Result<Rbac, Vec<UnknownKind>> {
    let unknown = resources.unknown(release);
    if !unknown.is_empty() {
        return Err(unknown);
    }
    let mut cluster = Vec::new();
    let mut namespaced = operator_namespace_grants(options);
    for secret in pull_secrets(release) {
        namespaced
            .entry(secret.namespace.clone())
            .or_default()
            .push(Grant::own(
                "",
                "secrets",
                Verb::Get,
                Some(&secret.name),
                Why::PullSecret,
            ));
    }
    for config in pull_configs(release) {
        namespaced
            .entry(options.namespace.clone())
            .or_default()
            .push(Grant::own(
                "",
                "configmaps",
                Verb::Get,
                Some(&config),
                Why::PullConfig,
            ));
    }
    let mut ships_rbac = false;
    let mut deletes = false;
    for manifest in &release.manifests {
        let Some((plural, _)) = resources.plural(&manifest.id.group, &manifest.id.kind) else {
            continue;
        };
        ships_rbac |= manifest.id.group == RBAC_GROUP && manifest.intent == DeleteIntent::Apply;
        deletes |= manifest.is_delete();
        manifest_grants(
            manifest,
            plural,
            options.by_name,
            &mut cluster,
            &mut namespaced,
        );
    }
    operator_cluster_grants(deletes, &mut cluster);
    if let Some(owned) = &options.operand_cleanup {
        operand_cleanup_grants(owned, &mut cluster);
    }
    let namespace_rules = namespaced
        .into_iter()
        .map(|(ns, grants)| (ns, merge(grants, false)))
        .collect();
    Ok(Rbac {
        options: options.clone(),
        version: crate::status::conditions::version_text(release),
        cluster_rules: merge(cluster, true),
        namespace_rules,
        ships_rbac,
    })
}

/// One release holding the manifests of `releases` (the same release directory loaded in each
/// of its cluster profiles): each manifest once per document (file and document index), so a
/// per-profile twin of an object (another file, same identity) is kept beside its sibling and
/// both are granted. The first release's metadata and diagnostics stand for the whole;
/// `None` for no release.
pub fn union(releases: Vec<Release>) -> Option<Release> {
    let mut releases = releases.into_iter();
    let mut out = releases.next()?;
    let mut seen: BTreeSet<(std::path::PathBuf, Option<usize>)> = out
        .manifests
        .iter()
        .map(|m| (m.location.file.clone(), m.location.document))
        .collect();
    for release in releases {
        for manifest in release.manifests {
            let key = (manifest.location.file.clone(), manifest.location.document);
            if seen.insert(key) {
                out.manifests.push(manifest);
            }
        }
    }
    // What every profile left out is excluded; what one of them kept is not.
    out.excluded.retain(|e| {
        !seen.contains(&(
            e.manifest.location.file.clone(),
            e.manifest.location.document,
        ))
    });
    Some(out)
}

fn is_secret(manifest: &Manifest) -> bool {
    crate::apply::secrets::is_secret(&manifest.api_version, &manifest.id.kind)
}

/// `namespace (file)` or `(file)`: which object a resource name stands for.
fn object_text(manifest: &Manifest) -> String {
    let file = crate::diagnostic::excerpt(manifest.file_name());
    match &manifest.id.namespace {
        Some(ns) => format!("{} ({file})", crate::diagnostic::excerpt(ns)),
        None => format!("({file})"),
    }
}

fn manifest_grants(
    manifest: &Manifest,
    plural: &str,
    by_name: bool,
    out: &mut Vec<Grant>,
    namespaced: &mut BTreeMap<String, Vec<Grant>>,
) {
    let name = &manifest.id.name;
    let object = object_text(manifest);
    let grant_of = |resource: &str, verb: Verb, named: bool, why: Why| {
        let name = named.then_some(name.as_str());
        Grant {
            object: named.then(|| object.clone()),
            ..Grant::own(&manifest.id.group, resource, verb, name, why)
        }
    };
    let mut grant = |resource: &str, verb: Verb, named: bool, why: Why| {
        out.push(grant_of(resource, verb, named, why));
    };
    match manifest.intent {
        DeleteIntent::Invalid(_) => {}
        DeleteIntent::Delete => {
            grant(plural, Verb::Get, by_name, Why::Delete);
            grant(plural, Verb::Delete, by_name, Why::Delete);
            grant(plural, Verb::List, by_name, Why::WaitByName);
            grant(plural, Verb::Watch, by_name, Why::WaitByName);
        }
        DeleteIntent::Apply => {
            for verb in [Verb::Get, Verb::Patch, Verb::Create] {
                grant(plural, verb, by_name, Why::Apply);
            }
            // Create-only objects are not watched for drift: only waits on them, by name.
            let (named, why) = if manifest.create_only {
                (by_name, Why::WaitByName)
            } else {
                (false, Why::Watch)
            };
            match &manifest.id.namespace {
                // Secrets are watched in their namespaces only (`operator::drift`): reading
                // them everywhere would read every Secret's data.
                Some(ns) if is_secret(manifest) && !manifest.create_only => {
                    let role = namespaced.entry(ns.clone()).or_default();
                    role.push(grant_of(plural, Verb::List, false, Why::WatchSecrets));
                    role.push(grant_of(plural, Verb::Watch, false, Why::WatchSecrets));
                }
                _ => {
                    grant(plural, Verb::List, named, why);
                    grant(plural, Verb::Watch, named, why);
                }
            }
            if manifest.id.group == RBAC_GROUP {
                rbac_grants(manifest, &object, out);
            }
        }
    }
}

/// `escalate` on a role the release ships, `bind` on the role a binding references: always by
/// name (granted for every name they would let the operator grant anything).
fn rbac_grants(manifest: &Manifest, object: &str, out: &mut Vec<Grant>) {
    let mut grant = |resource: &str, verb: Verb, name: &str, why: Why| {
        out.push(Grant {
            object: Some(object.to_owned()),
            ..Grant::own(RBAC_GROUP, resource, verb, Some(name), why)
        });
    };
    match manifest.id.kind.as_str() {
        "ClusterRole" => grant(
            "clusterroles",
            Verb::Escalate,
            &manifest.id.name,
            Why::Escalate,
        ),
        "Role" => grant("roles", Verb::Escalate, &manifest.id.name, Why::Escalate),
        "ClusterRoleBinding" | "RoleBinding" => {
            let role = manifest.object.get("roleRef");
            let field = |key: &str| {
                role.and_then(|r| r.get(key))
                    .and_then(serde_json::Value::as_str)
            };
            let resource = match field("kind") {
                Some("ClusterRole") => "clusterroles",
                Some("Role") => "roles",
                // The server refuses such a binding; nothing to bind.
                _ => return,
            };
            if let Some(name) = field("name") {
                grant(resource, Verb::Bind, name, Why::Bind);
            }
        }
        _ => {}
    }
}

/// The operator's own requests outside its namespaces: `ClusterVersion version`, and Events
/// about reappearing objects when the release has delete manifests.
fn operator_cluster_grants(deletes: bool, out: &mut Vec<Grant>) {
    if deletes {
        for verb in [Verb::Create, Verb::Patch] {
            out.push(Grant::own(
                "events.k8s.io",
                "events",
                verb,
                None,
                Why::Events,
            ));
        }
    }
    use crate::status::clusterversion::{API_VERSION, NAME};
    let (group, _) = crate::cluster::discovery::split_api_version(API_VERSION);
    let mut grant = |resource: &str, verb: Verb, why: Why| {
        out.push(Grant::own(group, resource, verb, Some(NAME), why));
    };
    for verb in [Verb::Get, Verb::List, Verb::Watch] {
        grant("clusterversions", verb, Why::ClusterVersion);
    }
    grant(
        "clusterversions/status",
        Verb::Update,
        Why::ClusterVersionStatus,
    );
    use crate::release::feature_gate::{OBJECT_API_VERSION, OBJECT_NAME};
    let (group, _) = crate::cluster::discovery::split_api_version(OBJECT_API_VERSION);
    for verb in [Verb::Get, Verb::List, Verb::Watch] {
        out.push(Grant::own(
            group,
            "featuregates",
            verb,
            Some(OBJECT_NAME),
            Why::FeatureGate,
        ));
    }
}

/// What the OLM operand-cleanup reconciler (`crate::olm`) requests: CSVs (watched, status and
/// finalizer written), the safety checks' reads, the CRDs the CSVs own (`owned`, named
/// `plural.group`) and their custom resources (listed and deleted, every name), and Events.
fn operand_cleanup_grants(owned: &BTreeSet<String>, out: &mut Vec<Grant>) {
    let mut grant = |group: &str, resource: &str, verb: Verb, name: Option<&str>, why: Why| {
        out.push(Grant::own(group, resource, verb, name, why));
    };
    let olm = crate::olm::types::GROUP;
    for verb in [Verb::Get, Verb::List, Verb::Watch, Verb::Patch] {
        grant(olm, "clusterserviceversions", verb, None, Why::CleanupCsv);
    }
    grant(
        olm,
        "clusterserviceversions/status",
        Verb::Patch,
        None,
        Why::CleanupCsv,
    );
    grant(olm, "operatorgroups", Verb::List, None, Why::CleanupRead);
    grant(olm, "subscriptions", Verb::List, None, Why::CleanupRead);
    grant("", "namespaces", Verb::List, None, Why::CleanupRead);
    for verb in [Verb::Create, Verb::Patch] {
        grant("events.k8s.io", "events", verb, None, Why::CleanupEvents);
    }
    for crd in owned {
        grant(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            Verb::Get,
            Some(crd),
            Why::CleanupCrd,
        );
        // A CRD's name is `<plural>.<group>`.
        if let Some((plural, group)) = crd.split_once('.') {
            for verb in [Verb::List, Verb::Delete] {
                grant(group, plural, verb, None, Why::CleanupOperands);
            }
        }
    }
}

/// The operator's requests in its namespaces: the Lease in its namespace, the deletion record
/// in its state namespace.
fn operator_namespace_grants(options: &Options) -> BTreeMap<String, Vec<Grant>> {
    let mut out: BTreeMap<String, Vec<Grant>> = BTreeMap::new();
    let mut grant = |namespace: &str,
                     (group, resource): (&str, &str),
                     verb: Verb,
                     name: Option<&str>,
                     why: Why| {
        out.entry(namespace.to_owned())
            .or_default()
            .push(Grant::own(group, resource, verb, name, why));
    };
    let (ns, lease) = (&options.namespace, Some(options.lease_name.as_str()));
    let leases = ("coordination.k8s.io", "leases");
    grant(ns, leases, Verb::Get, lease, Why::Lease);
    grant(ns, leases, Verb::Update, lease, Why::Lease);
    grant(ns, leases, Verb::Create, None, Why::CreateUnnamed);
    let (ns, record) = (&options.state_namespace, Some(crate::status::record::NAME));
    let configmaps = ("", "configmaps");
    for verb in [Verb::Get, Verb::Update, Verb::Patch] {
        grant(ns, configmaps, verb, record, Why::DeletionRecord);
    }
    grant(ns, configmaps, Verb::Create, None, Why::CreateUnnamed);
    if let Some(own) = &options.self_deployment {
        grant(
            &own.namespace,
            ("", "pods"),
            Verb::Get,
            None,
            Why::SelfImage,
        );
        let deployments = ("apps", "deployments");
        for verb in [Verb::Get, Verb::Patch] {
            grant(
                &own.namespace,
                deployments,
                verb,
                Some(&own.name),
                Why::SelfImage,
            );
        }
    }
    out
}

/// The pull Secrets (`--pull-secret NAMESPACE/NAME` or `--pull-secret=NAMESPACE/NAME`) the
/// release's Deployments pass to a `cvo operator` container: the operator reads each when it
/// pulls a release.
pub fn pull_secrets(release: &Release) -> BTreeSet<crate::cluster::NamespacedName> {
    operator_flag(release, "--pull-secret")
        .filter_map(|value| value.parse().ok())
        .collect()
}

/// The pull configurations (`--pull-config NAME`, a ConfigMap in the operator's namespace) the
/// release's Deployments pass to a `cvo operator` container.
pub fn pull_configs(release: &Release) -> BTreeSet<String> {
    operator_flag(release, "--pull-config")
        .map(str::to_owned)
        .collect()
}

/// The values of `flag` that the release's Deployments pass to a `cvo operator` container.
fn operator_flag<'a>(release: &'a Release, flag: &'a str) -> impl Iterator<Item = &'a str> {
    release
        .manifests
        .iter()
        .filter(|m| !m.is_delete() && m.id.group == "apps" && m.id.kind == "Deployment")
        .flat_map(move |m| deployment_flag(&m.object, flag))
}

/// The values of `flag` that Deployment `deployment` passes to its `cvo operator` containers.
pub fn deployment_flag<'a>(deployment: &'a serde_json::Value, flag: &str) -> Vec<&'a str> {
    deployment
        .pointer("/spec/template/spec/containers")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| flag_values(&operator_words(c), flag))
        .collect()
}

/// The command and arguments of `container` when it runs `cvo operator` (the word `operator`
/// among them), else none.
fn operator_words(container: &serde_json::Value) -> Vec<&str> {
    let words: Vec<&str> = ["command", "args"]
        .iter()
        .filter_map(|k| container.get(*k).and_then(serde_json::Value::as_array))
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    if words.contains(&"operator") {
        words
    } else {
        Vec::new()
    }
}

/// The values `words` give flag `flag` (`--flag VALUE` or `--flag=VALUE`), in order.
fn flag_values<'a>(words: &[&'a str], flag: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.strip_prefix(flag) {
            Some("") => out.extend(it.next().copied()),
            Some(rest) => out.extend(rest.strip_prefix('=')),
            None => {}
        }
    }
    out
}

/// Merges grants into rules: per (group, resource), one rule for the verbs every name needs,
/// then one per set of by-name verbs (those not already granted for every name), each listing
/// its names. Sorted by group, resource, then the every-name rule first and by verbs.
fn merge(grants: Vec<Grant>, cluster_wide: bool) -> Vec<Rule> {
    let mut by_resource: BTreeMap<(String, String), Vec<Grant>> = BTreeMap::new();
    for g in grants {
        by_resource
            .entry((g.group.clone(), g.resource.clone()))
            .or_default()
            .push(g);
    }
    let mut rules = Vec::new();
    for ((group, resource), grants) in by_resource {
        let all: BTreeSet<Verb> = grants
            .iter()
            .filter(|g| g.name.is_none())
            .map(|g| g.verb)
            .collect();
        let new_rule = |verbs: Vec<Verb>| Rule {
            api_group: group.clone(),
            resource: resource.clone(),
            verbs,
            resource_names: Vec::new(),
            why: Vec::new(),
            objects: BTreeMap::new(),
            note: None,
        };
        if !all.is_empty() {
            let mut rule = new_rule(all.iter().copied().collect());
            rule.why = grants
                .iter()
                .filter(|g| g.name.is_none())
                .map(|g| g.why)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            rule.note = cluster_wide
                .then(|| note(&group, &resource, &all))
                .flatten();
            rules.push(rule);
        }
        // name → the verbs it needs beyond `all`.
        let mut named: BTreeMap<&str, BTreeSet<Verb>> = BTreeMap::new();
        for g in &grants {
            if let Some(name) = &g.name
                && !all.contains(&g.verb)
            {
                named.entry(name).or_default().insert(g.verb);
            }
        }
        let mut by_verbs: BTreeMap<Vec<Verb>, Vec<&str>> = BTreeMap::new();
        for (name, verbs) in &named {
            by_verbs
                .entry(verbs.iter().copied().collect())
                .or_default()
                .push(name);
        }
        for (verbs, names) in by_verbs {
            let mut rule = new_rule(verbs.clone());
            rule.resource_names = names.iter().map(|n| (*n).to_owned()).collect();
            let mut why = BTreeSet::new();
            for g in &grants {
                let Some(name) = g.name.as_deref() else {
                    continue;
                };
                if names.contains(&name) && verbs.contains(&g.verb) {
                    why.insert(g.why);
                    if let Some(object) = &g.object {
                        rule.objects
                            .entry(name.to_owned())
                            .or_default()
                            .insert(object.clone());
                    }
                }
            }
            rule.why = why.into_iter().collect();
            rules.push(rule);
        }
    }
    rules
}

/// What a rule for every name also allows that is worth saying.
fn note(group: &str, resource: &str, verbs: &BTreeSet<Verb>) -> Option<String> {
    let reads = verbs.contains(&Verb::List) || verbs.contains(&Verb::Watch);
    (group.is_empty() && resource == "secrets" && reads).then(|| {
        "list/watch of secrets in every namespace also reads every Secret's data (RBAC has no metadata-only verb); review before granting".to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::LoadOptions;

    fn options(by_name: bool) -> Options {
        Options {
            name: DEFAULT_NAME.into(),
            service_account: "cluster-version/cvo-operator".parse().unwrap(),
            namespace: "cluster-version".into(),
            state_namespace: "cluster-version".into(),
            lease_name: "cvo-operator".into(),
            by_name,
            self_deployment: None,
            operand_cleanup: None,
            profiles: Vec::new(),
            feature_set: "Default".into(),
        }
    }

    /// The release of `files` (name, YAML).
    fn release(files: &[(&str, &str)]) -> Release {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let release = crate::release::load(dir.path(), &LoadOptions::default()).unwrap();
        assert!(!release.has_errors(), "{:?}", release.diagnostics);
        release
    }

    fn derive_for(files: &[(&str, &str)], by_name: bool) -> Rbac {
        let release = release(files);
        derive(&release, &Resources::of(&release), &options(by_name)).unwrap()
    }

    /// Each rule as `group resource [names] verbs`.
    fn lines(rules: &[Rule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| {
                let verbs: Vec<&str> = r.verbs.iter().map(|v| v.as_str()).collect();
                format!(
                    "{}/{} [{}] {}",
                    r.api_group,
                    r.resource,
                    r.resource_names.join(","),
                    verbs.join(",")
                )
            })
            .collect()
    }

    const CONFIGMAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\n";
    const DELETED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  namespace: app\n  annotations:\n    release.openshift.io/delete: \"true\"\n";
    const CREATE_ONLY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: seed\n  namespace: app\n  annotations:\n    release.openshift.io/create-only: \"true\"\nspec:\n  selector:\n    matchLabels: {a: b}\n  template:\n    metadata:\n      labels: {a: b}\n    spec:\n      containers: [{name: c, image: i}]\n";
    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
    const GADGET: &str =
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: app\n";
    const ROLES: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: gadget-reader\nrules: []\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: view-gadgets\n  namespace: app\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects: [{kind: ServiceAccount, name: x, namespace: app}]\n";

    /// The operator's own cluster rules, last in group order (config.openshift.io sorts
    /// after "" and before rbac).
    const CV: [&str; 3] = [
        "config.openshift.io/clusterversions [version] get,list,watch",
        "config.openshift.io/clusterversions/status [version] update",
        "config.openshift.io/featuregates [cluster] get,list,watch",
    ];

    #[test]
    fn manifests_become_merged_rules() {
        for (files, want) in [
            // An applied ConfigMap: drift watches everywhere, apply by name.
            (
                vec![("0000_10_a_01_cm.yaml", CONFIGMAP)],
                vec![
                    "/configmaps [] list,watch",
                    "/configmaps [settings] get,create,patch",
                ],
            ),
            // A deleted one beside it: get/delete by name; list/watch are already granted.
            (
                vec![
                    ("0000_10_a_01_cm.yaml", CONFIGMAP),
                    ("0000_10_a_02_old.yaml", DELETED),
                ],
                vec![
                    "/configmaps [] list,watch",
                    "/configmaps [settings] get,create,patch",
                    "/configmaps [old] get,delete",
                    // Events about an object that reappears after its deletion.
                    "events.k8s.io/events [] create,patch",
                ],
            ),
            // Deleted alone: list/watch only by name, for the synchronous wait.
            (
                vec![("0000_10_a_02_old.yaml", DELETED)],
                vec![
                    "/configmaps [old] get,list,watch,delete",
                    "events.k8s.io/events [] create,patch",
                ],
            ),
            // Create-only: not watched for drift.
            (
                vec![("0000_10_a_03_seed.yaml", CREATE_ONLY)],
                vec!["apps/deployments [seed] get,list,watch,create,patch"],
            ),
            // A kind defined by a CRD of the release: its plural from the CRD.
            (
                vec![
                    ("0000_10_a_04_crd.yaml", CRD),
                    ("0000_20_a_05_gadget.yaml", GADGET),
                ],
                vec![
                    "apiextensions.k8s.io/customresourcedefinitions [] list,watch",
                    "apiextensions.k8s.io/customresourcedefinitions [gadgets.example.com] get,create,patch",
                    "example.com/gadgets [] list,watch",
                    "example.com/gadgets [g1] get,create,patch",
                ],
            ),
            // RBAC objects: escalate on the role shipped, bind on the role referenced.
            (
                vec![("0000_10_a_06_rbac.yaml", ROLES)],
                vec![
                    "rbac.authorization.k8s.io/clusterroles [] list,watch",
                    "rbac.authorization.k8s.io/clusterroles [gadget-reader] get,create,patch,escalate",
                    "rbac.authorization.k8s.io/clusterroles [view] bind",
                    "rbac.authorization.k8s.io/rolebindings [] list,watch",
                    "rbac.authorization.k8s.io/rolebindings [view-gadgets] get,create,patch",
                ],
            ),
        ] {
            let rbac = derive_for(&files, true);
            // Sorted by group, resource; the every-name rule first, then by verbs.
            let mut want: Vec<String> = want.into_iter().map(str::to_owned).collect();
            let at = want
                .iter()
                .position(|l| l.as_str() > "config.openshift.io")
                .unwrap_or(want.len());
            want.splice(at..at, CV.iter().map(|s| (*s).to_owned()));
            assert_eq!(lines(&rbac.cluster_rules), want, "{files:?}");
            assert_eq!(
                rbac.ships_rbac,
                files
                    .iter()
                    .any(|(_, text)| text.contains("rbac.authorization")),
                "{files:?}"
            );
        }
    }

    #[test]
    fn the_operator_namespace_holds_its_lease_and_deletion_record() {
        let rbac = derive_for(&[("0000_10_a_01_cm.yaml", CONFIGMAP)], true);
        assert_eq!(
            lines(&rbac.namespace_rules["cluster-version"]),
            [
                "/configmaps [] create",
                "/configmaps [cvo-deletion-record] get,update,patch",
                "coordination.k8s.io/leases [] create",
                "coordination.k8s.io/leases [cvo-operator] get,update",
            ]
        );
        let rules = &rbac.namespace_rules["cluster-version"];
        assert_eq!(rules[1].why, [Why::DeletionRecord]);
        assert_eq!(rules[0].why, [Why::CreateUnnamed]);
        assert_eq!(rbac.namespace_rules.len(), 1);
    }

    #[test]
    fn moving_its_own_deployment_needs_its_pod_and_that_deployment() {
        let release = release(&[("0000_10_a_01_cm.yaml", CONFIGMAP)]);
        let options = Options {
            self_deployment: Some("cluster-version/cvo-operator".parse().unwrap()),
            ..options(true)
        };
        let rbac = derive(&release, &Resources::of(&release), &options).unwrap();
        let rules = lines(&rbac.namespace_rules["cluster-version"]);
        assert!(rules.contains(&"/pods [] get".to_owned()), "{rules:?}");
        assert!(
            rules.contains(&"apps/deployments [cvo-operator] get,patch".to_owned()),
            "{rules:?}"
        );
    }

    #[test]
    fn a_pull_secret_passed_by_the_operators_deployment_is_granted_by_name() {
        let deployment = |args: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cvo\n  namespace: cluster-version\nspec:\n  selector:\n    matchLabels: {{a: b}}\n  template:\n    metadata:\n      labels: {{a: b}}\n    spec:\n      containers:\n      - name: operator\n        image: i\n        args: [{args}]\n"
            )
        };
        for args in [
            "operator, --release, /r, --pull-secret, cluster-version/pull",
            "operator, --pull-secret=cluster-version/pull",
        ] {
            let text = deployment(args);
            let release = release(&[("0000_10_a_01_d.yaml", text.as_str())]);
            let rbac = derive(&release, &Resources::of(&release), &options(true)).unwrap();
            let rules = lines(&rbac.namespace_rules["cluster-version"]);
            assert!(
                rules.contains(&"/secrets [pull] get".to_owned()),
                "{args}: {rules:?}"
            );
        }
        // Not an operator, or no flag: nothing.
        for args in ["web, --pull-secret, cluster-version/pull", "operator"] {
            let text = deployment(args);
            let release = release(&[("0000_10_a_01_d.yaml", text.as_str())]);
            assert!(pull_secrets(&release).is_empty(), "{args}");
        }
    }

    #[test]
    fn operand_cleanup_covers_the_reconcilers_requests_and_the_owned_crds() {
        let release = release(&[("0000_10_a_01_cm.yaml", CONFIGMAP)]);
        let cleanup = Options {
            operand_cleanup: Some(BTreeSet::from(["widgets.example.com".to_owned()])),
            ..options(true)
        };
        let rbac = derive(&release, &Resources::of(&release), &cleanup).unwrap();
        let rules = lines(&rbac.cluster_rules);
        for expected in [
            "operators.coreos.com/clusterserviceversions [] get,list,watch,patch",
            "operators.coreos.com/clusterserviceversions/status [] patch",
            "operators.coreos.com/operatorgroups [] list",
            "operators.coreos.com/subscriptions [] list",
            "/namespaces [] list",
            "apiextensions.k8s.io/customresourcedefinitions [widgets.example.com] get",
            "example.com/widgets [] list,delete",
            "events.k8s.io/events [] create,patch",
        ] {
            assert!(
                rules.contains(&expected.to_owned()),
                "{expected}: {rules:?}"
            );
        }
        let without = derive(&release, &Resources::of(&release), &options(true)).unwrap();
        assert!(
            !lines(&without.cluster_rules)
                .iter()
                .any(|l| l.starts_with("operators.coreos.com")),
            "only with the component"
        );
    }

    #[test]
    fn a_state_namespace_of_its_own_gets_a_role_of_its_own() {
        let release = release(&[("0000_10_a_01_cm.yaml", CONFIGMAP)]);
        let options = Options {
            state_namespace: "cvo-state".into(),
            ..options(true)
        };
        let rbac = derive(&release, &Resources::of(&release), &options).unwrap();
        let namespaces: Vec<&str> = rbac.namespace_rules.keys().map(String::as_str).collect();
        assert_eq!(namespaces, ["cluster-version", "cvo-state"]);
        assert_eq!(
            lines(&rbac.namespace_rules["cvo-state"]),
            [
                "/configmaps [] create",
                "/configmaps [cvo-deletion-record] get,update,patch"
            ]
        );
        assert_eq!(
            lines(&rbac.namespace_rules["cluster-version"]),
            [
                "coordination.k8s.io/leases [] create",
                "coordination.k8s.io/leases [cvo-operator] get,update"
            ]
        );
        let objects = render::objects(&rbac);
        let kinds: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str().unwrap_or("-")
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "ClusterRole -",
                "ClusterRoleBinding -",
                "Role cluster-version",
                "RoleBinding cluster-version",
                "Role cvo-state",
                "RoleBinding cvo-state"
            ]
        );
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&render::yaml(&rbac)).unwrap();
        assert_eq!(docs, objects);
    }

    #[test]
    fn without_names_the_manifests_verbs_cover_every_name_but_escalate_and_bind_do_not() {
        let rbac = derive_for(
            &[
                ("0000_10_a_01_cm.yaml", CONFIGMAP),
                ("0000_10_a_02_old.yaml", DELETED),
                ("0000_10_a_06_rbac.yaml", ROLES),
            ],
            false,
        );
        let got = lines(&rbac.cluster_rules);
        for want in [
            "/configmaps [] get,list,watch,create,patch,delete",
            "rbac.authorization.k8s.io/clusterroles [] get,list,watch,create,patch",
            "rbac.authorization.k8s.io/clusterroles [gadget-reader] escalate",
            "rbac.authorization.k8s.io/clusterroles [view] bind",
            CV[0],
        ] {
            assert!(got.iter().any(|l| l == want), "{want} not in {got:#?}");
        }
        assert!(
            !got.iter().any(|l| l.starts_with("/configmaps [settings]")),
            "{got:#?}"
        );
    }

    #[test]
    fn names_are_explained_by_their_objects() {
        let rbac = derive_for(
            &[
                ("0000_10_a_01_cm.yaml", CONFIGMAP),
                ("0000_10_a_02_old.yaml", DELETED),
            ],
            true,
        );
        let rule = rbac
            .cluster_rules
            .iter()
            .find(|r| r.resource_names == ["old"])
            .unwrap();
        assert_eq!(rule.why, [Why::Delete]);
        assert_eq!(
            rule.objects["old"].iter().collect::<Vec<_>>(),
            ["app (0000_10_a_02_old.yaml)"]
        );
        let watch = rbac
            .cluster_rules
            .iter()
            .find(|r| r.resource == "configmaps" && r.resource_names.is_empty())
            .unwrap();
        assert_eq!(watch.why, [Why::Watch]);
    }

    #[test]
    fn secrets_are_listed_and_watched_only_in_their_namespaces() {
        let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: app\n";
        let rbac = derive_for(&[("0000_10_a_01_s.yaml", secret)], true);
        let cluster = lines(&rbac.cluster_rules);
        assert!(
            !cluster.iter().any(|l| l.starts_with("/secrets [] ")),
            "no cluster-wide secret reads: {cluster:?}"
        );
        assert!(
            cluster.contains(&"/secrets [s] get,create,patch".to_owned()),
            "{cluster:?}"
        );
        let app = &rbac.namespace_rules["app"];
        assert_eq!(lines(app), ["/secrets [] list,watch"]);
        assert_eq!(app[0].why, [Why::WatchSecrets]);
        assert!(app[0].note.is_none());
        // Without names, a create-only Secret's waits still read every Secret: said so.
        let create_only = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: app\n  annotations:\n    release.openshift.io/create-only: \"true\"\n";
        let rbac = derive_for(&[("0000_10_a_01_s.yaml", create_only)], false);
        let all = rbac
            .cluster_rules
            .iter()
            .find(|r| r.resource == "secrets" && r.resource_names.is_empty())
            .unwrap();
        assert!(
            all.note.as_deref().unwrap().contains("every Secret"),
            "{all:?}"
        );
    }

    #[test]
    fn an_unknown_kind_is_an_error_naming_file_line_and_kind() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n---\napiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\n";
        let release = release(&[("0000_10_a_01_x.yaml", text)]);
        let err = derive(&release, &Resources::of(&release), &options(true)).unwrap_err();
        assert_eq!(err.len(), 1);
        let message = err[0].to_string();
        assert!(message.contains("0000_10_a_01_x.yaml:7"), "{message}");
        assert!(message.contains("kind Thing (example.com/v1)"), "{message}");
        assert!(
            message.contains("ship its CustomResourceDefinition"),
            "{message}"
        );
        assert!(message.contains("--discover"), "{message}");
    }

    #[test]
    fn service_accounts_are_namespace_slash_name() {
        assert_eq!(
            "ns/sa".parse::<ServiceAccount>(),
            Ok(ServiceAccount {
                namespace: "ns".into(),
                name: "sa".into()
            })
        );
        for bad in ["sa", "/sa", "ns/", "a/b/c"] {
            let err = bad.parse::<ServiceAccount>().unwrap_err();
            assert!(err.to_string().contains("NAMESPACE/NAME"), "{bad}: {err}");
        }
    }

    #[test]
    fn yaml_and_json_carry_the_same_objects_and_yaml_says_why() {
        let rbac = derive_for(
            &[
                ("0000_10_a_01_cm.yaml", CONFIGMAP),
                ("0000_10_a_02_old.yaml", DELETED),
                ("0000_10_a_06_rbac.yaml", ROLES),
            ],
            true,
        );
        let yaml = render::yaml(&rbac);
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!(docs, render::objects(&rbac), "{yaml}");
        let json: serde_json::Value = serde_json::from_str(&render::json(&rbac)).unwrap();
        assert_eq!(json["kind"], "List");
        assert_eq!(json["items"].as_array().unwrap(), &render::objects(&rbac));
        assert!(
            yaml.contains("# escalate: the release ships these roles"),
            "{yaml}"
        );
        assert!(
            yaml.contains("# bind: the release's bindings reference these roles"),
            "{yaml}"
        );
        assert!(
            yaml.contains("  - old  # app (0000_10_a_02_old.yaml)"),
            "{yaml}"
        );
        assert_eq!(yaml, render::yaml(&rbac), "deterministic");
    }

    #[test]
    fn profiles_annotate_every_object_and_a_feature_set_is_named() {
        let release = release(&[("0000_10_a_01_cm.yaml", CONFIGMAP)]);
        let options = Options {
            profiles: vec!["single-node-developer".into(), "hypershift".into()],
            feature_set: "TechPreviewNoUpgrade".into(),
            state_namespace: "cvo-state".into(),
            ..options(true)
        };
        let rbac = derive(&release, &Resources::of(&release), &options).unwrap();
        let objects = render::objects(&rbac);
        assert_eq!(objects.len(), 6);
        for object in &objects {
            assert_eq!(
                object["metadata"]["annotations"],
                serde_json::json!({
                    "include.release.openshift.io/hypershift": "true",
                    "include.release.openshift.io/single-node-developer": "true",
                }),
                "{object}"
            );
            assert!(
                !object.to_string().contains("feature-set"),
                "no feature-set annotation: {object}"
            );
        }
        let yaml = render::yaml(&rbac);
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!(docs, objects, "{yaml}");
        assert!(
            yaml.contains("# Derived for the feature set TechPreviewNoUpgrade"),
            "{yaml}"
        );
        // Without profiles: no annotations; in Default: no feature-set line.
        let plain = derive_for(&[("0000_10_a_01_cm.yaml", CONFIGMAP)], true);
        assert!(
            render::objects(&plain)
                .iter()
                .all(|o| o["metadata"].get("annotations").is_none())
        );
        assert!(!render::yaml(&plain).contains("feature set"));
    }

    #[test]
    fn the_union_of_profiles_holds_each_document_once_and_both_twins() {
        let dir = tempfile::tempdir().unwrap();
        let twin = |profile: &str, data: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\n  annotations:\n    include.release.openshift.io/{profile}: \"true\"\ndata: {{a: {data}}}\n"
            )
        };
        let both = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: app\n  annotations:\n    include.release.openshift.io/p1: \"true\"\n    include.release.openshift.io/p2: \"true\"\n";
        let only_p2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p2-only\n  namespace: app\n  annotations:\n    include.release.openshift.io/p2: \"true\"\n";
        for (name, text) in [
            ("0000_10_a_01_p1.yaml", twin("p1", "one")),
            ("0000_10_a_01_p2.yaml", twin("p2", "two")),
            ("0000_10_a_02_shared.yaml", both.to_owned()),
            ("0000_10_a_03_p2-only.yaml", only_p2.to_owned()),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let load = |p: &str| {
            let options = LoadOptions {
                filters: crate::release::Filters {
                    profile: Some(p.to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            };
            crate::release::load(dir.path(), &options).unwrap()
        };
        let merged = union(vec![load("p1"), load("p2")]).unwrap();
        let files: Vec<&str> = merged.manifests.iter().map(|m| m.file_name()).collect();
        assert_eq!(
            files,
            [
                "0000_10_a_01_p1.yaml",
                "0000_10_a_02_shared.yaml",
                "0000_10_a_01_p2.yaml",
                "0000_10_a_03_p2-only.yaml"
            ]
        );
        assert!(merged.excluded.is_empty(), "{:?}", merged.excluded);
        let rbac = derive(&merged, &Resources::of(&merged), &options(true)).unwrap();
        let rule = rbac
            .cluster_rules
            .iter()
            .find(|r| r.resource_names.contains(&"settings".to_owned()))
            .unwrap();
        assert_eq!(rule.resource_names, ["p2-only", "settings", "shared"]);
        assert_eq!(rule.objects["settings"].len(), 2, "both twins named");
        assert!(union(Vec::new()).is_none());
    }

    #[test]
    fn scalars_that_are_not_plain_names_are_quoted() {
        for (text, want) in [
            ("configmaps", "configmaps"),
            ("clusterversions/status", "clusterversions/status"),
            ("", "\"\""),
            ("yes", "\"yes\""),
            ("0123", "\"0123\""),
            ("a: b", "\"a: b\""),
            ("x#y", "\"x#y\""),
        ] {
            assert_eq!(render::scalar(text), want, "{text}");
        }
    }
}
