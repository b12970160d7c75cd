//! The server-side apply path against the fake apiserver: creates, structured 409s, selective
//! force, optimistic locking, dry runs.

mod support;

use fieldguard::apply::ssa::{self, SsaError, SsaOptions};
use fieldguard::check::Force;
use fieldguard::value::yaml::parse_one;
use support::fake_apiserver::FakeApiServer;

const PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/checkout";

fn release_deployment() -> fieldguard::value::Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/release/checkout.yaml"
    ))
    .unwrap();
    let doc = text
        .split("\n---\n")
        .find(|d| d.contains("kind: Deployment"))
        .unwrap();
    let mut v = parse_one(doc).unwrap();
    v.as_map_mut()
        .unwrap()
        .get_mut("metadata")
        .unwrap()
        .as_map_mut()
        .unwrap()
        .insert("namespace", "shop".into());
    v
}

fn opts(force: Force) -> SsaOptions {
    SsaOptions {
        field_manager: "helm".into(),
        force,
        dry_run: false,
        expect_resource_version: None,
    }
}

fn rv_of(server: &FakeApiServer) -> String {
    let s = server.state.lock().unwrap();
    s.objects[&(
        "apps".to_string(),
        "deployments".to_string(),
        "shop".to_string(),
        "checkout".to_string(),
    )]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_come_back_structured_and_selective_force_only_takes_from_allowed_managers() {
    let server = support::example_cluster();
    let api = server.api("shop").await;
    let dep = release_deployment();

    let e = ssa::apply(&api, PATH, &dep, &opts(Force::None))
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
            (
                "kube-controller-manager".to_string(),
                ".spec.replicas".to_string()
            ),
            (
                "kubectl-edit".to_string(),
                ".spec.template.spec.containers[name=\"app\"].image".to_string()
            ),
            (
                "log-injector".to_string(),
                ".spec.template.spec.containers[name=\"log-shipper\"].image".to_string()
            ),
        ]
    );

    // Selective force against kubectl-edit only: the others still conflict, nothing forced.
    let before = rv_of(&server);
    let e = ssa::apply(
        &api,
        PATH,
        &dep,
        &opts(Force::against(&["kubectl-edit".into()]).unwrap()),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, SsaError::Conflicts { .. }));
    assert_eq!(rv_of(&server), before, "nothing written");
    let patches: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("PATCH"))
        .collect();
    assert_eq!(
        patches.len(),
        2,
        "one unforced attempt each, no forced retry: {patches:?}"
    );

    // Allowed against all three: the forced retry goes through and says from whom.
    let pol =
        Force::against(&["kubectl-edit|log-injector|kube-controller-manager".into()]).unwrap();
    let done = ssa::apply(&api, PATH, &dep, &opts(pol)).await.unwrap();
    assert_eq!(
        done.forced_from,
        ["kube-controller-manager", "kubectl-edit", "log-injector"]
    );
    assert_eq!(
        done.object.get_path(&["spec", "replicas"]),
        Some(&fieldguard::value::Value::Int(3))
    );
    assert_ne!(rv_of(&server), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_unchanged_loses_a_race_cleanly_and_dry_runs_store_nothing() {
    let server = support::example_cluster();
    let api = server.api("shop").await;
    let dep = release_deployment();
    let predicted_rv = rv_of(&server);

    // Dry run, forced: answered, not stored.
    let mut o = opts(Force::All);
    o.dry_run = true;
    let dry = ssa::apply(&api, PATH, &dep, &o).await.unwrap();
    assert_eq!(
        dry.object.get_path(&["spec", "replicas"]),
        Some(&fieldguard::value::Value::Int(3))
    );
    assert_eq!(rv_of(&server), predicted_rv);
    assert!(server.requests().iter().any(|r| r.starts_with("PATCH ")));

    // Someone changes the object after the prediction: the apply is refused, not merged.
    {
        let mut s = server.state.lock().unwrap();
        let key = (
            "apps".to_string(),
            "deployments".to_string(),
            "shop".to_string(),
            "checkout".to_string(),
        );
        let mut obj = s.objects[&key].clone();
        obj["spec"]["replicas"] = serde_json::json!(7);
        s.put(obj);
    }
    let mut o = opts(Force::All);
    o.expect_resource_version = Some(predicted_rv.clone());
    let e = ssa::apply(&api, PATH, &dep, &o).await.unwrap_err();
    assert!(
        matches!(&e, SsaError::Stale(m) if m.contains("the object has been modified")),
        "{e:?}"
    );
    assert_ne!(rv_of(&server), predicted_rv);

    // With the current version it applies.
    o.expect_resource_version = Some(rv_of(&server));
    ssa::apply(&api, PATH, &dep, &o).await.unwrap();

    // Creating a new object.
    let mut cm = parse_one(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: shop}\ndata: {a: b}\n",
    )
    .unwrap();
    let made = ssa::apply(
        &api,
        "/api/v1/namespaces/shop/configmaps/new",
        &cm,
        &opts(Force::None),
    )
    .await
    .unwrap();
    assert_eq!(made.object.str_at(&["metadata", "managedFields"]), None);
    let mf = made
        .object
        .get_path(&["metadata", "managedFields"])
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(mf[0].str_at(&["manager"]), Some("helm"));
    assert_eq!(mf[0].str_at(&["operation"]), Some("Apply"));
    // Invalid content is refused by the server (422), reported as such.
    cm.as_map_mut()
        .unwrap()
        .insert("data", parse_one("{a: [1]}").unwrap());
    let e = ssa::apply(
        &api,
        "/api/v1/namespaces/shop/configmaps/new",
        &cm,
        &opts(Force::None),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, SsaError::Rejected { code: 422, .. }), "{e:?}");
}
