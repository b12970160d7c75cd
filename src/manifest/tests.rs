use super::*;
use crate::fieldpath::{KeyField, PathElement};

fn parse(text: &str) -> Loaded {
    let mut out = Loaded {
        check_identity: true,
        ..Loaded::default()
    };
    parse_into(&Arc::from("m.yaml"), text.as_bytes(), &mut out);
    out
}

fn one_error(text: &str) -> ManifestError {
    let l = parse(text);
    assert!(l.documents.is_empty(), "{:?}", l.documents);
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
    l.errors[0].clone()
}

const DEPLOY: &str = "\
# Source: shop/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: app
        image: nginx
        ports:
        - containerPort: 80
      - name: side
        image: busybox
";

#[test]
fn multi_document_yaml_with_empty_documents_and_origins() {
    let text =
        format!("---\n{DEPLOY}---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n");
    let l = parse(&text);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.documents.len(), 2);
    assert_eq!(l.documents[0].kind(), "Deployment");
    assert_eq!(l.documents[0].origin.doc, 1);
    assert_eq!(l.documents[1].origin.doc, 3);
    assert_eq!(l.documents[1].origin.line, 20);
}

#[test]
fn fields_map_to_their_lines() {
    let l = parse(DEPLOY);
    let d = &l.documents[0];
    let f = PathElement::field;
    assert_eq!(d.line_of(&[f("spec"), f("replicas")]), 7);
    let app = PathElement::key(vec![KeyField {
        name: "name".into(),
        value: Value::from("side"),
    }]);
    let path = [
        f("spec"),
        f("template"),
        f("spec"),
        f("containers"),
        app,
        f("image"),
    ];
    assert_eq!(d.line_of(&path), 16);
    // A port whose protocol is left to its default still finds its line.
    let port = PathElement::key(vec![
        KeyField {
            name: "containerPort".into(),
            value: Value::Int(80),
        },
        KeyField {
            name: "protocol".into(),
            value: Value::from("TCP"),
        },
    ]);
    let app0 = PathElement::key(vec![KeyField {
        name: "name".into(),
        value: Value::from("app"),
    }]);
    let path = [
        f("spec"),
        f("template"),
        f("spec"),
        f("containers"),
        app0,
        f("ports"),
        port,
    ];
    assert_eq!(d.line_of(&path), 14);
    // A field the manifest does not set: its nearest ancestor's line.
    assert_eq!(d.line_of(&[f("spec"), f("paused")]), 6);
}

#[test]
fn lists_are_flattened_with_item_origins() {
    let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n";
    let l = parse(text);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    let names: Vec<_> = l.documents.iter().map(|d| d.name()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(l.documents[1].origin.item, Some(1));
    assert_eq!(l.documents[1].origin.line, 7);
}

#[test]
fn json_documents_and_json_lists() {
    let text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMapList\",\n  \"items\": [\n    {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n     \"metadata\": {\"name\": \"x\"},\n     \"data\": {\"k\": \"v\"}}\n  ]\n}\n";
    let l = parse(text);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.documents.len(), 1);
    let d = &l.documents[0];
    assert_eq!(d.origin.line, 5);
    assert_eq!(
        d.line_of(&[PathElement::field("data"), PathElement::field("k")]),
        7
    );
}

#[test]
fn invalid_yaml_is_located() {
    let e = one_error("apiVersion: v1\nkind: [unclosed\n");
    assert_eq!(e.doc, Some(1));
    assert!(e.line.is_some_and(|l| l >= 2), "{e}");
}

#[test]
fn invalid_json_is_located() {
    let e = one_error("{\"apiVersion\": \"v1\",\n \"kind\": }\n");
    assert_eq!(e.line, Some(2), "{e}");
}

#[test]
fn duplicate_keys_are_errors_in_yaml_and_json() {
    let e = one_error("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n");
    assert!(e.message.contains("duplicate"), "{e}");
    assert_eq!(e.line, Some(5));
    let e = one_error("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\n\"kind\":\"Secret\"}");
    assert!(e.message.contains("duplicate key \"kind\""), "{e}");
    assert_eq!(e.line, Some(2));
}

