//! Regular expressions as the apiserver reads them: Go's `regexp` (RE2 syntax), for a schema's
//! `pattern` (kube-openapi) and CEL's `matches()` (cel-go), translated to the `regex` crate.
//! Where the two differ, the translation keeps Go's meaning: `\d`, `\w`, `\s`, `\b` are ASCII
//! (`\s` is `[\t\n\f\r ]`), `\Q...\E` quotes, `\123` is octal, `[a&&b]` is three literals;
//! and Go's refusals are refusals: backreferences, lookaround, `\C`, `\<`, repeat counts over
//! 1000, flags other than `imsU`. A construct whose Go meaning is not certain here (a Unicode
//! class name Go may not know, `--` in a class) is [`Refusal::Unsupported`]: not evaluated.

use regex::Regex;
use std::cell::RefCell;
use std::collections::HashMap;

/// Why a pattern has no translation.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// Go refuses the pattern (its `syntax.Error` text).
    Invalid(String),
    /// fieldguard cannot tell what Go makes of it.
    Unsupported(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Invalid(e) => write!(f, "{e}"),
            Refusal::Unsupported(e) => write!(f, "not evaluated here: {e}"),
        }
    }
}

/// Go's largest repeat count (`syntax.maxRepeat`... in effect, `{n,m}` with n or m > 1000).
const MAX_REPEAT: u32 = 1000;
/// Compiled patterns kept per thread.
const CACHE: usize = 256;

thread_local! {
    static COMPILED: RefCell<HashMap<String, Result<Regex, Refusal>>> = RefCell::new(HashMap::new());
}

/// Compiles `pattern` with Go's meaning (cached).
pub fn compile(pattern: &str) -> Result<Regex, Refusal> {
    if let Some(r) = COMPILED.with(|c| c.borrow().get(pattern).cloned()) {
        return r;
    }
    let r = translate(pattern).and_then(|t| {
        Regex::new(&t).map_err(|e| {
            Refusal::Unsupported(format!("pattern {pattern:?} does not compile here: {e}"))
        })
    });
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE {
            c.clear();
        }
        c.insert(pattern.to_string(), r.clone());
    });
    r
}

fn invalid(code: &str, expr: &str) -> Refusal {
    Refusal::Invalid(format!("error parsing regexp: {code}: `{expr}`"))
}

/// Go's Unicode class names fieldguard accepts: the general categories, `Any`, and scripts
/// both Go and the `regex` crate name the same way.
const CLASS_NAMES: &[&str] = &[
    "Any",
    "C",
    "Cc",
    "Cf",
    "Co",
    "Cs",
    "L",
    "Ll",
    "Lm",
    "Lo",
    "Lt",
    "Lu",
    "M",
    "Mc",
    "Me",
    "Mn",
    "N",
    "Nd",
    "Nl",
    "No",
    "P",
    "Pc",
    "Pd",
    "Pe",
    "Pf",
    "Pi",
    "Po",
    "Ps",
    "S",
    "Sc",
    "Sk",
    "Sm",
    "So",
    "Z",
    "Zl",
    "Zp",
    "Zs",
    "Arabic",
    "Armenian",
    "Bengali",
    "Common",
    "Cyrillic",
    "Devanagari",
    "Georgian",
    "Greek",
    "Han",
    "Hangul",
    "Hebrew",
    "Hiragana",
    "Inherited",
    "Katakana",
    "Latin",
    "Thai",
];

/// `\d`-like classes: (Go's ASCII set for use inside a class, negated?).
fn perl_class(c: char) -> Option<(&'static str, bool)> {
    Some(match c {
        'd' => ("0-9", false),
        'D' => ("0-9", true),
        'w' => ("0-9A-Za-z_", false),
        'W' => ("0-9A-Za-z_", true),
        's' => (r"\t\n\x0C\r ", false),
        'S' => (r"\t\n\x0C\r ", true),
        _ => return None,
    })
}

struct Translator<'a> {
    src: &'a str,
    chars: Vec<char>,
    i: usize,
    out: String,
}

/// The `regex` crate's spelling of a Go pattern.
pub fn translate(src: &str) -> Result<String, Refusal> {
    let mut t = Translator {
        src,
        chars: src.chars().collect(),
        i: 0,
        out: String::with_capacity(src.len() + 8),
    };
    t.run()?;
    Ok(t.out)
}

