//! Kubernetes' regex library (`k8s.io/apiserver/pkg/cel/library/regex.go`): `s.find(re)`, the
//! leftmost match or `""`, and `s.findAll(re)` / `s.findAll(re, n)`, the successive
//! non-overlapping matches (at most `n` when `n >= 0`), with Go's reading of the pattern
//! ([`super::super::re2`]). Go's rules for empty matches next to a match are not reproduced:
//! a `findAll` that meets an empty match is not evaluated.

use super::args;
use crate::validation::re2;
use cel::ExecutionError;
use cel::common::types::{CelInt, CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};

pub(super) fn register(env: &mut cel::Env) {
    let _ = env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    );
    let _ = env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    );
    let _ = env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    );
}

fn string<'a>(v: &'a dyn Val, function: &str) -> Result<&'a str, ExecutionError> {
    v.downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| {
            ExecutionError::no_such_overload(function, vec![v.get_type().name().to_owned()])
        })
}

fn compiled(pattern: &str, function: &str) -> Result<regex::Regex, ExecutionError> {
    re2::compile(pattern).map_err(|e| match e {
        re2::Refusal::Invalid(e) => {
            ExecutionError::function_error(function, format!("Illegal regex: {e}"))
        }
        e => ExecutionError::function_error(function, e.to_string()),
    })
}

fn find<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = args(a)?;
    let s = string(s.as_ref(), "find")?;
    let re = compiled(string(re.as_ref(), "find")?, "find")?;
    let found = re.find(s).map_or("", |m| m.as_str());
    Ok(CowVal::owned(CelString::from(found.to_string())))
}

fn all<'b, 'v>(s: &str, pattern: &str, n: i64) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let re = compiled(pattern, "findAll")?;
    let mut out: Vec<Box<dyn Val + 'v>> = Vec::new();
    if n != 0 {
        for m in re.find_iter(s) {
            if m.is_empty() {
                return Err(ExecutionError::function_error(
                    "findAll",
                    "an empty match (Go's rules for them are not reproduced): not evaluated",
                ));
            }
            if n > 0 && out.len() as i64 >= n {
                break;
            }
            out.push(Box::new(CelString::from(m.as_str().to_string())));
        }
    }
    Ok(CowVal::owned(CelList::from(out)))
}

fn find_all<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = args(a)?;
    all(
        string(s.as_ref(), "findAll")?,
        string(re.as_ref(), "findAll")?,
        -1,
    )
}

fn find_all_n<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re, n] = args(a)?;
    let n = n
        .downcast_ref::<CelInt>()
        .map(|n| *n.inner())
        .ok_or_else(|| ExecutionError::no_such_overload("findAll", vec![]))?;
    all(
        string(s.as_ref(), "findAll")?,
        string(re.as_ref(), "findAll")?,
        n,
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::eval;

    #[test]
    fn find_reads_the_pattern_as_go_does() {
        assert_eq!(eval("'abc 123'.find('[0-9]+') == \"123\""), "Bool(true)");
        assert_eq!(eval("'abc'.find('[0-9]+') == \"\""), "Bool(true)");
        // Go's \d is ASCII: an Arabic-Indic digit is no digit.
        assert_eq!(eval("'\u{0663}'.find('\\\\d') == \"\""), "Bool(true)");
        let e = eval("'a'.find('a(?=b)')");
        assert!(e.contains("Illegal regex"), "{e}");
    }

    #[test]
    fn find_all_counts_and_limits() {
        assert_eq!(
            eval("'a1b22c333'.findAll('[0-9]+') == [\"1\", \"22\", \"333\"]"),
            "Bool(true)"
        );
        assert_eq!(
            eval("'a1b22c333'.findAll('[0-9]+', 2) == [\"1\", \"22\"]"),
            "Bool(true)"
        );
        assert_eq!(eval("'a1b22'.findAll('[0-9]+', 0) == []"), "Bool(true)");
        assert!(eval("'aab'.findAll('a*')").starts_with("error"));
    }
}
