use super::*;
use crate::value::yaml::parse_one;

fn owned<'a>(
    manager: &'a str,
    operation: &'a str,
    sub: &'a str,
    fields: &'a str,
    time: i64,
) -> Owned<'a> {
    Owned {
        manager,
        operation,
        subresource: sub,
        fields,
        time: Some(time),
    }
}

const HELM: &str = r#"{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#;
const HELM_NO_REPLICAS: &str = r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#;
const HPA: &str = r#"{"f:spec":{"f:replicas":{}}}"#;

fn deployment(replicas: i64) -> Value {
    parse_one(&format!(
        "{{spec: {{replicas: {replicas}, template: {{spec: {{containers: [{{name: app, image: 'app:1'}}]}}}}}}}}"
    ))
    .unwrap()
}

#[test]
fn an_autoscaler_takes_replicas_by_an_update_of_the_scale_subresource() {
    let (before, after) = (deployment(3), deployment(5));
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HELM, 100)],
        object: Some(&before),
    };
    let new = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", HELM_NO_REPLICAS, 100),
            owned("hpa", "Update", "scale", HPA, 200),
        ],
        object: Some(&after),
    };
    let c = diff(Some(&old), Some(&new)).unwrap();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].path.to_string(), ".spec.replicas");
    assert_eq!(c[0].change, Change::TakenOver);
    assert_eq!(
        (c[0].from.as_slice(), c[0].to.as_slice()),
        (&["helm"][..], &["hpa"][..])
    );
    assert_eq!((c[0].operation, c[0].subresource), ("Update", "scale"));
    assert_eq!(c[0].time, Some(200));
    assert_eq!(c[0].old_value, Some(&Value::Int(3)));
    assert_eq!(c[0].new_value, Some(&Value::Int(5)));

    // Forced back by the applier: taken over the other way, by Apply.
    let c = diff(Some(&new), Some(&old)).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].from[0], c[0].to[0], c[0].operation),
        ("hpa", "helm", "Apply")
    );
}

#[test]
fn sharing_releasing_and_nothing_changed() {
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HPA, 1)],
        object: None,
    };
    let shared = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", HPA, 1),
            owned("ci", "Apply", "", HPA, 2),
        ],
        object: None,
    };
    let c = diff(Some(&old), Some(&shared)).unwrap();
    assert_eq!(
        (c.len(), c[0].change, c[0].to[0]),
        (1, Change::Shared, "ci")
    );
    assert!(c[0].from.is_empty());
    // helm drops it; ci still owns it: released by helm, ci remains.
    let released = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", "{}", 3),
            owned("ci", "Apply", "", HPA, 2),
        ],
        object: None,
    };
    let c = diff(Some(&shared), Some(&released)).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].change, c[0].from[0], c[0].to[0]),
        (Change::Released, "helm", "ci")
    );
    // A new field nobody owned before changes no hands; neither does a time stamp.
    let grown = ObjectState {
        entries: vec![owned("helm", "Apply", "", HELM, 1)],
        object: None,
    };
    assert!(diff(Some(&old), Some(&grown)).unwrap().is_empty());
    let touched = ObjectState {
        entries: vec![owned("helm", "Apply", "", HPA, 99)],
        object: None,
    };
    assert!(diff(Some(&old), Some(&touched)).unwrap().is_empty());
    // Creation changes no hands.
    assert!(diff(None, Some(&old)).unwrap().is_empty());
}

#[test]
fn a_container_taken_whole_is_one_transition_and_deletion_removes_per_manager() {
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HELM, 1)],
        object: None,
    };
    let new = ObjectState {
        entries: vec![
            owned("helm", "Apply", "", r#"{"f:spec":{"f:replicas":{}}}"#, 1),
            owned(
                "kubectl-edit",
                "Update",
                "",
                r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#,
                2,
            ),
        ],
        object: None,
    };
    let c = diff(Some(&old), Some(&new)).unwrap();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        c[0].path.to_string(),
        r#".spec.template.spec.containers[name="app"]"#
    );
    let gone = diff(Some(&new), None).unwrap();
    assert_eq!(gone.len(), 2);
    assert_eq!(
        (gone[0].from[0], gone[0].fields, gone[0].change),
        ("helm", 1, Change::Removed)
    );
    assert_eq!((gone[1].from[0], gone[1].fields), ("kubectl-edit", 3));
    assert!(gone[0].path.is_empty());
}

