//! Go's ordering helpers that strategic merge patch results depend on: `fmt`'s `%v` text of a
//! scalar (lists of scalars and merge keys are sorted by it), `sort.SliceStable` (its exact
//! insertion-sort + symmerge steps matter because SMP's comparators are not strict orders), and
//! the in-place de-duplication SMP uses (which moves elements).

use crate::value::{Value, gofmt};

/// `fmt.Sprintf("%v", v)` for the values SMP sorts and keys by.
pub fn v_text(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => gofmt::format_float_v(*f),
        Value::String(s) => s.to_string(),
        Value::List(l) => {
            let parts: Vec<String> = l.iter().map(v_text).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Map(m) => {
            let mut parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}:{}", v_text(v)))
                .collect();
            parts.sort();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go interface equality of two decoded JSON values (`==` on `interface{}`): same dynamic type
/// and value. Maps and lists are compared structurally (Go would panic on them).
pub fn iface_eq(a: &Value, b: &Value) -> bool {
    a.strict_eq(b)
}

/// `sort.Sort` over scalars by their `%v` text (the comparator is `a <= b`; for the values SMP
/// meets, equal texts mean equal values, so a stable sort gives the same order).
pub fn sort_scalars(v: &mut [Value]) {
    v.sort_by_cached_key(v_text);
}

/// Upstream's in-place de-duplication: a later duplicate is overwritten by the last element.
pub fn dedup_scalars(mut s: Vec<Value>) -> Vec<Value> {
    if s.is_empty() {
        return s;
    }
    let mut length = s.len() - 1;
    let mut i = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if iface_eq(&s[i], &s[j]) {
                s[j] = s[length].clone();
                s.truncate(length);
                length -= 1;
                continue;
            }
            j += 1;
        }
        i += 1;
    }
    s
}

/// `sort.SliceStable` with Go's exact algorithm (insertion sort on blocks of 20, then symmerge),
/// so that inconsistent comparators give Go's result.
pub fn slice_stable<T>(data: &mut [T], less: &mut dyn FnMut(&T, &T) -> bool) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b, less);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n, less);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            sym_merge(data, a, a + block, b, less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, less);
        }
        block *= 2;
    }
}

fn insertion_sort<T>(data: &mut [T], a: usize, b: usize, less: &mut dyn FnMut(&T, &T) -> bool) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&data[j], &data[j - 1]) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sym_merge<T>(
    data: &mut [T],
    a: usize,
    m: usize,
    b: usize,
    less: &mut dyn FnMut(&T, &T) -> bool,
) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(&data[h], &data[a]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i.saturating_sub(1) {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(&data[m], &data[h]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(&data[p - c], &data[c]) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less);
    }
}

fn rotate<T>(data: &mut [T], a: usize, m: usize, b: usize) {
    let (mut i, mut j) = (m - a, b - m);
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

fn swap_range<T>(data: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        data.swap(a + i, b + i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_sort_sorts_and_keeps_ties() {
        let mut v: Vec<(u32, u32)> = (0..100).map(|i| ((i * 37) % 10, i)).collect();
        slice_stable(&mut v, &mut |a, b| a.0 < b.0);
        for w in v.windows(2) {
            assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1));
        }
    }

    #[test]
    fn dedup_moves_the_last_element_like_upstream() {
        let v: Vec<Value> = ["a", "a", "b", "c"]
            .iter()
            .map(|s| Value::from(*s))
            .collect();
        let out: Vec<String> = dedup_scalars(v).iter().map(v_text).collect();
        assert_eq!(out, ["a", "c", "b"]);
    }

    #[test]
    fn v_text_matches_go() {
        assert_eq!(v_text(&Value::Float(1.5)), "1.5");
        assert_eq!(v_text(&Value::Float(1e21)), "1e+21");
        assert_eq!(v_text(&Value::Int(-3)), "-3");
        assert_eq!(v_text(&Value::Null), "<nil>");
    }
}
