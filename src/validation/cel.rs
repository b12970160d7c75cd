//! `x-kubernetes-validations`: a custom resource's CEL rules, evaluated on the object an apply
//! would store as apiextensions-apiserver does (`pkg/apiserver/schema/cel/validation.go`,
//! Kubernetes 1.36): rules of a node before its children; `self` the node's value (at the root:
//! the object with `apiVersion`, `kind` and only `metadata.name`/`generateName`); transition
//! rules (those naming `oldSelf`) only where the node has an old value to compare with — a
//! field of a correlated object or map, an item of a `list-type: map` list by its keys, never
//! an item of another list; with ratcheting, a rule without `oldSelf` that fails on a value the
//! update leaves as it was is no error. A failure is the server's field error: `message`, the
//! value of `messageExpression`, or `failed rule: <rule>`; `reason` and `fieldPath` as given;
//! a scalar's value printed, an object's or a list's omitted.
//!
//! Evaluated with the `cel` crate (standard CEL and its macros, timestamps and durations,
//! optional values) on values typed by the schema ([`super::cel_value`]: escaped property
//! names, formats, set and map list equality), with `matches` read as Go reads a regular
//! expression ([`super::re2`]), and Kubernetes' CEL libraries ([`super::cel_lib`]). A rule
//! with `optionalOldSelf` runs on create too, `oldSelf` then `optional.none()`. What
//! fieldguard cannot evaluate — a use of a library it does not reproduce, a value it cannot
//! convert, anything that fails to compile or evaluate otherwise — is reported as not
//! evaluated, never guessed; a missing field is the server's `no such key` error.
//! A rule (or `messageExpression`) whose cost bound, computed before it runs (`cel_cost`),
//! could pass the apiserver's per-expression limit or the object's budget is not evaluated.

use super::cel_value::{self, Cel};
use super::{FieldError, cel_cost, cel_fast, re2};
use crate::value::gofmt::{format_float_v, quote};
use crate::value::{Map, Value};
use cel::common::types::{CelBool, CelOptional, CelString};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// The standard environment, with `matches` as Go's `regexp` reads the pattern.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    // Registration only fails on a duplicate, which the `regex` feature being off rules out.
    let _ = cel::add_overload!(env, fn re2_matches: (CelString, CelString) -> Result<CelBool>,
        name = "matches", id = "matches");
    let _ = cel::add_member_overload!(env, fn re2_matches: (CelString, CelString) -> Result<CelBool>,
        name = "matches", id = "string_matches_string");
    super::cel_lib::register(&mut env);
    Arc::new(env)
});

/// `string.matches(regex)`: a match anywhere in the string, by Go's rules.
fn re2_matches(this: &CelString<'_>, re: &CelString<'_>) -> Result<CelBool, cel::ExecutionError> {
    match re2::compile(re.inner()) {
        Ok(r) => Ok(CelBool::from(r.is_match(this.inner()))),
        Err(e) => Err(cel::ExecutionError::function_error(
            "matches",
            e.to_string(),
        )),
    }
}

/// One `x-kubernetes-validations` rule.
#[derive(Clone, Debug, Default)]
pub struct Rule {
    pub rule: String,
    pub message: String,
    pub message_expression: String,
    /// `FieldValueInvalid` (the default), `FieldValueForbidden`, `FieldValueRequired`,
    /// `FieldValueDuplicate`.
    pub reason: Option<String>,
    pub field_path: String,
    pub optional_old_self: bool,
    /// What the walk needs of the rule's text, read once (the rule is shared by every object
    /// of its CRD).
    read: std::sync::OnceLock<Read>,
}

/// A rule's program and what its text says, read once.
#[derive(Clone, Debug)]
struct Read {
    program: Option<Arc<cel::Program>>,
    /// The rule compiled for the fast path, where it covers the rule.
    fast: Option<Arc<cel_fast::Program>>,
    transition: bool,
    reads_old_value: bool,
    reads_old_fields: bool,
    compares: bool,
    /// A library function used as fieldguard does not reproduce it.
    unsupported: Option<&'static str>,
    /// Calls a function of the lists extension (`distinct()`, `sort()`, ...).
    lists_extension: bool,
    /// Prints or converts values to strings (`format`, `string()`).
    prints_strings: bool,
    /// Has an operator or macro that absorbs an error (`&&`, `||`, `all`, `exists`).
    absorbs: bool,
    /// The names the rule selects (`.name`), outside string literals or not.
    selected: Vec<String>,
}

