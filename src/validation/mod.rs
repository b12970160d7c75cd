//! The apiserver's validation of a custom resource it is about to store: after the merge, the
//! object is checked against its CRD's structural schema (kube-openapi's validator, converted
//! to field errors by apiextensions-apiserver's `ValidateCustomResource`), and a failure is a
//! `422 Invalid` — even when the manifest itself was valid, e.g. when a manager's fields are
//! removed and a map left empty becomes `null` where the schema does not allow it.
//!
//! Evaluated: `type` (with `nullable` and `x-kubernetes-int-or-string`), `required`, `enum`,
//! `minimum`/`maximum` (exclusive too), `multipleOf`, `minLength`/`maxLength`/`pattern`,
//! `minItems`/`maxItems`, `minProperties`/`maxProperties`. Not evaluated (reported as such):
//! `format` and `allOf`/`anyOf`/`oneOf`/`not`; `x-kubernetes-validations` (CEL) rules are evaluated
//! by [`cel`] (what it cannot evaluate is reported) — unless a *blocking* check fails (wrong type, required, enum, too
//! long, too many: `hasBlockingErr` in apiextensions-apiserver's `customresource/strategy.go`),
//! the server skips the rules and says so, and that notice is reproduced. The messages are the server's, word for word; the order of several
//! errors is not (the server's comes from Go map iteration and varies between requests), so
//! fieldguard lists them in field order.

mod cel;
mod cel_cost;
mod cel_value;
pub mod config_data;
pub mod defaults;
mod escape;
pub mod immutable;
pub mod meta;
mod re2;
mod structural;

pub use structural::Structural;

use crate::value::gofmt::{format_float_v, quote};
use crate::value::{Map, Value};
use std::fmt;

/// One problem, as kube-apiserver's `field.Error`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FieldError {
    /// `spec.replicas`, `spec.containers[0].name`, or `<nil>`.
    pub field: String,
    /// The `StatusCause` reason (`FieldValueInvalid`, `FieldValueRequired`, ...).
    pub reason: String,
    /// The message without the field (`Required value`, `Invalid value: ...`).
    pub message: String,
    /// Where the manifest sets the field (or its nearest ancestor), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What validating an object found.
#[derive(Clone, Debug, Default)]
pub struct Validation {
    pub errors: Vec<FieldError>,
    /// Constraints present in the schema that fieldguard did not evaluate.
    pub not_evaluated: Vec<String>,
}

/// Validates `obj` (a whole custom resource) against its version's structural schema.
pub fn validate(obj: &Value, schema: &Structural) -> Validation {
    let mut v = Validation::default();
    let mut w = Walk { out: &mut v };
    if let Value::Map(m) = obj {
        // The root's own constraints, then its fields (ObjectMeta and TypeMeta are validated
        // by Go code, not by the schema).
        w.object_limits(m, schema, "");
        for (k, child) in m.iter() {
            if k == "metadata" || k == "apiVersion" || k == "kind" {
                continue;
            }
            if let Some(s) = schema.property(k) {
                w.value(child, s, k);
            }
        }
    }
    v
}

/// True for the errors after which the server does not evaluate CEL rules.
fn blocking(e: &FieldError) -> bool {
    matches!(
        e.reason.as_str(),
        "FieldValueNotSupported"
            | "FieldValueRequired"
            | "FieldValueTooLong"
            | "FieldValueTooMany"
            | "FieldValueTypeInvalid"
    )
}

/// The final errors (after [`ratchet`]) of storing `stored` (over `old`, for an update): with
/// a blocking error, the server does not run the CEL rules and says so (its notice is
/// reproduced); otherwise the rules' own errors are added ([`cel::evaluate`]). Also returns
/// the rules fieldguard could not evaluate.
pub fn settle(
    mut errors: Vec<FieldError>,
    stored: &Value,
    old: Option<&Value>,
    schema: &Structural,
) -> (Vec<FieldError>, Vec<String>) {
    if count_rules(schema) == 0 {
        return (errors, Vec::new());
    }
    if errors.iter().any(blocking) {
        errors.push(FieldError {
            field: "<nil>".into(),
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
            line: None,
        });
        return (errors, Vec::new());
    }
    let outcome = cel::evaluate(stored, old, schema);
    errors.extend(outcome.errors);
    (errors, outcome.not_evaluated)
}

