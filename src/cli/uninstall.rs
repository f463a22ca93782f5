//! `cvo uninstall PACKAGE -n NAMESPACE`: remove an OLM-installed operator safely
//! (docs/uninstall.md). Prints the plan, asks (or takes `--yes`), carries it out.
//!
//! Exit codes: 0 done (objects kept by a safety rule are listed), 1 a step failed (or the
//! cluster could not be read), 2 usage, 3 a wait timed out (nothing after that step deleted),
//! 4 refused by a safety rule, or not confirmed.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::apply::parse_duration;
use super::{CliError, GlobalArgs, OutputFormat, print_stdout};
use crate::exit::Exit;
use crate::lifecycle::uninstall::{
    self, Action, Options, Outcome, Performed, Plan, Progress, Report,
};

#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// The OLM package (the Subscription's spec.name).
    #[arg(value_name = "PACKAGE")]
    pub package: String,
    /// The namespace the operator was installed into (its Subscription's).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: String,
    /// Delete the custom resources of the operator's owned CRDs in the OperatorGroup's target
    /// namespaces first, while the operator still runs, and wait until they are gone.
    #[arg(long)]
    pub delete_operands: bool,
    /// Delete owned CRDs and APIServices no other operator uses and no object of remains.
    #[arg(long)]
    pub delete_crds: bool,
    /// Remove the operators.coreos.com/<operator> label from objects that still carry it, so
    /// the Operator object can be deleted.
    #[arg(long)]
    pub remove_labels: bool,
    /// Delete the namespace's OperatorGroup when no other Subscription or CSV remains there.
    #[arg(long)]
    pub delete_operator_group: bool,
    /// How long each wait may take (operands, the CSV).
    #[arg(long, value_parser = parse_duration, default_value = "10m", allow_hyphen_values = true)]
    pub timeout: Duration,
    /// Print the plan (every object deleted or kept, and why) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Output format (stdout).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

pub fn run(global: &GlobalArgs, args: &UninstallArgs) -> Result<Exit, CliError> {
    super::runtime()?.block_on(run_async(global, args))
}

async fn run_async(global: &GlobalArgs, args: &UninstallArgs) -> Result<Exit, CliError> {
    let client = super::kube_client(global).await?;
    let opts = Options {
        delete_operands: args.delete_operands,
        delete_crds: args.delete_crds,
        remove_labels: args.remove_labels,
        delete_operator_group: args.delete_operator_group,
        timeout: args.timeout,
        ..Options::new(&args.package, &args.namespace)
    };
    let (plan, inv) = uninstall::plan(&client, &opts)
        .await
        .map_err(CliError::failed)?;
    let json = args.output == OutputFormat::Json;
    if !json {
        print_stdout(&plan_text(&plan, args.dry_run))?;
    }
    if args.dry_run {
        if json {
            print_stdout(&json_out(&plan, true, None))?;
        }
        return Ok(if plan.refusals.is_empty() {
            Exit::Success
        } else {
            Exit::Refused
        });
    }
    if plan.refusals.is_empty() && !args.yes {
        let refusal = match confirm(&plan) {
            Ok(true) => None,
            Ok(false) => Some("not confirmed: nothing was changed"),
            Err(why) => Some(why),
        };
        if let Some(why) = refusal {
            let report = Report {
                performed: Vec::new(),
                outcome: Outcome::Refused {
                    reasons: vec![why.to_owned()],
                },
            };
            return finish(&plan, &report, json);
        }
    }
    let quiet = json;
    let console = global.console;
    // A person reads a terminal; a program reads JSON logs.
    let tty = std::io::stderr().is_terminal() && !console.is_json();
    let mut last_wait: Option<(usize, std::time::Instant)> = None;
    let mut progress = |p: Progress| {
        if quiet {
            return;
        }
        match p {
            Progress::Did(d) => performed(console, &d),
            Progress::Waiting {
                step,
                remaining,
                total,
            } => {
                // Every change on a terminal; in logs, at most every 10 s.
                let now = std::time::Instant::now();
                let show = match last_wait {
                    None => true,
                    Some((n, at)) => {
                        n != remaining && (tty || now.duration_since(at).as_secs() >= 10)
                    }
                };
                if show {
                    let step = step.as_str();
                    say!(
                        console,
                        line {
                            step,
                            remaining,
                            total
                        },
                        "waiting ({step}): {remaining} of {total} object(s) not gone yet"
                    );
                    last_wait = Some((remaining, now));
                }
            }
        }
    };
    let report = uninstall::execute(&client, &opts, &plan, &inv, &mut progress).await;
    finish(&plan, &report, json)
}