/// The names `rule` selects with `.name` (a superset: string literals are not told apart).
fn selected_names(rule: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in rule.split('.').skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Whether an object at or below `v` lacks (or holds null for) a property its schema declares
/// under one of `names` (escaped as a rule names it).
fn selects_missing(v: &Value, s: &super::Structural, names: &[String]) -> bool {
    match v {
        Value::Map(m) => {
            s.properties.iter().any(|(k, _)| {
                let named = names
                    .iter()
                    .any(|n| *n == *k || super::escape::escape(k).as_deref() == Some(n));
                named && m.get(k).is_none_or(Value::is_null)
            }) || m.iter().any(|(k, child)| match s.property(k) {
                Some(cs) => selects_missing(child, cs, names),
                None => false,
            })
        }
        Value::List(items) => s
            .items
            .as_deref()
            .is_some_and(|is| items.iter().any(|i| selects_missing(i, is, names))),
        _ => false,
    }
}

/// Cost bounds by program and data sizes, per thread (objects of a CRD are much alike, and the
/// bound of a rule is a pure function of both); the program is held so that its address names
/// it while it is here. At most [`BOUNDS`] kept, all dropped when full.
type Bounds = rustc_hash::FxHashMap<(usize, cel_cost::Data), (Arc<cel::Program>, cel_cost::Bound)>;
thread_local! {
    static BOUNDS_SEEN: std::cell::RefCell<Bounds> = std::cell::RefCell::new(Bounds::default());
}
const BOUNDS: usize = 4096;

/// The cost bound of `program` on data of sizes `data`.
fn bound_of(program: &Arc<cel::Program>, data: cel_cost::Data) -> cel_cost::Bound {
    let key = (Arc::as_ptr(program) as usize, data);
    if let Some(b) = BOUNDS_SEEN.with(|m| m.borrow().get(&key).map(|(_, b)| *b)) {
        return b;
    }
    let b = cel_cost::bound(program.expression(), data);
    BOUNDS_SEEN.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= BOUNDS {
            m.clear();
        }
        m.insert(key, (program.clone(), b));
    });
    b
}

impl Rule {
    pub fn from_value(v: &Value) -> Rule {
        let s = |k: &str| v.str_at(&[k]).unwrap_or("").to_string();
        Rule {
            rule: s("rule"),
            message: s("message"),
            message_expression: s("messageExpression"),
            reason: v.str_at(&["reason"]).map(str::to_string),
            field_path: s("fieldPath"),
            optional_old_self: matches!(v.get_path(&["optionalOldSelf"]), Some(Value::Bool(true))),
            read: std::sync::OnceLock::new(),
        }
    }

    fn read(&self) -> &Read {
        self.read.get_or_init(|| {
            let program = compiled(&self.rule);
            let unsupported = super::cel_lib::unsupported(&self.rule);
            let fast = program
                .as_deref()
                .filter(|_| !self.optional_old_self && unsupported.is_none())
                .and_then(|p| cel_fast::compile(p.expression()))
                .map(Arc::new);
            Read {
                program,
                fast,
                transition: self.uses_old_self(),
                reads_old_value: reads_untyped_old_value(&self.rule),
                reads_old_fields: ["oldSelf.value()", "oldSelf.orValue("]
                    .iter()
                    .any(|r| self.rule.contains(r)),
                compares: self.rule.contains("==") || self.rule.contains("!="),
                unsupported,
                lists_extension: super::cel_lib::calls_lists_extension(&self.rule),
                prints_strings: self.rule.contains(".format(") || self.rule.contains("string("),
                absorbs: ["&&", "||", ".all(", ".exists("]
                    .iter()
                    .any(|a| self.rule.contains(a)),
                selected: selected_names(&self.rule),
            }
        })
    }

    /// True when the rule names `oldSelf` (outside string literals): a transition rule.
    fn uses_old_self(&self) -> bool {
        let mut in_str: Option<char> = None;
        let b: Vec<char> = self.rule.chars().collect();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            match in_str {
                Some(_) if c == '\\' => i += 1,
                Some(q) if c == q => in_str = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => in_str = Some(c),
                None if b[i..].starts_with(&['o', 'l', 'd', 'S', 'e', 'l', 'f'])
                    && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
                    && b.get(i + 7)
                        .is_none_or(|n| !(n.is_alphanumeric() || *n == '_')) =>
                {
                    return true;
                }
                None => {}
            }
            i += 1;
        }
        false
    }

    /// `ruleErrorString`: the message, or the rule itself.
    fn error_string(&self) -> &str {
        if self.message.trim().is_empty() {
            self.rule.trim()
        } else {
            self.message.trim()
        }
    }
}

/// What evaluating an object's rules found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub not_evaluated: Vec<String>,
}

/// Evaluates the rules of `schema` on `new` (a whole custom resource); `old` is the stored
/// object of an update.
pub fn evaluate(new: &Value, old: Option<&Value>, schema: &super::Structural) -> Outcome {
    let mut w = Walk {
        out: Outcome::default(),
        programs: HashMap::new(),
        spent: 0,
    };
    let root = |v: &Value| -> Value {
        let Some(m) = v.as_map() else {
            return v.clone();
        };
        let mut out = Map::new();
        for (k, x) in m.iter() {
            if k == "metadata" {
                let mut meta = Map::new();
                for f in ["name", "generateName"] {
                    if let Some(s) = x.get_path(&[f]) {
                        meta.insert(f, s.clone());
                    }
                }
                out.insert("metadata", Value::Map(meta));
            } else {
                out.insert(k.clone(), x.clone());
            }
        }
        Value::Map(out)
    };
    // Only the root's own rules see it trimmed; its children are the object's.
    if schema.rules.is_empty() {
        w.node(new, old, None, schema, "", true);
    } else {
        let (new_root, old_root) = (root(new), old.map(root));
        w.node(&new_root, old_root.as_ref(), None, schema, "", true);
    }
    w.out
}

/// Whether errors raised at a node are dropped by ratcheting: the nearest correlated value (a
/// new value, its old one, their schema) is unchanged; `None`: never.
type Ratchet<'v> = Option<(&'v Value, &'v Value, &'v super::Structural)>;

