//! Hostile and careless input through the command line, as users and attackers meet it:
//! Secret values in errors, names that would rewrite request URLs, inputs far over their
//! limits, symbolic-link loops, FIFOs and devices, NUL bytes, empty input, values the apiserver
//! cannot store, machine reports on invalid input, refusals while recording a release, and
//! messages people can act on. Each test reproduces a report of the hostile-input review.

use crate::support;
use support::process::run;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fieldguard-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `check` of `files` against the bundled snapshot (namespace shop).
fn check(files: &[&Path], extra: &[&str]) -> Output {
    let mut args = vec![
        "check",
        "--snapshot",
        "examples/cluster",
        "-n",
        "shop",
        "--field-manager",
        "helm",
    ];
    args.extend_from_slice(extra);
    let names: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    args.extend(names);
    run(&args, None)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A check of `text` (written to `name` in a fresh directory) that must be refused as invalid
/// input (exit 2): its errors.
fn refused(name: &str, text: &str) -> String {
    let dir = tempdir(name.split('.').next().unwrap_or(name));
    let f = write(&dir, name, text);
    let o = check(&[&f], &[]);
    assert_eq!(o.status.code(), Some(2), "{}{}", out(&o), err(&o));
    err(&o)
}

/// Every output format of a check of `file` (text, JSON, SARIF, JUnit), each validated
/// against its schema.
fn every_format(file: &Path) -> Vec<Output> {
    let mut outs = Vec::new();
    for f in ["text", "json", "sarif", "junit"] {
        let o = check(&[file], &["-o", f]);
        if f != "text" {
            support::reports::validate(f, &o.stdout);
        }
        outs.push(o);
    }
    outs
}

#[test]
fn secret_values_never_appear_in_errors_whatever_their_type() {
    let dir = tempdir("secret-values");
    let f = write(
        &dir,
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\nstringData: {PIN: 73915284}\ndata:\n  password: 8675309123\n  hex: 0x5EC12E7\n",
    );
    let hex = i64::from_str_radix("5EC12E7", 16).unwrap().to_string();
    for o in every_format(&f) {
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        let all = format!("{}{}", out(&o), err(&o));
        for secret in ["73915284", "8675309123", "5EC12E7", "5ec12e7", hex.as_str()] {
            assert!(!all.contains(secret), "{secret} leaked:\n{all}");
        }
        assert!(all.contains("expected string, got integer"), "{all}");
    }
    // The same Secret as live state: its values stay out of every report.
    let snap = tempdir("secret-snapshot");
    std::fs::copy(
        root().join("examples/cluster/shop.yaml"),
        snap.join("shop.yaml"),
    )
    .unwrap();
    write(
        &snap,
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\n  managedFields:\n  - {manager: kubectl-edit, operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {f:data: {f:password: {}}}}\ndata: {password: 8675309123}\n",
    );
    let release = write(
        &dir,
        "release.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\ndata: {password: aGk=}\n",
    );
    let s = snap.to_str().unwrap();
    for args in [
        vec![
            "check",
            "--snapshot",
            s,
            "-n",
            "shop",
            "--field-manager",
            "helm",
            "-o",
            "json",
            release.to_str().unwrap(),
        ],
        vec!["blame", "--snapshot", s, "-n", "shop", "secret/db"],
        vec!["managers", "--snapshot", s, "-o", "json"],
    ] {
        let o = run(&args, None);
        let all = format!("{}{}", out(&o), err(&o));
        assert!(!all.contains("8675309123"), "{args:?} leaked:\n{all}");
    }
}

#[test]
fn names_are_validated_before_any_request_is_built_from_them() {
    let server = support::empty_example_cluster();
    let dir = tempdir("names");
    let kc = server.kubeconfig(&dir, "shop");
    let kc = kc.to_str().unwrap();
    let secret = write(
        &dir,
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db?force=true&x=\n  namespace: shop\nstringData: {password: x}\n",
    );
    let o = run(
        &[
            "apply",
            "shop",
            "-f",
            secret.to_str().unwrap(),
            "--server-side=true",
            "--adopt",
            "--kubeconfig",
            kc,
            "--context",
            "fake",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("secret.yaml:4: document 1: .metadata.name: Invalid value: \"db?force=true&x=\": a lowercase RFC 1123 subdomain"),
        "{}",
        err(&o)
    );
    let traversal = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ../../../../api/v1/namespaces/kube-system/secrets/x?a=\n  namespace: shop\n",
    );
    let o = run(
        &[
            "check",
            "--kubeconfig",
            kc,
            "--context",
            "fake",
            "--field-manager",
            "helm",
            traversal.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    for r in server.requests() {
        assert!(
            !r.contains("db")
                && !r.contains("force")
                && !r.contains("kube-system")
                && !r.contains(".."),
            "a request was built from an invalid name: {r}"
        );
    }
    // Names that are only read (blame KIND/NAME) are escaped, never interpreted.
    let o = run(
        &[
            "blame",
            "--kubeconfig",
            kc,
            "--context",
            "fake",
            "configmaps/a?b=c&d",
        ],
        None,
    );
    assert_ne!(o.status.code(), Some(0), "{}", out(&o));
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.contains("/configmaps/a%3Fb%3Dc%26d")),
        "{requests:?}"
    );
    assert!(!requests.iter().any(|r| r.contains("a?b")), "{requests:?}");
}

#[test]
fn input_limits_are_checked_on_bytes_before_parsing() {
    let dir = tempdir("limits");
    // A document over 3 MiB (kube-apiserver's request limit), and the same accepted when the
    // limit is raised.
    // (A Pod: a ConfigMap's or Secret's values are refused past 1 MiB whatever the limit.)
    let big = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: big, namespace: shop}}\nspec:\n  containers: [{{name: a, image: b, env: [{{name: X, value: {}}}]}}]\n",
        "x".repeat(4 * 1024 * 1024)
    );
    let f = write(&dir, "big.yaml", &big);
    let o = check(&[&f], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains(&format!("big.yaml:1: document 1: document is {} bytes, more than the limit of 3 MiB (--max-document-bytes)", big.len())),
        "{}",
        err(&o)
    );
    let o = check(&[&f], &["--max-document-bytes", "8Mi"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // A file over its limit is refused from its size, unread.
    let o = check(&[&f], &["--max-file-bytes", "1Mi"]);
    assert!(
        err(&o).contains(&format!(
            "file is {} bytes, more than the limit of 1 MiB (--max-file-bytes)",
            big.len()
        )),
        "{}",
        err(&o)
    );
    // Standard input is read up to its limit and a byte.
    let o = run(
        &[
            "check",
            "--snapshot",
            "examples/cluster",
            "--field-manager",
            "helm",
            "--max-file-bytes",
            "1Mi",
            "-",
        ],
        Some(big.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("<stdin>: more than the limit of 1 MiB (--max-file-bytes)"),
        "{}",
        err(&o)
    );
    // A top-level list is never an object: refused without building it.
    let list = format!("[{}{{}}]", "{},".repeat(2_000_000));
    let f = write(&dir, "list.json", &list);
    let o = check(&[&f], &["--max-document-bytes", "16Mi"]);
    assert!(
        err(&o).contains("list.json:1: document 1: expected an object, found list"),
        "{}",
        err(&o)
    );
    // Too many documents: counted before any is parsed.
    let many = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n---\n".repeat(30);
    let f = write(&dir, "many.yaml", &many);
    let o = check(&[&f], &["--max-documents", "20"]);
    assert!(
        err(&o).contains("documents or more, more than the limit of 20 (--max-documents)"),
        "{}",
        err(&o)
    );
    // A map of 150,000 keys (2.6 MB) is read: parsing is linear in its keys.
    let mut keys = String::from(
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"wide\",\"namespace\":\"shop\"},\"data\":{",
    );
    for i in 0..150_000 {
        keys.push_str(&format!("\"k{i}\":\"v\","));
    }
    keys.push_str("\"last\":\"v\"}}");
    let f = write(&dir, "wide.json", &keys);
    let o = check(&[&f], &["-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

#[test]
fn loops_fifos_and_devices_cost_a_refusal_not_the_machine() {
    let dir = tempdir("special");
    write(
        &dir,
        "a.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\n",
    );
    std::os::unix::fs::symlink(&dir, dir.join("loop")).unwrap();
    let o = check(&[&dir], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("loop: this directory was already read (a symbolic link loop?)"),
        "{}",
        err(&o)
    );
    // /dev/zero, named: refused by what it is, never read.
    let o = check(&[Path::new("/dev/zero")], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("/dev/zero: not a regular file (a character device): not read"),
        "{}",
        err(&o)
    );
    // A FIFO nobody writes to, named: read as empty (not a hang), and empty is an error.
    let fifos = tempdir("fifos");
    let fifo = fifos.join("pipe.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let o = check(&[&fifo], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("no objects in the input"), "{}", err(&o));
    // Inside a directory it is reported, not read.
    let o = check(&[&fifos], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains(
            "pipe.yaml: not a regular file (a FIFO): name it on the command line to read it"
        ),
        "{}",
        err(&o)
    );
}

/// `check` of the bundled release against the snapshot `snapshot`, with `extra` arguments.
fn check_against(snapshot: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "check",
        "--snapshot",
        snapshot.to_str().unwrap(),
        "-n",
        "shop",
        "--field-manager",
        "helm",
    ];
    args.extend_from_slice(extra);
    args.push("examples/release");
    run(&args, None)
}

/// Before: `--snapshot /dev/zero` buffered 2 GiB before its refusal, and `--snapshot
/// /proc/self` followed `root` across the whole file system. Devices are refused by what they
/// are (named or in a directory), FIFOs in a directory are reported, and a search follows no
/// link to a directory outside the directory named.
#[test]
fn snapshots_of_devices_fifos_and_links_out_are_refused_by_what_they_are() {
    let o = check_against(Path::new("/dev/zero"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("/dev/zero: not a regular file (a character device): not read"),
        "{}",
        err(&o)
    );
    let dir = tempdir("snapshot-special");
    let fifo = std::ffi::CString::new(dir.join("pipe.yaml").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink("/", dir.join("root")).unwrap();
    std::os::unix::fs::symlink(&dir, dir.join("loop")).unwrap();
    let o = check_against(&dir, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    for said in [
        "pipe.yaml: not a regular file (a FIFO): name it on the command line to read it",
        "zero.yaml: not a regular file (a character device): not read",
        "root: a symbolic link to /, a directory outside ",
        "loop: this directory was already read (a symbolic link loop?)",
    ] {
        assert!(e.contains(said), "{said:?} not in:\n{e}");
    }
    // /proc/self: its links out (`root`, `cwd`) are reported, not searched.
    let o = check_against(Path::new("/proc/self"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("/root: a symbolic link to /, a directory outside /proc/"),
        "{}",
        err(&o)
    );
    // A snapshot's refusals over its size name its own setting.
    for (limit, said) in [
        ("1Ki", "more than the limit of 1 KiB (--max-snapshot-bytes)"),
        (
            "50Ki",
            "the inputs together are more than the limit of 50 KiB (--max-snapshot-bytes)",
        ),
    ] {
        let o = check_against(
            Path::new("examples/cluster"),
            &["--max-snapshot-bytes", limit],
        );
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        assert!(err(&o).contains(said), "{said:?} not in:\n{}", err(&o));
        assert!(!err(&o).contains("--max-file-bytes"), "{}", err(&o));
        assert!(!err(&o).contains("--max-input-bytes"), "{}", err(&o));
    }
    // Manifests too: a link out of a directory of manifests is not followed.
    let o = check(&[&dir], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("root: a symbolic link to /, a directory outside "),
        "{}",
        err(&o)
    );
}

/// A ConfigMap of one 1 MiB value behind an anchor and 2,000 aliases of it: a file of 1 MiB
/// that expands to 2 GB. Before: `check` reached 4.3 GB.
fn alias_bomb(dir: &Path) -> PathBuf {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n  namespace: shop\ndata:\n  big: &big \"{}\"\n",
        "x".repeat(1 << 20)
    );
    for i in 0..2000 {
        text.push_str(&format!("  k{i}: *big\n"));
    }
    write(dir, "bomb.yaml", &text)
}

/// Aliases expand a document to no more than a document's limit: refused at the alias that
/// passes it, located, naming the limit's setting — in manifests (`--max-document-bytes`),
/// in a snapshot and in `blame`'s file (a snapshot's: 3 MiB, exported objects hold no aliases).
#[test]
fn aliases_expand_no_document_past_its_limit() {
    let dir = tempdir("alias-bytes");
    let bomb = alias_bomb(&dir);
    let o = check(&[&bomb], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains(
            "bomb.yaml:10: document 1: document expands aliases past 3145728 bytes, more than the limit of 3 MiB (--max-document-bytes)"
        ),
        "{}",
        err(&o)
    );
    let lowered =
        "past 3145728 bytes, more than the 3 MiB aliases may expand a snapshot's document to";
    let o = check_against(&dir, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("bomb.yaml:10: document 1: document expands aliases")
            && err(&o).contains(lowered),
        "{}",
        err(&o)
    );
    let o = run(&["blame", bomb.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("bomb.yaml:10: document 1") && err(&o).contains(lowered),
        "{}",
        err(&o)
    );
}

/// Before: an apiserver answering one GET with an endless body took `check --kubeconfig` to
/// 3.7 GB. Every answer is read as it arrives, up to what its request can return (one object
/// here), then refused naming the path and the bound: exit 3, the cluster's fault.
#[test]
fn an_endless_answer_from_the_apiserver_is_refused_at_its_bound() {
    let server = support::example_cluster();
    server.state.lock().unwrap().endless_gets_of = Some("/deployments/checkout".into());
    let dir = tempdir("endless");
    let kc = server.kubeconfig(&dir, "shop");
    let o = run(
        &[
            "check",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--context",
            "fake",
            "--field-manager",
            "helm",
            "examples/release",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert!(
        err(&o).contains(
            "GET /apis/apps/v1/namespaces/shop/deployments/checkout: the answer passed 16 MiB, the most one object can be: not read further"
        ),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("not-a-real-token"), "{}", err(&o));
}

/// The same through the API: a GET of one object, and a watch whose one line never ends (the
/// stream ends with the error at the bound).
#[tokio::test]
async fn the_apis_answers_and_watch_lines_are_bounded() {
    use futures::{AsyncBufReadExt, StreamExt};
    let server = support::example_cluster();
    server.state.lock().unwrap().endless_gets_of = Some("/configmaps".into());
    let api = server.api("shop").await;
    let e = api
        .get_json("/api/v1/namespaces/shop/configmaps")
        .await
        .unwrap_err();
    assert!(
        e.message.contains(
            "GET /api/v1/namespaces/shop/configmaps: the answer passed 48 MiB, the most an answer fieldguard parses can be"
        ),
        "{e}"
    );
    server.state.lock().unwrap().endless_gets_of = Some("/configmaps/endless".into());
    let e = api
        .get_text(
            "/api/v1/namespaces/shop/configmaps/endless",
            "application/json",
        )
        .await
        .unwrap_err();
    assert!(
        e.message
            .contains("configmaps/endless: the answer passed 16 MiB, the most one object can be"),
        "{e}"
    );
    server.state.lock().unwrap().endless_gets_of = Some("/configmaps".into());
    let watch = api
        .stream(
            "/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion=0",
            "application/json",
        )
        .await
        .unwrap();
    let e = watch.lines().next().await.unwrap().unwrap_err();
    assert!(
        e.to_string().contains(
            "GET /api/v1/namespaces/shop/configmaps: a line of the answer passed 16.1 MiB, the most one event can be"
        ),
        "{e}"
    );
}

#[test]
fn control_characters_and_empty_input_are_errors_not_shorter_input() {
    let dir = tempdir("nul");
    // Before: the NUL ended the stream silently, the conflicting Deployment after it vanished
    // and the check passed.
    let release = std::fs::read_to_string(root().join("examples/release/checkout.yaml")).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: n, namespace: shop}}\ndata: {{k: a\0b}}\n---\n{release}"
    );
    let f = write(&dir, "nul.yaml", &text);
    let o = check(&[&f], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        err(&o).contains("nul.yaml:4: document 1: control character U+0000 is not allowed in YAML"),
        "{}",
        err(&o)
    );
    for (name, text) in [
        ("empty.yaml", ""),
        (
            "comments.yaml",
            "# rendered nothing\n---\n# still nothing\n",
        ),
        ("list.yaml", "apiVersion: v1\nkind: List\nitems: []\n"),
    ] {
        let f = write(&dir, name, text);
        let o = check(&[&f], &[]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", out(&o));
        assert!(
            err(&o).contains("no objects in the input"),
            "{name}: {}",
            err(&o)
        );
        let o = check(&[&f], &["--allow-empty"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", err(&o));
    }
    let o = run(
        &[
            "check",
            "--snapshot",
            "examples/cluster",
            "--field-manager",
            "helm",
            "-",
        ],
        Some(b""),
    );
    assert_eq!(o.status.code(), Some(2), "closed stdin: {}", err(&o));
    let f = write(
        &dir,
        "items.yaml",
        "apiVersion: v1\nkind: List\nitems: {}\n",
    );
    let o = check(&[&f], &[]);
    assert!(
        err(&o).contains(".items: expected a list, found map"),
        "{}",
        err(&o)
    );
    // Without -n, a snapshot says where unnamespaced objects went.
    let f = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
    );
    let o = run(
        &[
            "check",
            "--snapshot",
            "examples/cluster",
            "--field-manager",
            "helm",
            f.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        err(&o).contains("note: 1 object(s) name no namespace and were checked in \"default\""),
        "{}",
        err(&o)
    );
}

#[test]
fn values_the_apiserver_cannot_store_are_not_predicted() {
    let dir = tempdir("values");
    let f = write(
        &dir,
        "values.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 100000000000000000000000000000000\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: app:1}]}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: shop}\ndata: {password: hunter2}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: shop\n  labels: {\"bad key!\": x}\n",
    );
    let o = check(&[&f], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let e = err(&o);
    assert!(
        e.contains("values.yaml:5: document 1: .spec.replicas: 1e+32 is not an int32"),
        "{e}"
    );
    assert!(
        e.contains(
            "values.yaml:14: document 2: .data.password: illegal base64 data at input byte 4"
        ),
        "{e}"
    );
    assert!(!e.contains("hunter2"), "{e}");
    assert!(
        e.contains("values.yaml:21: document 3: .metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters"),
        "{e}"
    );
}

/// An object nested deeper than fieldguard reads (a real cluster can hold one: FieldsV1 200
/// levels deep) is an object it cannot read, not a broken snapshot: the others are checked as
/// before; the unread one, or any object not found, is unavailable (exit 3), never a creation;
/// a listing of the snapshot says it would be incomplete.
#[test]
fn an_object_too_deep_to_read_leaves_the_rest_of_a_snapshot_usable() {
    let dir = tempdir("deep-snapshot");
    let snap = dir.join("snapshot");
    std::fs::create_dir_all(&snap).unwrap();
    let mut fields = String::from("{}");
    for i in (0..200).rev() {
        fields = format!("{{\"f:a{i}\":{fields}}}");
    }
    write(
        &snap,
        "deep.json",
        &format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"deep\",\"namespace\":\"shop\",\"managedFields\":[{{\"manager\":\"m\",\"operation\":\"Apply\",\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{fields}}}]}}}}"
        ),
    );
    let mut yaml = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep-yaml, namespace: shop}\ndata:\n",
    );
    for i in 0..150 {
        yaml.push_str(&format!("{}k{i}:\n", "  ".repeat(i + 1)));
    }
    write(&snap, "deep.yaml", &yaml);
    write(
        &snap,
        "other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: shop\n  managedFields:\n  - {manager: helm, operation: Apply, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {f:data: {f:k: {}}}}\ndata: {k: v}\n",
    );
    let s = snap.to_str().unwrap();
    let manifest = |name: &str| {
        write(
            &dir,
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop}}\ndata: {{k: w}}\n"
            ),
        )
    };
    let args = [
        "check",
        "--snapshot",
        s,
        "-n",
        "shop",
        "--field-manager",
        "helm",
    ];
    let other = manifest("other");
    let o = run(&[&args[..], &[other.to_str().unwrap()]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
    assert!(out(&o).contains("ConfigMap shop/other"), "{}", out(&o));
    for name in ["deep", "deep-yaml", "new"] {
        let m = manifest(name);
        let o = run(&[&args[..], &[m.to_str().unwrap()]].concat(), None);
        assert_eq!(o.status.code(), Some(3), "{name}: {}{}", out(&o), err(&o));
        let e = err(&o);
        assert!(
            e.contains(&format!("ConfigMap shop/{name}: not found, but the snapshot has 2 document(s) fieldguard could not read")),
            "{e}"
        );
        assert!(
            e.contains("deep.json:1: document 1: recursion limit exceeded"),
            "{e}"
        );
    }
    let o = run(&["managers", "--snapshot", s], None);
    assert_ne!(o.status.code(), Some(0), "{}", out(&o));
    assert!(err(&o).contains("nesting deeper than"), "{}", err(&o));
}

/// A Secret's and a ConfigMap's keys and size, as kube-apiserver 1.36.5 refuses them
/// (`ValidateSecret`, `ValidateConfigMap`): located at the key, values never echoed.
#[test]
fn secret_and_config_map_data_the_apiserver_refuses() {
    let big = "x".repeat(1024 * 1024 + 1);
    let e = refused(
        "data.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: shop}}\nstringData:\n  ok: fine\n  bad key!: s3cr3t-value\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: big, namespace: shop}}\nstringData:\n  blob: {big}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: shop}}\ndata: {{k: v}}\nbinaryData: {{k: eHh4}}\n"
        ),
    );
    assert!(
        e.contains("data.yaml:6: document 1: .data[bad key!]: Invalid value: \"bad key!\": a valid config key must consist of alphanumeric characters"),
        "{e}"
    );
    assert!(
        e.contains("document 2: .data: Too long: may not be more than 1048576 bytes (the apiserver refuses this: 422)"),
        "{e}"
    );
    assert!(
        e.contains(
            "document 3: .data[k]: Invalid value: \"k\": duplicate of key present in binaryData"
        ),
        "{e}"
    );
    assert!(!e.contains("s3cr3t") && !e.contains("xxxx"), "{e}");
}

/// fieldguard's own annotations are read as `apply` reads them: a directive `apply` would refuse
/// fails the check too, located at the annotation, so a green pre-merge check cannot fail at
/// deploy time.
#[test]
fn directives_apply_would_refuse_fail_the_check() {
    let e = refused(
        "directives.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: shop\n  annotations:\n    fieldguard.dev/recreate: sometimes\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: shop\n  annotations:\n    fieldguard.dev/create-only-fields: \"data.x, spec..replicas\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: shop\n  annotations: {fieldguard.dev/recreate: always, fieldguard.dev/create-only-fields: data.x}\n",
    );
    assert!(
        e.contains("directives.yaml:7: document 1: .metadata.annotations.fieldguard.dev/recreate: fieldguard.dev/recreate: \"sometimes\" is not a policy"),
        "{e}"
    );
    assert!(
        e.contains("directives.yaml:15: document 2: .metadata.annotations.fieldguard.dev/create-only-fields: fieldguard.dev/create-only-fields: \"spec..replicas\" is not a field path"),
        "{e}"
    );
    assert!(!e.contains("document 3"), "{e}");
}

#[test]
fn invalid_input_still_gives_ci_a_report() {
    let dir = tempdir("reports");
    let f = write(
        &dir,
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: shop}\n",
    );
    let outs = every_format(&f);
    for o in &outs {
        assert_eq!(o.status.code(), Some(2));
        assert!(err(o).contains("metadata.name is missing"), "{}", err(o));
    }
    let json: Value = serde_json::from_slice(&outs[1].stdout).unwrap();
    assert_eq!(json["kind"], "InvalidInput");
    assert_eq!(json["errors"][0]["path"], ".metadata.name");
    let sarif: Value = serde_json::from_slice(&outs[2].stdout).unwrap();
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "FG006");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"],
        3
    );
    assert!(
        out(&outs[3]).contains("<error type=\"InvalidInput\""),
        "{}",
        out(&outs[3])
    );
}

#[test]
fn an_apply_refused_while_recording_its_revision_says_so() {
    let server = support::empty_example_cluster();
    server.state.lock().unwrap().refuse_writes_to = Some("secrets".into());
    let dir = tempdir("record");
    let kc = server.kubeconfig(&dir, "shop");
    let f = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a: b}\n",
    );
    let o = run(
        &[
            "apply",
            "shop",
            "-f",
            f.to_str().unwrap(),
            "-o",
            "json",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--context",
            "fake",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let doc: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(&o)));
    assert_eq!(doc["kind"], "ApplyRefused");
    assert!(doc["message"].as_str().unwrap().contains("(403)"), "{doc}");
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.contains("configmaps") && !r.starts_with("GET")),
        "an object was written although the release could not be recorded"
    );
}

