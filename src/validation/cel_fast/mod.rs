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

use super::escape::escape;
use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use regex::Regex;
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

mod eval;
#[cfg(test)]
mod tests;

use eval::literal;
pub(in crate::validation) use eval::run;
