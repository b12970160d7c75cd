//! Scenario tests for predictions: a small history of writes, then the apply to predict.

use fieldguard::managedfields::{FieldManager, ManagedFieldsEntry, Prepared, entries_to_value};
use fieldguard::predict::{ApplyRequest, ForcePolicy, Prediction, Verdict, predict};
use fieldguard::schema::{Gvk, Schema, builtin};
use fieldguard::value::yaml::parse_one;
use fieldguard::value::{Map, Value};
use std::collections::BTreeMap;

const T0: i64 = 1_700_000_000;

/// An object with its managed fields, built by a sequence of writes.
struct Cluster {
    schema: &'static Schema,
    type_name: String,
    object: Value,
    entries: Vec<ManagedFieldsEntry>,
    clock: i64,
    reset: BTreeMap<String, fieldguard::fieldpath::Set>,
}

impl Cluster {
    fn new(api: &str, kind: &str) -> Cluster {
        let schema = builtin::default_schema().unwrap();
        let type_name = schema
            .type_for(&Gvk::from_api_version(api, kind))
            .unwrap()
            .to_string();
        let mut m = Map::new();
        m.insert("apiVersion", Value::from(api));
        m.insert("kind", Value::from(kind));
        Cluster {
            schema,
            type_name,
            object: Value::Map(m),
            entries: vec![],
            clock: T0,
            reset: BTreeMap::new(),
        }
    }

    fn write(
        &mut self,
        sub: &str,
        f: impl FnOnce(
            &FieldManager,
            &Value,
            &[ManagedFieldsEntry],
        ) -> fieldguard::managedfields::ApplyOutcome,
    ) -> &mut Self {
        self.clock += 60;
        let tr = self.schema.type_ref(&self.type_name);
        let fm = FieldManager {
            schema: self.schema,
            type_ref: &tr,
            api_version: self.object.str_at(&["apiVersion"]).unwrap().to_string(),
            kind: self.object.str_at(&["kind"]).unwrap().to_string(),
            subresource: sub.into(),
            ignored: &self.reset,
            known_versions: None,
            now: self.clock,
            options: Default::default(),
        };
        let out = f(&fm, &self.object, &self.entries);
        self.object = out.object;
        self.entries = out.entries;
        self
    }

    fn apply(&mut self, manager: &str, yaml: &str) -> &mut Self {
        let cfg = parse_one(yaml).unwrap();
        self.write("", |fm, obj, entries| {
            fm.apply(obj, &cfg, entries, manager, false).unwrap()
        })
    }

    /// A non-apply write: `edit` changes the current object.
    fn update(&mut self, manager: &str, sub: &str, edit: impl FnOnce(&mut Value)) -> &mut Self {
        let mut new = self.object.clone();
        edit(&mut new);
        self.write(sub, |fm, obj, entries| {
            fm.update(obj, &new, entries, None, manager).unwrap()
        })
    }

    /// The live object as the apiserver returns it (with managedFields).
    fn live(&self) -> Value {
        let mut o = self.object.clone();
        let mf = entries_to_value(&self.entries, |_| false);
        o.as_map_mut()
            .unwrap()
            .get_mut("metadata")
            .and_then(Value::as_map_mut)
            .unwrap()
            .insert("managedFields", mf);
        o
    }

    fn predict(&self, manager: &str, yaml: &str, force: ForcePolicy) -> Prediction {
        let cfg = parse_one(yaml).unwrap();
        let tr = self.schema.type_ref(&self.type_name);
        let live = Prepared::new(self.schema, &tr, &self.live()).unwrap();
        predict(&ApplyRequest {
            schema: self.schema,
            type_ref: &tr,
            live: Some(&live),
            config: &cfg,
            manager,
            force,
            subresource: "",
            reset_fields: &self.reset,
            now: self.clock + 60,
            structural: None,
        })
    }
}

fn set_path(v: &mut Value, path: &[&str], x: Value) {
    let mut cur = v;
    for k in &path[..path.len() - 1] {
        cur = cur.as_map_mut().unwrap().get_mut(k).unwrap();
    }
    cur.as_map_mut().unwrap().insert(path[path.len() - 1], x);
}

const V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web, team: payments}
  annotations: {owner: alice}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: shop/web:1.0
"#;

const V2: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: shop/web:2.0
"#;

