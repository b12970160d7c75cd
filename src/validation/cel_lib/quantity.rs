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

use cel::ExecutionError;
use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use std::any::Any;
use std::cell::Cell;
use std::cmp::Ordering;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

/// `apiservercel.QuantityType`.
static QUANTITY_TYPE: LazyLock<Type> =
    LazyLock::new(|| Type::new_opaque_type("kubernetes.Quantity"));

/// The largest power of ten Go may compute (`exp10` in `inf.Dec`'s rescaling) for fieldguard
/// to reproduce the result: past it, Go takes long (10^(10⁹) is a 400 MB number) or wraps its
/// `int32` scales around.
const EXP_BOUND: i64 = 1_000_000;

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

/// `int64Amount`: `value` × 10^`scale` (`scale` ≥ -9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Amount {
    value: i64,
    scale: i32,
}

/// `positiveScaleInt64`: `base` × 10^`scale` if it fits (a scale ≤ 0 leaves `base` as is).
fn positive_scale(base: i64, scale: i32) -> Option<i64> {
    if base == 0 || scale <= 0 {
        return Some(base);
    }
    let mut v = base;
    for _ in 0..scale {
        // Overflows within 19 steps, as |base| ≥ 1.
        v = v.checked_mul(10)?;
    }
    Some(v)
}

impl Amount {
    /// `int64Amount.Add`: `None` (and no change) on overflow.
    fn add(self, b: Amount) -> Option<Amount> {
        if b.value == 0 {
            return Some(self);
        }
        if self.value == 0 {
            return Some(b);
        }
        match self.scale.cmp(&b.scale) {
            Ordering::Equal => Some(Amount {
                value: self.value.checked_add(b.value)?,
                scale: self.scale,
            }),
            // Go's `int32` difference, which may wrap (then scaling nothing).
            Ordering::Greater => {
                let c = positive_scale(self.value, self.scale.wrapping_sub(b.scale))?;
                Some(Amount {
                    value: c.checked_add(b.value)?,
                    scale: b.scale,
                })
            }
            Ordering::Less => {
                let c = positive_scale(b.value, b.scale.wrapping_sub(self.scale))?;
                Some(Amount {
                    value: self.value.checked_add(c)?,
                    scale: self.scale,
                })
            }
        }
    }

    /// `int64Amount.Sub`: the addition of `-b.value`, which Go wraps for the smallest int64.
    fn sub(self, b: Amount) -> Option<Amount> {
        self.add(Amount {
            value: b.value.wrapping_neg(),
            scale: b.scale,
        })
    }

    /// `int64Amount.AsInt64`.
    fn as_int64(self) -> Option<i64> {
        match self.scale.cmp(&0) {
            Ordering::Equal => Some(self.value),
            Ordering::Less => None,
            Ordering::Greater => positive_scale(self.value, self.scale),
        }
    }
}

/// `inf.Dec`: unscaled ÷ 10^`scale`, the unscaled value held as `coef` × 10^`tz` with no
/// trailing zero in `coef` (`tz` 0 for zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dec {
    coef: i128,
    tz: i64,
    scale: i64,
}

fn pow10_i128(k: i64) -> Option<i128> {
    10i128.checked_pow(u32::try_from(k).ok()?)
}

fn mul_pow10(c: i128, k: i64) -> Option<i128> {
    if c == 0 || k == 0 {
        return Some(c);
    }
    c.checked_mul(pow10_i128(k)?)
}

impl Dec {
    fn new(mut coef: i128, mut tz: i64, scale: i64) -> Dec {
        if coef == 0 {
            tz = 0;
        }
        while coef != 0 && coef % 10 == 0 {
            coef /= 10;
            tz += 1;
        }
        Dec { coef, tz, scale }
    }

    /// `int64Amount.AsDec`.
    fn from_amount(a: Amount) -> Dec {
        Dec::new(i128::from(a.value), 0, -i64::from(a.scale))
    }

    fn signum(&self) -> i64 {
        self.coef.signum() as i64
    }

