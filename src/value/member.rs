//! One member of a JSON object cut out of its text without reading its value: a replay case
//! line names its schema this way, so a large inline schema seen before is found by comparing
//! texts instead of being read again.
//!
//! [`locate`] reads the members before the one wanted as strictly as the [`Cursor`] does and
//! declines (`None`) whatever it does not read exactly (a key with an escape, which may spell
//! the key wanted; a number with an exponent; deep nesting; anything but an object). The value
//! found is not read: a caller that knows it (by its text, as a valid JSON value) cuts it out
//! with [`without`] and reads the rest, in which the key must not appear again.

use super::cursor::Cursor;

/// Where the member `key` of the object `text` starts (its key's quote) and where its value
/// starts; the members before it are read, the rest is not.
pub fn locate(text: &[u8], key: &str) -> Option<(usize, usize)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut c = Cursor::new(text);
    c.space();
    if c.peek()? != b'{' || c.open(0, b'}')? {
        return None;
    }
    loop {
        c.space();
        let start = c.at;
        if c.peek()? != b'"' {
            return None;
        }
        let k = c.string()?;
        if k.escaped {
            return None;
        }
        c.eat(b':')?;
        c.space();
        if &text[k.start..k.end] == key {
            return Some((start, c.at));
        }
        c.skip(1)?;
        if !c.next(b'}')? {
            return None;
        }
    }
}

/// The object `text` without its member that starts at `start` and whose value is the
/// `value_len` bytes from `value_start` (with one comma next to it); `None` unless a `,` or
/// the object's `}` follows the value.
pub fn without(text: &[u8], start: usize, value_start: usize, value_len: usize) -> Option<Vec<u8>> {
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let value_end = value_start.checked_add(value_len)?;
    let after = value_end
        + text
            .get(value_end..)?
            .iter()
            .take_while(|b| space(b))
            .count();
    let (from, to) = match *text.get(after)? {
        // The member and the comma after it.
        b',' => (start, after + 1),
        // The last member: the comma before it too, if there is one.
        b'}' => {
            let before = text[..start].iter().rev().take_while(|b| space(b)).count();
            match text[..start - before].last()? {
                b',' => (start - before - 1, value_end),
                _ => (start, value_end),
            }
        }
        _ => return None,
    };
    let mut rest = Vec::with_capacity(text.len() - (to - from));
    rest.extend_from_slice(&text[..from]);
    rest.extend_from_slice(&text[to..]);
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    /// The value text `known` cut out of `text` where `schema` is, as a caller would.
    fn cut(text: &str, known: &str) -> Option<String> {
        let (start, value) = locate(text.as_bytes(), "schema")?;
        if !text[value..].starts_with(known) {
            return None;
        }
        let rest = without(text.as_bytes(), start, value, known.len())?;
        Some(String::from_utf8(rest).unwrap())
    }

    #[test]
    fn the_member_and_one_comma_are_cut_wherever_it_is() {
        let s = |r: &str| Some(r.to_string());
        assert_eq!(
            cut(r#"{"schema":"k8s","a":1}"#, r#""k8s""#),
            s(r#"{"a":1}"#)
        );
        assert_eq!(
            cut(
                r#"{"a":[1,{"b":null}],"schema":{"x":[1,{}]}}"#,
                r#"{"x":[1,{}]}"#
            ),
            s(r#"{"a":[1,{"b":null}]}"#)
        );
        assert_eq!(
            cut(r#"{"a":1,"schema":null,"b":[true,false]}"#, "null"),
            s(r#"{"a":1,"b":[true,false]}"#)
        );
        assert_eq!(
            cut(r#" { "a" : 1 , "schema" : [ ] } "#, "[ ]"),
            s(r#" { "a" : 1  } "#)
        );
        assert_eq!(cut(r#"{ "schema" : 1 }"#, "1"), s("{  }"));
        // A number known by a prefix of it is not it.
        assert_eq!(cut(r#"{"schema":12}"#, "1"), None);
        assert_eq!(cut(r#"{"schema":"k8s"x}"#, r#""k8s""#), None);
        assert_eq!(
            cut(r#"{"a":{"schema":1}}"#, "1"),
            None,
            "only a member of the object itself"
        );
        // Declined: read in full by the caller.
        for t in [
            r#"{"a":1}"#,
            r#"{"sch\u0065ma":1}"#,
            r#"{"a":1e3,"schema":1}"#,
            r#"{"a":1,,"schema":1}"#,
            r#"[{"schema":1}]"#,
            "{\"a\":\"\u{1}\",\"schema\":1}",
        ] {
            assert_eq!(locate(t.as_bytes(), "schema"), None, "{t}");
        }
    }

    #[test]
    fn the_rest_reads_as_the_object_without_the_member() {
        for (t, known) in [
            (
                r#"{"name":"n","schema":{"types":[{"name":"t"}]},"steps":[{"op":"apply"}]}"#,
                r#"{"types":[{"name":"t"}]}"#,
            ),
            (r#"{"schema":"k8s","name":"n"}"#, r#""k8s""#),
            (r#"{"name":"n","schema":"k8s"}"#, r#""k8s""#),
            (r#"{"schema":"k8s"}"#, r#""k8s""#),
        ] {
            let mut whole = json::parse(t.as_bytes()).unwrap();
            let kept = whole.as_map_mut().unwrap().remove("schema").unwrap();
            assert_eq!(json::parse(known.as_bytes()).unwrap(), kept, "{t}");
            assert_eq!(
                json::parse(cut(t, known).unwrap().as_bytes()).unwrap(),
                whole,
                "{t}"
            );
        }
    }
}
