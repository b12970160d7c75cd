//! Applying releases: server-side apply with selective force, structured 409s and optimistic
//! locking (`ssa`); client-side apply with three-way patches (`client_side`); Helm 4's HIP-0023
//! method rules and revision records (`release`), kept where `HELM_DRIVER` says (`storage`);
//! CSA→SSA migration (`migrate`); waiting for workloads and deletions (`wait`); Helm hooks run in
//! their phases (`hooks`), keeping their logs and events for diagnosis (`hook_logs`); recreation of objects the server would refuse to update
//! (`recreate`); the release run that ties them together (`run`, writing objects in `objects`,
//! answering with `outcome`); and uninstalling (`uninstall`).

pub mod client_side;
pub mod hook_logs;
pub mod hooks;
pub mod migrate;
mod objects;
pub mod outcome;
pub mod recreate;
pub mod release;
pub mod run;
pub mod ssa;
pub mod storage;
pub mod uninstall;
pub mod wait;
