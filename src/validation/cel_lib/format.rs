//! Kubernetes' format library, `library.Format` (`k8s.io/apiserver/pkg/cel/library/format.go`,
//! Kubernetes 1.36): the named formats `format.dns1123Label()`, `format.dns1123Subdomain()`,
//! `format.dns1035Label()`, `format.qualifiedName()`, their `...Prefix()` variants (for a
//! name a suffix will be appended to), `format.labelValue()`, `format.uri()`,
//! `format.uuid()`, `format.byte()`, `format.date()`, `format.datetime()`; `format.named(name)`
//! (an optional of one of them, by that name); and `<format>.validate(string)`:
//! `optional.none()` for a valid string, else an optional of the list of the apiserver's
//! messages.
//!
//! The name checks are the apiserver's own ([`super::super::meta`]); a `...Prefix()` format
//! first masks a trailing dash as Go's `maskTrailingDash` does (the last two bytes replaced
//! by `a`); `uri` is Go's `url.ParseRequestURI` ([`super::url`]); `uuid`, `byte`, `date`,
//! `datetime` are kube-openapi's `strfmt` checks. Two formats are equal when they are the same
//! format.

use super::super::meta;
use super::url::request_uri_error;
use cel::ExecutionError;
use cel::common::types::{CelList, CelOptional, CelString, Kind, Type};
use cel::common::value::Val;
use std::borrow::Cow;

/// `kubernetes.NamedFormat`.
static FORMAT_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.NamedFormat");

/// The longest string validated: long past any name, short enough to bound the work.
const MAX_LEN: usize = 1 << 20;

/// What a format checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Dns1123Label,
    Dns1123Subdomain,
    Dns1035Label,
    QualifiedName,
    Dns1123LabelPrefix,
    Dns1123SubdomainPrefix,
    Dns1035LabelPrefix,
    LabelValue,
    Uri,
    Uuid,
    Byte,
    Date,
    DateTime,
}

/// A `kubernetes.NamedFormat`.
#[derive(Clone, Debug)]
pub(super) struct NamedFormat {
    /// Go's `Format.Name`, what equality compares.
    name: &'static str,
    check: Check,
}

impl NamedFormat {
    /// The format's `ValidateFunc`: the messages of a string it refuses (none: valid).
    fn errors(&self, s: &str) -> Result<Vec<String>, ExecutionError> {
        let problem = |ok: bool, message: &str| {
            if ok {
                Vec::new()
            } else {
                vec![message.to_string()]
            }
        };
        Ok(match self.check {
            Check::Dns1123Label => meta::dns1123_label(s),
            Check::Dns1123Subdomain => meta::dns1123_subdomain(s),
            Check::Dns1035Label => meta::dns1035_label(s),
            Check::QualifiedName => meta::qualified_name(s),
            Check::Dns1123LabelPrefix => meta::dns1123_label(&mask_trailing_dash(s)),
            Check::Dns1123SubdomainPrefix => meta::dns1123_subdomain(&mask_trailing_dash(s)),
            Check::Dns1035LabelPrefix => meta::dns1035_label(&mask_trailing_dash(s)),
            Check::LabelValue => meta::label_value(s),
            Check::Uri => request_uri_error(s)?.into_iter().collect(),
            Check::Uuid => problem(is_uuid(s), "does not match the UUID format"),
            Check::Byte => problem(is_base64(s), "invalid base64"),
            Check::Date => problem(is_date(s), "invalid date"),
            Check::DateTime => problem(is_date_time(s), "invalid datetime"),
        })
    }
}

super::library_val!(NamedFormat, FORMAT_TYPE, |this, other| {
    other
        .downcast_ref::<NamedFormat>()
        .is_some_and(|o| o.name == this.name)
});

/// `maskTrailingDash`: a name longer than one byte that ends with `-` loses its last two
/// bytes for an `a`. Go slices bytes, so a character cut in two leaves bytes no name pattern
/// takes; each stands here as a `!` (which no pattern takes either), keeping the length.
fn mask_trailing_dash(name: &str) -> Cow<'_, str> {
    if name.len() <= 1 || !name.ends_with('-') {
        return Cow::Borrowed(name);
    }
    let cut = name.len() - 2;
    let whole = (0..=cut)
        .rev()
        .find(|&i| name.is_char_boundary(i))
        .unwrap_or(0);
    Cow::Owned(format!("{}{}a", &name[..whole], "!".repeat(cut - whole)))
}

/// strfmt's `IsUUID`: `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`.
fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    for (n, group) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if n > 0 && b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i..i + group) {
            Some(g) if g.iter().all(u8::is_ascii_hexdigit) => i += group,
            _ => return false,
        }
    }
    i == b.len()
}

