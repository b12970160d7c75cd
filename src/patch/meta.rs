//! Patch metadata for strategic merge patch: per field, the patch strategies
//! (`x-kubernetes-patch-strategy`: `merge`, `replace`, `retainKeys`) and the merge key
//! (`x-kubernetes-patch-merge-key`), read from OpenAPI v2 (`definitions`) or v3
//! (`components.schemas`) documents — the metadata `kubectl apply` and Helm 3 use. This is not the
//! structured-merge-diff schema: SMP's merge keys and strategies differ from SSA's list types
//! (a container's `ports` merge on `containerPort` alone, for instance).

use super::PatchError;
use crate::value::{Map, Value};
use std::collections::HashMap;

type NodeId = usize;

#[derive(Clone, Debug)]
enum Node {
    /// No schema: every lookup succeeds with default metadata (upstream's nil schema).
    Any,
    Scalar,
    /// A named reference, resolved on lookup.
    Ref(String),
    Struct(HashMap<String, Field>),
    /// `additionalProperties`: every key has the value type.
    Map(NodeId),
    List(NodeId),
}

#[derive(Clone, Debug)]
struct Field {
    strategies: Vec<String>,
    merge_key: String,
    node: NodeId,
}

/// Patch metadata of one field.
#[derive(Clone, Copy, Debug, Default)]
pub struct FieldMeta<'s> {
    strategies: &'s [String],
    merge_key: &'s str,
}

impl<'s> FieldMeta<'s> {
    pub fn merge_key(&self) -> &'s str {
        self.merge_key
    }
    /// Splits the strategies into (retainKeys?, the other strategy or "").
    pub fn strategy(&self) -> Result<(bool, &'s str), PatchError> {
        let s = self.strategies;
        let bad = || PatchError::Invalid(format!("unexpected patch strategy: {s:?}"));
        match s {
            [] => Ok((false, "")),
            [one] if one == "retainKeys" => Ok((true, "")),
            [one] => Ok((false, one)),
            [a, b] if a == "retainKeys" => Ok((true, b)),
            [a, b] if b == "retainKeys" => Ok((true, a)),
            _ => Err(bad()),
        }
    }
}

/// Patch metadata for a set of types.
#[derive(Clone, Debug)]
pub struct PatchSchema {
    nodes: Vec<Node>,
    names: HashMap<String, NodeId>,
    /// (apiVersion, kind) → definition name.
    kinds: HashMap<(String, String), String>,
}

const ANY: NodeId = 0;
const SCALAR: NodeId = 1;

impl PatchSchema {
    fn empty() -> Self {
        PatchSchema {
            nodes: vec![Node::Any, Node::Scalar],
            names: HashMap::new(),
            kinds: HashMap::new(),
        }
    }

    /// Reads an OpenAPI v2 document (`definitions`, `#/definitions/` references).
    pub fn from_openapi_v2(doc: &Value) -> Result<Self, PatchError> {
        let defs = doc
            .get_path(&["definitions"])
            .and_then(Value::as_map)
            .ok_or_else(|| PatchError::Invalid("OpenAPI v2 document without definitions".into()))?;
        Ok(Self::from_definitions(defs))
    }

    /// Reads an OpenAPI v3 document (`components.schemas`, `allOf`-wrapped references).
    pub fn from_openapi_v3(doc: &Value) -> Result<Self, PatchError> {
        let defs = doc
            .get_path(&["components", "schemas"])
            .and_then(Value::as_map)
            .ok_or_else(|| {
                PatchError::Invalid("OpenAPI v3 document without components.schemas".into())
            })?;
        Ok(Self::from_definitions(defs))
    }

    /// Adds the definitions of another OpenAPI v2 or v3 document (later ones win on name
    /// clashes), e.g. one `/openapi/v3` document per group-version.
    pub fn extend(&mut self, doc: &Value) {
        let defs = doc
            .get_path(&["definitions"])
            .or_else(|| doc.get_path(&["components", "schemas"]))
            .and_then(Value::as_map);
        if let Some(defs) = defs {
            self.add_definitions(defs);
        }
    }

