//! A replay case's schema: the built-in Kubernetes schemas, an inline smd schema or a schema
//! file, loaded once and kept (bounded) for the cases that give the same schema again.

use crate::schema::{Gvk, Schema, builtin, smd_yaml};
use crate::value::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Schemas each cache keeps before it starts again (cases usually share a few).
pub(super) const MAX_CACHED_SCHEMAS: usize = 64;

/// Bytes of keys each cache keeps before it starts again (a key may be a whole inline schema).
const MAX_CACHED_SCHEMA_BYTES: usize = 64 * 1024 * 1024;

/// Loaded schemas by a text, bounded in count and in the bytes of their keys.
#[derive(Default)]
pub(super) struct Cache {
    loaded: HashMap<Box<str>, Arc<Loaded>>,
    bytes: usize,
}

impl Cache {
    pub(super) fn get(&self, key: &str) -> Option<Arc<Loaded>> {
        self.loaded.get(key).cloned()
    }

    /// A kept key that `text` starts with, by its length, and its schema. Keys are JSON
    /// values: one `text` starts with is its first value when what follows is not part of a
    /// value (callers check that).
    pub(super) fn find_at_start(&self, text: &[u8]) -> Option<(usize, Arc<Loaded>)> {
        self.loaded
            .iter()
            .find(|(k, _)| text.starts_with(k.as_bytes()))
            .map(|(k, l)| (k.len(), l.clone()))
    }

    pub(super) fn insert(&mut self, key: &str, loaded: Arc<Loaded>) {
        if self.loaded.len() >= MAX_CACHED_SCHEMAS
            || self.bytes + key.len() > MAX_CACHED_SCHEMA_BYTES
        {
            self.loaded.clear();
            self.bytes = 0;
        }
        if self.loaded.insert(key.into(), loaded).is_none() {
            self.bytes += key.len();
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.loaded.len()
    }
}

/// The schemas a replayer has loaded: by their JSON (as a case's value), and by the exact
/// text a case line gave (so a case whose schema text was seen before does not build it).
#[derive(Default)]
pub(super) struct Schemas {
    pub(super) by_json: Cache,
    pub(super) by_text: Cache,
}

impl Schemas {
    /// The schema a case's `schema` value names or holds.
    pub(super) fn resolve(&mut self, raw: &Value) -> Result<Arc<Loaded>, String> {
        let key = json::to_string(raw, json::Style::PLAIN);
        if let Some(l) = self.by_json.get(&key) {
            return Ok(l);
        }
        let loaded = Arc::new(load_schema(raw)?);
        self.by_json.insert(&key, loaded.clone());
        Ok(loaded)
    }
}

/// A loaded schema: built in, or read from the case or a file.
pub(super) enum SchemaRef {
    Static(&'static Schema),
    Owned(Arc<Schema>),
}

impl std::ops::Deref for SchemaRef {
    type Target = Schema;
    fn deref(&self) -> &Schema {
        match self {
            SchemaRef::Static(s) => s,
            SchemaRef::Owned(s) => s,
        }
    }
}

/// A case's schema, loaded.
pub(super) struct Loaded {
    pub(super) schema: SchemaRef,
    source: String,
    /// OpenAPI-derived schemas can find types by group/version/kind.
    by_gvk: bool,
}

fn load_schema(raw: &Value) -> Result<Loaded, String> {
    if let Value::String(s) = raw {
        let s = s.trim();
        if s == "k8s" || s.starts_with("k8s-") || s.starts_with("k8s@") {
            let version = if s.len() > 4 {
                &s[4..]
            } else {
                builtin::ORACLE_VERSION
            };
            let schema = builtin::kubernetes(version).map_err(|e| format!("schema {s:?}: {e}"))?;
            return Ok(Loaded {
                schema: SchemaRef::Static(schema),
                source: format!("built-in Kubernetes {version} schema"),
                by_gvk: true,
            });
        }
        if s.contains('\n') || s.starts_with("types:") || s.starts_with('{') {
            return inline(s);
        }
        return file(s);
    }
    let text = json::to_string(raw, json::Style::PLAIN);
    inline(&text)
}

fn inline(text: &str) -> Result<Loaded, String> {
    let schema = smd_yaml::parse(text).map_err(|e| format!("invalid smd schema (inline): {e}"))?;
    Ok(Loaded {
        schema: SchemaRef::Owned(Arc::new(schema)),
        source: "inline".into(),
        by_gvk: false,
    })
}

fn file(path: &str) -> Result<Loaded, String> {
    let data = std::fs::read_to_string(path).map_err(|e| format!("reading schema: {e}"))?;
    let loaded = crate::schema::load_document(&data, path).map_err(|e| e.to_string())?;
    let by_gvk = loaded.gvks().next().is_some();
    Ok(Loaded {
        by_gvk,
        schema: SchemaRef::Owned(Arc::new(loaded)),
        source: path.to_string(),
    })
}

pub(super) fn type_name_for(
    l: &Loaded,
    explicit: &str,
    api_version: &str,
    kind: &str,
) -> Result<String, String> {
    if !explicit.is_empty() {
        if l.schema.find_named(explicit).is_none() {
            return Err(format!(
                "type {explicit:?} not found in schema {}",
                l.source
            ));
        }
        return Ok(explicit.to_string());
    }
    if !l.by_gvk {
        return Err("case has no \"typeName\" (required for smd schemas)".into());
    }
    l.schema
        .type_for(&Gvk::from_api_version(api_version, kind))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "no type for apiVersion={api_version:?} kind={kind:?} in {}; give \"typeName\"",
                l.source
            )
        })
}
