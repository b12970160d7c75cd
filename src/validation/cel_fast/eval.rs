//! The fast path's evaluation: a compiled rule run on the object's values as the schema types
//! them, with cel-go's error absorption; `None` wherever the `cel` crate is to decide.

use super::{Fold, Hints, Loop, Node, Op, Pattern, Program, find};
use crate::validation::Structural;
use crate::value::{Map, Value};
use std::borrow::Cow;
use std::rc::Rc;

/// A value as a rule sees it, borrowed from the object (or the rule) where it can be.
#[derive(Clone, Debug)]
pub(super) enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Cow<'a, str>),
    /// An object with properties; `meta`: the root or an embedded resource, whose
    /// `apiVersion`, `kind` and `metadata` the fast path leaves to the crate.
    Obj(&'a Map, &'a Structural, bool),
    /// A map of `additionalProperties`.
    Dict(&'a Map, &'a Structural),
    /// A list of the object, with its schema.
    List(&'a [Value], &'a Structural),
    /// A list the rule built.
    Built(Rc<Vec<V<'a>>>),
    /// A list literal of the rule's, of literals only.
    Literals(&'a [Node]),
}

/// The value of a literal node.
pub(super) fn literal(n: &Node) -> Option<V<'_>> {
    Some(match n {
        Node::Bool(b) => V::Bool(*b),
        Node::Int(i) => V::Int(*i),
        Node::Uint(u) => V::Uint(*u),
        Node::Double(d) => V::Double(*d),
        Node::Str(s) => V::Str(Cow::Borrowed(s)),
        _ => return None,
    })
}

/// The elements of a list literal (each a literal).
fn literals(items: &[Node]) -> impl Iterator<Item = V<'_>> {
    items.iter().filter_map(literal)
}

/// Why an evaluation did not give a value: the error a rule can see, or "not for the fast
/// path" (the crate decides).
#[derive(Clone, Debug, PartialEq)]
enum E {
    NoSuchKey(String),
    Bail,
}

type R<'a> = Result<V<'a>, E>;

