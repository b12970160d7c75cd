//! Strategic merge patch (Kubernetes' `application/strategic-merge-patch+json`): creating
//! two-way and three-way patches the way `kubectl apply` and Helm 3 do, and applying them the way
//! kube-apiserver does. Lists whose field says `patchStrategy: merge` are merged by their merge
//! key (or by value, for scalars); directives: `$patch: replace|delete|merge`, `$retainKeys`,
//! `$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`.
//!
//! Behaviour is pinned by upstream's own test tables (`tests/offline/patch_cases.rs`); where the
//! upstream algorithm depends on Go details (`%v` ordering, `sort.SliceStable` with a
//! non-strict comparator, in-place de-duplication), `gosort` reproduces them.

use super::PatchError;
use super::gosort::{dedup_scalars, iface_eq, slice_stable, sort_scalars, v_text};
use super::meta::Meta;
use crate::value::{Map, Value};
use std::mem::discriminant;

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ORDER_PREFIX: &str = "$setElementOrder";

#[derive(Clone, Copy, Default)]
struct DiffOptions {
    set_element_order: bool,
    ignore_changes_and_additions: bool,
    ignore_deletions: bool,
    build_retain_keys: bool,
}

#[derive(Clone, Copy, Default)]
struct MergeOptions {
    merge_parallel_list: bool,
    ignore_unmatched_nulls: bool,
}

fn bad(msg: impl Into<String>) -> PatchError {
    PatchError::Invalid(msg.into())
}

fn no_merge_key(m: &Map, key: &str) -> PatchError {
    bad(format!(
        "map: {} does not contain declared merge key: {key}",
        v_text(&Value::Map(m.clone()))
    ))
}

fn bad_arg(v: &Value) -> PatchError {
    bad(format!(
        "expected a map, but got {} ({})",
        v.type_name(),
        v_text(v)
    ))
}

fn same_type(a: &Value, b: &Value) -> bool {
    discriminant(a) == discriminant(b)
}

/// Creates the patch that turns `original` into `modified` (`CreateTwoWayMergePatch`).
pub fn two_way(original: &Map, modified: &Map, meta: &Meta) -> Result<Map, PatchError> {
    let opts = DiffOptions {
        set_element_order: true,
        ..Default::default()
    };
    diff_maps(original, modified, meta, opts)
}

/// Creates the three-way patch `kubectl apply` sends (`CreateThreeWayMergePatch`): changes from
/// `current` (live) to `modified` (the new manifest) without deletions, plus deletions from
/// `original` (last applied) to `modified`. Without `overwrite`, a patch that changes something
/// changed differently since `original` is refused with [`PatchError::Conflict`].
pub fn three_way(
    original: &Map,
    modified: &Map,
    current: &Map,
    meta: &Meta,
    overwrite: bool,
) -> Result<Map, PatchError> {
    let delta = diff_maps(
        current,
        modified,
        meta,
        DiffOptions {
            ignore_deletions: true,
            set_element_order: true,
            ..Default::default()
        },
    )?;
    let deletions = diff_maps(
        original,
        modified,
        meta,
        DiffOptions {
            set_element_order: true,
            ignore_changes_and_additions: true,
            ..Default::default()
        },
    )?;
    let patch = merge_map(deletions, delta, meta, MergeOptions::default())?;
    if !overwrite {
        let changed = diff_maps(original, current, meta, DiffOptions::default())?;
        if maps_have_conflicts(&patch, &changed, meta)? {
            return Err(PatchError::Conflict(conflicting_keys(&patch, &changed)));
        }
    }
    Ok(patch)
}

/// Top-level keys both the patch and the interim change touch (for the conflict message; no
/// values, which may be secret).
fn conflicting_keys(patch: &Map, changed: &Map) -> String {
    let mut keys: Vec<&str> = patch
        .keys()
        .filter(|k| changed.contains_key(k))
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    format!(
        "the patch changes fields that were changed since the last apply: {}",
        keys.join(", ")
    )
}

/// Applies a strategic merge patch (`StrategicMergePatch`, what the apiserver does).
pub fn apply(original: Map, patch: Map, meta: &Meta) -> Result<Map, PatchError> {
    merge_map(
        original,
        patch,
        meta,
        MergeOptions {
            merge_parallel_list: true,
            ignore_unmatched_nulls: true,
        },
    )
}

