//! Engine benchmarks (divan prints median = p50). Run: `cargo bench --bench engine`.
//!
//! * `predict_deployment`: one realistic Deployment re-apply predicted end to end: parse the
//!   manifest (JSON), typed field sets, conflicts, merged object, new managedFields, explanations.
//! * `apply_deployment`: the same apply through the field manager only (no explanations).
//! * `fieldsv1_decode_encode`: FieldsV1 decode + encode throughput over real managedFields;
//!   `fieldsv1_decode` and `fieldsv1_encode` each half alone. Each has a `serde_json` twin over
//!   the same bytes (`serde_json::Value`), so the ratios show in one run.

use fieldguard::fieldpath::Set;
use fieldguard::managedfields::{FieldManager, ManagedFieldsEntry, Prepared, entries_to_value};
use fieldguard::predict::{ApplyRequest, ForcePolicy, predict};
use fieldguard::schema::{Gvk, Schema, TypeRef, builtin};
use fieldguard::value::{Value, json, yaml};
use std::collections::BTreeMap;

#[global_allocator]
static GLOBAL: fieldguard::allocator::Mimalloc = fieldguard::allocator::Mimalloc;

fn main() {
    divan::main();
}

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
    let tr = schema.type_ref(
        schema
            .type_for(&Gvk::new("apps", "v1", "Deployment"))
            .unwrap(),
    );
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
    let mut step = |mgr: &str,
                    sub: &str,
                    new: Option<Value>,
                    apply: Option<&Value>,
                    obj: &mut Value,
                    entries: &mut Vec<ManagedFieldsEntry>| {
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
            options: Default::default(),
        };
        let out = match apply {
            Some(c) => fm.apply(obj, c, entries, mgr, false).unwrap(),
            None => fm
                .update(obj, new.as_ref().unwrap(), entries, None, mgr)
                .unwrap(),
        };
        *obj = out.object;
        *entries = out.entries;
    };
    step("helm", "", None, Some(&cfg), &mut obj, &mut entries);
    // The HPA scales through /scale; a controller writes status; a webhook injects a sidecar.
    let mut scaled = obj.clone();
    set(&mut scaled, &["spec", "replicas"], Value::Int(5));
    step(
        "kube-controller-manager",
        "scale",
        Some(scaled),
        None,
        &mut obj,
        &mut entries,
    );
    let mut st = obj.clone();
    set(&mut st, &["status"], yaml::parse_one("{replicas: 5, readyReplicas: 5, availableReplicas: 5, observedGeneration: 3, conditions: [{type: Available, status: 'True', reason: MinimumReplicasAvailable}, {type: Progressing, status: 'True', reason: NewReplicaSetAvailable}]}").unwrap());
    step(
        "kube-controller-manager",
        "status",
        Some(st),
        None,
        &mut obj,
        &mut entries,
    );
    let mut inj = obj.clone();
    if let Some(Value::List(cs)) = get_mut(&mut inj, &["spec", "template", "spec", "containers"]) {
        cs.push(yaml::parse_one("{name: istio-proxy, image: docker.io/istio/proxyv2:1.20.0, args: [proxy, sidecar], resources: {limits: {cpu: 200m}}}").unwrap());
    }
    step(
        "istio-sidecar-injector",
        "",
        Some(inj),
        None,
        &mut obj,
        &mut entries,
    );

    // The next release: a new image, one env var changed; replicas left to the HPA.
    let next = MANIFEST
        .replace("checkout:1.4.2", "checkout:1.5.0")
        .replace("value: checkout}", "value: checkout_v2}")
        .replace("  replicas: 3\n", "");
    let next_cfg = yaml::parse_one(&next).unwrap();
    let mut live = obj.clone();
    set(
        &mut live,
        &["metadata", "managedFields"],
        entries_to_value(&entries, |_| false),
    );
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
    get_mut(v, prefix)
        .unwrap()
        .as_map_mut()
        .unwrap()
        .insert(*last, x);
}

/// The service path: the live object comes from the cache already prepared (managed fields
/// decoded, validated); the manifest arrives as JSON.
#[divan::bench]
fn predict_deployment(bencher: divan::Bencher) {
    let f = fixture();
    let prepared = Prepared::new(f.schema, &f.tr, &f.live).unwrap();
    bencher.bench_local(|| {
        let cfg = json::parse(divan::black_box(f.config_json.as_bytes())).unwrap();
        let p = predict(&ApplyRequest {
            schema: f.schema,
            type_ref: &f.tr,
            live: Some(&prepared),
            config: &cfg,
            manager: "helm",
            force: ForcePolicy::None,
            subresource: "",
            reset_fields: &f.reset,
            now: 1_800_000_000,
            structural: None,
        });
        assert_eq!(p.verdict, fieldguard::predict::Verdict::Configured);
        p
    });
}

