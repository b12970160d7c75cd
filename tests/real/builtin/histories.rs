//! The random histories of `builtin.rs`: built-in objects, the manifests an applier sends
//! (fields present or not, values from small domains, so that managers meet on the same fields
//! and on the server's defaults), and the writes of everyone else as their tools make them:
//! `kubectl edit` (strategic merge patch), `kubectl patch` (merge and JSON patches),
//! `kubectl scale` and an autoscaler (the `scale` subresource), `kubectl label`, and
//! `kubectl apply` without `--server-side` (the last-applied annotation, a strategic merge
//! patch computed from it).

use crate::support::realapi::{Answer, write};
use fieldguard::live::api::Api;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Map, Value, json};

pub const NAMESPACE: &str = "default";
pub const APPLIERS: [&str; 3] = ["helm", "alice", "argocd-controller"];

/// The group-versions of the kinds in the histories.
pub const GROUP_VERSIONS: &[&str] = &[
    "v1",
    "apps/v1",
    "batch/v1",
    "networking.k8s.io/v1",
    "rbac.authorization.k8s.io/v1",
];

/// A kind of the histories: its apiVersion, kind and resource, and whether a controller
/// writes it after a change (its status, an annotation): then a step waits for it to settle,
/// so that the live object a prediction reads is the one the server applies to.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub controlled: bool,
    pub scale: bool,
}

pub const KINDS: &[Kind] = &[
    kind("apps/v1", "Deployment", "deployments", true, true),
    kind("apps/v1", "StatefulSet", "statefulsets", true, true),
    kind("apps/v1", "DaemonSet", "daemonsets", true, false),
    kind("v1", "Service", "services", false, false),
    kind("v1", "ConfigMap", "configmaps", false, false),
    kind("v1", "Secret", "secrets", false, false),
    kind("batch/v1", "Job", "jobs", true, false),
    kind("batch/v1", "CronJob", "cronjobs", true, false),
    kind("networking.k8s.io/v1", "Ingress", "ingresses", false, false),
    kind(
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        false,
        false,
    ),
    kind(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        false,
        false,
    ),
    kind(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        false,
        false,
    ),
];

const fn kind(
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    controlled: bool,
    scale: bool,
) -> Kind {
    Kind {
        api_version,
        kind,
        plural,
        controlled,
        scale,
    }
}

/// An object of the history.
#[derive(Clone, Copy, Debug)]
pub struct Obj {
    pub kind: Kind,
    pub name: &'static str,
}

impl Obj {
    pub fn url(&self) -> String {
        let base = if self.kind.api_version.contains('/') {
            format!("/apis/{}", self.kind.api_version)
        } else {
            format!("/api/{}", self.kind.api_version)
        };
        format!(
            "{base}/namespaces/{NAMESPACE}/{}/{}",
            self.kind.plural, self.name
        )
    }
}

/// The objects of a history: two of each kind.
pub fn pick_obj(rng: &mut StdRng) -> Obj {
    Obj {
        kind: *pick(rng, KINDS),
        name: if rng.gen_bool(0.5) { "one" } else { "two" },
    }
}

pub fn steps() -> usize {
    crate::support::steps("FIELDGUARD_BUILTIN_STEPS")
}

pub fn seed() -> u64 {
    crate::support::seed("FIELDGUARD_BUILTIN_SEED")
}

pub use crate::support::pick;

fn some(rng: &mut StdRng) -> bool {
    rng.gen_bool(0.4)
}

fn labels(rng: &mut StdRng, keys: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    for k in keys {
        if rng.gen_bool(0.5) {
            m.insert(k.to_string(), json!(pick(rng, &["a", "b"])));
        }
    }
    m
}

