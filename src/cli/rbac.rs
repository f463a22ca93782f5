//! `cvo rbac`: print the least-privilege RBAC `cvo operator` needs for a release.
//!
//! Without `--profile`, a release that uses cluster profiles is read in each of them and the
//! rules cover their union; the printed objects carry each profile's include annotation so
//! that the output can be shipped in the release. A `--name` under which the release already
//! binds another role is refused: the server never changes a binding's roleRef.

use clap::{Args, ValueEnum};

use super::{CliError, Console, GlobalArgs, ReleaseArgs};
use crate::exit::Exit;
use crate::rbac::{Options, Resources, ServiceAccount, names, render};

#[derive(Debug, Args)]
pub struct RbacArgs {
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// The operator's ServiceAccount, the subject of the bindings.
    #[arg(
        long,
        value_name = "NS/NAME",
        default_value = "cluster-version/cvo-operator"
    )]
    pub service_account: ServiceAccount,
    /// The operator's namespace (`cvo operator --namespace`), where its Lease lives
    /// [default: the ServiceAccount's namespace].
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,
    /// Where its deletion record lives (`cvo operator --state-namespace`) [default: the
    /// operator's namespace].
    #[arg(long, value_name = "NS")]
    pub state_namespace: Option<String>,
    /// Name of the ClusterRole, the Roles and their bindings (each binding is named after the
    /// role it binds). Refused when the release already holds a binding of that name that
    /// binds another role: a binding's roleRef cannot change.
    #[arg(long, value_name = "NAME", default_value = crate::rbac::DEFAULT_NAME)]
    pub name: String,
    /// Name of the operator's leader-election Lease (`cvo operator --lease-name`).
    #[arg(long, value_name = "NAME", default_value = crate::rbac::DEFAULT_LEASE_NAME)]
    pub lease_name: String,
    /// The operator's own Deployment (`cvo operator --self-deployment`): also grant reading
    /// its Pod and moving that Deployment to `spec.desiredUpdate.image`.
    #[arg(long, value_name = "NS/NAME")]
    pub self_deployment: Option<crate::cluster::NamespacedName>,
    /// Grant the release's kinds for every name instead of the release's objects by name (a
    /// shorter role that need not change with each release; escalate, bind and the
    /// operator's own objects stay restricted by name).
    #[arg(long)]
    pub no_by_name: bool,
    /// Ask the cluster (kubeconfig rules): its discovery for kinds that are neither built
    /// into Kubernetes nor defined by a CustomResourceDefinition in the release, and with
    /// --components operand-cleanup its ClusterServiceVersions for the CRDs they own.
    #[arg(long)]
    pub discover: bool,
    /// What the operator runs (`cvo operator --components`): the release, and with
    /// operand-cleanup also the OLM operand-cleanup reconciler, whose operand kinds come from
    /// the cluster's ClusterServiceVersions (needs --discover).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "release")]
    pub components: Vec<super::operator::Component>,
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// `-o` of `cvo rbac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Multi-document YAML, each rule with a comment saying why.
    Yaml,
    /// A `List` of the same objects, without comments.
    Json,
}

/// Exit codes: 0 printed; 1 a kind whose resource is unknown, or discovery failed (nothing
/// printed: a partial role would fail the operator later); 2 the release cannot be read or
/// has errors, a bad flag, or `--name` is that of a binding of the release to another role.
pub fn run(global: &GlobalArgs, args: &RbacArgs) -> Result<Exit, CliError> {
    let console = global.console;
    let (release, profiles) = load(args, console)?;
    let operand_cleanup = args
        .components
        .contains(&super::operator::Component::OperandCleanup);
    if operand_cleanup && !args.discover {
        return Err(CliError::usage(
            "--components operand-cleanup needs --discover: the reconciler deletes the custom resources of the CRDs the cluster's ClusterServiceVersions own, which only the cluster can tell",
        ));
    }
    let owned_crds = if operand_cleanup {
        let owned = super::runtime()?.block_on(owned_crds(global))?;
        if owned.is_empty() {
            say!(
                console,
                note,
                "no ClusterServiceVersion in the cluster owns a CRD: the operand-cleanup rules grant no custom resources yet"
            );
        }
        Some(owned)
    } else {
        None
    };
    let mut resources = Resources::of(&release);
    if args.discover && !resources.unknown(&release).is_empty() {
        discover(global, &mut resources, &release)?;
    }
    let options = args.options(owned_crds, profiles);
    let rbac = crate::rbac::derive(&release, &resources, &options).map_err(|unknown| {
        CliError::Several(
            unknown.iter().map(ToString::to_string).collect(),
            Exit::Failed,
        )
    })?;
    let conflicts = names::conflicts(&rbac, release.all_manifests());
    if !conflicts.is_empty() {
        return Err(CliError::Several(
            conflicts.iter().map(ToString::to_string).collect(),
            Exit::Usage,
        ));
    }
    if !names::ships_own(&rbac, release.all_manifests()) {
        let role = crate::diagnostic::excerpt(&rbac.options.name);
        say!(
            console,
            note { %role },
            "the release does not ship ClusterRole {role}: to ship this output in it, put it there and run `cvo rbac` again, so that the rules also let the operator update these objects (without that, the next release's rules are refused: 403)"
        );
    }
    for note in rbac.cluster_rules.iter().filter_map(|r| r.note.as_deref()) {
        say!(console, warning, "{note}");
    }
    // A Role goes into a namespace that exists: the operator's is there before it runs, but a
    // release may create the namespaces of its Secrets itself.
    let namespaces: Vec<&str> = rbac.namespace_rules.keys().map(String::as_str).collect();
    let namespaces = namespaces.join(", ");
    say!(
        console,
        note { %namespaces },
        "namespaces that must exist before this RBAC is applied: {namespaces}"
    );
    let text = match args.output {
        Format::Yaml => render::yaml(&rbac),
        Format::Json => render::json(&rbac),
    };
    super::print_stdout(&text)?;
    Ok(Exit::Success)
}