    fn from_definitions(defs: &Map) -> Self {
        let mut s = PatchSchema::empty();
        s.add_definitions(defs);
        s
    }

    fn add_definitions(&mut self, defs: &Map) {
        for (name, def) in defs.iter() {
            let id = self.node_of(def);
            self.names.insert(name.to_string(), id);
            for gvk in def
                .get_path(&["x-kubernetes-group-version-kind"])
                .and_then(Value::as_list)
                .unwrap_or(&[])
            {
                let (g, v, k) = (
                    gvk.str_at(&["group"]).unwrap_or(""),
                    gvk.str_at(&["version"]).unwrap_or(""),
                    gvk.str_at(&["kind"]).unwrap_or(""),
                );
                let api_version = if g.is_empty() {
                    v.to_string()
                } else {
                    format!("{g}/{v}")
                };
                self.kinds
                    .insert((api_version, k.to_string()), name.to_string());
            }
        }
    }

    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn node_of(&mut self, v: &Value) -> NodeId {
        let Some(m) = v.as_map() else {
            return ANY;
        };
        if let Some(r) = ref_of(m) {
            return self.push(Node::Ref(r));
        }
        if let Some(props) = m.get("properties").and_then(Value::as_map) {
            let mut fields = HashMap::new();
            for (k, pv) in props.iter() {
                let node = self.node_of(pv);
                let pm = pv.as_map();
                let strategies = pm
                    .and_then(|p| p.get("x-kubernetes-patch-strategy"))
                    .and_then(Value::as_str)
                    .map(|s| s.split(',').map(str::to_string).collect())
                    .unwrap_or_default();
                let merge_key = pm
                    .and_then(|p| p.get("x-kubernetes-patch-merge-key"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                fields.insert(
                    k.to_string(),
                    Field {
                        strategies,
                        merge_key,
                        node,
                    },
                );
            }
            return self.push(Node::Struct(fields));
        }
        match m.get("type").and_then(Value::as_str) {
            Some("array") => {
                let items = m.get("items").map(|i| self.node_of(i)).unwrap_or(ANY);
                self.push(Node::List(items))
            }
            Some("object") => {
                let value = match m.get("additionalProperties") {
                    Some(ap @ Value::Map(_)) => self.node_of(ap),
                    _ => ANY,
                };
                self.push(Node::Map(value))
            }
            Some(_) => SCALAR,
            None => ANY,
        }
    }

    /// The root of the type an object of this apiVersion and kind has (None: unknown kind).
    pub fn root_for(&self, api_version: &str, kind: &str) -> Option<Meta<'_>> {
        let name = self
            .kinds
            .get(&(api_version.to_string(), kind.to_string()))?;
        self.named(name)
    }

    /// The root of the named type.
    pub fn named(&self, name: &str) -> Option<Meta<'_>> {
        let node = *self.names.get(name)?;
        Some(Meta {
            schema: Some(self),
            node,
            path: name.to_string(),
        })
    }
}

fn ref_of(m: &Map) -> Option<String> {
    let r = match m.get("$ref").and_then(Value::as_str) {
        Some(r) => r,
        None => match m.get("allOf").and_then(Value::as_list) {
            Some([one]) => one.str_at(&["$ref"])?,
            _ => return None,
        },
    };
    Some(r.rsplit('/').next().unwrap_or(r).to_string())
}

/// A position in a [`PatchSchema`] (or nowhere: no schema, every lookup succeeds).
#[derive(Clone, Debug)]
pub struct Meta<'s> {
    schema: Option<&'s PatchSchema>,
    node: NodeId,
    path: String,
}

