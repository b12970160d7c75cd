//! The tests against the real apiserver (`../shared/realapi`, built by `scripts/setup.sh` into
//! `.realapi/`), in one test binary: the judge of what fieldguard predicts or writes. One binary
//! links the library's generic code (tokio, tonic, kube, serde) once, where seven binaries each
//! linked their own copy, and its tests run side by side instead of one binary after another.
//!
//! Each module starts a server of its own on first use and its tests share it
//! (`support::realapi::shared_server(module_path!())`): no module sees another's objects,
//! CRDs, history or restarts (`watch` restarts its server and compacts its etcd mid-test). To
//! run one module, filter by its path, e.g. `cargo test --test real -- watch::`.

#[path = "../support/mod.rs"]
mod support;

mod apply;
mod builtin;
mod cel_conventions;
mod cli;
mod config_data;
mod differential;
mod history;
mod immutable;
mod release;
mod validation;
mod watch;
