//! The schema data model (structured-merge-diff `schema` package) and type resolution.

use crate::value::{Str, Value};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};

/// Name of the built-in type for content that is replaced as a whole.
pub const UNTYPED_ATOMIC_TYPE: &str = "__untyped_atomic_";
/// Name of the built-in type for content without a schema (maps granular, lists atomic).
pub const DEDUCED_TYPE: &str = "__untyped_deduced_";

/// Kind of scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scalar {
    Numeric,
    String,
    Boolean,
    Untyped,
}

impl Scalar {
    pub fn as_str(self) -> &'static str {
        match self {
            Scalar::Numeric => "numeric",
            Scalar::String => "string",
            Scalar::Boolean => "boolean",
            Scalar::Untyped => "untyped",
        }
    }
    pub fn parse(s: &str) -> Option<Scalar> {
        Some(match s {
            "numeric" => Scalar::Numeric,
            "string" => Scalar::String,
            "boolean" => Scalar::Boolean,
            "untyped" => Scalar::Untyped,
            _ => return None,
        })
    }
}

/// How the elements of a list or map relate to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ElementRelationship {
    /// Map keys are owned separately (the default for maps; written as empty).
    #[default]
    Separable,
    /// Replaced and owned as a whole.
    Atomic,
    /// List items are identified by keys (list map) or by value (set).
    Associative,
}

impl ElementRelationship {
    pub fn as_str(self) -> &'static str {
        match self {
            ElementRelationship::Separable => "separable",
            ElementRelationship::Atomic => "atomic",
            ElementRelationship::Associative => "associative",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "separable" | "" => ElementRelationship::Separable,
            "atomic" => ElementRelationship::Atomic,
            "associative" => ElementRelationship::Associative,
            _ => return None,
        })
    }
}

/// A list type.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct List {
    pub element_type: TypeRef,
    pub element_relationship: ElementRelationship,
    /// Key fields of a list map (empty for sets and atomic lists).
    pub keys: Vec<Str>,
}

/// A map or struct type (smd treats both alike).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MapType {
    /// Declared fields, in schema order.
    pub fields: Vec<StructField>,
    /// Type of undeclared keys; `TypeRef::EMPTY` means undeclared keys are invalid.
    pub element_type: TypeRef,
    pub element_relationship: ElementRelationship,
    /// Field name -> index, built by [`Schema::new`] (last declaration wins, like Go's map).
    #[serde(skip)]
    index: rustc_hash::FxHashMap<Str, u32>,
}

impl MapType {
    pub fn new(
        fields: Vec<StructField>,
        element_type: TypeRef,
        element_relationship: ElementRelationship,
    ) -> Self {
        MapType {
            fields,
            element_type,
            element_relationship,
            index: Default::default(),
        }
    }

    /// The declared field called `name`.
    pub fn find_field(&self, name: &str) -> Option<&StructField> {
        if self.index.len() != self.fields.len() && self.index.is_empty() {
            return self.fields.iter().rev().find(|f| f.name == name);
        }
        self.index.get(name).map(|&i| &self.fields[i as usize])
    }

    fn index(&mut self) {
        self.index = self
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.clone(), i as u32))
            .collect();
    }
}

/// A declared struct field.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StructField {
    pub name: Str,
    pub ty: TypeRef,
    /// The default value, used to fill missing list-map key fields.
    #[serde(with = "super::compiled::optional_value")]
    pub default: Option<Value>,
}

/// A type: any combination of scalar, list and map (the value decides which applies).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Atom {
    pub scalar: Option<Scalar>,
    pub list: Option<Box<List>>,
    pub map: Option<Box<MapType>>,
}

impl Atom {
    pub const EMPTY: Atom = Atom {
        scalar: None,
        list: None,
        map: None,
    };
    pub fn is_empty(&self) -> bool {
        self.scalar.is_none() && self.list.is_none() && self.map.is_none()
    }
    pub fn scalar(s: Scalar) -> Atom {
        Atom {
            scalar: Some(s),
            ..Atom::default()
        }
    }
}

