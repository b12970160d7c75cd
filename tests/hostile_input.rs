//! Hostile input never panics the check pipeline, and every problem it reports is located.

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::check::{self, Force, Options};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::manifest::{self, Input, Loaded};
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

fn snapshot() -> &'static (Snapshot, Catalog) {
    static S: OnceLock<(Snapshot, Catalog)> = OnceLock::new();
    S.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let snap = Snapshot::load(
            &[Input::Path(root.join("examples/cluster"))],
            &mut std::io::empty(),
        )
        .unwrap();
        let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
        snap.extend_catalog(&mut c).unwrap();
        (snap, c)
    })
}

const RELEASE: &str = include_str!("../examples/release/checkout.yaml");

/// Runs the whole pipeline on `bytes`; returns whether anything was predicted.
fn pipeline(bytes: &[u8]) -> bool {
    let mut loaded: Loaded = manifest::load(&[], &mut std::io::empty());
    manifest::parse_into(&Arc::from("h.yaml"), bytes, &mut loaded);
    for e in &loaded.errors {
        assert_eq!(&*e.file, "h.yaml");
        assert!(e.line.is_some() || e.doc.is_none(), "unlocated: {e}");
        assert!(!e.message.is_empty());
    }
    if !loaded.errors.is_empty() {
        return false;
    }
    let (snap, catalog) = snapshot();
    let mut catalog = catalog.clone();
    let Ok(targets) = check::resolve(loaded.documents, &mut catalog, "shop") else {
        return false;
    };
    let opts = Options {
        field_manager: "helm".into(),
        force: Force::None,
        namespace: "shop".into(),
        now: 0,
    };
    let report = check::run(&targets, snap, &opts, &mut |_, _| {});
    for o in &report.objects {
        assert!(o.line >= 1);
        for c in &o.conflicts {
            assert!(c.line >= 1);
        }
    }
    true
}

/// Edits drawn from characters that matter to YAML.
fn edit() -> impl Strategy<Value = (usize, u8, u8)> {
    (
        any::<usize>(),
        0u8..3,
        prop::sample::select(b":-[]{}&*!|>'\"#%@`, \n\t\\?0aZ\xff\xc3".to_vec()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        pipeline(&bytes);
    }

    #[test]
    fn mutated_release(edits in prop::collection::vec(edit(), 1..6)) {
        let mut b = RELEASE.as_bytes().to_vec();
        for (at, op, c) in edits {
            let i = at % (b.len() + 1);
            match op {
                0 => b.insert(i, c),
                1 if i < b.len() => { b.remove(i); }
                _ if i < b.len() => b[i] = c,
                _ => {}
            }
        }
        pipeline(&b);
    }

    #[test]
    fn nesting_and_aliases(depth in 1usize..300, fan in 1usize..12, levels in 1usize..9) {
        let nested = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: n}}\ndata: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        pipeline(nested.as_bytes());
        let mut y = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\nl0: &l0 [x]\n");
        for l in 1..levels {
            let refs = vec![format!("*l{}", l - 1); fan].join(", ");
            y.push_str(&format!("l{l}: &l{l} [{refs}]\n"));
        }
        pipeline(y.as_bytes());
    }
}

#[test]
fn the_release_itself_is_predicted() {
    assert!(pipeline(RELEASE.as_bytes()));
}
