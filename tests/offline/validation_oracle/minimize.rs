//! Minimizing a disagreeing case: greedily removes parts of the schema and of the objects (and
//! the old object altogether) while the case stays in the same class.

use super::oracle::Oracle;
use super::{Case, Compared, Outcome, Times, run};
use serde_json::Value;

#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Every path below `v`, parents before their children.
fn paths(v: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                prefix.push(Seg::Key(k.clone()));
                out.push(prefix.clone());
                paths(c, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                prefix.push(Seg::Index(i));
                out.push(prefix.clone());
                paths(c, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn remove(v: &mut Value, path: &[Seg]) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    let mut cur = v;
    for s in parent {
        cur = match (s, cur) {
            (Seg::Key(k), Value::Object(m)) => match m.get_mut(k) {
                Some(c) => c,
                None => return false,
            },
            (Seg::Index(i), Value::Array(a)) if *i < a.len() => &mut a[*i],
            _ => return false,
        };
    }
    match (last, cur) {
        (Seg::Key(k), Value::Object(m)) => m.remove(k).is_some(),
        (Seg::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
            true
        }
        _ => false,
    }
}

/// The removable paths of a case, as `[part, ...]` over `{"crd", "old", "new"}`.
fn candidates(case: &Value) -> Vec<Vec<Seg>> {
    let mut out = Vec::new();
    let schema = ["spec", "versions"]
        .iter()
        .map(|k| Seg::Key(k.to_string()))
        .chain([Seg::Index(0)])
        .chain(
            ["schema", "openAPIV3Schema"]
                .iter()
                .map(|k| Seg::Key(k.to_string())),
        );
    let mut prefix: Vec<Seg> = std::iter::once(Seg::Key("crd".into()))
        .chain(schema)
        .collect();
    paths(
        &case["crd"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        &mut prefix,
        &mut out,
    );
    for part in ["old", "new"] {
        for top in ["spec", "status"] {
            if case[part].get(top).is_some() {
                let mut prefix = vec![Seg::Key(part.into()), Seg::Key(top.into())];
                out.push(prefix.clone());
                paths(&case[part][top], &mut prefix, &mut out);
            }
        }
    }
    out
}

fn to_case(v: &Value) -> Case {
    Case {
        crd: v["crd"].clone(),
        old: Some(v["old"].clone()).filter(|o| !o.is_null()),
        new: v["new"].clone(),
    }
}

/// The smallest case found in `class`, with its comparison.
pub fn minimize(oracle: &mut Oracle, case: &Case, class: &str) -> (Case, Compared) {
    let mut times = Times::default();
    let mut judge = |v: &Value| -> Option<Compared> {
        match run(oracle, &[to_case(v)], &mut times).pop()? {
            Outcome::Compared(c) if c.class.as_deref() == Some(class) => Some(*c),
            _ => None,
        }
    };
    let mut cur = serde_json::json!({"crd": case.crd, "old": case.old, "new": case.new});
    let mut best = judge(&cur).expect("the example reproduces");
    let mut tries = 0;
    loop {
        let mut changed = false;
        if !cur["old"].is_null() {
            let mut c = cur.clone();
            c["old"] = Value::Null;
            if let Some(b) = judge(&c) {
                (cur, best, changed) = (c, b, true);
            }
        }
        let mut i = 0;
        loop {
            let ps = candidates(&cur);
            let Some(p) = ps.get(i) else { break };
            tries += 1;
            if tries > 1500 {
                return (to_case(&cur), best);
            }
            let mut c = cur.clone();
            if remove(&mut c, p)
                && let Some(b) = judge(&c)
            {
                (cur, best, changed) = (c, b, true);
            } else {
                i += 1;
            }
        }
        if !changed {
            return (to_case(&cur), best);
        }
    }
}