impl<'s> Meta<'s> {
    /// No metadata at all (custom resources, unknown kinds).
    pub fn none() -> Meta<'static> {
        Meta {
            schema: None,
            node: ANY,
            path: String::new(),
        }
    }

    fn resolved(&self) -> Option<(&'s PatchSchema, &'s Node)> {
        let s = self.schema?;
        let mut node = &s.nodes[self.node];
        for _ in 0..64 {
            match node {
                Node::Ref(name) => match s.names.get(name) {
                    Some(&id) => node = &s.nodes[id],
                    None => return None,
                },
                other => return Some((s, other)),
            }
        }
        None
    }

    fn at(&self, node: NodeId, key: &str) -> Meta<'s> {
        Meta {
            schema: self.schema,
            node,
            path: format!("{}.{key}", self.path),
        }
    }

    fn not_found(&self, key: &str) -> PatchError {
        PatchError::Invalid(format!("unable to find api field {key:?} in {}", self.path))
    }

    /// Metadata of the map-valued field `key`, and the field's type.
    pub fn lookup_struct(&self, key: &str) -> Result<(Meta<'s>, FieldMeta<'s>), PatchError> {
        let Some((_, node)) = self.resolved() else {
            return Ok((self.at(ANY, key), FieldMeta::default()));
        };
        match node {
            Node::Any => Ok((self.at(ANY, key), FieldMeta::default())),
            Node::Map(v) => Ok((self.at(*v, key), FieldMeta::default())),
            Node::Struct(fields) => match fields.get(key) {
                Some(f) => Ok((
                    self.at(f.node, key),
                    FieldMeta {
                        strategies: &f.strategies,
                        merge_key: &f.merge_key,
                    },
                )),
                None => Err(self.not_found(key)),
            },
            _ => Err(self.not_found(key)),
        }
    }

    /// Metadata of the list-valued field `key`, and the type of its items.
    pub fn lookup_slice(&self, key: &str) -> Result<(Meta<'s>, FieldMeta<'s>), PatchError> {
        let (field, meta) = self.lookup_struct(key)?;
        let items = match field.resolved() {
            Some((_, Node::List(items))) => *items,
            _ => field.node,
        };
        Ok((
            Meta {
                schema: field.schema,
                node: items,
                path: field.path,
            },
            meta,
        ))
    }
}

/// Patch metadata of the Kubernetes API built into the binary (from the bundled OpenAPI v2
/// document of `version`).
pub fn kubernetes(version: &str) -> Result<&'static PatchSchema, PatchError> {
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, &'static PatchSchema>>> = OnceLock::new();
    let version = match version {
        "k8s" => crate::schema::builtin::DEFAULT_VERSION.to_string(),
        v if v.starts_with('v') => v.to_string(),
        v => format!("v{v}"),
    };
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = cache.get(&version) {
        return Ok(s);
    }
    let (_, text) = crate::schema::builtin::swagger_json(&version)
        .map_err(|e| PatchError::Invalid(e.to_string()))?;
    let doc = crate::value::json::parse(text.as_bytes())
        .map_err(|e| PatchError::Invalid(format!("built-in OpenAPI: {e}")))?;
    let schema: &'static PatchSchema = Box::leak(Box::new(PatchSchema::from_openapi_v2(&doc)?));
    cache.insert(version, schema);
    Ok(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Client-side apply patches every built-in kind of the default version with a strategic
    /// merge patch (kubectl does), never a JSON merge patch for want of metadata.
    #[test]
    fn every_builtin_kind_of_the_default_version_has_patch_metadata() {
        let v = crate::catalog::DEFAULT_KUBERNETES;
        let meta = kubernetes(v).unwrap();
        let schema = crate::schema::builtin::kubernetes(v).unwrap();
        let mut n = 0;
        for (gvk, _) in schema.gvks() {
            if gvk.kind.ends_with("List") || gvk.kind == "WatchEvent" || gvk.kind.is_empty() {
                continue;
            }
            n += 1;
            assert!(
                meta.root_for(&gvk.api_version(), &gvk.kind).is_some(),
                "no strategic-merge metadata for {gvk:?} in {v}"
            );
        }
        assert!(n > 100, "{n} kinds");
    }
}
