//! The previous FieldsV1 decoder (one heap-grown node per object, keys classified by the
//! general parser), kept as a test oracle: the fast decoder in `decode.rs` must accept and
//! reject exactly what this one does, with the same sets and the same error offsets/messages.

use super::serialize::{FieldsV1Error, MAX_DEPTH, PeError, parse_pe, unescape_simple};
use super::set::Set;

/// Decodes FieldsV1 JSON bytes the old way.
pub(super) fn from_fields_v1(input: &[u8]) -> Result<Set, FieldsV1Error> {
    let text = std::str::from_utf8(input).map_err(|e| FieldsV1Error {
        offset: e.valid_up_to(),
        message: "invalid UTF-8".into(),
    })?;
    let mut d = Decoder {
        s: text,
        b: input,
        i: 0,
        scratch: String::new(),
    };
    d.ws();
    let (children, _) = d.object(0)?;
    Ok(children.unwrap_or_default())
}

struct Decoder<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// Reused buffer for keys with escapes (every `k:` key has some).
    scratch: String,
}

/// A key as read: borrowed from the input, or unescaped into the decoder's scratch buffer.
enum KeyText<'a> {
    Borrowed(&'a str),
    Scratch,
}

impl<'a> Decoder<'a> {
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, FieldsV1Error> {
        Err(FieldsV1Error {
            offset: self.i,
            message: msg.into(),
        })
    }

    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn expect_lit(&mut self, lit: &[u8]) -> Result<(), FieldsV1Error> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            self.err(format!("expected {}", String::from_utf8_lossy(lit)))
        }
    }

    fn key_str<'k>(&'k self, k: &KeyText<'a>) -> &'k str {
        match k {
            KeyText::Borrowed(s) => s,
            KeyText::Scratch => &self.scratch,
        }
    }

    /// Reads an object (or `null`): returns its children and whether the node is a member.
    fn object(&mut self, depth: usize) -> Result<(Option<Set>, bool), FieldsV1Error> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        match self.peek() {
            Some(b'n') => {
                self.expect_lit(b"null")?;
                return Ok((None, true));
            }
            Some(b'{') => self.i += 1,
            Some(c) => return self.err(format!("expected {{ or null, found {:?}", c as char)),
            None => return self.err("unexpected end of input"),
        }
        let mut children: Option<Set> = None;
        let mut is_member = false;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok((None, true));
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            self.ws();
            let parsed = {
                let k = self.key_str(&key);
                if k == "." { None } else { Some(parse_pe(k)) }
            };
            match parsed {
                None => {
                    is_member = true;
                    self.skip_value(depth)?;
                }
                Some(Err(PeError::Unknown)) => self.skip_value(depth)?,
                Some(Err(PeError::Invalid(m))) => {
                    return self.err(format!("parsing key as path element: {m}"));
                }
                Some(Ok(pe)) => {
                    // Most values are `{}` (a leaf member): no need to recurse for those.
                    let (grand, child_member) = if self.b[self.i..].starts_with(b"{}") {
                        self.i += 2;
                        (None, true)
                    } else {
                        self.object(depth + 1)?
                    };
                    let node = children.get_or_insert_with(Set::new);
                    match (child_member, grand) {
                        (true, Some(g)) => {
                            node.push_member_sorted(pe.clone());
                            node.put_child(pe, g);
                        }
                        (true, None) => node.push_member_sorted(pe),
                        (false, Some(g)) => node.put_child(pe, g),
                        (false, None) => {}
                    }
                }
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
        if children.is_none() {
            is_member = true;
        }
        Ok((children, is_member))
    }

    /// Reads a string literal; escapes are resolved into the scratch buffer.
    fn string(&mut self) -> Result<KeyText<'a>, FieldsV1Error> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string key");
        }
        let start = self.i + 1;
        let Some(off) = memchr::memchr2(b'"', b'\\', &self.b[start..]) else {
            self.i = self.b.len();
            return self.err("unterminated string");
        };
        let end = start + off;
        if self.b[end] == b'"' {
            self.i = end + 1;
            return Ok(KeyText::Borrowed(&self.s[start..end]));
        }
        // Escapes (every `k:` key has them): the common ones (`\\"`, `\\\\`, `\\/`) are
        // resolved in one pass; anything else goes to serde_json below.
        self.scratch.clear();
        self.scratch.push_str(&self.s[start..end]);
        let mut j = end;
        let mut simple = true;
        while j < self.b.len() {
            match self.b[j] {
                b'"' => break,
                b'\\' => match self.b.get(j + 1) {
                    Some(&c @ (b'"' | b'\\' | b'/')) => {
                        self.scratch.push(c as char);
                        j += 2;
                    }
                    _ => {
                        simple = false;
                        break;
                    }
                },
                _ => {
                    // Copy the run up to the next quote or backslash.
                    let from = j;
                    while j < self.b.len() && !matches!(self.b[j], b'"' | b'\\') {
                        j += 1;
                    }
                    self.scratch.push_str(&self.s[from..j]);
                }
            }
        }
        if simple && j < self.b.len() {
            self.i = j + 1;
            return Ok(KeyText::Scratch);
        }
        let lit_start = start - 1;
        let mut j = end;
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &self.b[j..]) else {
                self.i = self.b.len();
                return self.err("unterminated string");
            };
            j += off;
            if self.b[j] == b'\\' {
                j += 2;
                if j > self.b.len() {
                    self.i = self.b.len();
                    return self.err("unterminated string");
                }
                continue;
            }
            break;
        }
        let lit = &self.s[lit_start..=j];
        self.scratch.clear();
        if !unescape_simple(&lit[1..lit.len() - 1], &mut self.scratch) {
            let owned: String = serde_json::from_str(lit).map_err(|e| FieldsV1Error {
                offset: lit_start,
                message: e.to_string(),
            })?;
            self.scratch = owned;
        }
        self.i = j + 1;
        Ok(KeyText::Scratch)
    }

    fn skip_value(&mut self, depth: usize) -> Result<(), FieldsV1Error> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return self.err("expected ':'");
                    }
                    self.i += 1;
                    self.ws();
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return self.err("expected ',' or '}'"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return self.err("expected ',' or ']'"),
                    }
                }
            }
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.expect_lit(b"true"),
            Some(b'f') => self.expect_lit(b"false"),
            Some(b'n') => self.expect_lit(b"null"),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                while let Some(c) = self.peek() {
                    if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                Ok(())
            }
            Some(c) => self.err(format!("unexpected {:?}", c as char)),
            None => self.err("unexpected end of input"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::set::Set;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Both decoders give the same set (same bytes re-encoded) or the same error.
    fn agree(input: &[u8]) {
        let fast = Set::from_fields_v1(input);
        let slow = super::from_fields_v1(input);
        let shown = String::from_utf8_lossy(input);
        match (&fast, &slow) {
            (Ok(a), Ok(b)) => {
                assert!(a.equals(b), "{shown}");
                assert_eq!(a.to_fields_v1(), b.to_fields_v1(), "{shown}");
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{shown}"),
            (a, b) => panic!("{shown}: fast {:?}, previous {:?}", a.is_ok(), b.is_ok()),
        }
    }

    fn golden() -> Vec<String> {
        let text = include_str!("../../tests/fixtures/fieldsv1/golden.jsonl");
        text.lines()
            .map(|line| {
                crate::value::json::parse_str(line)
                    .unwrap()
                    .str_at(&["fieldsV1"])
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn fast_decoder_agrees_on_golden_and_edge_cases() {
        for doc in golden() {
            agree(doc.as_bytes());
        }
        for doc in [
            r#"{"f:a":{"v:1}":{}}}"#,
            r#"{"f:a":{"i:+5":{},"i:-1":{},"i:x":{}}}"#,
            r#"{"f:b": null, "f:c":{"x:y":{}}}"#,
            r#"{"f:a":{"k:{\"b\":1,\"a\":2}":{}}}"#,
            r#"{"f:a":{"f:b":{}},"f:a":{"f:c":{}}}"#,
            r#"{"f:a":{".":{},"f:b":{}},"f:a":{"f:c":{}}}"#,
            r#"{"f:a":{"f:b":{}},"f:a":{}}"#,
            r#"{"f:z":{},"f:a":{"f:y":{},"f:b":{}},"f:a":{},"f:m":{"f:q":{}},"f:b":{}}"#,
            r#"{"f:a":{".":5}}"#,
            r#"{"f:a":{}} x"#,
            r#"{"f:":{},"f":{},"f:a\u0041":{},"f:a\"b":{},"f:\\":{}}"#,
            r#"{"k:{\"a\":\"\u003c\"}":{},"v:\"x\"":{},"v:null":{},"v:[1,{\"a\":2}]":{}}"#,
            r#"{"f:a":5}"#,
            r#"{"a":{}}"#,
            r#"{"f:a":{"v:":{}}}"#,
            r#"{"f:a":{"k:[1]":{}}}"#,
            r#"{"f:a":[]}"#,
            r#"{"f:a":"x"}"#,
            r#"{"f:a":{"#,
            r#"{"f:a" {}}"#,
            r#"{"f:a":{} "f:b":{}}"#,
            r#"{"f:a\":{}}"#,
            r#"{"."  :  {"x": [1, "a", {"b": null}]}, "q:1": true}"#,
            "",
            "   ",
            "null",
            "{}",
        ] {
            agree(doc.as_bytes());
        }
        agree(&[b'{', b'"', b'f', b':', 0xff, b'"', b':', b'{', b'}', b'}']);
    }

    /// Golden documents with random edits (structural characters, duplicated and reordered
    /// entries): the fast decoder's shortcuts (in-place keys, canonical-order appends) must
    /// never change the result.
    #[test]
    fn fast_decoder_agrees_on_mutated_documents() {
        const PIECES: &[&[u8]] = &[
            b"{",
            b"}",
            b"\"",
            b":",
            b",",
            b"\\",
            b"\\\"",
            b".",
            b"f:",
            b"k:",
            b"v:",
            b"i:",
            b"{}",
            b"null",
            b" ",
            b"\"f:a\":{}",
            b"\"f:z\":{\"f:b\":{}}",
            b"\"i:3\":{}",
            b"\".\":{}",
            b"\"v:1\":{}",
        ];
        let docs = golden();
        let mut rng = StdRng::seed_from_u64(0x5eed_f1e1d);
        for _ in 0..20_000 {
            let mut doc = docs[rng.gen_range(0..docs.len())].as_bytes().to_vec();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..=doc.len());
                match rng.gen_range(0..4) {
                    0 if at < doc.len() => {
                        doc.remove(at);
                    }
                    1 => {
                        let p = PIECES[rng.gen_range(0..PIECES.len())];
                        doc.splice(at..at, p.iter().copied());
                    }
                    2 if !doc.is_empty() => {
                        // Repeat an entry-sized slice elsewhere (duplicates, out of order).
                        let from = rng.gen_range(0..doc.len());
                        let to = (from + rng.gen_range(1..40)).min(doc.len());
                        let copy = doc[from..to].to_vec();
                        doc.splice(at..at, copy);
                    }
                    _ if rng.gen_bool(0.2) => doc.truncate(at),
                    _ => {
                        // Swap two bytes.
                        if doc.len() > 1 {
                            let other = rng.gen_range(0..doc.len());
                            let at = at.min(doc.len() - 1);
                            doc.swap(at, other);
                        }
                    }
                }
            }
            agree(&doc);
        }
    }

    /// Reordered entries, taken apart and put back shuffled at top level and one level down.
    #[test]
    fn fast_decoder_agrees_on_shuffled_entries() {
        let mut rng = StdRng::seed_from_u64(7);
        for doc in golden() {
            let set = Set::from_fields_v1(doc.as_bytes()).unwrap();
            for _ in 0..50 {
                let mut entries: Vec<String> = Vec::new();
                for m in set.members() {
                    entries.push(format!("{}:{{}}", key_json(m)));
                }
                for (pe, sub) in set.children() {
                    let inner = sub.to_fields_v1();
                    entries.push(format!("{}:{}", key_json(pe), inner));
                }
                for i in (1..entries.len()).rev() {
                    entries.swap(i, rng.gen_range(0..=i));
                }
                if !entries.is_empty() && rng.gen_bool(0.5) {
                    let dup = entries[rng.gen_range(0..entries.len())].clone();
                    entries.push(dup);
                }
                agree(format!("{{{}}}", entries.join(",")).as_bytes());
            }
        }
    }

    fn key_json(pe: &super::super::PathElement) -> String {
        let mut s = String::new();
        crate::value::gofmt::write_json_string(
            &mut s,
            &super::super::serialize_path_element(pe),
            crate::value::gofmt::Escape::Minimal,
        );
        s
    }
}
