//! Kubernetes' quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`, the value
//! type of `pkg/cel/quantity.go`, the arithmetic of `k8s.io/apimachinery/pkg/api/resource`):
//! `quantity(string)`, `isQuantity(string)`, `sign(q)`, and on a quantity `isGreaterThan`,
//! `isLessThan`, `compareTo`, `asApproximateFloat`, `asInteger`, `isInteger`, `add` and `sub`
//! (of a quantity or an int). Values are of type `kubernetes.Quantity`.
//!
//! What a `resource.Quantity` computes depends on how it holds its value, and that is mirrored
//! here rather than the value alone: an `int64Amount` (value × 10^scale) or an `inf.Dec`
//! (unscaled ÷ 10^scale). `asInteger` only converts the former (so `quantity('1.0')` is no
//! integer, nor is any decimal); `asApproximateFloat` multiplies the float of the unscaled value
//! by `math.Pow10`. So are Go's pointer quirks, which CEL rules can observe:
//!
//! - comparing (`compareTo`, `isGreaterThan`, `isLessThan`) an integer-held receiver with a
//!   decimal turns the receiver decimal for good (`AsDec` on the shared `*Quantity`);
//! - `add`/`sub` on a decimal receiver write the result into the receiver's `inf.Dec`, which the
//!   result shares (the copy in `quantityAdd` is shallow);
//! - `add`/`sub` return a `*Quantity` where `quantity()` returns a `Quantity`, and `Equal`
//!   only accepts the latter as its operand: `quantity('1') == quantity('1').add(0)` is
//!   Go's "no such overload" error, the other way round `true`.
//!
//! Values are exact: a decimal's unscaled value is kept as an `i128` coefficient times a power
//! of ten. A quantity Go holds that does not fit (more than 38 significant digits) is still a
//! quantity, of unknown value: what reads the value fails, what does not (`isInteger`, a
//! receiver's conversion) behaves as in Go, so that an error a rule absorbs (`e || true`)
//! leaves every quantity as Go leaves it. What Go computes only by raising ten to a power
//! beyond 10⁶ (aligning decimals whose scales are that far apart, rounding such a decimal;
//! Go would take seconds to hours, or wrap its `int32` scale), and what Go panics on, is an
//! error. An error is "not evaluated", never an approximation. The equality Go reports as an
//! error cannot be one here (`Val::equals` is a `bool`): it is `false`, and recorded for
//! [`take_undecided`].
//!
//! This file holds the CEL binding: the `kubernetes.Quantity` value with Go's pointer
//! semantics, the functions and their registration, and the record of undecided equalities.
//! The value itself, its parsing and arithmetic, is [`go_resource`].

mod go_resource;

use cel::ExecutionError;
use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use go_resource::{Amount, BEYOND, COSTLY, Dec, Form, ParseError, parse, pow10};
use std::cell::Cell;
use std::cmp::Ordering;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

/// `apiservercel.QuantityType`.
static QUANTITY_TYPE: LazyLock<Type> =
    LazyLock::new(|| Type::new_opaque_type("kubernetes.Quantity"));

pub(super) fn register(env: &mut cel::Env) {
    // Registration fails only on a duplicate, which these names rule out. The type is not
    // declared for rules to name: `kubernetes.Quantity` is no identifier in Kubernetes' CEL
    // environment either.
    let _ = cel::add_overload!(env, fn quantity: (CelString) -> Result<Quantity>,
        id = "string_to_quantity");
    let _ = cel::add_overload!(env, fn is_quantity: (CelString) -> Result<CelBool>,
        id = "is_quantity_string");
    let _ = cel::add_overload!(env, fn sign: (Quantity) -> Result<CelInt>, id = "quantity_sign");
    let _ = cel::add_member_overload!(env, fn is_greater_than: (Quantity, Quantity) -> Result<CelBool>,
        id = "quantity_is_greater_than");
    let _ = cel::add_member_overload!(env, fn is_less_than: (Quantity, Quantity) -> Result<CelBool>,
        id = "quantity_is_less_than");
    let _ = cel::add_member_overload!(env, fn compare_to: (Quantity, Quantity) -> Result<CelInt>,
        id = "quantity_compare_to");
    let _ = cel::add_member_overload!(env, fn as_approximate_float: (Quantity) -> Result<CelDouble>,
        id = "quantity_get_float");
    let _ = cel::add_member_overload!(env, fn as_integer: (Quantity) -> Result<CelInt>,
        id = "quantity_get_int");
    let _ = cel::add_member_overload!(env, fn is_integer: (Quantity) -> CelBool,
        id = "quantity_is_integer");
    let _ = cel::add_member_overload!(env, fn add: (Quantity, Quantity) -> Result<Quantity>,
        id = "quantity_add");
    let _ = cel::add_member_overload!(env, fn add_int: (Quantity, CelInt) -> Result<Quantity>,
        name = "add", id = "quantity_add_int");
    let _ = cel::add_member_overload!(env, fn sub: (Quantity, Quantity) -> Result<Quantity>,
        id = "quantity_sub");
    let _ = cel::add_member_overload!(env, fn sub_int: (Quantity, CelInt) -> Result<Quantity>,
        name = "sub", id = "quantity_sub_int");
}

