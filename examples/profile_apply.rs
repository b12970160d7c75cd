//! Engine benchmarks (divan prints median = p50). Run: `cargo bench --bench engine`.
//!
//! * `predict_deployment`: one realistic Deployment re-apply predicted end to end: parse the
//!   manifest (JSON), typed field sets, conflicts, merged object, new managedFields, explanations.
//! * `apply_deployment`: the same apply through the field manager only (no explanations).
//! * `fieldsv1_decode_encode`: FieldsV1 decode + encode throughput over real managedFields.

use fieldguard::fieldpath::Set;
use fieldguard::managedfields::{FieldManager, ManagedFieldsEntry, entries_to_value};
use fieldguard::predict::{ApplyRequest, ForcePolicy, predict};
use fieldguard::schema::{Gvk, Schema, TypeRef, builtin};
use fieldguard::value::{Value, json, yaml};
use std::collections::BTreeMap;



const MANIFEST: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
  labels: {app.kubernetes.io/name: checkout, app.kubernetes.io/part-of: shop, team: payments}
  annotations: {owner: payments-team, description: checkout service}
spec:
  replicas: 3
  revisionHistoryLimit: 5
  selector: {matchLabels: {app.kubernetes.io/name: checkout}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}
  template:
    metadata:
      labels: {app.kubernetes.io/name: checkout, app.kubernetes.io/part-of: shop}
      annotations: {prometheus.io/scrape: "true", prometheus.io/port: "9090"}
    spec:
      serviceAccountName: checkout
      securityContext: {runAsNonRoot: true, fsGroup: 2000}
      containers:
      - name: app
        image: registry.example.com/shop/checkout:1.4.2
        imagePullPolicy: IfNotPresent
        args: ["--port=8080", "--metrics-port=9090", "--log-level=info"]
        ports:
        - {name: http, containerPort: 8080}
        - {name: metrics, containerPort: 9090}
        env:
        - {name: DB_HOST, value: postgres.shop.svc}
        - {name: DB_NAME, value: checkout}
        - name: DB_PASSWORD
          valueFrom: {secretKeyRef: {name: checkout-db, key: password}}
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        resources:
          limits: {cpu: 500m, memory: 512Mi}
          requests: {cpu: 100m, memory: 256Mi}
        readinessProbe:
          httpGet: {path: /ready, port: http}
          periodSeconds: 5
        livenessProbe:
          httpGet: {path: /healthz, port: http}
          initialDelaySeconds: 10
        volumeMounts:
        - {name: config, mountPath: /etc/checkout, readOnly: true}
        - {name: cache, mountPath: /var/cache/checkout}
      - name: log-shipper
        image: registry.example.com/infra/log-shipper:2.1.0
        resources:
          limits: {cpu: 100m, memory: 64Mi}
        volumeMounts:
        - {name: cache, mountPath: /var/cache/checkout, readOnly: true}
      volumes:
      - name: config
        configMap: {name: checkout-config}
      - name: cache
        emptyDir: {}
      tolerations:
      - {key: dedicated, operator: Equal, value: shop, effect: NoSchedule}
"#;

struct Fixture {
    schema: &'static Schema,
    tr: TypeRef,
    live: Value,
    live_obj: Value,
    entries: Vec<ManagedFieldsEntry>,
    config_json: String,
    reset: BTreeMap<String, Set>,
}

