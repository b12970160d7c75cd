//! Data-driven client-side patch tests: upstream's own test tables for strategic merge patch
//! (apimachinery `strategicpatch`), JSON merge patch (evanphx/json-patch and apimachinery
//! `jsonmergepatch`/`mergepatch`), converted to JSON lines (`tests/data/client-side-apply`,
//! provenance in its SOURCE.md). Every line is run; strategic cases run with the patch metadata
//! read from both the OpenAPI v2 and the OpenAPI v3 test documents.

use fieldguard::patch::meta::{Meta, PatchSchema};
use fieldguard::patch::{PatchError, json_merge, parse_document, strategic};
use fieldguard::value::{Map, Value, json, yaml};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/client-side-apply");

fn lines(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{DIR}/{file}")).unwrap();
    text.lines()
        .map(|l| json::parse(l.as_bytes()).unwrap())
        .collect()
}

fn schemas() -> Vec<(&'static str, PatchSchema)> {
    // The v2 documents are read as YAML: one has a trailing comma (upstream reads them with a
    // YAML-capable parser too).
    let read = |name: &str| {
        let text = std::fs::read_to_string(format!("{DIR}/openapi/{name}")).unwrap();
        yaml::parse_one(&text).unwrap()
    };
    let mut v2 = PatchSchema::from_openapi_v2(&read("swagger-merge-item.json")).unwrap();
    v2.extend(&read("swagger-precision-item.json"));
    let mut v3 = PatchSchema::from_openapi_v3(&read("swagger-merge-item-v3.json")).unwrap();
    v3.extend(&read("swagger-precision-item-v3.json"));
    vec![("openapi-v2", v2), ("openapi-v3", v3)]
}

fn doc(case: &Value, key: &str) -> Map {
    match case.get_path(&[key]) {
        Some(Value::Map(m)) => m.clone(),
        _ => Map::new(),
    }
}

fn show(m: &Map) -> String {
    json::to_string(&Value::Map(m.clone()), json::Style::GO)
}

struct Outcome {
    run: usize,
    failures: Vec<String>,
}

impl Outcome {
    fn new() -> Self {
        Outcome {
            run: 0,
            failures: vec![],
        }
    }
    fn check(&mut self, id: &str, ok: bool, detail: impl FnOnce() -> String) {
        self.run += 1;
        if !ok {
            self.failures.push(format!("{id}: {}", detail()));
        }
    }
    fn finish(self, what: &str, min_run: usize) {
        eprintln!("{what}: {} checks", self.run);
        assert!(self.run >= min_run, "{what}: only {} checks ran", self.run);
        assert!(
            self.failures.is_empty(),
            "{what}: {} of {} failed:\n{}",
            self.failures.len(),
            self.run,
            self.failures.join("\n")
        );
    }
}

fn sorted(m: &Map, meta: &Meta, on: bool) -> Map {
    if on {
        strategic::sort_merge_lists(m, meta).unwrap_or_else(|_| m.clone())
    } else {
        m.clone()
    }
}

fn error_matches(case: &Value, e: &PatchError) -> bool {
    let want = case.str_at(&["expectedError"]).unwrap_or("");
    match case.str_at(&["errorMatch"]) {
        Some("equals") => e.to_string() == want,
        Some("any") => true,
        _ => e.to_string().contains(want),
    }
}

fn schema_of<'s>(s: &'s PatchSchema, case: &Value) -> Meta<'s> {
    s.named(case.str_at(&["schema"]).unwrap()).unwrap()
}

#[test]
fn strategic_two_way_cases() {
    let mut out = Outcome::new();
    for (src, schema) in schemas() {
        for case in lines("smp-two-way.jsonl") {
            let id = format!("{src} {}", case.str_at(&["id"]).unwrap());
            let meta = schema_of(&schema, &case);
            let sort = case.str_at(&["listOrder"]) == Some("sortMergeLists");
            let original = sorted(&doc(&case, "original"), &meta, sort);
            let modified = sorted(&doc(&case, "modified"), &meta, sort);
            let result = strategic::two_way(&original, &modified, &meta);
            let either = case.get_path(&["acceptEither"]).is_some();
            if case.get_path(&["expectedError"]).is_some() && !either {
                out.check(
                    &id,
                    matches!(&result, Err(e) if error_matches(&case, e)),
                    || format!("expected error, got {result:?}"),
                );
                continue;
            }
            let patch = match result {
                Ok(p) => p,
                Err(e) if either && error_matches(&case, &e) => continue,
                Err(e) => {
                    out.check(&id, false, || format!("error {e}"));
                    continue;
                }
            };
            let want = sorted(&doc(&case, "expectedPatch"), &meta, sort);
            let got = sorted(&patch, &meta, sort);
            out.check(&id, got == want, || {
                format!("patch {} want {}", show(&got), show(&want))
            });
            let applied = strategic::apply(original.clone(), patch, &meta);
            let want = sorted(&doc(&case, "expectedResult"), &meta, sort);
            match applied {
                Ok(r) => {
                    let r = sorted(&r, &meta, sort);
                    out.check(&id, r == want, || {
                        format!("result {} want {}", show(&r), show(&want))
                    })
                }
                Err(e) => out.check(&id, false, || format!("apply error {e}")),
            }
        }
    }
    out.finish("two-way", 2 * 140);
}

