//! What an apply's prune step removes, found in one walk of the merged object along the
//! applier's previous set, instead of smd's three passes over the whole object.
//!
//! smd's passes, for managers all recorded at one API version, with `L` the applier's previous
//! set (named fields promoted to members), `M` every node of the merged object and `A` what
//! anyone owns now (the applier's new set included, named fields promoted):
//! 1. remove every member of `L` (with its subtree);
//! 2. keep `K` = what is left after 1, plus `A`; remove every node of `M` not in `K`;
//! 3. remove the members of `L` that are nodes of `M` but not of the result of 2.
//!
//! Only 3 changes the object. Below a member `r` of `L` whose ancestors are not in `L` (a
//! *root*), every node lost pass 1, so 2 keeps exactly the nodes whose path from `r` down is
//! in `A`; nothing else changes. So 3 removes: each root not in `A`, and, below a root in `A`,
//! the highest members of `L` under each node that is not in `A` while its parent is.
//!
//! That holds while no pass changes what is a node of the tree beyond removing subtrees: a
//! container emptied by a removal becomes null, a list item that loses a key field gets
//! another path element (unless the key's default is the value it had), a declared field left
//! with no owned child drops out of the field set.
//! Wherever one of those could happen (and for duplicated list items, items without path
//! elements, fields the schema does not declare, types that do not resolve) the walk gives up
//! and the caller runs the three passes. Debug builds compare the two on every call.
//!
//! Errors: the passes compute the merged object's whole field set, which fails on content the
//! schema cannot type; the walk reads only the parts it visits. Both the applied config and
//! the live object are validated before a merge, so the merged object has no such content.

use crate::fieldpath::{PathElement, Set};
use crate::schema::{ElementRelationship, List, Schema, TypeRef};
use crate::typed::{Handler, ListIndex, field_type, handler, list_item_pe};
use crate::value::{Map, Value};

/// The walk met something it does not model; run the three passes.
pub(super) struct GiveUp;

/// What pass 3 removes (its highest members), or [`GiveUp`]. `last` is the applier's previous
/// set as recorded, `owners` every manager's current set (the applier's new one included).
pub(super) fn dangling(
    schema: &Schema,
    tr: &TypeRef,
    merged: &Value,
    last: &Set,
    owners: &[&Set],
) -> Result<Set, GiveUp> {
    Walk { schema }.above(tr, merged, last, owners, &[])
}

/// A child of a container in the merged object.
struct Entry<'v, 's> {
    pe: PathElement,
    tr: &'s TypeRef,
    v: &'v Value,
    /// A struct field the schema declares (promoted to a member where it has children).
    declared: bool,
    /// For a list item: the list.
    list: Option<&'s List>,
}

impl Entry<'_, '_> {
    /// The key fields of the list holding this item.
    fn keys(&self) -> &[crate::value::Str] {
        self.list.map_or(&[], |l| &l.keys)
    }
}

enum Kind<'v, 's> {
    Scalar,
    /// No children in the field set; whether the node is a leaf of it (an atomic value).
    Leaf(bool),
    Container(Vec<Entry<'v, 's>>),
}

struct Walk<'s> {
    schema: &'s Schema,
}

fn owned(owners: &[&Set], e: &Entry) -> bool {
    owners.iter().any(|o| o.has_named_member(&e.pe, e.declared))
}

fn below<'a>(owners: &[&'a Set], pe: &PathElement) -> Vec<&'a Set> {
    owners.iter().filter_map(|o| o.child(pe)).collect()
}

/// True if the entry at `pe` is a key field of the list item holding it.
fn is_key_field(keys: &[crate::value::Str], pe: &PathElement) -> bool {
    matches!(pe, PathElement::Field(n) if keys.iter().any(|k| k == n))
}

/// True for a map or list value (a key field's value is a scalar in practice).
fn is_container(v: &Value) -> bool {
    matches!(v, Value::Map(_) | Value::List(_))
}

/// A set from members and children in any order.
fn assemble(mut members: Vec<PathElement>, mut children: Vec<(PathElement, Set)>) -> Set {
    members.sort_by(|a, b| a.compare(b));
    children.sort_by(|a, b| a.0.compare(&b.0));
    Set::from_sorted_parts(members, children)
}

