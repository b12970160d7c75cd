//! The integration tests that need neither the real apiserver nor a process of their own, in
//! one test binary: the engine against the reference oracle and upstream's tables, the command
//! line, and the service, cache and releases against the in-process fake apiserver. One binary
//! links the library's generic code (tokio, tonic, kube, serde) once, where fourteen binaries
//! each linked their own copy. The modules share this process and its test threads; none
//! installs a process-wide subscriber or hook. To run one module, filter by its path, e.g.
//! `cargo test --test offline -- cache::` (a filter matches anywhere in a test's path:
//! `service::` also runs `history_service::`).
//!
//! Binaries of their own: the tests against the real apiserver (`tests/real/`: each module
//! starts a server its tests share, and `watch` restarts and compacts its server mid-test); and
//! `tests/telemetry.rs`, which installs the process-wide tracing subscriber and asserts on the
//! spans it collects. proptest keeps its regression seeds
//! in `tests/proptest-regressions/` (the directory beside the one holding this `main.rs`).

#[path = "../support/mod.rs"]
mod support;

mod cache;
mod cel_upstream;
mod check_cli;
mod defaults;
#[cfg(feature = "generator")]
mod differential;
mod fieldsv1;
mod history_service;
mod hostile_cli;
mod hostile_input;
mod patch_cases;
mod predict;
mod properties;
mod release;
mod schema;
mod secrets;
mod service;
mod validation_oracle;
