//! Differential tests: the engine against the reference oracle (`ssa-oracle`, the real
//! structured-merge-diff v6.3.3, as Kubernetes 1.36 pins it, behind kube-apiserver's field-manager
//! layers).
//!
//! Every case is run through both; results must agree on conflicts (manager and path), the
//! conflict message, the resulting object, whether it changed, and the resulting managedFields
//! (entries, times, and FieldsV1 byte for byte). The one documented difference: the *wording* of
//! non-conflict errors (the reference prints Go internals such as
//! `&value.valueUnstructured{Value:1}`); there only the presence of an error is compared.
//!
//! The oracle is found at `$SSA_ORACLE` or `.oracle/bin/ssa-oracle` (built by
//! `scripts/setup.sh`). Without it these tests fail when `FIELDGUARD_REQUIRE_ORACLE=1` (CI) and
//! are skipped with a message otherwise.

use fieldguard::replay::{Replayer, generate::generate, is_synthetic};
use fieldguard::value::Value;
use fieldguard::value::json::{self, Style};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn oracle() -> Option<PathBuf> {
    let p = std::env::var_os("SSA_ORACLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".oracle/bin/ssa-oracle")
        });
    if p.exists() {
        return Some(p);
    }
    if std::env::var("FIELDGUARD_REQUIRE_ORACLE").as_deref() == Ok("1") {
        panic!(
            "reference oracle not found at {} (run scripts/setup.sh)",
            p.display()
        );
    }
    eprintln!(
        "SKIPPED: reference oracle not found at {} (run scripts/setup.sh)",
        p.display()
    );
    None
}

fn shared_dir() -> PathBuf {
    std::env::var_os("FIELDGUARD_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

fn run_oracle(bin: &PathBuf, lines: &[String]) -> Vec<String> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start oracle");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = lines.join("\n") + "\n";
    let writer = std::thread::spawn(move || {
        stdin.write_all(input.as_bytes()).expect("write cases");
    });
    let out = child.wait_with_output().expect("oracle output");
    writer.join().expect("writer");
    assert!(out.status.success(), "oracle exited with {}", out.status);
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

fn run_ours(lines: &[String]) -> Vec<String> {
    run_with(Replayer::new(), lines)
}

fn run_with(mut r: Replayer, lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| r.run_line(l.as_bytes()).to_json(&is_synthetic))
        .collect()
}

/// Replaces the text of non-conflict errors (compared by presence only).
fn normalize(v: &mut Value) {
    let is_conflict = v
        .get_path(&["conflicts"])
        .and_then(Value::as_list)
        .is_some_and(|c| !c.is_empty());
    if let Some(m) = v.as_map_mut() {
        if !is_conflict && m.get("error").is_some() {
            m.insert("error", Value::from("<error>"));
        }
        if let Some(Value::List(steps)) = m.get_mut("steps") {
            steps.iter_mut().for_each(normalize);
        }
    }
}

/// `Ok(true)`: byte-identical; `Ok(false)`: equal after normalisation; `Err`: a disagreement.
fn agree(ours: &str, theirs: &str) -> Result<bool, String> {
    if ours == theirs {
        return Ok(true);
    }
    let mut a = json::parse_str(ours).map_err(|e| format!("our output is not JSON: {e}"))?;
    let mut b = json::parse_str(theirs).map_err(|e| format!("oracle output is not JSON: {e}"))?;
    normalize(&mut a);
    normalize(&mut b);
    // Same values, and same key order inside FieldsV1 (PLAIN keeps document order).
    if a.strict_eq(&b) && json::to_string(&a, Style::PLAIN) == json::to_string(&b, Style::PLAIN) {
        Ok(false)
    } else {
        Err(format!("ours:   {ours}\ntheirs: {theirs}"))
    }
}

fn compare_all(label: &str, cases: &[String], ours: &[String], theirs: &[String]) {
    assert_eq!(ours.len(), cases.len(), "{label}: our result count");
    assert_eq!(theirs.len(), cases.len(), "{label}: oracle result count");
    let (mut identical, mut equal, mut bad) = (0, 0, Vec::new());
    for (i, ((c, o), t)) in cases.iter().zip(ours).zip(theirs).enumerate() {
        match agree(o, t) {
            Ok(true) => identical += 1,
            Ok(false) => equal += 1,
            Err(d) => bad.push(format!("case {i}: {c}\n{d}")),
        }
    }
    println!(
        "{label}: {} of {} cases agree with the oracle ({identical} byte-identical, {equal} differing only in error wording), {} disagree",
        identical + equal,
        cases.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{label}: {} disagreements; first ones:\n{}",
        bad.len(),
        bad.iter().take(3).cloned().collect::<Vec<_>>().join("\n\n")
    );
}

#[test]
fn reference_cases_agree_with_oracle() {
    let Some(bin) = oracle() else { return };
    // The shared reference cases and the bundled examples.
    let mut cases = Vec::new();
    let mut files = Vec::new();
    for dir in [
        shared_dir().join("oracle/cases"),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/replay"),
    ] {
        let mut found: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        found.sort();
        files.extend(found);
    }
    for f in files {
        for line in std::fs::read_to_string(&f).expect("read").lines() {
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') && !t.starts_with("//") {
                cases.push(t.to_string());
            }
        }
    }
    assert!(
        cases.len() >= 26,
        "expected the shared reference cases, found {}",
        cases.len()
    );
    let ours = run_ours(&cases);
    let theirs = run_oracle(&bin, &cases);
    compare_all("reference cases", &cases, &ours, &theirs);
    let prepared = run_with(Replayer::with_prepared_live(), &cases);
    compare_all(
        "reference cases, prepared live objects",
        &cases,
        &prepared,
        &theirs,
    );
    // And every expectation in them holds for the engine.
    let mut r = Replayer::new();
    for c in &cases {
        let res = r.run_line(c.as_bytes());
        if let Some(chk) = res.result.check {
            assert!(chk.passed, "{}: {:?}", res.name, chk.failures);
        }
    }
}

#[test]
fn random_cases_agree_with_oracle() {
    let Some(bin) = oracle() else { return };
    let count: usize = std::env::var("FIELDGUARD_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let seed = super::support::seed("FIELDGUARD_DIFF_SEED");
    println!(
        "random cases: seed {seed} (reproduce: fieldguard replay --generate {count} --seed {seed})"
    );
    let cases = generate(seed, count);
    let ours = run_ours(&cases);
    let theirs = run_oracle(&bin, &cases);
    compare_all("random cases", &cases, &ours, &theirs);
    // The service's path: applies on prepared live objects (one-pass apply walk, prune
    // shortcuts) must agree as well.
    let prepared = run_with(Replayer::with_prepared_live(), &cases);
    compare_all(
        "random cases, prepared live objects",
        &cases,
        &prepared,
        &theirs,
    );
}
