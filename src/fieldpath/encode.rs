//! FieldsV1 encoding: a set written as structured-merge-diff writes it (members and children
//! merged in `PathElement` order, `"."` first for a node that is also a member, keys escaped as
//! json-iterator escapes them).

use super::element::PathElement;
use super::serialize::pe_text;
use super::set::Set;
use crate::value::Value;
use crate::value::gofmt::{Escape, json_plain, json_plain_everywhere, write_json_string};
use crate::value::json::{self as vjson, Style};
use std::cell::RefCell;
use std::cmp::Ordering;

/// Output buffers above this size are not kept between calls.
const KEEP_BUFFER_BYTES: usize = 1 << 20;

thread_local! {
    /// The document is built here (grown once per thread, not per call), then copied out at
    /// its exact size.
    static BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The FieldsV1 JSON of `set`.
pub(super) fn encode(set: &Set) -> String {
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            document(set, &mut out);
            let text = String::from(out.as_str());
            if out.capacity() > KEEP_BUFFER_BYTES {
                *out = String::new();
            }
            text
        }
        // Not reentrant today; stay correct if that changes.
        Err(_) => {
            let mut out = String::with_capacity(256);
            document(set, &mut out);
            out
        }
    })
}

fn document(set: &Set, out: &mut String) {
    let mut key = String::new();
    out.push('{');
    emit(set, false, out, &mut key);
    out.push('}');
}

fn emit(set: &Set, include_self: bool, out: &mut String, key: &mut String) {
    let (members, children) = (set.members(), set.children());
    let mut first = true;
    if include_self && !(members.is_empty() && children.is_empty()) {
        out.push_str("\".\":{}");
        first = false;
    }
    let (mut mi, mut ci) = (0, 0);
    while mi < members.len() || ci < children.len() {
        let ord = match (members.get(mi), children.get(ci)) {
            (Some(m), Some((c, _))) => m.compare(c),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        if !first {
            out.push(',');
        }
        first = false;
        match ord {
            Ordering::Less => {
                write_key(out, key, &members[mi]);
                out.push_str(":{}");
                mi += 1;
            }
            Ordering::Greater => {
                let (pe, sub) = &children[ci];
                write_key(out, key, pe);
                out.push_str(":{");
                emit(sub, false, out, key);
                out.push('}');
                ci += 1;
            }
            Ordering::Equal => {
                let (pe, sub) = &children[ci];
                write_key(out, key, pe);
                out.push_str(":{");
                emit(sub, true, out, key);
                out.push('}');
                mi += 1;
                ci += 1;
            }
        }
    }
}

/// Writes a key value embedded in a JSON string when that needs no escaping at either level
/// (json-iterator encodes the value HTML-safe, then the key is itself a JSON string): plain
/// strings and non-string scalars. False otherwise (the caller discards what was written).
fn write_value_embedded(out: &mut String, v: &Value) -> bool {
    match v {
        Value::String(s) if json_plain_everywhere(s) => {
            out.push_str("\\\"");
            out.push_str(s);
            out.push_str("\\\"");
            true
        }
        Value::String(_) | Value::List(_) | Value::Map(_) => false,
        // Numbers and literals print without characters JSON escapes.
        scalar => {
            vjson::write(out, scalar, Style::JSONITER);
            true
        }
    }
}

#[inline]
fn write_key(out: &mut String, buf: &mut String, pe: &PathElement) {
    // Field names are nearly every key: one reservation, three appends.
    match pe {
        PathElement::Field(n) if json_plain(n) => {
            out.reserve(n.len() + 4);
            out.push_str("\"f:");
            out.push_str(n);
            out.push('"');
        }
        _ => write_key_other(out, buf, pe),
    }
}

#[inline(never)]
fn write_key_other(out: &mut String, buf: &mut String, pe: &PathElement) {
    let mark = out.len();
    let direct = match pe {
        PathElement::Key(fields) => {
            out.push_str("\"k:{");
            let mut ok = true;
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !json_plain_everywhere(&f.name) {
                    ok = false;
                    break;
                }
                out.push_str("\\\"");
                out.push_str(&f.name);
                out.push_str("\\\":");
                if !write_value_embedded(out, &f.value) {
                    ok = false;
                    break;
                }
            }
            out.push('}');
            ok
        }
        PathElement::Value(v) => {
            out.push_str("\"v:");
            write_value_embedded(out, v)
        }
        _ => false,
    };
    if direct {
        out.push('"');
        return;
    }
    // Anything needing escapes: the key's text, escaped as a whole.
    out.truncate(mark);
    buf.clear();
    pe_text(buf, pe);
    write_json_string(out, buf, Escape::Minimal);
}
