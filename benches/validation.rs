//! The cost of validating custom resources inside a prediction: 1,000 custom resources of a
//! CRD with 20 `x-kubernetes-validations` rules (comparisons, `has`, `size`, `matches`, a
//! comprehension, a transition rule, a messageExpression) and schema limits, predicted as
//! `PredictConflicts` predicts them (the engine of `check`: merge, managedFields, validation),
//! side by side in one run with the same CRD without its rules. Reports both medians and the
//! share of the prediction the rules cost. Run: `cargo bench --bench validation`.

use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::check::{self, Force, Options};
use fieldguard::live::{Fetched, ObjectRef};
use fieldguard::manifest::{self, Loaded};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RULES: [&str; 20] = [
    "self.replicas >= 0",
    "self.replicas <= 100",
    "self.name.size() <= 63",
    "self.name.matches('^[a-z][a-z0-9-]*$')",
    "has(self.tier) ? self.tier in ['gold', 'silver', 'bronze'] : true",
    "self.ports.all(p, p.port > 0 && p.port < 65536)",
    "self.ports.exists(p, p.name == 'http')",
    "self.ports.size() <= 16",
    "self.labels.all(k, k.size() <= 63)",
    "!has(self.owner) || self.owner != ''",
    "self.minReplicas <= self.replicas",
    "self.image.startsWith('registry.example.com/')",
    "self.image.contains(':')",
    "size(self.env) <= 32",
    "self.env.all(e, e.name.matches('^[A-Z_][A-Z0-9_]*$'))",
    "!has(self.schedule) || self.schedule.size() > 0",
    "self.timeoutSeconds * 2 <= 600",
    "self.weight >= 0.0 && self.weight <= 1.0",
    "self.replicas == oldSelf.replicas || self.replicas >= 1",
    "has(self.name)",
];

fn crd(with_rules: bool) -> String {
    let rules: Vec<String> = RULES
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i == 19 {
                format!(
                    "{{rule: \"{r}\", messageExpression: \"'name is ' + string(self.replicas)\"}}"
                )
            } else {
                format!("{{rule: \"{r}\"}}")
            }
        })
        .collect();
    let validations = if with_rules {
        format!("x-kubernetes-validations: [{}]", rules.join(", "))
    } else {
        String::new()
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: apps.bench.example}}\nspec:\n  group: bench.example\n  scope: Namespaced\n  names: {{plural: apps, singular: app, kind: App, listKind: AppList}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            {validations}\n            properties:\n              name: {{type: string, maxLength: 63}}\n              tier: {{type: string, maxLength: 16}}\n              owner: {{type: string, maxLength: 64}}\n              image: {{type: string, maxLength: 256}}\n              schedule: {{type: string, maxLength: 64}}\n              replicas: {{type: integer, minimum: 0}}\n              minReplicas: {{type: integer}}\n              timeoutSeconds: {{type: integer, maximum: 3600}}\n              weight: {{type: number}}\n              labels: {{type: object, maxProperties: 32, additionalProperties: {{type: string, maxLength: 63}}}}\n              ports:\n                type: array\n                maxItems: 16\n                x-kubernetes-list-type: map\n                x-kubernetes-list-map-keys: [name]\n                items: {{type: object, required: [name], properties: {{name: {{type: string, maxLength: 15}}, port: {{type: integer}}}}}}\n              env:\n                type: array\n                maxItems: 32\n                items: {{type: object, properties: {{name: {{type: string, maxLength: 64}}, value: {{type: string, maxLength: 256}}}}}}\n"
    )
}

fn objects(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "---\napiVersion: bench.example/v1\nkind: App\nmetadata: {{name: app-{i}, namespace: shop}}\nspec:\n  name: app-{i}\n  tier: gold\n  owner: team-{i}\n  image: registry.example.com/app:{i}\n  replicas: 3\n  minReplicas: 1\n  timeoutSeconds: 30\n  weight: 0.5\n  labels: {{app: app-{i}, team: t{i}}}\n  ports: [{{name: http, port: 8080}}, {{name: metrics, port: 9090}}]\n  env: [{{name: LOG_LEVEL, value: info}}, {{name: REGION, value: eu}}]\n"
        ));
    }
    out
}

/// The release's targets against a catalog that knows the CRD.
fn targets(with_rules: bool, n: usize) -> Vec<check::Target> {
    let mut loaded = Loaded::default();
    let text = format!("{}{}", crd(with_rules), objects(n));
    manifest::parse_into(&Arc::from("bench.yaml"), text.as_bytes(), &mut loaded);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    check::resolve(loaded.documents, &mut catalog, "shop").expect("targets")
}

/// The stored objects of an upgrade: each as a previous release applied it (two replicas, an
/// older image), owned by `helm`'s earlier apply.
fn live(n: usize) -> Fetched {
    let managed = "managedFields: [{manager: helm, operation: Apply, apiVersion: bench.example/v1, fieldsType: FieldsV1, fieldsV1: {'f:spec': {'f:name': {}, 'f:tier': {}, 'f:image': {}, 'f:replicas': {}, 'f:minReplicas': {}, 'f:weight': {}}}}]";
    let text = objects(n)
        .replace("replicas: 3", "replicas: 2")
        .replace(
            "image: registry.example.com/app:",
            "image: registry.example.com/app:old-",
        )
        .replace(
            "namespace: shop}",
            &format!("namespace: shop, uid: u, resourceVersion: '7', {managed}}}"),
        );
    let mut loaded = Loaded::default();
    manifest::parse_into(&Arc::from("live.yaml"), text.as_bytes(), &mut loaded);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut fetched = Fetched::default();
    for d in loaded.documents {
        fetched
            .objects
            .insert(ObjectRef::of(&d.object), Arc::new(d.object));
    }
    fetched
}

fn predict(targets: &[check::Target], live: &Fetched) -> (Duration, usize) {
    let opts = Options {
        field_manager: "helm".into(),
        force: Force::None,
        namespace: "shop".into(),
        now: 0,
    };
    let t = Instant::now();
    let report = check::run(targets, live, &opts, None, &mut |_, _| {});
    let rejected = report
        .objects
        .iter()
        .filter(|o| !o.rejections.is_empty())
        .count();
    (t.elapsed(), rejected)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Predicts the release with and without its rules, alternating, and prints the medians.
fn compare(n: usize, what: &str, live: &Fetched) {
    let with = targets(true, n);
    let without = targets(false, n);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..25 {
        let (t, rejected) = predict(&with, live);
        assert_eq!(rejected, 0, "the bench's objects satisfy every rule");
        a.push(t);
        b.push(predict(&without, live).0);
    }
    let (a, b) = (median(a), median(b));
    let share = (a.as_secs_f64() - b.as_secs_f64()) / a.as_secs_f64();
    println!(
        "{n} custom resources (a CRD of 20 rules), {what}, predicted as PredictConflicts does; medians of 25, alternating:"
    );
    println!(
        "  with the rules    {:.1} ms ({:.1} µs an object)",
        a.as_secs_f64() * 1e3,
        a.as_secs_f64() * 1e6 / n as f64
    );
    println!(
        "  without them      {:.1} ms ({:.1} µs an object)",
        b.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e6 / n as f64
    );
    println!(
        "  the rules' share of the prediction: {:.0}% (goal: at most 20%)",
        share * 100.0
    );
}

fn main() {
    let n = 1000;
    compare(n, "created", &Fetched::default());
    compare(n, "updated (an upgrade of stored objects)", &live(n));
}
