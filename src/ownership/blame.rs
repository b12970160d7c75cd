//! `blame`: an object as YAML, each line annotated with the managers that own it. Lines are
//! matched to field paths through the schema, so list-map items (`containers[name="app"]`) and
//! set items (`finalizers[="x"]`) get their own owners, where existing tools index lists by
//! position and get associative lists wrong; fields under an atomic map or list are owned by
//! whoever owns the whole.

use super::{managed_of, owner_of};
use crate::fieldpath::{PathElement, Set};
use crate::predict::Owner;
use crate::schema::{ElementRelationship, Schema, TypeRef};
use crate::typed::{field_type, list_item_pe};
use crate::value::{Value, json};

/// One line of a blamed object.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Line {
    pub text: String,
    /// The field path the line shows (kube-apiserver's notation).
    pub path: String,
    /// Indexes into [`Blame::owners`].
    pub owners: Vec<usize>,
}

/// An object with its ownership, line by line.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Blame {
    pub owners: Vec<Owner>,
    pub lines: Vec<Line>,
}

struct Walker<'a> {
    schema: &'a Schema,
    sets: Vec<&'a Set>,
    lines: Vec<Line>,
}

/// Blames `obj` (a stored object with managedFields) read through `schema`/`tr`.
/// `managedFields` itself is not shown.
pub fn blame(schema: &Schema, tr: &TypeRef, obj: &Value) -> Result<Blame, String> {
    let managed = managed_of(obj)?;
    let keys: Vec<&String> = managed.fields.keys().collect();
    let owners: Vec<Owner> = keys.iter().map(|k| owner_of(k, &managed)).collect();
    let sets: Vec<&Set> = keys.iter().map(|k| &*managed.fields[*k].set).collect();
    let mut shown = obj.clone();
    if let Some(meta) = shown
        .as_map_mut()
        .and_then(|m| m.get_mut("metadata"))
        .and_then(Value::as_map_mut)
    {
        meta.remove("managedFields");
    }
    let mut w = Walker {
        schema,
        sets,
        lines: Vec::new(),
    };
    let mut path = Vec::new();
    w.node(&shown, tr, &mut path, 0, &[], None, &[]);
    Ok(Blame {
        owners,
        lines: w.lines,
    })
}

impl Walker<'_> {
    /// Managers owning `path` itself.
    fn direct(&self, path: &[PathElement]) -> Vec<usize> {
        (0..self.sets.len())
            .filter(|&i| self.sets[i].has(path))
            .collect()
    }

    /// Managers owning `path` as a whole (nothing below it in their set): they own the
    /// children too.
    fn whole(&self, path: &[PathElement], owners: &[usize]) -> Vec<usize> {
        owners
            .iter()
            .copied()
            .filter(|&i| {
                let mut s = self.sets[i];
                for pe in path {
                    match s.child(pe) {
                        Some(c) => s = c,
                        None => return true,
                    }
                }
                s.is_empty()
            })
            .collect()
    }

    fn push(&mut self, indent: usize, text: String, path: &[PathElement], owners: Vec<usize>) {
        self.lines.push(Line {
            text: format!("{}{text}", " ".repeat(indent)),
            path: crate::fieldpath::Path(path.to_vec()).to_string(),
            owners,
        });
    }

    /// Emits the children of the node at `path` (a map's entries or a list's items).
    /// `inherited`: owners of an atomic ancestor; `first_line`: the `- ` and owners of the
    /// list item this map continues; `keys_first`: its list-map keys, printed first.
    /// `prefix`: text of the line the first child continues (`- ` of a list item).
    #[allow(clippy::too_many_arguments)] // one recursive walk; the arguments are its state
    fn node(
        &mut self,
        v: &Value,
        tr: &TypeRef,
        path: &mut Vec<PathElement>,
        indent: usize,
        inherited: &[usize],
        first_line: Option<(String, Vec<usize>)>,
        keys_first: &[crate::value::Str],
    ) {
        let atom = self.schema.resolve(tr).map(|a| a.deduce(Some(v)));
        match v {
            Value::Map(m) => {
                let mut first = first_line;
                let mut entries: Vec<_> = m.iter().collect();
                // List-map keys lead their item (`- name: app`), then the rest in order.
                entries.sort_by_key(|(k, _)| (!keys_first.contains(k), (*k).clone()));
                for (k, child) in entries {
                    let ty = atom
                        .and_then(|a| a.map)
                        .map(|mt| field_type(mt, k).clone())
                        .unwrap_or(TypeRef::EMPTY);
                    path.push(PathElement::field(k));
                    let mut owners = self.direct(path);
                    let whole = self.whole(path, &owners);
                    let mut down: Vec<usize> = inherited.to_vec();
                    down.extend(whole);
                    down.sort_unstable();
                    down.dedup();
                    owners.extend_from_slice(inherited);
                    owners.sort_unstable();
                    owners.dedup();
                    let (lead, lead_owners, ind) = match first.take() {
                        Some((p, o)) => (p, o, indent - 2),
                        None => (String::new(), Vec::new(), indent),
                    };
                    let mut line_owners = owners.clone();
                    line_owners.extend(lead_owners);
                    line_owners.sort_unstable();
                    line_owners.dedup();
                    let key = scalar_text(&Value::from(k.as_str()));
                    if is_leaf(child) {
                        self.push(
                            ind,
                            format!("{lead}{key}: {}", leaf_text(child)),
                            path,
                            line_owners,
                        );
                    } else {
                        self.push(ind, format!("{lead}{key}:"), path, line_owners);
                        let child_indent = if matches!(child, Value::List(_)) {
                            indent
                        } else {
                            indent + 2
                        };
                        self.node(child, &ty, path, child_indent, &down, None, &[]);
                    }
                    path.pop();
                }
            }
            Value::List(items) => {
                let list = atom.and_then(|a| a.list);
                let er = atom.map(|a| a.list_er()).unwrap_or_default();
                for (i, item) in items.iter().enumerate() {
                    let pe = match list {
                        Some(l) if er == ElementRelationship::Associative => {
                            if l.keys.is_empty() {
                                Some(PathElement::Value(item.clone()))
                            } else {
                                list_item_pe(self.schema, l, er, item).ok()
                            }
                        }
                        _ => None,
                    };
                    let ty = list
                        .map(|l| l.element_type.clone())
                        .unwrap_or(TypeRef::EMPTY);
                    // Items of atomic lists have no paths of their own: the list's owners.
                    path.push(pe.unwrap_or(PathElement::Index(i as i64)));
                    let mut owners = self.direct(path);
                    let whole = self.whole(path, &owners);
                    owners.extend_from_slice(inherited);
                    owners.sort_unstable();
                    owners.dedup();
                    let mut down = inherited.to_vec();
                    down.extend(whole);
                    down.sort_unstable();
                    down.dedup();
                    match item {
                        Value::Map(m) if !m.is_empty() => {
                            let keys = list.map(|l| l.keys.as_slice()).unwrap_or(&[]);
                            self.node(
                                item,
                                &ty,
                                path,
                                indent + 2,
                                &down,
                                Some(("- ".into(), owners)),
                                keys,
                            );
                        }
                        _ if is_leaf(item) => {
                            self.push(indent, format!("- {}", leaf_text(item)), path, owners);
                        }
                        _ => {
                            self.push(indent, "-".into(), path, owners);
                            self.node(item, &ty, path, indent + 2, &down, None, &[]);
                        }
                    }
                    path.pop();
                }
            }
            _ => {}
        }
    }
}

