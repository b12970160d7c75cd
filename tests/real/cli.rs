//! The command line against the real apiserver (`../shared/realapi`): `check`, `blame` and
//! `managers` reading a cluster (discovery, `/openapi/v3`, GETs and lists) give the same reports
//! as the same objects exported the way `kubectl get -o json --show-managed-fields` exports
//! them, read as a snapshot (with the CRD, whose schema the snapshot derives itself); and
//! `fieldguard serve` watching the server answers `check --server` the same way.

use crate::support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::realapi::{get, install_crd, write};

const NS: &str = "cli";

fn fieldguard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

fn json_of(o: &Output) -> Value {
    if o.stdout.starts_with(b"{") {
        return support::reports::parse_json(&o.stdout);
    }
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// A report with where the live state came from taken out.
fn comparable(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("source");
    }
    v
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fieldguard-real-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Widgets written by several managers: an applier, a hand edit, an autoscaler, an injector.
async fn populate(api: &fieldguard::live::api::Api) {
    let base = format!("/apis/fieldguard.test/v1/namespaces/{NS}/widgets");
    let apply = "application/apply-patch+yaml";
    let merge = "application/merge-patch+json";
    for name in ["a", "b"] {
        let url = format!("{base}/{name}");
        let _ = write(
            api,
            http::Method::DELETE,
            &url,
            "application/json",
            &json!({}),
        )
        .await;
        let m = json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
                       "metadata": {"name": name, "namespace": NS},
                       "spec": {"replicas": 2, "note": "v1", "labels": {"app": name},
                                "containers": [{"name": "app", "image": "app:1",
                                                "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}});
        write(
            api,
            http::Method::PATCH,
            &format!("{url}?fieldManager=helm"),
            apply,
            &m,
        )
        .await
        .unwrap();
        write(
            api,
            http::Method::PATCH,
            &format!("{url}/scale?fieldManager=autoscaler"),
            merge,
            &json!({"spec": {"replicas": 4}}),
        )
        .await
        .unwrap();
    }
    write(
        api,
        http::Method::PATCH,
        &format!("{base}/a?fieldManager=kubectl-edit"),
        merge,
        &json!({"spec": {"note": "hotfix"}}),
    )
    .await
    .unwrap();
}

/// The objects and the CRD as `kubectl get -o json --show-managed-fields` prints them.
async fn export(api: &fieldguard::live::api::Api, dir: &Path) {
    let list = get(
        api,
        &format!("/apis/fieldguard.test/v1/namespaces/{NS}/widgets"),
    )
    .await
    .unwrap();
    let items: Vec<Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let mut i = i.clone();
            i["apiVersion"] = json!("fieldguard.test/v1");
            i["kind"] = json!("Widget");
            i
        })
        .collect();
    let out = json!({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}});
    std::fs::write(dir.join("widgets.json"), out.to_string()).unwrap();
    let mut crd = get(
        api,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.fieldguard.test",
    )
    .await
    .unwrap();
    crd["apiVersion"] = json!("apiextensions.k8s.io/v1");
    crd["kind"] = json!("CustomResourceDefinition");
    std::fs::write(dir.join("crd.json"), crd.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_and_exported_snapshot_give_the_same_reports() {
    // Each step's time since the start, in the output a failure shows.
    let t0 = std::time::Instant::now();
    let step = |what: &str| eprintln!("real::cli: {what} at {:.1?}", t0.elapsed());
    let Some(server) = support::realapi::shared_server(module_path!()) else {
        return;
    };
    step("the real apiserver is up");
    let api = server.api().await;
    install_crd(
        &api,
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/realapi/widget-crd.yaml"),
        )
        .unwrap(),
    )
    .await;
    step("the CRD is established and published");
    populate(&api).await;
    step("the widgets are written");
    let dir = tempdir("snapshot");
    export(&api, &dir).await;
    step("the snapshot is exported");
    // The release: conflicts (the hand edit, the autoscaler), removals (b drops its labels
    // and containers), a creation.
    let manifests = tempdir("release");
    let release = manifests.join("release.yaml");
    std::fs::write(
        &release,
        format!(
            "apiVersion: fieldguard.test/v1\nkind: Widget\nmetadata: {{name: a, namespace: {NS}}}\nspec:\n  replicas: 2\n  note: v2\n  labels: {{app: a}}\n  containers:\n  - name: app\n    image: app:2\n---\napiVersion: fieldguard.test/v1\nkind: Widget\nmetadata: {{name: b, namespace: {NS}}}\nspec:\n  note: v1\n---\napiVersion: fieldguard.test/v1\nkind: Widget\nmetadata: {{name: c, namespace: {NS}}}\nspec:\n  note: new\n"
        ),
    )
    .unwrap();
    let kc = server.kubeconfig.to_str().unwrap().to_string();
    let snap = dir.to_str().unwrap().to_string();
    let from = |live: &[&str], rest: &[&str]| {
        let mut a: Vec<&str> = rest.to_vec();
        a.extend_from_slice(live);
        fieldguard(&a)
    };
    let cluster: [&str; 4] = ["--kubeconfig", &kc, "--context", "admin"];
    let snapshot: [&str; 2] = ["--snapshot", &snap];
    let rel = release.to_str().unwrap();
    for force in [&[][..], &["--force-conflicts"][..]] {
        let mut args = vec!["check", "-n", NS, "--field-manager", "helm", "-o", "json"];
        args.extend_from_slice(force);
        args.push(rel);
        let c = from(&cluster, &args);
        let s = from(&snapshot, &args);
        assert_eq!(
            c.status.code(),
            s.status.code(),
            "cluster: {}\nother: {}",
            String::from_utf8_lossy(&c.stderr),
            String::from_utf8_lossy(&s.stderr)
        );
        assert_eq!(
            comparable(json_of(&c)),
            comparable(json_of(&s)),
            "check {force:?}"
        );
        if force.is_empty() {
            assert_eq!(c.status.code(), Some(1), "conflicts");
            let r = json_of(&c);
            let verdicts: Vec<&str> = r["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["verdict"].as_str().unwrap())
                .collect();
            assert_eq!(verdicts, ["conflict", "configured", "created"], "{r}");
        }
    }
    for args in [
        vec!["blame", "-n", NS, "-o", "json", "widgets.fieldguard.test/a"],
        vec!["managers", "-n", NS, "-o", "json"],
    ] {
        let c = from(&cluster, &args);
        let s = from(&snapshot, &args);
        assert_eq!(
            c.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&c.stderr)
        );
        assert_eq!(
            s.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&s.stderr)
        );
        assert_eq!(comparable(json_of(&c)), comparable(json_of(&s)), "{args:?}");
    }

    // `serve` watching the same server: `check --server` answers as `check` against the
    // cluster does, conflicts, removals and creations alike.
    step("cluster and snapshot agree");
    let served = support::process::Served::start(&cluster, false);
    step("serve is ready");
    for force in [&[][..], &["--force-conflicts"][..]] {
        let mut args = vec!["check", "-n", NS, "--field-manager", "helm", "-o", "json"];
        args.extend_from_slice(force);
        args.push(rel);
        let c = from(&cluster, &args);
        let v = from(&["--server", &served.addr], &args);
        assert_eq!(
            c.status.code(),
            v.status.code(),
            "cluster: {}\nother: {}",
            String::from_utf8_lossy(&c.stderr),
            String::from_utf8_lossy(&v.stderr)
        );
        assert_eq!(
            comparable(json_of(&c)),
            comparable(json_of(&v)),
            "check --server {force:?}"
        );
    }
    step("serve and cluster agree");
    let (exit, log) = served.terminate();
    step("serve stopped");
    assert!(exit.success(), "{log}");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&manifests).ok();
}
