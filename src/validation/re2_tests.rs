//! Cases from Go's `regexp/syntax` parser behaviour (`parse_test.go`'s invalid regexps) and
//! the RE2 character classes (`\d`, `\w`, `\s`, `\b` are ASCII-only).

use super::*;

fn is_match(p: &str, s: &str) -> bool {
    compile(p)
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .is_match(s)
}

#[test]
fn perl_classes_and_word_boundaries_are_ascii() {
    // Arabic-Indic digits: Unicode digits for Rust, not for RE2.
    assert!(!is_match(r"^\d+$", "٣٤"));
    assert!(is_match(r"^\d+$", "34"));
    assert!(is_match(r"^\D+$", "٣٤"));
    assert!(!is_match(r"^\w+$", "é"));
    assert!(is_match(r"^[\w-]+$", "a-b_9"));
    assert!(!is_match(r"^[\w]+$", "é"));
    assert!(is_match(r"^[^\d]+$", "٣"));
    assert!(is_match(r"^[\D]+$", "٣"));
    // \s is [\t\n\f\r ]: no vertical tab, no non-breaking space.
    assert!(!is_match(r"^\s$", "\u{0B}"));
    assert!(!is_match(r"^\s$", "\u{A0}"));
    assert!(is_match(r"^\s$", "\u{0C}"));
    // \b: é is no word character for RE2.
    assert!(is_match(r"a\b", "aé"));
    assert!(!is_match(r"a\B", "aé"));
}

#[test]
fn go_literals_stay_literals() {
    assert!(is_match(r"^[a&&b]+$", "&&ab"));
    assert!(is_match(r"^[a~~b]+$", "~"));
    assert!(is_match(r"^[[a]+$", "[a"));
    assert!(is_match(r"^a{,2}$", "a{,2}"));
    assert!(is_match(r"^x{$", "x{"));
    assert!(is_match(r"^\Qa.b*\E$", "a.b*"));
    assert!(!is_match(r"^\Qa.b\E$", "axb"));
    assert!(is_match(r"^\<a\>$", "<a>"));
    assert!(is_match(r"^\101$", "A"));
    assert!(is_match(r"^\0$", "\0"));
    assert!(is_match(r"^a b#c$", "a b#c"));
    assert!(is_match(r"^[[:digit:]]+$", "12"));
    assert!(is_match(r"^(?i)abc$", "ABC"));
    assert!(is_match(r"^(?P<n>a)(?<m>b)$", "ab"));
    assert!(is_match(r"^a{2,3}$", "aaa"));
    assert!(is_match(r"^\x41\x{42}$", "AB"));
    assert!(is_match(r"^\p{Greek}+$", "αβ"));
    assert!(is_match(r"^\pL+$", "αa"));
}

#[test]
fn what_go_refuses_is_refused() {
    let refused = [
        (
            r"(a)\1",
            "error parsing regexp: invalid escape sequence: `\\1`",
        ),
        (
            r"a(?=b)",
            "error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
        ),
        (
            r"a(?!b)",
            "error parsing regexp: invalid or unsupported Perl syntax: `(?!`",
        ),
        // Go reads `(?<` as a named capture first.
        (
            r"(?<=a)b",
            "error parsing regexp: invalid named capture: `(?<=a)b`",
        ),
        (
            r"(?ix)a",
            "error parsing regexp: invalid or unsupported Perl syntax: `(?ix`",
        ),
        (
            r"\C",
            "error parsing regexp: invalid escape sequence: `\\C`",
        ),
        (
            r"a{1001}",
            "error parsing regexp: invalid repeat count: `{1001}`",
        ),
        (
            r"a{2,1001}",
            "error parsing regexp: invalid repeat count: `{2,1001}`",
        ),
        (
            r"a{3,2}",
            "error parsing regexp: invalid repeat count: `{3,2}`",
        ),
        (
            r"a**",
            "error parsing regexp: invalid nested repetition operator: `**`",
        ),
        (
            r"a++",
            "error parsing regexp: invalid nested repetition operator: `++`",
        ),
        (
            r"(?x)a b",
            "error parsing regexp: invalid or unsupported Perl syntax: `(?x`",
        ),
        (
            r"\8",
            "error parsing regexp: invalid escape sequence: `\\8`",
        ),
        (
            r"\Z",
            "error parsing regexp: invalid escape sequence: `\\Z`",
        ),
        (
            r"[\b]",
            "error parsing regexp: invalid escape sequence: `\\b`",
        ),
        (r"[a", "error parsing regexp: missing closing ]: `[a`"),
    ];
    for (p, want) in refused {
        assert_eq!(
            compile(p).unwrap_err(),
            Refusal::Invalid(want.into()),
            "{p}"
        );
    }
    assert!(compile(r"a*?").is_ok());
    assert!(compile(r"a??").is_ok());
    assert!(compile(r"a{1000}").is_ok());
    // Go may not know a name the regex crate does: not evaluated.
    assert!(matches!(
        compile(r"\p{Letter}"),
        Err(Refusal::Unsupported(_))
    ));
    // An unbalanced group: refused by both (the message is the regex crate's).
    assert!(compile(r"(a").is_err());
}
