//! `fieldguard check` at scale: a 1,000-object manifest set (the bundled release, repeated
//! across namespaces, as `helm template` prints it) against a 10,000-object snapshot (the
//! bundled cluster snapshot, repeated, as `kubectl get -o json` prints it). Reports the wall
//! time of the whole command (process start, parsing, schema lookup, prediction, report) and
//! of the in-process stages. Run: `cargo bench --bench check`.

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::check::{self, Force, Options};
use fieldguard::live::ObjectRef;
use fieldguard::live::snapshot::Snapshot;
use fieldguard::live::state::{self, SnapshotState};
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
    // `FIELDGUARD_BENCH_ONLY=yaml`: the YAML comparison alone, repeated (for a profiler).
    if std::env::var("FIELDGUARD_BENCH_ONLY").as_deref() == Ok("yaml") {
        for _ in 0..20 {
            yaml(&rel);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    // `FIELDGUARD_BENCH_ONLY=json`: the snapshot JSON comparison alone, repeated.
    if std::env::var("FIELDGUARD_BENCH_ONLY").as_deref() == Ok("json") {
        for _ in 0..5 {
            scan(&snap);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let rounds = 5;

    // In-process stages.
    let (mut t_snap, mut t_parse, mut t_resolve, mut t_read, mut t_predict, mut t_report) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut summary = None;
    for _ in 0..rounds {
        let t = Instant::now();
        let s = Snapshot::load(&[Input::Path(snap.clone())], &mut std::io::empty()).unwrap();
        let mut catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        s.extend_catalog(&mut catalog).unwrap();
        let n = s.len();
        let s = SnapshotState::new(s, catalog.clone());
        t_snap.push(t.elapsed());
        let st = stages(&rel, &s, catalog);
        t_parse.push(st.parse);
        t_resolve.push(st.resolve);
        t_read.push(st.read);
        t_predict.push(st.predict);
        t_report.push(st.json);
        let (r, text) = (st.report, st.text);
        summary = Some((r.summary(), n, text.len()));
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
    println!("    read live objects      {}", ms(median(t_read)));
    println!("    predict                {}", ms(median(t_predict)));
    println!("    render JSON            {}", ms(median(t_report)));

    // The command as users run it.
    let mut wall = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let o = command(&snap, &rel);
        wall.push(t.elapsed());
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    println!(
        "  end to end (`fieldguard check -o json`, process included): median {} (min {}, max {}) — target ≤ 100 ms (issue 19)",
        ms(median(wall.clone())),
        ms(*wall.iter().min().unwrap()),
        ms(*wall.iter().max().unwrap())
    );
    scan(&snap);
    yaml(&rel);
    scaling(&dir, &snap);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fieldguard check -o json --snapshot SNAP RELEASE`, as users run it.
fn command(snap: &std::path::Path, release: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .args([
            "check",
            "--field-manager",
            "helm",
            "-o",
            "json",
            "--snapshot",
        ])
        .arg(snap)
        .arg(release)
        .output()
        .unwrap()
}

/// The in-process stages of one check of `release` against `live` (types from `catalog`).
struct Stages {
    parse: Duration,
    resolve: Duration,
    /// The live objects of the targets read from the snapshot (parsed on first read).
    read: Duration,
    predict: Duration,
    json: Duration,
    report: check::Report,
    text: String,
}

fn stages(release: &std::path::Path, snapshot: &SnapshotState, mut catalog: Catalog) -> Stages {
    let t = Instant::now();
    let loaded = manifest::load(&[Input::Path(release.to_path_buf())], &mut std::io::empty());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors.first());
    let parse = t.elapsed();
    let t = Instant::now();
    let targets = check::resolve(loaded.documents, &mut catalog, "default").unwrap();
    let resolve = t.elapsed();
    let t = Instant::now();
    let refs: Vec<(ObjectRef, String)> = targets
        .iter()
        .map(|t| (t.object_ref.clone(), t.info.gvk.api_version()))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let live = rt.block_on(state::fetch(snapshot, &refs, true)).unwrap();
    let read = t.elapsed();
    let t = Instant::now();
    let opts = Options {
        field_manager: "helm".into(),
        force: Force::None,
        namespace: "default".into(),
        now: 0,
    };
    let report = check::run(&targets, &live, &opts, None, &mut |_, _| {});
    let predict = t.elapsed();
    let t = Instant::now();
    let text = report::render(&report, Format::Json, false);
    let json = t.elapsed();
    Stages {
        parse,
        resolve,
        read,
        predict,
        json,
        report,
        text,
    }
}

/// Reading the snapshot's JSON, in the same run: the skim a snapshot is loaded with, the strict
/// parse into values it replaces, and serde_json's scan into `RawValue` (no checks beyond the
/// grammar) as the floor.
fn scan(snap: &std::path::Path) {
    let texts: Vec<String> = std::fs::read_dir(snap)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let rate = |f: &dyn Fn(&str)| {
        let runs: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                texts.iter().for_each(|x| f(x));
                t.elapsed()
            })
            .collect();
        bytes as f64 / median(runs).as_secs_f64() / 1e6
    };
    use fieldguard::value::json::{parse_strict, parse_strict_by_serde};
    let skim = rate(&|x| assert!(fieldguard::value::skim::top(x).is_some()));
    let parse = rate(&|x| assert!(parse_strict(x.as_bytes()).is_ok()));
    let serde = rate(&|x| assert!(parse_strict_by_serde(x.as_bytes()).is_ok()));
    let raw = rate(&|x| {
        assert!(serde_json::from_str::<&serde_json::value::RawValue>(x).is_ok());
    });
    println!(
        "  snapshot JSON ({} MB, one thread, medians of 5): skim {skim:.0} MB/s, strict parse into values {parse:.0} MB/s ({:.1}×), serde_json RawValue scan {raw:.0} MB/s",
        bytes / 1_000_000,
        skim / parse
    );
    println!(
        "  the strict parse: the direct reader {parse:.0} MB/s, serde_json into the same values {serde:.0} MB/s ({:.1}×)",
        parse / serde
    );
}

/// Reading the release's YAML, in the same run: the block reader `check` uses, and yaml-rust2's
/// events (what every stream went through before it).
fn yaml(release: &std::path::Path) {
    use fieldguard::value::yaml::{
        YamlDoc, YamlError, YamlOptions, parse_documents, parse_documents_by_events,
    };
    let text = std::fs::read_to_string(release.join("release.yaml")).unwrap();
    let opts = YamlOptions::default();
    let rate = |f: fn(&str, &YamlOptions) -> Result<Vec<YamlDoc>, YamlError>| {
        let runs: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                let docs = f(&text, &opts).unwrap();
                assert!(docs.len() >= 1000);
                t.elapsed()
            })
            .collect();
        text.len() as f64 / median(runs).as_secs_f64() / 1e6
    };
    let (block, events) = (rate(parse_documents), rate(parse_documents_by_events));
    println!(
        "  release YAML ({} KB, one stream, one thread, medians of 5): {block:.1} MB/s, through yaml-rust2's events {events:.1} MB/s ({:.1}×)",
        text.len() / 1000,
        block / events
    );
}

/// The same command at 1, 100, 1,000 and 10,000 manifests against the same snapshot: the
/// in-process stages that grow with the manifests, and the whole command.
fn scaling(dir: &std::path::Path, snap: &std::path::Path) {
    println!("  scaling with the manifests (same 10,003-object snapshot; medians of 3):");
    println!(
        "  {:>9} | {:>9} | {:>9} | {:>9} | {:>9} | {:>9} | {:>11}",
        "manifests", "parse", "resolve", "read live", "predict", "JSON", "end to end"
    );
    let s = Snapshot::load(&[Input::Path(snap.to_path_buf())], &mut std::io::empty()).unwrap();
    let mut base = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    s.extend_catalog(&mut base).unwrap();
    let mut prev: Option<(usize, f64)> = None;
    for n in [1, 100, 1_000, 10_000] {
        let file = common::release_of(dir, n);
        let (mut parse, mut resolve, mut read, mut predict, mut json, mut wall) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..3 {
            // A fresh state: each round parses the live objects it reads, as a command does.
            let state = SnapshotState::new(s.clone(), base.clone());
            let st = stages(&file, &state, base.clone());
            assert_eq!(st.report.summary().objects, n);
            parse.push(st.parse);
            resolve.push(st.resolve);
            read.push(st.read);
            predict.push(st.predict);
            json.push(st.json);
            let t = Instant::now();
            let o = command(snap, &file);
            wall.push(t.elapsed());
            assert!(
                matches!(o.status.code(), Some(0 | 1)),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let stages = median(parse.clone())
            + median(resolve.clone())
            + median(read.clone())
            + median(predict.clone())
            + median(json.clone());
        println!(
            "  {:>9} | {:>9} | {:>9} | {:>9} | {:>9} | {:>9} | {:>11}",
            n,
            ms(median(parse)),
            ms(median(resolve)),
            ms(median(read)),
            ms(median(predict)),
            ms(median(json)),
            ms(median(wall))
        );
        let secs = stages.as_secs_f64();
        if let Some((pn, ps)) = prev {
            println!(
                "  {:>9}   {pn} → {n} manifests ({:.0}×): manifest stages {:.1}×",
                "",
                n as f64 / pn as f64,
                secs / ps
            );
        }
        prev = Some((n, secs));
    }
}
