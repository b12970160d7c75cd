//! The CEL libraries Kubernetes 1.36 offers to CRD validation rules
//! (`k8s.io/apiserver/pkg/cel/environment/base.go`), on top of the `cel` crate's standard
//! environment:
//!
//! | library | Kubernetes | here |
//! | --- | --- | --- |
//! | strings | cel-go `ext.Strings(v2)` | the `cel` crate's strings extension |
//! | lists | cel-go `ext.Lists(v3)` | the `cel` crate's lists extension |
//! | sets | cel-go `ext.Sets()` | [`sets`] |
//! | Kubernetes lists | `library.Lists` (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`) | [`lists`] |
//! | regex | `library.Regex` (`find`, `findAll`) | [`regex`] |
//! | quantity | `library.Quantity` | [`quantity`] |
//! | ip, cidr | `library.IP`, `library.CIDR` | [`net`] |
//! | url | `library.URLs` | [`url`] |
//! | semver | `library.SemverLib(v1)` | [`semver`] |
//! | format | `library.Format` | [`format`] |
//!
//! Not here (rules using them are not evaluated): two-variable comprehensions
//! (`ext.TwoVarComprehensions`, which the `cel` crate's interpreter lacks), the lists
//! extension's `first`/`last`, and `library.Authz` (no authorizer is bound for CRD rules).
//! cel-go prints `%e` with a locale's digits; a rule formatting with it, or with a format
//! string that is not a literal, is not evaluated ([`unsupported`]). The `sum` of an empty
//! list is its element type's zero, which the server knows from the checked type: not
//! evaluated.
//!
//! What a library has in cel-go's version and not in Kubernetes' (the strings extension's
//! `reverse`, say) makes the CRD's rule a compile error on the server, so no stored CRD holds
//! it; what Kubernetes has and fieldguard not is an undeclared function here, reported as not
//! evaluated.

/// `impl Val` (and `StaticVal`) for a library's value type `$t`, of CEL type `$ty`: cloned
/// and downcast as any value; equal to another as `$equals` (`this`, `other`) says.
macro_rules! library_val {
    ($t:ty, $ty:expr, |$this:ident, $other:ident| $equals:block) => {
        impl cel::common::value::Val for $t {
            fn get_type(&self) -> &cel::common::types::Type {
                &$ty
            }

            fn cel_type() -> &'static cel::common::types::Type {
                &$ty
            }

            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                let ($this, $other) = (self, other);
                $equals
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v>
            where
                Self: 'v,
            {
                Box::new(self.clone())
            }

            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }

        impl cel::common::value::StaticVal for $t {}
    };
}
use library_val;

mod format;
mod lists;
mod net;
mod quantity;
mod regex;
mod semver;
mod sets;
mod url;

pub(super) use quantity::take_undecided;

/// Registers every library on `env`. Registration fails only on a duplicate overload, which
/// the libraries' disjoint names rule out; a failure leaves the function undeclared (its rules
/// not evaluated), never a wrong answer.
pub(super) fn register(env: &mut cel::Env) {
    let _ = cel::extensions::strings(env);
    let _ = cel::extensions::lists(env);
    sets::register(env);
    lists::register(env);
    regex::register(env);
    quantity::register(env);
    net::register(env);
    semver::register(env);
    url::register(env);
    format::register(env);
}

/// Why fieldguard does not evaluate a rule (or message expression) that reads as `src`: a
/// library function it has, used in a way whose result it does not reproduce.
pub(super) fn unsupported(src: &str) -> Option<&'static str> {
    // cel-go prints `%e` with a locale's printer (`'%e'.format([3.14])` is
    // `3.140000×10⁰⁰`); a format string that is not a literal could hold one.
    let mut at = 0;
    while let Some(i) = src[at..].find(".format(") {
        let start = at + i;
        at = start + 1;
        let literal = src[..start].ends_with(['\'', '"']);
        if !literal {
            return Some(
                "a format string not written in the rule (cel-go prints %e with a locale's digits, which fieldguard does not reproduce)",
            );
        }
    }
    if src.contains(".format(") && src.contains("%e") {
        return Some(
            "the strings library's %e, which cel-go prints with a locale's digits (3.140000×10⁰⁰)",
        );
    }
    None
}

/// Whether `src` calls a function of cel-go's lists extension, which takes an error argument
/// into its own code instead of passing it on.
pub(super) fn calls_lists_extension(src: &str) -> bool {
    [
        ".distinct(",
        ".flatten(",
        ".reverse(",
        ".sort(",
        ".sortBy(",
        ".slice(",
        "lists.range(",
    ]
    .iter()
    .any(|f| src.contains(f))
}

/// A call's arguments, as many as the overload declares.
fn args<'b, 'v, const N: usize>(
    a: Vec<cel::common::value::CowVal<'b, 'v>>,
) -> Result<[cel::common::value::CowVal<'b, 'v>; N], cel::ExecutionError> {
    a.try_into()
        .map_err(|a: Vec<_>| cel::ExecutionError::invalid_argument_count(N, a.len()))
}

/// `v` as something to iterate (a list, or a map's keys).
fn iterable<'b, 'v>(
    v: &'b (dyn cel::common::value::Val + 'v),
) -> Result<&'b (dyn cel::common::traits::Iterable + 'v), cel::ExecutionError> {
    v.as_iterable()
        .ok_or_else(|| cel::ExecutionError::UnexpectedType {
            got: v.get_type().name().to_owned(),
            want: "list".to_owned(),
        })
}

#[cfg(test)]
pub(super) mod tests {
    /// `expr` evaluated in fieldguard's environment (every library registered, as rules see
    /// them); it must compile.
    pub(crate) fn run(expr: &str) -> Result<cel::Value, cel::ExecutionError> {
        let mut env = cel::Env::stdlib();
        super::register(&mut env);
        let env = std::sync::Arc::new(env);
        let program = env.compile(expr).expect("compiles");
        program.execute(&cel::Context::with_env(env.clone()))
    }

    /// Asserts that `expr` is `true`.
    pub(crate) fn yes(expr: &str) {
        assert_eq!(run(expr), Ok(cel::Value::Bool(true)), "{expr}");
    }

    /// `expr` evaluated in fieldguard's environment: its value as CEL prints it, or
    /// `error: ...`.
    pub(crate) fn eval(expr: &str) -> String {
        let mut env = cel::Env::stdlib();
        super::register(&mut env);
        let program = match env.compile(expr) {
            Ok(p) => p,
            Err(e) => return format!("error: {e}"),
        };
        let ctx = cel::Context::with_env(std::sync::Arc::new(env));
        match program.execute(&ctx) {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("error: {e}"),
        }
    }
}
