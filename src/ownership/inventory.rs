//! `managers`: every field manager across many objects — operations, objects, fields, newest
//! change — with the usual strays flagged.

use super::managed_of;
use crate::live::ObjectRef;
use crate::managedfields::{format_time, parse_identity};
use crate::value::Value;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Why a manager deserves a look.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flag {
    pub kind: &'static str,
    pub message: String,
}

/// One manager across the objects.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagerSummary {
    pub manager: String,
    /// `Apply`, `Update`, `Update/status`, ...
    pub operations: BTreeSet<String>,
    pub objects: usize,
    pub fields: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    pub flags: Vec<Flag>,
}

/// All managers of a set of objects.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Inventory {
    pub objects: usize,
    pub managers: Vec<ManagerSummary>,
    /// Objects whose managedFields could not be read, with why.
    pub unreadable: Vec<String>,
}

/// Builds the inventory of `objects`.
pub fn inventory<'a>(objects: impl IntoIterator<Item = (&'a ObjectRef, &'a Value)>) -> Inventory {
    let mut acc = Accumulator::default();
    for (r, obj) in objects {
        match managed_of(obj) {
            Ok(managed) => acc.object(managed.fields.iter().map(|(key, vs)| {
                let mut n = 0;
                vs.set.leaves().iterate(|_| n += 1);
                (key.as_str(), n, managed.times.get(key).copied().flatten())
            })),
            Err(e) => acc.unreadable(r, &e),
        }
    }
    acc.finish()
}

/// An inventory built object by object: what [`inventory`] does with decoded managedFields,
/// open to a source that knows each entry's leaf count without decoding it (the watch cache,
/// whose same-shaped entries share one text).
#[derive(Default)]
pub struct Accumulator {
    managers: BTreeMap<String, Acc>,
    objects: usize,
    unreadable: Vec<String>,
}

#[derive(Default)]
struct Acc {
    ops: BTreeSet<String>,
    /// Objects counted so far, and the last one (a manager with several entries on one
    /// object, `Apply` and `Update`, counts it once): linear in the objects, no copies.
    objects: usize,
    last: Option<usize>,
    fields: usize,
    newest: Option<i64>,
}

impl Accumulator {
    /// One object's decoded managedFields: per identity key (as `managedfields::identity`
    /// writes it, each once), its leaf fields and its time.
    pub fn object<'k>(&mut self, entries: impl IntoIterator<Item = (&'k str, usize, Option<i64>)>) {
        let i = self.objects;
        self.objects += 1;
        for (key, leaves, time) in entries {
            let id = parse_identity(key).unwrap_or_default();
            let a = self.managers.entry(id.manager).or_default();
            a.ops.insert(if id.subresource.is_empty() {
                id.operation
            } else {
                format!("{}/{}", id.operation, id.subresource)
            });
            if a.last != Some(i) {
                a.last = Some(i);
                a.objects += 1;
            }
            a.fields += leaves;
            if let Some(t) = time {
                a.newest = Some(a.newest.map_or(t, |x| x.max(t)));
            }
        }
    }

    /// An object whose managedFields could not be read, and why.
    pub fn unreadable(&mut self, r: &ObjectRef, why: &str) {
        self.objects += 1;
        self.unreadable.push(format!("{r}: {why}"));
    }

    pub fn finish(self) -> Inventory {
        let names: Vec<String> = self.managers.keys().cloned().collect();
        let mut inv = Inventory {
            objects: self.objects,
            managers: Vec::with_capacity(names.len()),
            unreadable: self.unreadable,
        };
        for (name, a) in self.managers {
            inv.managers.push(ManagerSummary {
                flags: flags(&name, &names),
                manager: name,
                operations: a.ops,
                objects: a.objects,
                fields: a.fields,
                newest: a.newest.map(format_time),
            });
        }
        inv
    }
}

/// The name a manager would have without its binary's path, extension and version.
fn base_name(name: &str) -> String {
    let mut s = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase();
    if let Some(x) = s.strip_suffix(".exe") {
        s = x.to_string();
    }
    // A trailing version: `-v3.14.2`, `_1.28`, `-1.30.0-rc.1`.
    let bytes = s.as_bytes();
    for i in 0..bytes.len() {
        if matches!(bytes[i], b'-' | b'_' | b'.') {
            let rest = &s[i + 1..];
            let rest = rest.strip_prefix('v').unwrap_or(rest);
            if rest.starts_with(|c: char| c.is_ascii_digit())
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            {
                return s[..i].to_string();
            }
        }
    }
    s
}

