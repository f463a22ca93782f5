//! `cvo rbac`: print the least-privilege RBAC `cvo operator` needs for a release.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::{GlobalArgs, ReleaseArgs};
use crate::rbac::{Options, Resources, ServiceAccount, render};

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
    /// Name of the ClusterRole, the Role and their bindings.
    #[arg(long, value_name = "NAME", default_value = "cvo-operator")]
    pub name: String,
    /// Name of the operator's leader-election Lease (`cvo operator --lease-name`).
    #[arg(long, value_name = "NAME", default_value = "cvo-operator")]
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
/// has errors, or a bad flag.
pub fn run(global: &GlobalArgs, args: &RbacArgs) -> ExitCode {
    let release = match args.release.load() {
        Ok(release) => release,
        Err(code) => return code,
    };
    for d in &release.diagnostics {
        stderr_line!("{d}");
    }
    if release.has_errors() {
        stderr_line!("error: the release has errors; fix them first (see `cvo validate`)");
        return ExitCode::from(super::EXIT_INPUT);
    }
    let operand_cleanup = args
        .components
        .contains(&super::operator::Component::OperandCleanup);
    if operand_cleanup && !args.discover {
        stderr_line!(
            "error: --components operand-cleanup needs --discover: the reconciler deletes the custom resources of the CRDs the cluster's ClusterServiceVersions own, which only the cluster can tell"
        );
        return ExitCode::from(super::EXIT_INPUT);
    }
    let owned_crds = if operand_cleanup {
        let runtime = match super::runtime() {
            Ok(rt) => rt,
            Err(code) => return code,
        };
        match runtime.block_on(owned_crds(global)) {
            Ok(owned) => {
                if owned.is_empty() {
                    stderr_line!(
                        "note: no ClusterServiceVersion in the cluster owns a CRD: the operand-cleanup rules grant no custom resources yet"
                    );
                }
                Some(owned)
            }
            Err(e) => return e.report(),
        }
    } else {
        None
    };
    let mut resources = Resources::of(&release);
    if args.discover && !resources.unknown(&release).is_empty() {
        let runtime = match super::runtime() {
            Ok(rt) => rt,
            Err(code) => return code,
        };
        let discovered = runtime.block_on(async {
            let client = super::kube_client(global).await?;
            let discovery = crate::cluster::Discovery::new(client);
            resources
                .discover(&discovery, &release)
                .await
                .map_err(|e| super::ClientError {
                    code: ExitCode::FAILURE,
                    message: e.to_string(),
                })
        });
        match discovered {
            Err(e) => return e.report(),
            Ok(still) if !still.is_empty() => {
                for u in &still {
                    stderr_line!("error: {u}");
                }
                return ExitCode::FAILURE;
            }
            Ok(_) => {}
        }
        for (group, kind, plural) in resources.discovered() {
            stderr_line!(
                "note: kind {kind} of group {:?}: resource {plural}, from the cluster's discovery",
                group
            );
        }
    }
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| args.service_account.namespace.clone());
    let options = Options {
        name: args.name.clone(),
        state_namespace: args
            .state_namespace
            .clone()
            .unwrap_or_else(|| namespace.clone()),
        namespace,
        service_account: args.service_account.clone(),
        lease_name: args.lease_name.clone(),
        by_name: !args.no_by_name,
        self_deployment: args.self_deployment.clone(),
        operand_cleanup: owned_crds,
    };
    let rbac = match crate::rbac::derive(&release, &resources, &options) {
        Ok(rbac) => rbac,
        Err(unknown) => {
            for u in &unknown {
                stderr_line!("error: {u}");
            }
            return ExitCode::FAILURE;
        }
    };
    for note in rbac.cluster_rules.iter().filter_map(|r| r.note.as_deref()) {
        stderr_line!("warning: {note}");
    }
    // A Role goes into a namespace that exists: the operator's is there before it runs, but a
    // release may create the namespaces of its Secrets itself.
    let namespaces: Vec<&str> = rbac.namespace_rules.keys().map(String::as_str).collect();
    stderr_line!(
        "note: namespaces that must exist before this RBAC is applied: {}",
        namespaces.join(", ")
    );
    let text = match args.output {
        Format::Yaml => render::yaml(&rbac),
        Format::Json => render::json(&rbac),
    };
    match super::print_stdout(&text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// The CRDs (`plural.group`) the cluster's ClusterServiceVersions own; none when OLM's CSV
/// kind is not served. A failed request is an error: a role missing a kind would leave the
/// reconciler unable to finish a cleanup it started.
async fn owned_crds(
    global: &GlobalArgs,
) -> Result<std::collections::BTreeSet<String>, super::ClientError> {
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
            return Err(super::ClientError {
                code: ExitCode::FAILURE,
                message: format!("could not list ClusterServiceVersions: {why}"),
            });
        }
    };
    Ok(list
        .iter()
        .flat_map(|csv| csv.spec.customresourcedefinitions.owned.iter())
        .map(|crd| crd.name.clone())
        .collect())
}
