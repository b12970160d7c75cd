//! Helm 4 itself as the judge of releases (`../shared/helm4` against `../shared/realapi`, both
//! with `HELM_DRIVER=sql`): a chart of custom resources with hooks of several events, weights
//! and delete policies (`tests/data/helm-hooks`) goes through install → upgrade → rollback by
//! Helm in one namespace and by `fieldguard apply` (field manager `helm`, the manifests
//! `helm template` renders) in another. At each step both make the same writes and deletions in
//! the same order (watched on the server), leave the same objects with the same managedFields,
//! and record the same revisions with the same statuses.

use crate::support;

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
        let o = self.try_run(program, args);
        assert!(
            o.status.success(),
            "{} {args:?}: {}\n{}",
            program.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    fn try_run(&self, program: &Path, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_DRIVER", "sql")
            .env("HELM_DRIVER_SQL_CONNECTION_STRING", &self.helm.connection)
            .env("HOME", &self.dir)
            .output()
            .unwrap()
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

/// The real server with the CRD of `tests/data/realapi/CRD` installed, and Helm with its
/// database; `None` when the real tier is not built (and not required).
async fn setup(crd: &str, name: &str) -> Option<(fieldguard::live::api::Api, Env<'static>)> {
    let server = support::realapi::shared_server(module_path!())?;
    let helm = support::helm4::shared_helm()?;
    let api = server.api().await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/realapi")
        .join(crd);
    install_crd(&api, &std::fs::read_to_string(path).unwrap()).await;
    let dir = std::env::temp_dir().join(format!("fieldguard-real-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let env = Env {
        helm,
        kubeconfig: server.kubeconfig.clone(),
        dir,
    };
    Some((api, env))
}

/// A step: its name, Helm's command, the values fieldguard renders with, fieldguard's flags.
type Step<'a> = (&'a str, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_and_fieldguard_run_hooks_and_releases_alike() {
    let Some((api, env)) = setup("steps-crd.yaml", "release").await else {
        return;
    };
    let (helm, dir) = (env.helm, env.dir.clone());
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

fn lock(name: &str, selector: &str, annotations: &str) -> String {
    format!(
        "apiVersion: hooks.fieldguard.test/v1\nkind: Lock\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  selector: {selector}\n  size: 1\n---\n"
    )
}

async fn uid(api: &fieldguard::live::api::Api, name: &str) -> (String, String) {
    let o = get(api, &format!("{STEPS}/namespaces/r/locks/{name}"))
        .await
        .unwrap();
    (
        o["metadata"]["uid"].as_str().unwrap().to_string(),
        o["spec"]["selector"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immutable_change_recreates_where_asked_and_is_refused_elsewhere() {
    let Some((api, env)) = setup("locks-crd.yaml", "recreate").await else {
        return;
    };
    let dir = env.dir.clone();
    let fg = Path::new(env!("CARGO_BIN_EXE_fieldguard"));
    let write_manifest = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let asked = "fieldguard.dev/recreate: if-immutable";
    let v1 = write_manifest("v1.yaml", lock("a", "one", asked) + &lock("b", "one", ""));
    env.fieldguard(&["apply", "locks", v1.to_str().unwrap(), "-n", "r"]);
    let (a1, b1) = (uid(&api, "a").await, uid(&api, "b").await);

    // Both selectors change: a asks for recreation, b does not.
    let v2 = write_manifest("v2.yaml", lock("a", "two", asked) + &lock("b", "two", ""));
    let v2 = v2.to_str().unwrap();
    let plan = env.try_run(
        fg,
        &["apply", "locks", v2, "-n", "r", "--plan", "-o", "json"],
    );
    assert_eq!(
        plan.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let objects = plan["prediction"]["objects"].as_array().unwrap();
    let by_name = |n: &str| objects.iter().find(|o| o["name"] == n).unwrap();
    assert_eq!(by_name("a")["verdict"], "created", "{plan:#}");
    let note = by_name("a")["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("recreated: the server refuses the update (spec.selector: Invalid value: \"two\": selector is immutable)"),
        "{note}"
    );
    assert!(note.contains("Blast radius: its uid changes"), "{note}");
    assert_eq!(by_name("b")["verdict"], "rejected", "{plan:#}");

    // Without the flag the release stops before its first write: b would be refused.
    let refused = env.try_run(fg, &["apply", "locks", v2, "-n", "r"]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        (uid(&api, "a").await, uid(&api, "b").await),
        (a1.clone(), b1.clone())
    );

    // With it, both are deleted and created again: new uids, the new selector.
    let done = env.fieldguard(&[
        "apply",
        "locks",
        v2,
        "-n",
        "r",
        "--recreate-on-immutable",
        "-o",
        "json",
    ]);
    let done: Value = serde_json::from_slice(&done.stdout).unwrap();
    let results: Vec<(String, String)> = done["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["object"].as_str().unwrap().to_string(),
                o["result"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            (
                "Lock.hooks.fieldguard.test r/a".to_string(),
                "deleted".to_string()
            ),
            ("Lock.hooks.fieldguard.test r/a".into(), "created".into()),
            ("Lock.hooks.fieldguard.test r/b".into(), "deleted".into()),
            ("Lock.hooks.fieldguard.test r/b".into(), "created".into()),
        ]
    );
    assert!(
        done["mismatches"].as_array().unwrap().is_empty(),
        "{done:#}"
    );
    let (a2, b2) = (uid(&api, "a").await, uid(&api, "b").await);
    assert!(
        a2.0 != a1.0 && b2.0 != b1.0,
        "uids: {a1:?} {a2:?} {b1:?} {b2:?}"
    );
    assert_eq!((a2.1.as_str(), b2.1.as_str()), ("two", "two"));
    let _ = std::fs::remove_dir_all(&dir);
}
