//! The fast path of CEL rules: the rules most CRDs carry (field selections, `has`, comparisons,
//! arithmetic, `size`, `in`, the string tests, `matches`, `all`/`exists`/`exists_one`/`map`/
//! `filter`) compiled once from the `cel` crate's AST into a tree that runs directly on
//! fieldguard's values, typed by the schema as [`super::cel_value`] types them — without
//! building a CEL value of the object first.
//!
//! It answers only where its answer is certain to be the crate's and the apiserver's: `true`,
//! `false`, or the `no such key` error a missing field raises. Anything else — operands of mixed
//! types, an overflow or a division by zero, two errors meeting, a string typed by its
//! `format`, the root's `metadata`, a function it does not know — is `None`, and the rule runs
//! on the `cel` crate ([`super::cel`]). Builds with debug assertions compare each of its
//! answers with the crate's.

use super::Structural;
use super::escape::escape;
use crate::value::{Map, Value};
use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use regex::Regex;
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A rule compiled for the fast path.
#[derive(Debug)]
pub(super) struct Program {
    root: Node,
    /// Variable slots: `self`, `oldSelf`, then two for each comprehension.
    slots: usize,
}

#[derive(Debug)]
enum Node {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
    Var(usize),
    Select {
        operand: Box<Node>,
        field: String,
        test: bool,
        /// Where the field was found last: its property's index and its key's in the
        /// object (objects of a CRD are much alike; a wrong hint costs a search).
        hints: Hints,
    },
    Index(Box<Node>, Box<Node>),
    List(Vec<Node>),
    /// A list of literals (`['gold', 'silver']`), built once.
    Literals(Vec<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Neg(Box<Node>),
    NotStrictlyFalse(Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    Binary(Op, Box<Node>, Box<Node>),
    Size(Box<Node>),
    Matches(Box<Node>, Pattern),
    Comprehension(Box<Loop>),
    Fold(Box<Fold>),
}

/// `range.all(x, pred)` (`or`: `exists`).
#[derive(Debug)]
struct Fold {
    range: Node,
    iter: usize,
    pred: Node,
    or: bool,
}

/// `l` as a [`Fold`] when it is the expansion of `all` or `exists`.
fn folded(l: Loop) -> Node {
    let accu = l.accu;
    let is_accu = |n: &Node| matches!(n, Node::Var(v) if *v == accu);
    let or = match (&l.init, &l.cond, &l.step) {
        (Node::Bool(true), Node::NotStrictlyFalse(c), Node::And(a, _))
            if is_accu(c) && is_accu(a) =>
        {
            false
        }
        (Node::Bool(false), Node::NotStrictlyFalse(c), Node::Or(a, _))
            if matches!(&**c, Node::Not(n) if is_accu(n)) && is_accu(a) =>
        {
            true
        }
        _ => return Node::Comprehension(Box::new(l)),
    };
    if !is_accu(&l.result) {
        return Node::Comprehension(Box::new(l));
    }
    match l.step {
        Node::And(_, pred) | Node::Or(_, pred) => Node::Fold(Box::new(Fold {
            range: l.range,
            iter: l.iter,
            pred: *pred,
            or,
        })),
        step => Node::Comprehension(Box::new(Loop { step, ..l })),
    }
}

#[derive(Debug, Default)]
struct Hints {
    property: AtomicUsize,
    key: AtomicUsize,
}

/// The entry named `name` of `entries`, tried first at the index `hint` holds (and then kept
/// there).
fn find<'e, T: AsRef<str>, U>(
    entries: &'e [(T, U)],
    name: &str,
    hint: &AtomicUsize,
) -> Option<&'e (T, U)> {
    let at = hint.load(Relaxed);
    if let Some(e) = entries.get(at).filter(|(n, _)| n.as_ref() == name) {
        return Some(e);
    }
    let (i, e) = entries
        .iter()
        .enumerate()
        .find(|(_, (n, _))| n.as_ref() == name)?;
    hint.store(i, Relaxed);
    Some(e)
}