fn diff_maps(
    original: &Map,
    modified: &Map,
    meta: &Meta,
    opts: DiffOptions,
) -> Result<Map, PatchError> {
    let mut patch = Map::new();
    let mut retain_keys = Vec::new();
    for (key, mv) in modified.iter() {
        if opts.build_retain_keys && !mv.is_null() {
            retain_keys.push(Value::String(key.clone()));
        }
        let Some(ov) = original.get(key) else {
            if !opts.ignore_changes_and_additions {
                patch.insert(key.clone(), mv.clone());
            }
            continue;
        };
        if key == DIRECTIVE {
            let (Some(o), Some(m)) = (ov.as_str(), mv.as_str()) else {
                return Err(bad(format!("invalid value for special key: {DIRECTIVE}")));
            };
            if o != m {
                patch.insert(key.clone(), mv.clone());
            }
            continue;
        }
        if !same_type(ov, mv) {
            if !opts.ignore_changes_and_additions {
                patch.insert(key.clone(), mv.clone());
            }
            continue;
        }
        match (ov, mv) {
            (Value::Map(o), Value::Map(m)) => handle_map_diff(key, o, m, &mut patch, meta, opts)?,
            (Value::List(o), Value::List(m)) => {
                handle_slice_diff(key, o, m, &mut patch, meta, opts)?
            }
            _ => replace_if_not_equal(key, ov, mv, &mut patch, opts),
        }
    }
    if !opts.ignore_deletions {
        for key in original.keys() {
            if !modified.contains_key(key) {
                patch.insert(key.clone(), Value::Null);
            }
        }
    }
    let additional = original
        .iter()
        .any(|(k, v)| !v.is_null() && !modified.contains_key(k));
    if !retain_keys.is_empty() && (!patch.is_empty() || additional) {
        sort_scalars(&mut retain_keys);
        patch.insert(RETAIN_KEYS, Value::List(retain_keys));
    }
    Ok(patch)
}

fn replace_if_not_equal(key: &str, o: &Value, m: &Value, patch: &mut Map, opts: DiffOptions) {
    if !opts.ignore_changes_and_additions && !o.strict_eq(m) {
        patch.insert(key, m.clone());
    }
}

fn handle_map_diff(
    key: &str,
    o: &Map,
    m: &Map,
    patch: &mut Map,
    meta: &Meta,
    mut opts: DiffOptions,
) -> Result<(), PatchError> {
    let (sub, fm) = match meta.lookup_struct(key) {
        Ok(x) => x,
        Err(_) if Value::Map(o.clone()).strict_eq(&Value::Map(m.clone())) => return Ok(()),
        Err(e) => return Err(e),
    };
    let (retain, strategy) = fm.strategy()?;
    opts.build_retain_keys = retain;
    if strategy == REPLACE {
        if !opts.ignore_changes_and_additions {
            patch.insert(key, Value::Map(m.clone()));
        }
        return Ok(());
    }
    let pv = diff_maps(o, m, &sub, opts)?;
    if !pv.is_empty() {
        patch.insert(key, Value::Map(pv));
    }
    Ok(())
}

fn handle_slice_diff(
    key: &str,
    o: &[Value],
    m: &[Value],
    patch: &mut Map,
    meta: &Meta,
    mut opts: DiffOptions,
) -> Result<(), PatchError> {
    let (sub, fm) = match meta.lookup_slice(key) {
        Ok(x) => x,
        Err(_) if lists_equal(o, m) => return Ok(()),
        Err(e) => return Err(e),
    };
    let (retain, strategy) = fm.strategy()?;
    if strategy != MERGE {
        replace_if_not_equal(
            key,
            &Value::List(o.to_vec()),
            &Value::List(m.to_vec()),
            patch,
            opts,
        );
        return Ok(());
    }
    opts.build_retain_keys = retain;
    let (add, delete, order) = diff_lists(o, m, &sub, fm.merge_key(), opts)?;
    if !add.is_empty() {
        patch.insert(key, Value::List(add));
    }
    if !delete.is_empty() {
        patch.insert(
            format!("{DELETE_PRIMITIVE_PREFIX}/{key}"),
            Value::List(delete),
        );
    }
    if !order.is_empty() {
        patch.insert(format!("{SET_ORDER_PREFIX}/{key}"), Value::List(order));
    }
    Ok(())
}

fn lists_equal(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.strict_eq(y))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Map,
    Scalar,
}

/// The common element type of the lists (upstream's `sliceElementType`).
fn element_kind(lists: &[&[Value]]) -> Result<Kind, PatchError> {
    let mut prev: Option<&Value> = None;
    for l in lists {
        for v in l.iter() {
            match prev {
                None => {
                    if matches!(v, Value::List(_)) {
                        return Err(bad("lists of lists are not supported"));
                    }
                    prev = Some(v);
                }
                Some(p) if !same_type(p, v) => {
                    return Err(bad("list element types are not identical"));
                }
                Some(_) => {}
            }
        }
    }
    match prev {
        None => Err(bad("no elements in any of the given slices")),
        Some(Value::Map(_)) => Ok(Kind::Map),
        Some(_) => Ok(Kind::Scalar),
    }
}

