//! How a property name appears to a CEL rule: `k8s.io/apiserver/pkg/cel/escaping.go` (`Escape`),
//! Kubernetes 1.36. `my-field` is `self.my__dash__field`, `namespace` is `self.__namespace__`;
//! a name that cannot be escaped (`1up`, `@`) is no identifier, only a map key.

/// CEL's reserved words (`celReservedSymbols`).
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `Escape`: the identifier a rule names the property by, or `None` when it has none.
pub fn escape(name: &str) -> Option<String> {
    let first = name.bytes().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // Go's `ReplaceAllStringFunc` takes `__` leftmost-first, without overlaps.
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// A rule with its selections of reserved words escaped: the server resolves a selected field
/// by its unescaped name, so `self.namespace` and `self.__namespace__` both name the property
/// `namespace`; fieldguard's objects carry escaped names only. String literals are left alone;
/// a method call (`.in(`) is none.
pub fn reserved_selections(rule: &str) -> std::borrow::Cow<'_, str> {
    let b = rule.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(_) if c == b'\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if c == b'.' => {
                let start = i + 1;
                let end = start
                    + b[start..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                        .count();
                let word = &rule[start..end];
                let call = rule[end..].trim_start().starts_with('(');
                let preceded = i > 0
                    && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'_' | b')' | b']'));
                if RESERVED.contains(&word) && !call && preceded {
                    out.push_str(&rule[copied..start]);
                    out.push_str(&format!("__{word}__"));
                    copied = end;
                }
                i = end;
                continue;
            }
            None => {}
        }
        i += 1;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(rule);
    }
    out.push_str(&rule[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn reserved_words_selected_plainly_are_escaped() {
        use super::reserved_selections as r;
        assert_eq!(r("self.if == 'x'"), "self.__if__ == 'x'");
        assert_eq!(
            r("has(self.namespace) && self.spec.namespace != 'a.namespace'"),
            "has(self.__namespace__) && self.spec.__namespace__ != 'a.namespace'"
        );
        assert_eq!(r("self.__in__ == 1.0"), "self.__in__ == 1.0");
        assert_eq!(r("'x' in self.list"), "'x' in self.list");
        assert!(matches!(
            r("self.a == oldSelf.a"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    /// `TestEscaping` in `k8s.io/apiserver/pkg/cel/escaping_test.go` (v0.36.5).
    #[test]
    fn escapes_as_upstream() {
        let cases = [
            ("a.a", "a__dot__a"),
            ("a-a", "a__dash__a"),
            ("a__a", "a__underscores__a"),
            ("a.-/__a", "a__dot____dash____slash____underscores__a"),
            ("a._a", "a__dot___a"),
            ("a__.__a", "a__underscores____dot____underscores__a"),
            ("a___a", "a__underscores___a"),
            ("a____a", "a__underscores____underscores__a"),
            ("a__dot__a", "a__underscores__dot__underscores__a"),
            (
                "a__underscores__a",
                "a__underscores__underscores__underscores__a",
            ),
            ("true", "__true__"),
            ("false", "__false__"),
            ("null", "__null__"),
            ("in", "__in__"),
            ("as", "__as__"),
            ("break", "__break__"),
            ("const", "__const__"),
            ("continue", "__continue__"),
            ("else", "__else__"),
            ("for", "__for__"),
            ("function", "__function__"),
            ("if", "__if__"),
            ("import", "__import__"),
            ("let", "__let__"),
            ("loop", "__loop__"),
            ("package", "__package__"),
            ("namespace", "__namespace__"),
            ("return", "__return__"),
            ("var", "__var__"),
            ("void", "__void__"),
            ("while", "__while__"),
            ("has", "has"),
            ("all", "all"),
            ("exists_one", "exists_one"),
            ("matches", "matches"),
            ("timestamp", "timestamp"),
            ("getMilliseconds", "getMilliseconds"),
            ("_if", "_if"),
            ("_anything", "_anything"),
        ];
        for (name, want) in cases {
            assert_eq!(escape(name).as_deref(), Some(want), "{name}");
        }
        for name in ["@", "1up", "👑", "", "a b", "é"] {
            assert_eq!(escape(name), None, "{name}");
        }
    }
}
