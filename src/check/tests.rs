use super::*;
use crate::catalog::{Catalog, DEFAULT_KUBERNETES};
use crate::manifest::{Loaded, parse_into};
use crate::value::yaml::parse_one;
use std::sync::Arc;

fn docs(text: &str) -> Vec<Document> {
    let mut l: Loaded = crate::manifest::load(&[], &mut std::io::empty());
    parse_into(&Arc::from("m.yaml"), text.as_bytes(), &mut l);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    l.documents
}

fn opts(force: Force) -> Options {
    Options {
        field_manager: "ci".into(),
        force,
        namespace: "team".into(),
        now: 1_700_000_000,
    }
}

#[test]
fn namespaces_default_like_kubectl_and_duplicates_are_rejected() {
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let t = resolve(
        docs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team, namespace: oops}\n"),
        &mut c,
        "team",
    )
    .unwrap();
    assert_eq!(t[0].object_ref.namespace, "team");
    assert_eq!(
        t[0].doc.object.str_at(&["metadata", "namespace"]),
        Some("team")
    );
    assert_eq!(t[1].object_ref.namespace, "");
    assert_eq!(t[1].doc.object.str_at(&["metadata", "namespace"]), None);

    let e = resolve(
        docs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team}\n"),
        &mut c,
        "team",
    )
    .unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(
        e[0].message
            .contains("already defined at m.yaml:1: document 1"),
        "{}",
        e[0]
    );
    assert_eq!(e[0].doc, Some(2));
}