/// alice deployed V1; the HPA scaled to 5 through /scale; someone hot-fixed the image with
/// kubectl edit; a mutating controller injected a sidecar; bob co-owns the team label.
fn history() -> Cluster {
    let mut c = Cluster::new("apps/v1", "Deployment");
    c.apply("alice", V1)
        .update("kube-controller-manager", "scale", |o| set_path(o, &["spec", "replicas"], Value::Int(5)))
        .update("kubectl-edit", "", |o| {
            let cs = o.get_path(&["spec", "template", "spec", "containers"]).unwrap().clone();
            let mut cs = cs.as_list().unwrap().to_vec();
            cs[0].as_map_mut().unwrap().insert("image", Value::from("shop/web:1.0-hotfix"));
            set_path(o, &["spec", "template", "spec", "containers"], Value::List(cs));
        })
        .update("injector", "", |o| {
            let mut cs = o.get_path(&["spec", "template", "spec", "containers"]).unwrap().as_list().unwrap().to_vec();
            cs.push(parse_one("{name: istio-proxy, image: proxy:1.20}").unwrap());
            set_path(o, &["spec", "template", "spec", "containers"], Value::List(cs));
        })
        .apply("bob", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop, labels: {team: payments}}\n");
    c
}

#[test]
fn conflicts_name_owners_and_both_values() {
    let c = history();
    let p = c.predict("alice", V2, ForcePolicy::None);
    assert_eq!(p.verdict, Verdict::Conflict);
    let paths: Vec<&str> = p.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            ".spec.replicas",
            ".spec.template.spec.containers[name=\"app\"].image"
        ]
    );
    let replicas = &p.conflicts[0];
    assert_eq!(replicas.owners[0].manager, "kube-controller-manager");
    assert_eq!(replicas.owners[0].subresource, "scale");
    assert_eq!(replicas.owners[0].operation, "Update");
    assert!(replicas.owners[0].time.is_some());
    assert_eq!(replicas.current, Some(Value::Int(5)));
    assert_eq!(replicas.proposed, Some(Value::Int(3)));
    let image = &p.conflicts[1];
    assert_eq!(image.owners[0].manager, "kubectl-edit");
    assert_eq!(image.current, Some(Value::from("shop/web:1.0-hotfix")));
    assert_eq!(
        p.message.as_deref(),
        Some(
            "Apply failed with 2 conflicts: conflicts with \"kube-controller-manager\" with subresource \"scale\" using apps/v1:\n- .spec.replicas\nconflicts with \"kubectl-edit\" using apps/v1:\n- .spec.template.spec.containers[name=\"app\"].image"
        )
    );
    let status = p.status.unwrap();
    assert_eq!(status.get_path(&["code"]), Some(&Value::Int(409)));
}

#[test]
fn selective_force_only_takes_over_from_allowed_managers() {
    let c = history();
    let edit_only = |id: &fieldguard::managedfields::Identity| id.manager == "kubectl-edit";
    let p = c.predict("alice", V2, ForcePolicy::Selective(&edit_only));
    // The HPA conflict is not covered, so the apply still fails; the image would be forced.
    assert_eq!(p.verdict, Verdict::Conflict);
    let forced: Vec<(&str, bool)> = p
        .conflicts
        .iter()
        .map(|c| (c.path.as_str(), c.forced))
        .collect();
    assert_eq!(
        forced,
        vec![
            (".spec.replicas", false),
            (".spec.template.spec.containers[name=\"app\"].image", true)
        ]
    );
    // Dropping replicas from the manifest (the HPA case) leaves only the allowed conflict.
    let without_replicas = V2.replace("  replicas: 3\n", "");
    let p = c.predict(
        "alice",
        &without_replicas,
        ForcePolicy::Selective(&edit_only),
    );
    assert_eq!(p.verdict, Verdict::Configured);
    assert_eq!(p.taken_over.len(), 1);
    assert_eq!(p.taken_over[0].owners[0].manager, "kubectl-edit");
}

#[test]
fn force_takes_over_removes_and_reports_stuck_fields() {
    let c = history();
    let p = c.predict("alice", V2, ForcePolicy::All);
    assert_eq!(p.verdict, Verdict::Configured);
    let taken: Vec<&str> = p.taken_over.iter().map(|t| t.path.as_str()).collect();
    assert_eq!(
        taken,
        vec![
            ".spec.replicas",
            ".spec.template.spec.containers[name=\"app\"].image"
        ]
    );
    // alice dropped the owner annotation she alone owned: removed.
    let removed: Vec<&str> = p.removed.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(removed, vec![".metadata.annotations"]);
    // alice dropped the team label, but bob still owns it: it stays.
    assert_eq!(p.stuck.len(), 1);
    assert_eq!(p.stuck[0].path, ".metadata.labels.team");
    assert_eq!(p.stuck[0].owners[0].manager, "bob");
    // The sidecar of the injector survives; the result has both containers.
    let obj = p.object.unwrap();
    let cs = obj
        .get_path(&["spec", "template", "spec", "containers"])
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(cs.len(), 2);
    assert_eq!(obj.get_path(&["spec", "replicas"]), Some(&Value::Int(3)));
}

