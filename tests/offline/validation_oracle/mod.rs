//! The differential of custom resource validation against Kubernetes' own validator: random
//! structural CRDs with `x-kubernetes-validations` rules ([`schemas`], [`rules`]), objects that
//! satisfy and violate them, creates and updates ([`objects`]), each judged by the validation
//! oracle (`validation-oracle/`: apiextensions-apiserver 1.36.5's write path, [`oracle`]) and
//! by fieldguard's `validation::custom_resource` on the object the server would store (the
//! oracle's `object`: pruning and defaulting are the server's, so validation alone is
//! compared). An update's old object is first stored through the oracle (a create of it, whose
//! `object` is kept even when refused: an invalid stored object is what ratcheting is about).
//!
//! Compared per case: refused (422) or not, and the set of error texts (the server's order is
//! random). A case where fieldguard reports a constraint or rule as not evaluated is counted
//! apart, not as a disagreement. A disagreement is put in a class ([`classify`]); the test
//! fails on any class not in [`classify::DOCUMENTED`].
//!
//!   FIELDGUARD_VALIDATION_CASES     cases (default 100000)
//!   FIELDGUARD_VALIDATION_SEED      seed (default: the clock; printed first)
//!   FIELDGUARD_VALIDATION_MINIMIZE  set: minimize one example of each undocumented class
//!   FIELDGUARD_VALIDATION_DUMP      a file to write every disagreeing case to (JSONL)

mod classify;
mod minimize;
mod objects;
mod oracle;
mod rules;
mod schemas;

use fieldguard::validation::{Structural, custom_resource};
use oracle::Oracle;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// One write: a create (`old` none) or an update.
#[derive(Clone, Debug)]
pub struct Case {
    pub crd: Value,
    pub old: Option<Value>,
    pub new: Value,
}

/// What became of a case.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The CRD itself is invalid (the oracle's `crd_errors`, the first given): skipped.
    CrdRefused(String),
    /// The oracle refused the input (a generator bug).
    InputError(String),
    /// The write was neither accepted nor a 422 (400, 409, 500).
    OtherCode(i64),
    Compared(Box<Compared>),
}

#[derive(Clone, Debug)]
pub struct Compared {
    /// The stored old object (after the oracle's create of it).
    pub old: Option<Value>,
    pub code: i64,
    pub theirs: BTreeSet<String>,
    pub ours: BTreeSet<String>,
    pub not_evaluated: Vec<String>,
    /// `None`: they agree.
    pub class: Option<String>,
}

#[derive(Default)]
pub struct Times {
    oracle: Duration,
    ours: Duration,
}

fn object(name: &str, spec: Value, status: Option<Value>) -> Value {
    let mut o = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": name}, "spec": spec});
    if let Some(s) = status {
        o["status"] = s;
    }
    o
}

/// One CRD and a few writes of its kind.
fn group(rng: &mut StdRng) -> Vec<Case> {
    let crd = schemas::crd(rng);
    let root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].clone();
    let n = rng.gen_range(1..=6);
    (0..n)
        .map(|_| {
            let bad = *crate::support::pick(rng, &[0.0, 0.0, 0.02, 0.08, 0.2]);
            let make = |rng: &mut StdRng, bad: f64| {
                let status = root
                    .get("status")
                    .filter(|_| rng.gen_bool(0.7))
                    .map(|s| objects::value(rng, s, bad));
                (objects::value(rng, &root["spec"], bad), status)
            };
            let (spec, status) = make(rng, bad);
            if rng.gen_bool(0.4) {
                return Case {
                    crd: crd.clone(),
                    old: None,
                    new: object("w1", spec, status),
                };
            }
            let p = *crate::support::pick(rng, &[0.0, 0.05, 0.15, 0.4]);
            let new_spec = objects::mutate(rng, &spec, &root["spec"], p, bad);
            let new_status = match (&status, root.get("status")) {
                (Some(s), Some(sc)) => Some(objects::mutate(rng, s, sc, p, bad)),
                _ => None,
            };
            Case {
                crd: crd.clone(),
                old: Some(object("w1", spec, status)),
                new: object("w1", new_spec, new_status),
            }
        })
        .collect()
}

/// fieldguard's structural schema of the CRD's `v1`.
fn structural(crd: &str) -> Structural {
    let v = fieldguard::value::json::parse(crd.as_bytes()).expect("CRD JSON");
    fieldguard::schema::crd::structural_schemas(&v)
        .into_iter()
        .find(|(g, _)| g.version == "v1")
        .map(|(_, s)| s)
        .expect("a v1 schema")
}

fn fg(v: &Value) -> fieldguard::value::Value {
    fieldguard::value::json::parse(v.to_string().as_bytes()).expect("JSON")
}

