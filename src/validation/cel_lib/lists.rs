//! Kubernetes' own lists library (`k8s.io/apiserver/pkg/cel/library/lists.go`): `isSorted`,
//! `sum`, `min`, `max`, `indexOf` and `lastIndexOf` on a list. Elements compare and add as CEL
//! compares and adds them (an overflow is an error, as in cel-go).

use super::{args, iterable};
use cel::ExecutionError;
use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use std::cmp::Ordering;

pub(super) fn register(env: &mut cel::Env) {
    let _ = env.add_member_overload(
        "isSorted",
        "list_is_sorted_bool",
        LIST_TYPE,
        vec![],
        is_sorted,
    );
    let _ = env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum);
    let _ = env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min);
    let _ = env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max);
    let _ = env.add_member_overload(
        "indexOf",
        "list_a_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    );
    let _ = env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    );
}

/// `a` compared with `b` as CEL orders them; an error where it does not (a NaN, a type
/// without an order).
fn compare(a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    let Some(c) = a.as_comparer() else {
        return Err(ExecutionError::no_such_overload(
            "compare",
            vec![a.get_type().name().to_owned()],
        ));
    };
    c.compare(b)
}

fn elements<'b, 'v>(list: &'b (dyn Val + 'v)) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let mut it = iterable(list)?.iter();
    let mut out = Vec::new();
    while let Some(x) = it.next() {
        out.push(x);
    }
    Ok(out)
}

fn is_sorted<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = args(a)?;
    let items = elements(list.as_ref())?;
    for w in items.windows(2) {
        if compare(w[0], w[1])? == Ordering::Greater {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

fn sum<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = args(a)?;
    let items = elements(list.as_ref())?;
    // The zero of an empty list is its element type's (`0`, `0u`, `0.0`, `0s`), which the
    // server knows from the checked type and fieldguard does not.
    let Some((first, rest)) = items.split_first() else {
        return Err(ExecutionError::function_error(
            "sum",
            "the sum of an empty list depends on its element type: not evaluated",
        ));
    };
    let mut acc: Box<dyn Val + 'v> = first.clone_as_boxed();
    for x in rest {
        let Some(adder) = acc.as_adder() else {
            return Err(ExecutionError::no_such_overload(
                "sum",
                vec![acc.get_type().name().to_owned()],
            ));
        };
        let next = adder.add(*x)?.into_owned();
        acc = next;
    }
    Ok(CowVal::Owned(acc))
}

/// The first element not preceded by one that `prefer`s over it (`min`: nothing smaller).
fn pick<'b, 'v>(
    a: Vec<CowVal<'b, 'v>>,
    name: &str,
    prefer: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = args(a)?;
    let items = elements(list.as_ref())?;
    let Some((&first, rest)) = items.split_first() else {
        return Err(ExecutionError::function_error(
            name,
            format!("{name} called on empty list"),
        ));
    };
    let mut best = first;
    for &x in rest {
        if compare(best, x)? == prefer {
            best = x;
        }
    }
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

fn min<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    pick(a, "min", Ordering::Greater)
}

fn max<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    pick(a, "max", Ordering::Less)
}

fn position<'b, 'v>(a: Vec<CowVal<'b, 'v>>, last: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, item] = args(a)?;
    let items = elements(list.as_ref())?;
    let found = |(_, x): &(usize, &&(dyn Val + 'v))| x.equals(item.as_ref());
    let at = if last {
        items.iter().enumerate().rev().find(found)
    } else {
        items.iter().enumerate().find(found)
    };
    let i = at.map_or(-1, |(i, _)| i as i64);
    Ok(CowVal::owned(CelInt::from(i)))
}

fn index_of<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(a, false)
}

fn last_index_of<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(a, true)
}

#[cfg(test)]
mod tests {
    use super::super::tests::eval;

    #[test]
    fn lists_sort_sum_and_search_as_kubernetes_does() {
        assert_eq!(eval("[1, 2, 2, 3].isSorted() == true"), "Bool(true)");
        assert_eq!(eval("['b', 'a'].isSorted() == false"), "Bool(true)");
        assert_eq!(eval("[].isSorted() == true"), "Bool(true)");
        assert_eq!(eval("[1, 2, 3].sum() == 6"), "Bool(true)");
        assert_eq!(eval("[1.5, 2.0].sum() == 3.5"), "Bool(true)");
        assert_eq!(eval("[3, 1, 2].min() == 1"), "Bool(true)");
        assert_eq!(eval("['a', 'c', 'b'].max() == \"c\""), "Bool(true)");
        assert_eq!(eval("[1, 2, 1].indexOf(1) == 0"), "Bool(true)");
        assert_eq!(eval("[1, 2, 1].lastIndexOf(1) == 2"), "Bool(true)");
        assert_eq!(eval("[1, 2].indexOf(5) == -1"), "Bool(true)");
        // Strings keep their own indexOf.
        assert_eq!(eval("'abcb'.lastIndexOf('b') == 3"), "Bool(true)");
    }

    #[test]
    fn empty_lists_and_overflow_are_errors() {
        assert!(eval("[].min()").starts_with("error"));
        assert!(eval("[9223372036854775807, 1].sum()").starts_with("error"));
        // Unknown element type: not guessed.
        assert!(eval("[].sum()").starts_with("error"));
    }
}
