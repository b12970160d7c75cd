//! `fieldguard check` at scale: a 1,000-object manifest set (the bundled release, repeated
//! across namespaces, as `helm template` prints it) against a 10,000-object snapshot (the
//! bundled cluster snapshot, repeated, as `kubectl get -o json` prints it). Reports the wall
//! time of the whole command (process start, parsing, schema lookup, prediction, report) and
//! of the in-process stages. Run: `cargo bench --bench check`.

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::check::{self, Force, Options};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::manifest::{self, Input};
use fieldguard::report::{self, Format};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RELEASE_COPIES: usize = 167; // × 6 objects = 1,002
const SNAPSHOT_COPIES: usize = 1_667; // × 6 objects = 10,002 (+ the CRD)

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate(dir: &Path) -> (PathBuf, PathBuf) {
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

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("fieldguard-bench-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (rel, snap) = generate(&dir);
    let rounds = 5;

    // In-process stages.
    let (mut t_snap, mut t_parse, mut t_resolve, mut t_predict, mut t_report) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut summary = None;
    for _ in 0..rounds {
        let t = Instant::now();
        let s = Snapshot::load(&[Input::Path(snap.clone())], &mut std::io::empty()).unwrap();
        let mut catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        s.extend_catalog(&mut catalog).unwrap();
        t_snap.push(t.elapsed());
        let t = Instant::now();
        let loaded = manifest::load(&[Input::Path(rel.clone())], &mut std::io::empty());
        assert!(loaded.errors.is_empty());
        t_parse.push(t.elapsed());
        let t = Instant::now();
        let targets = check::resolve(loaded.documents, &mut catalog, "default").unwrap();
        t_resolve.push(t.elapsed());
        let t = Instant::now();
        let opts = Options {
            field_manager: "helm".into(),
            force: Force::None,
            namespace: "default".into(),
            now: 0,
        };
        let r = check::run(&targets, &s, &opts, &mut |_, _| {});
        t_predict.push(t.elapsed());
        let t = Instant::now();
        let text = report::render(&r, Format::Json, false);
        t_report.push(t.elapsed());
        summary = Some((r.summary(), s.len(), text.len()));
    }
    let (sum, n_snap, bytes) = summary.unwrap();
    println!(
        "check: {} manifests vs {} snapshot objects ({} conflicted objects, {} conflicts; JSON report {} KiB)",
        sum.objects,
        n_snap,
        sum.conflicted,
        sum.conflicts,
        bytes / 1024
    );
    println!("  in-process medians of {rounds}:");
    println!("    load snapshot + CRDs   {}", ms(median(t_snap)));
    println!("    parse manifests        {}", ms(median(t_parse)));
    println!("    resolve types          {}", ms(median(t_resolve)));
    println!("    predict                {}", ms(median(t_predict)));
    println!("    render JSON            {}", ms(median(t_report)));

    // The command as users run it.
    let bin = env!("CARGO_BIN_EXE_fieldguard");
    let mut wall = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let o = Command::new(bin)
            .args([
                "check",
                "--field-manager",
                "helm",
                "-o",
                "json",
                "--snapshot",
            ])
            .arg(&snap)
            .arg(&rel)
            .output()
            .unwrap();
        wall.push(t.elapsed());
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    println!(
        "  end to end (`fieldguard check -o json`, process included): median {} (min {}, max {}) — target ≤ 1 s",
        ms(median(wall.clone())),
        ms(*wall.iter().min().unwrap()),
        ms(*wall.iter().max().unwrap())
    );
    let _ = std::fs::remove_dir_all(&dir);
}
