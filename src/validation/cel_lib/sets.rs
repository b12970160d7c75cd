//! cel-go's sets extension (`ext.Sets()`): `sets.contains(a, b)` (every element of `b` is in
//! `a`), `sets.equivalent(a, b)` (each contains the other) and `sets.intersects(a, b)` (an
//! element in both), with CEL's equality (`1 == 1.0`).

use super::{args, iterable};
use cel::ExecutionError;
use cel::common::types::{CelBool, LIST_TYPE};
use cel::common::value::{CowVal, Val};

pub(super) fn register(env: &mut cel::Env) {
    let _ = env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![LIST_TYPE, LIST_TYPE],
        contains,
    );
    let _ = env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        equivalent,
    );
    let _ = env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        intersects,
    );
}

/// Whether every element of `b` equals one of `a`.
fn holds_all(a: &dyn Val, b: &dyn Val) -> Result<bool, ExecutionError> {
    let mut bs = iterable(b)?.iter();
    while let Some(x) = bs.next() {
        if !holds(a, x)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn holds(a: &dyn Val, x: &dyn Val) -> Result<bool, ExecutionError> {
    let mut it = iterable(a)?.iter();
    while let Some(y) = it.next() {
        if y.equals(x) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn boolean<'b, 'v>(b: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelBool::from(b)))
}

fn contains<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [x, y] = args(a)?;
    boolean(holds_all(x.as_ref(), y.as_ref())?)
}

fn equivalent<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [x, y] = args(a)?;
    boolean(holds_all(x.as_ref(), y.as_ref())? && holds_all(y.as_ref(), x.as_ref())?)
}

fn intersects<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [x, y] = args(a)?;
    let mut it = iterable(y.as_ref())?.iter();
    while let Some(e) = it.next() {
        if holds(x.as_ref(), e)? {
            return boolean(true);
        }
    }
    boolean(false)
}

#[cfg(test)]
mod tests {
    use super::super::tests::eval;

    #[test]
    fn sets_compare_by_membership() {
        assert_eq!(
            eval("sets.contains([1, 2, 3], [3, 1]) == true"),
            "Bool(true)"
        );
        assert_eq!(eval("sets.contains([1, 2], [4]) == false"), "Bool(true)");
        assert_eq!(eval("sets.contains([], []) == true"), "Bool(true)");
        assert_eq!(
            eval("sets.equivalent([1, 2, 2], [2, 1]) == true"),
            "Bool(true)"
        );
        assert_eq!(eval("sets.equivalent([1], [1, 2]) == false"), "Bool(true)");
        assert_eq!(
            eval("sets.intersects(['a', 'b'], ['c', 'b']) == true"),
            "Bool(true)"
        );
        assert_eq!(eval("sets.intersects([1], []) == false"), "Bool(true)");
        // CEL's equality: an int equals the same double.
        assert_eq!(eval("sets.contains([1], [1.0]) == true"), "Bool(true)");
    }
}
