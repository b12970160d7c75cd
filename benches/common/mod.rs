//! Shared by the benchmarks: the bundled example scaled up.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub const RELEASE_COPIES: usize = 167; // × 6 objects = 1,002
pub const SNAPSHOT_COPIES: usize = 1_667; // × 6 objects = 10,002 (+ the CRD)

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes a 1,002-object release (the bundled one repeated across namespaces, as `helm
/// template` prints it) and a 10,003-object snapshot (the bundled one repeated, as
/// `kubectl get -o json` prints it) under `dir`; returns (release dir, snapshot dir).
pub fn generate(dir: &Path) -> (PathBuf, PathBuf) {
    let release = std::fs::read_to_string(root().join("examples/release/checkout.yaml")).unwrap();
    let cluster = std::fs::read_to_string(root().join("examples/cluster/shop.yaml")).unwrap();
    let rel_dir = dir.join("release");
    let snap_dir = dir.join("snapshot");
    std::fs::create_dir_all(&rel_dir).unwrap();
    std::fs::create_dir_all(snap_dir.join("crds")).unwrap();
    std::fs::copy(
        root().join("examples/cluster/crds/certificates.cert-manager.io.yaml"),
        snap_dir.join("crds/certificates.cert-manager.io.yaml"),
    )
    .unwrap();
    let mut out = String::new();
    for i in 0..RELEASE_COPIES {
        let ns = format!("shop{i}");
        out.push_str(&release.replace("shop", &ns).replace(
            "metadata:\n  name: ",
            &format!("metadata:\n  namespace: {ns}\n  name: "),
        ));
    }
    std::fs::write(rel_dir.join("release.yaml"), out).unwrap();
    // The snapshot as kubectl's JSON (one List per namespace).
    let list = fieldguard::value::yaml::parse_one(&cluster).unwrap();
    let json = fieldguard::value::json::to_string(&list, fieldguard::value::json::Style::PLAIN);
    for i in 0..SNAPSHOT_COPIES {
        std::fs::write(
            snap_dir.join(format!("ns{i:05}.json")),
            json.replace("shop", &format!("shop{i}")),
        )
        .unwrap();
    }
    (rel_dir, snap_dir)
}

/// Writes a release of `n` documents under `dir` (the bundled release's documents, across
/// namespaces `shop0`, `shop1`, … as [`generate`] names them); returns its file.
pub fn release_of(dir: &Path, n: usize) -> PathBuf {
    let release = std::fs::read_to_string(root().join("examples/release/checkout.yaml")).unwrap();
    let docs: Vec<&str> = release
        .split("\n---\n")
        .map(|d| d.trim_start_matches("---\n"))
        .filter(|d| d.contains("kind:"))
        .collect();
    let mut out = String::new();
    for i in 0..n {
        let ns = format!("shop{}", i / docs.len());
        out.push_str("---\n");
        out.push_str(&docs[i % docs.len()].replace("shop", &ns).replace(
            "metadata:\n  name: ",
            &format!("metadata:\n  namespace: {ns}\n  name: "),
        ));
        out.push('\n');
    }
    let file = dir.join(format!("release-{n}.yaml"));
    std::fs::write(&file, out).unwrap();
    file
}
