//! `cvo fleet install`: the cvo operator on every cluster of a Placement, through one
//! ManifestWorkReplicaSet (`cvo-install-PLACEMENT`, [`crate::fleet::install`]).

use super::fleet::InstallArgs;
use super::{CliError, GlobalArgs, OutputFormat, pretty, print_stdout};
use crate::exit::Exit;
use crate::fleet::{self, install};

pub fn run(global: &GlobalArgs, args: &InstallArgs) -> Result<Exit, CliError> {
    let console = global.console;
    let p = &args.placement.placement;
    let runtime = super::runtime()?;
    let (dir, _opened) = match crate::oci::Source::parse(&args.release).map_err(CliError::Usage)? {
        None => (std::path::PathBuf::from(&args.release), None),
        Some(source) => {
            let options = args.oci.fetch_options()?;
            let opened = runtime
                .block_on(crate::oci::open(&source, &options))
                .map_err(super::oci_error)?;
            (opened.dir(), Some(opened))
        }
    };
    let release = super::fleet::load_release(&dir, &args.release)?;
    let objects = install::objects(&release, &args.image)
        .map_err(|e| CliError::failed(format_args!("--release {}: {e}", args.release)))?;
    let count = objects.len();
    let set = install::manifest(&p.namespace, &p.name, objects);
    if args.dry_run {
        // JSON either way: kubectl reads it as it reads YAML.
        print_stdout(&pretty(&set))?;
        return Ok(Exit::Success);
    }
    let written = runtime.block_on(async {
        let client = super::kube_client(global).await?;
        crate::fleet::status::read(&client, &p.namespace, &p.name)
            .await
            .map_err(|e| CliError::failed(e.to_string()))?;
        fleet::write(&client, &set)
            .await
            .map_err(|e| CliError::failed(format_args!("writing the install set: {e}")))
    })?;
    let name = format!(
        "{}/{}",
        p.namespace,
        fleet::work::Purpose::Install.name(&p.name)
    );
    match args.placement.output {
        OutputFormat::Json => print_stdout(&pretty(&serde_json::json!({
            "manifestWorkReplicaSet": name, "objects": count, "result": written,
        })))?,
        OutputFormat::Text => say!(
            console,
            note,
            "ManifestWorkReplicaSet {name} {written}: {count} objects (the operator of {}, image {}) on every cluster of Placement {p}",
            args.release,
            args.image
        ),
    }
    Ok(Exit::Success)
}