#[test]
fn strategic_three_way_cases() {
    let mut out = Outcome::new();
    for (src, schema) in schemas() {
        for case in lines("smp-three-way.jsonl") {
            let id = format!("{src} {}", case.str_at(&["id"]).unwrap());
            let meta = schema_of(&schema, &case);
            let sort = case.str_at(&["listOrder"]) == Some("sortMergeLists");
            let original = sorted(&doc(&case, "original"), &meta, sort);
            let modified = sorted(&doc(&case, "modified"), &meta, sort);
            let current = sorted(&doc(&case, "current"), &meta, sort);
            let conflict = case.get_path(&["conflict"]) == Some(&Value::Bool(true));
            let either = case.get_path(&["acceptEither"]).is_some();
            let result = strategic::three_way(&original, &modified, &current, &meta, false);
            if conflict {
                out.check(&id, matches!(result, Err(PatchError::Conflict(_))), || {
                    format!("expected a conflict, got {result:?}")
                });
            }
            let result = if conflict {
                strategic::three_way(&original, &modified, &current, &meta, true)
            } else {
                result
            };
            if case.get_path(&["expectedError"]).is_some() && !either {
                out.check(
                    &id,
                    matches!(&result, Err(e) if error_matches(&case, e)),
                    || format!("expected error, got {result:?}"),
                );
                continue;
            }
            let patch = match result {
                Ok(p) => p,
                Err(e) if either && error_matches(&case, &e) => continue,
                Err(e) => {
                    out.check(&id, false, || format!("error {e}"));
                    continue;
                }
            };
            let want = sorted(&doc(&case, "expectedPatch"), &meta, sort);
            let got = sorted(&patch, &meta, sort);
            out.check(&id, got == want, || {
                format!("patch {} want {}", show(&got), show(&want))
            });
            let want = sorted(&doc(&case, "expectedResult"), &meta, sort);
            match strategic::apply(current.clone(), patch, &meta) {
                Ok(r) => {
                    let r = sorted(&r, &meta, sort);
                    out.check(&id, r == want, || {
                        format!("result {} want {}", show(&r), show(&want))
                    })
                }
                Err(e) => out.check(&id, false, || format!("apply error {e}")),
            }
        }
    }
    out.finish("three-way", 2 * 133);
}

#[test]
fn strategic_merge_cases() {
    let mut out = Outcome::new();
    for (src, schema) in schemas() {
        for case in lines("smp-merge.jsonl") {
            let id = format!("{src} {}", case.str_at(&["id"]).unwrap());
            let meta = schema_of(&schema, &case);
            let sort = case.str_at(&["listOrder"]) == Some("sortMergeLists");
            let read = |key: &str, text_key: &str| -> Result<Map, PatchError> {
                match case.str_at(&[text_key]) {
                    Some(t) => parse_document(Some(t.as_bytes())),
                    None => Ok(sorted(&doc(&case, key), &meta, sort)),
                }
            };
            let result = read("original", "originalText").and_then(|o| {
                let p = read("patch", "patchText")?;
                strategic::apply(o, p, &meta)
            });
            if case.get_path(&["expectedError"]).is_some() {
                out.check(
                    &id,
                    matches!(&result, Err(e) if error_matches(&case, e)),
                    || {
                        format!(
                            "expected error {:?}, got {result:?}",
                            case.str_at(&["expectedError"])
                        )
                    },
                );
                continue;
            }
            let want = sorted(&doc(&case, "expectedResult"), &meta, sort);
            match result {
                Ok(r) => {
                    let r = sorted(&r, &meta, sort);
                    out.check(&id, r == want, || {
                        format!("result {} want {}", show(&r), show(&want))
                    })
                }
                Err(e) => out.check(&id, false, || format!("error {e}")),
            }
        }
    }
    out.finish("merge", 2 * 30);
}

