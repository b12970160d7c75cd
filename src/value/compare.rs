//! Equality and total order of values exactly as structured-merge-diff defines them
//! (`value.Equals`, `value.Compare`): ints and floats compare numerically, other types never
//! equal each other, and the cross-type order is numbers < strings < booleans < lists < maps < null.

use super::{Map, Value};
use std::cmp::Ordering;

/// Byte-wise order of two strings (Go's string comparison). Keys and field names are mostly
/// short: compared eight bytes at a time in place rather than through a call to `memcmp`.
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (&a[..n], &b[..n]);
    while let (Some((xc, xr)), Some((yc, yr))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if xc != yc {
            return u64::from_be_bytes(*xc).cmp(&u64::from_be_bytes(*yc));
        }
        (x, y) = (xr, yr);
    }
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

/// smd `value.Equals`.
pub fn equals(lhs: &Value, rhs: &Value) -> bool {
    use Value::*;
    match (lhs, rhs) {
        (Float(a), Float(b)) => a == b,
        (Float(a), Int(b)) | (Int(b), Float(a)) => *a == *b as f64,
        (Float(_), _) | (_, Float(_)) => false,
        (Int(a), Int(b)) => a == b,
        (String(a), String(b)) => a == b,
        (Bool(a), Bool(b)) => a == b,
        (List(a), List(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equals(x, y)),
        (Map(a), Map(b)) => map_equals(a, b),
        (Null, Null) => true,
        _ => false,
    }
}

fn map_equals(a: &Map, b: &Map) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let lb = b.lookup();
    a.iter()
        .all(|(k, v)| lb.get(k).is_some_and(|w| equals(v, w)))
}

fn float_cmp(a: f64, b: f64) -> Ordering {
    if a > b {
        Ordering::Greater
    } else if a < b {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

/// smd `value.Compare`: a total order usable for sorting set members.
pub fn compare(lhs: &Value, rhs: &Value) -> Ordering {
    use Value::*;
    match (lhs, rhs) {
        (Float(a), Float(b)) => float_cmp(*a, *b),
        (Float(a), Int(b)) => float_cmp(*a, *b as f64),
        (Int(a), Float(b)) => float_cmp(*a as f64, *b),
        (Float(_), _) => Ordering::Less,
        (_, Float(_)) => Ordering::Greater,
        (Int(a), Int(b)) => a.cmp(b),
        (Int(_), _) => Ordering::Less,
        (_, Int(_)) => Ordering::Greater,
        (String(a), String(b)) => compare_bytes(a.as_bytes(), b.as_bytes()),
        (String(_), _) => Ordering::Less,
        (_, String(_)) => Ordering::Greater,
        (Bool(a), Bool(b)) => a.cmp(b),
        (Bool(_), _) => Ordering::Less,
        (_, Bool(_)) => Ordering::Greater,
        (List(a), List(b)) => {
            for (x, y) in a.iter().zip(b) {
                let c = compare(x, y);
                if c != Ordering::Equal {
                    return c;
                }
            }
            a.len().cmp(&b.len())
        }
        (List(_), _) => Ordering::Less,
        (_, List(_)) => Ordering::Greater,
        (Map(a), Map(b)) => map_compare(a, b),
        (Map(_), _) => Ordering::Less,
        (_, Map(_)) => Ordering::Greater,
        (Null, Null) => Ordering::Equal,
    }
}

/// smd `MapCompare`: walks the sorted union of keys; the first difference decides. Reproduces the
/// reference's quirks (a key missing on one side orders that side after the other).
fn map_compare(a: &Map, b: &Map) -> Ordering {
    let (la, lb) = (a.len(), b.len());
    if la == 0 && lb == 0 {
        return Ordering::Equal;
    }
    let (ia, ib) = (a.lookup(), b.lookup());
    let mut keys: Vec<&str> = a.keys().map(|k| k.as_str()).collect();
    keys.extend(b.keys().map(|k| k.as_str()).filter(|k| !ia.contains(k)));
    keys.sort_unstable_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
    for (i, k) in keys.iter().enumerate() {
        let c = if i == la {
            Ordering::Less
        } else if i == lb {
            Ordering::Greater
        } else {
            match (ia.get(k), ib.get(k)) {
                (None, _) => Ordering::Greater,
                (_, None) => Ordering::Less,
                (Some(x), Some(y)) => compare(x, y),
            }
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value::*;

    #[test]
    fn bytes_compare_like_slices_across_word_boundaries() {
        let words: Vec<Vec<u8>> = [
            "",
            "a",
            "b",
            "ab",
            "abcdefg",
            "abcdefgh",
            "abcdefgi",
            "abcdefgh0",
            "abcdefgh1",
            "abcdefghabcdefgh",
            "abcdefghabcdefgg",
            "abcdefghabcdefgh\u{0}",
            "zz",
            "\u{ff}",
            "containerPort",
            "containers",
            "metadata",
            "metadatA",
        ]
        .iter()
        .map(|w| w.as_bytes().to_vec())
        .chain([
            vec![0x80, 1],
            vec![0x7f, 0xff],
            vec![0xff; 9],
            vec![0xff; 8],
        ])
        .collect();
        for a in &words {
            for b in &words {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn numbers_compare_across_int_and_float() {
        assert!(equals(&Int(2), &Float(2.0)));
        assert!(!equals(&Int(1), &String("1".into())));
        assert!(!equals(&Bool(true), &String("true".into())));
        assert_eq!(compare(&Int(2), &Float(2.5)), Ordering::Less);
        assert_eq!(compare(&Float(3.0), &Int(3)), Ordering::Equal);
    }

    #[test]
    fn cross_type_order() {
        let order = [
            Int(5),
            String("a".into()),
            Bool(false),
            List(vec![]),
            Map(Default::default()),
            Null,
        ];
        for w in order.windows(2) {
            assert_eq!(
                compare(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
            assert_eq!(compare(&w[1], &w[0]), Ordering::Greater);
        }
    }

    #[test]
    fn lists_are_ordered_maps_are_not() {
        let a = List(vec![Int(1), Int(2)]);
        let b = List(vec![Int(2), Int(1)]);
        assert!(!equals(&a, &b));
        let m1 = crate::vmap! {"a" => 1i64, "b" => 2i64};
        let m2 = crate::vmap! {"b" => 2i64, "a" => 1i64};
        assert!(equals(&m1, &m2));
        assert_eq!(compare(&m1, &m2), Ordering::Equal);
    }
}