/// A reference to a type: by name, or inline; optionally overriding the element relationship of
/// the referenced map or list (used for `x-kubernetes-map-type` on a field).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TypeRef {
    pub named: Option<Str>,
    /// Index of `named` in the schema, filled by [`Schema::new`] (`u32::MAX`: unknown name).
    #[serde(skip, default = "unlinked")]
    named_idx: u32,
    pub inlined: Atom,
    pub element_relationship: Option<ElementRelationship>,
}

impl TypeRef {
    pub const EMPTY: TypeRef = TypeRef {
        named: None,
        named_idx: u32::MAX,
        inlined: Atom::EMPTY,
        element_relationship: None,
    };
    pub fn named(name: &str) -> TypeRef {
        TypeRef {
            named: Some(Str::from(name)),
            named_idx: u32::MAX,
            ..TypeRef::default()
        }
    }
    pub fn inline(atom: Atom) -> TypeRef {
        TypeRef {
            inlined: atom,
            named_idx: u32::MAX,
            ..TypeRef::default()
        }
    }
    /// True for the "no type" reference (undeclared keys are invalid).
    pub fn is_empty(&self) -> bool {
        self.named.is_none() && self.inlined.is_empty() && self.element_relationship.is_none()
    }
    pub fn name(&self) -> Option<&str> {
        self.named.as_deref()
    }
}

/// A reference not linked to a schema yet.
fn unlinked() -> u32 {
    u32::MAX
}

/// A named type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TypeDef {
    pub name: Str,
    pub atom: Atom,
}

/// An atom as seen through a [`TypeRef`] (element-relationship override applied).
#[derive(Clone, Copy, Debug)]
pub struct Resolved<'s> {
    pub scalar: Option<Scalar>,
    pub list: Option<&'s List>,
    pub map: Option<&'s MapType>,
    list_er: Option<ElementRelationship>,
    map_er: Option<ElementRelationship>,
}

impl<'s> Resolved<'s> {
    pub fn list_er(&self) -> ElementRelationship {
        self.list_er
            .or(self.list.map(|l| l.element_relationship))
            .unwrap_or_default()
    }
    pub fn map_er(&self) -> ElementRelationship {
        self.map_er
            .or(self.map.map(|m| m.element_relationship))
            .unwrap_or_default()
    }
    /// Keeps only the part of the atom that matches the value (smd `deduceAtom`).
    pub fn deduce(self, v: Option<&Value>) -> Resolved<'s> {
        match v {
            Some(Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::String(_))
                if self.scalar.is_some() =>
            {
                Resolved {
                    list: None,
                    map: None,
                    ..self
                }
            }
            Some(Value::List(_)) if self.list.is_some() => Resolved {
                scalar: None,
                map: None,
                ..self
            },
            Some(Value::Map(_)) if self.map.is_some() => Resolved {
                scalar: None,
                list: None,
                ..self
            },
            _ => self,
        }
    }
    /// Which parts are present; two deductions of one atom are equal iff these agree.
    pub fn shape(&self) -> (bool, bool, bool) {
        (
            self.scalar.is_some(),
            self.list.is_some(),
            self.map.is_some(),
        )
    }
}

/// A schema problem (conversion or loading).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// Group, version and kind of an object type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }
    /// From an `apiVersion` (`apps/v1`, `v1`) and a kind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Gvk {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        Gvk::new(group, version, kind)
    }
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, Kind={}", self.api_version(), self.kind)
    }
}

/// A set of named types, with named references resolved to indexes.
#[derive(Clone, Debug, Default)]
pub struct Schema {
    types: Vec<TypeDef>,
    by_name: HashMap<Str, u32>,
    gvks: HashMap<Gvk, Str>,
}

impl Schema {
    /// Builds a schema. Later definitions of a name replace earlier ones.
    pub fn new(types: Vec<TypeDef>) -> Schema {
        let mut s = Schema {
            types,
            by_name: HashMap::default(),
            gvks: HashMap::default(),
        };
        s.reindex();
        s
    }