/// govalidator's `IsBase64`: `^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|
/// [A-Za-z0-9+\/]{4})$`: whole quads of the alphabet, the last possibly padded.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() % 4 != 0 {
        return false;
    }
    let body = b
        .strip_suffix(b"==")
        .or_else(|| b.strip_suffix(b"="))
        .unwrap_or(b);
    body.iter()
        .all(|&c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

/// strfmt's `IsDate`: Go's `time.Parse("2006-01-02", s)`, a real day of a four-digit year.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = &b[r];
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0, |n, c| n * 10 + u32::from(c - b'0')))
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// strfmt's `IsDateTime`: split at every `t` of the lower-cased string, the first part a
/// date and the second `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`
/// with hours to 23 and minutes and seconds to 59; what follows another `t` is not read.
/// Only `T` lower-cases to `t` and only `Z` to `z`, so the original string is read as is.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let mut parts = s.split(['t', 'T']);
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    is_date(date) && time_matches(time)
}

fn time_matches(t: &str) -> bool {
    let b = t.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let two = |i: usize| -> Option<u8> {
        (b[i].is_ascii_digit() && b[i + 1].is_ascii_digit())
            .then(|| (b[i] - b'0') * 10 + (b[i + 1] - b'0'))
    };
    let (Some(h), Some(m), Some(sec)) = (two(0), two(3), two(6)) else {
        return false;
    };
    let rest = &t[8..];
    let zone = |z: &str| {
        let z = z.as_bytes();
        matches!(z, [b'z' | b'Z'])
            || matches!(z, [b'+' | b'-', h1, h2, b':', m1, m2]
                if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()))
    };
    // `(.[0-9]+)?`: any one character but a newline, then digits up to the zone (which
    // starts with no digit, so they are all the digits there are).
    let fraction = || {
        let Some(c) = rest.chars().next() else {
            return false;
        };
        if c == '\n' {
            return false;
        }
        let after = &rest[c.len_utf8()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && zone(&after[digits..])
    };
    (zone(rest) || fraction()) && h <= 23 && m <= 59 && sec <= 59
}

macro_rules! constants {
    ($($f:ident: $cel:literal => $go:literal, $check:ident;)*) => {
        $(
            /// The constant format `format.<name>()`.
            fn $f() -> &'static NamedFormat {
                static FORMAT: NamedFormat = NamedFormat { name: $go, check: Check::$check };
                &FORMAT
            }
        )*

        /// The constant format of a CEL name (`ConstantFormats`).
        fn by_name(name: &str) -> Option<&'static NamedFormat> {
            match name {
                $($cel => Some($f()),)*
                _ => None,
            }
        }

        fn register_constants(env: &mut cel::Env) {
            $(
                let _ = cel::add_overload!(env, fn $f: () -> &NamedFormat,
                    name = concat!("format.", $cel), id = concat!("format.", $cel));
            )*
        }
    };
}

constants! {
    dns1123_label: "dns1123Label" => "DNS1123Label", Dns1123Label;
    dns1123_subdomain: "dns1123Subdomain" => "DNS1123Subdomain", Dns1123Subdomain;
    dns1035_label: "dns1035Label" => "DNS1035Label", Dns1035Label;
    qualified_name: "qualifiedName" => "QualifiedName", QualifiedName;
    dns1123_label_prefix: "dns1123LabelPrefix" => "DNS1123LabelPrefix", Dns1123LabelPrefix;
    dns1123_subdomain_prefix: "dns1123SubdomainPrefix" => "DNS1123SubdomainPrefix",
        Dns1123SubdomainPrefix;
    dns1035_label_prefix: "dns1035LabelPrefix" => "DNS1035LabelPrefix", Dns1035LabelPrefix;
    label_value: "labelValue" => "LabelValue", LabelValue;
    uri: "uri" => "URI", Uri;
    uuid: "uuid" => "uuid", Uuid;
    byte: "byte" => "byte", Byte;
    date: "date" => "date", Date;
    datetime: "datetime" => "datetime", DateTime;
}

/// `format.named(name)`.
fn named(name: &CelString<'_>) -> CelOptional<'static> {
    match by_name(name.inner()) {
        Some(f) => CelOptional::of(Box::new(f.clone())),
        None => CelOptional::none(),
    }
}

/// `<format>.validate(string)`.
fn validate(
    format: &NamedFormat,
    s: &CelString<'_>,
) -> Result<CelOptional<'static>, ExecutionError> {
    let s = s.inner();
    if s.len() > MAX_LEN {
        return Err(ExecutionError::function_error(
            "validate",
            format!("a string of {} bytes is not validated here", s.len()),
        ));
    }
    let errors = format.errors(s)?;
    if errors.is_empty() {
        return Ok(CelOptional::none());
    }
    let list: Vec<Box<dyn Val>> = errors
        .into_iter()
        .map(|e| Box::new(CelString::from(e)) as Box<dyn Val>)
        .collect();
    Ok(CelOptional::of(Box::new(CelList::from(list))))
}