#[test]
fn missing_identity_fields_are_reported_with_their_paths() {
    let l = parse("apiVersion: v1\nmetadata:\n  labels: {a: b}\n");
    let paths: Vec<_> = l.errors.iter().filter_map(|e| e.path.clone()).collect();
    assert_eq!(paths, [".kind", ".metadata.name"]);
    assert!(l.errors.iter().all(|e| e.doc == Some(1)));
    assert_eq!(l.errors[1].line, Some(2));
    for name in ["", "  name: \"\"\n", "  name: no\n"] {
        let e = one_error(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n{name}  generateName: x-\n"
        ));
        assert!(e.message.contains("generateName cannot be applied"), "{e}");
    }
    let e = one_error("apiVersion: 1\nkind: ConfigMap\nmetadata: {name: a}\n");
    assert!(e.message.contains("must be a string"), "{e}");
}

#[test]
fn a_namespace_that_is_not_a_string_is_refused_where_it_is() {
    // `no` is a boolean to Kubernetes' YAML reader; quoted, it is the namespace "no".
    let e = one_error("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: no\n");
    assert_eq!(e.path.as_deref(), Some(".metadata.namespace"));
    assert_eq!(e.line, Some(5));
    assert!(e.message.contains("must be a string, found boolean"), "{e}");
    assert!(e.message.contains("quote the value"), "{e}");
    let e = one_error(
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"namespace\":7}}",
    );
    assert!(e.message.contains("must be a string"), "{e}");
    assert!(!e.message.contains("quote"), "{e}");
    // Quoted, empty or null: a namespace, or none.
    for ns in ["\"no\"", "\"\"", "null", "~"] {
        let l = parse(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: {ns}\n"
        ));
        assert!(l.errors.is_empty(), "{ns}: {:?}", l.errors);
        assert_eq!(l.documents.len(), 1);
    }
    assert_eq!(
        parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: \"no\"\n")
            .documents[0]
            .namespace(),
        Some("no")
    );
}

#[test]
fn invalid_utf8_is_located() {
    let mut out = Loaded {
        check_identity: true,
        ..Loaded::default()
    };
    parse_into(
        &Arc::from("bad.yaml"),
        b"apiVersion: v1\nkind: ConfigMap\ndata: {a: \"\xff\"}\n",
        &mut out,
    );
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].line, Some(3));
    assert!(out.errors[0].message.contains("UTF-8"));
}

#[test]
fn oversized_documents_are_refused() {
    let big = "x".repeat(crate::value::MAX_DOCUMENT_BYTES + 10);
    let e = one_error(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{a: {big}}}\n"
    ));
    assert!(e.message.contains("more than the limit"), "{e}");
}

#[test]
fn deep_nesting_and_alias_bombs_fail_fast() {
    let deep = format!("a: {}1{}\n", "[".repeat(200), "]".repeat(200));
    let e = one_error(&deep);
    assert!(e.message.contains("nest"), "{e}");
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 0..8 {
        let prev = if i == 0 {
            "a".to_string()
        } else {
            format!("b{}", i - 1)
        };
        bomb.push_str(&format!(
            "b{i}: &b{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
        ));
    }
    let e = one_error(&bomb);
    assert!(e.message.contains("alias"), "{e}");
}

/// Aliases expand a document to no more than the document limit of whoever reads it: a
/// request to the service (its own `--max-document-bytes`), a snapshot (its fixed limit, or
/// `--max-snapshot-bytes` when lower); each refusal located and naming its setting.
#[test]
fn aliases_expand_a_document_to_no_more_than_its_limit() {
    let big = "x".repeat(1 << 20);
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata:\n  big: &big {big}\n{}",
        (0..40)
            .map(|i| format!("  k{i}: *big\n"))
            .collect::<String>()
    );
    let name: Arc<str> = Arc::from("bomb.yaml");
    let refused = |limits: Limits| {
        let mut out = Loaded::new(limits).on_one_thread();
        parse_into(&name, text.as_bytes(), &mut out);
        assert!(out.documents.is_empty(), "{:?}", out.documents);
        assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
        out.errors[0].to_string()
    };
    let request = Limits {
        document_bytes: 2 << 20,
        ..Limits::REQUESTS
    };
    assert_eq!(
        refused(request),
        "bomb.yaml:7: document 1: document expands aliases past 2097152 bytes, more than the limit of 2 MiB (--max-document-bytes)"
    );
    // A snapshot's documents may be huge, its aliases may not.
    assert_eq!(
        refused(Limits::SNAPSHOT),
        "bomb.yaml:8: document 1: document expands aliases past 3145728 bytes, more than the 3 MiB aliases may expand a snapshot's document to (exported objects hold no aliases)"
    );
    let lowered = Limits {
        document_bytes: 2 << 20,
        ..Limits::SNAPSHOT
    };
    let e = refused(lowered);
    assert!(
        e.starts_with("bomb.yaml:7: document 1: document expands aliases past 2097152 bytes")
            && e.contains("(--max-snapshot-bytes)"),
        "{e}"
    );
    // Within the limit, the aliases are read.
    let two = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata:\n  big: &big {big}\n  k0: *big\n"
    );
    let mut out = Loaded::new(Limits::SNAPSHOT);
    parse_into(&name, two.as_bytes(), &mut out);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.documents.len(), 1);
}

