//! `Managers` counted in the cache, without rebuilding objects: what
//! [`crate::ownership::inventory::inventory`] computes from every object listed and its
//! managedFields decoded, here from the cached entries. Same-shaped entries share their
//! interned texts, so each distinct FieldsV1 text is decoded once (its leaf count kept for the
//! call) and each distinct entry head checked once. Kinds watched in full go the listed way,
//! object by object.

use super::fields::Fields;
use super::table::{EntryHead, Table};
use crate::fieldpath::Set;
use crate::live::ObjectRef;
use crate::live::state::Keep;
use crate::managedfields::{Operation, identity};
use crate::ownership::inventory::{Accumulator, Inventory};
use crate::ownership::managed_of;
use crate::value::{Value, json};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

/// Distinct texts (or heads, or label sets) remembered per call. Texts seen once (a Pod's own
/// IP in its status entry) would only fill the table: past this many, the rest are read
/// without being remembered, so the call stays linear and bounded. (Small in tests, so they
/// cross it.)
#[cfg(not(test))]
const REMEMBERED: usize = 65_536;
#[cfg(test)]
const REMEMBERED: usize = 64;

/// Values by key, each with what keeps its key's addresses valid.
type Memo<K, H, V> = HashMap<K, (H, V)>;

/// `f`'s value for `key`, remembered while fewer than [`REMEMBERED`] are (with `hold`, which
/// keeps what `key`'s addresses point at alive for the call).
fn remembered<K: Hash + Eq, H, V: Clone>(
    memo: &mut Memo<K, H, V>,
    key: K,
    hold: impl FnOnce() -> H,
    f: impl FnOnce() -> V,
) -> V {
    if let Some((_, v)) = memo.get(&key) {
        return v.clone();
    }
    let v = f();
    if memo.len() < REMEMBERED {
        memo.insert(key, (hold(), v.clone()));
    }
    v
}

/// The inventory of the objects `keep` selects (every one when `None`).
pub fn inventory(tables: &[Arc<Table>], keep: Option<&Keep>) -> Inventory {
    let mut acc = Accumulator::default();
    let mut unreadable: Vec<(ObjectRef, String)> = Vec::new();
    // Held (with the texts they point at) for the whole call, so an address is never reused.
    let mut heads: Memo<usize, Arc<EntryHead>, Result<Arc<str>, String>> = HashMap::new();
    let mut leaves: Memo<(usize, usize), Fields, Result<usize, String>> = HashMap::new();
    let mut labels: Memo<usize, Arc<str>, Option<Arc<Value>>> = HashMap::new();
    let mut entries: Vec<(Arc<str>, usize, Option<i64>)> = Vec::new();
    for t in tables {
        let data = t.read();
        for e in data.objects.values() {
            let r = || t.object_ref(e);
            if let Some(full) = &e.full {
                let r = r();
                if keep.is_none_or(|k| k(&r, full.get_path(&["metadata", "labels"]))) {
                    match managed_of(full) {
                        Ok(m) => acc.object(m.fields.iter().map(|(key, vs)| {
                            (
                                key.as_str(),
                                vs.set.leaves().size(),
                                m.times.get(key).copied().flatten(),
                            )
                        })),
                        Err(why) => unreadable.push((r, why)),
                    }
                }
                continue;
            }
            if let Some(k) = keep {
                let l = e.labels.as_ref().and_then(|text| {
                    remembered(
                        &mut labels,
                        Arc::as_ptr(text) as *const u8 as usize,
                        || text.clone(),
                        || json::parse_str(text).ok().map(Arc::new),
                    )
                });
                if !k(&r(), l.as_deref()) {
                    continue;
                }
            }
            // As `managedfields::decode` reads the entries: the first bad one makes the object
            // unreadable; a repeated identity keeps the last.
            entries.clear();
            let mut why = None;
            for m in e.managed.iter() {
                let key = remembered(
                    &mut heads,
                    Arc::as_ptr(&m.head) as usize,
                    || m.head.clone(),
                    || head_key(&m.head),
                );
                let key = match key {
                    Ok(k) => k,
                    Err(w) => {
                        why = Some(w);
                        break;
                    }
                };
                let n = remembered(
                    &mut leaves,
                    m.fields.addresses(),
                    || m.fields.clone(),
                    || leaf_count(&m.fields.text()),
                );
                let n = match n {
                    Ok(n) => n,
                    Err(err) => {
                        why = Some(format!(
                            "error decoding versioned set for {key}: error decoding set: {err}"
                        ));
                        break;
                    }
                };
                match entries.iter_mut().find(|(k, _, _)| *k == key) {
                    Some(x) => *x = (key, n, m.time),
                    None => entries.push((key, n, m.time)),
                }
            }
            match why {
                Some(why) => unreadable.push((r(), why)),
                None => acc.object(entries.iter().map(|(k, n, t)| (&**k, *n, *t))),
            }
        }
    }
    // In reference order, as a listing gives them.
    unreadable.sort_by(|a, b| a.0.cmp(&b.0));
    for (r, why) in unreadable {
        acc.unreadable(&r, &why);
    }
    acc.finish()
}