    /// The schema for objects without one: everything is `__untyped_deduced_`.
    pub fn deduced() -> Schema {
        Schema::new(common_types())
    }

    fn reindex(&mut self) {
        self.by_name.clear();
        for (i, t) in self.types.iter().enumerate() {
            self.by_name.insert(t.name.clone(), i as u32);
        }
        let by_name = std::mem::take(&mut self.by_name);
        for t in &mut self.types {
            link_atom(&mut t.atom, &by_name);
        }
        self.by_name = by_name;
    }

    pub fn types(&self) -> &[TypeDef] {
        &self.types
    }

    pub fn find_named(&self, name: &str) -> Option<&TypeDef> {
        self.by_name.get(name).map(|&i| &self.types[i as usize])
    }

    /// A reference to a named type of this schema, linked for fast resolution.
    pub fn type_ref(&self, name: &str) -> TypeRef {
        let mut tr = TypeRef::named(name);
        if let Some(&i) = self.by_name.get(name) {
            tr.named_idx = i;
        }
        tr
    }

    /// Resolves a type reference (smd `Schema.Resolve`). `None` if the name is unknown or an
    /// element-relationship override points at something that is neither a map nor a list.
    pub fn resolve<'s>(&'s self, tr: &'s TypeRef) -> Option<Resolved<'s>> {
        let atom: &Atom = match &tr.named {
            Some(name) => {
                let idx = if tr.named_idx != u32::MAX {
                    tr.named_idx
                } else {
                    *self.by_name.get(name.as_str())?
                };
                &self.types.get(idx as usize)?.atom
            }
            None => &tr.inlined,
        };
        let mut r = Resolved {
            scalar: atom.scalar,
            list: atom.list.as_deref(),
            map: atom.map.as_deref(),
            list_er: None,
            map_er: None,
        };
        if let Some(er) = tr.element_relationship {
            if r.map.is_some() {
                r.map_er = Some(er);
            } else if r.list.is_some() {
                r.list_er = Some(er);
            } else {
                return None;
            }
        }
        Some(r)
    }

    /// Registers the type that serves a group/version/kind.
    pub fn add_gvk(&mut self, gvk: Gvk, type_name: &str) {
        self.gvks.insert(gvk, Str::from(type_name));
    }

    /// The type name for a group/version/kind.
    pub fn type_for(&self, gvk: &Gvk) -> Option<&str> {
        self.gvks.get(gvk).map(|s| s.as_str())
    }

    pub fn gvks(&self) -> impl Iterator<Item = (&Gvk, &str)> {
        self.gvks.iter().map(|(g, n)| (g, n.as_str()))
    }

    /// Adds or replaces types (and their GVKs) from `other`.
    pub fn extend(&mut self, other: Schema) {
        for t in other.types {
            match self.by_name.get(&t.name) {
                Some(&i) => self.types[i as usize] = t,
                None => {
                    self.by_name.insert(t.name.clone(), self.types.len() as u32);
                    self.types.push(t);
                }
            }
        }
        self.gvks.extend(other.gvks);
        self.reindex();
    }

    /// Copies field defaults and field-level element-relationship overrides from `overlay` into
    /// types and fields present in both (how the reference oracle completes an OpenAPI v2 schema
    /// with the smd schema Kubernetes generates). Returns the number of attributes copied.
    pub fn overlay(&mut self, overlay: &Schema) -> usize {
        let mut n = 0;
        for t in &mut self.types {
            let Some(o) = overlay.find_named(&t.name) else {
                continue;
            };
            let (Some(m), Some(om)) = (t.atom.map.as_deref_mut(), o.atom.map.as_deref()) else {
                continue;
            };
            for f in &mut m.fields {
                let Some(src) = om.fields.iter().find(|x| x.name == f.name) else {
                    continue;
                };
                if f.default.is_none() && src.default.is_some() {
                    f.default = src.default.clone();
                    n += 1;
                }
                if f.ty.element_relationship.is_none() && src.ty.element_relationship.is_some() {
                    f.ty.element_relationship = src.ty.element_relationship;
                    n += 1;
                }
            }
        }
        self.reindex();
        n
    }