#[test]
fn strategic_sort_merge_lists_cases() {
    let mut out = Outcome::new();
    for (src, schema) in schemas() {
        for case in lines("smp-sort-merge-lists.jsonl") {
            let id = format!("{src} {}", case.str_at(&["id"]).unwrap());
            let meta = schema_of(&schema, &case);
            let got = strategic::sort_merge_lists(&doc(&case, "original"), &meta);
            let want = doc(&case, "expectedSorted");
            out.check(&id, got.as_ref() == Ok(&want), || {
                format!("got {got:?} want {}", show(&want))
            });
        }
    }
    out.finish("sort", 2 * 8);
}

fn val(case: &Value, key: &str) -> Option<Value> {
    case.get_path(&[key]).cloned()
}

#[test]
fn json_merge_patch_cases() {
    let mut out = Outcome::new();
    for case in lines("json-merge-patch.jsonl") {
        let id = case.str_at(&["id"]).unwrap().to_string();
        match case.str_at(&["kind"]).unwrap() {
            "apply" => {
                let parse = |k: &str, tk: &str| match case.str_at(&[tk]) {
                    Some(t) => json::parse(t.as_bytes()).map_err(|_| ()),
                    None => Ok(val(&case, k).unwrap_or(Value::Null)),
                };
                let result = match (parse("target", "targetText"), parse("patch", "patchText")) {
                    (Ok(t), Ok(p)) => json_merge::apply(&t, &p).map_err(|e| e.to_string()),
                    _ => Err("invalid JSON".to_string()),
                };
                if let Some(e) = case.str_at(&["expectedError"]) {
                    out.check(&id, matches!(&result, Err(m) if m.contains(e)), || {
                        format!("expected error {e:?}, got {result:?}")
                    });
                } else {
                    let want = val(&case, "expectedResult").unwrap();
                    out.check(&id, result.as_ref() == Ok(&want), || {
                        format!("got {result:?} want {want:?}")
                    });
                }
            }
            "twoWay" => {
                let (o, m) = (
                    val(&case, "original").unwrap(),
                    val(&case, "modified").unwrap(),
                );
                let result = json_merge::two_way(&o, &m);
                match val(&case, "expectedPatch") {
                    Some(want) => out.check(&id, result.as_ref() == Ok(&want), || {
                        format!("got {result:?} want {want:?}")
                    }),
                    None => out.check(&id, result.is_err(), || {
                        format!("expected error, got {result:?}")
                    }),
                }
            }
            "threeWay" => {
                let result = json_merge::three_way(
                    &doc(&case, "original"),
                    &doc(&case, "modified"),
                    &doc(&case, "current"),
                );
                let want = doc(&case, "expectedPatch");
                match result {
                    Ok(p) => {
                        out.check(&id, p == want, || {
                            format!("patch {} want {}", show(&p), show(&want))
                        });
                        let applied =
                            json_merge::apply(&Value::Map(doc(&case, "current")), &Value::Map(p));
                        let want = val(&case, "expectedResult").unwrap();
                        out.check(&id, applied.as_ref() == Ok(&want), || {
                            format!("result {applied:?} want {want:?}")
                        });
                    }
                    Err(e) => out.check(&id, false, || format!("error {e}")),
                }
            }
            "keepOrDeleteNull" => {
                let input = doc(&case, "input");
                let with = json_merge::keep_or_delete_null(&input, true);
                let without = json_merge::keep_or_delete_null(&input, false);
                out.check(&id, with == doc(&case, "expectedWithNull"), || {
                    format!("with null: {}", show(&with))
                });
                out.check(&id, without == doc(&case, "expectedWithoutNull"), || {
                    format!("without null: {}", show(&without))
                });
            }
            "hasConflicts" => {
                let (a, b) = (val(&case, "a").unwrap(), val(&case, "b").unwrap());
                let want = val(&case, "expected") == Some(Value::Bool(true));
                out.check(&id, json_merge::has_conflicts(&a, &b) == want, || {
                    format!("a,b: want {want}")
                });
                out.check(&id, json_merge::has_conflicts(&b, &a) == want, || {
                    format!("b,a: want {want}")
                });
            }
            other => panic!("unknown kind {other}"),
        }
    }
    out.finish("json merge patch", 123);
}

