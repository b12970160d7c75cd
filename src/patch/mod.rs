//! Client-side patches — what `kubectl apply` (client-side) and Helm 3 compute and send:
//! strategic merge patch for built-in kinds (`strategic`, with patch metadata from OpenAPI in
//! `meta`), JSON merge patch (RFC 7386) for custom resources (`json_merge`). Pure functions on
//! [`Value`](crate::value::Value) trees; the applier sends the results.

mod gosort;
pub mod json_merge;
pub mod meta;
pub mod strategic;

/// Why a patch could not be created or applied.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// Malformed input or metadata (the message says what and where).
    #[error("{0}")]
    Invalid(String),
    /// A three-way patch would overwrite a change made since the last apply (only when not
    /// overwriting).
    #[error("conflict: {0}")]
    Conflict(String),
}

/// Reads a JSON object document (an absent document is `{}`), as the upstream patch functions do.
pub fn parse_document(bytes: Option<&[u8]>) -> Result<crate::value::Map, PatchError> {
    let Some(bytes) = bytes else {
        return Ok(crate::value::Map::new());
    };
    match crate::value::json::parse(bytes) {
        Ok(crate::value::Value::Map(m)) => Ok(m),
        Ok(crate::value::Value::Null) => Ok(crate::value::Map::new()),
        _ => Err(PatchError::Invalid("invalid JSON document".into())),
    }
}
