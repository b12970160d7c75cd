//! An upper bound of what evaluating a CEL rule can cost, computed from its AST and the size of
//! the values bound to `self` and `oldSelf` *before* the rule is run: the `cel` crate meters
//! nothing and cannot be interrupted, so a rule whose bound passes the apiserver's limits is
//! not evaluated at all.
//!
//! Units are the apiserver's (cel-go's runtime cost tracker, `k8s.io/apiserver/pkg/cel`), kept
//! conservative: one unit per node evaluated and per comprehension iteration, 10/30/40 to
//! create a list/map/object literal, plus the sizes of the strings and lists a function
//! traverses (`matches`: string × pattern, since the crate compiles the pattern on each call).
//!
//! Sizes: `N` is the largest length of any list, map or string reachable from `self` and
//! `oldSelf`, `T` their flattened size. An identifier or a field on them has length ≤ `N`; a
//! comprehension iterates at most the length of its range times; `a + b` adds lengths; `map`
//! and `filter` build at most iterations × (1 + element size) elements, so a `map` nested in a
//! `map` is counted as (at least) `N²`. All arithmetic saturates; the recursion follows the AST,
//! whose depth the parser bounds.

use crate::value::Value;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};

/// `PerCallLimit` (`k8s.io/apiserver/pkg/apis/cel/config.go`): one expression's runtime limit.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// `RuntimeCELCostBudget`: the runtime budget of all the rules of one custom resource.
pub const RUNTIME_BUDGET: u64 = 10_000_000;
/// The largest collection (elements and string bytes) a rule may build here.
pub const MAX_COLLECTION: u64 = 1_000_000;

/// The sizes of the data a rule sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Data {
    /// The largest length of any list, map or string (in bytes) reachable.
    pub n: u64,
    /// The flattened size: every node once, plus the bytes of strings and map keys.
    pub t: u64,
}

impl Data {
    /// The sizes of `values` (`self` and, for a transition rule, `oldSelf`).
    pub fn of(values: &[&Value]) -> Data {
        let mut d = Data::default();
        for v in values {
            d.t = d.t.saturating_add(measure(v, &mut d.n));
        }
        d
    }
}

/// The flattened size of `v`; raises `n` to the largest length met. Iterative: values may be
/// deeper than the stack allows.
fn measure(v: &Value, n: &mut u64) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(1);
        let len = match v {
            Value::String(s) => s.len(),
            Value::List(l) => {
                stack.extend(l.iter());
                l.len()
            }
            Value::Map(m) => {
                for (k, x) in m.iter() {
                    total = total.saturating_add(k.len() as u64);
                    *n = (*n).max(k.len() as u64);
                    stack.push(x);
                }
                m.iter().count()
            }
            _ => 0,
        } as u64;
        if let Value::String(_) = v {
            total = total.saturating_add(len);
        }
        *n = (*n).max(len);
    }
    total
}

/// What evaluating an expression can cost and build, at most.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bound {
    /// Cost in the apiserver's units.
    pub cost: u64,
    /// The largest collection built: elements (nested ones included) and string bytes.
    pub collection: u64,
}

/// The bound of evaluating `expr` with `self`/`oldSelf` of sizes `data`.
pub fn bound(expr: &IdedExpr, data: Data) -> Bound {
    let mut e = Estimator {
        data,
        scope: Vec::new(),
        collection: 0,
    };
    let (cost, _) = e.expr(expr);
    Bound {
        cost,
        collection: e.collection,
    }
}

/// The libraries' namespaced global functions (and every `format.<name>()`): a call
/// `sets.contains(a, b)` is one of them, not a method of a variable `sets`.
const NAMESPACED: &[&str] = &[
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "lists.range",
    "strings.quote",
    "ip.isCanonical",
];

/// A bound of a value an expression yields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Shape {
    /// The length of the value and of anything in it (elements, string bytes), at most.
    len: u64,
    /// Its flattened size, at most.
    flat: u64,
    /// What evaluating it allocates afresh (elements, nested ones included, and string bytes).
    built: u64,
}