#[derive(Debug)]
struct Loop {
    range: Node,
    iter: usize,
    accu: usize,
    init: Node,
    cond: Node,
    step: Node,
    result: Node,
}

#[derive(Debug)]
enum Pattern {
    /// A literal pattern, compiled once (a pattern Go refuses leaves the rule to the crate).
    Literal(Regex),
    Dynamic(Box<Node>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    In,
    StartsWith,
    EndsWith,
    Contains,
}

/// Compiles `expr` (the AST of a rule without `optionalOldSelf`), if the fast path covers it.
pub(super) fn compile(expr: &IdedExpr) -> Option<Program> {
    let mut c = Compiler {
        scope: vec![("self".into(), 0), ("oldSelf".into(), 1)],
        slots: 2,
    };
    let root = c.node(expr)?;
    Some(Program {
        root,
        slots: c.slots,
    })
}

struct Compiler {
    /// The names in scope, innermost last, with their slots.
    scope: Vec<(String, usize)>,
    slots: usize,
}

impl Compiler {
    fn boxed(&mut self, e: &IdedExpr) -> Option<Box<Node>> {
        self.node(e).map(Box::new)
    }

    fn node(&mut self, e: &IdedExpr) -> Option<Node> {
        Some(match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(b) => Node::Bool(*b.inner()),
                LiteralValue::Int(i) => Node::Int(*i.inner()),
                LiteralValue::UInt(u) => Node::Uint(*u.inner()),
                LiteralValue::Double(d) => Node::Double(*d.inner()),
                LiteralValue::String(s) => Node::Str(s.inner().to_string()),
                LiteralValue::Null | LiteralValue::Bytes(_) => return None,
            },
            Expr::Ident(name) => {
                let (_, slot) = self.scope.iter().rev().find(|(n, _)| n == name)?;
                Node::Var(*slot)
            }
            Expr::Select(s) => {
                // A name that is not its own escaped form (`__dash__`, a reserved word) is
                // resolved by the crate's escaped keys.
                if escape(&s.field).as_deref() != Some(s.field.as_str()) {
                    return None;
                }
                Node::Select {
                    operand: self.boxed(&s.operand)?,
                    field: s.field.clone(),
                    test: s.test,
                    hints: Hints::default(),
                }
            }
            Expr::List(l) if l.optional_indices.is_empty() => {
                let items: Vec<Node> = l
                    .elements
                    .iter()
                    .map(|x| self.node(x))
                    .collect::<Option<_>>()?;
                if items.iter().all(|n| literal(n).is_some()) {
                    Node::Literals(items)
                } else {
                    Node::List(items)
                }
            }
            Expr::Call(call) => self.call(&call.func_name, call.target.as_deref(), &call.args)?,
            Expr::Comprehension(c) if c.iter_var2.is_none() => {
                let range = self.node(&c.iter_range)?;
                let init = self.node(&c.accu_init)?;
                let (iter, accu) = (self.slots, self.slots + 1);
                self.slots += 2;
                self.scope.push((c.accu_var.clone(), accu));
                self.scope.push((c.iter_var.clone(), iter));
                let body = (|| Some((self.node(&c.loop_cond)?, self.node(&c.loop_step)?)))();
                self.scope.pop();
                let result = self.node(&c.result);
                self.scope.pop();
                let (cond, step) = body?;
                folded(Loop {
                    range,
                    iter,
                    accu,
                    init,
                    cond,
                    step,
                    result: result?,
                })
            }
            _ => return None,
        })
    }

    fn call(&mut self, name: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Option<Node> {
        let binary = |op| -> Option<(Op, &IdedExpr, &IdedExpr)> {
            match (target, args) {
                (None, [a, b]) => Some((op, a, b)),
                _ => None,
            }
        };
        let method = |op| -> Option<(Op, &IdedExpr, &IdedExpr)> {
            match (target, args) {
                (Some(t), [a]) => Some((op, t, a)),
                _ => None,
            }
        };
        let op = match name {
            operators::EQUALS => binary(Op::Eq),
            operators::NOT_EQUALS => binary(Op::Ne),
            operators::LESS => binary(Op::Lt),
            operators::LESS_EQUALS => binary(Op::Le),
            operators::GREATER => binary(Op::Gt),
            operators::GREATER_EQUALS => binary(Op::Ge),
            operators::ADD => binary(Op::Add),
            operators::SUBSTRACT => binary(Op::Sub),
            operators::MULTIPLY => binary(Op::Mul),
            operators::DIVIDE => binary(Op::Div),
            operators::MODULO => binary(Op::Rem),
            operators::IN => binary(Op::In),
            "startsWith" => method(Op::StartsWith),
            "endsWith" => method(Op::EndsWith),
            "contains" => method(Op::Contains),
            _ => None,
        };
        if let Some((op, a, b)) = op {
            return Some(Node::Binary(op, self.boxed(a)?, self.boxed(b)?));
        }
        Some(match (name, target, args) {
            (operators::LOGICAL_AND, None, [a, b]) => Node::And(self.boxed(a)?, self.boxed(b)?),
            (operators::LOGICAL_OR, None, [a, b]) => Node::Or(self.boxed(a)?, self.boxed(b)?),
            (operators::LOGICAL_NOT, None, [a]) => Node::Not(self.boxed(a)?),
            (operators::NEGATE, None, [a]) => Node::Neg(self.boxed(a)?),
            (operators::NOT_STRICTLY_FALSE, None, [a]) => Node::NotStrictlyFalse(self.boxed(a)?),
            (operators::CONDITIONAL, None, [c, a, b]) => {
                Node::Cond(self.boxed(c)?, self.boxed(a)?, self.boxed(b)?)
            }
            (operators::INDEX, None, [a, b]) => Node::Index(self.boxed(a)?, self.boxed(b)?),
            ("size", None, [a]) | ("size", Some(a), []) => Node::Size(self.boxed(a)?),
            ("matches", None, [s, p]) | ("matches", Some(s), [p]) => {
                let pattern = match &p.expr {
                    Expr::Literal(LiteralValue::String(lit)) => {
                        Pattern::Literal(super::re2::compile(lit.inner()).ok()?)
                    }
                    _ => Pattern::Dynamic(self.boxed(p)?),
                };
                Node::Matches(self.boxed(s)?, pattern)
            }
            _ => return None,
        })
    }
}

