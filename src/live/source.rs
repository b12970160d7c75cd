//! Opening the live state a command names: a snapshot on disk, or a cluster through the usual
//! kubeconfig resolution (`KUBECONFIG`, `--kubeconfig`, `--context`, in-cluster config).

use super::api::ClusterOptions;
use super::cluster::Cluster;
use super::snapshot::Snapshot;
use super::state::{LiveError, LiveState, SnapshotState};
use crate::catalog::Catalog;
use crate::manifest::{Input, Limits};
use std::io::Read;
use std::sync::Arc;

/// Where live state comes from.
#[derive(Clone, Debug)]
pub struct SourceOptions {
    /// Snapshot files or directories (`-` for standard input); empty: a cluster.
    pub snapshot: Vec<Input>,
    pub cluster: ClusterOptions,
    /// The Kubernetes version whose built-in schemas a snapshot uses (a cluster serves its own).
    pub kubernetes_version: String,
    /// What a snapshot's files may hold.
    pub limits: Limits,
}

/// An opened source.
pub struct Opened {
    pub state: Arc<dyn LiveState>,
    /// The source is a snapshot (it has no context to take a namespace from).
    pub is_snapshot: bool,
}

/// Opens the source the options name: a snapshot is read and checked whole (located problems
/// in [`LiveError::Invalid`]); a cluster must answer.
pub async fn open(opts: &SourceOptions, stdin: &mut dyn Read) -> Result<Opened, LiveError> {
    if opts.snapshot.is_empty() {
        let cluster = Cluster::connect(&opts.cluster).await?;
        return Ok(Opened {
            state: Arc::new(cluster),
            is_snapshot: false,
        });
    }
    // The built-in schemas are built on a thread of the pool while the files are read.
    let mut built = None;
    let snap = rayon_core::in_place_scope(|scope| {
        scope.spawn(|_| {
            let build = || Catalog::kubernetes(&opts.kubernetes_version);
            built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(build)).ok();
        });
        Snapshot::load_leaving_text_on_disk(&opts.snapshot, stdin, &opts.limits)
    });
    let mut catalog = built
        .ok_or_else(|| LiveError::Internal("building the built-in schemas failed".into()))?
        .map_err(|e| LiveError::Options(format!("--kubernetes-version: {e}")))?;
    let snap = snap.map_err(LiveError::Invalid)?;
    snap.extend_catalog(&mut catalog)
        .map_err(LiveError::Invalid)?;
    Ok(Opened {
        state: Arc::new(SnapshotState::new(snap, catalog)),
        is_snapshot: true,
    })
}
