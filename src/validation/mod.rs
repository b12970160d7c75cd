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
mod cel_fast;
mod cel_lib;
mod cel_value;
pub mod config_data;
pub mod defaults;
mod escape;
mod field_path;
pub mod immutable;
mod list_type;
pub mod meta;
mod ratchet;
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
    /// One of those may be an error that stops the server's CEL rules (a `format`): their
    /// verdict is then unknown.
    pub may_block: bool,
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
/// strfmt's `IsDate`: Go's `time.Parse("2006-01-02", s)` (a real day of a four-digit year).
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = &b[r];
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0u32, |n, c| n * 10 + u32::from(c - b'0')))
    };
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// `IsValueValidAgainstRange`: whether `x` is a value of `ty` in `format` (an integer: whole
/// and within the format's range; a number: within a `float`'s range when so formatted).
fn fits(x: f64, ty: &str, format: &str) -> bool {
    if ty == "integer" {
        let (lo, hi) = match format {
            "int32" => (i32::MIN as f64, i32::MAX as f64),
            "uint32" => (0.0, u32::MAX as f64),
            "uint64" => (0.0, u64::MAX as f64),
            _ => (i64::MIN as f64, i64::MAX as f64),
        };
        return x.fract() == 0.0 && x >= lo && x <= hi;
    }
    match format {
        // Parsed at 32-bit precision: what rounds to a finite float fits.
        "float" | "float32" => (x as f32).is_finite(),
        _ => true,
    }
}

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
            self.format(v, f, path);
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
            // kube-openapi still checks the enum after a type error, and a number's range and
            // bounds (a fraction in an integer field).
            if matches!(v, Value::Float(_)) && s.ty.as_deref() == Some("integer") {
                // (and no enum error: the validation oracle, apiextensions-apiserver 1.36.5)
                self.number(v, s, path);
                return;
            }
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

    /// kube-openapi's `format` check of a string (other values are not checked): a failure is
    /// a type error (which stops the CEL rules) printing the value. Judged for the formats
    /// read exactly as strfmt reads them (`byte`, `date`) and for the values of the layouts
    /// fieldguard reads (`date-time`, `duration`); any other is not evaluated.
    fn format(&mut self, v: &Value, f: &str, path: &str) {
        let Value::String(st) = v else { return };
        let valid = match f {
            // (an empty string is refused too: the validation oracle, apiextensions-apiserver
            // 1.36.5)
            "byte" => Some(
                !st.is_empty() && crate::schema::formats::go_base64_error(st.as_bytes()).is_none(),
            ),
            "date" => Some(is_date(st)),
            "date-time" => cel_value::date_time(st).map(|_| true),
            "duration" => cel_value::go_duration(st).map(|_| true),
            _ => None,
        };
        match valid {
            Some(true) => {}
            Some(false) => {
                let q = quote(st);
                self.err(
                    path,
                    "FieldValueTypeInvalid",
                    format!("Invalid value: {q}: {path} in body must be of type {f}: {q}"),
                );
            }
            None => {
                self.note(path, &format!("format {f}"));
                self.out.may_block = true;
            }
        }
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
        // kube-openapi's `typeValidator`: a value other than a string or a list against a
        // schema with a format is first checked against the format, by the Go type the JSON
        // decodes to (`schemaInfoForType`), and reported so.
        if let Some(f) = s.format.as_deref().filter(|f| !f.is_empty())
            && !matches!(v, Value::String(_) | Value::List(_))
        {
            let (data_ty, data_fmt) = match v {
                Value::Int(_) => ("integer", "int64"),
                Value::Float(_) => ("number", "float64"),
                Value::Bool(_) => ("boolean", ""),
                _ => ("object", ""),
            };
            let float_int = t == "integer" && matches!(v, Value::Float(x) if x.fract() == 0.0);
            let int_float = t == "number" && matches!(v, Value::Int(_));
            if !(t == data_ty || data_fmt == f || float_int || int_float) {
                self.type_error(path, data_fmt, f);
                return false;
            }
        }
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

    /// kube-openapi's number validator (`numberValidator.Validate`): the value's range for its
    /// type and format, then `multipleOf`, `minimum`, `maximum`. A bound is compared in the
    /// value's native type (`MinimumNativeType`: an integer value against the bound truncated
    /// to an integer) when the bound fits the type, else as floats after an error saying so.
    fn number(&mut self, v: &Value, s: &Structural, path: &str) {
        let Some(x) = as_f64(v) else { return };
        let ty = s.ty.as_deref().unwrap_or("number");
        let format = s.format.as_deref().unwrap_or("");
        if !fits(x, ty, format) {
            self.range_error("Checked", ty, format, path);
        }
        if let Some(m) = s.multiple_of
            && m > 0.0
        {
            if matches!(v, Value::Int(_)) && m.fract() != 0.0 {
                // Go compares against the truncated divisor (which may be zero).
                self.note(
                    path,
                    &format!("multipleOf {} of an integer value", limit(m)),
                );
            } else if !is_json_integer(if m < 1.0 { 1.0 / m * x } else { x / m }) {
                self.invalid(
                    path,
                    v,
                    format!("{path} in body should be a multiple of {}", limit(m)),
                );
            }
        }
        let bound = |this: &mut Self, b: f64, which: &str| -> f64 {
            if !fits(b, ty, format) {
                this.range_error(which, ty, format, path);
                return b;
            }
            if matches!(v, Value::Int(_)) {
                b.trunc()
            } else {
                b
            }
        };
        if let Some(min) = s.minimum {
            let min = bound(self, min, "Minimum boundary");
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
        if let Some(max) = s.maximum {
            let max = bound(self, max, "Maximum boundary");
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
    }

    /// `IsValueValidAgainstRange`'s error, which the server reports without a field.
    fn range_error(&mut self, what: &str, ty: &str, format: &str, path: &str) {
        let format = if format.is_empty() {
            "(default format)".to_string()
        } else {
            format!("with format {format}")
        };
        self.err(
            "<nil>",
            "FieldValueInvalid",
            format!("Invalid value: \"\": {what} value must be of type {ty} {format} in {path}"),
        );
    }

    fn enumeration(&mut self, v: &Value, s: &Structural, path: &str) {
        // An empty enum is no constraint (kube-openapi checks only a non-empty one).
        let Some(allowed) = s.enumeration.as_ref().filter(|a| !a.is_empty()) else {
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
    let v = match old {
        Some(old) => ratchet::validate_update(stored, old, schema),
        None => validate(stored, schema),
    };
    let mut errors = prior;
    errors.extend(v.errors);
    errors.extend(list_type::check(stored, old, schema));
    let mut not_evaluated = v.not_evaluated;
    if v.may_block && !errors.iter().any(blocking) && count_rules(schema) > 0 {
        not_evaluated.push(
            "CEL rules: not evaluated (a format fieldguard could not judge may stop them on the server)"
                .into(),
        );
        return Decision {
            errors,
            not_evaluated,
        };
    }
    let (errors, cel) = settle(errors, stored, old, schema);
    not_evaluated.extend(cel);
    Decision {
        errors,
        not_evaluated,
    }
}

#[cfg(test)]
mod tests;