fn count_rules(s: &Structural) -> usize {
    s.rules.len()
        + s.properties
            .iter()
            .map(|(_, c)| count_rules(c))
            .sum::<usize>()
        + s.additional.as_deref().map_or(0, count_rules)
        + s.items.as_deref().map_or(0, count_rules)
}

/// The `422` message: `Widget.example.com "w0" is invalid: ...` (several errors in brackets).
pub fn invalid_message(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> String {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let s = e.to_string();
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    let agg = if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    };
    format!("{qualified} {} is invalid: {agg}", quote(name))
}

/// The `422` `Status` body.
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    let mut causes = Vec::new();
    for e in errors {
        let mut c = Map::new();
        c.insert("reason", Value::from(e.reason.as_str()));
        c.insert("message", Value::from(e.message.as_str()));
        c.insert("field", Value::from(e.field.as_str()));
        causes.push(Value::Map(c));
    }
    let mut details = Map::new();
    details.insert("name", Value::from(name));
    details.insert("group", Value::from(group));
    details.insert("kind", Value::from(kind));
    details.insert("causes", Value::List(causes));
    let mut m = Map::new();
    m.insert("kind", Value::from("Status"));
    m.insert("apiVersion", Value::from("v1"));
    m.insert("metadata", Value::Map(Map::new()));
    m.insert("status", Value::from("Failure"));
    m.insert(
        "message",
        Value::from(invalid_message(kind, group, name, errors).as_str()),
    );
    m.insert("reason", Value::from("Invalid"));
    m.insert("details", Value::Map(details));
    m.insert("code", Value::Int(422));
    Value::Map(m)
}

struct Walk<'a> {
    out: &'a mut Validation,
}

/// The JSON type name kube-openapi reports for a value.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Int(_) => "integer",
        Value::Float(_) => "number",
        Value::String(_) => "string",
        Value::List(_) => "array",
        Value::Map(_) => "object",
    }
}

/// A value as `field.Error` prints it (`%#v`-like: strings quoted, numbers plain).
fn printed(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format_float_v(*f),
        Value::String(s) => quote(s),
        other => crate::value::json::to_string(other, crate::value::json::Style::PLAIN),
    }
}

/// `field.TooMany`'s message (`item` for a limit of one).
fn too_many(n: i64, max: i64) -> String {
    let unit = if max == 1 { "item" } else { "items" };
    format!("Too many: {n}: must have at most {max} {unit}")
}

/// go-openapi's `IsFloat64AJSONInteger`: an integer within a relative error of 1e-9 (so
/// `0.3` is a multiple of `0.1`, as the server finds).
fn is_json_integer(f: f64) -> bool {
    if !f.is_finite() {
        return false;
    }
    let g = f.trunc();
    if f == g {
        return true;
    }
    if g == 0.0 {
        return false;
    }
    (f - g).abs() / (f.abs() + g.abs()) < 1e-9
}

