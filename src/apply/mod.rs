//! Applying: the server-side apply path (this module), with selective force, structured 409s and
//! optimistic locking. The release layer (HIP-0023 method selection, client-side apply,
//! CSA→SSA migration, release records) builds on it.

pub mod ssa;
