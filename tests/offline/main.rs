//! Every integration test that needs no real apiserver, in one test binary: the engine against
//! the reference oracle and upstream's tables, the command line, and the service, cache,
//! releases and telemetry against the in-process fake apiserver. One binary links the
//! library's generic code (tokio, tonic, kube, serde) once where fifteen binaries each linked
//! their own copy; the tests are the same and run as they did (`cargo test --test offline --
//! service::` runs one module).
//!
//! The tests against the real apiserver (`tests/real_*.rs`, `tests/apply.rs`) stay binaries of
//! their own: each starts the server its tests share, and `real_watch` restarts and compacts
//! its server mid-test, which no other test may see.

#[path = "../support/mod.rs"]
mod support;

mod cache;
mod check_cli;
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
mod telemetry;
