//! Property-based tests: hostile bytes and documents never panic; sets survive the wire format.

use fieldguard::fieldpath::{KeyField, PathElement, Set};
use fieldguard::managedfields::FieldManager;
use fieldguard::schema::{Gvk, Schema, builtin};
use fieldguard::typed;
use fieldguard::value::yaml::{YamlOptions, parse_documents};
use fieldguard::value::{Map, Value, json};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn schema() -> &'static Schema {
    builtin::default_schema().unwrap()
}

/// Text made of FieldsV1 tokens, so the decoder gets past the first byte.
fn fieldsv1_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just(":".to_string()),
        Just(",".to_string()),
        Just("{}".to_string()),
        Just("null".to_string()),
        Just("[]".to_string()),
        Just("\".\"".to_string()),
        Just("\"f:a\"".to_string()),
        Just("\"f:b\\\"c\"".to_string()),
        Just("\"k:{\\\"name\\\":\\\"x\\\"}\"".to_string()),
        Just("\"k:{\\\"p\\\":1,\\\"q\\\":2.5}\"".to_string()),
        Just("\"k:[1]\"".to_string()),
        Just("\"v:1\"".to_string()),
        Just("\"v:\\\"s\\\"\"".to_string()),
        Just("\"v:{\"".to_string()),
        Just("\"i:-3\"".to_string()),
        Just("\"i:x\"".to_string()),
        Just("\"z:q\"".to_string()),
        Just("\"a\"".to_string()),
        Just("\"\\u00e9\"".to_string()),
        Just(" ".to_string()),
        Just("5".to_string()),
    ];
    proptest::collection::vec(token, 0..60).prop_map(|v| v.concat())
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Int),
        (-1.0e6f64..1.0e6).prop_map(Value::Float),
        "[a-z<>&\"\\\\ é]{0,6}".prop_map(|s| Value::from(s.as_str())),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

/// Arbitrary documents, biased towards the shapes of Kubernetes objects.
fn document() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("spec"),
        Just("metadata"),
        Just("labels"),
        Just("template"),
        Just("containers"),
        Just("name"),
        Just("image"),
        Just("ports"),
        Just("containerPort"),
        Just("protocol"),
        Just("replicas"),
        Just("selector"),
        Just("env"),
        Just("finalizers"),
        Just("x"),
    ];
    scalar().prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
            proptest::collection::vec((key.clone(), inner), 0..5).prop_map(|kv| {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k, v);
                }
                Value::Map(m)
            }),
        ]
    })
}

fn path_element() -> impl Strategy<Value = PathElement> {
    prop_oneof![
        "[a-c\"\\\\<é.]{0,3}".prop_map(|s| PathElement::field(&s)),
        (0i64..3, "[a-b]{1,2}").prop_map(|(n, s)| PathElement::key(vec![
            KeyField {
                name: "port".into(),
                value: Value::Float(n as f64)
            },
            KeyField {
                name: "name".into(),
                value: Value::from(s.as_str())
            },
        ])),
        "[xy]{1,2}".prop_map(|s| PathElement::Value(Value::from(s.as_str()))),
        (0i64..4).prop_map(|n| PathElement::Value(Value::Float(n as f64 * 1.5))),
        (0i64..3).prop_map(PathElement::Index),
    ]
}