    /// The numeric order (`inf.Dec.Cmp`, exact).
    fn cmp_value(&self, o: &Dec) -> Ordering {
        let by_sign = self.coef.signum().cmp(&o.coef.signum());
        if by_sign != Ordering::Equal || self.coef == 0 {
            return by_sign;
        }
        // Same sign, both non-zero: compare magnitudes as 0.d × 10^(len(d) + exponent),
        // d the digits without trailing zeros, whose lexicographic order is the numeric one.
        let (a, b) = (
            self.coef.unsigned_abs().to_string(),
            o.coef.unsigned_abs().to_string(),
        );
        let ea = a.len() as i64 + self.tz - self.scale;
        let eb = b.len() as i64 + o.tz - o.scale;
        let magnitude = ea.cmp(&eb).then_with(|| a.cmp(&b));
        if self.coef < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// Whether Go aligns `self` and `o` (`inf.Dec`'s `upscale`) at an affordable cost.
    fn aligns_with(&self, o: &Dec) -> bool {
        (self.scale - o.scale).abs() <= EXP_BOUND
    }

    /// `inf.Dec.Add`: the scale is the larger of the two; `None` beyond an `i128`.
    fn add(&self, o: &Dec) -> Option<Dec> {
        let s = self.scale.max(o.scale);
        let e1 = self.tz + s - self.scale;
        let e2 = o.tz + s - o.scale;
        if self.coef == 0 {
            return Some(Dec::new(o.coef, e2, s));
        }
        if o.coef == 0 {
            return Some(Dec::new(self.coef, e1, s));
        }
        let m = e1.min(e2);
        let a = mul_pow10(self.coef, e1 - m)?;
        let b = mul_pow10(o.coef, e2 - m)?;
        Some(Dec::new(a.checked_add(b)?, m, s))
    }

    /// `inf.Dec.Sub`.
    fn sub(&self, o: &Dec) -> Option<Dec> {
        let neg = Dec {
            coef: o.coef.checked_neg()?,
            ..*o
        };
        self.add(&neg)
    }

    /// `Round(x, 9, inf.RoundUp)` of a positive `x`: to scale 9, away from zero.
    fn round_up_to_nano(&self) -> Dec {
        let shift = 9 - self.scale;
        if shift >= 0 {
            return Dec::new(self.coef, self.tz + shift, 9);
        }
        let k = -shift;
        if self.tz >= k {
            return Dec::new(self.coef, self.tz - k, 9);
        }
        // A remainder is left, `coef` having no trailing zero: the quotient goes up by one.
        let q = pow10_i128(k - self.tz).map_or(0, |p| self.coef / p);
        Dec::new(q + 1, 0, 9)
    }

    /// The unscaled value as the nearest float (`big.Float.SetInt(...).Float64()`).
    fn unscaled_f64(&self) -> f64 {
        format!("{}e{}", self.coef, self.tz)
            .parse::<f64>()
            .unwrap_or(f64::NAN)
    }
}

/// How a `resource.Quantity` holds its value.
#[derive(Clone, Debug)]
enum Form {
    Int(Amount),
    /// Shared, as Go's `*inf.Dec` is between a quantity and the results of its `add`/`sub`;
    /// `None` once it holds a value fieldguard could not compute.
    Dec(Arc<Mutex<Option<Dec>>>),
}

impl Form {
    fn dec(d: Dec) -> Form {
        Form::Dec(Arc::new(Mutex::new(Some(d))))
    }

    /// The exact value.
    fn exact(&self, function: &str) -> Result<Dec, ExecutionError> {
        match self {
            Form::Int(a) => Ok(Dec::from_amount(*a)),
            Form::Dec(d) => (*lock(d)).ok_or_else(|| error(function, BEYOND)),
        }
    }
}

const BEYOND: &str = "the quantity is beyond what fieldguard computes exactly";
const COSTLY: &str =
    "Go computes this with powers of ten too large for fieldguard to reproduce the result";

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
    let (a, b) = (q.exact(function)?, y.exact(function)?);
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

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }

    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }

    /// `apiservercel.Quantity.Equal`: the other value must be a `Quantity` (not a pointer to
    /// one, nor anything else), which it compares with by value.
    fn equals(&self, other: &dyn Val) -> bool {
        let Some(o) = other.downcast_ref::<Quantity>().filter(|o| !o.pointer) else {
            undecided(
                "a quantity compared with a value other than one made by quantity(), which Go \
                 reports as an error",
            );
            return false;
        };
        match cmp_forms(&self.form(), &o.form(), "_==_") {
            Ok(order) => order == Ordering::Equal,
            Err(_) => {
                undecided("quantities compared whose comparison fieldguard does not reproduce");
                false
            }
        }
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Quantity {}

/// Go's `ParseQuantity` errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParseError {
    FormatWrong,
    Numeric,
    Suffix,
    /// Not Go's: a quantity Go reads by computing a power of ten beyond [`EXP_BOUND`].
    Costly,
}

