//! Reports checked against their formats' schemas, as CI consumers read them: SARIF 2.1.0
//! (OASIS schema), JUnit (Surefire XSD), fieldguard's own JSON (`docs/check-report.schema.json`)
//! — with the validators `scripts/setup.sh` installs into `.venv`.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> Option<PathBuf> {
    let p = root().join(".venv/bin/python");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("FIELDGUARD_REQUIRE_VALIDATORS").is_none(),
        "report validators missing: run scripts/setup.sh"
    );
    None
}

/// Validates a report of `kind` (`sarif`, `junit`, `json`); panics with the schema's
/// complaints.
pub fn validate(kind: &str, bytes: &[u8]) {
    let Some(py) = python() else {
        eprintln!("skipping schema validation ({kind}): run scripts/setup.sh");
        return;
    };
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let f = std::env::temp_dir().join(format!(
        "fieldguard-report-{}-{n}.{kind}",
        std::process::id()
    ));
    std::fs::write(&f, bytes).unwrap();
    let out = Command::new(py)
        .arg(root().join("scripts/validate-report.py"))
        .arg(kind)
        .arg(&f)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&f);
    assert!(
        out.status.success(),
        "{kind} report invalid:\n{}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(bytes)
    );
}

/// Parses a command's JSON output; a check report (or its InvalidInput) is validated against
/// the format's schema on the way.
pub fn parse_json(bytes: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)));
    if v["apiVersion"] == "fieldguard.dev/v1"
        && matches!(v["kind"].as_str(), Some("CheckReport" | "InvalidInput"))
    {
        validate("json", bytes);
    }
    v
}
