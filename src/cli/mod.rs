//! The command line: argument parsing and the subcommands.
//!
//! Exit codes (all commands): 0 success, no conflicts; 1 conflicts found (or replay
//! expectations failed); 2 invalid input or usage; 3 cluster or service unreachable; 4 an apply
//! failed.

mod apply;
mod check;
mod history;
mod limits;
mod live;
mod ownership;
mod progress;
mod remote;
mod replay;
mod serve;
mod uninstall;

use crate::manifest::ManifestError;
use clap::{Parser, Subcommand};
pub use std::process::ExitCode;

/// Conflicts found.
pub const EXIT_CONFLICTS: u8 = 1;
/// Invalid input or usage.
pub const EXIT_INVALID: u8 = 2;
/// Cluster or service unreachable.
pub const EXIT_UNREACHABLE: u8 = 3;
pub const EXIT_APPLY_FAILED: u8 = 4;

const EXIT_CODES: &str = "Exit codes:
  0  no conflicts
  1  conflicts found, or an apply the apiserver would refuse (verdict rejected: 422)
  2  invalid input or usage (every problem is printed with file, document, line and field)
  3  cluster or service unreachable
  4  apply: an object could not be applied, deleted or did not become ready

Installed as `kubectl-fieldguard` on the PATH, it runs as `kubectl fieldguard ...`.";

const APPLY_EXIT_CODES: &str = "Exit codes:
  0  applied (or planned) with no conflict
  1  conflicts the force policy does not allow: the release stopped before its first write
  2  invalid input or usage, or the release refused (flags, ownership, permissions); nothing
     was applied
  3  cluster unreachable
  4  an object could not be applied or deleted, or did not become ready

Installed as `kubectl-fieldguard` on the PATH, it runs as `kubectl fieldguard ...`.";

const VIEW_EXIT_CODES: &str = "Exit codes:
  0  shown
  2  invalid input or usage (every problem is printed with file, document, line and field)
  3  cluster unreachable";

/// Predicts what a Kubernetes server-side apply will do to field ownership, before you deploy.
#[derive(Parser, Debug)]
#[command(name = "fieldguard", version, about, long_about = None, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check manifests for server-side apply conflicts against a snapshot or a cluster.
    #[command(after_help = EXIT_CODES)]
    Check(check::CheckArgs),
    /// Apply a release: predict every write, then apply server-side (selective force,
    /// optimistic locking, CSA→SSA migration) or client-side (three-way patches) by Helm 4's
    /// HIP-0023 rules; CRDs first, dropped objects deleted, revisions recorded.
    #[command(after_help = APPLY_EXIT_CODES)]
    Apply(apply::ApplyArgs),
    /// Uninstall a release as Helm 4 does: pre-delete hooks, its objects deleted in Helm's
    /// uninstall order (`helm.sh/resource-policy: keep` honoured), post-delete hooks, its records
    /// purged (or kept with --keep-history).
    #[command(after_help = APPLY_EXIT_CODES)]
    Uninstall(uninstall::UninstallArgs),
    /// Show an object with each line annotated by the field managers that own it.
    #[command(after_help = VIEW_EXIT_CODES)]
    Blame(ownership::BlameArgs),
    /// List every field manager across a snapshot or cluster, flagging the usual strays.
    #[command(after_help = VIEW_EXIT_CODES)]
    Managers(ownership::ManagersArgs),
    /// Who took which field from whom: ownership changes remembered by a service (`serve
    /// --history`), or seen here while watching a cluster for a while.
    #[command(after_help = VIEW_EXIT_CODES)]
    History(history::HistoryArgs),
    /// Fields that change hands back and forth between managers (an applier forcing
    /// `spec.replicas` against an autoscaler, two pipelines forcing one label).
    #[command(after_help = VIEW_EXIT_CODES)]
    Fights(history::FightsArgs),
    /// Serve the gRPC API (predictions and ownership queries) over watched clusters or a snapshot.
    Serve(serve::ServeArgs),
    /// Run server-side-apply cases (the reference oracle's JSONL format) and print results.
    Replay(replay::ReplayArgs),
}

/// Runs the command line and returns the process exit code.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse_from(args()) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_INVALID } else { 0 });
        }
    };
    // `serve` runs for days: it sets up its own logging (format, level, traces) inside its
    // runtime and keeps the allocator's defaults. Every other command ends soon after its work.
    let one_shot = !matches!(cli.command, Command::Serve(_));
    let _guard =
        one_shot.then(|| crate::telemetry::init(crate::telemetry::LogFormat::Text, "warn", None));
    if one_shot {
        crate::allocator::keep_freed_memory();
    }
    match cli.command {
        Command::Check(a) => check::run(a),
        Command::Apply(a) => apply::run(a),
        Command::Uninstall(a) => uninstall::run(a),
        Command::Blame(a) => ownership::blame(a),
        Command::Managers(a) => ownership::managers(a),
        Command::History(a) => history::history(a),
        Command::Fights(a) => history::fights(a),
        Command::Replay(a) => replay::run(a),
        Command::Serve(a) => serve::run(a),
    }
}

/// The arguments, with the program named `fieldguard` also when run as the kubectl plugin
/// `kubectl-fieldguard` (so help and errors read the same).
fn args() -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(first) = a.first_mut() {
        let plugin = std::path::Path::new(first.as_os_str())
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("kubectl-"));
        *first = if plugin {
            "kubectl fieldguard"
        } else {
            "fieldguard"
        }
        .into();
    }
    a
}

/// Prints located problems to standard error; returns exit code 2.
pub(crate) fn print_errors(errors: &[ManifestError]) -> ExitCode {
    for e in errors {
        eprintln!("error: {}", crate::report::printable(&e.to_string()));
    }
    eprintln!("{} problem(s) found; nothing was checked", errors.len());
    ExitCode::from(EXIT_INVALID)
}

/// Prints a usage problem; returns exit code 2.
pub(crate) fn usage_error(msg: &str) -> ExitCode {
    eprintln!("error: {}", crate::report::printable(msg));
    ExitCode::from(EXIT_INVALID)
}

/// A field manager kube-apiserver refuses every write of (too long, an unprintable character):
/// exit 2 with the server's own 422, before anything is read or sent.
pub(crate) fn field_manager_refused(manager: &str) -> Option<ExitCode> {
    crate::validation::meta::field_manager_refusal(manager).map(|m| {
        usage_error(&format!(
            "--field-manager: kube-apiserver refuses every apply by this manager: {m}"
        ))
    })
}

/// Writes a report to standard output; a closed pipe or a full disk is said on standard
/// error (exit 2), never silent.
pub(crate) fn write_stdout(text: &str) -> Result<(), ExitCode> {
    write_stdout_with(|out| out.write_all(text.as_bytes()))
}

/// Standard output as `write` writes to it (buffered), flushed; a failure reported as
/// [`write_stdout`] reports it.
pub(crate) fn write_stdout_with(
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), ExitCode> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    write(&mut out).and_then(|_| out.flush()).map_err(|e| {
        eprintln!("error: cannot write the output to standard output: {e}");
        ExitCode::from(EXIT_INVALID)
    })
}