fn field_set() -> impl Strategy<Value = Set> {
    proptest::collection::vec(proptest::collection::vec(path_element(), 1..5), 0..12).prop_map(
        |paths| {
            let mut s = Set::new();
            for p in paths {
                s.insert(&p);
            }
            s
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fieldsv1_decoder_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Set::from_fields_v1(&bytes);
    }

    #[test]
    fn fieldsv1_decoder_never_panics_on_near_misses(text in fieldsv1_like()) {
        if let Ok(set) = Set::from_fields_v1(text.as_bytes()) {
            // Whatever decodes must re-encode to something that decodes to the same set.
            let again = Set::from_fields_v1(set.to_fields_v1().as_bytes()).unwrap();
            prop_assert!(again.equals(&set));
        }
    }

    #[test]
    fn sets_survive_the_wire_format(set in field_set()) {
        let wire = set.to_fields_v1();
        let back = Set::from_fields_v1(wire.as_bytes()).unwrap();
        prop_assert!(back.equals(&set), "{} -> {}", wire, back.to_fields_v1());
        prop_assert_eq!(back.to_fields_v1(), wire);
    }

    #[test]
    fn set_algebra_laws(a in field_set(), b in field_set()) {
        let u = a.union(&b);
        for p in a.paths().iter().chain(b.paths().iter()) {
            prop_assert!(u.has(&p.0));
        }
        let i = a.intersection(&b);
        for p in i.paths() {
            prop_assert!(a.has(&p.0) && b.has(&p.0));
        }
        for p in a.paths() {
            prop_assert_eq!(i.has(&p.0), b.has(&p.0));
        }
        let d = a.difference(&b);
        for p in d.paths() {
            prop_assert!(a.has(&p.0) && !b.has(&p.0));
        }
        prop_assert!(a.union(&b).equals(&b.union(&a)) || a.union(&b).to_fields_v1() == b.union(&a).to_fields_v1());
    }

    #[test]
    fn json_and_yaml_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = json::parse(&bytes);
        if let Ok(s) = std::str::from_utf8(&bytes) {
            let _ = parse_documents(s, &YamlOptions::default());
        }
    }

    #[test]
    fn yaml_parser_never_panics_on_yaml_like_text(s in "([-:{}\\[\\],&*!|> \n#'\"a-c0-9]|<<|---|\\.\\.\\.){0,80}") {
        let _ = parse_documents(&s, &YamlOptions::default());
    }

    #[test]
    fn typed_operations_never_panic(a in document(), b in document()) {
        let s = schema();
        let tr = s.type_ref(s.type_for(&Gvk::new("apps", "v1", "Deployment")).unwrap());
        let deduced = Schema::deduced();
        let dtr = deduced.type_ref("__untyped_deduced_");
        for (sc, t) in [(s, &tr), (&deduced, &dtr)] {
            let _ = typed::validate(sc, t, &a, true);
            let _ = typed::to_field_set(sc, t, &a);
            let _ = typed::compare(sc, t, &a, &b);
            let _ = typed::merge(sc, t, &a, &b);
            if let Ok(set) = typed::to_field_set(sc, t, &b) {
                let _ = typed::remove_items(sc, t, &a, &set);
            }
        }
    }

    /// The one-pass apply walk answers exactly what validation, merge and comparison answer,
    /// and declines every config validation rejects.
    #[test]
    fn apply_walk_agrees_with_the_reference_operations(live in document(), config in document()) {
        let s = schema();
        let tr = s.type_ref(s.type_for(&Gvk::new("apps", "v1", "Deployment")).unwrap());
        let deduced = Schema::deduced();
        let dtr = deduced.type_ref("__untyped_deduced_");
        for (sc, t) in [(s, &tr), (&deduced, &dtr)] {
            if typed::validate(sc, t, &live, true).is_err() {
                continue;
            }
            let walk = typed::apply_walk(sc, t, &live, &config);
            let Ok(set) = typed::validate_to_field_set(sc, t, &config) else {
                prop_assert!(walk.is_none(), "accepted an invalid config");
                continue;
            };
            let Some(walk) = walk else { continue };
            prop_assert!(walk.set.equals(&set));
            let merged = typed::merge(sc, t, &live, &config).unwrap().unwrap_or(Value::Null);
            prop_assert!(walk.merged.strict_eq(&merged));
            prop_assert_eq!(walk.unchanged, fieldguard::value::equals(&live, &merged));
            let cmp = typed::compare_merged(sc, t, &live, &merged, &config).unwrap();
            prop_assert!(walk.comparison.added.equals(&cmp.added));
            prop_assert!(walk.comparison.modified.equals(&cmp.modified));
            prop_assert!(walk.comparison.removed.equals(&cmp.removed));
        }
    }

    #[test]
    fn applying_arbitrary_documents_never_panics(spec in document(), live_spec in document()) {
        let s = schema();
        let tr = s.type_ref(s.type_for(&Gvk::new("apps", "v1", "Deployment")).unwrap());
        let wrap = |spec: Value| {
            let mut m = Map::new();
            m.insert("apiVersion", Value::from("apps/v1"));
            m.insert("kind", Value::from("Deployment"));
            m.insert("spec", spec);
            Value::Map(m)
        };
        let reset = BTreeMap::new();
        let fm = FieldManager {
            schema: s, type_ref: &tr, api_version: "apps/v1".into(), kind: "Deployment".into(),
            subresource: String::new(), ignored: &reset, known_versions: None, now: 0, options: Default::default(),
        };
        let live = wrap(live_spec);
        if let Ok(out) = fm.update(&live, &live, &[], None, "seed") {
            let _ = fm.apply(&out.object, &wrap(spec), &out.entries, "alice", false);
        }
    }
}

#[test]
fn hostile_nesting_fails_fast_with_a_typed_error() {
    let deep_json = "[".repeat(129) + &"]".repeat(129);
    assert!(json::parse(deep_json.as_bytes()).is_err());
    let deep_yaml = "- ".repeat(200) + "x";
    let e = parse_documents(&deep_yaml, &YamlOptions::default()).unwrap_err();
    assert!(e.message.contains("nesting"), "{e}");
    let deep_fields = "{\"f:a\":".repeat(100_000);
    assert!(Set::from_fields_v1(deep_fields.as_bytes()).is_err());
    // A value built in code deeper than any document is refused, not recursed into.
    let mut v = Value::Null;
    for _ in 0..1000 {
        let mut m = Map::new();
        m.insert("x", v);
        v = Value::Map(m);
    }
    let deduced = Schema::deduced();
    let tr = deduced.type_ref("__untyped_deduced_");
    let err = typed::validate(&deduced, &tr, &v, false).unwrap_err();
    assert!(err.to_string().contains("nesting too deep"));
    // Dropping it must not overflow either.
    drop(v);
}
