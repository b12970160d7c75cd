//! Where live state comes from, as the commands' options choose it: a snapshot on disk
//! (`--snapshot`), or a cluster through the usual kubeconfig resolution (`KUBECONFIG`,
//! `--kubeconfig`, `--context`, in-cluster config). Read-only either way.

use super::{EXIT_UNREACHABLE, ExitCode};
use crate::catalog::DEFAULT_KUBERNETES;
use crate::live::api::ClusterOptions;
use crate::live::source::{self, SourceOptions};
use crate::live::state::{LiveError, LiveState};
use crate::manifest::Input;
use clap::Args;
use std::sync::Arc;

#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// Read live state from a snapshot instead of a cluster: files or directories of objects
    /// as `kubectl get -o yaml --show-managed-fields` prints them, with optional CRDs and
    /// OpenAPI documents (repeatable).
    #[arg(long, value_name = "PATH")]
    pub snapshot: Vec<String>,
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config).
    #[arg(long, value_name = "FILE", conflicts_with = "snapshot")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME", conflicts_with = "snapshot")]
    pub context: Option<String>,
    /// Namespace for objects that name none (default: the context's, else `default`).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Kubernetes version whose built-in schemas a snapshot uses (a cluster serves its own).
    #[arg(long, value_name = "VERSION", default_value = DEFAULT_KUBERNETES)]
    pub kubernetes_version: String,
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
}

/// The live state the arguments name, opened, with the runtime its reads run on.
pub struct LiveSource {
    pub state: Arc<dyn LiveState>,
    /// Where objects that name no namespace go: `-n`, else the context's, else `default`.
    pub namespace: String,
    pub is_snapshot: bool,
    rt: tokio::runtime::Runtime,
}

impl LiveSource {
    /// Opens the source the arguments name; prints the problem and returns the exit code if it
    /// cannot be opened (2 for unreadable snapshots, 3 for unreachable clusters).
    pub fn open(args: &LiveArgs) -> Result<LiveSource, ExitCode> {
        Self::open_for(args, crate::report::Format::Text)
    }

    /// [`LiveSource::open`]; an unreadable snapshot is also reported in `format`.
    pub fn open_for(
        args: &LiveArgs,
        format: crate::report::Format,
    ) -> Result<LiveSource, ExitCode> {
        Self::try_open(args, snapshot_inputs(args), &mut std::io::stdin().lock())
            .map_err(|e| e.report(format))
    }

    /// Runs `work` while a snapshot named by paths is read on a second thread (neither needs
    /// the other: on two cores a `check` reads its manifests and the snapshot at once). A
    /// cluster, or a snapshot read from standard input, is opened once `work` is done, as
    /// [`LiveSource::open_for`] would; nothing is reported until [`Opening::finish`].
    pub fn open_beside<T>(args: &LiveArgs, work: impl FnOnce() -> T) -> (T, Opening) {
        let snapshot = snapshot_inputs(args);
        let by_paths = !snapshot.is_empty() && !snapshot.iter().any(|s| matches!(s, Input::Stdin));
        if !by_paths {
            return (work(), Opening(None));
        }
        std::thread::scope(|scope| {
            let reading = scope.spawn(|| Self::try_open(args, snapshot, &mut std::io::empty()));
            let done = work();
            let opened = reading.join().unwrap_or_else(|_| {
                Err(OpenError::Live(LiveError::Internal(
                    "reading the snapshot failed".into(),
                )))
            });
            (done, Opening(Some(opened)))
        })
    }

    /// Opens the source; the problem, unreported, if it cannot be opened.
    fn try_open(
        args: &LiveArgs,
        snapshot: Vec<Input>,
        stdin: &mut dyn std::io::Read,
    ) -> Result<LiveSource, OpenError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| OpenError::Runtime(format!("cannot start the runtime: {e}")))?;
        let opts = SourceOptions {
            snapshot,
            cluster: ClusterOptions {
                kubeconfig: args.kubeconfig.clone(),
                context: args.context.clone(),
            },
            kubernetes_version: args.kubernetes_version.clone(),
            limits: args.limits.snapshot(),
        };
        let opened = rt
            .block_on(source::open(&opts, stdin))
            .map_err(OpenError::Live)?;
        let namespace = args
            .namespace
            .clone()
            .or_else(|| opened.state.default_namespace())
            .unwrap_or_else(|| "default".into());
        Ok(LiveSource {
            state: opened.state,
            namespace,
            is_snapshot: opened.is_snapshot,
            rt,
        })
    }

    /// Runs a read of the source to its end.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The namespace asked for with `-n`, if any.
    pub fn explicit_namespace(args: &LiveArgs) -> Option<&str> {
        args.namespace.as_deref()
    }
}

/// The snapshot files, directories or standard input `--snapshot` names.
fn snapshot_inputs(args: &LiveArgs) -> Vec<Input> {
    args.snapshot.iter().map(|s| Input::parse(s)).collect()
}

/// Why a source could not be opened, not yet reported.
enum OpenError {
    Runtime(String),
    Live(LiveError),
}

impl OpenError {
    fn report(self, format: crate::report::Format) -> ExitCode {
        match self {
            OpenError::Runtime(m) => super::usage_error(&m),
            OpenError::Live(e) => failed(e, format),
        }
    }
}

/// A source [`LiveSource::open_beside`] read, or will open.
pub struct Opening(Option<Result<LiveSource, OpenError>>);

impl Opening {
    /// The source, as [`LiveSource::open_for`] gives it (its problem reported in `format`).
    pub fn finish(
        self,
        args: &LiveArgs,
        format: crate::report::Format,
    ) -> Result<LiveSource, ExitCode> {
        match self.0 {
            Some(opened) => opened.map_err(|e| e.report(format)),
            None => LiveSource::open_for(args, format),
        }
    }
}

/// Prints why live state could not be had; the exit code says what kind of failure it was
/// (3: the cluster did not answer or objects could not be read; 2: invalid input or options).
pub(super) fn failed(e: LiveError, format: crate::report::Format) -> ExitCode {
    match e {
        LiveError::Invalid(errors) => super::check::invalid_input(&errors, format),
        e @ (LiveError::Options(_) | LiveError::UnknownKind(_)) => {
            super::usage_error(&e.to_string())
        }
        e @ (LiveError::Cluster(_) | LiveError::Unavailable(_) | LiveError::Internal(_)) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
    }
}
