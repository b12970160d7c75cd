//! The server-side apply path (`apply::ssa`) against the real apiserver (`../shared/realapi`):
//! structured 409s, selective force, optimistic locking losing a real race, dry runs, creates
//! and the server's own 422s — on custom resources (`tests/data/realapi/`).

mod support;

use fieldguard::apply::ssa::{self, SsaError, SsaOptions};
use fieldguard::check::Force;
use fieldguard::live::cluster::Api;
use fieldguard::value::json::parse_str;
use serde_json::{Value, json};
use support::realapi::{get, install_crd, write};

const NS: &str = "default";

fn path(name: &str) -> String {
    format!("/apis/fieldguard.test/v1/namespaces/{NS}/widgets/{name}")
}

fn fg(v: &Value) -> fieldguard::value::Value {
    parse_str(&v.to_string()).unwrap()
}

fn opts(force: Force) -> SsaOptions {
    SsaOptions {
        field_manager: "helm".into(),
        force,
        dry_run: false,
        expect_resource_version: None,
    }
}

async fn setup() -> Option<Api> {
    let server = support::realapi::shared_server()?;
    let api = server.api().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/realapi");
    install_crd(
        &api,
        &std::fs::read_to_string(dir.join("widget-crd.yaml")).unwrap(),
    )
    .await;
    install_crd(
        &api,
        &std::fs::read_to_string(dir.join("probe-crd.json")).unwrap(),
    )
    .await;
    Some(api)
}

/// The release's manifest of `name`.
fn release(name: &str) -> Value {
    json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"replicas": 3, "note": "release",
                    "containers": [{"name": "app", "image": "app:2"},
                                   {"name": "log", "image": "shipper:2"}]}})
}

/// `name` as the release created it, then changed by three others: a hand edit (merge patch)
/// of `note`, an autoscaler's `scale` write, a sidecar injector's apply of the log image.
async fn contested(api: &Api, name: &str) {
    let p = path(name);
    let _ = write(
        api,
        http::Method::DELETE,
        &p,
        "application/json",
        &json!({}),
    )
    .await;
    let apply = "application/apply-patch+yaml";
    let mut first = release(name);
    first["spec"]["containers"][1]["image"] = json!("shipper:1");
    write(
        api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=helm"),
        apply,
        &first,
    )
    .await
    .unwrap();
    let merge = "application/merge-patch+json";
    write(
        api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=kubectl-edit"),
        merge,
        &json!({"spec": {"note": "hotfix"}}),
    )
    .await
    .unwrap();
    write(
        api,
        http::Method::PATCH,
        &format!("{p}/scale?fieldManager=autoscaler"),
        merge,
        &json!({"spec": {"replicas": 5}}),
    )
    .await
    .unwrap();
    let injector = json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"containers": [{"name": "log", "image": "shipper:1-patched"}]}});
    write(
        api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=log-injector&force=true"),
        apply,
        &injector,
    )
    .await
    .unwrap();
}

