//! Helm 4 itself as the judge of releases (`../shared/helm4` against `../shared/realapi`, both
//! with `HELM_DRIVER=sql`): a chart of custom resources with hooks of several events, weights
//! and delete policies (`tests/data/helm-hooks`) goes through install → upgrade → rollback by
//! Helm in one namespace and by `fieldguard apply` (field manager `helm`, the manifests
//! `helm template` renders) in another. At each step both make the same writes and deletions in
//! the same order (watched on the server), leave the same objects with the same managedFields,
//! and record the same revisions with the same statuses.

mod support;

use futures::AsyncBufReadExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::realapi::{get, install_crd, write};

const STEPS: &str = "/apis/hooks.fieldguard.test/v1";
const RELEASE_OBJECTS: &[&str] = &["app", "config", "extra"];

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/helm-hooks")
}

struct Env<'a> {
    helm: &'a support::helm4::Helm4,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Env<'_> {
    fn run(&self, program: &Path, args: &[&str]) -> Output {
        let o = Command::new(program)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_DRIVER", "sql")
            .env("HELM_DRIVER_SQL_CONNECTION_STRING", &self.helm.connection)
            .env("HOME", &self.dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{} {args:?}: {}\n{}",
            program.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    fn helm(&self, args: &[&str]) -> Output {
        self.run(&self.helm.helm, args)
    }

    /// What `helm template` renders for namespace `ns` (hooks and tests included).
    fn render(&self, ns: &str, sets: &[&str], name: &str) -> PathBuf {
        let chart = chart();
        let mut args = vec!["template", "demo", chart.to_str().unwrap(), "-n", ns];
        for s in sets {
            args.extend(["--set", s]);
        }
        let o = self.helm(&args);
        let path = self.dir.join(name);
        std::fs::write(&path, &o.stdout).unwrap();
        path
    }

    fn fieldguard(&self, args: &[&str]) -> Output {
        self.run(Path::new(env!("CARGO_BIN_EXE_fieldguard")), args)
    }
}

/// The writes and deletions of `step` in namespace `ns`, as the server's watch saw them:
/// (event type, name), with runs of release objects sorted (Helm creates objects of one kind
/// in parallel, so their order among themselves is not Helm's to keep).
async fn watched(
    api: &fieldguard::live::api::Api,
    ns: &str,
    mark: &str,
    step: impl FnOnce(),
) -> Vec<(String, String)> {
    let list = get(api, &format!("{STEPS}/steps")).await.unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = api
        .stream(
            &format!("{STEPS}/steps?watch=1&resourceVersion={rv}"),
            "application/json",
        )
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        loop {
            let mut line = String::new();
            match stream.read_line(&mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    tokio::task::block_in_place(step);
    // A mark after the step: every event before it belongs to the step.
    write(
        api,
        http::Method::POST,
        &format!("{STEPS}/namespaces/marks/steps"),
        "application/json",
        &json!({"apiVersion": "hooks.fieldguard.test/v1", "kind": "Step", "metadata": {"name": mark}}),
    )
    .await
    .unwrap();
    let mut events = Vec::new();
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv())
            .await
            .expect("the watch went quiet before the mark")
            .expect("the watch ended before the mark");
        let e: Value = serde_json::from_str(&line).unwrap();
        let (kind, o) = (e["type"].as_str().unwrap(), &e["object"]["metadata"]);
        if o["name"] == mark {
            break;
        }
        if o["namespace"] == ns {
            events.push((kind.to_string(), o["name"].as_str().unwrap().to_string()));
        }
    }
    reader.abort();
    // Runs of release objects, sorted.
    let mut out: Vec<(String, String)> = Vec::new();
    let mut run: Vec<(String, String)> = Vec::new();
    for e in events {
        if RELEASE_OBJECTS.contains(&e.1.as_str()) {
            run.push(e);
        } else {
            run.sort();
            out.append(&mut run);
            out.push(e);
        }
    }
    run.sort();
    out.append(&mut run);
    out
}

/// The objects of `ns` as they compare across namespaces: contents, labels, annotations (the
/// release namespace taken out) and managedFields without their timestamps.
async fn objects(api: &fieldguard::live::api::Api, ns: &str) -> BTreeMap<String, Value> {
    let list = get(api, &format!("{STEPS}/namespaces/{ns}/steps"))
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for o in list["items"].as_array().unwrap() {
        let m = &o["metadata"];
        let mut annotations = m["annotations"].clone();
        if let Some(a) = annotations.as_object_mut() {
            a.remove("meta.helm.sh/release-namespace");
        }
        let managed: Vec<Value> = m["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                json!([
                    e["manager"],
                    e["operation"],
                    e["apiVersion"],
                    e["subresource"],
                    e["fieldsV1"]
                ])
            })
            .collect();
        out.insert(
            m["name"].as_str().unwrap().to_string(),
            json!({"spec": o["spec"], "labels": m["labels"], "annotations": annotations, "managedFields": managed}),
        );
    }
    out
}

