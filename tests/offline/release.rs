//! Release applies against the fake apiserver on loopback: install, upgrade and rollback with
//! each method, HIP-0023's `auto`, selective force, `--expect-unchanged` losing a race, CSA→SSA
//! migration after which a removed field is really removed, deletion of dropped objects,
//! all-or-nothing validation, adoption, CRDs first, create-only fields, waiting, hook Jobs waited
//! for.
//!
//! **Protocol only.** These runs use what the real apiserver (`../shared/realapi`) does not
//! serve — Secrets as release records, Deployments and Jobs — so they stay on the fake, and the
//! fake computes server-side applies and patches with fieldguard's own engine. What these tests
//! prove is the run's order, requests, records and refusals; the outcome of an apply is judged
//! against the real server (`tests/real/apply.rs`, `tests/real/differential.rs`), and releases with
//! hooks by Helm 4 itself (`tests/real/release.rs`).

use crate::support;

use fieldguard::apply::release::{Method, ServerSide};
use fieldguard::apply::run::{self, Outcome, Request, Result_, RunError};
use fieldguard::check::Force;
use fieldguard::manifest;
use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;

fn docs(text: &str) -> Vec<fieldguard::manifest::Document> {
    let mut loaded = manifest::load(&[], &mut std::io::empty());
    manifest::parse_into(
        &std::sync::Arc::from("release.yaml"),
        text.as_bytes(),
        &mut loaded,
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.documents
}

fn request(text: &str) -> Request {
    Request {
        release: "shop".into(),
        namespace: "shop".into(),
        field_manager: "fieldguard".into(),
        server_side: ServerSide::Auto,
        force: Force::None,
        documents: docs(text),
        manifest: text.into(),
        rollback_to: None,
        plan_only: false,
        dry_run: false,
        expect_unchanged: false,
        adopt: false,
        migrate_from: vec![],
        wait: None,
        poll: Duration::from_millis(50),
        driver: fieldguard::apply::storage::Driver::Secret,
        hook_timeout: Duration::from_secs(5),
        recreate_on_immutable: false,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn go(server: &FakeApiServer, req: Request) -> Result<Outcome, RunError> {
    let rt = rt();
    rt.block_on(async {
        let api = server.api("shop").await;
        run::run(&api, req, &mut |_| {}).await
    })
}

fn object(server: &FakeApiServer, plural: &str, name: &str) -> Option<Value> {
    let s = server.state.lock().unwrap();
    s.objects
        .iter()
        .find(|((_, p, _, n), _)| p == plural && n == name)
        .map(|(_, o)| o.clone())
}

fn result_of(o: &Outcome, name: &str) -> Result_ {
    o.objects
        .iter()
        .find(|x| {
            x.object.ends_with(&format!("/{name}")) || x.object.ends_with(&format!(" {name}"))
        })
        .unwrap_or_else(|| panic!("no result for {name}: {:?}", o.objects))
        .result
}

fn writes(server: &FakeApiServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect()
}

fn records(server: &FakeApiServer) -> Vec<Value> {
    let s = server.state.lock().unwrap();
    s.objects
        .iter()
        .filter(|((_, p, _, n), _)| p == "secrets" && n.starts_with("fieldguard.release.v1.shop."))
        .map(|(_, o)| o.clone())
        .collect()
}

fn record(server: &FakeApiServer, revision: u32) -> fieldguard::apply::release::Revision {
    let secret = records(server)
        .into_iter()
        .find(|s| s["metadata"]["name"] == format!("fieldguard.release.v1.shop.v{revision}"))
        .unwrap_or_else(|| panic!("no record of revision {revision}"));
    let v = fieldguard::value::json::parse_str(&secret.to_string()).unwrap();
    fieldguard::apply::release::decode_own(&v).unwrap()
}

const V1: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: blue, retries: '3'}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: legacy, namespace: shop}
data: {old: 'true'}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: precious
  namespace: shop
  annotations: {helm.sh/resource-policy: keep}
data: {keep: me}
";

const V2: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: green}
";

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn server_side_install_upgrade_rollback() {
    let server = support::empty_example_cluster();
    let out = go(&server, request(V1)).unwrap();
    assert_eq!(
        (out.revision, out.method, out.status.as_str()),
        (1, Method::Ssa, "deployed")
    );
    assert_eq!(result_of(&out, "settings"), Result_::Created);
    assert!(out.mismatches.is_empty(), "{:?}", out.mismatches);
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "shop"
    );
    assert_eq!(cm["metadata"]["managedFields"][0]["operation"], "Apply");
    assert_eq!(record(&server, 1).method, Some(Method::Ssa));

    // Re-applying the same release changes nothing.
    let out = go(&server, request(V1)).unwrap();
    assert_eq!(result_of(&out, "settings"), Result_::Unchanged);
    assert!(out.mismatches.is_empty(), "{:?}", out.mismatches);

    // Upgrade: a key removed from the manifest is removed; a dropped object is deleted unless
    // it says keep.
    let out = go(&server, request(V2)).unwrap();
    assert_eq!(out.revision, 3);
    assert_eq!(result_of(&out, "settings"), Result_::Configured);
    assert_eq!(result_of(&out, "legacy"), Result_::Deleted);
    assert_eq!(result_of(&out, "precious"), Result_::Kept);
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert_eq!(cm["data"], json!({"mode": "green"}));
    assert!(object(&server, "configmaps", "legacy").is_none());
    assert!(object(&server, "configmaps", "precious").is_some());
    assert!(out.mismatches.is_empty(), "{:?}", out.mismatches);
    assert_eq!(record(&server, 1).status, "superseded");

    // Rollback to revision 1: its manifest again, server-side (the latest revision's method).
    let mut req = request("");
    req.rollback_to = Some(1);
    let out = go(&server, req).unwrap();
    assert_eq!((out.revision, out.method), (4, Method::Ssa));
    assert!(out.operation.starts_with("rollback"));
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert_eq!(cm["data"], json!({"mode": "blue", "retries": "3"}));
    assert!(object(&server, "configmaps", "legacy").is_some());
    assert_eq!(record(&server, 4).status, "deployed");
}