type Lists = (Vec<Value>, Vec<Value>, Vec<Value>);

fn diff_lists(
    original: &[Value],
    modified: &[Value],
    meta: &Meta,
    merge_key: &str,
    opts: DiffOptions,
) -> Result<Lists, PatchError> {
    if original.is_empty() {
        if modified.is_empty() || opts.ignore_changes_and_additions {
            return Ok(Default::default());
        }
        return Ok((modified.to_vec(), vec![], vec![]));
    }
    let kind = element_kind(&[original, modified])?;
    let mut order = Vec::new();
    match kind {
        Kind::Map => {
            let (patch, deletions) = diff_lists_of_maps(original, modified, meta, merge_key, opts)?;
            let mut patch = normalize_slice_order(patch, modified, merge_key, kind)?;
            let order_same = is_order_same(original, modified, merge_key)?;
            patch.extend(deletions);
            if opts.set_element_order
                && ((!opts.ignore_changes_and_additions && (!patch.is_empty() || !order_same))
                    || (!opts.ignore_deletions && !patch.is_empty()))
            {
                for v in modified {
                    let mut m = Map::new();
                    m.insert(
                        merge_key,
                        v.as_map()
                            .and_then(|m| m.get(merge_key))
                            .cloned()
                            .unwrap_or(Value::Null),
                    );
                    order.push(Value::Map(m));
                }
            }
            Ok((patch, vec![], order))
        }
        Kind::Scalar => {
            let (add, deletions) = diff_lists_of_scalars(original, modified, opts);
            let add = normalize_slice_order(add, modified, merge_key, kind)?;
            if opts.set_element_order
                && ((!opts.ignore_deletions && !deletions.is_empty())
                    || (!opts.ignore_changes_and_additions && !lists_equal(original, modified)))
            {
                order = modified.to_vec();
            }
            Ok((add, deletions, order))
        }
    }
}

fn is_order_same(original: &[Value], modified: &[Value], key: &str) -> Result<bool, PatchError> {
    if original.len() != modified.len() {
        return Ok(false);
    }
    for (o, m) in original.iter().zip(modified) {
        if !merge_key_value_equal(o, m, key)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn merge_key_value_equal(left: &Value, right: &Value, key: &str) -> Result<bool, PatchError> {
    if key.is_empty() {
        return Ok(iface_eq(left, right));
    }
    let l = left.as_map().ok_or_else(|| bad_arg(left))?;
    let r = right.as_map().ok_or_else(|| bad_arg(right))?;
    let lv = l.get(key).ok_or_else(|| no_merge_key(l, key))?;
    let rv = r.get(key).ok_or_else(|| no_merge_key(r, key))?;
    Ok(iface_eq(lv, rv))
}

fn diff_lists_of_scalars(
    original: &[Value],
    modified: &[Value],
    opts: DiffOptions,
) -> (Vec<Value>, Vec<Value>) {
    let mut o = original.to_vec();
    let mut m = modified.to_vec();
    sort_scalars(&mut o);
    sort_scalars(&mut m);
    let (os, ms): (Vec<String>, Vec<String>) = (
        o.iter().map(v_text).collect(),
        m.iter().map(v_text).collect(),
    );
    let (mut oi, mut mi) = (0, 0);
    let mut add = Vec::new();
    let mut del = Vec::new();
    loop {
        let (oin, min) = (oi < o.len(), mi < m.len());
        match (oin, min) {
            (false, false) => break,
            (true, true) if os[oi] == ms[mi] => {
                oi += 1;
                mi += 1;
            }
            (false, true) => {
                if !opts.ignore_changes_and_additions {
                    add.push(m[mi].clone());
                }
                mi += 1;
            }
            (true, true) if os[oi] > ms[mi] => {
                if !opts.ignore_changes_and_additions {
                    add.push(m[mi].clone());
                }
                mi += 1;
            }
            _ => {
                if !opts.ignore_deletions {
                    del.push(o[oi].clone());
                }
                oi += 1;
            }
        }
    }
    (add, dedup_scalars(del))
}

fn map_and_key<'v>(v: &'v Value, key: &str) -> Result<(&'v Map, &'v Value), PatchError> {
    let m = v.as_map().ok_or_else(|| bad_arg(v))?;
    let k = m.get(key).ok_or_else(|| no_merge_key(m, key))?;
    Ok((m, k))
}

fn diff_lists_of_maps(
    original: &[Value],
    modified: &[Value],
    meta: &Meta,
    merge_key: &str,
    opts: DiffOptions,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let o = sort_merge_list(original.to_vec(), merge_key);
    let m = sort_merge_list(modified.to_vec(), merge_key);
    let mut patch = Vec::new();
    let mut deletions = Vec::new();
    let (mut oi, mut mi) = (0, 0);
    loop {
        let (oin, min) = (oi < o.len(), mi < m.len());
        if !oin && !min {
            break;
        }
        let oe = if oin {
            Some(map_and_key(&o[oi], merge_key)?)
        } else {
            None
        };
        let me = if min {
            Some(map_and_key(&m[mi], merge_key)?)
        } else {
            None
        };
        let os = oe.map(|(_, k)| v_text(k));
        let ms = me.map(|(_, k)| v_text(k));
        match (oe, me) {
            (Some((om, _)), Some((mm, mk))) if os == ms => {
                let mut pv = diff_maps(om, mm, meta, opts)?;
                if !pv.is_empty() {
                    pv.insert(merge_key, mk.clone());
                    patch.push(Value::Map(pv));
                }
                oi += 1;
                mi += 1;
            }
            (None, Some((mm, _))) => {
                if !opts.ignore_changes_and_additions {
                    patch.push(Value::Map(mm.clone()));
                }
                mi += 1;
            }
            (Some(_), Some((mm, _))) if os > ms => {
                if !opts.ignore_changes_and_additions {
                    patch.push(Value::Map(mm.clone()));
                }
                mi += 1;
            }
            (Some((_, ok)), _) => {
                if !opts.ignore_deletions {
                    let mut d = Map::new();
                    d.insert(merge_key, ok.clone());
                    d.insert(DIRECTIVE, Value::from(DELETE));
                    deletions.push(Value::Map(d));
                }
                oi += 1;
            }
            (None, None) => break,
        }
    }
    Ok((patch, deletions))
}

/// Sorts a merge list for diffing: scalars de-duplicated and sorted, maps sorted by the `%v` text
/// of their merge key (upstream's `sortMergeListsByNameArray` without recursion).
fn sort_merge_list(mut list: Vec<Value>, merge_key: &str) -> Vec<Value> {
    if list.is_empty() {
        return list;
    }
    if !matches!(list[0], Value::Map(_)) {
        let mut l = dedup_scalars(list);
        sort_scalars(&mut l);
        return l;
    }
    list.sort_by_cached_key(|v| {
        v_text(
            v.as_map()
                .and_then(|m| m.get(merge_key))
                .unwrap_or(&Value::Null),
        )
    });
    list
}

fn index_in(order: &[Value], v: &Value, key: &str, kind: Kind) -> Option<usize> {
    let get = |item: &'_ Value| -> Option<Value> {
        match kind {
            Kind::Map => Some(
                item.as_map()
                    .and_then(|m| m.get(key))
                    .cloned()
                    .unwrap_or(Value::Null),
            ),
            Kind::Scalar => Some(item.clone()),
        }
    };
    let want = get(v)?;
    order
        .iter()
        .position(|o| get(o).is_some_and(|x| iface_eq(&x, &want)))
}

