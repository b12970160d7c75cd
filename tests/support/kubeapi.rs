//! The real control plane (`controlplane/`): kube-apiserver and kube-controller-manager of
//! Kubernetes 1.36 over etcd, built from their Go modules by `scripts/setup.sh` into
//! `.controlplane/`. The judge of every built-in kind: its defaulting, validation, strategic
//! merge patch, field manager, RBAC and the controllers' own writes.
//!
//! One control plane per test module ([`shared_server`]), stopped by a watchdog when the test
//! binary exits. There is no kubelet and no scheduler: a test that needs a Pod or Job to finish
//! writes its status as the kubelet or the job controller would, and says so.

use super::realapi::{Launch, Servers, launch_if_built, per_module, root};
use fieldguard::live::api::{Api, ClusterOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// A running control plane.
pub struct KubeApi {
    /// Run directory: etcd data, PKI, tokens, logs, kubeconfig.
    pub run: PathBuf,
    /// Kubeconfig with contexts `admin` (system:masters), `alice` and `viewer` (no rights
    /// until a test binds some).
    pub kubeconfig: PathBuf,
    /// Base port: etcd's client port; kube-apiserver is at `port + 2`.
    pub port: u16,
}

/// The control plane that the tests of module `key` (their `module_path!()`) share, started
/// on first use; `None` when it is not built (a failure instead when
/// `FIELDGUARD_REQUIRE_KUBEAPI` is set, as in `scripts/test.sh`).
pub fn shared_server(key: &'static str) -> Option<&'static KubeApi> {
    static SERVERS: Servers<KubeApi> = Mutex::new(BTreeMap::new());
    per_module(&SERVERS, key, || {
        let l = launch_if_built(&Launch {
            what: "kube-apiserver",
            env: "CONTROLPLANE",
            out: &root().join(".controlplane"),
            bins: &["etcd", "kube-apiserver", "kube-controller-manager"],
            require: "FIELDGUARD_REQUIRE_KUBEAPI",
            start: &root().join("controlplane/start.sh"),
            stop: &root().join("controlplane/stop.sh"),
        })?;
        Some(KubeApi {
            run: l.run,
            kubeconfig: l.kubeconfig,
            port: l.port,
        })
    })
}

impl KubeApi {
    /// A client as `admin` (allowed everything).
    pub async fn api(&self) -> Api {
        self.api_as("admin").await
    }

    /// A client of the given context (`admin`, `alice` or `viewer`).
    pub async fn api_as(&self, context: &str) -> Api {
        let opts = ClusterOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            context: Some(context.into()),
        };
        Api::connect(&opts).await.unwrap().0
    }

    /// The end of one of the control plane's logs (`apiserver`, `controller-manager`, `etcd`).
    pub fn log_tail(&self, which: &str, lines: usize) -> String {
        let log =
            std::fs::read_to_string(self.run.join(format!("{which}.log"))).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}
