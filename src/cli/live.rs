//! Where live state comes from, as the commands' options choose it: a snapshot on disk
//! (`--snapshot`), or a cluster through the usual kubeconfig resolution (`KUBECONFIG`,
//! `--kubeconfig`, `--context`, in-cluster config). Read-only either way.

use super::{EXIT_UNREACHABLE, ExitCode};
use crate::catalog::{Catalog, DEFAULT_KUBERNETES};
use crate::check::Target;
use crate::live::LiveObjects;
use crate::live::cluster::{Cluster, ClusterError, ClusterOptions, FetchItem};
use crate::live::snapshot::Snapshot;
use crate::manifest::{Document, Input};
use clap::Args;
use std::collections::BTreeSet;

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

enum Source {
    Snapshot(Snapshot),
    Cluster(Cluster),
}

/// An opened live-state source with the types it knows.
pub struct LiveSource {
    pub catalog: Catalog,
    pub namespace: String,
    source: Source,
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
        let print_errors =
            |e: Vec<crate::manifest::ManifestError>| super::check::invalid_input(&e, format);
        if !args.snapshot.is_empty() {
            let mut catalog = Catalog::kubernetes(&args.kubernetes_version)
                .map_err(|e| super::usage_error(&format!("--kubernetes-version: {e}")))?;
            let inputs: Vec<Input> = args.snapshot.iter().map(|s| Input::parse(s)).collect();
            let snap = Snapshot::load_within(
                &inputs,
                &mut std::io::stdin().lock(),
                &args.limits.snapshot(),
            )
            .map_err(print_errors)?;
            snap.extend_catalog(&mut catalog).map_err(print_errors)?;
            return Ok(LiveSource {
                catalog,
                namespace: args.namespace.clone().unwrap_or_else(|| "default".into()),
                source: Source::Snapshot(snap),
            });
        }
        Self::open_cluster(args)
    }

    fn open_cluster(args: &LiveArgs) -> Result<LiveSource, ExitCode> {
        let opts = ClusterOptions {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
        };
        let cluster = Cluster::connect(&opts).map_err(unreachable)?;
        Ok(LiveSource {
            // Replaced by `prepare` with the cluster's own types.
            catalog: Catalog::kubernetes(DEFAULT_KUBERNETES)
                .map_err(|e| super::usage_error(&e.to_string()))?,
            namespace: args
                .namespace
                .clone()
                .unwrap_or_else(|| cluster.default_namespace().to_string()),
            source: Source::Cluster(cluster),
        })
    }

    /// Learns the types the manifests use (a cluster's discovery and published schemas for
    /// their apiVersions; a snapshot knows its types already).
    pub fn prepare(&mut self, docs: &[Document]) -> Result<(), ExitCode> {
        if let Source::Cluster(c) = &self.source {
            let versions: BTreeSet<String> =
                docs.iter().map(|d| d.api_version().to_string()).collect();
            self.catalog = c.catalog_for(&versions).map_err(unreachable)?;
        }
        Ok(())
    }

    /// The live objects of these targets (a cluster fetches them; a snapshot has them).
    pub fn objects_for<'a>(
        &'a self,
        targets: &[Target],
    ) -> Result<Box<dyn LiveObjects + 'a>, ExitCode> {
        match &self.source {
            Source::Snapshot(s) => Ok(Box::new(s)),
            Source::Cluster(c) => {
                let items: Vec<FetchItem> = targets
                    .iter()
                    .filter_map(|t| {
                        // A type the cluster does not serve yet (its CRD is in the manifests)
                        // has no objects.
                        let d = self.catalog.discovered(&t.info.gvk)?;
                        Some(FetchItem {
                            object_ref: t.object_ref.clone(),
                            api_version: t.info.gvk.api_version(),
                            plural: d.plural.clone(),
                        })
                    })
                    .collect();
                let mut f = c.fetch(&items).map_err(unreachable)?;
                f.source = c.describe();
                Ok(Box::new(f))
            }
        }
    }

    /// The cluster, when the source is one.
    pub fn cluster(&self) -> Option<&Cluster> {
        match &self.source {
            Source::Cluster(c) => Some(c),
            Source::Snapshot(_) => None,
        }
    }

    /// The namespace asked for with `-n`, if any.
    pub fn explicit_namespace(args: &LiveArgs) -> Option<&str> {
        args.namespace.as_deref()
    }

    /// The snapshot, when the source is one.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        match &self.source {
            Source::Snapshot(s) => Some(s),
            Source::Cluster(_) => None,
        }
    }
}

pub(super) fn unreachable(e: ClusterError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(EXIT_UNREACHABLE)
}