/// A container as manifests write it: the server defaults `imagePullPolicy` (from the image's
/// tag), `terminationMessagePath`, `terminationMessagePolicy` and each port's `protocol`.
fn container(rng: &mut StdRng, name: &str) -> Value {
    let mut c = json!({"name": name, "image": pick(rng, &["nginx:1.27", "nginx:1.28", "nginx"])});
    if rng.gen_bool(0.2) {
        c["imagePullPolicy"] = json!(pick(rng, &["IfNotPresent", "Always"]));
    }
    if some(rng) {
        let mut ports = Vec::new();
        for (p, proto) in [(80, "TCP"), (80, "UDP"), (443, "TCP")] {
            if rng.gen_bool(0.5) {
                let mut m = json!({"containerPort": p});
                if proto != "TCP" || rng.gen_bool(0.5) {
                    m["protocol"] = json!(proto);
                }
                ports.push(m);
            }
        }
        c["ports"] = Value::Array(ports);
    }
    if some(rng) {
        let mut env = Vec::new();
        for n in ["A", "B"] {
            if rng.gen_bool(0.5) {
                env.push(json!({"name": n, "value": pick(rng, &["1", "2"])}));
            }
        }
        c["env"] = Value::Array(env);
    }
    if rng.gen_bool(0.2) {
        c["args"] = json!(pick(rng, &[&["a"][..], &["a", "b"]]));
    }
    if rng.gen_bool(0.2) {
        c["resources"] = json!({"limits": {"cpu": pick(rng, &["100m", "1"]), "memory": pick(rng, &["64Mi", "1Gi"])}});
    }
    c
}

/// A Pod template whose labels include `app` (what every selector below selects).
fn template(rng: &mut StdRng, app: &str, restart: Option<&str>) -> Value {
    let mut meta_labels = labels(rng, &["tier"]);
    meta_labels.insert("app".into(), json!(app));
    let mut spec = Map::new();
    let mut cs = vec![container(rng, "app")];
    if rng.gen_bool(0.3) {
        cs.push(container(rng, "sidecar"));
    }
    spec.insert("containers".into(), Value::Array(cs));
    if let Some(r) = restart {
        spec.insert("restartPolicy".into(), json!(r));
    }
    if rng.gen_bool(0.2) {
        spec.insert(
            "terminationGracePeriodSeconds".into(),
            json!(pick(rng, &[30, 10])),
        );
    }
    if rng.gen_bool(0.2) {
        spec.insert("serviceAccountName".into(), json!("default"));
    }
    let mut meta = json!({"labels": meta_labels});
    if rng.gen_bool(0.2) {
        meta["annotations"] = json!({"checksum/config": pick(rng, &["1", "2"])});
    }
    json!({"metadata": meta, "spec": spec})
}