/// (revision, status) of the release's records in namespace `ns` written by `owner`.
async fn records(connection: &str, ns: &str, owner: &str) -> Vec<(i32, String)> {
    let (client, conn) = tokio_postgres::connect(connection, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT version, status FROM releases_v1 WHERE namespace = $1 AND owner = $2 ORDER BY version",
            &[&ns, &owner],
        )
        .await
        .unwrap();
    task.abort();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// A step: its name, Helm's command, the values fieldguard renders with, fieldguard's flags.
type Step<'a> = (&'a str, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_and_fieldguard_run_hooks_and_releases_alike() {
    let Some(server) = support::realapi::shared_server() else {
        return;
    };
    let Some(helm) = support::helm4::shared_helm() else {
        return;
    };
    let api = server.api().await;
    install_crd(
        &api,
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/realapi/steps-crd.yaml"),
        )
        .unwrap(),
    )
    .await;
    let dir = std::env::temp_dir().join(format!("fieldguard-real-release-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let env = Env {
        helm,
        kubeconfig: server.kubeconfig.clone(),
        dir: dir.clone(),
    };
    let chart = chart();
    let chart = chart.to_str().unwrap();

    let steps: [Step; 4] = [
        (
            "install",
            vec!["install", "demo", chart, "-n", "h"],
            vec![],
            vec![],
        ),
        (
            "upgrade",
            vec![
                "upgrade",
                "demo",
                chart,
                "-n",
                "h",
                "--set",
                "tag=2",
                "--set",
                "extra=false",
            ],
            vec!["tag=2", "extra=false"],
            vec![],
        ),
        (
            "rollback",
            vec!["rollback", "demo", "1", "-n", "h"],
            vec![],
            vec!["--rollback", "1"],
        ),
        (
            "uninstall",
            vec!["uninstall", "demo", "-n", "h"],
            vec![],
            vec![],
        ),
    ];
    for (i, (step, helm_args, sets, flags)) in steps.iter().enumerate() {
        let by_helm = watched(&api, "h", &format!("mark-h{i}"), || {
            env.helm(helm_args);
        })
        .await;
        let file = env.render("f", sets, &format!("{step}.yaml"));
        let by_fieldguard = watched(&api, "f", &format!("mark-f{i}"), || {
            let verb = if *step == "uninstall" {
                "uninstall"
            } else {
                "apply"
            };
            let mut args = vec![verb, "demo", "-n", "f", "--field-manager", "helm"];
            if flags.is_empty() && verb == "apply" {
                args.push(file.to_str().unwrap());
            }
            args.extend(flags.iter().copied());
            env.fieldguard(&args);
        })
        .await;
        eprintln!("{step}: {by_helm:?}");
        assert!(!by_helm.is_empty(), "{step}: Helm wrote nothing");
        assert_eq!(
            by_fieldguard, by_helm,
            "{step}: writes and deletions (fieldguard, Helm)"
        );
        assert_eq!(
            objects(&api, "f").await,
            objects(&api, "h").await,
            "{step}: the objects (fieldguard, Helm)"
        );
        assert_eq!(
            records(&helm.connection, "f", "fieldguard").await,
            records(&helm.connection, "h", "helm").await,
            "{step}: the revisions (fieldguard, Helm)"
        );
    }
    // After the uninstall: the kept object and the hooks without hook-succeeded are left; the
    // test hook never ran; no record is left.
    let left: Vec<String> = objects(&api, "f").await.into_keys().collect();
    assert_eq!(
        left,
        [
            "audit",
            "cleanup",
            "config",
            "migrate-a",
            "migrate-b",
            "rollback-prep"
        ],
        "left after the uninstall"
    );
    assert!(
        records(&helm.connection, "f", "fieldguard")
            .await
            .is_empty()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