fn extract_to_delete(list: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut keep = Vec::new();
    let mut delete = Vec::new();
    for v in list {
        let m = v.as_map().ok_or_else(|| bad_arg(&v))?;
        if m.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE) {
            delete.push(v);
        } else {
            keep.push(v);
        }
    }
    Ok((keep, delete))
}

fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    key: &str,
    kind: Kind,
) -> Result<Vec<Value>, PatchError> {
    let (mut to_sort, to_delete) = if kind == Kind::Map {
        for v in to_sort.iter().chain(order) {
            map_and_key(v, key)?;
        }
        extract_to_delete(to_sort)?
    } else {
        (to_sort, vec![])
    };
    slice_stable(&mut to_sort, &mut |a, b| match (
        index_in(order, a, key, kind),
        index_in(order, b, key, kind),
    ) {
        (Some(i), Some(j)) => i < j,
        _ => true,
    });
    to_sort.extend(to_delete);
    Ok(to_sort)
}

fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: &str,
    kind: Kind,
) -> Result<Vec<Value>, PatchError> {
    let patch = normalize_slice_order(patch, patch_order, key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, key, kind)?;
    Ok(merge_sorted(server_only, patch, server_order, key, kind))
}

/// Interleaves server-only items (`left`) into the patch items (`right`) by their order in the
/// live list (upstream's `mergeSortedSlice`).
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    key: &str,
    kind: Kind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        match (l.peek(), r.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(l.next()),
            (None, Some(_)) => out.extend(r.next()),
            (Some(a), Some(b)) => {
                let li = index_in(server_order, a, key, kind);
                let ri = index_in(server_order, b, key, kind);
                if matches!((li, ri), (Some(i), Some(j)) if i < j) {
                    out.extend(l.next());
                } else {
                    out.extend(r.next());
                }
            }
        }
    }
    out
}

