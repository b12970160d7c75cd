//! Kubernetes' semver library, `library.SemverLib(SemverVersion(1))`
//! (`k8s.io/apiserver/pkg/cel/library/semverlib.go`, Kubernetes 1.36): `semver(string)` and
//! `isSemver(string)`, each also with a `bool` asking to normalize the string first (drop a
//! leading `v` and leading zeroes, fill in a missing minor or patch number), and on a
//! `kubernetes.Semver` `isGreaterThan`, `isLessThan`, `compareTo`, `major`, `minor`, `patch`.
//!
//! Versions are parsed as `github.com/blang/semver/v4`'s `Parse` does; two versions are equal
//! when they compare equal, build metadata aside. A string that does not parse makes
//! `semver()` fail with blang's message (the rule is then not evaluated).

use crate::value::gofmt::quote;
use cel::ExecutionError;
use cel::common::types::{CelBool, CelInt, CelString, Kind, Type};
use std::cmp::Ordering;

/// `kubernetes.Semver`.
static SEMVER_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.Semver");

/// The longest string parsed: far past any version, short enough to bound the work.
const MAX_LEN: usize = 64 * 1024;

/// One dot-separated identifier of a pre-release.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pre {
    Num(u64),
    Alpha(String),
}

impl Pre {
    /// blang's `PRVersion.Compare`: numbers before words, numbers by value, words by bytes.
    fn compare(&self, other: &Pre) -> Ordering {
        match (self, other) {
            (Pre::Num(a), Pre::Num(b)) => a.cmp(b),
            (Pre::Num(_), Pre::Alpha(_)) => Ordering::Less,
            (Pre::Alpha(_), Pre::Num(_)) => Ordering::Greater,
            (Pre::Alpha(a), Pre::Alpha(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

/// A `kubernetes.Semver`: blang's `semver.Version`.
#[derive(Clone, Debug)]
pub(super) struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
    // Build metadata is validated, never compared: nothing the library offers reads it.
}

impl Semver {
    /// blang's `Version.Compare`.
    fn compare(&self, o: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            (false, false) => {}
        }
        for (a, b) in self.pre.iter().zip(&o.pre) {
            let c = a.compare(b);
            if c != Ordering::Equal {
                return c;
            }
        }
        self.pre.len().cmp(&o.pre.len())
    }
}

super::library_val!(Semver, SEMVER_TYPE, |this, other| {
    other
        .downcast_ref::<Semver>()
        .is_some_and(|o| this.compare(o) == Ordering::Equal)
});

const NUMBERS: &[u8] = b"0123456789";

/// blang's `containsOnly` for an ASCII set (a non-ASCII character is in none).
fn contains_only(s: &str, set: &[u8]) -> bool {
    s.bytes().all(|b| set.contains(&b))
}

fn is_alphanum(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn has_leading_zeroes(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// Go's `strconv.ParseUint(s, 10, 64)` on a string of digits (possibly empty).
fn parse_uint(s: &str) -> Result<u64, String> {
    if s.is_empty() {
        return Err(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            quote(s)
        ));
    }
    s.parse::<u64>().map_err(|_| {
        format!(
            "strconv.ParseUint: parsing {}: value out of range",
            quote(s)
        )
    })
}

/// A major, minor or patch number.
fn number(s: &str, what: &str) -> Result<u64, String> {
    if !contains_only(s, NUMBERS) {
        return Err(format!(
            "Invalid character(s) found in {what} number {}",
            quote(s)
        ));
    }
    if has_leading_zeroes(s) {
        let what = match what {
            "major" => "Major",
            "minor" => "Minor",
            _ => "Patch",
        };
        return Err(format!(
            "{what} number must not contain leading zeroes {}",
            quote(s)
        ));
    }
    parse_uint(s)
}

/// blang's `NewPRVersion`.
fn pre_release(s: &str) -> Result<Pre, String> {
    if s.is_empty() {
        return Err("Prerelease is empty".into());
    }
    if contains_only(s, NUMBERS) {
        if has_leading_zeroes(s) {
            return Err(format!(
                "Numeric PreRelease version must not contain leading zeroes {}",
                quote(s)
            ));
        }
        return parse_uint(s).map(Pre::Num);
    }
    if is_alphanum(s) {
        return Ok(Pre::Alpha(s.to_string()));
    }
    Err(format!(
        "Invalid character(s) found in prerelease {}",
        quote(s)
    ))
}

/// blang's `semver.Parse`.
fn parse(s: &str) -> Result<Semver, String> {
    if s.is_empty() {
        return Err("Version string empty".into());
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    let &[major, minor, rest] = parts.as_slice() else {
        return Err("No Major.Minor.Patch elements found".into());
    };
    let major = number(major, "major")?;
    let minor = number(minor, "minor")?;
    let mut patch = rest;
    let mut build: Vec<&str> = Vec::new();
    let mut pre: Vec<&str> = Vec::new();
    if let Some(i) = patch.find('+') {
        build = patch[i + 1..].split('.').collect();
        patch = &patch[..i];
    }
    if let Some(i) = patch.find('-') {
        pre = patch[i + 1..].split('.').collect();
        patch = &patch[..i];
    }
    let patch = number(patch, "patch")?;
    let pre = pre
        .into_iter()
        .map(pre_release)
        .collect::<Result<Vec<_>, _>>()?;
    for b in &build {
        if b.is_empty() {
            return Err("Build meta data is empty".into());
        }
        if !is_alphanum(b) {
            return Err(format!(
                "Invalid character(s) found in build meta data {}",
                quote(b)
            ));
        }
    }
    Ok(Semver {
        major,
        minor,
        patch,
        pre,
    })
}

/// The library's `normalizeAndParse`: without a leading `v`, each of the first three parts
/// stripped of leading zeroes, missing minor and patch numbers taken as 0.
fn normalize_and_parse(s: &str) -> Result<Semver, String> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s
        .splitn(3, '.')
        .map(|p| {
            if p.len() <= 1 {
                return p.to_string();
            }
            let t = p.trim_start_matches('0');
            if t.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                t.to_string()
            } else {
                format!("0{t}")
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        parts.resize(3, "0".to_string());
    }
    parse(&parts.join("."))
}

fn read(function: &str, s: &str, normalize: bool) -> Result<Semver, ExecutionError> {
    if s.len() > MAX_LEN {
        return Err(ExecutionError::function_error(
            function,
            format!("a version of {} bytes is not parsed here", s.len()),
        ));
    }
    let parsed = if normalize {
        normalize_and_parse(s)
    } else {
        parse(s)
    };
    parsed.map_err(|e| ExecutionError::function_error(function, e))
}

fn semver(s: &CelString<'_>) -> Result<Semver, ExecutionError> {
    read("semver", s.inner(), false)
}

fn semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> Result<Semver, ExecutionError> {
    read("semver", s.inner(), *normalize.inner())
}

fn is_semver(s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    is_semver_normalize(s, &CelBool::from(false))
}

fn is_semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> Result<CelBool, ExecutionError> {
    match read("isSemver", s.inner(), *normalize.inner()) {
        Ok(_) => Ok(CelBool::from(true)),
        // Too long to read: not a verdict.
        Err(e) if s.inner().len() > MAX_LEN => Err(e),
        Err(_) => Ok(CelBool::from(false)),
    }
}

fn is_greater_than(this: &Semver, other: &Semver) -> CelBool {
    CelBool::from(this.compare(other) == Ordering::Greater)
}

fn is_less_than(this: &Semver, other: &Semver) -> CelBool {
    CelBool::from(this.compare(other) == Ordering::Less)
}

fn compare_to(this: &Semver, other: &Semver) -> CelInt {
    CelInt::from(match this.compare(other) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

// Go converts the `uint64` numbers with `types.Int(v.Major)`: past `i64::MAX`, they wrap.
fn major(this: &Semver) -> CelInt {
    CelInt::from(this.major as i64)
}

fn minor(this: &Semver) -> CelInt {
    CelInt::from(this.minor as i64)
}

fn patch(this: &Semver) -> CelInt {
    CelInt::from(this.patch as i64)
}

/// Registers the library on `env`; an overload that fails to register stays undeclared (its
/// rules not evaluated).
pub(super) fn register(env: &mut cel::Env) {
    let _ = env.add_type(SEMVER_TYPE.to_owned());
    let _ = cel::add_overload!(env, fn semver: (CelString) -> Result<Semver>,
        id = "string_to_semver");
    let _ = cel::add_overload!(env, fn semver_normalize: (CelString, CelBool) -> Result<Semver>,
        name = "semver", id = "string_bool_to_semver");
    let _ = cel::add_overload!(env, fn is_semver: (CelString) -> Result<CelBool>,
        id = "is_semver_string");
    let _ = cel::add_overload!(env, fn is_semver_normalize: (CelString, CelBool) -> Result<CelBool>,
        name = "isSemver", id = "is_semver_string_bool");
    let _ = cel::add_member_overload!(env, fn is_greater_than: (Semver, Semver) -> CelBool,
        id = "semver_is_greater_than");
    let _ = cel::add_member_overload!(env, fn is_less_than: (Semver, Semver) -> CelBool,
        id = "semver_is_less_than");
    let _ = cel::add_member_overload!(env, fn compare_to: (Semver, Semver) -> CelInt,
        id = "semver_compare_to");
    let _ = cel::add_member_overload!(env, fn major: (Semver) -> CelInt, id = "semver_major");
    let _ = cel::add_member_overload!(env, fn minor: (Semver) -> CelInt, id = "semver_minor");
    let _ = cel::add_member_overload!(env, fn patch: (Semver) -> CelInt, id = "semver_patch");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::cel_lib::tests::{run as eval, yes};

    #[test]
    fn parses_and_compares() {
        yes("semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2");
        yes("semver('1.2.3').patch() == 3");
        yes("semver('1.2.3').isGreaterThan(semver('1.0.0'))");
        yes("!semver('1.0.0').isGreaterThan(semver('1.0.0'))");
        yes("semver('1.0.0').isLessThan(semver('1.2.3'))");
        yes("semver('1.0.0').compareTo(semver('1.2.3')) == -1");
        yes("semver('1.2.3').compareTo(semver('1.2.3')) == 0");
        yes("semver('1.2.3') == semver('1.2.3')");
        yes("semver('1.2.3') != semver('1.0.0')");
        // Build metadata has no precedence.
        yes("semver('1.2.3+a') == semver('1.2.3+b')");
        // Pre-releases: before the release, numbers before words, shorter first.
        yes("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))");
        yes("semver('1.0.0-1').isLessThan(semver('1.0.0-alpha'))");
        yes("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))");
        yes("semver('1.0.0-2').isLessThan(semver('1.0.0-10'))");
        yes("semver('1.0.0-B').isLessThan(semver('1.0.0-a'))");
        yes("type(semver('1.0.0')) == kubernetes.Semver");
        // A uint64 past i64::MAX wraps, as Go's `types.Int(uint64)` does.
        yes("semver('18446744073709551615.0.0').major() == -1");
    }

    #[test]
    fn is_semver_follows_blang() {
        yes("isSemver('1.2.3-beta.1+build.1')");
        for bad in [
            "",
            "01.01.01",
            "1.1",
            "1",
            "1. 0.0",
            " 1.0.0",
            "1.0.0 ",
            "v1.0.0",
            "1.0.0-01",
            "1.0.0-",
            "1.0.0+",
            "1.0.0+a..b",
            "1.0.0-a_b",
            "1.0.0-é",
            "99999999999999999999.0.0",
        ] {
            yes(&format!("!isSemver('{bad}')"));
        }
        for (s, normalized) in [
            ("01.01.01", true),
            ("1.1", true),
            ("1", true),
            ("v1.0.0", true),
            ("", false),
            ("1. 0.0", false),
            (" 1.0.0", false),
            ("1.0.0 ", false),
            ("1-beta", false),
            ("1.0-beta", false),
            ("1.0.0-beta", true),
            ("v", false),
        ] {
            yes(&format!("isSemver('{s}', true) == {normalized}"));
        }
        yes("semver('v01.01', true) == semver('1.1.0')");
        yes("semver('1.02.003-rc.1', true) == semver('1.2.3-rc.1')");
        yes("semver('1.0.0', false) == semver('1.0.0')");
    }

    #[test]
    fn a_bad_version_is_an_error_with_blangs_message() {
        let err = eval("semver('v1.0')").unwrap_err();
        assert!(
            err.to_string()
                .contains("No Major.Minor.Patch elements found"),
            "{err}"
        );
        let err = eval("semver('1.01.0')").unwrap_err();
        assert!(
            err.to_string()
                .contains("Minor number must not contain leading zeroes \"01\""),
            "{err}"
        );
        let err = eval("semver('1.1', true) == semver('1.1-a', true)").unwrap_err();
        assert!(
            err.to_string()
                .contains("short version cannot contain PreRelease/Build meta data"),
            "{err}"
        );
    }

    #[test]
    fn parse_reports_go_messages() {
        assert_eq!(
            parse("1.0.x").unwrap_err(),
            "Invalid character(s) found in patch number \"x\""
        );
        assert_eq!(
            parse("1..0").unwrap_err(),
            "strconv.ParseUint: parsing \"\": invalid syntax"
        );
        assert_eq!(parse("1.0.0+").unwrap_err(), "Build meta data is empty");
        assert_eq!(parse("1.0.0-").unwrap_err(), "Prerelease is empty");
    }

    #[test]
    fn a_huge_string_is_refused_not_judged() {
        let long = "1".repeat(MAX_LEN + 1);
        assert!(eval(&format!("isSemver('{long}')")).is_err());
    }
}