impl ParseError {
    fn message(self) -> &'static str {
        match self {
            ParseError::FormatWrong => {
                "quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            ParseError::Numeric => "unable to parse numeric part of quantity",
            ParseError::Suffix => "unable to parse quantity's suffix",
            ParseError::Costly => COSTLY,
        }
    }
}

/// What `parseQuantityString` splits a quantity into.
struct Parts<'a> {
    positive: bool,
    /// The numeric part as written (sign, leading zeros and all).
    value: &'a [u8],
    /// The integer digits, leading zeros stripped ("0" if none are left).
    num: &'a [u8],
    denom: &'a [u8],
    suffix: &'a [u8],
}

/// `parseQuantityString`.
fn split<'a>(s: &'a [u8]) -> Result<Parts<'a>, ParseError> {
    let end = s.len();
    let mut positive = true;
    let mut pos = 0;
    match s.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let parts = |value: &'a [u8], num: &'a [u8], denom: &'a [u8], suffix: &'a [u8]| {
        Ok(Parts {
            positive,
            value,
            num,
            denom,
            suffix,
        })
    };
    // Leading zeros.
    loop {
        if pos >= end {
            return parts(b"0", b"0", b"", b"");
        }
        if s[pos] != b'0' {
            break;
        }
        pos += 1;
    }
    // The numerator.
    let mut i = pos;
    while i < end && s[i].is_ascii_digit() {
        i += 1;
    }
    if i >= end {
        return parts(s, &s[pos..], b"", b"");
    }
    let num: &[u8] = if i == pos { b"0" } else { &s[pos..i] };
    pos = i;
    // The denominator.
    let mut denom: &[u8] = b"";
    if s[pos] == b'.' {
        pos += 1;
        let mut i = pos;
        while i < end && s[i].is_ascii_digit() {
            i += 1;
        }
        if i >= end {
            return parts(s, num, &s[pos..], b"");
        }
        denom = &s[pos..i];
        pos = i;
    }
    let value = &s[..pos];
    // The suffix: letters, then an optional sign and digits.
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&s[pos]) {
        pos += 1;
    }
    if pos >= end {
        return parts(value, num, denom, &s[suffix_start..]);
    }
    if s[pos] == b'-' || s[pos] == b'+' {
        pos += 1;
    }
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return parts(value, num, denom, &s[suffix_start..]);
    }
    Err(ParseError::FormatWrong)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Base {
    Ten,
    Two,
}

/// `strconv.ParseInt(s, 10, 64)`.
fn parse_int64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i128 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(c - b'0');
        if v > 1 << 63 {
            return None;
        }
    }
    i64::try_from(if negative { -v } else { v }).ok()
}

/// `quantitySuffixer.interpret`: base, exponent, and whether the format is binary.
fn interpret(suffix: &[u8]) -> Option<(Base, i32)> {
    let decimal = |e| Some((Base::Ten, e));
    let binary = |e| Some((Base::Two, e));
    match suffix {
        b"" => decimal(0),
        b"n" => decimal(-9),
        b"u" => decimal(-6),
        b"m" => decimal(-3),
        b"k" => decimal(3),
        b"M" => decimal(6),
        b"G" => decimal(9),
        b"T" => decimal(12),
        b"P" => decimal(15),
        b"E" => decimal(18),
        b"Ki" => binary(10),
        b"Mi" => binary(20),
        b"Gi" => binary(30),
        b"Ti" => binary(40),
        b"Pi" => binary(50),
        b"Ei" => binary(60),
        [b'e' | b'E', rest @ ..] if !rest.is_empty() => {
            // Go keeps the low 32 bits of the exponent.
            decimal(parse_int64(rest)? as i32)
        }
        _ => None,
    }
}

/// The value of digits (no more than 18).
fn digits_value(d: &[u8]) -> i64 {
    d.iter()
        .fold(0i64, |v, &c| v * 10 + i64::from(c.wrapping_sub(b'0')))
}