thread_local! {
    static UNDECIDED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Records that the running evaluation compared values where Go's `Equal` returns an error
/// (which `==` propagates, list equality ignores and `in` skips): its verdict is not the
/// server's.
pub(super) fn undecided(why: &'static str) {
    UNDECIDED.with(|u| {
        if u.get().is_none() {
            u.set(Some(why));
        }
    });
}

/// Why the last evaluation on this thread compared quantities, IPs or CIDRs as Go cannot (an
/// error there), if it did; cleared by the call. The walker reports such a rule as not
/// evaluated, as it does for `cel_value::take_undecided`.
pub(crate) fn take_undecided() -> Option<&'static str> {
    UNDECIDED.with(Cell::take)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn error(function: &str, msg: &str) -> ExecutionError {
    ExecutionError::function_error(function, msg)
}

/// The exact value of a quantity held as `form`.
fn exact(form: &Form, function: &str) -> Result<Dec, ExecutionError> {
    match form {
        Form::Int(a) => Ok(Dec::from_amount(*a)),
        Form::Dec(d) => (*lock(d)).ok_or_else(|| error(function, BEYOND)),
    }
}

/// `Quantity.Cmp` of two copies (no side effect on either).
fn cmp_forms(q: &Form, y: &Form, function: &str) -> Result<Ordering, ExecutionError> {
    if let (Form::Int(a), Form::Int(b)) = (q, y) {
        let diff = (i64::from(a.scale) - i64::from(b.scale)).abs();
        if diff > i64::from(i32::MAX) {
            // `a.scale-b.scale` wraps, and `divideByScaleInt64` divides by zero.
            return Err(error(function, "Go panics comparing these quantities"));
        }
        if diff < 18 {
            // `int64Amount.Cmp`, exact without `inf.Dec`.
            return Ok(Dec::from_amount(*a).cmp_value(&Dec::from_amount(*b)));
        }
    }
    let (a, b) = (exact(q, function)?, exact(y, function)?);
    if !a.aligns_with(&b) {
        return Err(error(function, COSTLY));
    }
    Ok(a.cmp_value(&b))
}

/// A `kubernetes.Quantity`: Go's `*resource.Quantity`, shared by the copies of the value.
#[derive(Clone, Debug)]
pub(super) struct Quantity {
    q: Arc<Mutex<Form>>,
    /// Made by `add`/`sub` (`&apiservercel.Quantity{...}`) rather than `quantity()`.
    pointer: bool,
}

impl Quantity {
    fn new(form: Form, pointer: bool) -> Quantity {
        Quantity {
            q: Arc::new(Mutex::new(form)),
            pointer,
        }
    }

    /// A copy of the `resource.Quantity` (Go's `*q`): the amount copied, the decimal shared.
    fn form(&self) -> Form {
        lock(&self.q).clone()
    }
}

// `apiservercel.Quantity.Equal`: the other value must be a `Quantity` (not a pointer to
// one, nor anything else), which it compares with by value.
super::library_val!(Quantity, QUANTITY_TYPE, |this, other| {
    let Some(o) = other.downcast_ref::<Quantity>().filter(|o| !o.pointer) else {
        undecided(
            "a quantity compared with a value other than one made by quantity(), which Go \
             reports as an error",
        );
        return false;
    };
    match cmp_forms(&this.form(), &o.form(), "_==_") {
        Ok(order) => order == Ordering::Equal,
        Err(_) => {
            undecided("quantities compared whose comparison fieldguard does not reproduce");
            false
        }
    }
});

fn quantity(s: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    parse(s.inner().as_bytes())
        .map(|form| Quantity::new(form, false))
        .map_err(|e| error("quantity", e.message()))
}

fn is_quantity(s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    match parse(s.inner().as_bytes()) {
        Ok(_) => Ok(CelBool::from(true)),
        Err(ParseError::Costly) => Err(error("isQuantity", COSTLY)),
        Err(_) => Ok(CelBool::from(false)),
    }
}

fn sign(q: &Quantity) -> Result<CelInt, ExecutionError> {
    let sign = match q.form() {
        Form::Int(a) => a.value.signum(),
        form => exact(&form, "sign")?.signum(),
    };
    Ok(CelInt::from(sign))
}

/// `q.Cmp(*y)`, `q` the receiver itself: made decimal when either is, before anything can fail.
fn compare(q: &Quantity, y: &Quantity, function: &str) -> Result<Ordering, ExecutionError> {
    let yf = y.form();
    let qf = match q.form() {
        Form::Int(a) if matches!(yf, Form::Dec(_)) => {
            let f = Form::dec(Dec::from_amount(a));
            *lock(&q.q) = f.clone();
            f
        }
        f => f,
    };
    cmp_forms(&qf, &yf, function)
}

fn is_greater_than(q: &Quantity, y: &Quantity) -> Result<CelBool, ExecutionError> {
    Ok(CelBool::from(
        compare(q, y, "isGreaterThan")? == Ordering::Greater,
    ))
}

fn is_less_than(q: &Quantity, y: &Quantity) -> Result<CelBool, ExecutionError> {
    Ok(CelBool::from(
        compare(q, y, "isLessThan")? == Ordering::Less,
    ))
}

fn compare_to(q: &Quantity, y: &Quantity) -> Result<CelInt, ExecutionError> {
    Ok(CelInt::from(compare(q, y, "compareTo")? as i64))
}

fn as_approximate_float(q: &Quantity) -> Result<CelDouble, ExecutionError> {
    let (base, exponent) = match q.form() {
        Form::Int(a) => (a.value as f64, i64::from(a.scale)),
        form => {
            let d = exact(&form, "asApproximateFloat")?;
            (d.unscaled_f64(), -d.scale)
        }
    };
    Ok(CelDouble::from(if exponent == 0 {
        base
    } else {
        base * pow10(exponent)
    }))
}

fn int_value(q: &Quantity) -> Option<i64> {
    match q.form() {
        Form::Int(a) => a.as_int64(),
        Form::Dec(_) => None,
    }
}

fn as_integer(q: &Quantity) -> Result<CelInt, ExecutionError> {
    int_value(q)
        .map(CelInt::from)
        .ok_or_else(|| error("asInteger", "cannot convert value to integer"))
}

fn is_integer(q: &Quantity) -> CelBool {
    CelBool::from(int_value(q).is_some())
}

/// `copy := *q; copy.Add(y)` (or `Sub`), returned as a pointer.
fn arithmetic(q: &Quantity, y: Form, subtract: bool) -> Result<Quantity, ExecutionError> {
    let function = if subtract { "sub" } else { "add" };
    let copy = q.form();
    if let (Form::Int(a), Form::Int(b)) = (&copy, &y) {
        let r = if subtract { a.sub(*b) } else { a.add(*b) };
        if let Some(r) = r {
            return Ok(Quantity::new(Form::Int(r), true));
        }
    }
    // `copy.ToDec()`: a new decimal, or the receiver's own, which the result then writes.
    let target = match copy {
        Form::Int(a) => Arc::new(Mutex::new(Some(Dec::from_amount(a)))),
        Form::Dec(d) => d,
    };
    let y = match &y {
        Form::Int(b) => Some(Dec::from_amount(*b)),
        Form::Dec(d) => *lock(d),
    };
    let current = *lock(&target);
    let result = match (current, y) {
        (Some(x), Some(y)) if !x.aligns_with(&y) => Err(COSTLY),
        (Some(x), Some(y)) if subtract => x.sub(&y).ok_or(BEYOND),
        (Some(x), Some(y)) => x.add(&y).ok_or(BEYOND),
        _ => Err(BEYOND),
    };
    // What Go writes there, or (unknown to fieldguard) nothing anything later reads.
    *lock(&target) = result.ok();
    match result {
        Ok(_) => Ok(Quantity::new(Form::Dec(target), true)),
        Err(msg) => Err(error(function, msg)),
    }
}

fn add(q: &Quantity, y: &Quantity) -> Result<Quantity, ExecutionError> {
    arithmetic(q, y.form(), false)
}

/// `resource.NewQuantity(y, DecimalExponent)` added.
fn add_int(q: &Quantity, y: &CelInt) -> Result<Quantity, ExecutionError> {
    let y = Amount {
        value: *y.inner(),
        scale: 0,
    };
    arithmetic(q, Form::Int(y), false)
}

fn sub(q: &Quantity, y: &Quantity) -> Result<Quantity, ExecutionError> {
    arithmetic(q, y.form(), true)
}

fn sub_int(q: &Quantity, y: &CelInt) -> Result<Quantity, ExecutionError> {
    let y = Amount {
        value: *y.inner(),
        scale: 0,
    };
    arithmetic(q, Form::Int(y), true)
}

#[cfg(test)]
pub(super) mod tests {
    use cel::Value;
    use std::sync::Arc;

    /// Evaluates `expr` with the standard library and fieldguard's quantity and net
    /// libraries: its value, or why not ("undecided: ..." for [`super::take_undecided`]).
    pub(in super::super) fn eval(expr: &str) -> Result<Value, String> {
        let mut env = cel::Env::stdlib();
        super::register(&mut env);
        super::super::net::register(&mut env);
        let program = env.compile(expr).map_err(|e| format!("compile: {e}"))?;
        let ctx = cel::Context::with_env(Arc::new(env));
        super::take_undecided();
        let r = program.execute(&ctx).map_err(|e| e.to_string());
        if let Some(why) = super::take_undecided() {
            return Err(format!("undecided: {why}"));
        }
        r
    }

    #[track_caller]
    pub(in super::super) fn is(expr: &str, want: impl Into<Value>) {
        assert_eq!(eval(expr), Ok(want.into()), "{expr}");
    }

    /// An evaluation error (Go's, or what fieldguard does not reproduce).
    #[track_caller]
    pub(in super::super) fn fails(expr: &str) {
        let r = eval(expr);
        assert!(
            matches!(&r, Err(e) if !e.starts_with("undecided") && !e.starts_with("compile")),
            "{expr}: {r:?}"
        );
    }

    #[track_caller]
    pub(in super::super) fn undecided(expr: &str) {
        let r = eval(expr);
        assert!(
            matches!(&r, Err(e) if e.starts_with("undecided")),
            "{expr}: {r:?}"
        );
    }

    #[track_caller]
    fn float_bits(expr: &str, bits: u64) {
        match eval(expr) {
            Ok(Value::Float(f)) => assert_eq!(f.to_bits(), bits, "{expr}: {f}"),
            r => panic!("{expr}: {r:?}"),
        }
    }

    #[test]
    fn parses_as_resource_parse_quantity() {
        for ok in [
            "20", "20Mi", "20M", "1.5G", "1.3Gi", "10000k", "+1", "-1.5", "1e3", "1E3", "1e+3",
            "1e-3", "0.1n", ".", "Mi", "1.", "-0", "1e400",
        ] {
            is(&format!("isQuantity('{ok}')"), true);
        }
        for bad in [
            "", "20Mo", "10Mm", "200K", "Three", "1,3G", "1e", "e", " 1", "1 ", "1__0",
        ] {
            is(&format!("isQuantity('{bad}')"), false);
            fails(&format!("quantity('{bad}')"));
        }
        // `Mi` and `.` read as zero, as in Go.
        is("quantity('Mi').asInteger()", 0);
        is("quantity('.').asInteger()", 0);
        is("quantity('1.').asInteger()", 1);
    }

    #[test]
    fn compares_exactly() {
        is("quantity('200M').compareTo(quantity('0.2G'))", 0);
        is("quantity('50M').compareTo(quantity('50Mi'))", -1);
        is("quantity('50Mi').compareTo(quantity('50M'))", 1);
        is("quantity('150Mi').isGreaterThan(quantity('100Mi'))", true);
        is("quantity('50M').isLessThan(quantity('100M'))", true);
        is("quantity('0.0001n').compareTo(quantity('1n'))", 0); // rounded up to 1n
        is(
            "quantity('12Ei').compareTo(quantity('9223372036854775807'))",
            0,
        ); // capped
        is("quantity('1') == quantity('1000m')", true);
        is("quantity('200M') == quantity('0.3G')", false);
        is("sign(quantity('-0.0001n'))", -1);
        is("sign(quantity('0.000'))", 0);
        // Go divides by zero comparing these.
        fails("quantity('1e2147483647').compareTo(quantity('1n'))");
    }

    #[test]
    fn integers_are_the_int64_amounts_go_holds() {
        is("quantity('50k').asInteger()", 50_000);
        is("quantity('1Ki').asInteger()", 1024);
        is("quantity('1e3').asInteger()", 1000);
        is("quantity('1.0').isInteger()", false);
        is("quantity('0.5Ki').isInteger()", false);
        is(
            "quantity('9999999999999999999999999999999999999G').isInteger()",
            false,
        );
        fails("quantity('9999999999999999999999999999999999999G').asInteger()");
        fails("quantity('8Ei').asInteger()");
        fails("quantity('1n').add(quantity('1')).asInteger()");
        is("quantity('9223372036854775807').add(1).isInteger()", false);
        is(
            "quantity('9223372036854775807').add(1).compareTo(quantity('9223372036854775808'))",
            0,
        );
        // Go negates the smallest int64 into itself, so subtracting it adds it.
        is(
            "quantity('0').sub(-9223372036854775807 - 1).asInteger()",
            i64::MIN,
        );
    }

    #[test]
    fn arithmetic() {
        is(
            "quantity('50k').add(20).isLessThan(quantity('50020'))",
            false,
        );
        is(
            "quantity('50k').add(quantity('20')) == quantity('50.02k')",
            true,
        );
        is(
            "quantity('50k').sub(quantity('20')) == quantity('49.98k')",
            true,
        );
        is(
            "quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger()",
            20,
        );
        // Beyond an i128 mantissa: not computed.
        fails("quantity('1e30').add(quantity('1n')).isGreaterThan(quantity('0'))");
    }

    #[test]
    fn approximate_floats_as_go_computes_them() {
        is("quantity('50.703k').asApproximateFloat()", 50703.0);
        float_bits("quantity('1e-3').asApproximateFloat()", 0x3f50624dd2f1a9fc);
        float_bits("quantity('0.1').asApproximateFloat()", 0x3fb999999999999a);
        float_bits(
            "quantity('-1.5Gi').asApproximateFloat()",
            0xc1d8000000000000,
        );
        float_bits(
            "quantity('1k').add(quantity('1m')).asApproximateFloat()",
            0x408f40020c49ba5e,
        );
        float_bits(
            "quantity('1').sub(-9223372036854775807 - 1).asApproximateFloat()",
            0xc3e0000000000000,
        );
        is("quantity('1e400').asApproximateFloat() > 1.0e308", true);
        // 0 × math.Pow10(400) = 0 × +Inf.
        assert!(
            matches!(eval("quantity('0e400').asApproximateFloat()"), Ok(Value::Float(f)) if f.is_nan())
        );
    }

    #[test]
    fn go_pointer_semantics_are_kept() {
        // `add`'s result is a *Quantity: equal on the left, Go's error on the right.
        is("quantity('1').add(1) == quantity('2')", true);
        undecided("quantity('2') == quantity('1').add(1)");
        undecided("quantity('1') == 1");
        // A comparison with a decimal makes the receiver decimal (no longer an integer).
        is(
            "[quantity('1')].all(q, q.compareTo(quantity('1.5Gi')) == 7 || q.isInteger())",
            false,
        );
        is(
            "[quantity('1')].all(q, q.compareTo(quantity('1')) == 7 || q.isInteger())",
            true,
        );
        // `add` on a decimal writes into it.
        is("[quantity('1.5Gi')].all(q, q.add(1) == q)", true);
        float_bits(
            "[quantity('1.5Gi')].map(q, [q.add(1), q]).map(p, p[1].asApproximateFloat())[0]",
            0x41d8000000400000,
        );
    }

    #[test]
    fn what_go_computes_at_length_is_not_reproduced() {
        fails("isQuantity('1234567890123456789012e-2000000')");
        fails("quantity('1234567890123456789012e-2000000')");
    }

    #[test]
    fn type_name() {
        is("type(quantity('1')) == type(quantity('2').add(1))", true);
        let q = super::Quantity::new(
            super::Form::Int(super::Amount { value: 1, scale: 0 }),
            false,
        );
        assert_eq!(
            cel::common::value::Val::get_type(&q).name(),
            "kubernetes.Quantity"
        );
    }
}
