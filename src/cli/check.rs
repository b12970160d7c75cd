//! `fieldguard check`: the pre-merge conflict check.

use super::live::{LiveArgs, LiveSource, failed};
use super::progress::Progress;
use super::{EXIT_CONFLICTS, EXIT_INVALID, ExitCode, print_errors};
use crate::check::{self, Force, Options};
use crate::live::ObjectRef;
use crate::live::state;
use crate::manifest::{self, Input};
use crate::report::{self, Format};
use clap::{Args, ValueEnum};
use std::collections::BTreeSet;
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Manifest files or directories (searched recursively for .yaml, .yml, .json); `-` reads
    /// standard input (also read when no manifest is named and input is piped).
    #[arg(value_name = "MANIFEST")]
    pub manifests: Vec<String>,
    /// More manifests (as kubectl's -f).
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub filenames: Vec<String>,
    /// The field manager the apply will use (helm, argocd-controller, flux, your pipeline's).
    #[arg(long, env = "FIELDGUARD_FIELD_MANAGER", value_name = "NAME")]
    pub field_manager: String,
    /// Predict a forced apply: take over every conflicting field.
    #[arg(long, conflicts_with = "force_against")]
    pub force_conflicts: bool,
    /// Predict a selectively forced apply: take over fields only from managers whose whole name
    /// matches REGEX (repeatable; e.g. 'kubectl-edit|before-first-apply'); any other conflict
    /// still fails the apply.
    #[arg(long, value_name = "REGEX")]
    pub force_against: Vec<String>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Ask a running fieldguard service (`host:port` or `http://host:port`) instead of reading
    /// live state here.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["snapshot", "kubeconfig", "context"])]
    pub server: Option<String>,
    /// With --server: the cluster to check against (a name the service knows; repeatable).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub cluster: Vec<String>,
    /// With --server: read the objects from the apiserver now instead of the service's cache.
    #[arg(long, requires = "server")]
    pub fresh: bool,
    /// With --server: a file holding the bearer token to authenticate with (e.g. a projected
    /// service account token); FIELDGUARD_TOKEN passes the token itself.
    #[arg(
        long,
        env = "FIELDGUARD_TOKEN_FILE",
        value_name = "FILE",
        requires = "server"
    )]
    pub token_file: Option<std::path::PathBuf>,
    /// With --server (https://): the CA that signed the service's certificate (PEM).
    #[arg(long, value_name = "FILE", requires = "server")]
    pub server_ca: Option<std::path::PathBuf>,
    /// With --server (https://): a client certificate and key (PEM) for mTLS.
    #[arg(long, value_name = "FILE", requires_all = ["server", "client_key"])]
    pub client_cert: Option<std::path::PathBuf>,
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<std::path::PathBuf>,
    /// Report format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Format,
    /// Colour in text reports.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Color,
    /// Accept input that holds no object (otherwise exit 2: an empty input is usually a failed
    /// `helm template` upstream in the pipe).
    #[arg(long)]
    pub allow_empty: bool,
    /// The release operation Helm hooks (`helm.sh/hook`) are predicted for: its pre-phase
    /// hooks, then the objects, then its post-phase hooks. Default: install when none of the
    /// release's objects is live, else upgrade.
    #[arg(long, value_enum)]
    pub operation: Option<OperationArg>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OperationArg {
    Install,
    Upgrade,
    Rollback,
    Uninstall,
}

