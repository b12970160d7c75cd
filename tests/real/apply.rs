//! The server-side apply path (`apply::ssa`) against the real apiserver (`../shared/realapi`):
//! structured 409s, selective force, optimistic locking losing a real race, dry runs, creates
//! and the server's own 422s — on custom resources (`tests/data/realapi/`).

use crate::support;

use fieldguard::apply::client_side;
use fieldguard::apply::ssa::{self, SsaError, SsaOptions};
use fieldguard::check::Force;
use fieldguard::live::api::Api;
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
    let server = support::realapi::shared_server(module_path!())?;
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

/// Selective force decides on one resourceVersion and forces only that version: a manager
/// the policy does not allow, writing between the decision and the forced apply, keeps its
/// field (the forced apply is refused by its precondition, and the new decision sees them);
/// an allowed one's write only leads to a new decision, which goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selective_force_decides_again_when_the_object_changes_before_the_forced_apply() {
    let Some(api) = setup().await else { return };
    let pol = || Force::against(&["kubectl-edit|log-injector|autoscaler".into()]).unwrap();

    // An intruder (not allowed) takes `note` between the two requests.
    contested(&api, "raced-force").await;
    let p = path("raced-force");
    let manifest = fg(&release("raced-force"));
    let mut raced = 0;
    let e = ssa::apply_with(&api, &p, &manifest, &opts(pol()), async || {
        raced += 1;
        if raced == 1 {
            write(
                &api,
                http::Method::PATCH,
                &format!("{p}?fieldManager=intruder&force=true"),
                "application/apply-patch+yaml",
                &json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
                        "metadata": {"name": "raced-force", "namespace": NS},
                        "spec": {"note": "intruder's"}}),
            )
            .await
            .unwrap();
        }
    })
    .await
    .unwrap_err();
    assert_eq!(raced, 1, "no forced apply after the new decision");
    let SsaError::Conflicts { conflicts, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        conflicts
            .iter()
            .any(|c| c.manager == "intruder" && c.field == ".spec.note"),
        "{conflicts:?}"
    );
    let now = get(&api, &p).await;
    assert_eq!(now.as_ref().unwrap()["spec"]["note"], "intruder's");
    assert!(owners(&now).contains(&"intruder".to_string()));
    // Nothing of the release was written: its entry still owns no `note`.
    let helm = now.as_ref().unwrap()["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "helm")
        .unwrap()["fieldsV1"]
        .to_string();
    assert!(!helm.contains("f:note"), "{helm}");

    // The autoscaler (allowed) writes in between: decided again, then forced.
    contested(&api, "raced-allowed").await;
    let p = path("raced-allowed");
    let manifest = fg(&release("raced-allowed"));
    let mut raced = 0;
    let done = ssa::apply_with(&api, &p, &manifest, &opts(pol()), async || {
        raced += 1;
        if raced == 1 {
            write(
                &api,
                http::Method::PATCH,
                &format!("{p}/scale?fieldManager=autoscaler"),
                "application/merge-patch+json",
                &json!({"spec": {"replicas": 9}}),
            )
            .await
            .unwrap();
        }
    })
    .await
    .unwrap();
    assert_eq!(raced, 2, "decided twice");
    assert_eq!(
        done.forced_from,
        ["autoscaler", "kubectl-edit", "log-injector"]
    );
    let now = get(&api, &p).await;
    assert_eq!(now.as_ref().unwrap()["spec"]["replicas"], 3);
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

/// The JSON form of one of fieldguard's values.
fn js(v: &fieldguard::value::Value) -> Value {
    support::judge::to_json(v)
}

/// Sends one client-side action as `manager` (what `apply` does for a client-side release).
async fn send(api: &Api, p: &str, action: &client_side::Action, manager: &str) -> Value {
    let collection = p.rsplit_once('/').unwrap().0;
    match action {
        client_side::Action::Create(body) => write(
            api,
            http::Method::POST,
            &format!("{collection}?fieldManager={manager}"),
            "application/json",
            &js(body),
        )
        .await
        .unwrap(),
        client_side::Action::Patch {
            content_type,
            patch,
        } => write(
            api,
            http::Method::PATCH,
            &format!("{p}?fieldManager={manager}"),
            content_type,
            &js(&fieldguard::value::Value::Map(patch.clone())),
        )
        .await
        .unwrap(),
        client_side::Action::Unchanged => panic!("nothing to send"),
    }
}

/// Client-side apply of a custom resource, as `kubectl apply` (and a Helm 3 release) does it:
/// create with the last-applied annotation, then a three-way JSON merge patch that removes
/// what the manifest dropped and keeps what others added — applied by the real server, whose
/// result must equal the patch applied locally and the semantics spelled out here. Then the
/// migration to server-side apply: the legacy manager's fields move into the release's Apply
/// entry (a JSON patch locked on the resourceVersion the preview read), so a field the next
/// manifest drops is really removed; the prediction of that apply equals what the server does;
/// a migration previewed on a version someone has since changed is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_and_the_migration_to_server_side_on_a_custom_resource() {
    let Some(api) = setup().await else { return };
    let p = path("legacy");
    let _ = write(
        &api,
        http::Method::DELETE,
        &p,
        "application/json",
        &json!({}),
    )
    .await;
    let csa = "kubectl-client-side-apply";
    let rev1 = json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
                      "metadata": {"name": "legacy", "namespace": NS},
                      "spec": {"replicas": 2, "note": "one", "labels": {"a": "1", "b": "2"},
                               "containers": [{"name": "app", "image": "app:1"}]}});

    // 1. Absent: created, stamped with the last-applied annotation.
    let action = client_side::plan(&fg(&rev1), None, None, None).unwrap();
    assert!(
        matches!(action, client_side::Action::Create(_)),
        "{action:?}"
    );
    let created = send(&api, &p, &action, csa).await;
    let annotation = |o: &Value| -> Value {
        serde_json::from_str(
            o["metadata"]["annotations"][client_side::LAST_APPLIED]
                .as_str()
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(annotation(&created), rev1);
    assert_eq!(created["spec"], rev1["spec"]);

    // 2. A hand edit: a label the manifest never had, and the replicas it has.
    write(
        &api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=kubectl-edit"),
        "application/merge-patch+json",
        &json!({"spec": {"labels": {"hotfix": "x"}, "replicas": 5}}),
    )
    .await
    .unwrap();

    // 3. The next revision drops label b, changes the note and the image: a merge patch.
    let mut rev2 = rev1.clone();
    rev2["spec"]["labels"] = json!({"a": "1"});
    rev2["spec"]["note"] = json!("two");
    rev2["spec"]["containers"][0]["image"] = json!("app:2");
    let live = fg(&get(&api, &p).await.unwrap());
    let action = client_side::plan(&fg(&rev2), Some(&live), None, None).unwrap();
    let client_side::Action::Patch {
        content_type,
        patch,
    } = &action
    else {
        panic!("{action:?}")
    };
    assert_eq!(*content_type, "application/merge-patch+json");
    let local =
        fieldguard::patch::json_merge::apply(&live, &fieldguard::value::Value::Map(patch.clone()))
            .unwrap();
    let stored = send(&api, &p, &action, csa).await;
    assert_eq!(
        support::judge::contents(&stored)["spec"],
        support::judge::contents(&js(&local))["spec"],
        "the server applied the patch differently"
    );
    assert_eq!(
        stored["spec"],
        json!({"replicas": 2, "note": "two", "labels": {"a": "1", "hotfix": "x"},
               "containers": [{"name": "app", "image": "app:2"}]}),
        "dropped label removed, hand-added label kept, changed fields set"
    );
    assert_eq!(annotation(&stored), rev2);
    // Applying the same revision again: nothing to send.
    let live = fg(&stored);
    let again = client_side::plan(&fg(&rev2), Some(&live), None, None).unwrap();
    assert!(matches!(again, client_side::Action::Unchanged), "{again:?}");

    // 4. Migration to server-side apply by `helm`: previewed, then written locked.
    let m = fieldguard::apply::migrate::plan(&live, "helm", &[])
        .unwrap()
        .expect("fields to move");
    let from: Vec<&str> = m.from.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(from, [csa]);
    // A migration previewed on a version someone has since changed is refused.
    let raced = write(
        &api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=kubectl-edit"),
        "application/merge-patch+json",
        &json!({"spec": {"labels": {"hotfix": "y"}}}),
    )
    .await
    .unwrap();
    let refused = write(
        &api,
        http::Method::PATCH,
        &p,
        "application/json-patch+json",
        &js(&fieldguard::apply::migrate::json_patch(&m)),
    )
    .await
    .unwrap_err();
    assert!(
        [409, 422].contains(&refused.code),
        "a stale migration was not refused: {refused:?}"
    );
    assert_eq!(
        get(&api, &p).await.unwrap()["metadata"]["managedFields"],
        raced["metadata"]["managedFields"],
        "the refused migration changed the managed fields"
    );
    // Previewed again on the current version: written, the entries exactly as planned.
    let live = fg(&raced);
    let m = fieldguard::apply::migrate::plan(&live, "helm", &[])
        .unwrap()
        .expect("fields to move");
    let migrated = write(
        &api,
        http::Method::PATCH,
        &p,
        "application/json-patch+json",
        &js(&fieldguard::apply::migrate::json_patch(&m)),
    )
    .await
    .unwrap();
    assert_eq!(
        support::judge::entries(&migrated["metadata"]["managedFields"]),
        support::judge::entries(&js(&fieldguard::managedfields::entries_to_value(
            &m.entries,
            |_| false
        ))),
    );
    assert!(
        !migrated["metadata"]["managedFields"]
            .to_string()
            .contains(csa),
        "{}",
        migrated["metadata"]["managedFields"]
    );

    // 5. The first server-side apply drops the note and label a: they are removed (helm owns
    //    them now), the hand-edited label stays; predicted exactly.
    let mut rev3 = rev2.clone();
    rev3["spec"].as_object_mut().unwrap().remove("note");
    rev3["spec"]["labels"] = json!({});
    rev3["metadata"]["annotations"] = json!({});
    let mut catalog = api
        .catalog_for(&["fieldguard.test/v1".to_string()].into())
        .await
        .unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let prediction =
        support::judge::predict(&mut catalog, NS, Some(&migrated), &rev3, "helm", false, now);
    let answer = write(
        &api,
        http::Method::PATCH,
        &format!("{p}?fieldManager=helm"),
        "application/apply-patch+yaml",
        &rev3,
    )
    .await;
    let prediction = match support::judge::stamped(&answer, "helm") {
        Some(t) if t != now => {
            support::judge::predict(&mut catalog, NS, Some(&migrated), &rev3, "helm", false, t)
        }
        _ => prediction,
    };
    let found = support::judge::compare(&prediction, Some(&migrated), &answer);
    assert!(found.is_empty(), "{}", found.join("\n"));
    let applied = answer.unwrap();
    assert_eq!(applied["spec"]["labels"], json!({"hotfix": "y"}));
    assert!(applied["spec"].get("note").is_none(), "{}", applied["spec"]);
}