impl<'s> Walk<'s> {
    /// What the field-set walker sees at `v`: its children, or that it has none.
    fn kind<'v>(&self, tr: &'s TypeRef, v: &'v Value) -> Result<Kind<'v, 's>, GiveUp> {
        let atom = self.schema.resolve(tr).ok_or(GiveUp)?.deduce(Some(v));
        match (handler(&atom), v) {
            (Handler::Scalar(_), _) => Ok(Kind::Scalar),
            (Handler::Invalid, _) => Err(GiveUp),
            (Handler::List(_, ElementRelationship::Atomic), _) => Ok(Kind::Leaf(true)),
            (Handler::List(l, er @ ElementRelationship::Associative), Value::List(items)) => {
                let (idx, problems) = ListIndex::build(self.schema, l, er, items);
                if !problems.is_empty() {
                    return Err(GiveUp);
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    if idx.is_duplicated(i) {
                        return Err(GiveUp);
                    }
                    out.push(Entry {
                        pe: idx.pe_at(i).clone(),
                        tr: &l.element_type,
                        v: item,
                        declared: false,
                        list: Some(l),
                    });
                }
                Ok(Kind::Container(out))
            }
            (Handler::List(..), _) => Ok(Kind::Leaf(false)),
            (Handler::Map(_, ElementRelationship::Atomic), _) => Ok(Kind::Leaf(true)),
            (Handler::Map(m, _), Value::Map(map)) => {
                let mut out = Vec::with_capacity(map.len());
                for (k, val) in map.iter() {
                    let declared = m.find_field(k).is_some();
                    if !declared && m.element_type.is_empty() {
                        return Err(GiveUp);
                    }
                    out.push(Entry {
                        pe: PathElement::Field(k.clone()),
                        tr: field_type(m, k),
                        v: val,
                        declared,
                        list: None,
                    });
                }
                Ok(Kind::Container(out))
            }
            (Handler::Map(..), _) => Ok(Kind::Leaf(false)),
        }
    }

    /// True if the entry is a node of the merged object's field set (named fields promoted).
    fn is_node(&self, e: &Entry) -> Result<bool, GiveUp> {
        if !e.declared || e.v.is_null() || matches!(e.v, Value::Map(m) if m.is_empty()) {
            // List items (with a path element), undeclared keys, nulls and `{}` are members.
            return Ok(true);
        }
        self.has_nodes(e.tr, e.v)
    }

    /// True if the field set of `v` (a declared field's value) is not empty.
    fn has_nodes(&self, tr: &'s TypeRef, v: &Value) -> Result<bool, GiveUp> {
        match self.kind(tr, v)? {
            Kind::Scalar => Ok(true),
            Kind::Leaf(own) => Ok(own),
            Kind::Container(entries) => {
                for e in &entries {
                    if self.is_node(e)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// Pass 3's removals below a node no ancestor of which is in `L` (`l` is `L` below it,
    /// not empty); `keys` are the key fields if the node is a list item.
    fn above(
        &self,
        tr: &'s TypeRef,
        v: &Value,
        l: &Set,
        owners: &[&Set],
        keys: &[crate::value::Str],
    ) -> Result<Set, GiveUp> {
        let entries = match self.kind(tr, v)? {
            // Pass 1 leaves a scalar as it is, and turns any other childless value into null.
            Kind::Scalar => return Ok(Set::new()),
            Kind::Leaf(_) => return Err(GiveUp),
            // Pass 1 turns an empty container into null.
            Kind::Container(entries) if entries.is_empty() => return Err(GiveUp),
            Kind::Container(entries) => entries,
        };
        let (mut members, mut children) = (Vec::new(), Vec::new());
        let mut removed = 0;
        for e in &entries {
            if l.has_named_member(&e.pe, e.declared) {
                // A root: removed by pass 1.
                removed += 1;
                if is_key_field(keys, &e.pe) {
                    return Err(GiveUp);
                }
                if !self.is_node(e)? {
                    continue;
                }
                if !owned(owners, e) {
                    members.push(e.pe.clone());
                    continue;
                }
                let sub = self.kept(e, l.child(&e.pe), &below(owners, &e.pe))?;
                if !sub.is_empty() {
                    children.push((e.pe.clone(), sub));
                }
            } else if let Some(ls) = l.child(&e.pe).filter(|s| !s.is_empty()) {
                if is_key_field(keys, &e.pe) && is_container(e.v) {
                    // Removing inside a key's value would change the item's path element.
                    return Err(GiveUp);
                }
                let sub = self.above(e.tr, e.v, ls, &below(owners, &e.pe), e.keys())?;
                if !sub.is_empty() {
                    children.push((e.pe.clone(), sub));
                }
            }
        }
        if removed > 0 {
            // Pass 1 must leave a node below, or the container would be emptied (null) or, as
            // a declared field, drop out of the field set (and pass 2 remove it).
            let mut left = false;
            for e in entries
                .iter()
                .filter(|e| !l.has_named_member(&e.pe, e.declared))
            {
                if self.is_node(e)? {
                    left = true;
                    break;
                }
            }
            if !left {
                return Err(GiveUp);
            }
        }
        Ok(assemble(members, children))
    }

    /// Pass 3's removals below `at`, a node pass 2 keeps under a root: its children in `A`
    /// are kept, the others removed with their subtrees (`l` is `L` below `at`, if any;
    /// `owners` the owners' sets below it).
    fn kept(&self, at: &Entry, l: Option<&Set>, owners: &[&Set]) -> Result<Set, GiveUp> {
        let Kind::Container(entries) = self.kind(at.tr, at.v)? else {
            return Ok(Set::new());
        };
        let (mut members, mut children) = (Vec::new(), Vec::new());
        let (mut kept, mut removed) = (0, 0);
        let mut keys_removed = Vec::new();
        for e in &entries {
            if !self.is_node(e)? {
                continue;
            }
            let lsub = l.and_then(|l| l.child(&e.pe));
            if owned(owners, e) {
                kept += 1;
                if is_key_field(at.keys(), &e.pe) && is_container(e.v) {
                    // Removing inside a key's value would change the item's path element.
                    return Err(GiveUp);
                }
                let sub = self.kept(e, lsub, &below(owners, &e.pe))?;
                if !sub.is_empty() {
                    children.push((e.pe.clone(), sub));
                }
                continue;
            }
            removed += 1;
            if is_key_field(at.keys(), &e.pe) {
                keys_removed.push(&e.pe);
            }
            let Some(l) = l else { continue };
            if l.has_named_member(&e.pe, e.declared) {
                members.push(e.pe.clone());
            } else if let Some(ls) = lsub {
                let sub = self.highest(e.tr, e.v, ls)?;
                if !sub.is_empty() {
                    children.push((e.pe.clone(), sub));
                }
            }
        }
        if removed > 0 && kept == 0 {
            // Pass 2 would empty `at`, or leave it with no node below.
            return Err(GiveUp);
        }
        if !keys_removed.is_empty() && !self.same_key_without(at, &keys_removed)? {
            // The item would get another path element.
            return Err(GiveUp);
        }
        Ok(assemble(members, children))
    }

    /// True if list item `at` has the same path element without the key fields `removed` (a
    /// key field with a default, such as a port's `protocol`, keys by its default when absent).
    fn same_key_without(&self, at: &Entry, removed: &[&PathElement]) -> Result<bool, GiveUp> {
        let (Some(list), Value::Map(item)) = (at.list, at.v) else {
            return Err(GiveUp);
        };
        let mut keys = Map::with_capacity(list.keys.len());
        for k in &list.keys {
            let gone = removed
                .iter()
                .any(|pe| matches!(pe, PathElement::Field(n) if n == k));
            if let (Some(v), false) = (item.get(k), gone) {
                keys.push_unique(k.clone(), v.clone());
            }
        }
        let pe = list_item_pe(
            self.schema,
            list,
            ElementRelationship::Associative,
            &Value::Map(keys),
        )
        .map_err(|_| GiveUp)?;
        Ok(pe.equals(&at.pe))
    }

    /// The highest members of `l` that are nodes below `v`, a node pass 2 removes.
    fn highest(&self, tr: &'s TypeRef, v: &Value, l: &Set) -> Result<Set, GiveUp> {
        let Kind::Container(entries) = self.kind(tr, v)? else {
            return Ok(Set::new());
        };
        let (mut members, mut children) = (Vec::new(), Vec::new());
        for e in &entries {
            let member = l.has_named_member(&e.pe, e.declared);
            let lsub = l.child(&e.pe);
            if !(member || lsub.is_some()) || !self.is_node(e)? {
                continue;
            }
            if member {
                members.push(e.pe.clone());
            } else if let Some(ls) = lsub {
                let sub = self.highest(e.tr, e.v, ls)?;
                if !sub.is_empty() {
                    children.push((e.pe.clone(), sub));
                }
            }
        }
        Ok(assemble(members, children))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    const MERGED: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:2\n        env:\n        - {name: A, value: '1'}\n        - {name: B, value: '2'}\n        - {name: C, value: '3'}\n";

    /// FieldsV1 of the app container's fields: its image and the env items named.
    fn container(env: &[&str], env_member: bool) -> Set {
        let items: Vec<String> = env
            .iter()
            .map(|n| {
                format!(r#""k:{{\"name\":\"{n}\"}}":{{".":{{}},"f:name":{{}},"f:value":{{}}}}"#)
            })
            .collect();
        let env = match (items.is_empty(), env_member) {
            (true, false) => String::new(),
            (true, true) => r#","f:env":{}"#.to_string(),
            (false, _) => format!(r#","f:env":{{{}}}"#, items.join(",")),
        };
        let text = format!(
            r#"{{"f:spec":{{"f:template":{{"f:spec":{{"f:containers":{{"k:{{\"name\":\"app\"}}":{{".":{{}},"f:name":{{}},"f:image":{{}}{env}}}}}}}}}}}}}"#
        );
        Set::from_fields_v1(text.as_bytes()).unwrap()
    }

    fn run(last: &Set, owners: &[&Set]) -> Result<Set, GiveUp> {
        run_on(MERGED, last, owners)
    }

    fn run_on(merged: &str, last: &Set, owners: &[&Set]) -> Result<Set, GiveUp> {
        let s = crate::schema::builtin::kubernetes(crate::catalog::DEFAULT_KUBERNETES).unwrap();
        let tr = s.type_ref("io.k8s.api.apps.v1.Deployment");
        dangling(s, &tr, &parse_one(merged).unwrap(), last, owners)
    }

    /// A port whose `protocol` (a key field) nobody owns: pass 2 removes it, and the item
    /// keeps its path element only because the key's default is the value it had.
    #[test]
    fn an_unowned_key_field_is_fine_only_when_its_default_keys_the_same() {
        let set = |port: &str| {
            let text = format!(
                r#"{{"f:spec":{{"f:template":{{"f:spec":{{"f:containers":{{"k:{{\"name\":\"app\"}}":{{".":{{}},"f:name":{{}},"f:ports":{{"k:{{\"containerPort\":8080,\"protocol\":\"{port}\"}}":{{".":{{}},"f:containerPort":{{}},"f:name":{{}}}}}}}}}}}}}}}}}}"#
            );
            Set::from_fields_v1(text.as_bytes()).unwrap()
        };
        let merged = |port: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        ports:\n        - {{containerPort: 8080, protocol: {port}, name: http}}\n"
            )
        };
        let tcp = set("TCP");
        let got = run_on(&merged("TCP"), &tcp, &[&tcp]).ok().expect("walked");
        assert!(got.is_empty(), "{}", got.to_fields_v1());
        let udp = set("UDP");
        assert!(run_on(&merged("UDP"), &udp, &[&udp]).is_err());
    }

    /// A dropped env var nobody else owns is removed; one another manager owns stays, and
    /// nothing above them is touched although every ancestor is a named member of the
    /// applier's previous set.
    #[test]
    fn removes_only_what_the_applier_dropped_and_nobody_owns() {
        let last = container(&["A", "B", "C"], false);
        let mine = container(&["A"], false);
        let other = container(&["C"], false);
        let got = run(&last, &[&mine, &other]).ok().expect("walked");
        let want = r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:env":{"k:{\"name\":\"B\"}":{}}}}}}}}"#;
        assert!(
            got.equals(&Set::from_fields_v1(want.as_bytes()).unwrap()),
            "{}",
            got.to_fields_v1()
        );
        // Nobody dropped anything: nothing to remove.
        assert!(run(&last, &[&last]).ok().expect("walked").is_empty());
    }

    /// Where the passes would change the tree's shape (pass 2 emptying a list someone owns
    /// as a whole), the walk gives up rather than guess.
    #[test]
    fn gives_up_where_a_pass_would_empty_a_container() {
        let last = container(&["A", "B", "C"], false);
        let mine = container(&[], false);
        let whole_env = container(&[], true);
        assert!(run(&last, &[&mine, &whole_env]).is_err());
        // Without that owner the env list itself goes, as the applier's named member.
        let got = run(&last, &[&mine]).ok().expect("walked");
        let want = r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:env":{}}}}}}}"#;
        assert!(
            got.equals(&Set::from_fields_v1(want.as_bytes()).unwrap()),
            "{}",
            got.to_fields_v1()
        );
    }
}
