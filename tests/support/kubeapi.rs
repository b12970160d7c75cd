//! The real control plane (`controlplane/`): kube-apiserver and kube-controller-manager of
//! Kubernetes 1.36 over etcd, built from their Go modules by `scripts/setup.sh` into
//! `.controlplane/`. The judge of every built-in kind: its defaulting, validation, strategic
//! merge patch, field manager, RBAC and the controllers' own writes.
//!
//! One control plane per test module ([`shared_server`]), stopped by a watchdog when the test
//! binary exits. There is no kubelet and no scheduler: a test that needs a Pod or Job to finish
//! writes its status as the kubelet or the job controller would, and says so. It is driven as
//! the real tier's server is ([`RealApi`]: clients, restarts, etcd compaction, logs): clients
//! reach kube-apiserver itself, at the base port + 2; its kubeconfig has contexts `admin`
//! (system:masters), `alice` and `viewer` (no rights until a test binds some).

use super::realapi::{Launch, RealApi, Servers, launch_if_built, per_module, root};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A running control plane.
pub type KubeApi = RealApi;

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
            client: l.port + 2,
        })
    })
}