/// A number as kube-openapi prints a limit (`10`, `1.5`).
fn limit(f: f64) -> String {
    format_float_v(f)
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

impl Walk<'_> {
    fn err(&mut self, field: &str, reason: &'static str, message: String) {
        self.out.errors.push(FieldError {
            field: field.to_string(),
            reason: reason.to_string(),
            message,
            line: None,
        });
    }

    fn invalid(&mut self, field: &str, v: &Value, detail: String) {
        self.err(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {}: {detail}", printed(v)),
        );
    }

    fn value(&mut self, v: &Value, s: &Structural, path: &str) {
        if s.junctors {
            self.note(path, "allOf/anyOf/oneOf/not");
        }
        if let Some(f) = &s.format {
            self.note(path, &format!("format {f}"));
        }
        if v.is_null() {
            if !s.nullable {
                let want = if s.int_or_string {
                    Some("integer,string".to_string())
                } else {
                    s.ty.clone()
                };
                if let Some(t) = want {
                    self.type_error(path, "null", &t);
                }
            }
            self.enumeration(v, s, path);
            return;
        }
        if !self.type_ok(v, s, path) {
            // kube-openapi still checks the enum after a type error.
            self.enumeration(v, s, path);
            return;
        }
        match v {
            Value::Map(m) => self.object(m, s, path),
            Value::List(items) => self.array(items, s, path),
            Value::String(st) => self.string(v, st, s, path),
            Value::Int(_) | Value::Float(_) => self.number(v, s, path),
            _ => {}
        }
        self.enumeration(v, s, path);
    }

    fn note(&mut self, path: &str, what: &str) {
        let n = format!("{path}: {what}");
        if !self.out.not_evaluated.contains(&n) {
            self.out.not_evaluated.push(n);
        }
    }

    fn type_error(&mut self, path: &str, actual: &str, want: &str) {
        self.err(
            path,
            "FieldValueTypeInvalid",
            format!(
                "Invalid value: {}: {path} in body must be of type {want}: {}",
                quote(actual),
                quote(actual)
            ),
        );
    }

    /// The `type` check; false when it failed (nothing below is checked then).
    fn type_ok(&mut self, v: &Value, s: &Structural, path: &str) -> bool {
        let actual = type_name(v);
        if s.int_or_string {
            if matches!(v, Value::Int(_) | Value::String(_)) {
                return true;
            }
            self.type_error(path, actual, "integer,string");
            return false;
        }
        let Some(t) = s.ty.as_deref() else {
            return true;
        };
        let ok = match t {
            "number" => matches!(v, Value::Int(_) | Value::Float(_)),
            "integer" => {
                matches!(v, Value::Int(_)) || matches!(v, Value::Float(f) if f.fract() == 0.0)
            }
            other => other == actual,
        };
        if !ok {
            self.type_error(path, actual, t);
        }
        ok
    }

    fn object(&mut self, m: &Map, s: &Structural, path: &str) {
        self.object_limits(m, s, path);
        for (k, child) in m.iter() {
            if let Some(cs) = s.property(k) {
                self.value(child, cs, &format!("{path}.{k}"));
            }
        }
    }

    /// `required`, `minProperties`, `maxProperties` of an object (`path` empty at the root).
    fn object_limits(&mut self, m: &Map, s: &Structural, path: &str) {
        for r in &s.required {
            if !m.contains_key(r) {
                let field = if path.is_empty() {
                    r.clone()
                } else {
                    format!("{path}.{r}")
                };
                self.err(&field, "FieldValueRequired", "Required value".into());
            }
        }
        let path = if path.is_empty() { "<nil>" } else { path };
        let n = m.len() as i64;
        if let Some(max) = s.max_properties
            && n > max
        {
            self.err(path, "FieldValueTooMany", too_many(n, max));
        }
        if let Some(min) = s.min_properties
            && n < min
        {
            self.invalid(
                path,
                &Value::Int(n),
                format!("{path} in body should have at least {min} properties"),
            );
        }
    }

    fn array(&mut self, items: &[Value], s: &Structural, path: &str) {
        let n = items.len() as i64;
        if let Some(max) = s.max_items
            && n > max
        {
            self.err(path, "FieldValueTooMany", too_many(n, max));
        }
        if let Some(min) = s.min_items
            && n < min
        {
            self.invalid(
                path,
                &Value::Int(n),
                format!("{path} in body should have at least {min} items"),
            );
        }
        if let Some(is) = &s.items {
            for (i, item) in items.iter().enumerate() {
                self.value(item, is, &format!("{path}[{i}]"));
            }
        }
    }

    /// kube-openapi's string validator reports the first failure only.
    fn string(&mut self, v: &Value, st: &str, s: &Structural, path: &str) {
        let len = st.chars().count() as i64;
        if let Some(max) = s.max_length
            && len > max
        {
            let unit = if max == 1 { "byte" } else { "bytes" };
            return self.err(
                path,
                "FieldValueTooLong",
                format!("Too long: may not be more than {max} {unit}"),
            );
        }
        if let Some(min) = s.min_length
            && len < min
        {
            return self.invalid(
                path,
                v,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some((p, re)) = &s.pattern {
            match re {
                Ok(re) if !re.is_match(st) => {
                    self.invalid(path, v, format!("{path} in body should match '{p}'"))
                }
                Ok(_) => {}
                Err(e) => self.note(path, &format!("pattern {p} ({e})")),
            }
        }
    }

    fn number(&mut self, v: &Value, s: &Structural, path: &str) {
        let Some(x) = as_f64(v) else { return };
        if let Some(m) = s.multiple_of
            && m > 0.0
            && !is_json_integer(if m < 1.0 { 1.0 / m * x } else { x / m })
        {
            self.invalid(
                path,
                v,
                format!("{path} in body should be a multiple of {}", limit(m)),
            );
        }
        if let Some(max) = s.maximum {
            let bad = if s.exclusive_maximum {
                x >= max
            } else {
                x > max
            };
            if bad {
                let rel = if s.exclusive_maximum {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    path,
                    v,
                    format!("{path} in body should be {rel} {}", limit(max)),
                );
            }
        }
        if let Some(min) = s.minimum {
            let bad = if s.exclusive_minimum {
                x <= min
            } else {
                x < min
            };
            if bad {
                let rel = if s.exclusive_minimum {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.invalid(
                    path,
                    v,
                    format!("{path} in body should be {rel} {}", limit(min)),
                );
            }
        }
    }

    fn enumeration(&mut self, v: &Value, s: &Structural, path: &str) {
        let Some(allowed) = &s.enumeration else {
            return;
        };
        if allowed.iter().any(|a| crate::value::equals(a, v)) {
            return;
        }
        let values: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(st) => quote(st),
                other => quote(&crate::value::json::to_string(
                    other,
                    crate::value::json::Style::PLAIN,
                )),
            })
            .collect();
        self.err(
            path,
            "FieldValueNotSupported",
            format!(
                "Unsupported value: {}: supported values: {}",
                printed(v),
                values.join(", ")
            ),
        );
    }
}

/// What apiextensions-apiserver decides of a custom resource write.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// The 422's causes (none: the write is accepted).
    pub errors: Vec<FieldError>,
    /// Rules and constraints fieldguard did not evaluate, each with its reason.
    pub not_evaluated: Vec<String>,
}