/// A server answering with stalled connections for `--server`: a port held but not listening.
fn unreachable_server() -> (socket2::Socket, String) {
    let (held, port) = support::process::closed_port();
    (held, format!("127.0.0.1:{port}"))
}

#[test]
fn errors_people_can_act_on() {
    let dir = tempdir("messages");
    let f = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n",
    );
    let f = f.to_str().unwrap();
    // The cause of an unreachable service, not only "transport error".
    let (_held, addr) = unreachable_server();
    let o = run(
        &["check", "--server", &addr, "--field-manager", "helm", f],
        None,
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(err(&o).contains("Connection refused"), "{}", err(&o));
    // A missing token file names its flag.
    let o = run(
        &[
            "check",
            "--server",
            &addr,
            "--token-file",
            "/nonexistent/token",
            "--field-manager",
            "helm",
            f,
        ],
        None,
    );
    assert!(
        err(&o).contains("--token-file /nonexistent/token:"),
        "{}",
        err(&o)
    );
    // A missing kubeconfig is named once.
    let o = run(
        &[
            "check",
            "--kubeconfig",
            "/nonexistent/kc",
            "--field-manager",
            "helm",
            f,
        ],
        None,
    );
    assert_eq!(err(&o).matches("/nonexistent/kc").count(), 1, "{}", err(&o));
    // Broken managedFields in a snapshot are located in the snapshot.
    let snap = tempdir("broken-snapshot");
    write(
        &snap,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: shop\n  managedFields:\n  - {manager: m, operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {bogus: {}}}\ndata: {x: '1'}\n",
    );
    let o = run(
        &[
            "check",
            "--snapshot",
            snap.to_str().unwrap(),
            "-n",
            "shop",
            "--field-manager",
            "helm",
            f,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(err(&o).contains("broken-snapshot/cm.yaml:"), "{}", err(&o));
    assert!(err(&o).contains("(live state)"), "{}", err(&o));
    // Manager names with terminal escape sequences are printed escaped.
    let snap = tempdir("escapes");
    write(
        &snap,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: shop\n  managedFields:\n  - {manager: \"evil\\e[2J\\e]0;owned\\a\", operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {f:data: {f:x: {}}}}\ndata: {x: '1'}\n",
    );
    let conflicting = write(
        &dir,
        "x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\ndata: {x: '2'}\n",
    );
    for args in [
        vec![
            "check",
            "--snapshot",
            snap.to_str().unwrap(),
            "-n",
            "shop",
            "--field-manager",
            "helm",
            conflicting.to_str().unwrap(),
        ],
        vec!["managers", "--snapshot", snap.to_str().unwrap()],
        vec![
            "blame",
            "--snapshot",
            snap.to_str().unwrap(),
            "-n",
            "shop",
            "configmap/c",
        ],
    ] {
        let o = run(&args, None);
        let all = format!("{}{}", out(&o), err(&o));
        assert!(
            !all.contains('\u{1b}') && !all.contains('\u{7}'),
            "{args:?}: {all:?}"
        );
        assert!(all.contains("evil\\u{1b}[2J"), "{args:?}: {all}");
    }
    // Output to a closed pipe is said, not silent (the pipe's reading end is closed before
    // the process starts: every write fails).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .args([
            "check",
            "--snapshot",
            "examples/cluster",
            "-n",
            "shop",
            "--field-manager",
            "helm",
            "examples/release",
        ])
        .current_dir(root())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("cannot write the output"), "{}", err(&o));
}

#[test]
fn help_says_what_each_command_takes() {
    let o = run(&["apply", "--help"], None);
    let h = out(&o);
    for want in [
        "More manifests",
        "Kubeconfig file",
        "Kubeconfig context",
        "the release stopped before its first write",
        "--max-document-bytes",
    ] {
        assert!(h.contains(want), "apply --help lacks {want:?}:\n{h}");
    }
    assert!(
        !h.contains("1  conflicts found, or an apply the apiserver would refuse"),
        "{h}"
    );
    for cmd in ["blame", "managers"] {
        let h = out(&run(&[cmd, "--help"], None));
        assert!(h.contains("Output: text"), "{cmd} --help:\n{h}");
    }
}