impl Translator<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn rest(&self) -> String {
        self.chars[self.i..].iter().collect()
    }

    fn run(&mut self) -> Result<(), Refusal> {
        // 0: after an atom; 1: after a repetition; 2: after a non-greedy repetition.
        let mut after_repeat = 0u8;
        while let Some(c) = self.peek(0) {
            let was = after_repeat;
            after_repeat = 0;
            match c {
                '\\' => self.escape(false)?,
                '[' => self.class()?,
                '(' => self.group()?,
                '*' | '+' | '?' => {
                    if was == 1 && c == '?' {
                        after_repeat = 2;
                    } else if was != 0 {
                        let op: String = self.chars[self.i - 1..=self.i].iter().collect();
                        return Err(invalid("invalid nested repetition operator", &op));
                    } else {
                        after_repeat = 1;
                    }
                    self.out.push(c);
                    self.i += 1;
                }
                '{' => match self.repeat()? {
                    Some(len) => {
                        if was != 0 {
                            let op: String = self.chars[self.i..self.i + len].iter().collect();
                            return Err(invalid("invalid nested repetition operator", &op));
                        }
                        after_repeat = 1;
                        self.out.extend(&self.chars[self.i..self.i + len]);
                        self.i += len;
                    }
                    None => {
                        self.out.push_str(r"\{");
                        self.i += 1;
                    }
                },
                '}' => {
                    self.out.push_str(r"\}");
                    self.i += 1;
                }
                // Only special in the `regex` crate's verbose mode, which Go lacks.
                '#' | ' ' => {
                    self.out.push_str(&format!(r"\x{{{:X}}}", c as u32));
                    self.i += 1;
                }
                c => {
                    self.out.push(c);
                    self.i += 1;
                }
            }
        }
        Ok(())
    }

    /// A `{n}`, `{n,}` or `{n,m}` at `i`: its length, `None` when it is a literal `{`.
    fn repeat(&self) -> Result<Option<usize>, Refusal> {
        let rest: String = self.rest();
        let Some(end) = rest.find('}') else {
            return Ok(None);
        };
        let body = &rest[1..end];
        let (lo, hi) = match body.split_once(',') {
            Some((lo, hi)) => (lo, Some(hi)),
            None => (body, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || hi.is_some_and(|h| !h.is_empty() && !digits(h)) {
            return Ok(None);
        }
        let whole = &rest[..=end];
        let n = |s: &str| s.parse::<u32>().unwrap_or(u32::MAX);
        let (lo, hi) = (n(lo), hi.filter(|h| !h.is_empty()).map(n));
        if lo > MAX_REPEAT || hi.is_some_and(|h| h > MAX_REPEAT || h < lo) {
            return Err(invalid("invalid repeat count", whole));
        }
        Ok(Some(whole.chars().count()))
    }

    fn group(&mut self) -> Result<(), Refusal> {
        if self.peek(1) != Some('?') {
            self.out.push('(');
            self.i += 1;
            return Ok(());
        }
        let rest = self.rest();
        let named = rest
            .strip_prefix("(?P<")
            .or_else(|| rest.strip_prefix("(?<"));
        if let Some(after) = named {
            let Some(end) = after.find('>') else {
                return Err(invalid("invalid named capture", &rest));
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(invalid(
                    "invalid named capture",
                    &rest[..rest.len() - after.len() + end + 1],
                ));
            }
            self.out.push_str(&format!("(?P<{name}>"));
            self.i = self.chars.len() - after[end + 1..].chars().count();
            return Ok(());
        }
        // Flags: `(?flags)` or `(?flags:`, flags from `imsU` with at most one `-`.
        let body: String = self.chars[self.i + 2..]
            .iter()
            .take_while(|c| **c != ')' && **c != ':')
            .collect();
        let close = self.peek(2 + body.chars().count());
        let ok_flags = !body.is_empty()
            && body
                .chars()
                .all(|c| matches!(c, 'i' | 'm' | 's' | 'U' | '-'))
            && body.matches('-').count() <= 1
            && !body.ends_with('-');
        if !ok_flags || close.is_none() {
            // Go shows the text up to the first character it does not take.
            let bad = self.chars[self.i + 2..]
                .iter()
                .position(|c| !matches!(c, 'i' | 'm' | 's' | 'U' | '-'))
                .map_or(self.chars.len(), |p| self.i + 2 + p + 1);
            let shown: String = self.chars[self.i..bad.min(self.chars.len())]
                .iter()
                .collect();
            return Err(invalid("invalid or unsupported Perl syntax", &shown));
        }
        let len = 2 + body.chars().count() + 1;
        self.out.extend(&self.chars[self.i..self.i + len]);
        self.i += len;
        Ok(())
    }

    fn class(&mut self) -> Result<(), Refusal> {
        let start = self.i;
        self.out.push('[');
        self.i += 1;
        if self.peek(0) == Some('^') {
            self.out.push('^');
            self.i += 1;
        }
        if self.peek(0) == Some(']') {
            self.out.push_str(r"\]");
            self.i += 1;
        }
        loop {
            let Some(c) = self.peek(0) else {
                let shown: String = self.chars[start..].iter().collect();
                return Err(invalid("missing closing ]", &shown));
            };
            match c {
                ']' => {
                    self.out.push(']');
                    self.i += 1;
                    return Ok(());
                }
                '\\' => self.escape(true)?,
                '[' if self.peek(1) == Some(':') => {
                    let rest = self.rest();
                    let Some(end) = rest[2..].find(":]") else {
                        self.out.push_str(r"\[");
                        self.i += 1;
                        continue;
                    };
                    let name = &rest[2..2 + end];
                    let known = [
                        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower",
                        "print", "punct", "space", "upper", "word", "xdigit",
                    ];
                    if !known.contains(&name.trim_start_matches('^')) {
                        return Err(invalid("invalid character class range", &rest[..end + 4]));
                    }
                    self.out.push_str(&rest[..end + 4]);
                    self.i += rest[..end + 4].chars().count();
                }
                '-' if self.peek(1) == Some('-') => {
                    return Err(Refusal::Unsupported(format!(
                        "`--` in a character class of {:?}",
                        self.src
                    )));
                }
                '[' | '&' | '~' => {
                    self.out.push('\\');
                    self.out.push(c);
                    self.i += 1;
                }
                c => {
                    self.out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// A backslash sequence at `i` (`in_class`: inside `[...]`).
    fn escape(&mut self, in_class: bool) -> Result<(), Refusal> {
        let Some(c) = self.peek(1) else {
            return Err(Refusal::Invalid(
                "error parsing regexp: trailing backslash at end of expression: ``".into(),
            ));
        };
        let seq: String = self.chars[self.i..self.i + 2].iter().collect();
        self.i += 2;
        if let Some((set, negated)) = perl_class(c) {
            match (in_class, negated) {
                (true, false) => self.out.push_str(set),
                _ => self
                    .out
                    .push_str(&format!("[{}{set}]", if negated { "^" } else { "" })),
            }
            return Ok(());
        }
        match c {
            'b' | 'B' if !in_class => self.out.push_str(&format!("(?-u:\\{c})")),
            'A' | 'z' if !in_class => self.out.push_str(&seq),
            'a' | 'f' | 't' | 'n' | 'r' | 'v' => self.out.push_str(&seq),
            'Q' if !in_class => {
                let rest = self.rest();
                let (lit, skip) = match rest.find(r"\E") {
                    Some(e) => (&rest[..e], e + 2),
                    None => (rest.as_str(), rest.len()),
                };
                self.out.push_str(&regex::escape(lit));
                self.i += rest[..skip].chars().count();
            }
            'x' => self.hex(&seq)?,
            'p' | 'P' => self.unicode_class(c)?,
            '0'..='7' => {
                // A lone 1-7 is a backreference (refused); otherwise up to three octal digits.
                if c != '0' && !self.peek(0).is_some_and(|d| ('0'..='7').contains(&d)) {
                    return Err(invalid("invalid escape sequence", &seq));
                }
                let mut v = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match self.peek(0).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            self.i += 1;
                        }
                        None => break,
                    }
                }
                self.out.push_str(&format!(r"\x{{{v:X}}}"));
            }
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => {
                self.out.push_str(&format!(r"\x{{{:X}}}", c as u32))
            }
            _ => return Err(invalid("invalid escape sequence", &seq)),
        }
        Ok(())
    }

    fn hex(&mut self, seq: &str) -> Result<(), Refusal> {
        let rest = self.rest();
        let (digits, len) = if let Some(body) = rest.strip_prefix('{') {
            match body.find('}') {
                Some(e) => (&body[..e], e + 2),
                None => return Err(invalid("invalid escape sequence", &format!("{seq}{rest}"))),
            }
        } else {
            (rest.get(..2).unwrap_or(""), 2)
        };
        let v = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(digits, 16).ok())
            .flatten()
            .filter(|v| *v <= 0x10FFFF);
        let Some(v) = v else {
            let shown: String = format!("{seq}{}", rest.get(..len).unwrap_or(&rest));
            return Err(invalid("invalid escape sequence", &shown));
        };
        if (0xD800..0xE000).contains(&v) {
            return Err(Refusal::Unsupported(format!("a surrogate \\x{{{v:X}}}")));
        }
        self.out.push_str(&format!(r"\x{{{v:X}}}"));
        self.i += len;
        Ok(())
    }

    fn unicode_class(&mut self, p: char) -> Result<(), Refusal> {
        let rest = self.rest();
        let (name, len) = if let Some(body) = rest.strip_prefix('{') {
            match body.find('}') {
                Some(e) => (&body[..e], e + 2),
                None => {
                    return Err(invalid(
                        "invalid character class range",
                        &format!("\\{p}{rest}"),
                    ));
                }
            }
        } else {
            match rest.chars().next() {
                Some(c) => (&rest[..c.len_utf8()], 1),
                None => return Err(invalid("invalid character class range", &format!("\\{p}"))),
            }
        };
        let bare = name.strip_prefix('^').unwrap_or(name);
        if !CLASS_NAMES.contains(&bare) {
            return Err(Refusal::Unsupported(format!(
                "the Unicode class {name:?} (Go may not know it)"
            )));
        }
        self.out.push_str(&format!("\\{p}{{{name}}}"));
        self.i += len;
        Ok(())
    }
}

#[cfg(test)]
#[path = "re2_tests.rs"]
mod tests;