/// Asks on the terminal; refuses without one.
fn confirm(plan: &Plan) -> Result<bool, &'static str> {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(
            "refusing to delete without confirmation: stdin is not a terminal (pass --yes, or --dry-run to see the plan)",
        );
    }
    let deletes = plan
        .items
        .iter()
        .filter(|i| i.action != Action::Keep)
        .count();
    let mut stderr = std::io::stderr();
    let _ = write!(
        stderr,
        "Uninstall {} from {}: {deletes} object(s) deleted or changed. Proceed? [y/N] ",
        plan.package, plan.namespace
    );
    let _ = stderr.flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return Ok(false);
    }
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

fn finish(plan: &Plan, report: &Report, json: bool) -> Result<Exit, CliError> {
    let text = if json {
        json_out(plan, false, Some(report))
    } else {
        outcome_text(report)
    };
    print_stdout(&text)?;
    Ok(outcome_exit(&report.outcome))
}

/// How an uninstall's outcome ends the command (README, "Exit codes").
fn outcome_exit(outcome: &Outcome) -> Exit {
    match outcome {
        Outcome::Done => Exit::Success,
        Outcome::Failed { .. } => Exit::Failed,
        Outcome::TimedOut { .. } => Exit::InProgress,
        Outcome::Refused { .. } => Exit::Refused,
    }
}

fn plan_text(plan: &Plan, dry_run: bool) -> String {
    let mut out = format!(
        "{}uninstall plan for package {} in namespace {} (Subscription {}, CSV {}):\n",
        if dry_run { "dry run: " } else { "" },
        plan.package,
        plan.namespace,
        plan.subscription.as_deref().unwrap_or("-"),
        plan.csv.as_deref().unwrap_or("-"),
    );
    let mut step = None;
    for item in &plan.items {
        if step != Some(item.step) {
            out.push_str(&format!("  {}:\n", item.step.as_str()));
            step = Some(item.step);
        }
        out.push_str(&format!(
            "    {:<12} {}: {}\n",
            item.action.as_str(),
            item.describe(),
            item.reason
        ));
    }
    for note in &plan.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    for refusal in &plan.refusals {
        out.push_str(&format!("refused: {refusal}\n"));
    }
    if dry_run {
        out.push_str("dry run: nothing was changed\n");
    }
    out
}

/// The progress line of what was done to one object: [`performed_line`], or in JSON an event
/// saying `RESULT KIND NS/NAME[: REASON]` with `step`, `result`, `kind`, `namespace`, `name`
/// and `reason` as fields.
fn performed(console: super::Console, p: &Performed) {
    if !console.is_json() {
        stderr_line!("{}", performed_line(p));
        return;
    }
    let (step, result, kind, name) = (p.step.as_str(), &p.result, &p.kind, &p.name);
    let namespace = p.namespace.as_deref();
    let reason = (!p.reason.is_empty()).then_some(p.reason.as_str());
    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
    say!(
        console,
        line { step, %result, %kind, namespace, %name, reason },
        "{result} {}{why}",
        p.describe()
    );
}

fn performed_line(p: &Performed) -> String {
    if p.reason.is_empty() {
        format!("{:<16} {}", p.result, p.describe())
    } else {
        format!("{:<16} {}: {}", p.result, p.describe(), p.reason)
    }
}

fn outcome_text(report: &Report) -> String {
    match &report.outcome {
        Outcome::Done => {
            let deleted = report
                .performed
                .iter()
                .filter(|p| matches!(p.result.as_str(), "deleted" | "deletion-started"))
                .count();
            let kept = report
                .performed
                .iter()
                .filter(|p| p.result == "kept")
                .count();
            format!("uninstall finished: {deleted} deleted, {kept} kept\n")
        }
        Outcome::Refused { reasons } => {
            let mut out = String::new();
            for r in reasons {
                out.push_str(&format!("refused: {r}\n"));
            }
            out.push_str("nothing was deleted\n");
            out
        }
        Outcome::Failed { step, message } => format!(
            "failed in step {}: {message}\nnothing after that step was deleted; run the command again once the cause is fixed\n",
            step.as_str()
        ),
        Outcome::TimedOut {
            step,
            waited,
            remaining,
        } => {
            let mut out = format!("timed out in step {}: {waited}:\n", step.as_str());
            for r in remaining {
                out.push_str(&format!("  {}\n", r.line()));
            }
            out.push_str(
                "nothing after that step was deleted; check the operator that owns those finalizers, then run the command again\n",
            );
            out
        }
    }
}

fn json_out(plan: &Plan, dry_run: bool, report: Option<&Report>) -> String {
    let mut v = json!({
        "package": plan.package,
        "namespace": plan.namespace,
        "dryRun": dry_run,
        "plan": plan,
    });
    if let Some(r) = report {
        v["performed"] = json!(r.performed);
        v["outcome"] = json!(r.outcome);
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}