/// `resource.ParseQuantity`.
fn parse(s: &[u8]) -> Result<Form, ParseError> {
    if s.is_empty() {
        return Err(ParseError::FormatWrong);
    }
    if s == b"0" {
        return Ok(Form::Int(Amount { value: 0, scale: 0 }));
    }
    let p = split(s)?;
    let (base, exponent) = interpret(p.suffix).ok_or(ParseError::Suffix)?;
    let digits = (p.num.len() + p.denom.len()) as i64;
    let (mut scale, precision, mantissa): (i32, i64, i64) = match base {
        Base::Ten => (exponent, 18 - digits, 1),
        Base::Two if exponent >= 0 && p.denom.is_empty() => {
            // `int32(float32(exponent)*3/10)` is exact for the binary suffixes' exponents.
            let precision = 15 - p.num.len() as i64 - i64::from(exponent) * 3 / 10 - 1;
            (0, precision, 1i64 << exponent)
        }
        Base::Two => (0, -1, 1),
    };
    if precision >= 0 {
        scale = scale.wrapping_sub(p.denom.len() as i32);
        if scale >= -9 {
            // At most 18 digits: no overflow.
            let value =
                digits_value(p.num) * 10i64.pow(p.denom.len() as u32) + digits_value(p.denom);
            if let Some(result) = value.checked_mul(mantissa) {
                let value = if p.positive { result } else { -result };
                return Ok(Form::Int(Amount { value, scale }));
            }
        }
    }
    // `inf.Dec.SetString(value)`: needs a digit.
    if !p.value.iter().any(u8::is_ascii_digit) {
        return Err(ParseError::Numeric);
    }
    parse_decimal(&p, base, exponent)
}

/// The `inf.Dec` branch of `ParseQuantity`, once the string is known to be valid.
fn parse_decimal(p: &Parts<'_>, base: Base, exponent: i32) -> Result<Form, ParseError> {
    let denom_len = p.denom.len() as i32;
    // `SetScale(Scale() + Scale(exponent).infScale())`, in int32.
    let scale = i64::from(match base {
        Base::Ten => denom_len.wrapping_add(exponent.wrapping_neg()),
        Base::Two => denom_len,
    });
    // The magnitude's digits, without leading or trailing zeros.
    let all: Vec<u8> = p.num.iter().chain(p.denom).copied().collect();
    let Some(first) = all.iter().position(|&c| c != b'0') else {
        // Zero: not rounded.
        return Ok(Form::dec(Dec::new(0, 0, scale)));
    };
    // Non-zero: rounded to nanos, with 10^|9 - scale|.
    if (9 - scale).abs() > EXP_BOUND {
        return Err(ParseError::Costly);
    }
    let last = all.iter().rposition(|&c| c != b'0').unwrap_or(first);
    let significant = &all[first..=last];
    let tz = (all.len() - 1 - last) as i64;
    let coef = (significant.len() <= 38)
        .then(|| {
            significant
                .iter()
                .fold(0i128, |v, &c| v * 10 + i128::from(c - b'0'))
        })
        .and_then(|c| match base {
            Base::Ten => Some(c),
            Base::Two => c.checked_mul(1i128.checked_shl(u32::try_from(exponent).ok()?)?),
        });
    let Some(coef) = coef else {
        // Valid, of a value fieldguard does not hold.
        return Ok(Form::Dec(Arc::new(Mutex::new(None))));
    };
    let mut d = Dec::new(coef, tz, scale).round_up_to_nano();
    if base == Base::Two {
        let max = Dec::new(i128::from(i64::MAX), 0, 0);
        if d.cmp_value(&max) == Ordering::Greater {
            d = max;
        }
    }
    if !p.positive {
        d.coef = -d.coef;
    }
    Ok(Form::dec(d))
}

/// `math.Pow10`, as Go computes it (a product of two table entries, not always the nearest
/// float to 10ⁿ).
fn pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07, 1e08, 1e09, 1e10, 1e11, 1e12, 1e13, 1e14,
        1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29,
        1e30, 1e31,
    ];
    const POS32: [f64; 10] = [
        1e00, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288,
    ];
    const NEG32: [f64; 11] = [
        1e-00, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    if (0..=308).contains(&n) {
        let n = n as usize;
        return POS32[n / 32] * TAB[n % 32];
    }
    if (-323..=0).contains(&n) {
        let n = (-n) as usize;
        return NEG32[n / 32] / TAB[n % 32];
    }
    if n > 0 { f64::INFINITY } else { 0.0 }
}

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
        form => form.exact("sign")?.signum(),
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
            let d = form.exact("asApproximateFloat")?;
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