struct Walk {
    out: Outcome,
    /// Compiled rules and message expressions, by their text.
    programs: HashMap<String, Option<Arc<cel::Program>>>,
    /// The bounds of the costs of the expressions evaluated so far (the apiserver's
    /// `RuntimeCELCostBudget` is per object).
    spent: u64,
}

/// Whether an optionalOldSelf rule reads the old value other than by selecting a plain field
/// of it (`oldSelf.value().foo` reads alike typed or not; `oldSelf.value() == self`,
/// `oldSelf.orValue(x)` and escaped names do not).
fn reads_untyped_old_value(rule: &str) -> bool {
    if rule.contains("oldSelf.?") || rule.contains("oldSelf[") {
        return true;
    }
    // An escaped name anywhere may select on the untyped value (through a comprehension's
    // variable or an index: `oldSelf.value().m[k].__namespace__`).
    let reads = rule.contains("oldSelf.value()") || rule.contains("oldSelf.orValue(");
    if reads && rule.contains("__") {
        return true;
    }
    // Each `oldSelf.value()` and `oldSelf.orValue(...)` must be followed by `.name`.
    let b = rule.as_bytes();
    let mut at = 0;
    while let Some(i) = rule[at..].find("oldSelf.") {
        let call = at + i + "oldSelf.".len();
        at = call;
        let open = if rule[call..].starts_with("value(") {
            call + "value".len()
        } else if rule[call..].starts_with("orValue(") {
            call + "orValue".len()
        } else {
            continue;
        };
        let mut depth = 0usize;
        let mut close = None;
        for (j, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { return true };
        // The whole chain of selections after it: plain names only.
        let mut rest = &rule[close + 1..];
        let mut selected = 0;
        while let Some(field) = rest.strip_prefix('.') {
            let len = field
                .bytes()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
                .count();
            let name = &field[..len];
            if name.is_empty() || name.contains("__") {
                return true;
            }
            rest = &field[len..];
            if rest.trim_start().starts_with('[') {
                return true;
            }
            if rest.trim_start().starts_with('(') {
                // A method of the untyped value (or of a selected field).
                return selected == 0;
            }
            selected += 1;
        }
        if selected == 0 {
            return true;
        }
    }
    false
}

/// Compiled rules and message expressions, by their text, shared by every object and thread
/// (a CRD's rules are compiled once, not once an object); at most [`PROGRAMS`] kept, the
/// whole cache dropped when full (a hostile stream of distinct rules costs a recompile, not
/// memory).
static COMPILED: std::sync::LazyLock<dashmap::DashMap<String, Option<Arc<cel::Program>>>> =
    std::sync::LazyLock::new(dashmap::DashMap::new);
const PROGRAMS: usize = 4096;

fn compiled(src: &str) -> Option<Arc<cel::Program>> {
    if let Some(p) = COMPILED.get(src) {
        return p.clone();
    }
    // Rules are input: a parser that panics on one is a rule not evaluated.
    let escaped = super::escape::reserved_selections(src);
    let p = std::panic::catch_unwind(|| ENV.compile(&escaped).ok())
        .ok()
        .flatten()
        .map(Arc::new);
    if COMPILED.len() >= PROGRAMS {
        COMPILED.clear();
    }
    COMPILED.insert(src.to_string(), p.clone());
    p
}

impl Walk {
    fn program(&mut self, src: &str) -> Option<Arc<cel::Program>> {
        if let Some(p) = self.programs.get(src) {
            return p.clone();
        }
        let p = compiled(src);
        self.programs.insert(src.to_string(), p.clone());
        p
    }

    fn skipped(&mut self, path: &str, rule: &Rule, why: &str) {
        let at = if path.is_empty() { "<root>" } else { path };
        let n = format!("{at}: rule {:?} not evaluated ({why})", rule.rule.trim());
        if !self.out.not_evaluated.contains(&n) {
            self.out.not_evaluated.push(n);
        }
    }

    /// Why a program of cost bound `b` (on the data it is to run on) is not to be run, if it
    /// is not: its cost is bounded first (the evaluator can be neither metered nor
    /// interrupted); otherwise its bound is charged to the object's budget.
    fn unaffordable(&mut self, b: cel_cost::Bound) -> Option<String> {
        if b.cost > cel_cost::PER_CALL_LIMIT {
            return Some(format!(
                "its cost could pass the apiserver's per-rule limit of {} (estimated up to {}): not evaluated here",
                cel_cost::PER_CALL_LIMIT,
                b.cost
            ));
        }
        if b.collection > cel_cost::MAX_COLLECTION {
            return Some(format!(
                "it could build a collection of up to {} elements (more than {}): not evaluated here",
                b.collection,
                cel_cost::MAX_COLLECTION
            ));
        }
        if self.spent.saturating_add(b.cost) > cel_cost::RUNTIME_BUDGET {
            return Some(format!(
                "the object's rules could pass the apiserver's per-object cost budget of {}: not evaluated here",
                cel_cost::RUNTIME_BUDGET
            ));
        }
        self.spent = self.spent.saturating_add(b.cost);
        None
    }

    /// Evaluates the rules of `s` at `v` and below. `old` is the value correlated with `v` in
    /// the stored object (upstream's `CorrelatedObject`); `ratchet` decides whether errors
    /// raised here are dropped (`shouldRatchetError`): `v` equals its correlated old value, or,
    /// without one, the nearest correlated ancestor equals its own.
    fn node(
        &mut self,
        v: &Value,
        old: Option<&Value>,
        ratchet: Ratchet<'_>,
        s: &super::Structural,
        path: &str,
        root: bool,
    ) {
        // A rule on a nullable field validates its non-null values only.
        if v.is_null() || s.no_rules_below {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        // The server's equality of correlated values; the root is never unchanged.
        let ratchet = match old {
            Some(_) if root => None,
            Some(o) => Some((v, o, s)),
            None => ratchet,
        };
        if !s.rules.is_empty() {
            self.rules(v, old, ratchet, s, path, root);
        }
        match v {
            Value::Map(m) => {
                for (k, child) in m.iter() {
                    if root && (k == "apiVersion" || k == "kind" || k == "metadata") {
                        continue;
                    }
                    let old_child = old.and_then(|o| o.get_path(&[k]));
                    if let Some((_, cs)) = s.properties.iter().find(|(n, _)| n == k) {
                        let p = if path.is_empty() {
                            k.to_string()
                        } else {
                            format!("{path}.{k}")
                        };
                        self.node(child, old_child, ratchet, cs, &p, false);
                    } else if let Some(cs) = s.additional.as_deref() {
                        let p = format!("{path}[{k}]");
                        self.node(child, old_child, ratchet, cs, &p, false);
                    }
                }
            }
            Value::List(items) => {
                if let Some(is) = s.items.as_deref() {
                    for (i, item) in items.iter().enumerate() {
                        let old_item = super::ratchet::correlate_item(s, old, item);
                        let p = format!("{path}[{i}]");
                        self.node(item, old_item, ratchet, is, &p, false);
                    }
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rules(
        &mut self,
        v: &Value,
        old: Option<&Value>,
        ratchet: Ratchet<'_>,
        s: &super::Structural,
        path: &str,
        root: bool,
    ) {
        // Decided when a rule first fails (most never do).
        let unchanged = std::cell::OnceCell::new();
        let ratcheted = || {
            *unchanged.get_or_init(|| {
                ratchet.is_some_and(|(n, o, rs)| super::ratchet::unchanged(n, o, rs))
            })
        };
        let ty = s.ty.clone().unwrap_or_default();
        let data = cel_cost::Data::of(&[Some(v), old].into_iter().flatten().collect::<Vec<_>>());
        let mut bound = Bound {
            v,
            old,
            s,
            root,
            this: None,
            previous: None,
            plain: None,
            optional: None,
        };
        let this_convertible = cel_value::convertible(v, s, root);
        // Read by the rules that name `oldSelf` only.
        let old_ok = std::cell::OnceCell::new();
        let old_convertible =
            || *old_ok.get_or_init(|| old.map(|o| cel_value::convertible(o, s, root)));
        let unknown_fields = std::cell::OnceCell::new();
        let holds_unknown_fields = || {
            *unknown_fields.get_or_init(|| {
                cel_value::holds_unknown_fields(v, s)
                    || old.is_some_and(|o| cel_value::holds_unknown_fields(o, s))
            })
        };
        for rule in &s.rules {
            if rule.rule.trim().is_empty() {
                continue;
            }
            let read = rule.read();
            let transition = read.transition;
            if transition && old.is_none() && !rule.optional_old_self {
                continue;
            }
            // Under optionalOldSelf the server gives `oldSelf.value()` untyped (an object's
            // raw keys: `oldSelf.value().x__dot__y` is no such key; `self == oldSelf.value()`
            // of objects is no such overload): reproduced for plain scalars only.
            let plain_scalar = !s.int_or_string
                && match s.ty.as_deref() {
                    Some("string") => s.format.is_none(),
                    Some("integer" | "boolean") => true,
                    _ => false,
                };
            let reads_old_value = read.reads_old_value;
            // The untyped old value keeps its null and unknown fields (`oldSelf.value().f` of a
            // null `f` is null there, no such key here).
            let reads_old_fields =
                read.reads_old_fields && old.is_some_and(|o| cel_value::holds_unknown_fields(o, s));
            if rule.optional_old_self && ((reads_old_value && !plain_scalar) || reads_old_fields) {
                self.skipped(
                    path,
                    rule,
                    "an optionalOldSelf rule on a value the server gives to oldSelf untyped",
                );
                continue;
            }
            if read.compares && holds_unknown_fields() {
                self.skipped(
                    path,
                    rule,
                    "it compares objects holding null fields or fields kept by x-kubernetes-preserve-unknown-fields, which the server's equality reads and fieldguard's does not",
                );
                continue;
            }
            if read.prints_strings
                && (cel_value::holds_non_utf8_bytes(v, s)
                    || old.is_some_and(|o| cel_value::holds_non_utf8_bytes(o, s)))
            {
                self.skipped(
                    path,
                    rule,
                    "it prints values holding bytes that are not UTF-8, which cel-go refuses with an error fieldguard does not reproduce",
                );
                continue;
            }
            // The caller gave up (a request's deadline): the rest is not evaluated, and each
            // rule left costs a clock read.
            if crate::deadline::current_expired() {
                self.skipped(path, rule, "the deadline passed before it was evaluated");
                continue;
            }
            if !this_convertible {
                let e = bound.this().err().unwrap_or_default();
                self.skipped(
                    path,
                    rule,
                    &format!("the value cannot be given to CEL as the apiserver gives it: {e}"),
                );
                continue;
            }
            // An old value that cannot be converted leaves `oldSelf` unbound for the rules
            // that do not name it.
            let names_old = transition || rule.optional_old_self;
            let previous = old.filter(|_| names_old && old_convertible() == Some(true));
            if names_old && old_convertible() == Some(false) {
                let e = bound.previous().err().unwrap_or_default();
                self.skipped(
                    path,
                    rule,
                    &format!("the old value cannot be given to CEL as the apiserver gives it: {e}"),
                );
                continue;
            }
            if let Some(why) = read.unsupported {
                self.skipped(path, rule, why);
                continue;
            }
            // cel-go fails the whole rule with an internal error when a lists-extension function
            // is handed an error, even where `&&`, `||`, `all` or `exists` would absorb it; the
            // crate absorbs it (seed 1796661192). Such a rule is not judged where a field it
            // selects is missing.
            if read.lists_extension
                && read.absorbs
                && (selects_missing(v, s, &read.selected)
                    || old.is_some_and(|o| selects_missing(o, s, &read.selected)))
            {
                self.skipped(
                    path,
                    rule,
                    "a lists-extension call may be handed a missing field's error, which cel-go turns into an internal error that nothing absorbs",
                );
                continue;
            }
            let Some(program) = read.program.as_ref() else {
                self.skipped(path, rule, "does not compile here");
                continue;
            };
            if let Some(why) = self.unaffordable(bound_of(program, data)) {
                self.skipped(path, rule, &why);
                continue;
            }
            let fast = read
                .fast
                .as_ref()
                .and_then(|f| cel_fast::run(f, v, previous, s, root));
            let verdict = match fast {
                Some(verdict) => {
                    if cfg!(debug_assertions) {
                        let crate_says = bound.run(program, rule.optional_old_self);
                        assert!(
                            crate_says == Ran::Verdict(verdict.clone()),
                            "the fast path of rule {:?} said {verdict:?} where the cel crate says {crate_says:?}",
                            rule.rule
                        );
                    }
                    verdict
                }
                None => match bound.run(program, rule.optional_old_self) {
                    Ran::Verdict(verdict) => verdict,
                    Ran::Skipped(why) => {
                        self.skipped(path, rule, &why);
                        continue;
                    }
                },
            };
            let failed = match verdict {
                Ok(true) => continue,
                Ok(false) => None,
                Err(_) if read.lists_extension => {
                    // cel-go hands the error to the function, which fails on it with an
                    // "internal error: interface conversion" of its own (seed 1796649143).
                    self.skipped(
                        path,
                        rule,
                        "a missing field inside a lists-extension call, which cel-go reports as an internal error of its own",
                    );
                    continue;
                }
                Err(k) => Some(format!(
                    "no such key: {k} evaluating rule: {}",
                    rule.error_string()
                )),
            };
            let at = if rule.field_path.trim().is_empty() {
                path.to_string()
            } else {
                match super::field_path::printed(path, rule.field_path.trim(), s) {
                    Some(at) => at,
                    None => {
                        self.skipped(
                            path,
                            rule,
                            "its fieldPath does not read as the server reads it",
                        );
                        continue;
                    }
                }
            };
            let at = if at.is_empty() {
                "<nil>".to_string()
            } else {
                at
            };
            if let Some(detail) = failed {
                // An evaluation error: `field.Invalid(path, type, ...)` at the rule's node.
                self.out.errors.push(FieldError {
                    field: if path.is_empty() {
                        "<nil>".into()
                    } else {
                        path.to_string()
                    },
                    reason: "FieldValueInvalid".into(),
                    message: format!("Invalid value: {}: {detail}", quote(&ty)),
                    line: None,
                });
                continue;
            }
            // Ratcheting: a rule without oldSelf that fails on an unchanged value.
            if !transition && ratcheted() {
                continue;
            }
            let detail = self
                .message_expression(rule, &mut bound, path, data)
                .unwrap_or_else(|| match rule.message.trim() {
                    "" => format!("failed rule: {}", rule.error_string()),
                    m => m.to_string(),
                });
            let value = if ty == "object" || ty == "array" {
                None
            } else {
                Some(printed(v))
            };
            self.out
                .errors
                .push(field_error(at, rule.reason.as_deref(), value, detail));
        }
    }

    /// The message a rule's `messageExpression` gives, when it gives one the server accepts.
    fn message_expression(
        &mut self,
        rule: &Rule,
        bound: &mut Bound<'_>,
        path: &str,
        data: cel_cost::Data,
    ) -> Option<String> {
        if rule.message_expression.trim().is_empty() {
            return None;
        }
        let program = self.program(&rule.message_expression)?;
        let unsupported = super::cel_lib::unsupported(&rule.message_expression).map(str::to_string);
        if let Some(why) =
            unsupported.or_else(|| self.unaffordable(cel_cost::bound(program.expression(), data)))
        {
            let at = if path.is_empty() { "<root>" } else { path };
            let n = format!(
                "{at}: messageExpression {:?} not evaluated ({why}); the rule's other message is shown",
                rule.message_expression.trim()
            );
            if !self.out.not_evaluated.contains(&n) {
                self.out.not_evaluated.push(n);
            }
            return None;
        }
        // The activation of `messageExpression` binds `oldSelf` plainly, even for a rule with
        // `optionalOldSelf` (upstream evaluates it with `activation`).
        let ctx = bound.context(false).ok()?;
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(ctx)));
        match run.ok()? {
            Ok(cel::Value::String(s)) => {
                let t = s.trim();
                (!t.is_empty() && !t.contains('\n') && t.len() <= 5 * 1024).then(|| t.to_string())
            }
            _ => None,
        }
    }
}

/// A node's values as the `cel` crate is given them, converted when a rule first needs them
/// (the fast path reads the object itself), and the activations of its rules: one for the
/// node, shared by its rules (binding a value copies it).
struct Bound<'v> {
    v: &'v Value,
    old: Option<&'v Value>,
    s: &'v super::Structural,
    root: bool,
    this: Option<Result<Cel, String>>,
    previous: Option<Option<Result<Cel, String>>>,
    plain: Option<cel::Context<'static, 'static>>,
    optional: Option<cel::Context<'static, 'static>>,
}

/// What the `cel` crate made of a rule: its verdict (or the key whose absence is its error),
/// or why it is not evaluated.
#[derive(Debug, PartialEq)]
enum Ran {
    Verdict(Result<bool, String>),
    Skipped(String),
}

fn convert_at(x: &Value, s: &super::Structural, root: bool) -> Result<Cel, String> {
    if root {
        cel_value::root_to_cel(x, s)
    } else {
        cel_value::to_cel(x, s)
    }
}

impl Bound<'_> {
    fn this(&mut self) -> Result<&Cel, String> {
        let (v, s, root) = (self.v, self.s, self.root);
        self.this
            .get_or_insert_with(|| convert_at(v, s, root))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn previous(&mut self) -> Result<Option<&Cel>, String> {
        let (old, s, root) = (self.old, self.s, self.root);
        match self
            .previous
            .get_or_insert_with(|| old.map(|o| convert_at(o, s, root)))
        {
            None => Ok(None),
            Some(Ok(p)) => Ok(Some(p)),
            Some(Err(e)) => Err(e.clone()),
        }
    }

    /// The activation: `self`, and `oldSelf` plainly or (`optional`, for a rule with
    /// `optionalOldSelf`) as an optional, `optional.none()` on create. An old value that
    /// cannot be converted is left unbound (the rules naming it are not evaluated).
    fn context(&mut self, optional: bool) -> Result<&cel::Context<'static, 'static>, String> {
        let ready = if optional {
            self.optional.is_some()
        } else {
            self.plain.is_some()
        };
        let fresh = if ready {
            None
        } else {
            let this = self.this()?.clone();
            let previous = self.previous().ok().flatten().cloned();
            let mut ctx = cel::Context::with_env(ENV.clone());
            ctx.add_variable_as_val("self", this);
            match (optional, previous) {
                (false, Some(p)) => ctx.add_variable_as_val("oldSelf", p),
                (false, None) => {}
                (true, Some(p)) => {
                    ctx.add_variable_as_val("oldSelf", Box::new(CelOptional::of(p)));
                }
                (true, None) => {
                    ctx.add_variable_as_val("oldSelf", Box::new(CelOptional::none()));
                }
            }
            Some(ctx)
        };
        let slot = if optional {
            &mut self.optional
        } else {
            &mut self.plain
        };
        match fresh {
            Some(ctx) => Ok(slot.insert(ctx)),
            None => slot.as_ref().ok_or_else(String::new),
        }
    }

    /// Runs `program` on the `cel` crate.
    fn run(&mut self, program: &cel::Program, optional: bool) -> Ran {
        let ctx = match self.context(optional) {
            Ok(ctx) => ctx,
            Err(e) => {
                return Ran::Skipped(format!(
                    "the value cannot be given to CEL as the apiserver gives it: {e}"
                ));
            }
        };
        cel_value::take_undecided();
        super::cel_lib::take_undecided();
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(ctx)));
        let undecided = cel_value::take_undecided()
            .or_else(|| super::cel_lib::take_undecided().map(str::to_string));
        if let Some(why) = undecided {
            return Ran::Skipped(why);
        }
        match run {
            Err(_) => Ran::Skipped("the evaluator failed".into()),
            Ok(Ok(cel::Value::Bool(b))) => Ran::Verdict(Ok(b)),
            Ok(Ok(_)) => Ran::Skipped("not a boolean".into()),
            Ok(Err(cel::ExecutionError::NoSuchKey(k))) => Ran::Verdict(Err(k.to_string())),
            Ok(Err(e)) => Ran::Skipped(e.to_string()),
        }
    }
}

/// A node's value as `field.Error` prints it (a Go `string` quoted, numbers and booleans
/// plainly, anything else as JSON).
fn printed(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format_float_v(*f),
        Value::Bool(b) => b.to_string(),
        other => crate::value::json::to_string(other, crate::value::json::Style::GO),
    }
}