/// The release as the flags say: with `--profile`, or when it uses no profiles, read once;
/// without, read in each profile it uses and merged (the operator of any of them gets what it
/// needs). Its diagnostics are printed; a release with errors is a usage error. Returns the
/// profiles it was read in (none for a release without profiles).
fn load(
    args: &RbacArgs,
    console: Console,
) -> Result<(crate::release::Release, Vec<String>), CliError> {
    // Every manifest some cluster's feature gates admit may be applied: none left out here.
    args.release.defer_feature_gates();
    let loaded = args.release.load_each_profile(console)?;
    let profiles: Vec<String> = loaded.iter().filter_map(|(p, _)| p.clone()).collect();
    console.diagnostics(loaded.iter().flat_map(|(_, r)| &r.diagnostics));
    if loaded.iter().any(|(_, r)| r.has_errors()) {
        return Err(CliError::usage(
            "the release has errors; fix them first (see `cvo validate`)",
        ));
    }
    if profiles.len() > 1 {
        let profiles = profiles.join(", ");
        say!(
            console,
            note { %profiles },
            "the release uses cluster profiles ({profiles}): the rules cover what each of them needs, and every object is annotated for each (choose one with --profile)"
        );
    }
    let release = crate::rbac::union(loaded.into_iter().map(|(_, r)| r).collect())
        .ok_or_else(|| CliError::usage("the release could not be read"))?;
    Ok((release, profiles))
}

impl RbacArgs {
    /// The derivation's options from these flags; `owned_crds` from the cluster's CSVs,
    /// `profiles` those the release was read in.
    fn options(
        &self,
        owned_crds: Option<std::collections::BTreeSet<String>>,
        profiles: Vec<String>,
    ) -> Options {
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| self.service_account.namespace.clone());
        Options {
            name: self.name.clone(),
            state_namespace: self
                .state_namespace
                .clone()
                .unwrap_or_else(|| namespace.clone()),
            namespace,
            service_account: self.service_account.clone(),
            lease_name: self.lease_name.clone(),
            by_name: !self.no_by_name,
            self_deployment: self.self_deployment.clone(),
            operand_cleanup: owned_crds,
            profiles,
            feature_set: self.release.feature_set().to_owned(),
        }
    }
}

/// Asks the cluster's discovery for the kinds of the release no CRD in it defines and that are
/// not built in; a kind still unknown after it is an error (exit code 1), each on its line.
fn discover(
    global: &GlobalArgs,
    resources: &mut Resources,
    release: &crate::release::Release,
) -> Result<(), CliError> {
    let still = super::runtime()?.block_on(async {
        let client = super::kube_client(global).await?;
        let discovery = crate::cluster::Discovery::new(client);
        resources
            .discover(&discovery, release)
            .await
            .map_err(CliError::failed)
    })?;
    if !still.is_empty() {
        return Err(CliError::Several(
            still.iter().map(ToString::to_string).collect(),
            Exit::Failed,
        ));
    }
    for (group, kind, plural) in resources.discovered() {
        say!(
            global.console,
            note { %group, %kind, %plural },
            "kind {kind} of group {group:?}: resource {plural}, from the cluster's discovery"
        );
    }
    Ok(())
}

/// The CRDs (`plural.group`) the cluster's ClusterServiceVersions own; none when OLM's CSV
/// kind is not served. A failed request is an error: a role missing a kind would leave the
/// reconciler unable to finish a cleanup it started.
async fn owned_crds(global: &GlobalArgs) -> Result<std::collections::BTreeSet<String>, CliError> {
    let client = super::kube_client(global).await?;
    let csvs: kube::Api<crate::olm::types::ClusterServiceVersion> = kube::Api::all(client);
    let list = match crate::olm::reconciler::list_all(&csvs, 500, "ClusterServiceVersions").await {
        Ok(list) => list,
        // OLM is not installed: no CSV owns anything.
        Err(crate::olm::reconciler::Error::Kube {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 404 => Vec::new(),
        Err(e) => {
            let why = match &e {
                crate::olm::reconciler::Error::Kube {
                    source: kube::Error::Api(status),
                    ..
                } => format!(
                    "the API server answered {}: {}",
                    status.code, status.message
                ),
                crate::olm::reconciler::Error::Kube { source, .. } => {
                    crate::cluster::request_error::cause(source)
                }
                other => other.to_string(),
            };
            return Err(CliError::failed(format_args!(
                "could not list ClusterServiceVersions: {why}"
            )));
        }
    };
    Ok(list
        .iter()
        .flat_map(|csv| csv.spec.customresourcedefinitions.owned.iter())
        .map(|crd| crd.name.clone())
        .collect())
}
