//! Field paths and field sets: what a manager owns, and the FieldsV1 wire format.

mod decode;
#[cfg(test)]
mod decode_reference;
mod element;
mod encode;
mod serialize;
mod set;

pub use element::{KeyField, Path, PathElement, value_to_string};
pub use serialize::{FieldsV1Error, deserialize_path_element, serialize_path_element};
pub use set::Set;