/// The offline path (CLI against a snapshot): the live object is prepared on every call.
#[divan::bench]
fn predict_deployment_unprepared(bencher: divan::Bencher) {
    let f = fixture();
    bencher.bench_local(|| {
        let prepared = Prepared::new(f.schema, &f.tr, divan::black_box(&f.live)).unwrap();
        let cfg = json::parse(divan::black_box(f.config_json.as_bytes())).unwrap();
        predict(&ApplyRequest {
            schema: f.schema,
            type_ref: &f.tr,
            live: Some(&prepared),
            config: &cfg,
            manager: "helm",
            force: ForcePolicy::None,
            subresource: "",
            reset_fields: &f.reset,
            now: 1_800_000_000,
            structural: None,
        })
    });
}

#[divan::bench]
fn apply_deployment(bencher: divan::Bencher) {
    let f = fixture();
    let cfg = json::parse(f.config_json.as_bytes()).unwrap();
    bencher.bench_local(|| {
        let fm = FieldManager {
            schema: f.schema,
            type_ref: &f.tr,
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            subresource: String::new(),
            ignored: &f.reset,
            known_versions: None,
            now: 1_800_000_000,
            options: Default::default(),
        };
        fm.apply(
            &f.live_obj,
            divan::black_box(&cfg),
            &f.entries,
            "helm",
            false,
        )
        .unwrap()
    });
}

/// Real FieldsV1 documents: the golden fixtures and the entries of the Deployment above.
fn fieldsv1_corpus() -> Vec<String> {
    let f = fixture();
    let mut out: Vec<String> = f
        .entries
        .iter()
        .filter_map(|e| e.fields_v1.clone())
        .collect();
    let golden = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fieldsv1/golden.jsonl"
    ))
    .unwrap();
    for line in golden.lines() {
        out.push(
            json::parse_str(line)
                .unwrap()
                .str_at(&["fieldsV1"])
                .unwrap()
                .to_string(),
        );
    }
    out
}

/// Times `f` over every item per iteration, counted in the corpus's bytes (what each item was
/// decoded from or encodes to).
fn over_corpus<T>(bencher: divan::Bencher, items: &[T], f: impl Fn(&T) -> usize) {
    let bytes: usize = fieldsv1_corpus().iter().map(String::len).sum();
    bencher
        .counter(divan::counter::BytesCount::new(bytes))
        .bench_local(|| items.iter().map(|x| f(divan::black_box(x))).sum::<usize>());
}

#[divan::bench]
fn fieldsv1_decode_encode(bencher: divan::Bencher) {
    over_corpus(bencher, &fieldsv1_corpus(), |doc| {
        Set::from_fields_v1(doc.as_bytes())
            .unwrap()
            .to_fields_v1()
            .len()
    });
}

/// FieldsV1 decode alone (the sets built and dropped).
#[divan::bench]
fn fieldsv1_decode(bencher: divan::Bencher) {
    over_corpus(bencher, &fieldsv1_corpus(), |doc| {
        let s = Set::from_fields_v1(doc.as_bytes()).unwrap();
        s.members().len() + s.children().len()
    });
}

/// FieldsV1 encode alone, of the sets the corpus decodes to.
#[divan::bench]
fn fieldsv1_encode(bencher: divan::Bencher) {
    let corpus = fieldsv1_corpus();
    let sets: Vec<Set> = corpus
        .iter()
        .map(|d| Set::from_fields_v1(d.as_bytes()).unwrap())
        .collect();
    over_corpus(bencher, &sets, |s| s.to_fields_v1().len());
}

/// Reference for `fieldsv1_decode`: the corpus parsed into `serde_json::Value`.
#[divan::bench]
fn fieldsv1_serde_json_decode_reference(bencher: divan::Bencher) {
    over_corpus(bencher, &fieldsv1_corpus(), |doc| {
        let v: serde_json::Value = serde_json::from_slice(doc.as_bytes()).unwrap();
        v.as_object().map_or(0, |o| o.len())
    });
}

/// Reference for `fieldsv1_encode`: the corpus's `serde_json::Value`s written out.
#[divan::bench]
fn fieldsv1_serde_json_encode_reference(bencher: divan::Bencher) {
    let corpus = fieldsv1_corpus();
    let values: Vec<serde_json::Value> = corpus
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    over_corpus(bencher, &values, |v| serde_json::to_vec(v).unwrap().len());
}

/// Reference for `fieldsv1_decode_encode`: the same corpus through a general JSON parser
/// (`serde_json::Value`) and back, so the ratio shows in one run.
#[divan::bench]
fn fieldsv1_serde_json_reference(bencher: divan::Bencher) {
    over_corpus(bencher, &fieldsv1_corpus(), |doc| {
        let v: serde_json::Value = serde_json::from_slice(doc.as_bytes()).unwrap();
        serde_json::to_vec(&v).unwrap().len()
    });
}
