//! From a field path to the line it is written on.

use crate::fieldpath::PathElement;
use crate::value::yaml::Lines;
use crate::value::{self, Value};

/// The line of the node at `path` in `v` (whose lines are `lines`): the line of its key for a
/// field, of its `-` for a list item. Where the path leaves the text (a field the manifest does
/// not set), the line of the deepest node it reaches.
pub fn line_of(v: &Value, lines: &Lines, path: &[PathElement]) -> u32 {
    let (mut v, mut l, mut line) = (v, lines, lines.line());
    for pe in path {
        match step(v, l, pe) {
            Some((nv, nl, at)) => (v, l, line) = (nv, nl, at),
            None => break,
        }
    }
    line
}

/// [`line_of`] for a path of map keys.
pub fn line_of_keys(v: &Value, lines: &Lines, keys: &[&str]) -> u32 {
    let (mut v, mut l, mut line) = (v, lines, lines.line());
    for k in keys {
        match field(v, l, k) {
            Some((nv, nl, at)) => (v, l, line) = (nv, nl, at),
            None => break,
        }
    }
    line
}

/// The child at `name`, its lines, and the line of its key.
fn field<'a>(v: &'a Value, l: &'a Lines, name: &str) -> Option<(&'a Value, &'a Lines, u32)> {
    let (Value::Map(m), Lines::Map(_, entries)) = (v, l) else {
        return None;
    };
    let i = m.keys().position(|k| k == name)?;
    let child = m.iter().nth(i)?.1;
    let (key_line, lines) = entries.get(i)?;
    Some((child, lines, *key_line))
}

fn step<'a>(v: &'a Value, l: &'a Lines, pe: &PathElement) -> Option<(&'a Value, &'a Lines, u32)> {
    match pe {
        PathElement::Field(name) => field(v, l, name),
        PathElement::Index(i) => item(v, l, |k, _| k as i64 == *i),
        PathElement::Value(want) => item(v, l, |_, x| value::equals(x, want)),
        // Key fields the manifest leaves to their defaults (a port's `protocol`) are absent
        // from the text: an item matching every field it has is taken if none matches all.
        PathElement::Key(fields) => {
            fn field_of<'v>(x: &'v Value, name: &str) -> Option<&'v Value> {
                x.as_map().and_then(|m| m.get(name))
            }
            item(v, l, |_, x| {
                fields
                    .iter()
                    .all(|f| field_of(x, &f.name).is_some_and(|got| value::equals(got, &f.value)))
            })
            .or_else(|| {
                item(v, l, |_, x| {
                    fields.iter().all(|f| {
                        field_of(x, &f.name).is_none_or(|got| value::equals(got, &f.value))
                    })
                })
            })
        }
    }
}

fn item<'a>(
    v: &'a Value,
    l: &'a Lines,
    matches: impl Fn(usize, &Value) -> bool,
) -> Option<(&'a Value, &'a Lines, u32)> {
    let (Value::List(items), Lines::List(_, ls)) = (v, l) else {
        return None;
    };
    let i = items.iter().enumerate().position(|(k, x)| matches(k, x))?;
    let lines = ls.get(i)?;
    Some((&items[i], lines, lines.line()))
}

/// [`line_of`] for a path as kube-apiserver prints it (`.spec.containers[name="app"].image`,
/// `.metadata.finalizers[="x"]`, `.args[2]`). Field names may contain dots (annotation keys),
/// so the document's own keys decide where a name ends (the longest that fits).
pub fn line_of_printed(v: &Value, lines: &Lines, path: &str) -> u32 {
    let (mut v, mut l, mut line) = (v, lines, lines.line());
    let mut rest = path;
    while !rest.is_empty() {
        let next = if let Some(r) = rest.strip_prefix('.') {
            let Value::Map(m) = v else { break };
            let best = m
                .keys()
                .filter(|k| {
                    r.starts_with(k.as_str())
                        && matches!(r.as_bytes().get(k.len()), None | Some(b'.') | Some(b'['))
                })
                .max_by_key(|k| k.len());
            match best.and_then(|k| field(v, l, k).map(|f| (f, &r[k.len()..]))) {
                Some(found) => found,
                None => break,
            }
        } else if rest.starts_with('[') {
            let Some(end) = segment_end(rest) else { break };
            let seg = &rest[1..end];
            let found = if let Ok(i) = seg.parse::<usize>() {
                item(v, l, |k, _| k == i)
            } else if let Some(want) = seg.strip_prefix('=') {
                item(v, l, |_, x| json_text(x) == want)
            } else {
                let pairs = split_pairs(seg);
                let matches = |x: &Value, lenient: bool| {
                    pairs.iter().all(|(k, want)| {
                        match x.as_map().and_then(|m| m.get(k)) {
                            Some(got) => json_text(got) == *want,
                            // Key fields left to their defaults are absent from the text.
                            None => lenient,
                        }
                    })
                };
                item(v, l, |_, x| matches(x, false)).or_else(|| item(v, l, |_, x| matches(x, true)))
            };
            match found {
                Some(f) => (f, &rest[end + 1..]),
                None => break,
            }
        } else {
            break;
        };
        ((v, l, line), rest) = next;
    }
    line
}

fn json_text(v: &Value) -> String {
    crate::value::json::to_string(v, crate::value::json::Style::PLAIN)
}

/// The index of the `]` closing a `[...]` segment (quotes respected).
fn segment_end(s: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in s.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// `name="app",port=80` → [("name", "\"app\""), ("port", "80")] (quotes respected).
fn split_pairs(seg: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (mut quoted, mut escaped, mut start) = (false, false, 0);
    let mut push = |part: &str| {
        if let Some((k, v)) = part.split_once('=') {
            out.push((k.to_string(), v.to_string()));
        }
    };
    for (i, c) in seg.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                push(&seg[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    push(&seg[start..]);
    out
}