    /// Names of types reachable from `roots` (for copying dependencies into another schema).
    pub fn closure(&self, roots: &[&str]) -> Vec<TypeDef> {
        let mut seen = foldhash::HashSet::default();
        let mut stack: Vec<Str> = roots.iter().map(|r| Str::from(*r)).collect();
        let mut out = Vec::new();
        while let Some(name) = stack.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(t) = self.find_named(&name) {
                collect_names(&t.atom, &mut stack);
                out.push(t.clone());
            }
        }
        out
    }
}

fn collect_names(a: &Atom, out: &mut Vec<Str>) {
    let tr = |t: &TypeRef, out: &mut Vec<Str>| {
        if let Some(n) = &t.named {
            out.push(n.clone());
        }
        collect_names(&t.inlined, out);
    };
    if let Some(l) = &a.list {
        tr(&l.element_type, out);
    }
    if let Some(m) = &a.map {
        tr(&m.element_type, out);
        for f in &m.fields {
            tr(&f.ty, out);
        }
    }
}

fn link_ref(tr: &mut TypeRef, by_name: &HashMap<Str, u32>) {
    tr.named_idx = match &tr.named {
        Some(n) => by_name.get(n).copied().unwrap_or(u32::MAX),
        None => u32::MAX,
    };
    link_atom(&mut tr.inlined, by_name);
}

fn link_atom(a: &mut Atom, by_name: &HashMap<Str, u32>) {
    if let Some(l) = a.list.as_deref_mut() {
        link_ref(&mut l.element_type, by_name);
    }
    if let Some(m) = a.map.as_deref_mut() {
        link_ref(&mut m.element_type, by_name);
        for f in &mut m.fields {
            link_ref(&mut f.ty, by_name);
        }
        m.index();
    }
}

/// The two helper types every converted schema carries.
pub fn common_types() -> Vec<TypeDef> {
    vec![
        TypeDef {
            name: UNTYPED_ATOMIC_TYPE.into(),
            atom: Atom {
                scalar: Some(Scalar::Untyped),
                list: Some(Box::new(List {
                    element_type: TypeRef::named(UNTYPED_ATOMIC_TYPE),
                    element_relationship: ElementRelationship::Atomic,
                    keys: vec![],
                })),
                map: Some(Box::new(MapType::new(
                    vec![],
                    TypeRef::named(UNTYPED_ATOMIC_TYPE),
                    ElementRelationship::Atomic,
                ))),
            },
        },
        TypeDef {
            name: DEDUCED_TYPE.into(),
            atom: deduced_atom(),
        },
    ]
}

/// The atom of `__untyped_deduced_`.
pub fn deduced_atom() -> Atom {
    Atom {
        scalar: Some(Scalar::Untyped),
        list: Some(Box::new(List {
            element_type: TypeRef::named(UNTYPED_ATOMIC_TYPE),
            element_relationship: ElementRelationship::Atomic,
            keys: vec![],
        })),
        map: Some(Box::new(MapType::new(
            vec![],
            TypeRef::named(DEDUCED_TYPE),
            ElementRelationship::Separable,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_applies_to_map_first_and_fails_on_scalars() {
        let s = Schema::new(vec![
            TypeDef {
                name: "m".into(),
                atom: Atom {
                    map: Some(Box::new(MapType::default())),
                    ..Atom::default()
                },
            },
            TypeDef {
                name: "s".into(),
                atom: Atom::scalar(Scalar::String),
            },
        ]);
        let mut tr = s.type_ref("m");
        tr.element_relationship = Some(ElementRelationship::Atomic);
        assert_eq!(
            s.resolve(&tr).unwrap().map_er(),
            ElementRelationship::Atomic
        );
        let mut ts = s.type_ref("s");
        ts.element_relationship = Some(ElementRelationship::Atomic);
        assert!(s.resolve(&ts).is_none());
        assert!(s.resolve(&TypeRef::named("missing")).is_none());
    }
}
