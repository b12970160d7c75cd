//! `fieldguard serve`: the gRPC service.

use super::live::LiveArgs;
use super::{EXIT_INVALID, ExitCode, print_errors, usage_error};
use crate::catalog::Catalog;
use crate::live::snapshot::Snapshot;
use crate::manifest::Input;
use crate::service::{self, SnapshotStore, Stores};
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "ADDR")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub live: LiveArgs,
}

pub fn run(args: ServeArgs) -> ExitCode {
    if args.live.snapshot.is_empty() {
        return usage_error(
            "serve needs --snapshot (serving a live cluster's watch-fed cache is not available yet)",
        );
    }
    let mut catalog = match Catalog::kubernetes(&args.live.kubernetes_version) {
        Ok(c) => c,
        Err(e) => return usage_error(&format!("--kubernetes-version: {e}")),
    };
    let inputs: Vec<Input> = args.live.snapshot.iter().map(|s| Input::parse(s)).collect();
    let snap = match Snapshot::load(&inputs, &mut std::io::stdin().lock()) {
        Ok(s) => s,
        Err(e) => return print_errors(&e),
    };
    if let Err(e) = snap.extend_catalog(&mut catalog) {
        return print_errors(&e);
    }
    let n = snap.len();
    let stores = Stores::single("snapshot", Arc::new(SnapshotStore::new(snap, catalog)));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return usage_error(&format!("cannot start the runtime: {e}")),
    };
    let listen = args.listen;
    let result = rt.block_on(async move {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            if let Ok(addr) = rx.await {
                eprintln!("fieldguard: serving {n} object(s) on {addr}");
            }
        });
        service::serve(listen, stores, async {}, shutdown_signal(), Some(tx)).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// Ctrl-C or SIGTERM: stop accepting, drain what is in flight.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    eprintln!("fieldguard: shutting down (draining in-flight requests)");
}
