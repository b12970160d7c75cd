//! `fieldguard check` end to end: the bundled example against its snapshot and against a fake
//! apiserver serving the same objects, every output format, exit codes, bad input.

use crate::support;

use support::process::{Served, closed_port};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fieldguard(args: &[&str]) -> Output {
    fieldguard_with_stdin(args, None)
}

fn fieldguard_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    support::process::run(args, stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const EXAMPLE: &[&str] = &[
    "check",
    "--snapshot",
    "examples/cluster",
    "-n",
    "shop",
    "--field-manager",
    "helm",
    "examples/release",
];

fn example(extra: &[&str]) -> Output {
    let mut a = EXAMPLE.to_vec();
    a.extend_from_slice(extra);
    fieldguard(&a)
}

/// The JSON on standard output (a check report validated against the format's schema).
fn json_of(o: &Output) -> Value {
    support::reports::parse_json(&o.stdout)
}

/// (kind, name) → conflict paths, from a JSON report.
fn conflicts(report: &Value, key: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for o in report["objects"].as_array().unwrap() {
        for c in o[key].as_array().unwrap() {
            out.push((
                o["kind"].as_str().unwrap().to_string(),
                c["path"].as_str().unwrap().to_string(),
                c["owners"][0]["manager"].as_str().unwrap().to_string(),
            ));
        }
    }
    out.sort();
    out
}

/// Secret material of the example (base64 in the manifest and the snapshot, and decoded).
const SECRETS: &[&str] = &[
    "aW5pdGlhbC1wdy03ZjNh",
    "initial-pw-7f3a",
    "cm90YXRlZC1ieS1oYW5kLTkxYzI=",
    "rotated-by-hand-91c2",
    "Y2hlY2tvdXQ=",
];

fn assert_no_secrets(text: &str) {
    for s in SECRETS {
        assert!(
            !text.contains(s),
            "secret material {s:?} in output:\n{text}"
        );
    }
}

#[test]
fn example_conflicts_are_found_with_owners_values_and_fixes() {
    let o = example(&[]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert_no_secrets(&text);
    for want in [
        "✗ Deployment shop/checkout  examples/release/checkout.yaml:44  conflict",
        "conflict .spec.replicas  examples/release/checkout.yaml:56",
        "kube-controller-manager (Update, apps/v1, subresource scale)\n",
        "fix       remove `spec.replicas` from the manifest",
        "conflict .spec.template.spec.containers[name=\"app\"].image  examples/release/checkout.yaml:67",
        "--force-against 'kubectl-edit'",
        "conflict .spec.duration  examples/release/checkout.yaml:120",
        "+ ConfigMap shop/checkout-config",
        "3 of 6 object(s) conflict (5 conflicting field(s))",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("\x1b["), "no colour when not a terminal");

    let j = json_of(&example(&["-o", "json"]));
    assert_eq!(j["apiVersion"], "fieldguard.dev/v1");
    assert_eq!(j["summary"]["conflicted"], 3);
    assert_eq!(j["summary"]["created"], 1);
    assert_eq!(j["summary"]["unchanged"], 0);
    let got = conflicts(&j, "conflicts");
    let want: Vec<(String, String, String)> = [
        ("Certificate", ".spec.duration", "platform-policy"),
        ("Deployment", ".spec.replicas", "kube-controller-manager"),
        (
            "Deployment",
            ".spec.template.spec.containers[name=\"app\"].image",
            "kubectl-edit",
        ),
        (
            "Deployment",
            ".spec.template.spec.containers[name=\"log-shipper\"].image",
            "log-injector",
        ),
        ("Secret", ".data.password", "kubectl-edit"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(got, want);
    let secret = &j["objects"][0];
    assert_eq!(secret["conflicts"][0]["current"], "<redacted>");
    assert_eq!(secret["conflicts"][0]["proposed"], "<redacted>");
    let dep = &j["objects"][3];
    assert_eq!(
        dep["resourceVersion"],
        support::example_object("Deployment")["metadata"]["resourceVersion"]
    );
    assert_eq!(dep["conflicts"][0]["current"], 5);
    assert_eq!(dep["conflicts"][0]["proposed"], 3);
    assert_eq!(
        dep["conflicts"][0]["suggestions"][0]["action"],
        "drop-field"
    );
}

#[test]
fn forcing_takes_over_and_selective_force_only_from_matching_managers() {
    let all = json_of(&example(&["--force-conflicts", "-o", "json"]));
    assert_eq!(all["summary"]["conflicted"], 0);
    assert_eq!(all["summary"]["takenOver"], 5);
    assert_eq!(
        all["summary"]["removed"], 5,
        "LOG_LEVEL and Helm's annotations of four objects dropped from the release"
    );
    let o = example(&["--force-conflicts"]);
    assert_eq!(o.status.code(), Some(0));

    let o = example(&["--force-against", "kubectl-edit", "-o", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let sel = json_of(&o);
    // The Secret's only conflict is with kubectl-edit: taken over. The Deployment also
    // conflicts with the HPA and the injector: still rejected, the kubectl-edit field marked.
    let secret = &sel["objects"][0];
    assert_eq!(secret["verdict"], "configured");
    assert_eq!(secret["takenOver"][0]["path"], ".data.password");
    let dep = &sel["objects"][3];
    assert_eq!(dep["verdict"], "conflict");
    let forced: Vec<bool> = dep["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["forced"].as_bool().unwrap())
        .collect();
    assert_eq!(forced, [false, true, false]);
    // Whole-name match: `kubectl` does not select `kubectl-edit`.
    let none = json_of(&example(&["--force-against", "kubectl", "-o", "json"]));
    assert_eq!(none["summary"]["conflicted"], 3);
}

use support::reports::validate;

fn tempdir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("fieldguard-test-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn sarif_points_to_file_and_line_and_validates() {
    let o = example(&["-o", "sarif"]);
    assert_eq!(o.status.code(), Some(1));
    assert_no_secrets(&stdout(&o));
    let s = json_of(&o);
    assert_eq!(s["version"], "2.1.0");
    let results = s["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    let replicas = results
        .iter()
        .find(|r| {
            r["message"]["text"]
                .as_str()
                .unwrap()
                .contains(".spec.replicas")
        })
        .unwrap();
    let loc = &replicas["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "examples/release/checkout.yaml"
    );
    assert_eq!(loc["region"]["startLine"], 56);
    assert_eq!(replicas["level"], "error");
    validate("sarif", &o.stdout);
    // Takeovers, removals: warnings and notes.
    let forced = example(&["--force-conflicts", "-o", "sarif"]);
    assert_eq!(forced.status.code(), Some(0));
    validate("sarif", &forced.stdout);
}

#[test]
fn junit_has_one_case_per_object_and_validates() {
    let o = example(&["-o", "junit"]);
    assert_eq!(o.status.code(), Some(1));
    let x = stdout(&o);
    assert_no_secrets(&x);
    assert_eq!(x.matches("<testcase ").count(), 6);
    assert_eq!(x.matches("<failure ").count(), 3);
    assert!(x.contains("tests=\"6\" failures=\"3\" errors=\"0\""), "{x}");
    validate("junit", &o.stdout);
}

#[test]
fn manifests_from_stdin_and_the_kubectl_plugin_name() {
    let text = std::fs::read(root().join("examples/release/checkout.yaml")).unwrap();
    let o = fieldguard_with_stdin(
        &[
            "check",
            "--snapshot",
            "examples/cluster",
            "-n",
            "shop",
            "--field-manager",
            "helm",
            "-",
        ],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("<stdin>:56"), "{}", stdout(&o));

    let dir = tempdir("plugin");
    let plugin = dir.join("kubectl-fieldguard");
    std::fs::copy(env!("CARGO_BIN_EXE_fieldguard"), &plugin).unwrap();
    let o = Command::new(&plugin).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: kubectl fieldguard"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("3  cluster or service unreachable"));
}

/// Writes `files` into a fresh directory and checks it against the example snapshot.
fn check_files(name: &str, files: &[(&str, &[u8])]) -> Output {
    let dir = tempdir(name);
    for (f, bytes) in files {
        std::fs::write(dir.join(f), bytes).unwrap();
    }
    fieldguard(&[
        "check",
        "--snapshot",
        "examples/cluster",
        "--field-manager",
        "ci",
        dir.to_str().unwrap(),
    ])
}

#[test]
fn bad_input_is_located_exits_2_and_predicts_nothing() {
    let deep = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {}{}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  blob: \"{}\"\n",
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n".to_vec(),
            "a.yaml:",
        ),
        (
            "json",
            b"{\"apiVersion\": \"v1\", \"kind\": }".to_vec(),
            "a.json:1: document 1",
        ),
        (
            "dup",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n".to_vec(),
            "a.yaml:5: document 1",
        ),
        (
            "nokind",
            b"---\napiVersion: v1\nmetadata: {name: a}\n".to_vec(),
            "document 1: .kind: kind is missing",
        ),
        (
            "noname",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n".to_vec(),
            ".metadata.name: metadata.name is missing",
        ),
        (
            "unknown",
            b"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n".to_vec(),
            "a.yaml:2: document 1: .kind: unknown kind Widget",
        ),
        (
            "utf8",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \xff}\n".to_vec(),
            "a.yaml:3: invalid UTF-8",
        ),
        ("big", big.into_bytes(), "more than the limit"),
        ("deep", deep.into_bytes(), "a.yaml:4"),
        ("bomb", bomb.as_bytes().to_vec(), "alias"),
        (
            "schema",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: [1]}\n".to_vec(),
            "ConfigMap default/a",
        ),
    ];
    for (name, bytes, want) in cases {
        let file = if name == "json" { "a.json" } else { "a.yaml" };
        // A valid object beside the bad one: nothing is predicted for it either.
        let good = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n";
        let o = check_files(name, &[(file, &bytes), ("b.yaml", good)]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(want), "{name}: want {want:?} in:\n{err}");
        assert!(err.contains("nothing was checked"), "{name}: {err}");
        assert!(
            stdout(&o).is_empty(),
            "{name}: predicted something:\n{}",
            stdout(&o)
        );
    }
    // Usage errors are 2 as well.
    let o = fieldguard(&[
        "check",
        "--snapshot",
        "examples/cluster",
        "examples/release",
    ]);
    assert_eq!(o.status.code(), Some(2), "missing --field-manager");
    let o = fieldguard(&[
        "check",
        "--field-manager",
        "x",
        "--force-against",
        "(",
        "--snapshot",
        "examples/cluster",
        "examples/release",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--force-against"));
}

/// The manifests and the snapshot are read at once; which one's problems are reported is as
/// when they were read one after the other: the manifests' first, the snapshot's only when the
/// manifests are fine.
#[test]
fn bad_manifests_are_reported_before_a_bad_snapshot() {
    let dir = tempdir("bad-both");
    let snapshot = dir.join("snapshot");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::write(snapshot.join("broken.json"), b"{\"apiVersion\": }").unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, b"apiVersion: v1\nmetadata: {name: a}\n").unwrap();
    let good = dir.join("good.yaml");
    std::fs::write(
        &good,
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    )
    .unwrap();
    let check = |manifest: &PathBuf| {
        fieldguard(&[
            "check",
            "--snapshot",
            snapshot.to_str().unwrap(),
            "--field-manager",
            "ci",
            manifest.to_str().unwrap(),
        ])
    };
    let o = check(&bad);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.yaml") && err.contains("kind is missing"),
        "{err}"
    );
    assert!(
        !err.contains("broken.json"),
        "the snapshot was reported too:\n{err}"
    );
    let o = check(&good);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("broken.json"), "{err}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

/// The report without what names the source.
fn comparable(mut j: Value) -> Value {
    j["source"] = Value::Null;
    j
}

#[test]
fn a_live_cluster_gives_the_same_answer_as_its_snapshot_and_is_only_read() {
    let server = support::example_cluster();
    let dir = tempdir("cluster");
    let kc = server.kubeconfig(&dir, "shop");
    let kc = kc.to_str().unwrap();
    let o = fieldguard(&[
        "check",
        "--kubeconfig",
        kc,
        "--context",
        "fake",
        "--field-manager",
        "helm",
        "-o",
        "json",
        "examples/release",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let live = json_of(&o);
    assert!(
        live["source"].as_str().unwrap().contains("v1.33.1-fake"),
        "{}",
        live["source"]
    );
    let snap = json_of(&example(&["-o", "json"]));
    assert_eq!(comparable(live), comparable(snap));

    // KUBECONFIG is honoured like kubectl does (current context `other`: namespace elsewhere,
    // where nothing exists: everything would be created).
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fieldguard"));
    let o = cmd
        .args([
            "check",
            "--field-manager",
            "helm",
            "-o",
            "json",
            "examples/release",
        ])
        .current_dir(root())
        .env("KUBECONFIG", kc)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["summary"]["created"], 6);
    assert_eq!(j["objects"][0]["namespace"], "elsewhere");

    let reqs = server.requests();
    assert!(
        reqs.iter().all(|r| r.starts_with("GET ")),
        "only reads: {reqs:?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r == "GET /openapi/v3/apis/cert-manager.io/v1"),
        "{reqs:?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r == "GET /apis/apps/v1/namespaces/shop/deployments/checkout"),
        "{reqs:?}"
    );
}

#[test]
fn an_unreachable_cluster_exits_3() {
    // A port nobody listens on.
    let (_held, port) = closed_port();
    let dir = tempdir("unreachable");
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        format!("apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\nusers: [{{name: u, user: {{}}}}]\n"),
    )
    .unwrap();
    let o = fieldguard(&[
        "check",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--field-manager",
        "helm",
        "examples/release",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("unreachable"), "{}", stderr(&o));
    let o = fieldguard(&["check", "--field-manager", "helm", "examples/release"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "no kubeconfig at all: {}",
        stderr(&o)
    );
    let _ = Path::new("");
}

#[test]
fn blame_annotates_list_map_items_and_redacts_secrets() {
    let o = fieldguard(&["blame", "deploy/checkout", "--snapshot", "examples/cluster"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let line = |needle: &str| -> String {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
            .to_string()
    };
    assert!(line("replicas: 5").contains("# kube-controller-manager (Update/scale)"));
    assert!(
        line("image: registry.example.com/shop/checkout:1.4.2-hotfix1")
            .contains("# kubectl-edit (Update)")
    );
    // The injected container is a list-map item of its own: the injector owns it, not helm.
    assert!(line("- name: log-shipper").contains("# log-injector (Update)"));
    assert!(!line("- name: log-shipper").contains("helm"));
    assert!(line("image: fluent/fluent-bit:2.2.0").contains("# log-injector"));
    assert!(line("- name: app ").contains("# helm (Apply)"));
    // Fields under an atomic struct belong to whoever owns the whole.
    assert!(line("app.kubernetes.io/name: checkout").contains("# helm"));
    assert!(
        !line("imagePullPolicy").contains('#'),
        "defaulted fields have no owner"
    );
    assert!(!text.contains("managedFields"));

    let o = fieldguard(&[
        "blame",
        "secret/checkout-db",
        "--snapshot",
        "examples/cluster",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_no_secrets(&stdout(&o));
    assert!(stdout(&o).contains(REDACTED_JSON));

    // A file of objects, as kubectl prints them.
    let o = fieldguard(&["blame", "examples/cluster/shop.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_no_secrets(&stdout(&o));
    assert_eq!(stdout(&o).matches("---\n").count(), 6);

    let o = fieldguard(&["blame", "deploy/nope", "--snapshot", "examples/cluster"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no such object"));
}

const REDACTED_JSON: &str = "<redacted>";

#[test]
fn managers_inventory_flags_strays() {
    let o = fieldguard(&["managers", "--snapshot", "examples/cluster", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["objects"], 7);
    let m = |name: &str| -> Value {
        j["managers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["manager"] == name)
            .unwrap_or_else(|| panic!("no manager {name}"))
            .clone()
    };
    assert_eq!(m("helm")["objects"], 5);
    assert_eq!(m("helm")["operations"], serde_json::json!(["Apply"]));
    assert_eq!(
        m("kube-controller-manager")["operations"],
        serde_json::json!(["Update/scale", "Update/status"])
    );
    assert_eq!(m("kubectl-edit")["objects"], 2);
    assert_eq!(
        m("kubectl-edit")["newest"],
        support::example_newest("kubectl-edit")
    );
    assert_eq!(m("kubectl-edit")["flags"][0]["kind"], "manual-edit");
    assert!(m("helm")["flags"].as_array().unwrap().is_empty());
}

#[test]
fn blame_and_managers_read_a_live_cluster() {
    let server = support::example_cluster();
    let dir = tempdir("cluster-views");
    let kc = server.kubeconfig(&dir, "shop");
    let kc = kc.to_str().unwrap();
    let o = fieldguard(&[
        "blame",
        "deployments.apps/checkout",
        "--kubeconfig",
        kc,
        "--context",
        "fake",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let snap = fieldguard(&[
        "blame",
        "deployments.apps/checkout",
        "--snapshot",
        "examples/cluster",
    ]);
    assert_eq!(stdout(&o), stdout(&snap));

    let live = json_of(&fieldguard(&["managers", "--kubeconfig", kc, "-o", "json"]));
    let snap = json_of(&fieldguard(&[
        "managers",
        "--snapshot",
        "examples/cluster",
        "-o",
        "json",
    ]));
    assert_eq!(live, snap);
    assert!(server.requests().iter().all(|r| r.starts_with("GET ")));
}

/// Against a real cluster when `KUBECONFIG` is set (skipped otherwise): read-only checks.
#[test]
fn real_cluster_tier() {
    let Some(kc) = std::env::var_os("KUBECONFIG") else {
        eprintln!("real-cluster tier skipped: KUBECONFIG is not set");
        return;
    };
    let name = format!("fieldguard-probe-{}", std::process::id());
    let manifest =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fieldguard"));
    cmd.args([
        "check",
        "--field-manager",
        "fieldguard-test",
        "-o",
        "json",
        "-",
    ])
    .env("KUBECONFIG", &kc)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(manifest.as_bytes())
            .unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["objects"][0]["verdict"], "created");
    let o = Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .args(["managers", "-o", "json"])
        .env("KUBECONFIG", &kc)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(json_of(&o)["objects"].as_u64().unwrap() > 0);
}

#[test]
fn a_fieldguard_service_gives_the_same_answer() {
    let server = Served::start(&["--snapshot", "examples/cluster"], false);
    let addr = server.addr.clone();
    let o = fieldguard(&[
        "check",
        "--server",
        &addr,
        "-n",
        "shop",
        "--field-manager",
        "helm",
        "-o",
        "json",
        "examples/release",
    ]);
    let remote = json_of(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let local = json_of(&example(&["-o", "json"]));
    assert_eq!(comparable(remote), comparable(local));
    // Bad input is located (by the command itself, before it asks), exit 2.
    let dir = tempdir("remote-bad");
    let check_dir = || {
        fieldguard(&[
            "check",
            "--server",
            &addr,
            "--field-manager",
            "helm",
            dir.to_str().unwrap(),
        ])
    };
    std::fs::write(
        dir.join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
    )
    .unwrap();
    let o = check_dir();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a.yaml:5: document 1"),
        "{}",
        stderr(&o)
    );
    // Hundreds of problems: exit 2 with located lines, never a transport error (the service's
    // details are bounded to fit a trailer; the files' own problems are listed from here).
    let many: String = (0..300)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: Bad_{i}}}\n"))
        .collect();
    std::fs::write(dir.join("a.yaml"), many).unwrap();
    let o = check_dir();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a.yaml:4: document 1"), "{err}");
    assert!(!err.contains("protocol"), "{err}");
    assert!(err.lines().count() >= 20, "{err}");
    grpcurl_calls_the_service(&addr);
    drop(server);
    // Nobody listening: exit 3.
    let (_held, port) = closed_port();
    let o = fieldguard(&[
        "check",
        "--server",
        &format!("127.0.0.1:{port}"),
        "--field-manager",
        "helm",
        "examples/release",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

/// grpcurl, through server reflection, as users call the API.
fn grpcurl_calls_the_service(addr: &str) {
    let grpcurl = root().join(".tools/grpcurl");
    if !grpcurl.exists() {
        assert!(
            std::env::var_os("FIELDGUARD_REQUIRE_VALIDATORS").is_none(),
            "grpcurl missing: run scripts/setup.sh"
        );
        eprintln!("skipping grpcurl checks: run scripts/setup.sh");
        return;
    }
    let run = |args: &[&str]| -> String {
        let o = Command::new(&grpcurl).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "grpcurl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let list = run(&["-plaintext", addr, "list"]);
    for want in [
        "fieldguard.v1.Analysis",
        "fieldguard.v1.Ownership",
        "grpc.health.v1.Health",
    ] {
        assert!(list.contains(want), "{list}");
    }
    let health = run(&["-plaintext", addr, "grpc.health.v1.Health/Check"]);
    assert!(health.contains("SERVING"), "{health}");
    let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: checkout, namespace: shop}\nspec:\n  replicas: 3\n";
    let b64 = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(manifest.as_bytes())
    };
    let body =
        format!(r#"{{"fieldManager":"helm","manifests":[{{"name":"d.yaml","content":"{b64}"}}]}}"#);
    let out = run(&[
        "-plaintext",
        "-d",
        &body,
        addr,
        "fieldguard.v1.Analysis/PredictConflicts",
    ]);
    let j: Value = serde_json::from_str(&out).unwrap();
    let obj = &j["clusters"][0]["objects"][0];
    assert_eq!(obj["verdict"], "VERDICT_CONFLICT", "{out}");
    assert_eq!(obj["conflicts"][0]["path"], ".spec.replicas");
    assert_eq!(
        obj["resourceVersion"],
        support::example_object("Deployment")["metadata"]["resourceVersion"]
    );
    // An invalid request: the error details are decoded through reflection
    // (google/rpc/error_details.proto is served), violations keyed by manifest index.
    let bad = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b"kind: ConfigMap\n")
    };
    let body = format!(
        r#"{{"fieldManager":"helm","manifests":[{{"name":"bad.yaml","content":"{bad}"}}]}}"#
    );
    let o = Command::new(&grpcurl)
        .args([
            "-plaintext",
            "-d",
            &body,
            addr,
            "fieldguard.v1.Analysis/PredictConflicts",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("google.rpc.BadRequest"), "{text}");
    assert!(text.contains("fieldViolations"), "{text}");
    assert!(text.contains("\"manifests[0]\""), "{text}");
    assert!(text.contains("bad.yaml:1: document 1"), "{text}");
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// `serve` with metrics and JSON logs: the metrics endpoint reports predictions, every log
/// line is a JSON object, SIGTERM stops it cleanly.
#[test]
fn service_metrics_json_logs_and_clean_stop() {
    let server = Served::start(
        &["--snapshot", "examples/cluster", "--log-format", "json"],
        true,
    );
    let addr = server.addr.clone();
    let metrics = server.metrics.clone().unwrap();
    let o = fieldguard(&[
        "check",
        "--server",
        &addr,
        "-n",
        "shop",
        "--field-manager",
        "helm",
        "examples/release",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = http_get(&metrics, "/metrics");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("application/openmetrics-text"), "{text}");
    for want in [
        "fieldguard_prediction_seconds_bucket{le=",
        "fieldguard_grpc_requests_total{method=\"PredictConflicts\",code=\"Ok\"} 1",
        "# TYPE fieldguard_conflicts_found counter",
        "# EOF",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let conflicts: u64 = text
        .lines()
        .find(|l| l.starts_with("fieldguard_conflicts_found_total "))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap();
    assert!(conflicts > 0, "{text}");
    assert!(http_get(&metrics, "/nope").starts_with("HTTP/1.1 404"));

    let (status, log) = server.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() >= 2, "{log}");
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{l}");
    }
    assert!(log.contains("\"message\":\"stopped\""), "{log}");
}

/// `check --server` against a service that authenticates with TokenReview: a token file
/// authenticates; without it the call is refused (exit 2), and the token never shows.
#[test]
fn check_against_an_authenticating_service() {
    let server = support::example_cluster();
    {
        let mut st = server.state.lock().unwrap();
        st.tokens.insert(
            "ci-token-0x1".into(),
            ("ci".into(), vec!["pipelines".into()], vec![], false),
        );
        st.grants
            .push(("pipelines".into(), "get".into(), "*".into(), "shop".into()));
    }
    let dir = tempdir("auth-service");
    let kc = server.kubeconfig(&dir, "shop");
    // Returns once the cache has synced and health says SERVING.
    let svc = Served::start(
        &[
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--context",
            "fake",
            "--token-review",
        ],
        false,
    );
    let addr = svc.addr.clone();
    let token = dir.join("token");
    std::fs::write(&token, "ci-token-0x1\n").unwrap();
    let args = |extra: &[&str]| {
        let mut a = vec![
            "check",
            "--server",
            &addr,
            "-n",
            "shop",
            "--field-manager",
            "helm",
            "-o",
            "json",
        ];
        a.extend_from_slice(extra);
        a.push("examples/release");
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        fieldguard(&refs)
    };
    let o = run(args(&["--token-file", token.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        json_of(&o)["summary"]["objects"].as_u64().map(|n| n > 0),
        Some(true)
    );
    let o = run(args(&[]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("credentials required"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&token, "wrong-token\n").unwrap();
    let o = run(args(&["--token-file", token.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("wrong-token"));
    drop(svc);
}

/// Immutable fields (`examples/immutable`): each refused change next to a look-alike the
/// apiserver allows; refusals carry the server's 422 message and the manifest line of the
/// field, in JSON and SARIF; the process exits 1; the Secret's values appear nowhere.
#[test]
fn immutable_field_changes_are_refused_and_look_alikes_are_not() {
    let args = [
        "check",
        "--snapshot",
        "examples/immutable/cluster",
        "-n",
        "shop",
        "--field-manager",
        "helm",
        "examples/immutable/release",
    ];
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let o = fieldguard(&json_args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!stdout(&o).contains("Y2VydA") && !stdout(&o).contains("a2V5"));
    let report = json_of(&o);
    let objects = report["objects"].as_array().unwrap();
    let verdict = |kind: &str, name: &str| -> &Value {
        objects
            .iter()
            .find(|x| x["kind"] == kind && x["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    };
    for (kind, name) in [
        ("Deployment", "web"),
        ("StatefulSet", "db"),
        ("Job", "migrate"),
        ("Service", "legacy"),
        ("PersistentVolumeClaim", "scratch"),
        ("ConfigMap", "settings"),
        ("Secret", "tls"),
        ("RoleBinding", "readers"),
    ] {
        assert_eq!(verdict(kind, name)["verdict"], "rejected", "{kind} {name}");
    }
    for (kind, name) in [
        ("Deployment", "api"),
        ("StatefulSet", "cache"),
        ("CronJob", "report"),
        ("Service", "web"),
        ("PersistentVolumeClaim", "uploads"),
        ("RoleBinding", "writers"),
    ] {
        assert_eq!(
            verdict(kind, name)["verdict"],
            "configured",
            "{kind} {name}"
        );
    }
    let web = verdict("Deployment", "web");
    assert_eq!(
        web["message"],
        r#"Deployment.apps "web" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"frontend"}}: field is immutable"#
    );
    assert_eq!(
        web["rejections"][0],
        serde_json::json!({"field": "spec.selector", "reason": "FieldValueInvalid", "line": 9,
               "message": r#"Invalid value: {"matchLabels":{"app":"web","tier":"frontend"}}: field is immutable"#})
    );
    assert_eq!(
        verdict("Secret", "tls")["message"],
        r#"Secret "tls" is invalid: type: Invalid value: "kubernetes.io/tls": field is immutable"#
    );
    // The server's message prints the new template as its internal type (Go field names,
    // every field), and so does the prediction: nothing left to say in a note.
    let migrate = verdict("Job", "migrate");
    assert!(
        migrate["message"].as_str().unwrap().contains(
            r#""Spec":{"Volumes":null,"InitContainers":null,"Containers":[{"Name":"migrate""#
        ),
        "{migrate}"
    );
    assert!(
        migrate["notes"].as_array().is_none_or(|n| n.is_empty()),
        "{migrate}"
    );
    assert_eq!(report["summary"]["rejected"], 8);
    // A hook Job with a new image: Helm deletes and creates it, never patches it.
    let hook = verdict("Job", "db-migrate");
    assert_eq!(hook["verdict"], "created");
    assert_eq!(
        hook["hook"],
        serde_json::json!({"events": ["pre-install", "pre-upgrade"], "weight": -5,
                           "deletePolicies": ["before-hook-creation"]})
    );
    assert_eq!(hook["hookEvent"], "pre-upgrade");
    assert_eq!(report["hooks"]["operation"], "upgrade");
    assert!(
        hook["notes"][0]
            .as_str()
            .unwrap()
            .contains("the live one is deleted (before-hook-creation), then this one is created")
    );
    // Hooks run before the release's objects in a pre-phase.
    assert_eq!(objects[0]["name"], "db-migrate");
    // SARIF: one result per refusal, at the field's line.
    let mut sarif_args = args.to_vec();
    sarif_args.extend(["-o", "sarif"]);
    let s = fieldguard(&sarif_args);
    validate("sarif", &s.stdout);
    let sarif = json_of(&s);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    let role_ref = results
        .iter()
        .find(|r| r["message"]["text"].as_str().unwrap().contains("roleRef"))
        .unwrap();
    assert_eq!(
        role_ref["locations"][0]["physicalLocation"]["region"]["startLine"],
        160
    );
}

/// A field manager kube-apiserver refuses every write of: exit 2 with the server's 422 (the
/// wording checked against kube-apiserver 1.36.5), nothing predicted.
#[test]
fn a_field_manager_the_apiserver_refuses_is_refused_first() {
    let long = "m".repeat(129);
    for (manager, expected) in [
        (
            "ab\tc",
            r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "ab\tc": invalid character U+0009 (at position 2)"#.to_string(),
        ),
        (
            long.as_str(),
            r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes"#.to_string(),
        ),
    ] {
        // The bundled example with this manager instead of `helm`.
        let args: Vec<&str> = EXAMPLE
            .iter()
            .map(|a| if *a == "helm" { manager } else { a })
            .collect();
        let o = fieldguard(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(&expected), "{}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
}