/// The one pipeline of a custom resource's validation, as the server runs it on the object it
/// would store (`stored`; `old`: the live object of an update): the schema's constraints,
/// ratcheted on update, then the CEL rules unless an error that blocks them was found. `prior`:
/// errors found before the schema (an immutable field), which count as blocking.
pub fn custom_resource(
    stored: &Value,
    old: Option<&Value>,
    schema: &Structural,
    prior: Vec<FieldError>,
) -> Decision {
    let v = validate(stored, schema);
    let mut errors = prior;
    errors.extend(match old {
        Some(old) => ratchet(v.errors, old, stored),
        None => v.errors,
    });
    let (errors, cel) = settle(errors, stored, old, schema);
    let mut not_evaluated = v.not_evaluated;
    not_evaluated.extend(cel);
    Decision {
        errors,
        not_evaluated,
    }
}

#[cfg(test)]
mod tests;

/// Validation ratcheting (CRDValidationRatcheting, on by default since Kubernetes 1.30): on an
/// update, an error about a value that the update leaves as it was is dropped. fieldguard
/// compares the error's field — or, for a path through a list item, the nearest ancestor that
/// is not in a list (items are matched by index here, not by key, so only an unchanged whole
/// list ratchets them) — and, for a `Required value`, the object that lacks the field. Errors
/// at the root are never ratcheted. Run [`settle`] afterwards.
pub fn ratchet(errors: Vec<FieldError>, old: &Value, new: &Value) -> Vec<FieldError> {
    let at = |v: &'_ Value, field: &str| -> Option<Value> {
        let mut cur = v;
        for k in field.split('.') {
            cur = cur.as_map()?.get(k)?;
        }
        Some(cur.clone())
    };
    let unchanged = |field: &str| {
        let field = field.split('[').next().unwrap_or("");
        !field.is_empty() && at(old, field).is_some() && at(old, field) == at(new, field)
    };
    errors
        .into_iter()
        .filter(|e| {
            if e.field == "<nil>" {
                return true;
            }
            if e.reason == "FieldValueRequired" {
                return match e.field.rsplit_once('.') {
                    Some((parent, _)) => !unchanged(parent),
                    None => true,
                };
            }
            !unchanged(&e.field)
        })
        .collect()
}