/// A Helm 3 release: objects written client-side by manager `helm`, a Helm record without
/// `apply_method`.
fn helm3_release(server: &FakeApiServer) {
    let mut req = request(V1);
    req.server_side = ServerSide::False;
    req.field_manager = "helm".into();
    let out = go(server, req).unwrap();
    assert_eq!(out.method, Method::Csa);
    let mut s = server.state.lock().unwrap();
    let own: Vec<_> = s
        .objects
        .keys()
        .filter(|k| k.3.starts_with("fieldguard.release.v1."))
        .cloned()
        .collect();
    for k in own {
        s.delete(&k);
    }
    use base64::Engine;
    use std::io::Write;
    let rel = json!({"name": "shop", "namespace": "shop", "version": 1,
                     "info": {"status": "deployed"}, "manifest": V1});
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(rel.to_string().as_bytes()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let inner = b64.encode(gz.finish().unwrap());
    s.put(json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": "sh.helm.release.v1.shop.v1", "namespace": "shop",
                     "labels": {"owner": "helm", "name": "shop", "version": "1", "status": "deployed"}},
        "data": {"release": b64.encode(inner.as_bytes())}}));
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn the_configmap_driver_reads_helms_records_and_keeps_its_own_in_configmaps() {
    let server = support::empty_example_cluster();
    // A Helm 4 release recorded in a ConfigMap (`data.release`: base64 of gzip'd JSON, as
    // Helm's cfgmaps.go writes it), applied server-side.
    {
        use base64::Engine;
        use std::io::Write;
        let rel = json!({"name": "shop", "namespace": "shop", "version": 1, "apply_method": "ssa",
                         "info": {"status": "deployed"}, "manifest": V1});
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(rel.to_string().as_bytes()).unwrap();
        let body = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
        server.state.lock().unwrap().put(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "sh.helm.release.v1.shop.v1", "namespace": "shop",
                         "labels": {"owner": "helm", "name": "shop", "version": "1", "status": "deployed"}},
            "data": {"release": body}}));
    }
    let mut req = request(V2);
    req.driver = fieldguard::apply::storage::Driver::ConfigMap;
    let out = go(&server, req).unwrap();
    // Helm's record was read: an upgrade to revision 2, by its recorded method; the objects
    // its manifest had and this one drops are deleted (unless kept).
    assert_eq!(
        (out.revision, out.method, out.status.as_str()),
        (2, Method::Ssa, "deployed")
    );
    assert_eq!(result_of(&out, "legacy"), Result_::Deleted);
    let own = object(&server, "configmaps", "fieldguard.release.v1.shop.v2")
        .expect("recorded in a ConfigMap");
    assert_eq!(
        own["metadata"]["labels"]["fieldguard.dev/status"],
        "deployed"
    );
    let rev = fieldguard::apply::release::decode_own_configmap(
        &fieldguard::value::json::parse_str(&own.to_string()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (rev.revision, rev.status.as_str(), rev.manifest.as_str()),
        (2, "deployed", V2)
    );
    assert!(records(&server).is_empty(), "no Secret records");
    assert!(
        object(&server, "configmaps", "sh.helm.release.v1.shop.v1").is_some(),
        "Helm's record is never rewritten"
    );
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn client_side_upgrade_of_a_helm3_release_follows_auto() {
    let server = support::empty_example_cluster();
    helm3_release(&server);
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert!(
        cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    assert_eq!(cm["metadata"]["managedFields"][0]["manager"], "helm");

    // Someone edits the object by hand; the client-side upgrade keeps the hand-made key and
    // removes the key the release dropped.
    {
        let mut s = server.state.lock().unwrap();
        let key = s
            .objects
            .keys()
            .find(|k| k.3 == "settings")
            .cloned()
            .unwrap();
        let mut o = s.objects[&key].clone();
        o["data"]["hotfix"] = json!("yes");
        s.put(o);
    }
    let before = server.requests().len();
    let mut req = request(V2);
    req.field_manager = "helm".into();
    let out = go(&server, req).unwrap();
    assert_eq!(
        (out.revision, out.method),
        (2, Method::Csa),
        "auto follows the Helm 3 record"
    );
    assert_eq!(result_of(&out, "settings"), Result_::Configured);
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert_eq!(cm["data"], json!({"mode": "green", "hotfix": "yes"}));
    assert!(
        server.requests()[before..]
            .iter()
            .any(|r| r.starts_with("PATCH /api/v1/namespaces/shop/configmaps/settings"))
    );
    assert_eq!(record(&server, 2).method, Some(Method::Csa));
    // The Helm record is never rewritten.
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.contains("sh.helm.release") && !r.starts_with("GET"))
    );
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn forcing_a_client_side_run_is_refused_before_anything_is_sent() {
    let server = support::empty_example_cluster();
    helm3_release(&server);
    let before = writes(&server).len();
    let mut req = request(V2);
    req.force = Force::All;
    let err = go(&server, req).unwrap_err();
    assert!(
        matches!(&err, RunError::Refused(m) if m.contains("--server-side=true")),
        "{err}"
    );
    assert_eq!(writes(&server).len(), before);
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn switching_to_server_side_migrates_ownership_so_removals_remove() {
    let server = support::empty_example_cluster();
    helm3_release(&server);
    // Without migration the old `helm` Update entry would keep `data.retries` alive.
    let mut req = request(V2);
    req.server_side = ServerSide::True;
    let out = go(&server, req).unwrap();
    assert_eq!(out.method, Method::Ssa);
    let (obj, m) = out
        .migrations
        .iter()
        .find(|(o, _)| o.ends_with("/settings"))
        .expect("settings is migrated");
    assert!(
        m.from.iter().any(|(who, n)| who == "helm" && *n > 0),
        "{obj}: {:?}",
        m.from
    );
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert_eq!(
        cm["data"],
        json!({"mode": "green"}),
        "the removed key is really removed"
    );
    let managers: Vec<&str> = cm["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert!(!managers.contains(&"helm"), "{managers:?}");
    assert!(
        writes(&server)
            .iter()
            .any(|w| w.starts_with("PATCH /api/v1/namespaces/shop/configmaps/settings"))
    );
}

const DEPLOY: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: 'web:1'}
";

fn edit_replicas_by_hand(server: &FakeApiServer) {
    let rt = rt();
    rt.block_on(async {
        let api = server.api("shop").await;
        let patch = br#"{"spec":{"replicas":5}}"#.to_vec();
        api.write(
            http::Method::PATCH,
            "/apis/apps/v1/namespaces/shop/deployments/web?fieldManager=kubectl-edit",
            "application/strategic-merge-patch+json",
            patch,
        )
        .await
        .unwrap();
    });
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn selective_force_takes_over_only_allowed_managers() {
    let server = support::empty_example_cluster();
    go(&server, request(DEPLOY)).unwrap();
    edit_replicas_by_hand(&server);
    let changed = DEPLOY.replace("replicas: 2", "replicas: 3");

    // Not allowed: nothing is written, the conflict is reported.
    let before = writes(&server).len();
    let out = go(&server, request(&changed)).unwrap();
    assert_eq!(out.status, "refused");
    assert_eq!(result_of(&out, "web"), Result_::Conflicted);
    assert_eq!(out.exit_code(), 1);
    assert_eq!(writes(&server).len(), before, "nothing is sent");

    // A policy naming another manager does not help.
    let mut req = request(&changed);
    req.force = Force::against(&["hpa-.*".into()]).unwrap();
    assert_eq!(go(&server, req).unwrap().status, "refused");

    // Allowed: taken over.
    let mut req = request(&changed);
    req.force = Force::against(&["kubectl-edit".into()]).unwrap();
    let out = go(&server, req).unwrap();
    assert_eq!(out.status, "deployed");
    assert_eq!(result_of(&out, "web"), Result_::Configured);
    let d = object(&server, "deployments", "web").unwrap();
    assert_eq!(d["spec"]["replicas"], 3);
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn expect_unchanged_loses_a_race_cleanly() {
    let server = support::empty_example_cluster();
    go(&server, request(V2)).unwrap();
    server.state.lock().unwrap().touch_before_write = Some("settings".into());
    let mut req = request(&V2.replace("green", "red"));
    req.expect_unchanged = true;
    let out = go(&server, req).unwrap();
    assert_eq!(out.status, "failed");
    let o = out
        .objects
        .iter()
        .find(|o| o.object.ends_with("/settings"))
        .unwrap();
    assert_eq!(o.result, Result_::Failed);
    assert!(
        o.message
            .as_deref()
            .unwrap_or("")
            .contains("changed since the prediction"),
        "{o:?}"
    );
    let cm = object(&server, "configmaps", "settings").unwrap();
    assert_eq!(cm["data"]["mode"], "green", "the apply did not happen");
    assert_eq!(record(&server, 2).status, "failed");
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn invalid_manifest_writes_nothing() {
    let server = support::empty_example_cluster();
    let bad = format!(
        "{V1}---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: broken, namespace: shop}}\nspec: {{replicas: many}}\n"
    );
    let err = go(&server, request(&bad)).unwrap_err();
    let RunError::Invalid(errors) = err else {
        panic!("expected invalid manifests, got {err}")
    };
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("release.yaml")),
        "{errors:?}"
    );
    assert!(writes(&server).is_empty(), "{:?}", writes(&server));
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn adoption_needs_consent_and_other_releases_are_never_taken() {
    let server = support::empty_example_cluster();
    server
        .state
        .lock()
        .unwrap()
        .put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop"}, "data": {"mode": "manual"}}));
    let err = go(&server, request(V2)).unwrap_err();
    assert!(err.to_string().contains("--adopt"), "{err}");
    assert!(writes(&server).iter().all(|w| !w.contains("configmaps")));
    let mut req = request(V2);
    req.adopt = true;
    let out = go(&server, req).unwrap();
    assert_eq!(result_of(&out, "settings"), Result_::Configured);

    let mut other = request(V2);
    other.release = "other".into();
    other.adopt = true;
    let err = go(&server, other).unwrap_err();
    assert!(
        err.to_string().contains("belongs to release \"shop\""),
        "{err}"
    );
}

const CRD_AND_CR: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: shop}
spec: {size: 3}
";

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn crds_first_then_their_objects() {
    let server = support::empty_example_cluster();
    // The custom resource comes first in the file; it is applied after its CRD.
    let text = {
        let mut parts: Vec<&str> = CRD_AND_CR.split("---\n").collect();
        parts.reverse();
        parts.join("---\n")
    };
    let out = go(&server, request(&text)).unwrap();
    assert_eq!(out.status, "deployed", "{:?}", out.objects);
    assert!(
        out.objects[0].object.contains("CustomResourceDefinition"),
        "{:?}",
        out.objects
    );
    assert_eq!(result_of(&out, "w1"), Result_::Created);
    assert_eq!(object(&server, "widgets", "w1").unwrap()["spec"]["size"], 3);
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn create_only_fields_are_left_to_the_autoscaler() {
    let server = support::empty_example_cluster();
    let text = DEPLOY.replace(
        "metadata: {name: web, namespace: shop}",
        "metadata:\n  name: web\n  namespace: shop\n  annotations: {fieldguard.dev/create-only-fields: spec.replicas}",
    );
    go(&server, request(&text)).unwrap();
    edit_replicas_by_hand(&server);
    let out = go(&server, request(&text.replace("web:1", "web:2"))).unwrap();
    assert_eq!(out.status, "deployed", "{:?}", out.objects);
    let d = object(&server, "deployments", "web").unwrap();
    assert_eq!(d["spec"]["replicas"], 5, "the autoscaler's value stays");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "web:2"
    );
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn wait_tracks_rollouts_and_reports_failures() {
    let server = support::empty_example_cluster();
    // A "controller": marks the deployment rolled out once it appears.
    let controller = on_appearance(&server, "deployments", "web", |o| {
        o["metadata"]["generation"] = json!(1);
        o["status"] = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
    });
    let mut req = request(DEPLOY);
    req.wait = Some(Duration::from_secs(60));
    let out = go(&server, req).unwrap();
    controller.join().unwrap();
    assert_eq!(out.status, "deployed");
    let web = out
        .objects
        .iter()
        .find(|o| o.object.ends_with("/web"))
        .unwrap();
    assert_eq!(web.readiness.as_deref(), Some("ready"));

    // No controller this time: the rollout never completes.
    let mut req = request(&DEPLOY.replace("web:1", "web:3"));
    req.wait = Some(Duration::from_millis(300));
    {
        let mut s = server.state.lock().unwrap();
        let key = s.objects.keys().find(|k| k.3 == "web").cloned().unwrap();
        let mut o = s.objects[&key].clone();
        o["metadata"]["generation"] = json!(2);
        s.put(o);
    }
    let out = go(&server, req).unwrap();
    assert_eq!(out.status, "failed");
    let web = out
        .objects
        .iter()
        .find(|o| o.object.ends_with("/web"))
        .unwrap();
    assert!(
        web.readiness.as_deref().unwrap_or("").contains("not ready"),
        "{web:?}"
    );
    assert_eq!(out.exit_code(), 4);
}

/// A "controller": once the object `plural`/`name` appears (with no status conditions yet),
/// changes it (looking every 10 ms; 60 s at most, a hang guard).
fn on_appearance(
    server: &FakeApiServer,
    plural: &'static str,
    name: &'static str,
    change: fn(&mut Value),
) -> std::thread::JoinHandle<()> {
    let st = server.state.clone();
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            let mut s = st.lock().unwrap();
            let key = s
                .objects
                .keys()
                .find(|k| k.1 == plural && k.3 == name)
                .cloned();
            if let Some(key) = key {
                let mut o = s.objects[&key].clone();
                if o["status"]["conditions"].is_array() {
                    continue;
                }
                change(&mut o);
                s.put(o);
                return;
            }
        }
    })
}

const MIGRATE_HOOK: &str = "---
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: shop
  annotations: {helm.sh/hook: 'pre-install,pre-upgrade', helm.sh/hook-delete-policy: 'before-hook-creation,hook-failed'}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: 'migrate:1'}]