fn fixture() -> Fixture {
    let schema = builtin::default_schema().unwrap();
    let tr = schema.type_ref(schema.type_for(&Gvk::new("apps", "v1", "Deployment")).unwrap());
    let reset = BTreeMap::from([(
        "apps/v1".to_string(),
        Set::from_fields_v1(br#"{"f:status":{}}"#).unwrap(),
    )]);
    let cfg = yaml::parse_one(MANIFEST).unwrap();
    let mut obj = {
        let mut m = fieldguard::value::Map::new();
        m.insert("apiVersion", Value::from("apps/v1"));
        m.insert("kind", Value::from("Deployment"));
        Value::Map(m)
    };
    let mut entries = Vec::new();
    let mut now = 1_700_000_000;
    let mut step = |mgr: &str, sub: &str, new: Option<Value>, apply: Option<&Value>, obj: &mut Value, entries: &mut Vec<ManagedFieldsEntry>| {
        now += 60;
        let fm = FieldManager {
            schema,
            type_ref: &tr,
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            subresource: sub.into(),
            ignored: &reset,
            known_versions: None,
            now,
        };
        let out = match apply {
            Some(c) => fm.apply(obj, c, entries, mgr, false).unwrap(),
            None => fm.update(obj, new.as_ref().unwrap(), entries, None, mgr).unwrap(),
        };
        *obj = out.object;
        *entries = out.entries;
    };
    step("helm", "", None, Some(&cfg), &mut obj, &mut entries);
    // The HPA scales through /scale; a controller writes status; a webhook injects a sidecar.
    let mut scaled = obj.clone();
    set(&mut scaled, &["spec", "replicas"], Value::Int(5));
    step("kube-controller-manager", "scale", Some(scaled), None, &mut obj, &mut entries);
    let mut st = obj.clone();
    set(&mut st, &["status"], yaml::parse_one("{replicas: 5, readyReplicas: 5, availableReplicas: 5, observedGeneration: 3, conditions: [{type: Available, status: 'True', reason: MinimumReplicasAvailable}, {type: Progressing, status: 'True', reason: NewReplicaSetAvailable}]}").unwrap());
    step("kube-controller-manager", "status", Some(st), None, &mut obj, &mut entries);
    let mut inj = obj.clone();
    if let Some(Value::List(cs)) = get_mut(&mut inj, &["spec", "template", "spec", "containers"]) {
        cs.push(yaml::parse_one("{name: istio-proxy, image: docker.io/istio/proxyv2:1.20.0, args: [proxy, sidecar], resources: {limits: {cpu: 200m}}}").unwrap());
    }
    step("istio-sidecar-injector", "", Some(inj), None, &mut obj, &mut entries);

    // The next release: a new image, one env var changed; replicas left to the HPA.
    let next = MANIFEST
        .replace("checkout:1.4.2", "checkout:1.5.0")
        .replace("value: checkout}", "value: checkout_v2}")
        .replace("  replicas: 3\n", "");
    let next_cfg = yaml::parse_one(&next).unwrap();
    let mut live = obj.clone();
    set(&mut live, &["metadata", "managedFields"], entries_to_value(&entries, |_| false));
    Fixture {
        schema,
        tr,
        live,
        live_obj: obj,
        entries,
        config_json: json::to_string(&next_cfg, json::Style::PLAIN),
        reset,
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut cur = v;
    for k in path {
        cur = cur.as_map_mut()?.get_mut(k)?;
    }
    Some(cur)
}

fn set(v: &mut Value, path: &[&str], x: Value) {
    let (last, prefix) = path.split_last().unwrap();
    get_mut(v, prefix).unwrap().as_map_mut().unwrap().insert(*last, x);
}


fn main() {
    let f = fixture();
    let which = std::env::args().nth(1).unwrap_or_default();
    if which == "stages" { stages(&f); walk_only(&f); return; }
    if ["tfs","merge","compare","decode"].contains(&which.as_str()) { one_stage(&f, &which); return; }
    let n: usize = std::env::args().nth(2).and_then(|x| x.parse().ok()).unwrap_or(2000);
    let cfg = json::parse(f.config_json.as_bytes()).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..n {
        if which == "fields" {
            for e in &f.entries { let s = Set::from_fields_v1(e.fields_v1.as_ref().unwrap().as_bytes()).unwrap(); std::hint::black_box(s.to_fields_v1()); }
            continue;
        }
        let fm = FieldManager { schema: f.schema, type_ref: &f.tr, api_version: "apps/v1".into(), kind: "Deployment".into(), subresource: String::new(), ignored: &f.reset, known_versions: None, now: 1_800_000_000 };
        std::hint::black_box(fm.apply(&f.live_obj, &cfg, &f.entries, "helm", false).unwrap());
    }
    eprintln!("{:?} per iter", t.elapsed() / n as u32);
}


#[allow(dead_code)]
fn stages(f: &Fixture) {
    use fieldguard::typed;
    let cfg = json::parse(f.config_json.as_bytes()).unwrap();
    let n = 2000u32;
    let t = |name: &str, mut g: Box<dyn FnMut()>| {
        let s = std::time::Instant::now();
        for _ in 0..n { g(); }
        eprintln!("{name:28} {:?}", s.elapsed() / n);
    };
    let (sc, tr) = (f.schema, &f.tr);
    t("validate config", Box::new(|| { std::hint::black_box(typed::validate(sc, tr, &cfg, false)).unwrap(); }));
    t("validate live", Box::new(|| { std::hint::black_box(typed::validate(sc, tr, &f.live_obj, true)).unwrap(); }));
    t("to_field_set config", Box::new(|| { std::hint::black_box(typed::to_field_set(sc, tr, &cfg)).unwrap(); }));
    t("to_field_set live", Box::new(|| { std::hint::black_box(typed::to_field_set(sc, tr, &f.live_obj)).unwrap(); }));
    let merged = typed::merge(sc, tr, &f.live_obj, &cfg).unwrap().unwrap();
    t("merge", Box::new(|| { std::hint::black_box(typed::merge(sc, tr, &f.live_obj, &cfg)).unwrap(); }));
    t("compare live/merged", Box::new(|| { std::hint::black_box(typed::compare(sc, tr, &f.live_obj, &merged)).unwrap(); }));
    let fs = typed::to_field_set(sc, tr, &f.live_obj).unwrap();
    t("ensure_named live set", Box::new(|| { std::hint::black_box(fs.ensure_named_fields_are_members(sc, tr)); }));
    t("decode entries", Box::new(|| { std::hint::black_box(fieldguard::managedfields::decode(&f.entries)).unwrap(); }));
    let m = fieldguard::managedfields::decode(&f.entries).unwrap();
    t("encode entries", Box::new(|| { std::hint::black_box(fieldguard::managedfields::encode(&m)); }));
    t("reconcile live set", Box::new(|| { std::hint::black_box(typed::reconcile_field_set_with_schema(&fs, sc, tr)).unwrap(); }));
    t("clone live value", Box::new(|| { std::hint::black_box(f.live_obj.clone()); }));
    t("clone live set", Box::new(|| { std::hint::black_box(fs.clone()); }));
    t("union set self", Box::new(|| { std::hint::black_box(fs.union(&fs)); }));
    eprintln!("live set size {} members, json {} bytes", fs.size(), json::to_string(&f.live_obj, json::Style::PLAIN).len());
}
#[allow(dead_code)]
fn one_stage(f: &Fixture, which: &str) {
    use fieldguard::typed;
    let cfg = json::parse(f.config_json.as_bytes()).unwrap();
    let (sc, tr) = (f.schema, &f.tr);
    let merged = typed::merge(sc, tr, &f.live_obj, &cfg).unwrap().unwrap();
    for _ in 0..20000 {
        match which {
            "tfs" => { std::hint::black_box(typed::to_field_set(sc, tr, &f.live_obj).unwrap()); }
            "merge" => { std::hint::black_box(typed::merge(sc, tr, &f.live_obj, &cfg).unwrap()); }
            "compare" => { std::hint::black_box(typed::compare(sc, tr, &f.live_obj, &merged).unwrap()); }
            "decode" => { std::hint::black_box(fieldguard::managedfields::decode(&f.entries).unwrap()); }
            _ => {}
        }
    }
}
#[allow(dead_code)]
fn count(v: &Value) -> usize { match v { Value::Map(m) => 1 + m.values().map(count).sum::<usize>(), Value::List(l) => 1 + l.iter().map(count).sum::<usize>(), _ => 1 } }
#[allow(dead_code)]
fn walk_only(f: &Fixture) {
    fn w(v: &Value, sc: &Schema, tr: &TypeRef) -> usize {
        let a = sc.resolve(tr).unwrap().deduce(Some(v));
        match v {
            Value::Map(m) => { let mt = a.map.unwrap(); m.iter().map(|(k, x)| w(x, sc, fieldguard::typed::field_type(mt, k))).sum::<usize>() + 1 }
            Value::List(l) => { let lt = a.list.unwrap(); l.iter().map(|x| w(x, sc, &lt.element_type)).sum::<usize>() + 1 }
            _ => 1,
        }
    }
    let s = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..20000 { n += w(std::hint::black_box(&f.live_obj), f.schema, &f.tr); }
    eprintln!("walk only: {:?} per walk, {} nodes", s.elapsed() / 20000, n / 20000);
}
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