#[test]
fn equal_values_become_shared_and_creations_are_reported() {
    let c = history();
    // carol sets the image to its current value: no conflict, shared ownership.
    let carol = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        image: shop/web:1.0-hotfix
"#;
    let p = c.predict("carol", carol, ForcePolicy::None);
    // The contents stay, but carol's entry is added: the server writes (as the real apiserver
    // does: tests/real/differential.rs).
    assert_eq!(p.verdict, Verdict::OwnershipOnly);
    let shared: Vec<&str> = p.shared.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        shared,
        vec![
            ".spec.template.spec.containers[name=\"app\"].image",
            ".spec.template.spec.containers[name=\"app\"].name"
        ]
    );
    assert_eq!(p.shared[0].owners[0].manager, "kubectl-edit");

    let fresh = Cluster::new("apps/v1", "Deployment");
    let cfg = parse_one(V1).unwrap();
    let tr = fresh.schema.type_ref(&fresh.type_name);
    let p = predict(&ApplyRequest {
        schema: fresh.schema,
        type_ref: &tr,
        live: None,
        config: &cfg,
        manager: "alice",
        force: ForcePolicy::None,
        subresource: "",
        reset_fields: &BTreeMap::new(),
        now: T0,
        structural: None,
    });
    assert_eq!(p.verdict, Verdict::Created);
    assert_eq!(p.managed_fields().len(), 1);
}

#[test]
fn invalid_manifests_are_rejected_with_the_field_path() {
    let c = history();
    let p = c.predict(
        "alice",
        &V2.replace("replicas: 3", "replicas: three"),
        ForcePolicy::None,
    );
    assert_eq!(p.verdict, Verdict::Invalid);
    let e = p.error.unwrap();
    assert!(e.contains(".spec.replicas"), "{e}");
}

/// An update validates both objects; the new object's error is the one reported when both are
/// invalid, and a new object equal to a valid live one except in one place is still checked
/// there (the live object's valid parts are not walked again).
#[test]
fn updates_report_the_invalid_object_new_first() {
    let c = history();
    let tr = c.schema.type_ref(&c.type_name);
    let reset = BTreeMap::new();
    let fm = FieldManager {
        schema: c.schema,
        type_ref: &tr,
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        subresource: String::new(),
        ignored: &reset,
        known_versions: None,
        now: T0,
        options: Default::default(),
    };
    let error = |live: &Value, new: &Value| {
        fm.update(live, new, &c.entries, None, "edit")
            .err()
            .map(|e| e.to_string())
    };
    let valid = c.object.clone();
    let mut bad_replicas = valid.clone();
    set_path(
        &mut bad_replicas,
        &["spec", "replicas"],
        Value::from("three"),
    );
    let mut bad_image = valid.clone();
    let containers = ["spec", "template", "spec", "containers"]
        .iter()
        .try_fold(&mut bad_image, |v, k| v.as_map_mut()?.get_mut(k));
    match containers {
        Some(Value::List(items)) => {
            let first = items[0].as_map_mut().unwrap();
            first.insert("image", Value::Int(7));
        }
        other => panic!("the history's Deployment has containers: {other:?}"),
    }

    // (live, new) → which object the error names, and the path in it.
    let cases = [
        (&valid, &bad_replicas, "new object", ".spec.replicas"),
        (&valid, &bad_image, "new object", ".image"),
        (&bad_replicas, &valid, "live object", ".spec.replicas"),
        (&bad_replicas, &bad_image, "new object", ".image"),
    ];
    for (live, new, which, path) in cases {
        let e = error(live, new).unwrap_or_else(|| panic!("{which} at {path}: no error"));
        assert!(
            e.contains(which) && e.contains(path),
            "{which} at {path}: {e}"
        );
    }
    let mut scaled = valid.clone();
    set_path(&mut scaled, &["spec", "replicas"], Value::Int(9));
    assert_eq!(error(&valid, &scaled), None);
}
