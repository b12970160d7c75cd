//! The random histories of `differential.rs`: the objects, the manifests an applier sends
//! (every field present or not, values from small domains, so that managers meet on the same
//! fields), and the writes of everyone else.

use crate::support::realapi::write;
use fieldguard::live::api::Api;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Map, Value, json};

pub const GROUP_VERSION: &str = "fieldguard.test/v1";
pub const GROUP: &str = "fieldguard.test";

/// An object of the history: a Widget (one version) or a Gadget (the same type served as v1
/// and v2), and the version a step reads and writes it at.
#[derive(Clone, Copy, Debug)]
pub struct Obj {
    pub kind: &'static str,
    pub plural: &'static str,
    pub name: &'static str,
    pub version: &'static str,
}

impl Obj {
    pub fn api_version(&self) -> String {
        format!("{GROUP}/{}", self.version)
    }

    pub fn url(&self) -> String {
        format!(
            "/apis/{GROUP}/{}/namespaces/{NAMESPACE}/{}/{}",
            self.version, self.plural, self.name
        )
    }
}

/// The objects of a history; a Gadget's version is chosen per step.
pub fn pick_obj(rng: &mut StdRng) -> Obj {
    let (kind, plural, name) = *pick(
        rng,
        &[
            ("Widget", "widgets", "w0"),
            ("Widget", "widgets", "w1"),
            ("Widget", "widgets", "w2"),
            ("Gadget", "gadgets", "g0"),
            ("Gadget", "gadgets", "g1"),
            ("Sprocket", "sprockets", "s0"),
            ("Sprocket", "sprockets", "s1"),
        ],
    );
    let version = if kind == "Gadget" {
        *pick(rng, &["v1", "v2"])
    } else {
        "v1"
    };
    Obj {
        kind,
        plural,
        name,
        version,
    }
}
pub const NAMESPACE: &str = "default";
pub const APPLIERS: [&str; 3] = ["alice", "bob", "carol"];

pub fn steps() -> usize {
    crate::support::steps("FIELDGUARD_REAL_STEPS")
}

pub fn seed() -> u64 {
    crate::support::seed("FIELDGUARD_REAL_SEED")
}

pub use crate::support::pick;

pub fn some(rng: &mut StdRng) -> bool {
    rng.gen_bool(0.4)
}

pub fn string_map(rng: &mut StdRng, keys: &[&str]) -> Value {
    let mut m = Map::new();
    for k in keys {
        if rng.gen_bool(0.5) {
            m.insert(k.to_string(), json!(pick(rng, &["a", "b"])));
        }
    }
    Value::Object(m)
}

pub fn subset(rng: &mut StdRng, xs: &[&str]) -> Vec<Value> {
    xs.iter()
        .filter(|_| rng.gen_bool(0.5))
        .map(|x| json!(x))
        .collect()
}

/// A container; `defaults`: of a Sprocket, whose ports' protocol the server defaults (and may
/// be left out when it is the default) and whose env values default too.
pub fn container(rng: &mut StdRng, name: &str, defaults: bool) -> Value {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    if some(rng) {
        c.insert("image".into(), json!(pick(rng, &["img:1", "img:2"])));
    }
    if some(rng) {
        let mut env = Vec::new();
        for n in ["A", "B"] {
            if rng.gen_bool(0.5) {
                env.push(if rng.gen_bool(0.7) {
                    json!({"name": n, "value": pick(rng, &["1", "2"])})
                } else {
                    json!({"name": n})
                });
            }
        }
        c.insert("env".into(), Value::Array(env));
    }
    if some(rng) {
        let mut ports = Vec::new();
        for (p, proto) in [(80, "TCP"), (80, "UDP"), (443, "TCP")] {
            if rng.gen_bool(0.5) {
                let mut m = json!({"containerPort": p, "protocol": proto});
                if defaults && proto == "TCP" && rng.gen_bool(0.5) {
                    m.as_object_mut().unwrap().remove("protocol");
                }
                if defaults && rng.gen_bool(0.2) {
                    m["weight"] = json!(pick(rng, &[5, 9]));
                }
                if rng.gen_bool(0.3) {
                    m["name"] = json!(pick(rng, &["web", "alt"]));
                }
                ports.push(m);
            }
        }
        c.insert("ports".into(), Value::Array(ports));
    }
    Value::Object(c)
}

