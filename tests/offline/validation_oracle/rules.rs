//! `x-kubernetes-validations` rules from a small grammar, typed by the node they sit on:
//! comparisons, `has()`, `size()`, the `all`/`exists`/`exists_one`/`map`/`filter` macros,
//! `startsWith`/`endsWith`/`contains`/`matches`, transition rules (`oldSelf`, and
//! `optionalOldSelf`), with `message`, `messageExpression`, `reason` and `fieldPath`; and calls
//! of Kubernetes' CEL libraries (strings, regex, lists, sets, quantity, ip, cidr, url, semver,
//! format).

use super::schemas::{Shape, shape};
use crate::support::pick;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

/// CEL's reserved words (`k8s.io/apiserver/pkg/cel/escaping.go`).
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The identifier a rule names property `name` by.
pub fn escape(name: &str) -> String {
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    name.replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

const MESSAGES: &[&str] = &[
    "must be valid",
    "my-field must not be 'forbidden'",
    "value is wrong",
    "  padded message  ",
];

const REASONS: &[&str] = &[
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
    "FieldValueInvalid",
];

/// A rule for the root (it sees `apiVersion`, `kind` and `metadata.name`).
pub fn root_rule(rng: &mut StdRng) -> Value {
    let rule = *pick(
        rng,
        &[
            "self.metadata.name.startsWith('w')",
            "has(self.spec)",
            "size(self.metadata.name) < 2",
            "self.kind == 'Widget' && self.apiVersion == 'example.com/v1'",
            "!has(self.metadata.generateName)",
        ],
    );
    let mut r = json!({ "rule": rule });
    if rng.gen_bool(0.5) {
        r["message"] = json!(pick(rng, MESSAGES));
    }
    r
}

/// One rule for schema node `s`.
pub fn rule(rng: &mut StdRng, s: &Value, correlatable: bool) -> Value {
    let transition = correlatable && rng.gen_bool(0.25);
    let optional = transition && rng.gen_bool(0.4);
    let text = match (transition, optional) {
        (false, _) => pred(rng, "self", s, 0),
        (true, false) => transition_rule(rng, s),
        (true, true) => optional_rule(rng, s),
    };
    let mut r = json!({ "rule": text });
    if optional {
        r["optionalOldSelf"] = json!(true);
    }
    if rng.gen_bool(0.4) {
        r["message"] = json!(pick(rng, MESSAGES));
    }
    if rng.gen_bool(0.2) {
        r["messageExpression"] = json!(message_expression(rng, s, transition, optional));
    }
    if rng.gen_bool(0.2) {
        r["reason"] = json!(pick(rng, REASONS));
    }
    if let Shape::Object(props) = shape(s)
        && !props.is_empty()
        && rng.gen_bool(0.15)
    {
        let names: Vec<&String> = props.keys().collect();
        let p = *pick(rng, &names);
        r["fieldPath"] = if p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            json!(format!(".{p}"))
        } else {
            json!(format!("['{p}']"))
        };
    }
    r
}

fn transition_rule(rng: &mut StdRng, s: &Value) -> String {
    let generic = "self == oldSelf".to_string();
    if rng.gen_bool(0.4) {
        return generic;
    }
    match shape(s) {
        Shape::Int => "self >= oldSelf".into(),
        Shape::Str => pick(
            rng,
            &["size(self) >= size(oldSelf)", "self.startsWith(oldSelf)"],
        )
        .to_string(),
        Shape::Object(p) if !p.is_empty() => {
            let names: Vec<&String> = p.keys().collect();
            let e = escape(pick(rng, &names).as_str());
            format!("!has(oldSelf.{e}) || has(self.{e})")
        }
        Shape::Array(items) if matches!(shape(items), Shape::Str | Shape::Int) => pick(
            rng,
            &["size(self) >= size(oldSelf)", "oldSelf.all(x, x in self)"],
        )
        .to_string(),
        Shape::Map(_) => "oldSelf.all(k, k in self)".into(),
        _ => generic,
    }
}

fn optional_rule(rng: &mut StdRng, s: &Value) -> String {
    let p = pred(rng, "self", s, 0);
    match rng.gen_range(0..4) {
        0 => format!("oldSelf.hasValue() ? self == oldSelf.value() : {p}"),
        1 => format!(
            "!oldSelf.hasValue() || {}",
            pred(rng, "oldSelf.value()", s, 0)
        ),
        2 => "oldSelf.orValue(self) == self".into(),
        _ => format!("oldSelf.hasValue() || ({p})"),
    }
}