/// Runs `cases` through the oracle (old objects stored first) and fieldguard.
pub fn run(oracle: &mut Oracle, cases: &[Case], times: &mut Times) -> Vec<Outcome> {
    let crds: Vec<String> = cases.iter().map(|c| c.crd.to_string()).collect();
    // The old objects, stored.
    let olds: Vec<usize> = (0..cases.len())
        .filter(|&i| cases[i].old.is_some())
        .collect();
    let lines = olds
        .iter()
        .enumerate()
        .map(|(id, &i)| {
            format!(
                r#"{{"id":{id},"crd":{},"new":{}}}"#,
                crds[i],
                cases[i].old.as_ref().unwrap()
            )
        })
        .collect();
    let t = Instant::now();
    let stored_olds = oracle.ask(lines);
    times.oracle += t.elapsed();
    let mut old_of: Vec<Option<Value>> = vec![None; cases.len()];
    for (&i, a) in olds.iter().zip(&stored_olds) {
        old_of[i] = Some(a["object"].clone());
    }
    let lines = (0..cases.len())
        .map(|i| {
            let old = old_of[i].as_ref().map_or("null".into(), |o| o.to_string());
            format!(
                r#"{{"id":{i},"crd":{},"old":{old},"new":{}}}"#,
                crds[i], cases[i].new
            )
        })
        .collect();
    let t = Instant::now();
    let answers = oracle.ask(lines);
    times.oracle += t.elapsed();
    let mut schemas: HashMap<&str, Structural> = HashMap::new();
    let mut out = Vec::with_capacity(cases.len());
    for (i, a) in answers.into_iter().enumerate() {
        if let Some(e) = a["input_error"].as_str() {
            out.push(Outcome::InputError(e.to_string()));
            continue;
        }
        if let Some(first) = a["crd_errors"].as_array().and_then(|e| e.first()) {
            out.push(Outcome::CrdRefused(
                first.as_str().unwrap_or("").to_string(),
            ));
            continue;
        }
        let code = a["code"].as_i64().unwrap_or(0);
        if ![200, 201, 422].contains(&code) || old_of[i].as_ref().is_some_and(Value::is_null) {
            out.push(Outcome::OtherCode(code));
            continue;
        }
        let t = Instant::now();
        let schema = schemas
            .entry(crds[i].as_str())
            .or_insert_with(|| structural(&crds[i]));
        let stored = fg(&a["object"]);
        let old = old_of[i].as_ref().map(fg);
        let d = custom_resource(&stored, old.as_ref(), schema, Vec::new());
        times.ours += t.elapsed();
        let theirs: BTreeSet<String> = a["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["error"].as_str().unwrap().to_string())
            .collect();
        let ours: BTreeSet<String> = d.errors.iter().map(ToString::to_string).collect();
        let agree = (code == 422) != d.errors.is_empty() && theirs == ours;
        let class = (!agree).then(|| classify::class(code == 422, &theirs, &ours));
        out.push(Outcome::Compared(Box::new(Compared {
            old: old_of[i].clone(),
            code,
            theirs,
            ours,
            not_evaluated: d.not_evaluated,
            class,
        })));
    }
    out
}

/// The counts of a run.
#[derive(Default)]
struct Tally {
    cases: usize,
    creates: usize,
    refused: usize,
    crd_refused: usize,
    crd_refused_why: BTreeMap<String, usize>,
    input_errors: BTreeMap<String, usize>,
    other_codes: BTreeMap<i64, usize>,
    agree: usize,
    not_evaluated: usize,
    not_evaluated_agree: usize,
    not_evaluated_why: BTreeMap<String, usize>,
    /// Class → count, first example.
    classes: BTreeMap<String, (usize, Case, Compared)>,
}

impl Tally {
    fn add(&mut self, case: &Case, o: Outcome) {
        self.cases += 1;
        match o {
            Outcome::CrdRefused(why) => {
                self.crd_refused += 1;
                *self
                    .crd_refused_why
                    .entry(classify::crd_error_kind(&why))
                    .or_default() += 1;
            }
            Outcome::InputError(e) => *self.input_errors.entry(e).or_default() += 1,
            Outcome::OtherCode(c) => *self.other_codes.entry(c).or_default() += 1,
            Outcome::Compared(c) => {
                self.creates += usize::from(case.old.is_none());
                self.refused += usize::from(c.code == 422);
                if !c.not_evaluated.is_empty() {
                    self.not_evaluated += 1;
                    self.not_evaluated_agree += usize::from(c.class.is_none());
                    let whys: BTreeSet<String> = c
                        .not_evaluated
                        .iter()
                        .map(|n| classify::not_evaluated_kind(n))
                        .collect();
                    for w in whys {
                        *self.not_evaluated_why.entry(w).or_default() += 1;
                    }
                } else if let Some(k) = &c.class {
                    let e = self
                        .classes
                        .entry(k.clone())
                        .or_insert_with(|| (0, case.clone(), (*c).clone()));
                    e.0 += 1;
                } else {
                    self.agree += 1;
                }
            }
        }
    }

    fn print(&self, seed: u64, times: &Times) {
        let compared = self.cases
            - self.crd_refused
            - self.input_errors.values().sum::<usize>()
            - self.other_codes.values().sum::<usize>();
        let rate = |d: Duration| compared as f64 / d.as_secs_f64().max(1e-9);
        println!("validation oracle differential, seed {seed}");
        println!("  cases generated           {:>8}", self.cases);
        println!("  CRD refused (skipped)     {:>8}", self.crd_refused);
        let mut why: Vec<_> = self.crd_refused_why.iter().collect();
        why.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
        for (w, n) in why.iter().take(6) {
            println!("      {n:>8}  {w}");
        }
        println!(
            "  other codes (skipped)     {:>8}  {:?}",
            self.other_codes.values().sum::<usize>(),
            self.other_codes
        );
        println!(
            "  input errors              {:>8}  {:?}",
            self.input_errors.values().sum::<usize>(),
            self.input_errors
        );
        println!(
            "  compared                  {compared:>8}  ({} creates, {} refused by the server)",
            self.creates, self.refused
        );
        println!("  agree                     {:>8}", self.agree);
        println!(
            "  not evaluated             {:>8}  ({:.1}% of compared; {} of them agree anyway)",
            self.not_evaluated,
            100.0 * self.not_evaluated as f64 / compared.max(1) as f64,
            self.not_evaluated_agree
        );
        for (w, n) in &self.not_evaluated_why {
            println!("      {n:>8}  {w}");
        }
        println!(
            "  disagree                  {:>8}",
            self.classes.values().map(|c| c.0).sum::<usize>()
        );
        for (k, (n, _, _)) in &self.classes {
            let doc = if classify::documented(k).is_some() {
                "documented"
            } else {
                "UNDOCUMENTED"
            };
            println!("      {n:>8}  {doc:<12}  {k}");
        }
        println!(
            "  cases/s: oracle {:.0} (both writes of an update), fieldguard {:.0}",
            rate(times.oracle),
            rate(times.ours)
        );
    }
}

/// A case, both answers, for a report.
pub fn describe(case: &Case, c: &Compared) -> String {
    format!(
        "schema: {}\nold:    {}\nstored old: {}\nnew:    {}\nserver ({}): {:?}\nfieldguard:  {:?}\nnot evaluated: {:?}",
        case.crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        case.old.as_ref().map_or("none".into(), |o| o.to_string()),
        c.old.as_ref().map_or("none".into(), |o| o.to_string()),
        case.new,
        c.code,
        c.theirs,
        c.ours,
        c.not_evaluated
    )
}

#[test]
fn custom_resource_validation_agrees_with_kubernetes() {
    let Some(bin) = oracle::binary() else { return };
    let count: usize = std::env::var("FIELDGUARD_VALIDATION_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let seed = crate::support::seed("FIELDGUARD_VALIDATION_SEED");
    println!(
        "validation oracle: seed {seed} (reproduce: FIELDGUARD_VALIDATION_SEED={seed} FIELDGUARD_VALIDATION_CASES={count})"
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let mut oracle = Oracle::start(&bin);
    let (mut tally, mut times) = (Tally::default(), Times::default());
    let mut dump = std::env::var_os("FIELDGUARD_VALIDATION_DUMP")
        .map(|p| std::fs::File::create(p).expect("dump file"));
    while tally.cases < count {
        let mut batch = Vec::new();
        while batch.len() < 500 && tally.cases + batch.len() < count {
            batch.extend(group(&mut rng));
        }
        batch.truncate(count - tally.cases);
        let outcomes = run(&mut oracle, &batch, &mut times);
        for (case, o) in batch.iter().zip(outcomes) {
            if let (Some(f), Outcome::Compared(c)) = (dump.as_mut(), &o)
                && let Some(k) = &c.class
            {
                use std::io::Write;
                let line = json!({"class": k, "crd": case.crd, "old": case.old, "new": case.new,
                                  "server": c.theirs, "fieldguard": c.ours,
                                  "not_evaluated": c.not_evaluated});
                writeln!(f, "{line}").unwrap();
            }
            tally.add(case, o);
        }
    }
    tally.print(seed, &times);
    let undocumented: Vec<_> = tally
        .classes
        .iter()
        .filter(|(k, _)| classify::documented(k).is_none())
        .collect();
    if std::env::var_os("FIELDGUARD_VALIDATION_MINIMIZE").is_some() {
        for (k, (_, case, _)) in undocumented.iter().take(30) {
            let (small, c) = minimize::minimize(&mut oracle, case, k);
            println!("\n=== minimized: {k}\n{}", describe(&small, &c));
        }
    }
    assert!(
        undocumented.is_empty(),
        "{} undocumented classes of disagreement; the first example of each:\n{}",
        undocumented.len(),
        undocumented
            .iter()
            .map(|(k, (_, case, c))| format!("--- {k}\n{}", describe(case, c)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        tally.input_errors.is_empty(),
        "the oracle refused generated input: {:?}",
        tally.input_errors
    );
}