impl Shape {
    /// A string or bytes literal of `n` bytes (nothing built: it is part of the program).
    fn literal(n: usize) -> Shape {
        let n = n as u64;
        Shape {
            len: n,
            flat: add(n, 1),
            built: 0,
        }
    }
}

const SCALAR: Shape = Shape {
    len: 0,
    flat: 1,
    built: 0,
};

impl Shape {
    fn join(self, o: Shape) -> Shape {
        Shape {
            len: self.len.max(o.len),
            flat: self.flat.max(o.flat),
            built: self.built.max(o.built),
        }
    }

    /// A value the evaluation holds but did not build (an element or a field of this one).
    fn part(self) -> Shape {
        Shape { built: 0, ..self }
    }
}

struct Estimator {
    data: Data,
    /// Comprehension variables, innermost last.
    scope: Vec<(String, Shape)>,
    collection: u64,
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// How much harder a literal pattern is than its length says: the counted repetitions
/// (`x{1000}`) it contains, multiplied (they may nest).
fn pattern_weight(p: &str) -> u64 {
    let mut w = (p.len() as u64).max(1);
    let b = p.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' {
            let mut j = i + 1;
            let mut n = 0u64;
            let mut m = 0u64;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b',') {
                if b[j] == b',' {
                    m = m.max(n);
                    n = 0;
                } else {
                    n = add(mul(n, 10), u64::from(b[j] - b'0'));
                }
                j += 1;
            }
            if j < b.len() && b[j] == b'}' && j > i + 1 {
                w = mul(w, m.max(n).max(1));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    w
}

impl Estimator {
    /// The cost of `x` and the shape of its value.
    fn expr(&mut self, x: &IdedExpr) -> (u64, Shape) {
        let (cost, shape) = match &x.expr {
            Expr::Unspecified => (1, SCALAR),
            Expr::Literal(l) => match l {
                LiteralValue::String(s) => (1, Shape::literal(s.inner().len())),
                LiteralValue::Bytes(b) => (1, Shape::literal(b.inner().len())),
                _ => (1, SCALAR),
            },
            Expr::Ident(name) => (1, self.ident(name)),
            Expr::Select(s) => {
                let (c, op) = self.expr(&s.operand);
                // A map lookup hashes the field name.
                let c = add(add(c, 1), s.field.len() as u64);
                if s.test { (c, SCALAR) } else { (c, op.part()) }
            }
            Expr::List(l) => {
                let mut cost = 10u64;
                let k = l.elements.len() as u64;
                let mut shape = Shape {
                    len: k,
                    flat: k,
                    built: k,
                };
                for el in &l.elements {
                    let (c, s) = self.expr(el);
                    cost = add(cost, c);
                    shape.len = shape.len.max(s.len);
                    shape.flat = add(shape.flat, s.flat);
                    shape.built = add(shape.built, s.built);
                }
                (cost, shape)
            }
            Expr::Map(m) => self.entries(30, &m.entries),
            Expr::Struct(s) => self.entries(40, &s.entries),
            Expr::Call(call) => {
                let mut cost = 0u64;
                let mut args: Vec<(Shape, &IdedExpr)> = Vec::new();
                // `sets.contains(a, b)`: a namespaced function, not a method of `sets`.
                let namespace = match call.target.as_deref().map(|t| &t.expr) {
                    Some(Expr::Ident(ns))
                        if ns == "format"
                            || NAMESPACED
                                .contains(&format!("{ns}.{}", call.func_name).as_str()) =>
                    {
                        Some(ns)
                    }
                    _ => None,
                };
                let target = call.target.iter().filter(|_| namespace.is_none());
                for a in target.map(|t| &**t).chain(call.args.iter()) {
                    let (c, s) = self.expr(a);
                    cost = add(cost, c);
                    args.push((s, a));
                }
                let name = match namespace {
                    Some(ns) => std::borrow::Cow::Owned(format!("{ns}.{}", call.func_name)),
                    None => std::borrow::Cow::Borrowed(call.func_name.as_str()),
                };
                let (c, s) = self.call(&name, &args);
                (add(cost, c), s)
            }
            Expr::Comprehension(c) => {
                let (mut cost, range) = self.expr(&c.iter_range);
                let iterations = range.len;
                let (ci, init) = self.expr(&c.accu_init);
                cost = add(cost, ci);
                let element = range.part();
                let vars = 1 + usize::from(c.iter_var2.is_some());
                self.scope.push((c.iter_var.clone(), element));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), element));
                }
                // The accumulator grows by what one step adds (the macros only append to a
                // list or count, at a cost that does not depend on the accumulator), at most
                // `iterations` times. Each part is estimated once: no blow-up with nesting.
                self.scope.push((c.accu_var.clone(), init));
                let (cs, once) = self.expr(&c.loop_step);
                let grown = |a: u64, b: u64| add(a, mul(iterations, b.saturating_sub(a)));
                let accu = Shape {
                    len: grown(init.len, once.len),
                    flat: grown(init.flat, once.flat),
                    built: grown(init.built, once.built),
                };
                self.scope.pop();
                self.scope.push((c.accu_var.clone(), accu));
                let (cc, _) = self.expr(&c.loop_cond);
                let per_iteration = add(add(cc, cs), 1);
                cost = add(cost, mul(iterations, per_iteration));
                // The result sees only the accumulator.
                let (cr, result) = self.expr(&c.result);
                cost = add(cost, cr);
                self.scope.truncate(self.scope.len() - 1 - vars);
                let result = Shape {
                    built: result.built.max(accu.built),
                    ..result
                };
                (cost, result)
            }
        };
        self.collection = self.collection.max(shape.built);
        (cost, shape)
    }

    fn ident(&self, name: &str) -> Shape {
        if let Some((_, s)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return s.part();
        }
        // `self`, `oldSelf`, or a name the evaluator does not know (an error): as large as
        // the data, to be safe.
        Shape {
            len: self.data.n,
            flat: self.data.t,
            built: 0,
        }
    }

    fn entries(&mut self, base: u64, entries: &[cel::common::ast::IdedEntryExpr]) -> (u64, Shape) {
        let mut cost = base;
        let k = entries.len() as u64;
        let mut shape = Shape {
            len: k,
            flat: k,
            built: k,
        };
        for e in entries {
            let parts: Vec<&IdedExpr> = match &e.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            };
            for p in parts {
                let (c, s) = self.expr(p);
                cost = add(cost, c);
                shape.len = shape.len.max(s.len);
                shape.flat = add(shape.flat, s.flat);
                shape.built = add(shape.built, s.built);
            }
        }
        (cost, shape)
    }

    /// The cost of calling `f` itself (its arguments already evaluated) and its result.
    fn call(&self, f: &str, args: &[(Shape, &IdedExpr)]) -> (u64, Shape) {
        let a = args.first().map(|x| x.0).unwrap_or(SCALAR);
        let b = args.get(1).map(|x| x.0).unwrap_or(SCALAR);
        match f {
            operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::NOT_STRICTLY_FALSE => (1, SCALAR),
            operators::EQUALS | operators::NOT_EQUALS => (add(1, a.flat.min(b.flat)), SCALAR),
            operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS => (add(1, a.len.min(b.len)), SCALAR),
            operators::IN => {
                // Each element compared with the needle: no more than either side's size.
                let compare = mul(b.len, a.flat).min(b.flat);
                (add(add(1, b.len), add(compare, a.len)), SCALAR)
            }
            operators::CONDITIONAL => {
                let c = args.get(2).map(|x| x.0).unwrap_or(SCALAR);
                (1, b.join(c))
            }
            operators::INDEX => (add(1, b.len), a.part()),
            operators::ADD => {
                let appending = matches!(
                    (&args[0].1.expr, self.scope.last()),
                    (Expr::Ident(n), Some((accu, _))) if n == accu
                ) && args.len() == 2;
                let shape = Shape {
                    len: add(a.len, b.len),
                    flat: add(a.flat, b.flat),
                    built: if appending {
                        // The crate appends to a map/filter accumulator in place.
                        add(a.built, b.built)
                    } else {
                        add(add(a.len, b.len), add(a.built, b.built))
                    },
                };
                let cost = if appending {
                    // What is appended: a list literal's elements (shared, not copied).
                    match &args[1].1.expr {
                        Expr::List(l) => add(1, l.elements.len() as u64),
                        _ => add(1, b.len),
                    }
                } else {
                    add(1, add(a.len, b.len))
                };
                (cost, shape)
            }
            operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO
            | operators::NEGATE => (1, SCALAR),
            "size" => (add(1, a.len), SCALAR),
            "contains" | "startsWith" | "endsWith" => (add(1, add(a.len, b.len)), SCALAR),
            "matches" => {
                let pattern = match &args.get(1).map(|x| &x.1.expr) {
                    Some(Expr::Literal(LiteralValue::String(p))) => pattern_weight(p.inner()),
                    _ => b.len.max(1),
                };
                // Compiled on each call, then run over the string.
                (add(1, mul(add(a.len, 1), add(pattern, 1))), SCALAR)
            }
            // The libraries' functions that build more than their arguments, or work more
            // than once over them.
            "replace" => {
                // Every character replaced: `a` times the replacement, at most.
                let c = args.get(2).map(|x| x.0).unwrap_or(SCALAR);
                let len = add(a.len, mul(a.len, c.len));
                let s = Shape {
                    len,
                    flat: add(len, 1),
                    built: len,
                };
                (add(1, len), s)
            }
            "split" => {
                let s = Shape {
                    len: add(a.len, 1),
                    flat: add(mul(2, a.len), 2),
                    built: add(mul(2, a.len), 2),
                };
                (add(1, add(a.len, b.len)), s)
            }
            "lists.range" => {
                // As many elements as asked (the crate stops at a million).
                let n = match &args.first().map(|x| &x.1.expr) {
                    Some(Expr::Literal(LiteralValue::Int(n))) => {
                        u64::try_from(*n.inner()).unwrap_or(0)
                    }
                    _ => MAX_COLLECTION,
                }
                .min(MAX_COLLECTION);
                let s = Shape {
                    len: n,
                    flat: add(n, 1),
                    built: n,
                };
                (add(1, n), s)
            }
            "distinct" | "sort" | "@sortByAssociatedKeys" => {
                // Each element compared with the others, at most.
                let rebuilt = Shape {
                    built: add(a.built, a.len),
                    ..a
                };
                (add(1, mul(a.len, a.flat)), rebuilt)
            }
            "sets.contains" | "sets.equivalent" | "sets.intersects" => {
                (add(1, mul(2, mul(a.flat, b.flat))), SCALAR)
            }
            "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf" => {
                (add(1, add(a.flat, b.flat)), a.part().join(SCALAR))
            }
            "find" | "findAll" => {
                let pattern = match &args.get(1).map(|x| &x.1.expr) {
                    Some(Expr::Literal(LiteralValue::String(p))) => pattern_weight(p.inner()),
                    _ => b.len.max(1),
                };
                let s = Shape {
                    len: a.len,
                    flat: add(mul(2, a.len), 1),
                    built: add(mul(2, a.len), 1),
                };
                (add(1, mul(add(a.len, 1), add(pattern, 1))), s)
            }
            "validate" => {
                // A named format's check of string `b`: the server charges up to 276 a tenth
                // of the string (`uri`); up to four messages of ~400 bytes, quoting the input.
                let n = b.len;
                let len = add(1600, mul(16, n));
                let s = Shape {
                    len,
                    flat: add(len, 8),
                    built: add(len, 8),
                };
                (add(1, mul(add(n, 10) / 10, 276)), s)
            }
            "getEscapedPath" | "getQuery" => {
                // Escaping triples a byte; a query's keys and values, half its bytes each.
                let len = mul(3, a.len);
                let s = Shape {
                    len,
                    flat: add(len, 1),
                    built: add(len, 1),
                };
                (add(1, len), s)
            }
            "string" | "bytes" | "int" | "uint" | "double" | "bool" | "timestamp" | "duration"
            | "dyn" | "type" => {
                let s = Shape {
                    len: a.len.max(64),
                    flat: a.flat.max(64),
                    built: a.len.max(64),
                };
                (add(1, a.len), s)
            }
            _ => {
                // Anything else (timestamp accessors, optional selection, a function the
                // evaluator does not know): its arguments' sizes traversed, a result as large
                // as them all.
                let mut s = Shape::default();
                let mut cost = 1u64;
                for (x, _) in args {
                    cost = add(cost, x.flat);
                    s.len = add(s.len, x.len);
                    s.flat = add(s.flat, x.flat);
                    s.built = add(s.built, add(x.len, x.built));
                }
                (cost, s)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    fn of(rule: &str, data: Data) -> Bound {
        bound(cel::Program::compile(rule).unwrap().expression(), data)
    }

    #[test]
    fn data_sizes_are_the_longest_length_and_the_flattened_size() {
        let v = parse_one("{a: [1, 2, 3], b: abcdefgh}").unwrap();
        let d = Data::of(&[&v]);
        assert_eq!(d.n, 8);
        // root + a + 3 items + b (8 bytes) + keys a, b.
        assert_eq!(d.t, 1 + 1 + 3 + 1 + 8 + 2);
    }

    #[test]
    fn ordinary_rules_are_cheap() {
        let d = Data { n: 100, t: 1000 };
        assert!(of("self.replicas <= 10", d).cost < 100);
        let b = of("self.items.all(i, i.name != '')", d);
        assert!(b.cost < 10_000, "{b:?}");
        assert!(of("self.x.matches('^[a-z]+$')", d).cost < 10_000);
    }

    #[test]
    fn nested_comprehensions_multiply() {
        let d = Data { n: 1000, t: 5600 };
        let b = of("self.all(a, self.all(b, self.all(c, a == b)))", d);
        assert!(b.cost >= 1000 * 1000 * 1000, "{b:?}");
        let b = of("self.map(a, self.map(b, a + b))", d);
        assert!(b.collection >= 1000 * 1000, "{b:?}");
        assert!(b.cost > PER_CALL_LIMIT, "{b:?}");
        let one = of("self.map(a, a)", Data { n: 100, t: 200 });
        assert!(one.collection < 100_000, "{one:?}");
    }

    #[test]
    fn matches_costs_string_times_pattern() {
        let d = Data { n: 1000, t: 1000 };
        let plain = of("self.matches('abc')", d).cost;
        assert!(plain >= 1000 * 3, "{plain}");
        let counted = of("self.matches('(a{100}){100}')", d).cost;
        assert!(counted >= 1000 * 10_000, "{counted}");
        // A pattern from the data: as long as the data.
        assert!(of("self.a.matches(self.b)", d).cost >= 1000 * 1000);
    }

    #[test]
    fn library_functions_that_build_more_than_they_read_are_bounded_so() {
        let d = Data { n: 1000, t: 1000 };
        // Each `replace` multiplies the length by the replacement's.
        let once = of("self.replace('a', self)", d);
        assert!(once.cost >= 1000 * 1000, "{once:?}");
        let twice = of("self.replace('a', self).replace('a', self)", d);
        assert!(twice.cost > PER_CALL_LIMIT, "{twice:?}");
        // A range as long as the data asks.
        let r = of("lists.range(self.n).map(x, lists.range(self.n))", d);
        assert!(
            r.cost > PER_CALL_LIMIT || r.collection > MAX_COLLECTION,
            "{r:?}"
        );
        assert!(of("lists.range(3).size() == 3", d).cost < 100);
        // Set comparisons: each element against each.
        assert!(of("sets.contains(self.a, self.b)", d).cost >= 1000 * 1000);
    }

    #[test]
    fn bounds_saturate() {
        let d = Data {
            n: u64::MAX / 2,
            t: u64::MAX,
        };
        let b = of("self.map(a, self.map(b, self.map(c, a + b + c)))", d);
        assert_eq!(b.cost, u64::MAX);
        assert_eq!(b.collection, u64::MAX);
    }
}