fn message_expression(rng: &mut StdRng, s: &Value, transition: bool, optional: bool) -> String {
    if optional && rng.gen_bool(0.5) {
        return "oldSelf.hasValue() ? 'changed' : 'created'".into();
    }
    let sh = shape(s);
    let mut options: Vec<String> = vec!["'rule failed'".into(), "'  '".into()];
    match sh {
        Shape::Str => {
            options.push("'bad value: ' + self".into());
            options.push("self".into());
            if transition {
                options.push("'was ' + oldSelf".into());
            }
        }
        Shape::Int => options.push("'got ' + string(self)".into()),
        Shape::Array(_) | Shape::Map(_) => {
            options.push("'size ' + string(size(self))".into());
        }
        Shape::Object(p) if !p.is_empty() => {
            let names: Vec<&String> = p.keys().collect();
            let e = escape(pick(rng, &names).as_str());
            options.push(format!("has(self.{e}) ? 'with {e}' : 'without {e}'"));
        }
        _ => {}
    }
    pick(rng, &options).clone()
}

/// A boolean expression about `e`, a value of schema `s`; `d`: the comprehension depth.
pub fn pred(rng: &mut StdRng, e: &str, s: &Value, d: usize) -> String {
    let n = rng.gen_range(-1..=10);
    match shape(s) {
        Shape::Int => match rng.gen_range(0..7) {
            6 => format!("[{e}, {n}].max() == {e} || [{e}, {n}].min() == {e}"),
            0 => format!("{e} >= {n}"),
            1 => format!("{e} < {n}"),
            2 => format!("{e} % 2 == 0"),
            3 => format!("{e} != {n}"),
            4 => format!("{e} * 2 <= {n}"),
            _ => format!("{e} == {n}"),
        },
        Shape::Num => format!(
            "{e} {}",
            pick(rng, &["> 1.5", "<= 2.0", "> 1", "!= 0.5", "== 1.5"])
        ),
        Shape::Str if rng.gen_bool(0.4) => library_pred(rng, e),
        Shape::Str => match rng.gen_range(0..10) {
            0 => format!("{e}.startsWith('a')"),
            1 => format!("{e}.endsWith('c')"),
            2 => format!("{e}.contains('b')"),
            3 => format!("{e}.matches('^[a-z]+$')"),
            4 => format!("size({e}) <= {}", n.max(0)),
            5 => format!("{e} != 'root'"),
            6 => format!("{e} in ['a', 'ab', 'abc']"),
            7 => format!("{e} == 'ab'"),
            8 => format!("{e}.size() > 0"),
            _ => format!("{e} > 'ab'"),
        },
        Shape::Bool => pick(rng, &["{e}", "!{e}", "{e} == true"]).replace("{e}", e),
        Shape::IntOrString => pick(
            rng,
            &[
                "type({e}) == int ? {e} >= 1 : {e}.startsWith('a')",
                "type({e}) == string",
                "{e} == 1 || {e} == 'a'",
            ],
        )
        .replace("{e}", e),
        Shape::Object(props) if !props.is_empty() => {
            let names: Vec<&String> = props.keys().collect();
            let p = *pick(rng, &names);
            let sub = format!("{e}.{}", escape(p));
            let q = escape(pick(rng, &names).as_str());
            match rng.gen_range(0..10) {
                0..=1 => format!("has({sub})"),
                2 => format!("!has({sub})"),
                3..=6 if d < 3 => format!("!has({sub}) || ({})", pred(rng, &sub, &props[p], d)),
                7 => format!("has({sub}) == has({e}.{q})"),
                8 if d < 3 => pred(rng, &sub, &props[p], d),
                _ => {
                    let ints: Vec<&String> = names
                        .iter()
                        .filter(|k| matches!(shape(&props[k.as_str()]), Shape::Int))
                        .copied()
                        .collect();
                    match ints.as_slice() {
                        [a, b, ..] => {
                            let (a, b) = (escape(a), escape(b));
                            format!("!has({e}.{a}) || !has({e}.{b}) || {e}.{a} <= {e}.{b}")
                        }
                        _ => format!("has({sub})"),
                    }
                }
            }
        }
        Shape::Map(v) => {
            let k = format!("k{d}");
            match rng.gen_range(0..5) {
                0 => format!("size({e}) <= {}", n.max(0)),
                1 => format!("{e}.all({k}, {k}.startsWith('a'))"),
                2 => format!("'a' in {e}"),
                3 if d < 2 => format!(
                    "{e}.all({k}, {})",
                    pred(rng, &format!("{e}[{k}]"), v, d + 1)
                ),
                4 if d < 2 => {
                    format!(
                        "{e}.exists({k}, {})",
                        pred(rng, &format!("{e}[{k}]"), v, d + 1)
                    )
                }
                _ => format!("size({e}) > 0"),
            }
        }
        Shape::Array(items) => {
            let x = format!("x{d}");
            if d >= 2 {
                return format!("size({e}) <= {}", n.max(0));
            }
            let mut p = || pred(rng, &x, items, d + 1);
            let (a, b, c) = (p(), p(), p());
            if rng.gen_bool(0.25) {
                return list_library_pred(rng, e, items);
            }
            match rng.gen_range(0..7) {
                0 => format!("size({e}) <= {}", n.max(0)),
                1 => format!("{e}.all({x}, {a})"),
                2 => format!("{e}.exists({x}, {a})"),
                3 => format!("{e}.exists_one({x}, {a})"),
                4 => format!("{e}.filter({x}, {a}).size() <= 1"),
                5 => format!("{e}.map({x}, {a}).all(b{d}, b{d})"),
                _ => format!("{e}.all({x}, {b}) || {e}.exists({x}, {c})"),
            }
        }
        Shape::Object(_) | Shape::Any => format!("{e} == {e}"),
    }
}

