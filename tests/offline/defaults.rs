//! A custom resource's schema defaults through `fieldguard check` against a snapshot (the real
//! apiserver's behaviour, which `tests/real/validation.rs` and `tests/real/differential.rs`
//! compare with, without the real tier): a create that leaves out a required field with a
//! default is predicted created, not refused; a field an apply drops that the server fills in
//! again is not reported removed but noted, with the value it gets; dropping a field whose
//! value is its default changes only ownership.

use super::support;
use serde_json::Value;
use std::path::PathBuf;

const CRD: &str = include_str!("../data/realapi/sprocket-crd.yaml");

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fieldguard-test-defaults-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("snapshot")).unwrap();
    d
}

/// A stored Sprocket (defaults filled in, as the server serves it) whose `spec.mode` bob set.
fn live(name: &str, mode: &str) -> String {
    format!(
        r#"{{"apiVersion":"fieldguard.test/v1","kind":"Sprocket","metadata":{{"name":"{name}","namespace":"default","uid":"u-{name}","resourceVersion":"7","creationTimestamp":"2026-11-27T10:00:00Z","generation":1,
"managedFields":[{{"manager":"bob","operation":"Apply","apiVersion":"fieldguard.test/v1","time":"2026-11-27T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{"f:mode":{{}}}}}}}}]}},
"spec":{{"mode":"{mode}","limits":{{"cpu":"1","memory":"1Gi"}}}}}}"#
    )
}

fn sprocket(name: &str) -> String {
    format!(
        "apiVersion: fieldguard.test/v1\nkind: Sprocket\nmetadata:\n  name: {name}\n  namespace: default\nspec: {{}}\n"
    )
}

#[test]
fn defaults_are_filled_in_before_validation_and_reported_as_such() {
    let dir = tempdir();
    std::fs::write(dir.join("snapshot/crd.yaml"), CRD).unwrap();
    std::fs::write(dir.join("snapshot/slow.json"), live("slow", "slow")).unwrap();
    std::fs::write(dir.join("snapshot/fast.json"), live("fast", "fast")).unwrap();
    let manifests = ["fresh", "slow", "fast"].map(|n| {
        let p = dir.join(format!("{n}.yaml"));
        std::fs::write(&p, sprocket(n)).unwrap();
        p.to_str().unwrap().to_string()
    });
    let snapshot = dir.join("snapshot");
    let mut args = vec![
        "check",
        "--snapshot",
        snapshot.to_str().unwrap(),
        "--field-manager",
        "bob",
        "-o",
        "json",
    ];
    args.extend(manifests.iter().map(String::as_str));
    let out = support::process::run(&args, None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let object = |name: &str| {
        report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {report}"))
            .clone()
    };
    // `mode` is required and has a default: the create is not refused.
    assert_eq!(object("fresh")["verdict"], "created", "{report}");
    // bob drops `mode: slow`: the server puts `fast` back; nothing is removed.
    let slow = object("slow");
    assert_eq!(slow["verdict"], "configured", "{slow}");
    assert_eq!(slow["removed"], serde_json::json!([]), "{slow}");
    assert_eq!(
        slow["notes"],
        serde_json::json!([
            ".spec.mode: dropped by this apply, and the server fills in its default (\"fast\")"
        ]),
        "{slow}"
    );
    // bob drops `mode: fast`, its default: only bob's ownership changes.
    assert_eq!(object("fast")["verdict"], "ownership-only", "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