/// Runs `p` with `self` the value `this` of schema `s` (`root`: the custom resource itself)
/// and `oldSelf` the correlated old value. `None`: the crate is to decide; otherwise the
/// rule's verdict or the key whose absence is its error.
pub(in crate::validation) fn run<'v>(
    p: &'v Program,
    this: &'v Value,
    old: Option<&'v Value>,
    s: &'v Structural,
    root: bool,
) -> Option<Result<bool, String>> {
    let bind = |v: &'v Value| -> R<'v> {
        match v {
            Value::Map(m) if root => Ok(V::Obj(m, s, true)),
            _ if root => Err(E::Bail),
            _ => typed(v, s),
        }
    };
    // The slots of most rules fit on the stack.
    let mut small: [R<'_>; 8] = std::array::from_fn(|_| Err(E::Bail));
    let mut large = Vec::new();
    let env: &mut [R<'_>] = if p.slots <= small.len() {
        &mut small
    } else {
        large.resize(p.slots, Err(E::Bail));
        &mut large
    };
    env[0] = bind(this);
    if let Some(o) = old {
        env[1] = bind(o);
    }
    match eval(&p.root, env) {
        Ok(V::Bool(b)) => Some(Ok(b)),
        Err(E::NoSuchKey(k)) => Some(Err(k)),
        _ => None,
    }
}

/// `v` of schema `s` as `cel_value::to_cel` gives it to a rule (or `Bail` where the fast path
/// leaves it to the crate).
fn typed<'a>(v: &'a Value, s: &'a Structural) -> R<'a> {
    if v.is_null() {
        return if s.nullable {
            Ok(V::Null)
        } else {
            Err(E::Bail)
        };
    }
    if s.int_or_string {
        return match v {
            Value::String(x) => Ok(V::Str(Cow::Borrowed(x.as_str()))),
            Value::Int(i) => Ok(V::Int(*i)),
            _ => Err(E::Bail),
        };
    }
    Ok(match (s.ty.as_deref(), v) {
        (Some("object"), Value::Map(m)) if s.embedded => V::Obj(m, s, true),
        (Some("object"), Value::Map(m)) if !s.properties.is_empty() => V::Obj(m, s, false),
        (Some("object"), Value::Map(m)) if s.additional.is_some() => V::Dict(m, s),
        (Some("array"), Value::List(l))
            if s.items.is_some()
                && matches!(
                    s.list_type.as_deref(),
                    None | Some("atomic" | "set" | "map")
                ) =>
        {
            V::List(l, s)
        }
        (Some("string"), Value::String(x))
            if !matches!(
                s.format.as_deref(),
                Some("duration" | "date" | "date-time" | "byte")
            ) =>
        {
            V::Str(Cow::Borrowed(x.as_str()))
        }
        (Some("number"), Value::Int(i)) => V::Double(*i as f64),
        (Some("number"), Value::Float(f)) => V::Double(*f),
        (Some("integer"), Value::Int(i)) => V::Int(*i),
        (Some("boolean"), Value::Bool(b)) => V::Bool(*b),
        _ => return Err(E::Bail),
    })
}

fn missing<'a>(field: &str, test: bool) -> R<'a> {
    if test {
        Ok(V::Bool(false))
    } else {
        Err(E::NoSuchKey(field.to_string()))
    }
}

/// `eval`, with the commonest operands (a variable, a literal) read in place.
#[inline(always)]
fn operand_of<'a>(n: &'a Node, env: &mut [R<'a>]) -> R<'a> {
    match n {
        Node::Var(slot) => env[*slot].clone(),
        Node::Int(i) => Ok(V::Int(*i)),
        Node::Str(s) => Ok(V::Str(Cow::Borrowed(s))),
        _ => eval(n, env),
    }
}

fn eval<'a>(n: &'a Node, env: &mut [R<'a>]) -> R<'a> {
    Ok(match n {
        Node::Bool(_) | Node::Int(_) | Node::Uint(_) | Node::Double(_) | Node::Str(_) => {
            literal(n).ok_or(E::Bail)?
        }
        Node::Literals(items) => V::Literals(items),
        Node::Var(slot) => return env[*slot].clone(),
        Node::Select {
            operand,
            field,
            test,
            hints,
        } => return select(operand_of(operand, env)?, field, *test, hints),
        Node::Index(a, b) => {
            let (a, b) = (eval(a, env)?, eval(b, env)?);
            return match (a, b) {
                (V::List(l, s), V::Int(i)) => {
                    let item = usize::try_from(i).ok().and_then(|i| l.get(i));
                    match (item, s.items.as_deref()) {
                        (Some(x), Some(is)) => typed(x, is),
                        _ => Err(E::Bail),
                    }
                }
                (V::Dict(m, s), V::Str(k)) => match (m.get(&k), s.additional.as_deref()) {
                    (Some(x), Some(a)) => typed(x, a),
                    _ => Err(E::Bail),
                },
                _ => Err(E::Bail),
            };
        }
        Node::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(eval(x, env)?);
            }
            V::Built(Rc::new(out))
        }
        Node::And(a, b) => return logical(a, b, false, env),
        Node::Or(a, b) => return logical(a, b, true, env),
        Node::Not(a) => match eval(a, env)? {
            V::Bool(b) => V::Bool(!b),
            _ => return Err(E::Bail),
        },
        Node::Neg(a) => match eval(a, env)? {
            V::Int(i) => V::Int(i.checked_neg().ok_or(E::Bail)?),
            V::Double(d) => V::Double(-d),
            _ => return Err(E::Bail),
        },
        Node::NotStrictlyFalse(a) => match eval(a, env) {
            Ok(V::Bool(b)) => V::Bool(b),
            Err(E::NoSuchKey(_)) => V::Bool(true),
            _ => return Err(E::Bail),
        },
        Node::Cond(c, a, b) => match eval(c, env)? {
            V::Bool(true) => return eval(a, env),
            V::Bool(false) => return eval(b, env),
            _ => return Err(E::Bail),
        },
        Node::Binary(op, a, b) => {
            let (a, b) = (operand_of(a, env)?, operand_of(b, env)?);
            return binary(*op, a, b);
        }
        Node::Size(a) => V::Int(match eval(a, env)? {
            V::Str(s) => s.chars().count() as i64,
            V::List(l, _) => l.len() as i64,
            V::Built(l) => l.len() as i64,
            V::Literals(l) => l.len() as i64,
            V::Dict(m, _) => m.len() as i64,
            _ => return Err(E::Bail),
        }),
        Node::Matches(s, p) => {
            let s = eval(s, env)?;
            let V::Str(s) = s else { return Err(E::Bail) };
            let is_match = match p {
                Pattern::Literal(r) => r.is_match(&s),
                Pattern::Dynamic(p) => match eval(p, env)? {
                    V::Str(p) => crate::validation::re2::compile(&p)
                        .map_err(|_| E::Bail)?
                        .is_match(&s),
                    _ => return Err(E::Bail),
                },
            };
            V::Bool(is_match)
        }
        Node::Comprehension(l) => return comprehension(l, env),
        Node::Fold(f) => return fold(f, env),
    })
}

/// `a && b` (`or`: `a || b`) as cel-go's `evalAnd`/`evalOr`: the deciding value wins over an
/// error on either side; two errors are left to the crate.
fn logical<'a>(a: &'a Node, b: &'a Node, or: bool, env: &mut [R<'a>]) -> R<'a> {
    let left = eval(a, env);
    match &left {
        Ok(V::Bool(x)) if *x == or => return left,
        Ok(V::Bool(_)) | Err(E::NoSuchKey(_)) => {}
        _ => return Err(E::Bail),
    }
    let right = eval(b, env);
    match (left, right) {
        (_, Ok(V::Bool(y))) if y == or => Ok(V::Bool(y)),
        (Ok(V::Bool(_)), right @ (Ok(V::Bool(_)) | Err(E::NoSuchKey(_)))) => right,
        (left @ Err(E::NoSuchKey(_)), Ok(V::Bool(_))) => left,
        _ => Err(E::Bail),
    }
}

