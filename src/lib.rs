//! fieldguard: predicts what a Kubernetes server-side apply will do to field ownership —
//! conflicts, takeovers, removals — with kube-apiserver's exact semantics, before it happens.
//!
//! # Where things are
//!
//! The engine (no I/O, no async), bottom up:
//!
//! | module | what it holds |
//! |---|---|
//! | [`value`] | the untyped object tree, JSON/YAML in and out with Go's conventions |
//! | [`fieldpath`] | path elements, field sets (tries), the FieldsV1 wire format |
//! | [`schema`] | the merge schema: from OpenAPI v2/v3, CRDs, smd YAML; built-in bundles |
//! | [`typed`] | values read through a schema: validation, field sets, merge, comparison |
//! | [`merge`] | structured-merge-diff's updater: apply and update over managers' sets |
//! | [`managedfields`] | kube-apiserver's field-manager layer: entries, identities, 409s |
//! | [`defaulting`] | what kube-apiserver fills into built-in kinds before it stores them |
//! | [`predict`] | one apply predicted, with explanations |
//!
//! Around it: [`replay`] (the reference oracle's case format) and [`cli`]; [`deadline`] lets
//! long loops stop when their caller gives up.
//!
//! # How data flows
//!
//! ```text
//! live object + managedFields ──► Prepared (decode FieldsV1, reconcile, index lists)
//!                                        │
//! manifest ──► value ──► typed::apply_walk (validate, field set, merge, compare, one pass)
//!                                        │
//!                      merge::Updater (claim, prune, conflicts, ownership moves)
//!                                        │
//!                      managedfields (identities, stripped fields, caps, times)
//!                                        │
//!                      predict (verdict, conflicts with owners and values, takeovers,
//!                               shared, removed, stuck fields; the 409 text)
//! ```
//!
//! Every step reproduces the reference's observable behaviour; where it takes a shortcut
//! (the one-pass walk, the prune check), the reference-shaped algorithm is kept beside it,
//! used whenever the shortcut does not apply, and compared with it in debug builds and tests.
pub mod allocator;
pub mod apply;
pub mod cache;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod cores;
pub mod deadline;
pub mod defaulting;
pub mod fieldpath;
pub mod history;
pub mod live;
pub mod managedfields;
pub mod manifest;
pub mod merge;
pub mod ownership;
pub mod patch;
pub mod predict;
pub mod replay;
pub mod report;
pub mod schema;
pub mod service;
pub mod telemetry;
pub mod typed;
pub mod validation;
pub mod value;