#[test]
fn unreadable_fields_are_an_error_not_a_guess() {
    let old = ObjectState {
        entries: vec![owned("helm", "Apply", "", HPA, 1)],
        object: None,
    };
    let bad = ObjectState {
        entries: vec![owned("helm", "Apply", "", "{\"f:spec\":", 1)],
        object: None,
    };
    assert!(
        diff(Some(&old), Some(&bad))
            .unwrap_err()
            .contains("managedFields of helm")
    );
}

#[test]
fn values_are_found_without_a_schema() {
    let v = parse_one(
        "{spec: {containers: [{name: a, image: x}, {name: b, image: 'y'}], finalizers: [p, q]}}",
    )
    .unwrap();
    let key = crate::fieldpath::PathElement::key(vec![crate::fieldpath::KeyField {
        name: "name".into(),
        value: Value::from("b"),
    }]);
    let path = [
        PathElement::field("spec"),
        PathElement::field("containers"),
        key,
        PathElement::field("image"),
    ];
    assert_eq!(value_at(&v, &path), Some(&Value::from("y")));
    let set = [
        PathElement::field("spec"),
        PathElement::field("finalizers"),
        PathElement::Value(Value::from("q")),
    ];
    assert_eq!(value_at(&v, &set), Some(&Value::from("q")));
    assert_eq!(value_at(&v, &[PathElement::field("nope")]), None);
}

