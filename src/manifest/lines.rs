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