/// `fieldErrorForReason`.
fn field_error(
    field: String,
    reason: Option<&str>,
    value: Option<String>,
    detail: String,
) -> FieldError {
    let (reason, message) = match reason {
        Some("FieldValueForbidden") => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        Some("FieldValueRequired") => ("FieldValueRequired", format!("Required value: {detail}")),
        Some("FieldValueDuplicate") => (
            "FieldValueDuplicate",
            match value {
                Some(v) => format!("Duplicate value: {v}"),
                None => "Duplicate value".to_string(),
            },
        ),
        _ => (
            "FieldValueInvalid",
            match value {
                Some(v) => format!("Invalid value: {v}: {detail}"),
                None => format!("Invalid value: {detail}"),
            },
        ),
    };
    FieldError {
        field,
        reason: reason.into(),
        message,
        line: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::Structural;
    use crate::value::yaml::parse_one;

    fn schema(rules: &str) -> Structural {
        let s = format!(
            "{{type: object, properties: {{spec: {{type: object, properties: {{mode: {{type: string, x-kubernetes-validations: {rules}}}}}}}}}}}"
        );
        Structural::from_value(&parse_one(&s).unwrap(), None)
    }

    fn obj(mode: &str) -> Value {
        parse_one(&format!(
            "{{apiVersion: a/v1, kind: K, metadata: {{name: n}}, spec: {{mode: {mode}}}}}"
        ))
        .unwrap()
    }

    #[test]
    fn a_rule_that_fails_on_an_unchanged_value_is_ratcheted() {
        let s = schema("[{rule: \"self != 'legacy'\"}]");
        let created = evaluate(&obj("legacy"), None, &s);
        assert_eq!(
            created.errors[0].to_string(),
            "spec.mode: Invalid value: \"legacy\": failed rule: self != 'legacy'"
        );
        assert!(
            evaluate(&obj("legacy"), Some(&obj("legacy")), &s)
                .errors
                .is_empty()
        );
        assert_eq!(
            evaluate(&obj("legacy"), Some(&obj("new")), &s).errors.len(),
            1
        );
    }

    #[test]
    fn transition_rules_need_an_old_value_unless_old_self_is_optional() {
        let s = schema("[{rule: self == oldSelf, message: fixed}]");
        assert!(evaluate(&obj("a"), None, &s).errors.is_empty());
        assert_eq!(evaluate(&obj("b"), Some(&obj("a")), &s).errors.len(), 1);
        let s = schema(
            "[{rule: \"!oldSelf.hasValue() || self == oldSelf.value()\", optionalOldSelf: true}]",
        );
        let o = evaluate(&obj("b"), Some(&obj("a")), &s);
        assert_eq!(o.errors.len(), 1, "{:?}", o.not_evaluated);
        assert!(o.not_evaluated.is_empty(), "{:?}", o.not_evaluated);
        let o = evaluate(&obj("b"), None, &s);
        assert!(o.errors.is_empty() && o.not_evaluated.is_empty(), "{o:?}");
    }

    #[test]
    fn kubernetes_libraries_are_evaluated_and_what_is_not_reproduced_is_said() {
        let s = schema("[{rule: \"isURL(self) && url(self).getScheme() == 'https'\"}]");
        let o = evaluate(&obj("http://x"), None, &s);
        assert_eq!(o.errors.len(), 1, "{o:?}");
        assert!(o.not_evaluated.is_empty(), "{o:?}");
        assert!(evaluate(&obj("https://x"), None, &s).errors.is_empty());
        // A locale's `%e`, and a format string from the data, are not reproduced.
        let s = schema("[{rule: \"'%e'.format([1.5]) == self\"}]");
        let o = evaluate(&obj("x"), None, &s);
        assert!(o.errors.is_empty());
        assert!(
            o.not_evaluated[0]
                .starts_with("spec.mode: rule \"'%e'.format([1.5]) == self\" not evaluated"),
            "{:?}",
            o.not_evaluated
        );
        // A missing field inside a lists-extension call: cel-go's message is its own.
        let s = spec_schema(&["self.ints.distinct().size() == size(self.ints)"]);
        let o = evaluate(&spec_obj("{x: a}"), None, &s);
        assert!(o.errors.is_empty() && o.not_evaluated.len() == 1, "{o:?}");
        // Elsewhere a missing field is the server's `no such key` refusal.
        let s = spec_schema(&["size(self.ints) == 0"]);
        assert_eq!(evaluate(&spec_obj("{x: a}"), None, &s).errors.len(), 1);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_not_printed() {
        let s = "{type: object, properties: {spec: {type: object, properties: {mode: {type: string, format: byte, x-kubernetes-validations: [{rule: \"'%s'.format([self]) != ''\"}, {rule: \"size(self) == 3\"}]}}}}}";
        let s = Structural::from_value(&parse_one(s).unwrap(), None);
        // "root" decodes to 0xae 0x8a 0x2d: cel-go refuses to print it.
        let o = evaluate(&obj("root"), None, &s);
        assert!(o.errors.is_empty(), "{o:?}");
        assert_eq!(o.not_evaluated.len(), 1, "{o:?}");
        assert!(o.not_evaluated[0].contains("not UTF-8"), "{o:?}");
        // "YWJj" is "abc": printed.
        let o = evaluate(&obj("YWJj"), None, &s);
        assert!(o.errors.is_empty() && o.not_evaluated.is_empty(), "{o:?}");
    }

    /// A schema whose `spec` carries `rules` and has `items` (objects with a `name`),
    /// `replicas` and `x`; and an object whose `spec` is `spec` (YAML).
    fn spec_schema(rules: &[&str]) -> Structural {
        let rules: Vec<String> = rules.iter().map(|r| format!("{{rule: {r:?}}}")).collect();
        let s = format!(
            "{{type: object, properties: {{spec: {{type: object, x-kubernetes-validations: [{}], properties: {{items: {{type: array, items: {{type: object, properties: {{name: {{type: string}}, n: {{type: integer}}}}}}}}, ints: {{type: array, items: {{type: integer}}}}, replicas: {{type: integer}}, x: {{type: string}}}}}}}}}}",
            rules.join(", ")
        );
        Structural::from_value(&parse_one(&s).unwrap(), None)
    }

    fn spec_obj(spec: &str) -> Value {
        parse_one(&format!(
            "{{apiVersion: a/v1, kind: K, metadata: {{name: n}}, spec: {spec}}}"
        ))
        .unwrap()
    }

    fn ints(n: usize) -> String {
        let v: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        format!("[{}]", v.join(", "))
    }

    #[test]
    fn rules_that_could_cost_too_much_are_not_evaluated() {
        // Nested `all()` over 1,000 items: ~10^9 steps if it ran.
        let s =
            spec_schema(&["self.ints.all(a, self.ints.all(b, self.ints.all(c, a + b + c >= 0)))"]);
        let o = evaluate(&spec_obj(&format!("{{ints: {}}}", ints(1000))), None, &s);
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        assert_eq!(o.not_evaluated.len(), 1, "{:?}", o.not_evaluated);
        assert!(
            o.not_evaluated[0].starts_with("spec: rule \"self.ints.all(a,")
                && o.not_evaluated[0].contains(
                    "its cost could pass the apiserver's per-rule limit of 1000000 (estimated up to "
                ),
            "{:?}",
            o.not_evaluated
        );
        // A map of maps: N² elements built.
        let s = spec_schema(&["self.ints.map(a, self.ints.map(b, a + b)).size() > 0"]);
        let o = evaluate(&spec_obj(&format!("{{ints: {}}}", ints(3000))), None, &s);
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        assert_eq!(o.not_evaluated.len(), 1, "{:?}", o.not_evaluated);
        assert!(
            o.not_evaluated[0].contains("not evaluated here"),
            "{:?}",
            o.not_evaluated
        );
    }

    #[test]
    fn ordinary_rules_are_still_evaluated() {
        let s = spec_schema(&[
            "self.replicas <= 10",
            "self.items.all(i, i.name != '')",
            "self.x.matches('^[a-z]+$')",
        ]);
        let items = |last: &str| {
            let mut v: Vec<String> = (0..99).map(|i| format!("{{name: n{i}}}")).collect();
            v.push(format!("{{name: {last:?}}}"));
            format!("[{}]", v.join(", "))
        };
        let good = spec_obj(&format!("{{replicas: 3, x: abc, items: {}}}", items("z")));
        let o = evaluate(&good, None, &s);
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        assert!(o.not_evaluated.is_empty(), "{:?}", o.not_evaluated);
        let bad = spec_obj(&format!("{{replicas: 11, x: ABC, items: {}}}", items("")));
        let o = evaluate(&bad, None, &s);
        assert!(o.not_evaluated.is_empty(), "{:?}", o.not_evaluated);
        let got: Vec<String> = o.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            got,
            [
                "spec: Invalid value: failed rule: self.replicas <= 10",
                "spec: Invalid value: failed rule: self.items.all(i, i.name != '')",
                "spec: Invalid value: failed rule: self.x.matches('^[a-z]+$')",
            ]
        );
    }

    #[test]
    fn the_objects_budget_is_shared_by_its_rules() {
        let items: Vec<String> = (0..20_000).map(|_| "{name: x}".to_string()).collect();
        let spec = format!("{{items: [{}]}}", items.join(", "));
        let rule = |k: usize| format!("self.items.all(i, i.name != 'k{k:03}')");
        let program = cel::Program::compile(&rule(0)).unwrap();
        let v = parse_one(&spec).unwrap();
        let cost = cel_cost::bound(program.expression(), cel_cost::Data::of(&[&v])).cost;
        assert!(cost > 100_000 && cost <= cel_cost::PER_CALL_LIMIT, "{cost}");
        let fit = (cel_cost::RUNTIME_BUDGET / cost) as usize;
        let rules: Vec<String> = (0..fit + 3).map(rule).collect();
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        let o = evaluate(&spec_obj(&spec), None, &spec_schema(&rules));
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        assert_eq!(o.not_evaluated.len(), 3, "{:?}", o.not_evaluated);
        assert!(
            o.not_evaluated[0].starts_with(&format!("spec: rule {:?} not evaluated", rule(fit)))
                && o.not_evaluated[0].contains("per-object cost budget of 10000000"),
            "{:?}",
            o.not_evaluated
        );
    }

    #[test]
    fn old_self_inside_a_string_is_no_transition_rule() {
        let r = |rule: &str| Rule {
            rule: rule.into(),
            ..Rule::default()
        };
        assert!(r("self == oldSelf").uses_old_self());
        assert!(r("oldSelf.x == self.x").uses_old_self());
        assert!(!r("self == 'oldSelf'").uses_old_self());
        assert!(!r("self.oldSelfish == 1").uses_old_self());
        assert!(!r("self == \"a\\\"oldSelf\"").uses_old_self());
    }
}

#[cfg(test)]
#[path = "cel_rules_tests.rs"]
mod rules_tests;