fn flags(name: &str, all: &[String]) -> Vec<Flag> {
    let mut out = Vec::new();
    let msg = match name {
        "kubectl-client-side-apply" => Some((
            "legacy-client-side-apply",
            "fields owned by kubectl's client-side apply: after a switch to server-side apply \
             they stay owned (and are never removed) until migrated to the new manager",
        )),
        "kubectl-edit" => Some((
            "manual-edit",
            "fields changed by hand with `kubectl edit`: the next apply of a different value \
             conflicts (or silently reverts them when forced)",
        )),
        "before-first-apply" => Some((
            "before-first-apply",
            "placeholder kube-apiserver created when an object first received a server-side \
             apply: ownership of everything set before; usually migrated to the applier",
        )),
        "Go-http-client" | "" => Some((
            "unnamed-client",
            "a client that set no field manager (the name defaults to the HTTP user agent); \
             give it a --field-manager so its fields can be told apart",
        )),
        _ => None,
    };
    if let Some((kind, m)) = msg {
        out.push(Flag {
            kind,
            message: m.to_string(),
        });
    }
    let base = base_name(name);
    for other in all {
        if other != name && base_name(other) == base {
            out.push(Flag {
                kind: "alias",
                message: format!(
                    "looks like a binary-name alias of {other:?}: the same tool under two \
                     names splits ownership, and neither can remove the other's fields"
                ),
            });
        }
    }
    out
}

/// Renders the inventory as a table.
pub fn render(inv: &Inventory) -> String {
    let mut rows = vec![[
        "MANAGER".to_string(),
        "OPERATIONS".to_string(),
        "OBJECTS".to_string(),
        "FIELDS".to_string(),
        "NEWEST".to_string(),
        "FLAGS".to_string(),
    ]];
    for m in &inv.managers {
        rows.push([
            m.manager.clone(),
            m.operations.iter().cloned().collect::<Vec<_>>().join(","),
            m.objects.to_string(),
            m.fields.to_string(),
            m.newest.clone().unwrap_or_else(|| "-".into()),
            m.flags.iter().map(|f| f.kind).collect::<Vec<_>>().join(","),
        ]);
    }
    let mut widths = [0usize; 6];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            line.push_str(c);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let flagged: Vec<&ManagerSummary> = inv
        .managers
        .iter()
        .filter(|m| !m.flags.is_empty())
        .collect();
    if !flagged.is_empty() {
        out.push('\n');
        for m in flagged {
            for f in &m.flags {
                out.push_str(&format!("{}: {}\n", m.manager, f.message));
            }
        }
    }
    for u in &inv.unreadable {
        out.push_str(&format!("unreadable managedFields: {u}\n"));
    }
    out.push_str(&format!(
        "\n{} manager(s) across {} object(s)\n",
        inv.managers.len(),
        inv.objects
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_name_aliases_are_detected() {
        assert_eq!(base_name("/usr/local/bin/helm"), "helm");
        assert_eq!(base_name("helm.exe"), "helm");
        assert_eq!(base_name("kubectl-1.30.2"), "kubectl");
        assert_eq!(base_name("helm-v3.14.2"), "helm");
        assert_eq!(
            base_name("kube-controller-manager"),
            "kube-controller-manager"
        );
        assert_eq!(base_name("argocd-controller"), "argocd-controller");
        let all = vec![
            "helm".to_string(),
            "helm.exe".to_string(),
            "flux".to_string(),
        ];
        assert_eq!(flags("helm", &all)[0].kind, "alias");
        assert!(flags("flux", &all).is_empty());
        assert_eq!(flags("kubectl-edit", &all)[0].kind, "manual-edit");
    }

    /// A manager with two entries on one object (`Apply` and `Update/status`) counts the
    /// object once and the fields of both; objects are counted per manager.
    #[test]
    fn objects_are_counted_once_per_manager_and_fields_per_entry() {
        let obj = |name: &str, status: bool| {
            let mut entries = vec![
                r#"{"manager":"helm","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{},"f:b":{}}}}"#.to_string(),
            ];
            if status {
                entries.push(r#"{"manager":"helm","operation":"Update","subresource":"status","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:phase":{}}}}"#.to_string());
            }
            entries.push(r#"{"manager":"kubectl-edit","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:c":{}}}}"#.to_string());
            let text = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","managedFields":[{}]}}}}"#,
                entries.join(",")
            );
            let r = ObjectRef {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: "ns".into(),
                name: name.into(),
            };
            (r, crate::value::json::parse_str(&text).unwrap())
        };
        let objects = [obj("a", true), obj("b", false), obj("c", true)];
        let inv = inventory(objects.iter().map(|(r, o)| (r, o)));
        assert_eq!(inv.objects, 3);
        let helm = inv.managers.iter().find(|m| m.manager == "helm").unwrap();
        assert_eq!(helm.objects, 3);
        assert_eq!(helm.fields, 3 * 2 + 2);
        assert_eq!(
            helm.operations
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["Apply", "Update/status"]
        );
        let edit = inv
            .managers
            .iter()
            .find(|m| m.manager == "kubectl-edit")
            .unwrap();
        assert_eq!((edit.objects, edit.fields), (3, 3));
    }
}
