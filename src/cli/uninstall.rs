//! `fieldguard uninstall`: take a release out as Helm 4 does (pre-delete hooks, the objects in
//! uninstall order, `keep` honoured, post-delete hooks, the records purged or kept).

use super::apply::{Output, finish};
use super::{EXIT_INVALID, EXIT_UNREACHABLE, ExitCode};
use crate::apply::run::RunError;
use crate::apply::uninstall::{self, UninstallRequest};
use crate::live::state::LiveState;
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct UninstallArgs {
    /// The release name.
    #[arg(value_name = "RELEASE")]
    pub release: String,
    /// The release namespace.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config).
    #[arg(long, env = "KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The field manager of hook writes (releases applied server-side).
    #[arg(long, env = "FIELDGUARD_FIELD_MANAGER", default_value = "fieldguard")]
    pub field_manager: String,
    /// Show what would be deleted and which hooks would run, and stop.
    #[arg(long)]
    pub plan: bool,
    /// Keep the release's records, the latest marked `uninstalled` (otherwise every record
    /// of the release, Helm's and fieldguard's, is deleted).
    #[arg(long)]
    pub keep_history: bool,
    /// How long one hook, or one object's deletion, may take.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = super::apply::parse_duration)]
    pub timeout: Duration,
    /// Output of the plan and the results.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn run(args: UninstallArgs) -> ExitCode {
    let driver = match crate::apply::storage::Driver::from_env() {
        Ok(d) => d,
        Err(e) => return super::usage_error(&e.0),
    };
    let (rt, cluster) = match super::apply::connect(&args.kubeconfig, &args.context) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let namespace = args
        .namespace
        .clone()
        .or_else(|| cluster.default_namespace())
        .unwrap_or_else(|| "default".into());
    let req = UninstallRequest {
        release: args.release.clone(),
        namespace,
        field_manager: args.field_manager.clone(),
        plan_only: args.plan,
        keep_history: args.keep_history,
        driver,
        timeout: args.timeout,
        poll: Duration::from_secs(1),
    };
    let mut progress = |line: &str| eprintln!("{line}");
    match rt.block_on(uninstall::uninstall(cluster.api(), req, &mut progress)) {
        Ok(outcome) => finish(&outcome, args.output),
        Err(RunError::Invalid(errors)) => super::check::invalid_input(
            &errors,
            match args.output {
                Output::Json => crate::report::Format::Json,
                Output::Text => crate::report::Format::Text,
            },
        ),
        Err(RunError::Refused(m)) => {
            for line in m.lines() {
                eprintln!("error: {}", crate::report::printable(line));
            }
            eprintln!("nothing was deleted");
            ExitCode::from(EXIT_INVALID)
        }
        Err(RunError::Cluster(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
    }
}
