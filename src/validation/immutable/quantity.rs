//! `resource.Quantity` values compared by amount, not spelling (`1Gi` is `1024Mi`, `0.5` is
//! `500m`), as `apiequality.Semantic` and the claims' size rules compare them.

use crate::value::Value;
use std::cmp::Ordering;

/// An amount, exactly: `mantissa × 10^exp10 × 2^exp2`.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    mantissa: i128,
    exp10: i32,
    exp2: i32,
}

impl Quantity {
    /// Parses Kubernetes' quantity grammar: a signed decimal number and a suffix (binary
    /// `Ki`…`Ei`, decimal `n u m k M G T P E`, or an exponent `e3`/`E-2`). `None` when the
    /// text is not a quantity or too large to hold exactly.
    pub fn parse(s: &str) -> Option<Quantity> {
        let s = s.trim();
        let (neg, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, suffix) = rest.split_at(num_end);
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        let mut mantissa: i128 = 0;
        for c in int.bytes().chain(frac.bytes()) {
            mantissa = mantissa
                .checked_mul(10)?
                .checked_add(i128::from(c - b'0'))?;
        }
        let mut exp10 = -i32::try_from(frac.len()).ok()?;
        let mut exp2 = 0;
        match suffix {
            "" => {}
            "Ki" => exp2 = 10,
            "Mi" => exp2 = 20,
            "Gi" => exp2 = 30,
            "Ti" => exp2 = 40,
            "Pi" => exp2 = 50,
            "Ei" => exp2 = 60,
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            other => {
                let e = other.strip_prefix(['e', 'E'])?;
                let e: i32 = e.parse().ok()?;
                if e.abs() > 1000 {
                    return None;
                }
                exp10 += e;
            }
        }
        Some(Quantity {
            mantissa: if neg { -mantissa } else { mantissa },
            exp10,
            exp2,
        })
    }

    /// A quantity written as a string or a number.
    pub fn of(v: &Value) -> Option<Quantity> {
        match v {
            Value::String(s) => Quantity::parse(s),
            Value::Int(i) => Some(Quantity {
                mantissa: i128::from(*i),
                exp10: 0,
                exp2: 0,
            }),
            Value::Float(f) => Quantity::parse(&crate::value::gofmt::format_float_v(*f)),
            _ => None,
        }
    }

    /// The amount as `m × 10^e` (binary factors folded in), or `None` past i128.
    fn decimal(self) -> Option<(i128, i32)> {
        let mut m = self.mantissa;
        let mut e = self.exp10;
        for _ in 0..self.exp2 {
            m = m.checked_mul(2)?;
        }
        if m == 0 {
            return Some((0, 0));
        }
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        Some((m, e))
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.partial_cmp(other) == Some(Ordering::Equal)
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let (a, ae) = self.decimal()?;
        let (b, be) = other.decimal()?;
        // Bring both to the smaller exponent.
        let scale = |m: i128, by: i32| -> Option<i128> {
            let mut m = m;
            for _ in 0..by {
                m = m.checked_mul(10)?;
            }
            Some(m)
        };
        let e = ae.min(be);
        match (scale(a, ae - e), scale(b, be - e)) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            // One overflows when scaled: it is the larger in magnitude.
            (None, Some(_)) => Some(if a > 0 {
                Ordering::Greater
            } else {
                Ordering::Less
            }),
            (Some(_), None) => Some(if b > 0 {
                Ordering::Less
            } else {
                Ordering::Greater
            }),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Quantity;
    use std::cmp::Ordering;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} is a quantity"))
    }

    #[test]
    fn spellings_of_one_amount_are_equal() {
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1E3"), q("1000"));
        assert_eq!(q("0"), q("0Gi"));
        assert_ne!(q("1G"), q("1Gi"));
    }

    #[test]
    fn amounts_order() {
        assert_eq!(q("2Gi").partial_cmp(&q("1Gi")), Some(Ordering::Greater));
        assert_eq!(q("999Mi").partial_cmp(&q("1Gi")), Some(Ordering::Less));
        assert_eq!(q("-1").partial_cmp(&q("0")), Some(Ordering::Less));
        assert_eq!(q("1Ei").partial_cmp(&q("1n")), Some(Ordering::Greater));
    }

    #[test]
    fn not_quantities() {
        for s in ["", "Gi", "1.2.3", "1Gb", "abc", "1e", "1e99999"] {
            assert!(Quantity::parse(s).is_none(), "{s}");
        }
    }
}