/// Registers the library on `env`; an overload that fails to register stays undeclared (its
/// rules not evaluated).
pub(super) fn register(env: &mut cel::Env) {
    let _ = env.add_type(FORMAT_TYPE.to_owned());
    register_constants(env);
    let _ = cel::add_overload!(env, fn named: (CelString) -> CelOptional,
        name = "format.named", id = "format-named");
    let _ = cel::add_member_overload!(env, fn validate: (NamedFormat, CelString) -> Result<CelOptional>,
        id = "format-validate");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::cel_lib::tests::yes;

    const NAMES: [&str; 13] = [
        "dns1123Label",
        "dns1123Subdomain",
        "dns1035Label",
        "qualifiedName",
        "dns1123LabelPrefix",
        "dns1123SubdomainPrefix",
        "dns1035LabelPrefix",
        "labelValue",
        "uri",
        "uuid",
        "byte",
        "date",
        "datetime",
    ];

    #[test]
    fn constants_lookup_and_equality() {
        for a in NAMES {
            yes(&format!("format.named('{a}').hasValue()"));
            yes(&format!("format.named('{a}').value() == format.{a}()"));
            for b in NAMES {
                yes(&format!("(format.{a}() == format.{b}()) == {}", a == b));
            }
        }
        yes("!format.named('unknown').hasValue()");
        yes("!format.named('date-time').hasValue()");
        yes("type(format.uri()) == kubernetes.NamedFormat");
    }

    #[test]
    fn validate_returns_the_apiservers_messages() {
        yes(
            r#"format.dns1123Label().validate("contains a space").value()[0] == "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')""#,
        );
        yes("format.dns1123Label().validate('a.b') == optional.of(['must not contain dots'])");
        yes("!format.dns1123Label().validate('my-name').hasValue()");
        yes(&format!(
            "format.dns1123Subdomain().validate('{}').value()[0] == 'must be no more than 253 characters'",
            "a".repeat(254)
        ));
        yes("!format.dns1123Subdomain().validate('example.com').hasValue()");
        yes("format.dns1035Label().validate('1abc').hasValue()");
        yes("!format.qualifiedName().validate('example.com/MyName').hasValue()");
        yes(
            "format.qualifiedName().validate('/x') == optional.of(['prefix part must be non-empty'])",
        );
        yes("!format.labelValue().validate('').hasValue()");
        yes("format.labelValue().validate('-a').hasValue()");
        yes(
            "format.uri().validate('../x') == optional.of(['parse \"../x\": invalid URI for request'])",
        );
        yes("!format.uri().validate('https://example.com/').hasValue()");
        yes("format.uuid().validate('x') == optional.of(['does not match the UUID format'])");
        yes("!format.uuid().validate('123E4567-e89b-12d3-a456-426614174000').hasValue()");
        yes("!format.uuid().validate('123e4567e89b12d3a456426614174000').hasValue()");
        yes("format.byte().validate('abc') == optional.of(['invalid base64'])");
        yes(
            "!format.byte().validate('YWJj').hasValue() && !format.byte().validate('YQ==').hasValue()",
        );
        yes("format.date().validate('2021-02-29') == optional.of(['invalid date'])");
        yes("!format.date().validate('2020-02-29').hasValue()");
        yes("format.datetime().validate('2021-01-01') == optional.of(['invalid datetime'])");
        yes("!format.datetime().validate('2021-01-01T10:00:00Z').hasValue()");
        yes("!format.datetime().validate('2021-01-01t10:00:00.123+01:00').hasValue()");
    }

    #[test]
    fn prefixes_mask_a_trailing_dash_as_go_does() {
        // "abc-" is read as "aba", "a-" as "a".
        yes("!format.dns1123LabelPrefix().validate('abc-').hasValue()");
        yes("format.dns1123Label().validate('abc-').hasValue()");
        yes("!format.dns1035LabelPrefix().validate('a-').hasValue()");
        yes("!format.dns1123SubdomainPrefix().validate('a.b-').hasValue()");
        // "a.-" becomes "a" + "a": Go drops the dot with the dash.
        yes("!format.dns1123LabelPrefix().validate('a.-').hasValue()");
        assert_eq!(mask_trailing_dash("aé-"), "a!a");
        assert_eq!(mask_trailing_dash("-"), "-");
        assert_eq!(mask_trailing_dash("--"), "a");
    }

    #[test]
    fn strfmt_checks() {
        for good in [
            "2021-01-01T00:00:00Z",
            "2021-01-01T23:59:59+05:30",
            "2021-01-01T23:59:59.5-05:30",
            "2021-01-01T23:59:59é5z",
            "2021-01-01T10:00:00ZTanything",
        ] {
            assert!(is_date_time(good), "{good}");
        }
        for bad in [
            "2021-01-01",
            "2021-01-01T24:00:00Z",
            "2021-01-01T10:60:00Z",
            "2021-01-01T10:00:00",
            "2021-01-01T10:00:00.Z",
            "2021-01-01T10:00:00\n5Z",
            "2021-13-01T10:00:00Z",
            "2021-01-01 10:00:00Z",
            "2021-01-01T10:00:00+0530",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_uuid("00000000-0000-0000-0000-000000000000"));
        assert!(!is_uuid("00000000-0000-0000-0000-00000000000"));
        assert!(!is_uuid("00000000--0000-0000-0000-000000000000"));
        assert!(!is_base64("===="));
        assert!(!is_base64("a==="));
        assert!(is_base64("ab+/"));
        assert!(!is_base64(""));
        assert!(is_date("0000-02-29"));
        assert!(!is_date("1900-02-29"));
    }
}