#[test]
fn custom_resources_use_crds_from_the_same_manifest_set() {
    let text = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
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
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [id]
                items: {type: object, properties: {id: {type: string}, size: {type: integer}}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec:
  parts:
  - {id: a, size: 2}
";
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let t = resolve(docs(text), &mut c, "team").unwrap();
    // The live widget: another manager owns part `a`'s size (a list-map item by key).
    let live = parse_one(
        "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: team
  managedFields:
  - manager: operator
    operation: Update
    apiVersion: example.com/v1
    fieldsType: FieldsV1
    fieldsV1: {f:spec: {f:parts: {'k:{\"id\":\"a\"}': {.: {}, f:id: {}, f:size: {}}}}}
spec:
  parts:
  - {id: a, size: 3}
",
    )
    .unwrap();
    let r = check_one(&t[1], Some(&live), &opts(Force::None));
    assert_eq!(r.verdict, Verdict::Conflict, "{r:?}");
    assert_eq!(r.conflicts.len(), 1);
    assert_eq!(r.conflicts[0].field.path, ".spec.parts[id=\"a\"].size");
    assert_eq!(r.conflicts[0].line, 30);
    let s = &r.conflicts[0].suggestions;
    assert_eq!(s[0].action, Action::ShareValue, "{s:?}");
    assert!(s[0].message.contains("live value 3"), "{s:?}");
    // Creating it instead: no conflicts, its fields counted.
    let r = check_one(&t[1], None, &opts(Force::None));
    assert_eq!(r.verdict, Verdict::Created);
    assert_eq!(r.owned_fields, 2, "parts[id=a].id and .size: {r:?}");
}

#[test]
fn selective_force_matches_whole_manager_names() {
    let f = Force::against(&["kubectl-edit|before-first-apply".into()]).unwrap();
    assert!(f.allows("kubectl-edit"));
    assert!(f.allows("before-first-apply"));
    assert!(!f.allows("kubectl-edit-2"));
    assert!(!f.allows("kubectl"));
    assert_eq!(f.patterns(), ["kubectl-edit|before-first-apply"]);
    assert!(Force::against(&["(".into()]).is_err());
}

#[test]
fn selective_force_is_bounded_before_it_compiles() {
    let many: Vec<String> = (0..crate::check::MAX_FORCE_PATTERNS + 1)
        .map(|i| format!("m{i}"))
        .collect();
    let e = Force::against(&many).unwrap_err();
    assert!(e.contains("65 patterns, more than the 64 allowed"), "{e}");
    assert!(Force::against(&many[..64]).is_ok());
    let long = "a".repeat(crate::check::MAX_FORCE_PATTERN_BYTES + 1);
    let e = Force::against(&["ok".into(), long]).unwrap_err();
    assert!(e.contains("pattern 2 is 4097 bytes"), "{e}");
    // A short pattern that compiles huge: refused by its compiled size.
    let e = Force::against(&["(((a{100}){100}){100})".into()]).unwrap_err();
    assert!(e.contains("size limit"), "{e}");
}

const HOOKED: &str = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
apiVersion: batch/v1
kind: Job
metadata: {name: b-migrate, annotations: {helm.sh/hook: 'pre-install,pre-upgrade', helm.sh/hook-weight: '5'}}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: 'm:1'}]}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: z-config, annotations: {helm.sh/hook: pre-install, helm.sh/hook-weight: '-1'}}
---
apiVersion: v1
kind: Secret
metadata: {name: a-creds, annotations: {helm.sh/hook: pre-install, helm.sh/hook-weight: '5'}}
---
apiVersion: v1
kind: Pod
metadata: {name: smoke, annotations: {helm.sh/hook: 'post-install,post-upgrade', helm.sh/hook-delete-policy: hook-succeeded}}
spec: {containers: [{name: s, image: 's:1'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-test, annotations: {helm.sh/hook: test}}
spec: {containers: [{name: t, image: 't:1'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: odd, annotations: {helm.sh/hook: 'pre-install,post-frobnicate'}}
spec: {containers: [{name: o, image: 'o:1'}]}
";

fn hooked_targets() -> Vec<Target> {
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    resolve(docs(HOOKED), &mut c, "team").unwrap()
}

fn names(r: &Report) -> Vec<(String, Option<String>)> {
    r.objects
        .iter()
        .map(|o| (o.object_ref.name.clone(), o.hook_event.clone()))
        .collect()
}

#[test]
fn hooks_are_predicted_per_phase_in_the_order_helm_runs_them() {
    let targets = hooked_targets();
    let empty = Fetched::default();
    let r = run(&targets, &empty, &opts(Force::All), None, &mut |_, _| {});
    let plan = r.hooks.as_ref().unwrap();
    // Nothing of the release is live: an install.
    assert_eq!(plan.operation, hooks::Operation::Install);
    assert_eq!(
        plan.inferred.as_deref(),
        Some("none of the 1 release objects is live")
    );
    let pre = Some("pre-install".to_string());
    // Weight, then name: the Secret and the Job share weight 5 (name decides, not kind).
    assert_eq!(
        names(&r),
        [
            ("z-config".into(), pre.clone()),
            ("a-creds".into(), pre.clone()),
            ("b-migrate".into(), pre.clone()),
            ("settings".into(), None),
            ("smoke".into(), Some("post-install".into())),
        ]
    );
    assert!(r.objects[0].notes[0].starts_with("pre-install hook, 1 of 3 (weight -1): created"));
    assert_eq!(
        plan.not_run,
        [
            "Pod team/web-test: runs on test, not on install",
            "Pod team/odd: unknown event(s) post-frobnicate: Helm 4 drops the document, it never runs",
        ]
    );

    // The release is live and so is the Job from the last run: an upgrade, the Job is
    // deleted and created again (a creation even under force), test hooks still never run.
    let mut live = Fetched::default();
    for t in &targets {
        if ["settings", "b-migrate"].contains(&t.object_ref.name.as_str()) {
            live.objects
                .insert(t.object_ref.clone(), Arc::new(t.doc.object.clone()));
        }
    }
    let r = run(&targets, &live, &opts(Force::All), None, &mut |_, _| {});
    let plan = r.hooks.as_ref().unwrap();
    assert_eq!(plan.operation, hooks::Operation::Upgrade);
    assert_eq!(
        names(&r),
        [
            ("b-migrate".into(), Some("pre-upgrade".into())),
            ("settings".into(), None),
            ("smoke".into(), Some("post-upgrade".into())),
        ]
    );
    assert_eq!(r.objects[0].verdict, Verdict::Created);
    assert!(
        r.objects[0].notes[0]
            .contains("the live one is deleted (before-hook-creation), then this one is created"),
        "{:?}",
        r.objects[0].notes
    );
    // Asked for explicitly: a rollback runs neither install nor upgrade hooks.
    let r = run(
        &targets,
        &live,
        &opts(Force::None),
        Some(hooks::Operation::Rollback),
        &mut |_, _| {},
    );
    assert_eq!(names(&r), [("settings".to_string(), None)]);
    assert_eq!(r.hooks.as_ref().unwrap().inferred, None);
    assert_eq!(r.hooks.as_ref().unwrap().not_run.len(), 6);
    // Without hooks there is no hook plan.
    let plain: Vec<Target> = hooked_targets()
        .into_iter()
        .filter(|t| t.object_ref.name == "settings")
        .collect();
    assert!(
        run(&plain, &empty, &opts(Force::None), None, &mut |_, _| {})
            .hooks
            .is_none()
    );
}

#[test]
fn a_hook_kept_between_runs_is_applied_without_force() {
    // No before-hook-creation: applied onto the live hook, never forced, whatever the run's
    // policy — a field someone else owns conflicts.
    let text = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: seed, annotations: {helm.sh/hook: pre-upgrade, helm.sh/hook-delete-policy: hook-succeeded}}
data: {k: new}
";
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let targets = resolve(docs(text), &mut c, "team").unwrap();
    let live_obj = parse_one(
        "{apiVersion: v1, kind: ConfigMap, metadata: {name: seed, namespace: team, managedFields: [{manager: kubectl-edit, operation: Update, apiVersion: v1, time: '2026-01-01T00:00:00Z', fieldsType: FieldsV1, fieldsV1: {'f:data': {'f:k': {}}}}]}, data: {k: old}}",
    )
    .unwrap();
    let mut live = Fetched::default();
    live.objects
        .insert(targets[0].object_ref.clone(), Arc::new(live_obj));
    let r = run(
        &targets,
        &live,
        &opts(Force::All),
        Some(hooks::Operation::Upgrade),
        &mut |_, _| {},
    );
    assert_eq!(r.objects.len(), 1);
    assert_eq!(
        r.objects[0].verdict,
        Verdict::Conflict,
        "{:?}",
        r.objects[0]
    );
    assert!(r.objects[0].notes[0].contains("server-side without force, so it can conflict"));
}

#[test]
fn a_release_predicted_on_every_core_equals_one_object_at_a_time() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let release = std::fs::read_to_string(root.join("examples/release/checkout.yaml")).unwrap();
    let cluster = std::fs::read_to_string(root.join("examples/cluster/shop.yaml")).unwrap();
    let dir = std::env::temp_dir().join(format!("fieldguard-check-cores-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The bundled release and cluster, 20 times over in namespaces of their own.
    let (mut manifests, mut live) = (String::new(), String::new());
    for i in 0..20 {
        let ns = format!("shop{i}");
        manifests.push_str(&release.replace("shop", &ns).replace(
            "metadata:\n  name: ",
            &format!("metadata:\n  namespace: {ns}\n  name: "),
        ));
        manifests.push_str("\n---\n");
        live.push_str(&cluster.replace("shop", &ns));
        live.push_str("\n---\n");
    }
    std::fs::write(dir.join("cluster.yaml"), live).unwrap();
    let snap = crate::live::snapshot::Snapshot::load(
        &[
            crate::manifest::Input::Path(dir.join("cluster.yaml")),
            crate::manifest::Input::Path(root.join("examples/cluster/crds")),
        ],
        &mut std::io::empty(),
    )
    .unwrap();
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    snap.extend_catalog(&mut c).unwrap();
    let fetched = snap.fetched().unwrap();
    let targets = resolve(docs(&manifests), &mut c, "default").unwrap();
    assert_eq!(targets.len(), 120);
    let opts = opts(Force::None);
    let report = run(&targets, &fetched, &opts, None, &mut |_, _| {});
    let one_at_a_time: Vec<String> = targets
        .iter()
        .map(|t| {
            let o = check_one(t, fetched.get(&t.object_ref), &opts);
            format!("{:?}", with_live_origin(o, &fetched, t))
        })
        .collect();
    let parallel: Vec<String> = report.objects.iter().map(|o| format!("{o:?}")).collect();
    assert_eq!(parallel, one_at_a_time);
    // Not vacuous: live objects were found and conflicts predicted.
    assert_eq!(report.summary().conflicted, 60, "{:?}", report.summary());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_large_release_resolves_on_every_core_as_one_thread_would() {
    // 150 documents (resolved in chunks on every core); with defects, a repeat across chunks,
    // an unknown kind and a refused label key, each reported at its document, in order.
    let release = |defects: bool| {
        let mut text = String::new();
        for i in 0..150 {
            let (kind, name, labels) = match i {
                70 if defects => ("ConfigMap", "c3".to_string(), "{}"),
                100 if defects => ("NoSuchKind", format!("c{i}"), "{}"),
                120 if defects => ("ConfigMap", format!("c{i}"), "{\"bad key\": x}"),
                _ => ("ConfigMap", format!("c{i}"), "{}"),
            };
            text.push_str(&format!(
                "apiVersion: v1\nkind: {kind}\nmetadata: {{name: {name}, labels: {labels}}}\n---\n"
            ));
        }
        text
    };
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let e = resolve(docs(&release(true)), &mut c, "team").unwrap_err();
    let at: Vec<Option<usize>> = e.iter().map(|e| e.doc).collect();
    assert_eq!(at, [Some(71), Some(101), Some(121)], "{e:?}");
    assert!(
        e[0].message.contains("already defined at m.yaml:"),
        "{}",
        e[0]
    );
    assert_eq!(e[1].path.as_deref(), Some(".kind"), "{}", e[1]);

    let t = resolve(docs(&release(false)), &mut c, "team").unwrap();
    let names: Vec<String> = t.iter().map(|t| t.object_ref.name.clone()).collect();
    assert_eq!(names, (0..150).map(|i| format!("c{i}")).collect::<Vec<_>>());
    assert!(t.iter().all(|t| t.object_ref.namespace == "team"
        && t.doc.object.str_at(&["metadata", "namespace"]) == Some("team")));
}