fn extract_key<'k>(key: &'k str, prefix: &str) -> Result<&'k str, PatchError> {
    match key.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest),
        _ if prefix == DELETE_PRIMITIVE_PREFIX => {
            Err(bad("invalid patch format for delete from primitive list"))
        }
        _ => Err(bad("invalid patch format of setElementOrder list")),
    }
}

fn merge_map(
    mut original: Map,
    mut patch: Map,
    meta: &Meta,
    opts: MergeOptions,
) -> Result<Map, PatchError> {
    if let Some(d) = patch.get(DIRECTIVE) {
        return match d.as_str() {
            Some(REPLACE) => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some(DELETE) => Ok(Map::new()),
            _ => Err(bad(format!(
                "unknown patch type: {} in map: {}",
                v_text(d),
                v_text(&Value::Map(patch.clone()))
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch, opts)?;
    merge_set_element_order(&mut original, &mut patch, meta, opts)?;

    for (k, pv) in patch.into_entries() {
        let (key, is_delete_list) = if k.starts_with(DELETE_PRIMITIVE_PREFIX) {
            if !opts.merge_parallel_list {
                original.insert(k, pv);
                continue;
            }
            (extract_key(&k, DELETE_PRIMITIVE_PREFIX)?.to_string(), true)
        } else {
            (k.to_string(), false)
        };
        let mut pv = pv;
        if pv.is_null() {
            original.remove(&key);
            if opts.ignore_unmatched_nulls {
                continue;
            }
        }
        let take_patch = match original.get(&key) {
            None => true,
            Some(ov) => !same_type(ov, &pv),
        };
        if take_patch {
            if !is_delete_list {
                if opts.ignore_unmatched_nulls {
                    discard_nulls(&mut pv);
                }
                match remove_directives(pv) {
                    Some(v) => {
                        original.insert(key, v);
                    }
                    None => {
                        original.remove(&key);
                    }
                }
            }
            continue;
        }
        let slot = original
            .get_mut(&key)
            .map(std::mem::take)
            .unwrap_or(Value::Null);
        let merged = match (slot, pv) {
            (Value::Map(o), Value::Map(p)) => {
                let (sub, fm) = meta.lookup_struct(&key)?;
                let (_, strategy) = fm.strategy()?;
                if strategy == REPLACE {
                    Some(Value::Map(p))
                } else {
                    Some(Value::Map(merge_map(o, p, &sub, opts)?))
                }
            }
            (Value::List(o), Value::List(p)) => {
                let (sub, fm) = meta.lookup_slice(&key)?;
                let (_, strategy) = fm.strategy()?;
                Some(Value::List(merge_slice_handler(
                    o,
                    p,
                    &sub,
                    strategy,
                    fm.merge_key(),
                    is_delete_list,
                    opts,
                )?))
            }
            (_, p) => remove_directives(p),
        };
        match merged {
            Some(v) => {
                original.insert(key, v);
            }
            None => {
                original.remove(&key);
            }
        }
    }
    Ok(original)
}

fn discard_nulls(v: &mut Value) {
    match v {
        Value::Map(m) => {
            m.entries_mut().retain(|(_, v)| !v.is_null());
            for (_, v) in m.entries_mut() {
                discard_nulls(v);
            }
        }
        Value::List(l) => l.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Drops maps that carry a `$patch` directive (None: the value itself was one).
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Map(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m.into_entries() {
                if let Some(v) = remove_directives(v) {
                    out.push_unique(k, v);
                }
            }
            Some(Value::Map(out))
        }
        Value::List(l) => Some(Value::List(
            l.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

fn apply_retain_keys(
    original: &mut Map,
    patch: &mut Map,
    opts: MergeOptions,
) -> Result<(), PatchError> {
    let Some(rk) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    if !opts.merge_parallel_list {
        match original.get(RETAIN_KEYS) {
            Some(o) if !o.strict_eq(&rk) => {
                return Err(bad(
                    "the $retainKeys lists of the two patches differ: this may happen when calculating the 3-way diff patch",
                ));
            }
            Some(_) => {}
            None => {
                original.insert(RETAIN_KEYS, rk);
            }
        }
        return Ok(());
    }
    let bad_format = || bad("invalid patch format of retainKeys");
    let list = rk.as_list().ok_or_else(bad_format)?;
    let keep: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_PRIMITIVE_PREFIX) || k.starts_with(SET_ORDER_PREFIX)
        {
            continue;
        }
        if !keep.contains(&k.as_str()) {
            return Err(bad_format());
        }
    }
    original
        .entries_mut()
        .retain(|(k, _)| keep.contains(&k.as_str()));
    Ok(())
}

fn as_list_or_err(v: &Value) -> Result<&[Value], PatchError> {
    v.as_list().ok_or_else(|| {
        bad(format!(
            "expected a list, but got {} ({})",
            v.type_name(),
            v_text(v)
        ))
    })
}

/// Handles `$setElementOrder/<field>` and the list it orders.
fn merge_set_element_order(
    original: &mut Map,
    patch: &mut Map,
    meta: &Meta,
    opts: MergeOptions,
) -> Result<(), PatchError> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER_PREFIX))
        .map(|k| k.to_string())
        .collect();
    for key in keys {
        let order = patch.remove(&key).unwrap_or(Value::Null);
        if !opts.merge_parallel_list {
            match original.get(&key) {
                Some(o) if !o.strict_eq(&order) => {
                    return Err(bad("invalid patch format of setElementOrder list"));
                }
                Some(_) => {}
                None => {
                    original.insert(key.as_str(), order.clone());
                }
            }
        }
        let order = as_list_or_err(&order)?.to_vec();
        let field = extract_key(&key, SET_ORDER_PREFIX)?.to_string();
        let original_list = match original.get(&field) {
            Some(v) => Some(as_list_or_err(v)?.to_vec()),
            None => None,
        };
        let patch_list = match patch.get(&field) {
            Some(v) => Some(as_list_or_err(v)?.to_vec()),
            None => None,
        };
        let (sub, fm) = meta.lookup_slice(&field)?;
        let (_, strategy) = fm.strategy()?;
        let merge_key = fm.merge_key();
        validate_set_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;
        if original_list.is_none() && patch_list.is_none() {
            continue;
        }
        let pl = patch_list.clone().unwrap_or_default();
        let kind = element_kind(&[original_list.as_deref().unwrap_or(&[]), &pl]);
        // The live order as upstream sees it afterwards: merging edits the list's backing array
        // in place (see `aliased_after_merge`).
        let ol = match (&original_list, kind.as_ref()) {
            (Some(o), Ok(k)) if strategy == MERGE => aliased_after_merge(o, &pl, merge_key, *k),
            (Some(o), _) => o.clone(),
            (None, _) => vec![],
        };
        let merged = match (&original_list, &patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match remove_directives(Value::List(p.clone())) {
                Some(Value::List(l)) => l,
                _ => continue,
            },
            (Some(o), Some(p)) => {
                merge_slice_handler(o.clone(), p.clone(), &sub, strategy, merge_key, false, opts)?
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = partition(merged, &order, merge_key)?;
        let kind = kind?;
        let both = normalize_element_order(patch_items, server_only, &order, &ol, merge_key, kind)?;
        original.insert(field.as_str(), Value::List(both));
        patch.remove(&field);
    }
    Ok(())
}

/// Capacity of a slice of `n` elements decoded from JSON by Go (grown by `append` one element
/// at a time: powers of two).
fn decoded_capacity(n: usize) -> usize {
    if n == 0 { 0 } else { n.next_power_of_two() }
}

/// What the live list's original slice header shows after upstream's `mergeSlice` edited its
/// backing array in place: deletions shift later elements left (leaving the last one behind),
/// appends write into spare capacity, scalar de-duplication moves elements. Upstream orders the
/// result of a `$setElementOrder` merge by this view, so reproducing it reproduces the order.
fn aliased_after_merge(original: &[Value], patch: &[Value], key: &str, kind: Kind) -> Vec<Value> {
    let n = original.len();
    let cap = decoded_capacity(n);
    let mut backing: Vec<Value> = original.to_vec();
    backing.resize(cap, Value::Null);
    match kind {
        Kind::Map => {
            let mut len = n;
            let key_of = |v: &Value| v.as_map().and_then(|m| m.get(key)).cloned();
            for p in patch {
                let Some(m) = p.as_map() else { continue };
                if m.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE) {
                    let Some(kv) = m.get(key) else { continue };
                    while let Some(i) = backing[..len]
                        .iter()
                        .position(|v| key_of(v).is_some_and(|x| iface_eq(&x, kv)))
                    {
                        for j in i..len - 1 {
                            backing[j] = backing[j + 1].clone();
                        }
                        len -= 1;
                    }
                } else if m.get(DIRECTIVE).and_then(Value::as_str) == Some(REPLACE) {
                    backing.truncate(n);
                    return backing;
                }
            }
            for p in patch {
                let Some(m) = p.as_map() else { continue };
                if m.contains_key(DIRECTIVE) {
                    continue;
                }
                let Some(kv) = m.get(key) else { continue };
                let found = backing[..len]
                    .iter()
                    .any(|v| key_of(v).is_some_and(|x| iface_eq(&x, kv)));
                if !found {
                    if len < cap {
                        backing[len] = p.clone();
                        len += 1;
                    } else {
                        break;
                    }
                }
            }
        }
        Kind::Scalar => {
            if n + patch.len() <= cap {
                for (i, p) in patch.iter().enumerate() {
                    backing[n + i] = p.clone();
                }
                backing.truncate(n + patch.len());
                let deduped = dedup_scalars(backing);
                let mut view: Vec<Value> = deduped.into_iter().take(n).collect();
                view.resize(n, Value::Null);
                return view;
            }
        }
    }
    backing.truncate(n);
    backing
}

fn validate_set_order(patch: &[Value], order: &[Value], key: &str) -> Result<(), PatchError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let non_delete = if key.is_empty() {
        patch.to_vec()
    } else {
        extract_to_delete(patch.to_vec())?.0
    };
    let (mut pi, mut si) = (0, 0);
    while pi < non_delete.len() && si < order.len() {
        if non_delete[pi]
            .as_map()
            .is_some_and(|m| m.contains_key(DIRECTIVE))
        {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(&non_delete[pi], &order[si], key)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < non_delete.len() && si >= order.len() {
        return Err(bad(format!(
            "the order in patch list:\n{}\n doesn't match {SET_ORDER_PREFIX} list:\n{}",
            v_text(&Value::List(patch.to_vec())),
            v_text(&Value::List(order.to_vec()))
        )));
    }
    Ok(())
}

/// Splits `list` into items present in `by` and the rest (server-only), keeping order.
fn partition(
    list: Vec<Value>,
    by: &[Value],
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut present = Vec::new();
    let mut server_only = Vec::new();
    for v in list {
        let found = if key.is_empty() {
            by.iter().any(|b| iface_eq(b, &v))
        } else {
            let (_, kv) = map_and_key(&v, key)?;
            find_by_key(by, key, kv)?.is_some()
        };
        if found {
            present.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((present, server_only))
}

fn find_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>, PatchError> {
    for (i, v) in list.iter().enumerate() {
        let m = v
            .as_map()
            .ok_or_else(|| bad(format!("value for key {i} is not a map.")))?;
        if m.get(key).is_some_and(|x| iface_eq(x, value)) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: &Meta,
    strategy: &str,
    merge_key: &str,
    is_delete_list: bool,
    opts: MergeOptions,
) -> Result<Vec<Value>, PatchError> {
    if strategy == MERGE || (is_delete_list && opts.merge_parallel_list) {
        merge_slice(original, patch, meta, merge_key, opts, is_delete_list)
    } else {
        Ok(patch)
    }
}

fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: &Meta,
    merge_key: &str,
    opts: MergeOptions,
    is_delete_list: bool,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[&original, &patch])?;
    let (original, patch, merged) = if kind == Kind::Scalar {
        if opts.merge_parallel_list && is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.iter().any(|d| iface_eq(d, v)))
                .collect());
        }
        let mut both = original.clone();
        both.extend(patch.iter().cloned());
        (original, patch, dedup_scalars(both))
    } else {
        if merge_key.is_empty() {
            return Err(bad("cannot merge lists without merge key"));
        }
        let (original, patch) = merge_special_elements(original, patch, merge_key)?;
        let merged = merge_plain_elements(original.clone(), &patch, merge_key, meta, opts)?;
        (original, patch, merged)
    };
    let (patch_items, server_only) = partition(merged, &patch, merge_key)?;
    normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)
}

/// Applies `$patch: delete|replace` elements of a merge list.
fn merge_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut plain = Vec::new();
    let mut replace = false;
    for v in patch {
        let Some(m) = v.as_map() else {
            return Err(bad_arg(&v));
        };
        match m.get(DIRECTIVE) {
            None => plain.push(v),
            Some(d) => match d.as_str() {
                Some(DELETE) => {
                    let kv = m.get(key).ok_or_else(|| no_merge_key(m, key))?.clone();
                    while let Some(i) = find_by_key(&original, key, &kv)? {
                        original.remove(i);
                    }
                }
                Some(REPLACE) => replace = true,
                Some(MERGE) => {
                    return Err(bad("merging lists cannot yet be specified in the patch"));
                }
                _ => {
                    return Err(bad(format!(
                        "unknown patch type: {} in map: {}",
                        v_text(d),
                        v_text(&v)
                    )));
                }
            },
        }
    }
    if replace {
        return Ok((plain, vec![]));
    }
    Ok((original, plain))
}

fn merge_plain_elements(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
    meta: &Meta,
    opts: MergeOptions,
) -> Result<Vec<Value>, PatchError> {
    for v in patch {
        let (pm, kv) = map_and_key(v, key)?;
        match find_by_key(&original, key, kv)? {
            Some(i) => {
                let om = match std::mem::replace(&mut original[i], Value::Null) {
                    Value::Map(m) => m,
                    _ => Map::new(),
                };
                original[i] = Value::Map(merge_map(om, pm.clone(), meta, opts)?);
            }
            None => original.push(v.clone()),
        }
    }
    Ok(original)
}

/// True if the two patches change the same field differently (`MergingMapsHaveConflicts`).
fn maps_have_conflicts(left: &Map, right: &Map, meta: &Meta) -> Result<bool, PatchError> {
    for (key, lv) in left.iter() {
        if key == DIRECTIVE || key == RETAIN_KEYS {
            continue;
        }
        let Some(rv) = right.get(key) else { continue };
        let (sub, fm) = match lv {
            Value::List(_) => meta.lookup_slice(key)?,
            Value::Map(_) => meta.lookup_struct(key)?,
            _ => (Meta::none(), Default::default()),
        };
        let (_, strategy) = fm.strategy()?;
        if fields_have_conflicts(lv, rv, &sub, strategy, fm.merge_key())? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn fields_have_conflicts(
    left: &Value,
    right: &Value,
    meta: &Meta,
    strategy: &str,
    merge_key: &str,
) -> Result<bool, PatchError> {
    match left {
        Value::Map(l) => {
            let Value::Map(r) = right else {
                return Ok(true);
            };
            let (lm, rm) = (l.get(DIRECTIVE), r.get(DIRECTIVE));
            if lm.is_some() || rm.is_some() {
                match (lm, rm) {
                    (Some(a), Some(b)) if iface_eq(a, b) => {}
                    _ => return Ok(true),
                }
            }
            if strategy == REPLACE {
                return Ok(false);
            }
            maps_have_conflicts(l, r, meta)
        }
        Value::List(l) => {
            let Value::List(r) = right else {
                return Ok(true);
            };
            slices_have_conflicts(l, r, meta, strategy, merge_key)
        }
        _ => Ok(!left.strict_eq(right)),
    }
}

fn slices_have_conflicts(
    left: &[Value],
    right: &[Value],
    meta: &Meta,
    strategy: &str,
    merge_key: &str,
) -> Result<bool, PatchError> {
    let kind = element_kind(&[left, right])?;
    if strategy == MERGE {
        if kind != Kind::Map {
            return Ok(false);
        }
        let by_key = |list: &[Value]| -> Result<Vec<(String, Value)>, PatchError> {
            list.iter()
                .map(|v| {
                    let (_, k) = map_and_key(v, merge_key)?;
                    Ok((format!("{}:{}", k.type_name(), v_text(k)), v.clone()))
                })
                .collect()
        };
        let (l, r) = (by_key(left)?, by_key(right)?);
        for (k, lv) in &l {
            if let Some((_, rv)) = r.iter().rev().find(|(rk, _)| rk == k) {
                if fields_have_conflicts(lv, rv, meta, "", "")? {
                    return Ok(true);
                }
            }
        }
        return Ok(false);
    }
    if left.len() != right.len() {
        return Ok(true);
    }
    let (mut l, mut r) = (left.to_vec(), right.to_vec());
    if kind != Kind::Map {
        l = dedup_scalars(l);
        sort_scalars(&mut l);
        r = dedup_scalars(r);
        sort_scalars(&mut r);
    }
    for (a, b) in l.iter().zip(&r) {
        if fields_have_conflicts(a, b, meta, "", "")? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Sorts every merge list in `doc` (upstream's test helper `sortMergeListsByName`; used to
/// compare results whose merge-list order is not significant).
pub fn sort_merge_lists(doc: &Map, meta: &Meta) -> Result<Map, PatchError> {
    let mut out = Map::new();
    for (k, v) in doc.iter() {
        let v = if k == RETAIN_KEYS || k.starts_with(DELETE_PRIMITIVE_PREFIX) {
            let mut l = as_list_or_err(v)?.to_vec();
            sort_scalars(&mut l);
            Value::List(l)
        } else if k.starts_with(SET_ORDER_PREFIX) || k == DIRECTIVE {
            v.clone()
        } else {
            match v {
                Value::Map(m) => {
                    let (sub, _) = meta.lookup_struct(k)?;
                    Value::Map(sort_merge_lists(m, &sub)?)
                }
                Value::List(l) => {
                    let (sub, fm) = meta.lookup_slice(k)?;
                    let (_, strategy) = fm.strategy()?;
                    if strategy == MERGE && !l.is_empty() {
                        element_kind(&[l])?;
                        let items = l
                            .iter()
                            .map(|e| match e {
                                Value::Map(m) => sort_merge_lists(m, &sub).map(Value::Map),
                                other => Ok(other.clone()),
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        Value::List(sort_merge_list(items, fm.merge_key()))
                    } else {
                        v.clone()
                    }
                }
                other => other.clone(),
            }
        };
        out.insert(k.clone(), v);
    }
    Ok(out)
}