/// A random manifest for `o`.
pub fn manifest(rng: &mut StdRng, o: &Obj) -> Value {
    let app = format!("{}-{}", o.kind.kind.to_lowercase(), o.name);
    let mut m = json!({"apiVersion": o.kind.api_version, "kind": o.kind.kind,
                       "metadata": {"name": o.name, "namespace": NAMESPACE}});
    let l = labels(rng, &["team", "owner"]);
    if !l.is_empty() || rng.gen_bool(0.1) {
        m["metadata"]["labels"] = Value::Object(l);
    }
    let selector = || json!({"matchLabels": {"app": app}});
    match o.kind.kind {
        "Deployment" => {
            let mut spec = json!({"selector": selector(), "template": template(rng, &app, None)});
            if some(rng) {
                spec["replicas"] = json!(rng.gen_range(1..4));
            }
            if rng.gen_bool(0.2) {
                spec["strategy"] = json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": pick(rng, &[json!(1), json!("50%")])}});
            }
            if rng.gen_bool(0.2) {
                spec["revisionHistoryLimit"] = json!(pick(rng, &[10, 3]));
            }
            if rng.gen_bool(0.2) {
                spec["minReadySeconds"] = json!(pick(rng, &[0, 5]));
            }
            m["spec"] = spec;
        }
        "StatefulSet" => {
            let mut spec = json!({"selector": selector(), "template": template(rng, &app, None),
                                  "serviceName": pick(rng, &["db", "db", "db2"])});
            if some(rng) {
                spec["replicas"] = json!(rng.gen_range(0..3));
            }
            if rng.gen_bool(0.3) {
                spec["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": pick(rng, &["1Gi", "1Gi", "2Gi"])}}}}]);
            }
            if rng.gen_bool(0.2) {
                spec["podManagementPolicy"] = json!(pick(rng, &["OrderedReady", "Parallel"]));
            }
            m["spec"] = spec;
        }
        "DaemonSet" => {
            let mut spec = json!({"selector": selector(), "template": template(rng, &app, None)});
            if rng.gen_bool(0.2) {
                spec["minReadySeconds"] = json!(pick(rng, &[0, 5]));
            }
            m["spec"] = spec;
        }
        "Service" => {
            let mut ports = Vec::new();
            for (name, port, proto) in [
                ("http", 80, "TCP"),
                ("dns", 53, "UDP"),
                ("dns-tcp", 53, "TCP"),
            ] {
                if ports.is_empty() || rng.gen_bool(0.4) {
                    let mut p = json!({"name": name, "port": port});
                    if proto != "TCP" || rng.gen_bool(0.5) {
                        p["protocol"] = json!(proto);
                    }
                    if rng.gen_bool(0.3) {
                        p["targetPort"] = pick(rng, &[json!(8080), json!("web")]).clone();
                    }
                    ports.push(p);
                }
            }
            let mut spec = json!({"ports": ports, "selector": {"app": app}});
            if rng.gen_bool(0.2) {
                spec["type"] = json!("ClusterIP");
            }
            if rng.gen_bool(0.2) {
                spec["sessionAffinity"] = json!(pick(rng, &["None", "ClientIP"]));
            }
            m["spec"] = spec;
        }
        "ConfigMap" => {
            m["data"] = Value::Object(labels(rng, &["a.conf", "b.conf", "c"]));
            if rng.gen_bool(0.1) {
                m["binaryData"] = json!({"bin": "AAEC"});
            }
        }
        "Secret" => {
            if some(rng) {
                m["stringData"] = Value::Object(labels(rng, &["password", "user"]));
            }
            if some(rng) {
                m["data"] = json!({"token": pick(rng, &["YQ==", "Yg=="])});
            }
            if rng.gen_bool(0.2) {
                m["type"] = json!("Opaque");
            }
        }
        "Job" => {
            let mut spec = json!({"template": template(rng, &app, Some("Never"))});
            if some(rng) {
                spec["backoffLimit"] = json!(pick(rng, &[6, 2]));
            }
            if rng.gen_bool(0.3) {
                spec["suspend"] = json!(true);
            }
            if rng.gen_bool(0.2) {
                spec["ttlSecondsAfterFinished"] = json!(pick(rng, &[600, 60]));
            }
            m["spec"] = spec;
        }
        "CronJob" => {
            let mut spec = json!({"schedule": pick(rng, &["0 3 1 1 *", "0 4 1 1 *"]),
                "jobTemplate": {"spec": {"template": template(rng, &app, Some("OnFailure"))}}});
            if some(rng) {
                spec["suspend"] = json!(rng.gen_bool(0.5));
            }
            if rng.gen_bool(0.2) {
                spec["concurrencyPolicy"] = json!(pick(rng, &["Allow", "Forbid"]));
            }
            m["spec"] = spec;
        }
        "Ingress" => {
            let mut paths = Vec::new();
            for p in ["/", "/api"] {
                if paths.is_empty() || rng.gen_bool(0.4) {
                    paths.push(json!({"path": p, "pathType": pick(rng, &["Prefix", "Exact"]),
                        "backend": {"service": {"name": "web", "port": {"number": pick(rng, &[80, 8080])}}}}));
                }
            }
            let mut spec =
                json!({"rules": [{"host": "shop.example.com", "http": {"paths": paths}}]});
            if rng.gen_bool(0.3) {
                spec["ingressClassName"] = json!(pick(rng, &["nginx", "traefik"]));
            }
            m["spec"] = spec;
        }
        "PersistentVolumeClaim" => {
            let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": pick(rng, &["1Gi", "1Gi", "2Gi"])}}});
            if rng.gen_bool(0.2) {
                spec["volumeMode"] = json!("Filesystem");
            }
            if rng.gen_bool(0.1) {
                spec["storageClassName"] = json!("slow");
            }
            m["spec"] = spec;
        }
        "Role" => {
            let mut rules = vec![json!({"apiGroups": [""], "resources": ["configmaps"],
                                        "verbs": pick(rng, &[&["get"][..], &["get", "list"]])})];
            if rng.gen_bool(0.4) {
                rules.push(
                    json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}),
                );
            }
            m["rules"] = Value::Array(rules);
        }
        "RoleBinding" => {
            let mut subjects = vec![json!({"kind": "User", "name": "alice"})];
            if rng.gen_bool(0.4) {
                subjects.push(json!({"kind": "ServiceAccount", "name": "default"}));
            }
            if rng.gen_bool(0.3) {
                subjects[0]["apiGroup"] = json!("rbac.authorization.k8s.io");
            }
            m["subjects"] = Value::Array(subjects);
            m["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": pick(rng, &["one", "one", "two"])});
        }
        other => unreachable!("no manifests for {other}"),
    }
    m
}