fn select<'a>(v: V<'a>, field: &str, test: bool, hints: &Hints) -> R<'a> {
    match v {
        V::Obj(_, _, true) if matches!(field, "apiVersion" | "kind" | "metadata") => Err(E::Bail),
        V::Obj(m, s, _) => match find(&s.properties, field, &hints.property) {
            None => missing(field, test),
            Some((_, cs)) => match find(m.entries(), field, &hints.key).map(|(_, x)| x) {
                Some(x) if !x.is_null() => {
                    if test {
                        Ok(V::Bool(true))
                    } else {
                        typed(x, cs)
                    }
                }
                _ => missing(field, test),
            },
        },
        V::Dict(m, s) => match (
            find(m.entries(), field, &hints.key).map(|(_, x)| x),
            s.additional.as_deref(),
        ) {
            (Some(_), _) if test => Ok(V::Bool(true)),
            (Some(x), Some(a)) => typed(x, a),
            (Some(_), None) => Err(E::Bail),
            (None, _) => missing(field, test),
        },
        _ => Err(E::Bail),
    }
}

/// Equality of two scalars of one type (`None`: not the fast path's to say).
fn equal(a: &V<'_>, b: &V<'_>) -> Option<bool> {
    Some(match (a, b) {
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Int(x), V::Int(y)) => x == y,
        (V::Uint(x), V::Uint(y)) => x == y,
        (V::Double(x), V::Double(y)) if !x.is_nan() && !y.is_nan() => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        _ => return None,
    })
}

fn order(a: &V<'_>, b: &V<'_>) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (V::Bool(x), V::Bool(y)) => Some(x.cmp(y)),
        (V::Int(x), V::Int(y)) => Some(x.cmp(y)),
        (V::Uint(x), V::Uint(y)) => Some(x.cmp(y)),
        (V::Double(x), V::Double(y)) => x.partial_cmp(y),
        (V::Str(x), V::Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

fn binary<'a>(op: Op, a: V<'a>, b: V<'a>) -> R<'a> {
    use std::cmp::Ordering::{Greater, Less};
    let bail = || E::Bail;
    Ok(match op {
        Op::Eq => V::Bool(equal(&a, &b).ok_or_else(bail)?),
        Op::Ne => V::Bool(!equal(&a, &b).ok_or_else(bail)?),
        Op::Lt | Op::Le | Op::Gt | Op::Ge => {
            let o = order(&a, &b).ok_or_else(bail)?;
            V::Bool(match op {
                Op::Lt => o == Less,
                Op::Le => o != Greater,
                Op::Gt => o == Greater,
                _ => o != Less,
            })
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Rem => arithmetic(op, a, b)?,
        Op::In => V::Bool(match b {
            V::List(l, s) => {
                let is = s.items.as_deref().ok_or_else(bail)?;
                let mut found = false;
                for x in l {
                    found |= equal(&a, &typed(x, is)?).ok_or_else(bail)?;
                }
                found
            }
            V::Built(l) => {
                let mut found = false;
                for x in l.iter() {
                    found |= equal(&a, x).ok_or_else(bail)?;
                }
                found
            }
            V::Literals(l) => {
                let mut found = false;
                for x in literals(l) {
                    found |= equal(&a, &x).ok_or_else(bail)?;
                }
                found
            }
            V::Dict(m, _) => match a {
                V::Str(k) => m.get(&k).is_some(),
                _ => return Err(E::Bail),
            },
            _ => return Err(E::Bail),
        }),
        Op::StartsWith | Op::EndsWith | Op::Contains => match (a, b) {
            (V::Str(s), V::Str(t)) => V::Bool(match op {
                Op::StartsWith => s.starts_with(&*t),
                Op::EndsWith => s.ends_with(&*t),
                _ => s.contains(&*t),
            }),
            _ => return Err(E::Bail),
        },
    })
}

/// `x op y` of two integers of one type, `None` on overflow or a zero divisor.
macro_rules! checked {
    ($op:expr, $x:expr, $y:expr) => {
        match $op {
            Op::Add => $x.checked_add($y),
            Op::Sub => $x.checked_sub($y),
            Op::Mul => $x.checked_mul($y),
            Op::Div => $x.checked_div($y),
            _ => $x.checked_rem($y),
        }
    };
}

fn arithmetic<'a>(op: Op, a: V<'a>, b: V<'a>) -> R<'a> {
    let bail = || E::Bail;
    Ok(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(checked!(op, x, y).ok_or_else(bail)?),
        (V::Uint(x), V::Uint(y)) => V::Uint(checked!(op, x, y).ok_or_else(bail)?),
        (V::Double(x), V::Double(y)) => V::Double(match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            Op::Div if y != 0.0 => x / y,
            _ => return Err(E::Bail),
        }),
        (V::Str(x), V::Str(y)) if op == Op::Add => V::Str(Cow::Owned(format!("{x}{y}"))),
        (x @ (V::Built(_) | V::Literals(_)), y @ (V::Built(_) | V::Literals(_)))
            if op == Op::Add =>
        {
            let mut out = built(x);
            out.extend(built(y));
            V::Built(Rc::new(out))
        }
        _ => return Err(E::Bail),
    })
}

