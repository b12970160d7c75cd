//! Parsing of a replay case (one JSON line), strictly: unknown keys and wrong types are errors,
//! as in the reference oracle.

use crate::value::{Map, Value};

/// One apply or update request of a case.
#[derive(Clone, Debug, Default)]
pub struct StepInput {
    pub op: String,
    pub manager: String,
    pub api_version: String,
    pub subresource: String,
    pub config: Option<Value>,
    pub object: Option<Value>,
    pub force: bool,
    pub now: String,
    pub expect: Option<Expectation>,
}

/// What a case or step expects (checked with `--check`).
#[derive(Clone, Debug, Default)]
pub struct Expectation {
    /// Exact multiset of (manager, path); a manager starting with `{` is a full identity.
    pub conflicts: Option<Vec<(String, String)>>,
    /// Expected object (`Some(Null)`: the request is rejected).
    pub object: Option<Value>,
    pub managers: Option<Value>,
    pub object_changed: Option<bool>,
    pub error_contains: String,
}

/// A whole case.
#[derive(Clone, Debug, Default)]
pub struct CaseInput {
    pub name: String,
    pub schema: Option<Value>,
    pub type_name: String,
    pub live: Option<Value>,
    pub managers: Option<Value>,
    pub known_versions: Vec<String>,
    pub ignored_fields: Vec<(String, Value)>,
    pub now: String,
    pub op: String,
    pub apply: Option<StepInput>,
    pub update: Option<StepInput>,
    pub steps: Vec<StepInput>,
    pub expect: Option<Expectation>,
}

type R<T> = Result<T, String>;

fn check_keys(m: &Map, allowed: &[&str], what: &str) -> R<()> {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!("json: unknown field {:?} in {what}", k.as_str()));
        }
    }
    Ok(())
}

fn string(m: &Map, k: &str, what: &str) -> R<String> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.to_string()),
        Some(v) => Err(format!(
            "json: cannot unmarshal {} into field {what}.{k} of type string",
            v.type_name()
        )),
    }
}

/// Takes `k` out of the (owned) case: cases are big, copying them costs.
fn take(m: &mut Map, k: &str) -> Option<Value> {
    m.remove(k)
}

fn object_of<'a>(v: &'a Value, what: &str) -> R<&'a Map> {
    v.as_map()
        .ok_or_else(|| format!("json: cannot unmarshal {} into {what}", v.type_name()))
}

fn owned_object(v: Value, what: &str) -> R<Map> {
    match v {
        Value::Map(m) => Ok(m),
        other => Err(format!(
            "json: cannot unmarshal {} into {what}",
            other.type_name()
        )),
    }
}

/// Parses a case from its JSON value.
pub fn parse_case(v: Value) -> R<CaseInput> {
    let mut m = owned_object(v, "case")?;
    let m = &mut m;
    check_keys(
        m,
        &[
            "name",
            "comment",
            "schema",
            "typeName",
            "live",
            "managers",
            "knownVersions",
            "ignoredFields",
            "now",
            "op",
            "apply",
            "update",
            "steps",
            "expect",
        ],
        "case",
    )?;
    string(m, "comment", "case")?;
    let mut c = CaseInput {
        name: string(m, "name", "case")?,
        schema: take(m, "schema"),
        type_name: string(m, "typeName", "case")?,
        live: take(m, "live"),
        managers: take(m, "managers"),
        now: string(m, "now", "case")?,
        op: string(m, "op", "case")?,
        ..CaseInput::default()
    };
    match m.get("knownVersions") {
        None | Some(Value::Null) => {}
        Some(Value::List(l)) => {
            for x in l {
                match x {
                    Value::String(s) => c.known_versions.push(s.to_string()),
                    _ => return Err("json: knownVersions must be strings".into()),
                }
            }
        }
        Some(_) => return Err("json: knownVersions must be a list".into()),
    }
    match m.get("ignoredFields") {
        None | Some(Value::Null) => {}
        Some(Value::Map(im)) => {
            for (k, v) in im.iter() {
                c.ignored_fields.push((k.to_string(), v.clone()));
            }
        }
        Some(_) => return Err("json: ignoredFields must be an object".into()),
    }
    if let Some(a) = take(m, "apply").filter(|v| !v.is_null()) {
        c.apply = Some(parse_step(a)?);
    }
    if let Some(u) = take(m, "update").filter(|v| !v.is_null()) {
        c.update = Some(parse_step(u)?);
    }
    match take(m, "steps") {
        None | Some(Value::Null) => {}
        Some(Value::List(l)) => {
            for s in l {
                c.steps.push(parse_step(s)?);
            }
        }
        Some(_) => return Err("json: steps must be a list".into()),
    }
    if let Some(e) = m.get("expect").filter(|v| !v.is_null()) {
        c.expect = Some(parse_expect(e)?);
    }
    Ok(c)
}

fn parse_step(v: Value) -> R<StepInput> {
    let mut m = owned_object(v, "step")?;
    let m = &mut m;
    check_keys(
        m,
        &[
            "comment",
            "op",
            "manager",
            "apiVersion",
            "subresource",
            "config",
            "object",
            "force",
            "now",
            "expect",
        ],
        "step",
    )?;
    string(m, "comment", "step")?;
    let force = match m.get("force") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("json: force must be a boolean".into()),
    };
    Ok(StepInput {
        op: string(m, "op", "step")?,
        manager: string(m, "manager", "step")?,
        api_version: string(m, "apiVersion", "step")?,
        subresource: string(m, "subresource", "step")?,
        config: take(m, "config"),
        object: take(m, "object"),
        force,
        now: string(m, "now", "step")?,
        expect: match m.get("expect").filter(|v| !v.is_null()) {
            Some(e) => Some(parse_expect(e)?),
            None => None,
        },
    })
}

fn parse_expect(v: &Value) -> R<Expectation> {
    let m = object_of(v, "expect")?;
    check_keys(
        m,
        &[
            "conflicts",
            "object",
            "managers",
            "objectChanged",
            "errorContains",
        ],
        "expect",
    )?;
    let conflicts = match m.get("conflicts") {
        None | Some(Value::Null) => None,
        Some(Value::List(l)) => {
            let mut out = Vec::new();
            for c in l {
                let cm = object_of(c, "expected conflict")?;
                check_keys(cm, &["manager", "path"], "expected conflict")?;
                out.push((
                    string(cm, "manager", "conflict")?,
                    string(cm, "path", "conflict")?,
                ));
            }
            Some(out)
        }
        Some(_) => return Err("json: expect.conflicts must be a list".into()),
    };
    Ok(Expectation {
        conflicts,
        object: m.get("object").cloned(),
        managers: m.get("managers").filter(|v| !v.is_null()).cloned(),
        object_changed: match m.get("objectChanged") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err("json: objectChanged must be a boolean".into()),
        },
        error_contains: string(m, "errorContains", "expect")?,
    })
}