/// A predicate about string `e` through Kubernetes' CEL libraries (strings, regex, quantity,
/// ip, cidr, url, semver, format).
fn library_pred(rng: &mut StdRng, e: &str) -> String {
    let t = *pick(
        rng,
        &[
            "{e}.lowerAscii() == {e}",
            "{e}.upperAscii() != {e}",
            "{e}.indexOf('b') >= 1",
            "{e}.lastIndexOf('.') > 0",
            "{e}.split('.').size() == 3",
            "{e}.replace('a', 'bb').size() > 3",
            "{e}.trim() == {e}",
            "{e}.substring(0, 1) == 'a'",
            "{e}.charAt(0) == 'a'",
            "['x', {e}].join('-').endsWith('c')",
            "'%s-%d'.format([{e}, 1]).startsWith('a')",
            "{e}.find('[0-9]+') != ''",
            "{e}.findAll('[a-c]').size() >= 2",
            "isQuantity({e}) && quantity({e}).isLessThan(quantity('2'))",
            "isQuantity({e}) ? quantity({e}).compareTo(quantity('100m')) >= 0 : true",
            "!isQuantity({e}) || quantity({e}).add(quantity('1')).isGreaterThan(quantity('0'))",
            "isIP({e}) ? ip({e}).family() == 4 : true",
            "isIP({e}) && ip({e}).isLoopback()",
            "isCIDR({e}) && cidr({e}).containsIP('10.1.2.3')",
            "!isCIDR({e}) || cidr({e}).prefixLength() <= 16",
            "isURL({e}) && url({e}).getScheme() == 'https'",
            "!isURL({e}) || url({e}).getHostname() != 'example.com'",
            "isSemver({e}, true) && semver({e}, true).isLessThan(semver('2.0.0'))",
            "!isSemver({e}) || semver({e}).major() == 1",
            "!format.dns1123Label().validate({e}).hasValue()",
            "format.named('qualifiedName').value().validate({e}).hasValue()",
        ],
    );
    t.replace("{e}", e)
}

/// A predicate about list `e` of items `items` through the lists and sets libraries.
fn list_library_pred(rng: &mut StdRng, e: &str, items: &Value) -> String {
    let mut options = vec![
        "sets.equivalent({e}, {e})",
        "sets.contains({e}, {e}.slice(0, 0))",
        "{e}.distinct().size() == size({e})",
        "{e}.reverse().size() == size({e})",
        "size({e}) == 0 || {e}.indexOf({e}[0]) == 0",
        "size({e}) == 0 || {e}.lastIndexOf({e}[0]) >= 0",
    ];
    match shape(items) {
        Shape::Int => options.extend([
            "{e}.isSorted()",
            "size({e}) == 0 || {e}.sum() >= 0",
            "size({e}) == 0 || {e}.min() <= {e}.max()",
            "{e}.sort() == {e}",
            "sets.intersects({e}, [1, 2])",
        ]),
        Shape::Str => options.extend([
            "{e}.isSorted()",
            "size({e}) == 0 || {e}.max() != 'root'",
            "{e}.join(',').size() < 20",
            "sets.contains(['a', 'ab', 'abc', 'b'], {e})",
        ]),
        _ => {}
    }
    pick(rng, &options).replace("{e}", e)
}