#[test]
fn non_objects_are_refused() {
    let e = one_error("- a\n- b\n");
    assert!(e.message.contains("expected an object"), "{e}");
}

#[test]
fn directories_are_read_recursively_in_name_order() {
    let dir = std::env::temp_dir().join(format!("fieldguard-manifest-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sub/a.json"),
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
    let l = load(&[Input::Path(dir.clone())], &mut std::io::empty());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    let names: Vec<_> = l.documents.iter().map(|d| d.name()).collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn stdin_is_read() {
    let mut input = std::io::Cursor::new(DEPLOY.as_bytes());
    let l = load(&[Input::Stdin], &mut input);
    assert_eq!(l.documents.len(), 1);
    assert_eq!(&*l.documents[0].origin.file, "<stdin>");
}

#[test]
fn printed_paths_find_their_lines_with_dotted_keys_list_maps_and_sets() {
    let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    example.com/a.b: x
  finalizers:
  - example.com/f
spec:
  containers:
  - name: app
    args: [a, b]
    ports:
    - containerPort: 80
";
    let l = parse(text);
    let d = &l.documents[0];
    assert_eq!(
        d.line_of_printed(".metadata.annotations.example.com/a.b"),
        6
    );
    assert_eq!(
        d.line_of_printed(".metadata.finalizers[=\"example.com/f\"]"),
        8
    );
    assert_eq!(
        d.line_of_printed(".spec.containers[name=\"app\"].args[1]"),
        12
    );
    // `protocol` defaults: absent from the text, the item still matches.
    assert_eq!(
        d.line_of_printed(
            ".spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"TCP\"].containerPort"
        ),
        14
    );
    // A path leaving the text stops at its deepest present ancestor.
    assert_eq!(
        d.line_of_printed(".spec.containers[name=\"app\"].image"),
        11
    );
    assert_eq!(d.line_of_printed(".spec.nope"), 9);
}

#[test]
fn parsing_on_every_core_gives_what_one_thread_gives() {
    let dir = std::env::temp_dir().join(format!("fieldguard-parallel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clean = dir.join("clean");
    std::fs::create_dir_all(&clean).unwrap();
    let cm = |i: usize| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  k: \"{i}\"\n")
    };
    // One long stream (parsed in runs across threads) ...
    let long: Vec<String> = (0..150).map(cm).collect();
    std::fs::write(clean.join("a-long.yaml"), long.join("---\n")).unwrap();
    // ... many small files (split across threads), JSON among them.
    for i in 0..100 {
        let text = if i % 10 == 3 {
            format!(
                r#"{{"apiVersion":"v1","kind":"List","items":[{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"s-{i}"}}}}]}}"#
            )
        } else {
            format!("# file {i}\n{}---\n{}", cm(1000 + i), cm(2000 + i))
        };
        std::fs::write(clean.join(format!("b-{i:03}.yaml")), text).unwrap();
    }
    let load = |inputs: &[Input], one: bool| {
        let l = Loaded::new(Limits::MANIFESTS);
        let l = if one { l.on_one_thread() } else { l };
        let l = load_into(inputs, &mut std::io::empty(), l);
        (
            format!("{:?}", l.documents),
            format!("{:?}", l.errors),
            l.documents.len(),
            l.errors.len(),
        )
    };
    let inputs = [Input::Path(clean.clone())];
    let (many, one) = (load(&inputs, false), load(&inputs, true));
    assert_eq!((many.2, many.3), (150 + 90 * 2 + 10, 0));
    assert_eq!(many, one);

    // Problems in a long stream and in a small file: the same problems, located the same.
    let mut bad = long.clone();
    bad[76] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n".into();
    bad[89] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n".into();
    std::fs::write(dir.join("z-bad.yaml"), bad.join("---\n")).unwrap();
    std::fs::write(dir.join("z-small.yaml"), "kind: ConfigMap\n").unwrap();
    let inputs = [Input::Path(dir.clone())];
    let (many, one) = (load(&inputs, false), load(&inputs, true));
    assert_eq!(many.3, 4, "{}", many.1);
    assert!(
        many.1.contains("document: 77") || many.1.contains("doc: Some(77)"),
        "{}",
        many.1
    );
    assert_eq!(many, one);

    // Over a limit (the inputs together, one file, the documents), and JSON kept as text:
    // whether the threads read the files or one thread does, the same outcome.
    let limited = |limits: Limits, keep: bool, one: bool| {
        let mut l = Loaded::new(limits);
        if keep {
            l = l.any_documents().keeping_json();
        }
        let l = if one { l.on_one_thread() } else { l };
        let l = load_into(&[Input::Path(clean.clone())], &mut std::io::empty(), l);
        let kept: Vec<_> = l
            .json_objects
            .iter()
            .map(|(at, o)| (*at, o.origin.clone(), o.text.as_bytes().to_vec()))
            .collect();
        (
            format!("{:?}", l.documents),
            format!("{:?}", l.errors),
            kept,
        )
    };
    let size = |p: std::path::PathBuf| std::fs::metadata(p).unwrap().len();
    let cases = [
        (Limits::MANIFESTS, true, false),
        (
            Limits {
                total_bytes: size(clean.join("a-long.yaml")) + 500,
                ..Limits::MANIFESTS
            },
            false,
            true,
        ),
        (
            Limits {
                file_bytes: 100,
                ..Limits::MANIFESTS
            },
            false,
            true,
        ),
        (
            Limits {
                documents: 200,
                ..Limits::MANIFESTS
            },
            true,
            true,
        ),
    ];
    for (limits, keep, refused) in cases {
        let (many, one) = (
            limited(limits.clone(), keep, false),
            limited(limits.clone(), keep, true),
        );
        assert_eq!(many, one, "{limits:?}");
        assert_eq!(many.1.contains("ManifestError"), refused, "{}", many.1);
        // Clean, the JSON files are kept as text when asked (what a refusal keeps is moot).
        assert!(refused || many.2.is_empty() != keep, "{limits:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file replaced between the search and the read is judged as it is when read: a FIFO in
/// place of a planned regular file is refused, not waited on; a file that grew is read as it is.
#[test]
fn a_file_replaced_after_planning_is_judged_as_it_is_read() {
    let dir = std::env::temp_dir().join(format!("fieldguard-replaced-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";
    let (a, b) = (dir.join("a.yaml"), dir.join("b.yaml"));
    std::fs::write(&a, cm).unwrap();
    std::fs::write(&b, cm).unwrap();
    let steps = super::read::plan(&[Input::Path(dir.clone())]);
    std::fs::remove_file(&a).unwrap();
    let path = std::ffi::CString::new(a.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    std::fs::write(&b, format!("{cm}data:\n  k: v\n")).unwrap();
    let (files, errors) =
        super::read::read_planned(&steps, &mut std::io::empty(), &Limits::MANIFESTS);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .message
            .contains("not a regular file (a FIFO) any more"),
        "{}",
        errors[0]
    );
    assert_eq!(files.len(), 1);
    assert!(String::from_utf8_lossy(&files[0].1).contains("k: v"));
    // On every core the stale plan is given up (the caller reads in order instead).
    let out = Loaded::new(Limits::MANIFESTS);
    assert!(super::parallel::read_and_parse(&steps, &out).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `read_exactly` takes a file only as planned: the size it was found with, a regular file.
#[test]
fn read_exactly_takes_a_file_only_at_its_planned_size() {
    let dir = std::env::temp_dir().join(format!("fieldguard-exactly-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (five, empty) = (dir.join("five"), dir.join("empty"));
    std::fs::write(&five, "12345").unwrap();
    std::fs::write(&empty, "").unwrap();
    let read = super::read::read_exactly;
    assert_eq!(read(&five, 5).as_deref(), Some(&b"12345"[..]));
    assert_eq!(read(&five, 4), None, "grew since planned");
    assert_eq!(read(&five, 6), None, "shrank since planned");
    assert_eq!(read(&five, 0), None, "was empty when planned");
    assert_eq!(read(&empty, 0).as_deref(), Some(&b""[..]));
    assert_eq!(read(&empty, 1), None);
    assert_eq!(read(&dir, 0), None, "a directory now");
    assert_eq!(read(&dir.join("gone"), 5), None);
    // A file larger than one read returns at once (a pipe's worth and more).
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&five, &big).unwrap();
    assert_eq!(read(&five, big.len() as u64).as_deref(), Some(&big[..]));
    assert_eq!(read(&five, big.len() as u64 - 1), None);
    let _ = std::fs::remove_dir_all(&dir);
}
