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

const RELEASE: &str = include_str!("../../examples/release/checkout.yaml");

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
    let report = check::run(
        &targets,
        &snap.fetched().unwrap(),
        &opts,
        None,
        &mut |_, _| {},
    );
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

/// Everything a check can print about `bytes` (every report format, or the invalid-input
/// documents and the located problems), as one text.
fn every_output(bytes: &[u8]) -> String {
    use fieldguard::report::{self, Format};
    let mut loaded: Loaded = manifest::load(&[], &mut std::io::empty());
    manifest::parse_into(&Arc::from("h.yaml"), bytes, &mut loaded);
    let invalid = |errors: &[manifest::ManifestError]| -> String {
        let mut all: String = errors.iter().map(|e| format!("{e}\n")).collect();
        for f in [Format::Json, Format::Sarif, Format::Junit] {
            all.push_str(&report::render_errors(errors, f).unwrap_or_default());
        }
        all
    };
    if !loaded.errors.is_empty() {
        return invalid(&loaded.errors);
    }
    let (snap, catalog) = snapshot();
    let mut catalog = catalog.clone();
    let targets = match check::resolve(loaded.documents, &mut catalog, "shop") {
        Ok(t) => t,
        Err(errors) => return invalid(&errors),
    };
    let opts = Options {
        field_manager: "helm".into(),
        force: Force::All,
        namespace: "shop".into(),
        now: 0,
    };
    let r = check::run(
        &targets,
        &snap.fetched().unwrap(),
        &opts,
        None,
        &mut |_, _| {},
    );
    let mut all = invalid(&check::invalid_objects(&r, &targets));
    for f in [Format::Text, Format::Json, Format::Sarif, Format::Junit] {
        all.push_str(&report::render(&r, f, false));
    }
    all
}

/// A Secret value as a user might write it: a string, a bare number, hex, a boolean-looking
/// word, a nested map or list holding it.
fn secret_value() -> impl Strategy<Value = (String, String)> {
    let digits = (10_000_000u64..999_999_999_999).prop_map(|n| (n.to_string(), n.to_string()));
    let hex = (0x1000_0000u64..0xffff_ffff).prop_map(|n| (format!("0x{n:X}"), format!("{n:X}")));
    let word = "[a-zA-Z][a-zA-Z0-9+/]{11,20}".prop_map(|w| (w.clone(), w));
    prop_oneof![
        digits.clone(),
        hex,
        word.clone(),
        word.clone()
            .prop_map(|(w, s)| (format!("{{nested: {w}}}"), s)),
        digits.prop_map(|(w, s)| (format!("[{w}]"), s)),
        word.prop_map(|(w, s)| (format!("\"{w}\\u0000tail\""), s)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// No Secret value, whatever its type or its neighbours' damage, appears in anything a
    /// check prints (a Secret of that name exists in the snapshot too: conflicts are shown).
    #[test]
    fn secret_values_never_leak(
        (written, needle) in secret_value(),
        field in prop::sample::select(vec!["data", "stringData"]),
        name in prop::sample::select(vec!["checkout-db", "other", "Bad_Name", "x?y=z"]),
        edits in prop::collection::vec(edit(), 0..3),
    ) {
        let text = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: shop}}\n{field}:\n  password: {written}\n  other: aGk=\n"
        );
        let mut b = text.into_bytes();
        for (at, op, c) in edits {
            // Damage outside the value only: the value itself stays what the user wrote.
            let i = at % 40;
            match op {
                0 => b.insert(i, c),
                1 => { b.remove(i); }
                _ => b[i] = c,
            }
        }
        let out = every_output(&b);
        prop_assert!(!out.contains(&needle), "{needle} leaked:\n{out}");
    }

    /// Every request path built from names is escaped: whatever the name, the path has its
    /// segments and no query or fragment, and each segment decodes back to what it came from.
    #[test]
    fn request_paths_from_names_are_escaped(
        ns in ".{0,20}",
        name in ".{1,40}",
        api_version in prop::sample::select(vec!["v1", "apps/v1", "x.io/v1beta1"]),
    ) {
        let p = fieldguard::live::api::resource_path(api_version, "things", &ns, Some(&name));
        prop_assert!(!p.contains('?') && !p.contains('#'), "{p}");
        let segments: Vec<&str> = p.trim_start_matches('/').split('/').collect();
        let expected = if api_version.contains('/') { 3 } else { 2 }
            + if ns.is_empty() { 2 } else { 4 };
        prop_assert_eq!(segments.len(), expected, "{}", p);
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().unwrap().into_owned();
        prop_assert_eq!(decode(segments.last().unwrap()), name);
        if !ns.is_empty() {
            prop_assert_eq!(decode(segments[segments.len() - 3]), ns);
        }
    }

    /// A damaged snapshot is refused, located, never a panic.
    #[test]
    fn mutated_snapshot(edits in prop::collection::vec(edit(), 1..6)) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut b = std::fs::read(root.join("examples/cluster/shop.yaml")).unwrap();
        for (at, op, c) in edits {
            let i = at % (b.len() + 1);
            match op {
                0 => b.insert(i, c),
                1 if i < b.len() => { b.remove(i); }
                _ if i < b.len() => b[i] = c,
                _ => {}
            }
        }
        let dir = std::env::temp_dir().join(format!("fieldguard-snapshot-prop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("shop.yaml"), &b).unwrap();
        if let Err(errors) = Snapshot::load(&[Input::Path(dir.clone())], &mut std::io::empty()) {
            for e in errors {
                prop_assert!(e.file.ends_with("shop.yaml"), "{e}");
            }
        }
    }
}