impl OperationArg {
    pub fn operation(self) -> check::hooks::Operation {
        match self {
            OperationArg::Install => check::hooks::Operation::Install,
            OperationArg::Upgrade => check::hooks::Operation::Upgrade,
            OperationArg::Rollback => check::hooks::Operation::Rollback,
            OperationArg::Uninstall => check::hooks::Operation::Uninstall,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// Manifest inputs from arguments; standard input when none is named and it is piped.
pub(super) fn manifest_inputs(
    positional: &[String],
    filenames: &[String],
) -> Result<Vec<Input>, String> {
    let mut inputs: Vec<Input> = positional
        .iter()
        .chain(filenames)
        .map(|s| Input::parse(s))
        .collect();
    if inputs.is_empty() {
        if std::io::stdin().is_terminal() {
            return Err("no manifests: name files or directories, or pipe them in (`helm template ... | fieldguard check -`)".into());
        }
        inputs.push(Input::Stdin);
    }
    Ok(inputs)
}

/// The force policy `--force-conflicts` / `--force-against` ask for.
pub(super) fn force_of(conflicts: bool, against: &[String]) -> Result<Force, ExitCode> {
    if conflicts {
        Ok(Force::All)
    } else if !against.is_empty() {
        Force::against(against).map_err(|e| super::usage_error(&e))
    } else {
        Ok(Force::None)
    }
}

pub(super) use super::write_stdout;

pub fn run(args: CheckArgs) -> ExitCode {
    let force = match force_of(args.force_conflicts, &args.force_against) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if args.field_manager.is_empty() {
        return super::usage_error("--field-manager must not be empty");
    }
    if let Some(e) = super::field_manager_refused(&args.field_manager) {
        return e;
    }
    let inputs = match manifest_inputs(&args.manifests, &args.filenames) {
        Ok(i) => i,
        Err(e) => return super::usage_error(&e),
    };
    if let Some(server) = &args.server {
        if args.cluster.len() > 1 && args.output != Format::Text {
            return super::usage_error(
                "several --cluster reports need -o text (one document per report otherwise)",
            );
        }
        let reports = match super::remote::predict(server, &args, &inputs, force) {
            Ok(r) => r,
            Err(code) => return code,
        };
        let mut worst = 0;
        for r in &reports {
            let _ = finish(r, &args);
            worst = worst.max(r.exit_code());
        }
        return match worst {
            0 => ExitCode::SUCCESS,
            n => ExitCode::from(n),
        };
    }
    let limits = args.live.limits.manifests(manifest::Limits::MANIFESTS);
    let (loaded, opening) = LiveSource::open_beside(&args.live, || {
        manifest::load_with(&inputs, &mut std::io::stdin().lock(), true, &limits)
    });
    if !loaded.errors.is_empty() {
        return invalid_input(&loaded.errors, args.output);
    }
    if loaded.documents.is_empty() && !args.allow_empty {
        return invalid_input(&[no_objects(&inputs)], args.output);
    }
    let unnamespaced: Vec<manifest::Origin> = loaded
        .documents
        .iter()
        .filter(|d| d.namespace().is_none())
        .map(|d| d.origin.clone())
        .collect();
    let source = match opening.finish(&args.live, args.output) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let versions: BTreeSet<String> = loaded
        .documents
        .iter()
        .map(|d| d.api_version().to_string())
        .collect();
    let mut catalog = match source.block_on(source.state.catalog(&versions)) {
        Ok(c) => c,
        Err(e) => return failed(e, args.output),
    };
    let targets = match check::resolve(loaded.documents, &mut catalog, &source.namespace) {
        Ok(t) => t,
        Err(errors) => return invalid_input(&errors, args.output),
    };
    // A snapshot has no current context to take a namespace from: say where objects went.
    if source.is_snapshot && args.live.namespace.is_none() {
        let defaulted = targets
            .iter()
            .filter(|t| t.info.namespaced && unnamespaced.contains(&t.doc.origin))
            .count();
        if defaulted > 0 {
            eprintln!(
                "note: {defaulted} object(s) name no namespace and were checked in {:?} (no -n \
                 given; a snapshot has no context to take one from)",
                source.namespace
            );
        }
    }
    let refs: Vec<(ObjectRef, String)> = targets
        .iter()
        .map(|t| (t.object_ref.clone(), t.info.gvk.api_version()))
        .collect();
    let live = match source.block_on(state::fetch(&*source.state, &refs, true)) {
        Ok(l) => l,
        Err(e) => return failed(e, args.output),
    };
    let opts = Options {
        field_manager: args.field_manager.clone(),
        force,
        namespace: source.namespace.clone(),
        now: time::OffsetDateTime::now_utc().unix_timestamp(),
    };
    let mut progress = Progress::new("checked");
    let report = check::run(
        &targets,
        &live,
        &opts,
        args.operation.map(OperationArg::operation),
        &mut |d, n| progress.update(d, n),
    );
    progress.finish();
    // Nothing partial: an object that cannot be applied fails the whole check.
    let invalid = check::invalid_objects(&report, &targets);
    if !invalid.is_empty() {
        return invalid_input(&invalid, args.output);
    }
    let code = finish(&report, &args);
    // The process ends here: the memory goes back to the OS at once, while freeing the live
    // objects, targets and report one allocation at a time would be a tenth of a large check.
    std::mem::forget((source, live, targets, report));
    code
}

/// Invalid input: the problems on standard error and, for the machine formats, a document
/// that says so on standard output (SARIF results, JUnit errors, JSON `InvalidInput`) so a
/// CI upload step gets the located problems; exit 2.
pub(super) fn invalid_input(errors: &[manifest::ManifestError], format: Format) -> ExitCode {
    if let Some(doc) = report::render_errors(errors, format) {
        let _ = write_stdout(&doc);
    }
    print_errors(errors)
}

/// The problem of an input without objects.
pub(super) fn no_objects(inputs: &[Input]) -> manifest::ManifestError {
    manifest::ManifestError {
        file: std::sync::Arc::from(Input::names(inputs)),
        doc: None,
        line: None,
        path: None,
        message: "no objects in the input (empty, only comments, or an empty List); \
                  --allow-empty accepts that"
            .into(),
    }
}

/// Prints the report; the exit code follows from it.
fn finish(report: &check::Report, args: &CheckArgs) -> ExitCode {
    let color = match args.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    if let Err(code) =
        super::write_stdout_with(|out| report::write(report, args.output, color, out))
    {
        return code;
    }
    match report.exit_code() {
        0 => ExitCode::SUCCESS,
        1 => ExitCode::from(EXIT_CONFLICTS),
        _ => ExitCode::from(EXIT_INVALID),
    }
}