/// One write by someone other than the appliers, as their tools send it (its answer is not
/// compared: its effect is what the next prediction reads).
/// One write by someone else: what it was, and what was found wrong with fieldguard's
/// prediction of it (only client-side applies are predicted).
pub async fn other_writer(
    api: &Api,
    catalog: &fieldguard::catalog::Catalog,
    rng: &mut StdRng,
    o: &Obj,
) -> (String, Vec<String>) {
    let url = o.url();
    let merge = "application/merge-patch+json";
    let strategic = "application/strategic-merge-patch+json";
    let label_key = *pick(rng, &["team", "hotfix"]);
    let (what, at, content_type, body): (String, String, &str, Value) = match rng.gen_range(0..8) {
        0 if o.kind.scale => (
            "scale by kube-controller-manager (an autoscaler)".into(),
            "/scale?fieldManager=kube-controller-manager".into(),
            merge,
            json!({"spec": {"replicas": rng.gen_range(1..5)}}),
        ),
        1 if o.kind.scale => (
            "kubectl scale".into(),
            "/scale?fieldManager=kubectl".into(),
            merge,
            json!({"spec": {"replicas": rng.gen_range(1..5)}}),
        ),
        2 => (
            "kubectl label".into(),
            "?fieldManager=kubectl-label".into(),
            merge,
            json!({"metadata": {"labels": {label_key: pick(rng, &["x", "y"])}}}),
        ),
        3 => {
            let body = edit(rng, o);
            (
                "kubectl edit".into(),
                "?fieldManager=kubectl-edit".into(),
                strategic,
                body,
            )
        }
        4 => (
            "kubectl patch --type=json".into(),
            "?fieldManager=kubectl-patch".into(),
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/annotations", "value": {"note": pick(rng, &["a", "b"])}}]),
        ),
        5 | 6 => return client_side_apply(api, catalog, rng, o).await,
        _ => (
            "delete".into(),
            String::new(),
            "application/json",
            json!({}),
        ),
    };
    let method = if what == "delete" {
        http::Method::DELETE
    } else {
        http::Method::PATCH
    };
    let answer = write(api, method, &format!("{url}{at}"), content_type, &body).await;
    (described(&what, &answer), vec![])
}

fn described(what: &str, answer: &Answer) -> String {
    match answer {
        Ok(_) => what.to_string(),
        Err(r) => format!("{what}: refused {} ({})", r.code, r.message),
    }
}

/// What a hand edit changes: an image, an env value, data, a port (a strategic merge patch,
/// as `kubectl edit` computes it: list items by their merge key).
fn edit(rng: &mut StdRng, o: &Obj) -> Value {
    let image = json!({"name": "app", "image": pick(rng, &["nginx:1.27-hotfix", "nginx:1.28"])});
    let pod = json!({"spec": {"containers": [image]}});
    match o.kind.kind {
        "Deployment" | "StatefulSet" | "DaemonSet" => json!({"spec": {"template": pod}}),
        "Job" => json!({"spec": {"suspend": rng.gen_bool(0.5)}}),
        "CronJob" => json!({"spec": {"jobTemplate": {"spec": {"template": pod}}}}),
        "Service" => json!({"spec": {"ports": [{"port": 80, "name": "http", "targetPort": 9090}]}}),
        "ConfigMap" => json!({"data": {"a.conf": pick(rng, &["edited", "b"])}}),
        "Secret" => json!({"stringData": {"password": "hunter2"}}),
        "Ingress" => json!({"spec": {"ingressClassName": pick(rng, &["nginx", "haproxy"])}}),
        "PersistentVolumeClaim" => json!({"metadata": {"annotations": {"edited": "yes"}}}),
        "Role" => {
            json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})
        }
        _ => {
            json!({"subjects": [{"kind": "Group", "name": "ops", "apiGroup": "rbac.authorization.k8s.io"}]})
        }
    }
}

