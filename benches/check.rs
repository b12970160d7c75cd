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
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::generate;

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
        let s = s.fetched();
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
        let r = check::run(&targets, &s, &opts, None, &mut |_, _| {});
        t_predict.push(t.elapsed());
        let t = Instant::now();
        let text = report::render(&r, Format::Json, false);
        t_report.push(t.elapsed());
        summary = Some((r.summary(), s.objects.len(), text.len()));
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