";

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn hook_jobs_are_waited_for_and_a_failed_one_fails_the_release() {
    let server = support::empty_example_cluster();
    // Install: the pre-install Job runs before the objects and is waited for until Complete.
    let controller = on_appearance(&server, "jobs", "migrate", |o| {
        o["status"] =
            json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]});
    });
    let out = go(&server, request(&format!("{V1}{MIGRATE_HOOK}"))).unwrap();
    controller.join().unwrap();
    assert_eq!(out.status, "deployed", "{:?}", out.objects);
    let order: Vec<(String, &str, Option<&str>)> = out
        .objects
        .iter()
        .map(|o| (o.object.clone(), o.result.as_str(), o.hook.as_deref()))
        .collect();
    assert_eq!(
        order[0],
        (
            "Job.batch shop/migrate".into(),
            "created",
            Some("pre-install")
        )
    );
    assert!(order[1..].iter().all(|o| o.2.is_none()), "{order:?}");
    let job = object(&server, "jobs", "migrate").unwrap();
    assert!(
        job["metadata"]["annotations"]
            .get("meta.helm.sh/release-name")
            .is_none(),
        "a hook is no release object: {job}"
    );
    let rev = record(&server, 1);
    assert_eq!(rev.hooks.len(), 1);
    assert_eq!(
        (rev.hooks[0].event.as_str(), rev.hooks[0].phase.as_str()),
        ("pre-install", "Succeeded")
    );

    // Upgrade: the live hook is deleted first (before-hook-creation) and created again; it
    // fails, so the release fails, nothing else is applied, and hook-failed deletes it.
    let before = writes(&server).len();
    let controller = on_appearance(&server, "jobs", "migrate", |o| {
        o["status"] = json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]});
    });
    let out = go(&server, request(&format!("{V2}{MIGRATE_HOOK}"))).unwrap();
    controller.join().unwrap();
    assert_eq!(out.status, "failed");
    assert_eq!(out.exit_code(), 4);
    let job: Vec<&str> = out
        .objects
        .iter()
        .filter(|o| o.object == "Job.batch shop/migrate")
        .map(|o| o.result.as_str())
        .collect();
    assert_eq!(job, ["deleted", "failed", "deleted"]);
    assert_eq!(result_of(&out, "settings"), Result_::Skipped);
    assert_eq!(
        object(&server, "configmaps", "settings").unwrap()["data"]["mode"],
        "blue"
    );
    assert!(
        object(&server, "jobs", "migrate").is_none(),
        "hook-failed deletes it"
    );
    let new_writes: Vec<String> = writes(&server)[before..]
        .iter()
        .filter(|w| w.contains("/jobs/") || w.contains("/configmaps/"))
        .cloned()
        .collect();
    assert!(
        new_writes[0].starts_with("DELETE") && new_writes[0].contains("/jobs/migrate"),
        "{new_writes:?}"
    );
    assert!(
        new_writes[1].starts_with("PATCH") && new_writes[1].contains("/jobs/migrate"),
        "{new_writes:?}"
    );
    assert!(
        !new_writes.iter().any(|w| w.contains("/configmaps/")),
        "{new_writes:?}"
    );
    let rev = record(&server, 2);
    assert_eq!(rev.status, "failed");
    assert_eq!(rev.hooks[0].phase, "Failed");
    let failed = out
        .objects
        .iter()
        .find(|o| o.result == Result_::Failed)
        .unwrap();
    assert!(
        failed
            .message
            .as_deref()
            .unwrap_or("")
            .contains("Job Failed. failed: 1/1"),
        "{failed:?}"
    );
}

