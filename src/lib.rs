//! fieldguard
pub mod cli;
pub mod fieldpath;
pub mod managedfields;
pub mod merge;
pub mod predict;
pub mod replay;
pub mod schema;
pub mod typed;
pub mod value;