fn is_leaf(v: &Value) -> bool {
    match v {
        Value::Map(m) => m.is_empty(),
        Value::List(l) => l.is_empty(),
        _ => true,
    }
}

fn leaf_text(v: &Value) -> String {
    match v {
        Value::Map(_) => "{}".into(),
        Value::List(_) => "[]".into(),
        other => scalar_text(other),
    }
}

/// A scalar as YAML: plain when that reads back as the same string, else double-quoted.
fn scalar_text(v: &Value) -> String {
    let Value::String(s) = v else {
        return json::to_string(v, json::Style::PLAIN);
    };
    let plain = !s.is_empty()
        && !s.starts_with([
            ' ', '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"',
            '%', '@', '`',
        ])
        && !s.ends_with(' ')
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && s.chars().all(|c| !c.is_control())
        && !looks_typed(s);
    if plain {
        s.to_string()
    } else {
        json::to_string(v, json::Style::PLAIN)
    }
}

/// Strings YAML would read as something else (numbers, booleans, null, timestamps-ish).
fn looks_typed(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "true"
            | "false"
            | "yes"
            | "no"
            | "on"
            | "off"
            | "y"
            | "n"
            | "null"
            | "~"
            | ".nan"
            | ".inf"
            | "-.inf"
    ) || s.parse::<f64>().is_ok()
        || (s.len() >= 10
            && s.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && s.as_bytes()[4] == b'-')
        || s.starts_with("0x")
        || s.starts_with("0o")
}

/// Renders a blame: the YAML on the left, owners on the right.
pub fn render(b: &Blame, color: bool) -> String {
    let width = b
        .lines
        .iter()
        .map(|l| l.text.chars().count())
        .max()
        .unwrap_or(0)
        .min(72);
    let mut out = String::new();
    for l in &b.lines {
        out.push_str(&l.text);
        if !l.owners.is_empty() {
            let pad = width.saturating_sub(l.text.chars().count()) + 2;
            out.push_str(&" ".repeat(pad));
            let who: Vec<String> = l
                .owners
                .iter()
                .map(|&i| short_owner(&b.owners[i]))
                .collect();
            let note = format!("# {}", who.join(", "));
            if color {
                out.push_str(&format!("\x1b[2m{note}\x1b[0m"));
            } else {
                out.push_str(&note);
            }
        }
        out.push('\n');
    }
    out
}

/// `kubectl-edit (Update) 2026-11-21T02:47:55Z`, `kube-controller-manager (Update/scale) …`.
fn short_owner(o: &Owner) -> String {
    let mut s = format!("{} ({}", o.manager, o.operation);
    if !o.subresource.is_empty() {
        s.push('/');
        s.push_str(&o.subresource);
    }
    s.push(')');
    if let Some(t) = &o.time {
        s.push(' ');
        s.push_str(t);
    }
    s
}
