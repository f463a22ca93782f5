//! `cvo fleet install`: the cvo operator on every cluster of a Placement, through one
//! ManifestWorkReplicaSet (`cvo-install-PLACEMENT`, [`crate::fleet::install`]), with the keys it
//! verifies releases with and the credential it pulls them with.

use super::fleet::InstallArgs;
use super::{CliError, GlobalArgs, OutputFormat, pretty, print_stdout};
use crate::exit::Exit;
use crate::fleet::install::{self, Extras};
use crate::fleet::{self, status};

/// The largest pull secret file read (a Docker config of a few registries is a few KiB).
const MAX_PULL_SECRET_BYTES: u64 = 1 << 20;

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
    let extras = extras(args)?;
    let objects = install::objects(&release, &args.image, &extras)
        .map_err(|e| CliError::failed(format_args!("--release {}: {e}", args.release)))?;
    let count = objects.len();
    let set = install::manifest(&p.namespace, &p.name, objects);
    if args.dry_run {
        // JSON either way: kubectl reads it as it reads YAML.
        print_stdout(&pretty(&install::redacted(set)))?;
        return Ok(Exit::Success);
    }
    let written = runtime.block_on(async {
        let client = super::kube_client(global).await?;
        let view = status::read(&client, &p.namespace, &p.name)
            .await
            .map_err(|e| CliError::failed(e.to_string()))?;
        let st = status::judge(&view, jiff::Timestamp::now());
        let managed = install::managed_elsewhere(&st);
        if !managed.is_empty() && !args.force {
            for (cluster, manager) in &managed {
                say!(
                    console,
                    error,
                    "cluster {cluster}: ClusterVersion version is managed by {manager} (OpenShift's cluster-version operator): a cvo operator there would fight it over the same object"
                );
            }
            return Ok(None);
        }
        let unknown = install::unchecked(&st);
        if !unknown.is_empty() {
            say!(
                console,
                warning,
                "not checked for another cluster-version operator (no ClusterVersion reported yet; `cvo fleet observe` reports it): {}",
                unknown.join(", ")
            );
        }
        fleet::write(&client, &set)
            .await
            .map(Some)
            .map_err(|e| CliError::failed(format_args!("writing the install set: {e}")))
    })?;
    let Some(written) = written else {
        say!(
            console,
            note,
            "nothing written: --force installs anyway (for a cluster whose ClusterVersion you are taking over)"
        );
        return Ok(Exit::Refused);
    };
    let name = format!(
        "{}/{}",
        p.namespace,
        fleet::work::Purpose::Install.name(&p.name)
    );
    match args.placement.output {
        OutputFormat::Json => print_stdout(&pretty(&serde_json::json!({
            "manifestWorkReplicaSet": name, "objects": count, "result": written,
            "verifyKeys": extras.verify_keys.len(), "pullSecret": extras.pull_secret.is_some(),
        })))?,
        OutputFormat::Text => say!(
            console,
            note,
            "ManifestWorkReplicaSet {name} {written}: {count} objects (the operator of {}, image {}{}{}) on every cluster of Placement {p}",
            args.release,
            args.image,
            match extras.verify_keys.len() {
                0 => ", verifying nothing it pulls (no --verify-key)".to_owned(),
                n => format!(", verifying what it pulls with {n} key(s)"),
            },
            if extras.pull_secret.is_some() {
                ", with a pull secret"
            } else {
                ""
            }
        ),
    }
    Ok(Exit::Success)
}

/// The keys (checked to be P-256 public keys, named by their files) and the pull secret of the
/// flags.
fn extras(args: &InstallArgs) -> Result<Extras, CliError> {
    let mut verify_keys: Vec<(String, String)> = Vec::new();
    for path in &args.oci.verify_key {
        let key = crate::oci::PublicKey::load(path).map_err(CliError::Usage)?;
        let base: String = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-._".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let name = if base.is_empty() || verify_keys.iter().any(|(n, _)| *n == base) {
            format!("key-{}.pem", verify_keys.len())
        } else {
            base
        };
        verify_keys.push((name, key.to_pem()));
    }
    let pull_secret = args
        .pull_secret
        .as_ref()
        .map(|path| {
            crate::release::read_capped(path, MAX_PULL_SECRET_BYTES)
                .map_err(|e| CliError::usage(format_args!("--pull-secret {}: {e}", path.display())))
        })
        .transpose()?;
    Ok(Extras {
        verify_keys,
        pull_secret,
        insecure_registries: args.oci.insecure_registry.clone(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_install_writes_the_pull_configuration_the_operator_reads() {
        use crate::fleet::install as fleet;
        use crate::operator::pull as operator;
        assert_eq!(fleet::PULL_CONFIG_KEYS, operator::PULL_CONFIG_KEYS);
        assert_eq!(fleet::PULL_CONFIG_INSECURE, operator::PULL_CONFIG_INSECURE);
        assert_eq!(fleet::PULL_CONFIG_SECRET, operator::PULL_CONFIG_SECRET);
    }
}