/// Protocol only (the fake apiserver plays the Job controller and the kubelet's logs).
#[test]
fn a_failed_hook_leaves_its_events_and_the_logs_its_policy_asks_for() {
    use support::fake_apiserver::Resource;
    let server = support::empty_example_cluster_with(vec![
        Resource::new("v1", "Pod", "pods", true, &["status"]),
        Resource::new("v1", "Event", "events", true, &[]),
    ]);
    let hook = MIGRATE_HOOK.replace(
        "helm.sh/hook-delete-policy: 'before-hook-creation,hook-failed'",
        "helm.sh/hook-delete-policy: 'before-hook-creation,hook-failed', \
         helm.sh/hook-output-log-policy: hook-failed",
    );
    // The Job's controller: once the Job appears, its pod ran and failed, with events and a
    // log; `ok` says whether the Job then completes or fails.
    let controller = |ok: bool| {
        let st = server.state.clone();
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
                let mut s = st.lock().unwrap();
                let key = s
                    .objects
                    .keys()
                    .find(|k| k.1 == "jobs" && k.3 == "migrate")
                    .cloned();
                let Some(key) = key else { continue };
                let mut job = s.objects[&key].clone();
                if job["status"]["conditions"].is_array() {
                    continue;
                }
                s.put(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "migrate-x7k2p", "namespace": "shop", "labels": {"job-name": "migrate"}},
                    "spec": {"containers": [{"name": "migrate", "image": "migrate:1"}]}}));
                let log: String = (1..=600).map(|i| format!("step {i}\n")).collect();
                s.logs.insert(
                    ("shop".into(), "migrate-x7k2p".into(), "migrate".into()),
                    format!("{log}error: relation \"users\" already exists\n"),
                );
                for (name, kind, about, reason, at) in [
                    (
                        "migrate.1",
                        "Job",
                        "migrate",
                        "SuccessfulCreate",
                        "2026-11-26T06:00:01Z",
                    ),
                    (
                        "migrate.2",
                        "Job",
                        "migrate",
                        "BackoffLimitExceeded",
                        "2026-11-26T06:00:09Z",
                    ),
                    (
                        "pod.1",
                        "Pod",
                        "migrate-x7k2p",
                        "BackOff",
                        "2026-11-26T06:00:05Z",
                    ),
                    (
                        "other.1",
                        "Pod",
                        "unrelated",
                        "BackOff",
                        "2026-11-26T06:00:06Z",
                    ),
                ] {
                    s.put(json!({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": name, "namespace": "shop"},
                        "involvedObject": {"kind": kind, "name": about, "namespace": "shop"},
                        "type": if reason.starts_with("Successful") { "Normal" } else { "Warning" },
                        "reason": reason, "message": format!("{reason} happened"), "lastTimestamp": at}));
                }
                job["status"] = if ok {
                    json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
                } else {
                    json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]})
                };
                s.put(job);
                return;
            }
        })
    };
    // It succeeds: the policy asks for logs on failure only, so none are read.
    let c = controller(true);
    let out = go(&server, request(&format!("{V1}{hook}"))).unwrap();
    c.join().unwrap();
    assert_eq!(out.status, "deployed", "{:?}", out.objects);
    assert!(
        out.objects
            .iter()
            .all(|o| o.logs.is_empty() && o.events.is_empty())
    );
    assert!(!server.requests().iter().any(|r| r.contains("/log")));

    // It fails: the events about the Job and its pod, in time order, and the pod's log (its
    // last 500 lines), all read before hook-failed deletes the Job.
    let c = controller(false);
    let out = go(&server, request(&format!("{V2}{hook}"))).unwrap();
    c.join().unwrap();
    assert_eq!(out.status, "failed");
    let failed = out
        .objects
        .iter()
        .find(|o| o.result == Result_::Failed)
        .unwrap();
    assert_eq!(
        failed.events,
        [
            "Normal SuccessfulCreate Job/migrate: SuccessfulCreate happened",
            "Warning BackOff Pod/migrate-x7k2p: BackOff happened",
            "Warning BackoffLimitExceeded Job/migrate: BackoffLimitExceeded happened",
        ]
    );
    assert_eq!(failed.logs.len(), 1);
    let log = &failed.logs[0];
    assert_eq!(
        (log.pod.as_str(), log.container.as_str()),
        ("migrate-x7k2p", "migrate")
    );
    assert!(
        log.text
            .ends_with("error: relation \"users\" already exists\n"),
        "{}",
        log.text
    );
    assert!(
        log.text.starts_with("step 102\n"),
        "the last 500 lines: {}",
        &log.text[..20]
    );
    let requests = server.requests();
    let read = requests
        .iter()
        .rposition(|r| r.contains("/pods/migrate-x7k2p/log"))
        .unwrap();
    let deleted = requests
        .iter()
        .rposition(|r| r.starts_with("DELETE") && r.contains("/jobs/migrate"))
        .unwrap();
    assert!(
        read < deleted,
        "logs are read before the hook is deleted: {requests:?}"
    );
    assert!(object(&server, "jobs", "migrate").is_none());
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn plan_stops_before_writing() {
    let server = support::empty_example_cluster();
    let mut req = request(V1);
    req.plan_only = true;
    let out = go(&server, req).unwrap();
    assert_eq!(out.status, "planned");
    assert_eq!(out.prediction.objects.len(), 3);
    assert!(writes(&server).is_empty());
}

