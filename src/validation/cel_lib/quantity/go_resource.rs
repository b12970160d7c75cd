//! Go's `resource.Quantity` value, free of CEL (`k8s.io/apimachinery/pkg/api/resource`): how
//! a quantity holds its value ([`Form`]: an `int64Amount` or an `inf.Dec`), their exact
//! arithmetic and order, `ParseQuantity`, and `math.Pow10` as Go computes it.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

/// The largest power of ten Go may compute (`exp10` in `inf.Dec`'s rescaling) for fieldguard
/// to reproduce the result: past it, Go takes long (10^(10⁹) is a 400 MB number) or wraps its
/// `int32` scales around.
const EXP_BOUND: i64 = 1_000_000;

/// `int64Amount`: `value` × 10^`scale` (`scale` ≥ -9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Amount {
    pub(super) value: i64,
    pub(super) scale: i32,
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
    pub(super) fn add(self, b: Amount) -> Option<Amount> {
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
    pub(super) fn sub(self, b: Amount) -> Option<Amount> {
        self.add(Amount {
            value: b.value.wrapping_neg(),
            scale: b.scale,
        })
    }

    /// `int64Amount.AsInt64`.
    pub(super) fn as_int64(self) -> Option<i64> {
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
pub(super) struct Dec {
    coef: i128,
    tz: i64,
    pub(super) scale: i64,
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
    pub(super) fn from_amount(a: Amount) -> Dec {
        Dec::new(i128::from(a.value), 0, -i64::from(a.scale))
    }

    pub(super) fn signum(&self) -> i64 {
        self.coef.signum() as i64
    }

    /// The numeric order (`inf.Dec.Cmp`, exact).
    pub(super) fn cmp_value(&self, o: &Dec) -> Ordering {
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
    pub(super) fn aligns_with(&self, o: &Dec) -> bool {
        (self.scale - o.scale).abs() <= EXP_BOUND
    }

    /// `inf.Dec.Add`: the scale is the larger of the two; `None` beyond an `i128`.
    pub(super) fn add(&self, o: &Dec) -> Option<Dec> {
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
    pub(super) fn sub(&self, o: &Dec) -> Option<Dec> {
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
    pub(super) fn unscaled_f64(&self) -> f64 {
        format!("{}e{}", self.coef, self.tz)
            .parse::<f64>()
            .unwrap_or(f64::NAN)
    }
}

/// How a `resource.Quantity` holds its value.
#[derive(Clone, Debug)]
pub(super) enum Form {
    Int(Amount),
    /// Shared, as Go's `*inf.Dec` is between a quantity and the results of its `add`/`sub`;
    /// `None` once it holds a value fieldguard could not compute.
    Dec(Arc<Mutex<Option<Dec>>>),
}

impl Form {
    pub(super) fn dec(d: Dec) -> Form {
        Form::Dec(Arc::new(Mutex::new(Some(d))))
    }
}

pub(super) const BEYOND: &str = "the quantity is beyond what fieldguard computes exactly";
pub(super) const COSTLY: &str =
    "Go computes this with powers of ten too large for fieldguard to reproduce the result";

/// Go's `ParseQuantity` errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ParseError {
    FormatWrong,
    Numeric,
    Suffix,
    /// Not Go's: a quantity Go reads by computing a power of ten beyond [`EXP_BOUND`].
    Costly,
}

impl ParseError {
    pub(super) fn message(self) -> &'static str {
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
pub(super) fn parse(s: &[u8]) -> Result<Form, ParseError> {
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
pub(super) fn pow10(n: i64) -> f64 {
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