/// `kubectl apply` without `--server-side`, as `fieldguard apply` makes it for a client-side
/// release (`fieldguard::apply::client_side`): the manifest with its last-applied annotation,
/// created with POST when the object is missing, else kubectl's three-way strategic merge patch
/// from the last-applied configuration over the live object (patch metadata from the
/// built-in schemas); field manager `kubectl-client-side-apply`. Judged: what the server
/// stores equals the patch applied by fieldguard, defaulted and encoded as the server does,
/// with the `Update` entry fieldguard's field manager adds (a refused write is only
/// described: the server's native validation of built-in kinds is issue 58's).
async fn client_side_apply(
    api: &Api,
    catalog: &fieldguard::catalog::Catalog,
    rng: &mut StdRng,
    o: &Obj,
) -> (String, Vec<String>) {
    use fieldguard::apply::client_side::{self, Action};
    let schema =
        fieldguard::patch::meta::kubernetes(fieldguard::catalog::DEFAULT_KUBERNETES).unwrap();
    let meta = schema.root_for(o.kind.api_version, o.kind.kind);
    let fg = |v: &Value| fieldguard::value::json::parse_str(&v.to_string()).unwrap();
    let m = manifest(rng, o);
    let live = if o.kind.controlled {
        super::settled(api, &o.url()).await
    } else {
        crate::support::realapi::get(api, &o.url()).await
    };
    let live_fg = live.as_ref().map(fg);
    let manager = "kubectl-client-side-apply";
    let action = client_side::plan(&fg(&m), live_fg.as_ref(), None, meta.as_ref()).unwrap();
    let to_json = crate::support::judge::to_json;
    let (what, written, answer) = match &action {
        Action::Create(body) => {
            let collection = o.url().rsplit_once('/').unwrap().0.to_string();
            let answer = write(
                api,
                http::Method::POST,
                &format!("{collection}?fieldManager={manager}"),
                "application/json",
                &to_json(body),
            )
            .await;
            ("kubectl apply (client-side, create)", body.clone(), answer)
        }
        Action::Patch {
            content_type,
            patch,
        } => {
            let live = live_fg.as_ref().and_then(|l| l.as_map()).unwrap().clone();
            let written =
                fieldguard::patch::strategic::apply(live, patch.clone(), meta.as_ref().unwrap())
                    .map(fieldguard::value::Value::Map);
            let answer = write(
                api,
                http::Method::PATCH,
                &format!("{}?fieldManager={manager}", o.url()),
                content_type,
                &to_json(&fieldguard::value::Value::Map(patch.clone())),
            )
            .await;
            let Ok(written) = written else {
                return (
                    "kubectl apply (client-side)".into(),
                    vec![format!(
                        "fieldguard cannot apply its own patch: {written:?}; server {answer:?}"
                    )],
                );
            };
            ("kubectl apply (client-side)", written, answer)
        }
        Action::Unchanged => return ("kubectl apply (client-side, unchanged)".into(), vec![]),
    };
    let Ok(stored) = &answer else {
        return (described(what, &answer), vec![]);
    };
    let stored = match &live {
        None => super::without_allocations(o, stored.clone()),
        Some(_) => stored.clone(),
    };
    let now = crate::support::judge::stamped_update(&stored, manager)
        .unwrap_or_else(|| time::OffsetDateTime::now_utc().unix_timestamp());
    let predicted =
        crate::support::judge::predict_update(catalog, live.as_ref(), &written, manager, now);
    let found = crate::support::judge::compare_stored(&predicted, &stored)
        .into_iter()
        .map(|f| format!("{what}: {f}\n  patch {action:?}"))
        .collect();
    (what.to_string(), found)
}