#[test]
fn csa_upgrade_cases() {
    use fieldguard::fieldpath::PathElement;
    use fieldguard::managedfields::{entries_from_value, entries_to_value, upgrade};
    let mut out = Outcome::new();
    for case in lines("csaupgrade.jsonl") {
        let id = case.str_at(&["id"]).unwrap().to_string();
        match case.str_at(&["kind"]).unwrap() {
            "upgradeManagedFields" => {
                let entries = entries_from_value(
                    case.get_path(&["object", "metadata", "managedFields"])
                        .unwrap_or(&Value::Null),
                )
                .unwrap();
                let mut names: Vec<&str> = case
                    .get_path(&["csaManagers"])
                    .and_then(Value::as_list)
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                let ssa = case.str_at(&["ssaManager"]).unwrap();
                let sub = case.str_at(&["options", "subresource"]).unwrap_or("");
                let want = entries_from_value(
                    case.get_path(&["expectedObject", "metadata", "managedFields"])
                        .unwrap_or(&Value::Null),
                )
                .unwrap();
                // The manager names are a set upstream: both orders must give the same result.
                for _ in 0..2 {
                    let got = upgrade::upgrade(&entries, &names, ssa, sub).unwrap();
                    let (g, w) = (
                        entries_to_value(&got, |_| false),
                        entries_to_value(&want, |_| false),
                    );
                    out.check(&id, normalise(&g) == normalise(&w), || {
                        format!("got {g:?}\nwant {w:?}")
                    });
                    names.reverse();
                }
            }
            "findFieldsOwners" => {
                let entries =
                    entries_from_value(case.get_path(&["managedFields"]).unwrap()).unwrap();
                let fields: Vec<Vec<PathElement>> = case
                    .get_path(&["fields"])
                    .and_then(Value::as_list)
                    .unwrap()
                    .iter()
                    .map(|p| {
                        p.as_list()
                            .unwrap()
                            .iter()
                            .map(|f| PathElement::field(f.as_str().unwrap()))
                            .collect()
                    })
                    .collect();
                let op = case.str_at(&["operation"]).unwrap();
                let mut got: Vec<String> = upgrade::owners_of(&entries, op, &fields)
                    .unwrap()
                    .iter()
                    .map(|e| e.manager.clone())
                    .collect();
                let mut want: Vec<String> = case
                    .get_path(&["expectedOwners"])
                    .and_then(Value::as_list)
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                got.sort();
                want.sort();
                out.check(&id, got == want, || format!("got {got:?} want {want:?}"));
            }
            other => panic!("unknown kind {other}"),
        }
    }
    out.finish("csaupgrade", 17);
}

/// Managed-fields entries with their FieldsV1 decoded (the encoding order is the engine's,
/// tested elsewhere).
fn normalise(v: &Value) -> Value {
    let mut v = v.clone();
    if let Value::List(l) = &mut v {
        for e in l {
            if let Some(m) = e.as_map_mut() {
                if let Some(Value::String(s)) = m.get("fieldsV1").cloned() {
                    m.insert("fieldsV1", json::parse(s.as_bytes()).unwrap());
                }
            }
        }
    }
    v
}

mod roundtrip {
    //! Properties: a two-way patch applied to its original gives the modified document (for
    //! documents without nulls, which a patch cannot express as values).
    use super::*;
    use proptest::prelude::*;

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::Int),
            "[a-c]{0,2}".prop_map(|s| Value::from(s.as_str())),
        ]
    }

    fn doc() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
                prop::collection::btree_map("[a-d]", inner, 0..4).prop_map(|m| {
                    let mut out = Map::new();
                    for (k, v) in m {
                        out.insert(k.as_str(), v);
                    }
                    Value::Map(out)
                }),
            ]
        })
    }

    fn top() -> impl Strategy<Value = Map> {
        prop::collection::btree_map("[a-d]", doc(), 0..5).prop_map(|m| {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(k.as_str(), v);
            }
            out
        })
    }

    proptest! {
        #[test]
        fn strategic_two_way_round_trips_without_schema(o in top(), m in top()) {
            let meta = Meta::none();
            let patch = strategic::two_way(&o, &m, &meta).unwrap();
            let got = strategic::apply(o.clone(), patch, &meta).unwrap();
            prop_assert_eq!(got, m);
        }

        #[test]
        fn json_merge_two_way_round_trips(o in top(), m in top()) {
            let patch = json_merge::two_way(&Value::Map(o.clone()), &Value::Map(m.clone())).unwrap();
            let got = json_merge::apply(&Value::Map(o), &patch).unwrap();
            prop_assert_eq!(got, Value::Map(m));
        }

        #[test]
        fn three_way_with_unchanged_live_gives_the_new_manifest(o in top(), m in top()) {
            // Live equals the last applied configuration: the patch brings it to the new one.
            let meta = Meta::none();
            let patch = strategic::three_way(&o, &m, &o, &meta, false).unwrap();
            let got = strategic::apply(o.clone(), patch, &meta).unwrap();
            prop_assert_eq!(got, m.clone());
            let patch = json_merge::three_way(&o, &m, &o).unwrap();
            let got = json_merge::apply(&Value::Map(o), &Value::Map(patch)).unwrap();
            prop_assert_eq!(got, Value::Map(m));
        }
    }
}