/// A value as a rule sees it, borrowed from the object (or the rule) where it can be.
#[derive(Clone, Debug)]
enum V<'a> {
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
fn literal(n: &Node) -> Option<V<'_>> {
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
pub(super) fn run<'v>(
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
                    V::Str(p) => super::re2::compile(&p).map_err(|_| E::Bail)?.is_match(&s),
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

fn arithmetic<'a>(op: Op, a: V<'a>, b: V<'a>) -> R<'a> {
    let bail = || E::Bail;
    Ok(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(
            match op {
                Op::Add => x.checked_add(y),
                Op::Sub => x.checked_sub(y),
                Op::Mul => x.checked_mul(y),
                Op::Div => x.checked_div(y),
                _ => x.checked_rem(y),
            }
            .ok_or_else(bail)?,
        ),
        (V::Uint(x), V::Uint(y)) => V::Uint(
            match op {
                Op::Add => x.checked_add(y),
                Op::Sub => x.checked_sub(y),
                Op::Mul => x.checked_mul(y),
                Op::Div => x.checked_div(y),
                _ => x.checked_rem(y),
            }
            .ok_or_else(bail)?,
        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    const SCHEMA: &str = "{type: object, properties: {
        num: {type: integer}, w: {type: number}, s: {type: string}, b: {type: boolean},
        d: {type: string, format: date-time}, q: {x-kubernetes-int-or-string: true},
        m: {type: object, additionalProperties: {type: string}},
        ps: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name],
             items: {type: object, properties: {name: {type: string}, port: {type: integer}}}}}}";

    /// The fast path's answer for `rule` on `obj`; `None` when it leaves it to the crate.
    fn fast(rule: &str, obj: &str) -> Option<Result<bool, String>> {
        let s = Structural::from_value(&parse_one(SCHEMA).unwrap(), None);
        let program = cel::Program::compile(rule).unwrap();
        let p = compile(program.expression())?;
        let v = parse_one(obj).unwrap();
        run(&p, &v, None, &s, false)
    }

    const OBJ: &str = "{num: 3, w: 1, s: app-1, b: true, d: '2024-01-01T00:00:00Z', q: 50%,
        m: {a: x, bb: yy}, ps: [{name: http, port: 80}, {name: metrics, port: 9090}]}";

    #[test]
    fn common_rules_are_answered_by_the_schema_typed_values() {
        for (rule, want) in [
            ("self.num >= 0 && self.num <= 100", true),
            ("self.w == 1.0", true),
            ("self.s.size() <= 63 && self.s.startsWith('app-')", true),
            ("self.s.matches('^[a-z][a-z0-9-]*$')", true),
            ("has(self.tier) ? self.tier == 'gold' : self.b", true),
            ("self.ps.all(p, p.port > 0 && p.port < 65536)", true),
            ("self.ps.exists(p, p.name == 'grpc')", false),
            ("self.ps.exists_one(p, p.port > 100)", true),
            ("self.ps.map(p, p.port).all(x, x >= 80)", true),
            ("self.ps.filter(p, p.port > 100).size() == 1", true),
            ("self.m.all(k, k.size() <= 2) && 'a' in self.m", true),
            ("self.m['bb'] == 'yy' && self.m.a == 'x'", true),
            ("self.s in ['app-1', 'app-2']", true),
            ("self.q == '50%'", true),
            (
                "self.num * 2 - 1 == 5 && self.num / 2 == 1 && self.num % 2 == 1",
                true,
            ),
            ("-self.num < 0 && !self.b == false", true),
        ] {
            assert_eq!(fast(rule, OBJ), Some(Ok(want)), "{rule}");
        }
    }

    #[test]
    fn a_missing_field_is_the_servers_error_unless_a_deciding_value_absorbs_it() {
        assert_eq!(fast("self.x > 0", OBJ), Some(Err("x".into())));
        assert_eq!(fast("self.x > 0 || true", OBJ), Some(Ok(true)));
        assert_eq!(fast("false && self.x > 0", OBJ), Some(Ok(false)));
        assert_eq!(fast("self.x > 0 && true", OBJ), Some(Err("x".into())));
        assert_eq!(fast("has(self.x) && self.x > 0", OBJ), Some(Ok(false)));
        // An error in one element of `all` is absorbed by a false one in another.
        assert_eq!(
            fast("self.ps.all(p, p.name == 'http' ? p.nope > 0 : false)", OBJ),
            Some(Ok(false))
        );
        assert_eq!(
            fast("self.ps.all(p, p.name == 'http' ? p.nope > 0 : true)", OBJ),
            Some(Err("nope".into()))
        );
    }

    #[test]
    fn what_the_fast_path_cannot_be_sure_of_is_left_to_the_crate() {
        for rule in [
            // Mixed numeric types, overflow, division by zero, two errors meeting.
            "self.num == 3.0",
            "self.num * 9223372036854775807 > 0",
            "self.num / 0 == 1",
            "self.x > 0 || self.y > 0",
            // A format-typed string, a list compared whole, an index past the end.
            "self.d == self.d",
            "self.ps == self.ps",
            "self.ps[5].port > 0",
        ] {
            assert_eq!(fast(rule, OBJ), None, "{rule}");
        }
        // Functions it does not know are not compiled for it at all.
        let p = cel::Program::compile("self.s.lowerAscii() == 'a'").unwrap();
        assert!(compile(p.expression()).is_none());
    }
}