fn rv(v: &Option<Value>) -> String {
    v.as_ref().unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The managers owning something under `spec`, by name.
fn owners(v: &Option<Value>) -> Vec<String> {
    let mut out: Vec<String> = v.as_ref().unwrap()["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fieldsV1"].get("f:spec").is_some())
        .map(|e| e["manager"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_come_back_structured_and_selective_force_only_takes_from_allowed_managers() {
    let Some(api) = setup().await else { return };
    contested(&api, "contested").await;
    let p = path("contested");
    let manifest = fg(&release("contested"));

    let e = ssa::apply(&api, &p, &manifest, &opts(Force::None))
        .await
        .unwrap_err();
    let SsaError::Conflicts { conflicts, message } = e else {
        panic!("{e:?}")
    };
    assert!(
        message.starts_with("Apply failed with 3 conflicts"),
        "{message}"
    );
    let mut got: Vec<(String, String)> = conflicts
        .iter()
        .map(|c| (c.manager.clone(), c.field.clone()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("autoscaler".to_string(), ".spec.replicas".to_string()),
            ("kubectl-edit".to_string(), ".spec.note".to_string()),
            (
                "log-injector".to_string(),
                ".spec.containers[name=\"log\"].image".to_string()
            ),
        ]
    );

    // Selective force against kubectl-edit only: the others still conflict, so nothing is
    // forced — nobody loses a field, nothing is written.
    let before = get(&api, &p).await;
    let e = ssa::apply(
        &api,
        &p,
        &manifest,
        &opts(Force::against(&["kubectl-edit".into()]).unwrap()),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, SsaError::Conflicts { .. }), "{e:?}");
    let after = get(&api, &p).await;
    assert_eq!(rv(&after), rv(&before), "nothing written");
    assert_eq!(owners(&after), owners(&before));

    // Allowed against all three: the forced retry goes through and says from whom.
    let pol = Force::against(&["kubectl-edit|log-injector|autoscaler".into()]).unwrap();
    let done = ssa::apply(&api, &p, &manifest, &opts(pol)).await.unwrap();
    assert_eq!(
        done.forced_from,
        ["autoscaler", "kubectl-edit", "log-injector"]
    );
    assert_eq!(
        done.object.get_path(&["spec", "replicas"]),
        Some(&fieldguard::value::Value::Int(3))
    );
    let now = get(&api, &p).await;
    assert_ne!(rv(&now), rv(&before));
    // The release took every contested field; log-injector keeps only the item's key.
    assert_eq!(owners(&now), ["helm", "log-injector"]);
    let injector = now.as_ref().unwrap()["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "log-injector")
        .unwrap()["fieldsV1"]
        .to_string();
    assert!(!injector.contains("f:image"), "{injector}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_unchanged_loses_a_race_cleanly_and_dry_runs_store_nothing() {
    let Some(api) = setup().await else { return };
    contested(&api, "raced").await;
    let p = path("raced");
    let manifest = fg(&release("raced"));
    let predicted = get(&api, &p).await;

    // Dry run, forced: answered with the merged object, not stored.
    let mut o = opts(Force::All);
    o.dry_run = true;
    let dry = ssa::apply(&api, &p, &manifest, &o).await.unwrap();
    assert_eq!(
        dry.object.get_path(&["spec", "replicas"]),
        Some(&fieldguard::value::Value::Int(3))
    );
    assert_eq!(rv(&get(&api, &p).await), rv(&predicted));

    // Someone changes the object after the prediction: the apply is refused, not merged.
    write(
        &api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=kubectl-edit"),
        "application/merge-patch+json",
        &json!({"spec": {"note": "second hotfix"}}),
    )
    .await
    .unwrap();
    let mut o = opts(Force::All);
    o.expect_resource_version = Some(rv(&predicted));
    let e = ssa::apply(&api, &p, &manifest, &o).await.unwrap_err();
    assert!(
        matches!(&e, SsaError::Stale(m) if m.contains("the object has been modified")),
        "{e:?}"
    );
    let current = get(&api, &p).await;
    assert_eq!(current.as_ref().unwrap()["spec"]["note"], "second hotfix");

    // With the current version it applies.
    o.expect_resource_version = Some(rv(&current));
    ssa::apply(&api, &p, &manifest, &o).await.unwrap();

    // Creating a new object: one Apply entry of the field manager.
    let probe = |n: i64| {
        fg(&json!({"apiVersion": "p.test/v1", "kind": "Probe",
                   "metadata": {"name": "made", "namespace": NS},
                   "spec": {"must": "x", "n": n}}))
    };
    let probe_path = format!("/apis/p.test/v1/namespaces/{NS}/probes/made");
    let _ = write(
        &api,
        http::Method::DELETE,
        &probe_path,
        "application/json",
        &json!({}),
    )
    .await;
    let made = ssa::apply(&api, &probe_path, &probe(5), &opts(Force::None))
        .await
        .unwrap();
    let mf = made
        .object
        .get_path(&["metadata", "managedFields"])
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].str_at(&["manager"]), Some("helm"));
    assert_eq!(mf[0].str_at(&["operation"]), Some("Apply"));
    // A value the schema refuses: the server's 422, reported as such.
    let e = ssa::apply(&api, &probe_path, &probe(11), &opts(Force::None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, SsaError::Rejected { code: 422, message } if message.contains("spec.n in body should be less than or equal to 10")),
        "{e:?}"
    );
}