/// A random manifest for `o`: every field present or not, values from small domains.
pub fn manifest(rng: &mut StdRng, o: &Obj) -> Value {
    let mut spec = Map::new();
    if some(rng) {
        spec.insert("replicas".into(), json!(rng.gen_range(1..4)));
    }
    if some(rng) {
        spec.insert("paused".into(), json!(rng.gen_bool(0.5)));
    }
    if some(rng) {
        spec.insert("note".into(), json!(pick(rng, &["x", "y"])));
    }
    if some(rng) {
        spec.insert("labels".into(), string_map(rng, &["tier", "app", "team"]));
    }
    if some(rng) {
        spec.insert("selector".into(), string_map(rng, &["app", "tier"]));
    }
    if some(rng) {
        spec.insert("args".into(), Value::Array(subset(rng, &["x", "y", "z"])));
    }
    if some(rng) {
        spec.insert(
            "finalizers".into(),
            Value::Array(subset(rng, &["f1", "f2", "f3"])),
        );
    }
    if some(rng) {
        let port = if rng.gen_bool(0.5) {
            json!(pick(rng, &[80, 8080]))
        } else {
            json!("http")
        };
        spec.insert("port".into(), port);
    }
    if some(rng) {
        let mut extra = string_map(rng, &["k1", "k2"]);
        if rng.gen_bool(0.5) {
            extra["nested"] = json!({"depth": rng.gen_range(1..3)});
        }
        spec.insert("extra".into(), extra);
    }
    if some(rng) {
        spec.insert(
            "template".into(),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"labels": string_map(rng, &["app"])},
                   "spec": {"restartPolicy": pick(rng, &["Always", "Never"])}}),
        );
    }
    if some(rng) {
        let mut cs = Vec::new();
        for n in ["app", "sidecar", "log"] {
            if rng.gen_bool(0.5) {
                cs.push(container(rng, n, o.kind == "Sprocket"));
            }
        }
        spec.insert("containers".into(), Value::Array(cs));
    }
    if o.kind == "Sprocket" {
        sprocket_fields(rng, &mut spec);
    }
    let mut m = json!({"apiVersion": o.api_version(), "kind": o.kind,
                       "metadata": {"name": o.name, "namespace": NAMESPACE}});
    if rng.gen_bool(0.2) {
        m["metadata"]["labels"] = string_map(rng, &["team", "owner"]);
    }
    if !spec.is_empty() || rng.gen_bool(0.5) {
        m["spec"] = Value::Object(spec);
    }
    m
}

/// A Sprocket's defaulted fields, set or not: the default's value, another, `null` (the
/// server stores the default where one exists, and refuses a null where none does).
pub fn sprocket_fields(rng: &mut StdRng, spec: &mut Map<String, Value>) {
    if some(rng) {
        spec.insert("mode".into(), json!(pick(rng, &["fast", "slow", "fast"])));
    } else if rng.gen_bool(0.1) {
        spec.insert("mode".into(), Value::Null);
    }
    if some(rng) {
        let limits = match rng.gen_range(0..5) {
            0 => json!({}),
            1 => json!({"cpu": "2"}),
            2 => json!({"memory": pick(rng, &["1Gi", "2Gi"])}),
            3 => json!({"cpu": "1", "memory": null}),
            _ => json!({"cpu": null}),
        };
        spec.insert("limits".into(), limits);
    }
}

pub fn object_url(name: &str) -> String {
    format!("/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/widgets/{name}")
}

/// One write by someone other than the appliers (its answer is not compared: its effect is
/// what the next prediction reads).
pub async fn other_writer(api: &Api, rng: &mut StdRng, o: &Obj) -> String {
    let url = o.url();
    let merge = "application/merge-patch+json";
    // What, where (below the object's URL, with the writer's field manager), how, and the body.
    let (what, at, content_type, body) = match rng.gen_range(0..6) {
        0 => (
            "merge patch of a label by editor",
            "?fieldManager=editor",
            merge,
            json!({"spec": {"labels": {*pick(rng, &["tier", "app", "hotfix"]): pick(rng, &["a", "b", "c"])}}}),
        ),
        1 => (
            "merge patch of replicas and note by editor",
            "?fieldManager=editor",
            merge,
            json!({"spec": {"replicas": rng.gen_range(1..6), "note": pick(rng, &["x", "z"])}}),
        ),
        2 => (
            "JSON patch of paused by kubectl-edit",
            "?fieldManager=kubectl-edit",
            "application/json-patch+json",
            json!([{"op": "add", "path": "/spec/paused", "value": rng.gen_bool(0.5)}]),
        ),
        3 => (
            "status write by controller",
            "/status?fieldManager=controller",
            merge,
            json!({"status": {"phase": pick(rng, &["Ready", "Pending"]), "replicas": rng.gen_range(0..4)}}),
        ),
        4 => (
            "scale write by autoscaler",
            "/scale?fieldManager=autoscaler",
            merge,
            json!({"spec": {"replicas": rng.gen_range(1..6)}}),
        ),
        _ => ("delete", "", "application/json", json!({})),
    };
    let method = if what == "delete" {
        http::Method::DELETE
    } else {
        http::Method::PATCH
    };
    let answer = write(api, method, &format!("{url}{at}"), content_type, &body).await;
    match answer {
        Ok(_) => what.to_string(),
        Err(r) => format!("{what}: refused {} ({})", r.code, r.message),
    }
}