/// The elements of a list the rule built or wrote.
fn built(v: V<'_>) -> Vec<V<'_>> {
    match v {
        V::Built(l) => Rc::try_unwrap(l).unwrap_or_else(|l| (*l).clone()),
        V::Literals(l) => literals(l).collect(),
        _ => Vec::new(),
    }
}

/// A macro's loop, as cel-go runs it: the accumulator may hold an error that a later step
/// overrides (`error && false` is `false`).
fn comprehension<'a>(l: &'a Loop, env: &mut [R<'a>]) -> R<'a> {
    let range = eval(&l.range, env)?;
    env[l.accu] = eval(&l.init, env);
    if matches!(env[l.accu], Err(E::Bail)) {
        return Err(E::Bail);
    }
    each(range, env, |x, env| {
        env[l.iter] = Ok(x);
        match eval(&l.cond, env)? {
            V::Bool(false) => return Ok(false),
            V::Bool(true) => {}
            _ => return Err(E::Bail),
        }
        let next = eval(&l.step, env);
        if matches!(next, Err(E::Bail)) {
            return Err(E::Bail);
        }
        env[l.accu] = next;
        Ok(true)
    })?;
    eval(&l.result, env)
}

/// `all` (`exists`: `or`) without its expansion's bookkeeping: the same fold of `pred` over
/// the range as [`comprehension`] runs, stopping at the deciding value.
fn fold<'a>(f: &'a Fold, env: &mut [R<'a>]) -> R<'a> {
    let range = eval(&f.range, env)?;
    let decisive = f.or;
    let mut acc: Result<bool, String> = Ok(!decisive);
    each(range, env, |x, env| {
        env[f.iter] = Ok(x);
        let p = eval(&f.pred, env);
        acc = match (std::mem::replace(&mut acc, Ok(decisive)), p) {
            (Ok(_), Ok(V::Bool(b))) => Ok(b),
            (Ok(_), Err(E::NoSuchKey(k))) => Err(k),
            (Err(_), Ok(V::Bool(b))) if b == decisive => Ok(b),
            (Err(k), Ok(V::Bool(_))) => Err(k),
            _ => return Err(E::Bail),
        };
        Ok(acc != Ok(decisive))
    })?;
    acc.map(V::Bool).map_err(E::NoSuchKey)
}

/// Calls `step` on each element of `range` (a map's keys) until it says stop.
fn each<'a>(
    range: V<'a>,
    env: &mut [R<'a>],
    mut step: impl FnMut(V<'a>, &mut [R<'a>]) -> Result<bool, E>,
) -> Result<(), E> {
    match range {
        V::List(items, s) => {
            let is = s.items.as_deref().ok_or(E::Bail)?;
            for x in items {
                if !step(typed(x, is)?, env)? {
                    break;
                }
            }
        }
        V::Built(items) => {
            for x in items.iter() {
                if !step(x.clone(), env)? {
                    break;
                }
            }
        }
        V::Literals(items) => {
            for x in literals(items) {
                if !step(x, env)? {
                    break;
                }
            }
        }
        V::Dict(m, _) => {
            for k in m.keys() {
                if !step(V::Str(Cow::Borrowed(k.as_str())), env)? {
                    break;
                }
            }
        }
        _ => return Err(E::Bail),
    }
    Ok(())
}
