//! A custom resource's structural schema (`openAPIV3Schema` of a CRD version, or the schema a
//! cluster publishes at `/openapi/v3`) as the apiserver uses it on the object it is about to
//! store: the defaults it fills in ([`super::defaults`]) and the value constraints it checks.

use crate::value::{Map, Value};
use regex::Regex;
use std::sync::Arc;

/// One node of a structural schema.
#[derive(Clone, Debug, Default)]
pub struct Structural {
    /// `object`, `array`, `string`, `integer`, `number`, `boolean` (`None`: any).
    pub ty: Option<String>,
    pub nullable: bool,
    pub int_or_string: bool,
    pub properties: Vec<(String, Structural)>,
    pub additional: Option<Box<Structural>>,
    pub items: Option<Box<Structural>>,
    pub required: Vec<String>,
    pub enumeration: Option<Vec<Value>>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<i64>,
    pub max_length: Option<i64>,
    /// The pattern as written, and compiled with Go's meaning ([`super::re2`]), or why not.
    pub pattern: Option<(String, Result<Arc<Regex>, super::re2::Refusal>)>,
    pub min_items: Option<i64>,
    pub max_items: Option<i64>,
    pub min_properties: Option<i64>,
    pub max_properties: Option<i64>,
    pub format: Option<String>,
    /// `x-kubernetes-validations` rules at this node (CEL: [`super::cel`]).
    pub rules: Vec<super::cel::Rule>,
    /// The keys of a `x-kubernetes-list-type: map` list (its items correlate with the old
    /// object's by them; other lists' items do not).
    pub list_map_keys: Option<Vec<String>>,
    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`).
    pub list_type: Option<String>,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded: bool,
    /// Constraints under `allOf`/`anyOf`/`oneOf`/`not` (not evaluated by fieldguard).
    pub junctors: bool,
    /// The value the apiserver fills in where the field is absent (or a null it may not hold):
    /// [`super::defaults`].
    pub default: Option<Value>,
    /// Whether this node or one below it has a default (defaulting skips subtrees without).
    pub defaults_below: bool,
    /// Known to have no `x-kubernetes-validations` rule at or below it (the rules' walk skips
    /// such subtrees; `false`, the default, only says it may have some).
    pub no_rules_below: bool,
}

impl Structural {
    /// Reads a schema node. `components` resolves `$ref`s (`#/components/schemas/NAME`) of a
    /// published document; a reference to ObjectMeta (validated by the apiserver's Go code,
    /// not by the schema) and unresolvable ones read as "anything".
    pub fn from_value(v: &Value, components: Option<&Map>) -> Structural {
        Self::read(v, components, 0)
    }

    fn read(v: &Value, components: Option<&Map>, depth: usize) -> Structural {
        let Some(m) = v.as_map() else {
            return Structural::default();
        };
        if depth > 64 {
            return Structural::default();
        }
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/components/schemas/");
            if name == crate::typed::OBJECT_META {
                return Structural::default();
            }
            return match components.and_then(|c| c.get(name)) {
                Some(t) => Self::read(t, components, depth + 1),
                None => Structural::default(),
            };
        }
        // A published document wraps referenced types in `allOf: [{$ref}]`.
        if let Some(Value::List(all)) = m.get("allOf")
            && all.len() == 1
            && all[0].as_map().is_some_and(|a| a.contains_key("$ref"))
        {
            let mut s = Self::read(&all[0], components, depth + 1);
            s.nullable |= m.get("nullable") == Some(&Value::Bool(true));
            if let Some(d) = m.get("default").filter(|d| !d.is_null()) {
                s.default = Some(d.clone());
                s.defaults_below = true;
            }
            return s;
        }
        let int = |k: &str| match m.get(k) {
            Some(Value::Int(i)) => Some(*i),
            Some(Value::Float(f)) if f.fract() == 0.0 => Some(*f as i64),
            _ => None,
        };
        let num = |k: &str| match m.get(k) {
            Some(Value::Int(i)) => Some(*i as f64),
            Some(Value::Float(f)) => Some(*f),
            _ => None,
        };
        let flag = |k: &str| m.get(k) == Some(&Value::Bool(true));
        let string = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        let child = |k: &str| {
            m.get(k)
                .filter(|c| c.as_map().is_some())
                .map(|c| Box::new(Self::read(c, components, depth + 1)))
        };
        let mut s = Structural {
            ty: string("type"),
            nullable: flag("nullable"),
            int_or_string: flag("x-kubernetes-int-or-string"),
            properties: match m.get("properties") {
                Some(Value::Map(p)) => p
                    .iter()
                    .map(|(k, c)| (k.to_string(), Self::read(c, components, depth + 1)))
                    .collect(),
                _ => Vec::new(),
            },
            additional: child("additionalProperties"),
            items: child("items"),
            required: match m.get("required") {
                Some(Value::List(r)) => r
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
                _ => Vec::new(),
            },
            enumeration: match m.get("enum") {
                Some(Value::List(e)) => Some(e.clone()),
                _ => None,
            },
            minimum: num("minimum"),
            maximum: num("maximum"),
            exclusive_minimum: flag("exclusiveMinimum"),
            exclusive_maximum: flag("exclusiveMaximum"),
            multiple_of: num("multipleOf"),
            min_length: int("minLength"),
            max_length: int("maxLength"),
            pattern: string("pattern").map(|p| {
                let re = super::re2::compile(&p).map(Arc::new);
                (p, re)
            }),
            min_items: int("minItems"),
            max_items: int("maxItems"),
            min_properties: int("minProperties"),
            max_properties: int("maxProperties"),
            format: string("format"),
            rules: match m.get("x-kubernetes-validations") {
                Some(Value::List(r)) => r.iter().map(super::cel::Rule::from_value).collect(),
                _ => Vec::new(),
            },
            list_map_keys: (string("x-kubernetes-list-type").as_deref() == Some("map")).then(
                || match m.get("x-kubernetes-list-map-keys") {
                    Some(Value::List(ks)) => ks
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                    _ => Vec::new(),
                },
            ),
            list_type: string("x-kubernetes-list-type"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
            embedded: flag("x-kubernetes-embedded-resource"),
            // A published int-or-string field carries `anyOf: [integer, string]`: that is its
            // type, checked as such, not a junctor left unevaluated.
            junctors: ["allOf", "anyOf", "oneOf", "not"]
                .iter()
                .any(|k| m.contains_key(k))
                && !(flag("x-kubernetes-int-or-string")
                    && !m.contains_key("allOf")
                    && !m.contains_key("oneOf")
                    && !m.contains_key("not")),
            // A `null` default is none (Go's `Default.Object == nil`).
            default: m.get("default").filter(|d| !d.is_null()).cloned(),
            defaults_below: false,
            no_rules_below: false,
        };
        s.no_rules_below = s.rules.is_empty()
            && s.properties.iter().all(|(_, p)| p.no_rules_below)
            && s.additional.as_ref().is_none_or(|a| a.no_rules_below)
            && s.items.as_ref().is_none_or(|i| i.no_rules_below);
        s.defaults_below = s.default.is_some()
            || s.properties.iter().any(|(_, p)| p.defaults_below)
            || s.additional.as_ref().is_some_and(|a| a.defaults_below)
            || s.items.as_ref().is_some_and(|i| i.defaults_below);
        s
    }

    /// The schema of a property.
    pub fn property(&self, name: &str) -> Option<&Structural> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| s)
            .or(self.additional.as_deref())
    }
}