/// An entry head's identity key, or why `managedfields::decode` refuses it.
fn head_key(h: &EntryHead) -> Result<Arc<str>, String> {
    let op = match &*h.operation {
        "Apply" => Operation::Apply,
        "Update" => Operation::Update,
        _ => return Err("operation must be `Apply` or `Update`".into()),
    };
    if h.api_version.is_empty() {
        return Err("apiVersion must not be empty".into());
    }
    Ok(identity(&h.manager, op, &h.api_version, &h.subresource).into())
}

/// The leaf fields of a FieldsV1 text, as `managedfields::decode` reads it.
fn leaf_count(text: &str) -> Result<usize, String> {
    match text {
        "" | "null" => Ok(0),
        raw => Set::from_fields_v1(raw.as_bytes())
            .map(|s| s.leaves().size())
            .map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Interner;
    use crate::cache::table::{Entry, list};
    use crate::ownership::inventory::inventory as listed;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// FieldsV1 texts: shared shapes, per-object keys, and one `managedfields::decode` refuses.
    fn fields(rng: &mut StdRng, i: usize) -> String {
        match rng.gen_range(0..8) {
            0 => r#"{"f:spec":{"f:replicas":{}}}"#.into(),
            1 => r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:template":{}}}"#
                .into(),
            2 | 3 => format!(
                r#"{{"f:status":{{"f:podIPs":{{".":{{}},"k:{{\"ip\":\"10.0.{}.{}\"}}":{{".":{{}},"f:ip":{{}}}}}}}}}}"#,
                i / 250,
                i % 250
            ),
            4 => r#"{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}"#
                .into(),
            5 => "{}".into(),
            6 if rng.gen_range(0..6) == 0 => r#"{"zz:not-a-path":{}}"#.into(),
            _ => r#"{"f:data":{"f:a":{},"f:b":{}}}"#.into(),
        }
    }

    fn object(rng: &mut StdRng, i: usize) -> String {
        let mut entries = Vec::new();
        for _ in 0..rng.gen_range(0..5) {
            let manager = [
                "helm",
                "kubectl-edit",
                "kube-controller-manager",
                "kubelet",
                "hpa",
            ][rng.gen_range(0..5)];
            let operation = match rng.gen_range(0..40) {
                0 => "Patch",
                1..=15 => "Apply",
                _ => "Update",
            };
            let api_version = if rng.gen_range(0..40) == 0 { "" } else { "v1" };
            let time = if rng.gen_bool(0.8) {
                format!(
                    r#","time":"2026-11-{:02}T10:00:00Z""#,
                    1 + rng.gen_range(0..28)
                )
            } else {
                String::new()
            };
            let sub = if rng.gen_range(0..5) == 0 {
                r#","subresource":"status""#
            } else {
                ""
            };
            entries.push(format!(
                r#"{{"manager":"{manager}","operation":"{operation}","apiVersion":"{api_version}"{time}{sub},"fieldsType":"FieldsV1","fieldsV1":{}}}"#,
                fields(rng, i)
            ));
        }
        let labels = match rng.gen_range(0..3) {
            0 => String::new(),
            1 => r#","labels":{"app":"a"}"#.into(),
            _ => r#","labels":{"app":"b","tier":"web"}"#.into(),
        };
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"o{i}","namespace":"ns{}","resourceVersion":"{i}"{labels},"managedFields":[{}]}}}}"#,
            i % 3,
            entries.join(",")
        )
    }

    fn tables(n: usize) -> Vec<Arc<Table>> {
        let mut rng = StdRng::seed_from_u64(19);
        let interner = Interner::default();
        let (meta, full) = (
            Table::new("v1", "ConfigMap", false),
            Table::new("example.com/v1", "Widget", true),
        );
        for i in 0..n {
            let text = object(&mut rng, i);
            if i % 10 == 0 {
                let v = json::parse_str(&text).unwrap();
                full.write()
                    .upsert(Entry::decode(v, true, &interner).unwrap());
            } else {
                meta.write()
                    .upsert(Entry::decode_raw(&text, &interner).unwrap());
            }
        }
        vec![Arc::new(meta), Arc::new(full)]
    }

    fn as_json(inv: &Inventory) -> serde_json::Value {
        serde_json::to_value(inv).unwrap()
    }

    #[test]
    fn counted_in_the_cache_it_is_the_inventory_of_the_listed_objects() {
        let tables = tables(2_000);
        let all = list(&tables, None);
        let want = listed(all.iter().map(|(r, o)| (r, &**o)));
        let have = inventory(&tables, None);
        // The cases the comparison must cover: refused entries, repeated identities, several
        // managers, full objects.
        assert!(want.unreadable.len() > 20, "{:?}", want.unreadable.len());
        assert!(want.managers.len() >= 5);
        assert_eq!(want.objects, 2_000);
        assert_eq!(as_json(&have), as_json(&want));
    }

    #[test]
    fn a_selection_counts_only_what_it_keeps() {
        let tables = tables(600);
        let keep = |r: &ObjectRef, labels: Option<&Value>| {
            r.namespace != "ns1" && labels.and_then(|l| l.str_at(&["app"])) == Some("b")
        };
        let all = list(&tables, None);
        let want = listed(
            all.iter()
                .filter(|(r, o)| keep(r, o.get_path(&["metadata", "labels"])))
                .map(|(r, o)| (r, &**o)),
        );
        let have = inventory(&tables, Some(&(Box::new(keep) as Keep)));
        assert!(want.objects > 50 && want.objects < 300, "{}", want.objects);
        assert_eq!(as_json(&have), as_json(&want));
    }
}