/// The reference the fast diff must equal: every field any entry holds, its owners before and
/// after over all entries (nothing skipped, nothing lazy), then the topmost of each run.
fn reference<'a>(old: &ObjectState<'a>, new: &ObjectState<'a>) -> Vec<FieldChange<'a>> {
    use std::collections::BTreeSet;
    let sets = |st: &ObjectState<'a>| -> Vec<(Owned<'a>, Set)> {
        st.entries.iter().map(|o| (*o, parse(o).unwrap())).collect()
    };
    let (b, a) = (sets(old), sets(new));
    let mut all = Set::new();
    for (_, s) in b.iter().chain(&a) {
        all.union_with(s.clone());
    }
    let owners = |sets: &[(Owned<'a>, Set)], p: &[PathElement]| -> BTreeSet<&'a str> {
        sets.iter()
            .filter(|(_, s)| s.has(p))
            .map(|(o, _)| o.manager)
            .collect()
    };
    let mut out: Vec<FieldChange<'a>> = Vec::new();
    all.iterate(|p| {
        let (was, is) = (owners(&b, p), owners(&a, p));
        let gained: Vec<&str> = is.difference(&was).copied().collect();
        let lost: Vec<&str> = was.difference(&is).copied().collect();
        let (change, from, to, by, side) = match (lost.is_empty(), gained.is_empty()) {
            (false, false) => (Change::TakenOver, lost, gained.clone(), gained[0], &a),
            (true, false) if !was.is_empty() => {
                (Change::Shared, vec![], gained.clone(), gained[0], &a)
            }
            (false, true) => (
                Change::Released,
                lost.clone(),
                is.iter().copied().collect(),
                lost[0],
                &b,
            ),
            _ => return,
        };
        let covered = out.iter().any(|k| {
            (k.change, &k.from, &k.to) == (change, &from, &to)
                && k.path.len() < p.len()
                && p[..k.path.len()]
                    .iter()
                    .zip(k.path.elements())
                    .all(|(x, y)| x.equals(y))
        });
        if covered {
            return;
        }
        let entry = side
            .iter()
            .filter(|(o, _)| o.manager == by)
            .max_by_key(|(o, s)| (s.has(p), o.time))
            .map(|(o, _)| *o);
        let latest = new
            .entries
            .iter()
            .filter(|o| o.manager == by)
            .max_by_key(|o| o.time);
        out.push(FieldChange {
            path: Path(p.to_vec()),
            change,
            from,
            to,
            operation: entry.map_or("", |o| o.operation),
            subresource: entry.map_or("", |o| o.subresource),
            time: latest.and_then(|o| o.time).or(entry.and_then(|o| o.time)),
            old_value: None,
            new_value: None,
            fields: 0,
        });
    });
    out
}

#[test]
fn the_diff_equals_the_plain_computation_on_random_states() {
    use rand::{Rng, SeedableRng};
    let key = |n: &str| {
        PathElement::key(vec![crate::fieldpath::KeyField {
            name: "name".into(),
            value: Value::from(n),
        }])
    };
    let f = PathElement::field;
    let universe: Vec<Vec<PathElement>> = vec![
        vec![f("spec")],
        vec![f("spec"), f("replicas")],
        vec![f("spec"), f("paused")],
        vec![f("spec"), f("containers"), key("a")],
        vec![f("spec"), f("containers"), key("a"), f("image")],
        vec![f("spec"), f("containers"), key("a"), f("name")],
        vec![f("spec"), f("containers"), key("b")],
        vec![f("spec"), f("containers"), key("b"), f("image")],
        vec![f("spec"), f("tags"), PathElement::Value(Value::from("x"))],
        vec![f("metadata"), f("labels"), f("app")],
        vec![f("status"), f("phase")],
    ];
    let managers = ["a", "b", "c", "d"];
    let ops = [("Apply", ""), ("Update", ""), ("Update", "status")];
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut texts: Vec<String> = Vec::new();
    let state = |rng: &mut rand::rngs::StdRng, texts: &mut Vec<String>| {
        let mut entries: Vec<(&str, &str, &str, usize, i64)> = Vec::new();
        for m in managers {
            for (op, sub) in ops {
                if rng.gen_bool(0.35) {
                    let picked: Vec<&[PathElement]> = universe
                        .iter()
                        .filter(|_| rng.gen_bool(0.4))
                        .map(|p| p.as_slice())
                        .collect();
                    texts.push(Set::from_paths(picked).to_fields_v1());
                    entries.push((m, op, sub, texts.len() - 1, rng.gen_range(0..4)));
                }
            }
        }
        entries
    };
    let mut states = Vec::new();
    for _ in 0..600 {
        states.push(state(&mut rng, &mut texts));
    }
    let mut compared = (0, 0);
    for pair in states.windows(2) {
        // Half the time the new side keeps some entries of the old one as they were.
        let mut next = pair[1].clone();
        if rng.gen_bool(0.5) {
            next.retain(|n| !pair[0].iter().any(|o| (o.0, o.1, o.2) == (n.0, n.1, n.2)));
            next.extend(pair[0].iter().filter(|_| rng.gen_bool(0.6)).copied());
        }
        let owned_of =
            |es: &[(&'static str, &'static str, &'static str, usize, i64)]| -> Vec<Owned<'_>> {
                es.iter()
                    .map(|&(m, op, sub, i, t)| owned(m, op, sub, &texts[i], t))
                    .collect()
            };
        let old = ObjectState {
            entries: owned_of(&pair[0]),
            object: None,
        };
        let new = ObjectState {
            entries: owned_of(&next),
            object: None,
        };
        let got = diff(Some(&old), Some(&new)).unwrap();
        assert_eq!(got, reference(&old, &new), "{:?} -> {:?}", pair[0], next);
        compared.0 += 1;
        compared.1 += got.len();
    }
    // The states are varied enough to mean something.
    assert!(compared.1 > compared.0, "{compared:?}");
}