fn cli(server: &FakeApiServer, dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let kc = server.kubeconfig(dir, "shop");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .arg("apply")
        .args(args)
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["--context", "fake"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine.
#[test]
fn command_line_plan_apply_and_refusal() {
    let server = support::empty_example_cluster();
    let dir = std::env::temp_dir().join(format!("fieldguard-release-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("release.yaml");
    std::fs::write(&file, V1).unwrap();
    let f = file.to_str().unwrap();

    let (code, out, err) = cli(&server, &dir, &["shop", "-f", f, "--plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("planned"), "{out}");
    assert!(writes(&server).is_empty());

    let (code, out, err) = cli(&server, &dir, &["shop", "-f", f, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "deployed");
    assert_eq!(v["method"], "ssa");
    assert_eq!(v["prediction"]["apiVersion"], "fieldguard.dev/v1");
    assert_eq!(v["objects"].as_array().unwrap().len(), 3);

    // Forcing while the release resolves to client-side apply is explained, nothing is sent.
    let before = writes(&server).len();
    let (code, _, err) = cli(
        &server,
        &dir,
        &[
            "shop",
            "-f",
            f,
            "--server-side",
            "false",
            "--force-conflicts",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--server-side=true"), "{err}");
    assert_eq!(writes(&server).len(), before);
    std::fs::remove_dir_all(&dir).ok();
}

/// Against a real cluster when `KUBECONFIG` is set (skipped otherwise): a server dry run of a
/// one-object release — predicted, sent with dryRun=All, nothing stored, nothing recorded.
#[test]
fn real_cluster_tier_dry_run() {
    let Some(kc) = std::env::var_os("KUBECONFIG") else {
        eprintln!("real-cluster tier skipped: KUBECONFIG is not set");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fieldguard-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let name = format!("fieldguard-probe-{}", std::process::id());
    let file = dir.join("probe.yaml");
    std::fs::write(
        &file,
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .args([
            "apply",
            &name,
            "-f",
            file.to_str().unwrap(),
            "--dry-run",
            "-o",
            "json",
        ])
        .env("KUBECONFIG", &kc)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["status"], "dry-run");
    assert_eq!(v["objects"][0]["result"], "created");
    std::fs::remove_dir_all(&dir).ok();
}
