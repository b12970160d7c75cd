//! Random replay cases for differential testing against the reference oracle: sequences of
//! applies and updates by several managers (with and without force) over real Kubernetes types
//! (Deployment, Service, ConfigMap) and a CRD with preserve-unknown-fields. Values come from
//! small domains so managers collide often. Update steps edit the object as it stands after the
//! previous steps, like controllers and `kubectl edit` do.

use super::{CaseInput, Replayer, StepInput, WIDGET_CRD};
use crate::managedfields::entries_to_value;
use crate::schema::{builtin, crd, smd_yaml};
use crate::value::json::{self, Style};
use crate::value::{Map, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Generates `count` cases (JSON lines) from `seed`. The same seed gives the same cases.
pub fn generate(seed: u64, count: usize) -> Vec<String> {
    let mut g = Generator::new(seed);
    (0..count).map(|i| g.case(i)).collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    Deployment,
    Service,
    ConfigMap,
    Widget,
}

struct Generator {
    rng: StdRng,
    replayer: Replayer,
    widget_schema: Value,
    widget_type: String,
}

// ---- value helpers ----

fn s(x: &str) -> Value {
    Value::from(x)
}
fn i(n: i64) -> Value {
    Value::Int(n)
}
fn m(pairs: Vec<(&str, Value)>) -> Value {
    let mut out = Map::new();
    for (k, v) in pairs {
        out.insert(k, v);
    }
    Value::Map(out)
}
fn l(items: Vec<Value>) -> Value {
    Value::List(items)
}
fn set(obj: &mut Value, path: &[&str], v: Value) {
    let Some((last, prefix)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for k in prefix {
        let Some(map) = cur.as_map_mut() else { return };
        if !matches!(map.get(k), Some(Value::Map(_))) {
            map.insert(*k, Value::Map(Map::new()));
        }
        cur = map.get_mut(k).expect("inserted");
    }
    if let Some(map) = cur.as_map_mut() {
        map.insert(*last, v);
    }
}
fn get_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for k in path {
        cur = cur.as_map_mut()?.get_mut(k)?;
    }
    Some(cur)
}
fn remove(obj: &mut Value, path: &[&str]) {
    let Some((last, prefix)) = path.split_last() else {
        return;
    };
    if let Some(map) = get_mut(obj, prefix).and_then(Value::as_map_mut) {
        map.remove(last);
    }
}

impl Generator {
    fn new(seed: u64) -> Generator {
        let base = builtin::kubernetes(builtin::ORACLE_VERSION).expect("built-in schema");
        let crd_value = crate::value::yaml::parse_one(WIDGET_CRD).expect("widget CRD parses");
        let (schema, versions) = crd::schema_for(&crd_value, base).expect("widget CRD converts");
        let widget_type = versions[0].type_name.clone().expect("widget has a schema");
        let widget_schema = smd_yaml::to_value(&schema, Some(&[widget_type.as_str()]));
        Generator {
            rng: StdRng::seed_from_u64(seed),
            replayer: Replayer::new(),
            widget_schema,
            widget_type,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p.clamp(0.0, 1.0))
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.rng.gen_range(0..xs.len())].clone()
    }
    fn subset<T: Clone>(&mut self, xs: &[T], p: f64) -> Vec<T> {
        let mut out: Vec<T> = xs
            .iter()
            .filter(|_| self.rng.gen_bool(p))
            .cloned()
            .collect();
        if self.chance(0.3) {
            // shuffle to exercise list ordering
            for k in (1..out.len()).rev() {
                let j = self.rng.gen_range(0..=k);
                out.swap(k, j);
            }
        }
        out
    }

    // ---- identity of the object ----

    fn header(&mut self, f: Family) -> (String, String, Value, String) {
        match f {
            Family::Deployment => {
                let schema = if self.chance(0.15) {
                    "k8s-v1.36.0"
                } else {
                    "k8s"
                };
                (
                    "apps/v1".into(),
                    "Deployment".into(),
                    s(schema),
                    String::new(),
                )
            }
            Family::Service => ("v1".into(), "Service".into(), s("k8s"), String::new()),
            Family::ConfigMap => {
                let schema = if self.chance(0.15) {
                    "k8s-v1.36.0"
                } else {
                    "k8s"
                };
                ("v1".into(), "ConfigMap".into(), s(schema), String::new())
            }
            Family::Widget => (
                "example.fieldguard.dev/v1".into(),
                "Widget".into(),
                self.widget_schema.clone(),
                self.widget_type.clone(),
            ),
        }
    }

    fn skeleton(&mut self, api: &str, kind: &str) -> Value {
        m(vec![
            ("apiVersion", s(api)),
            ("kind", s(kind)),
            (
                "metadata",
                m(vec![("name", s("web")), ("namespace", s("default"))]),
            ),
        ])
    }

    fn metadata_bits(&mut self, obj: &mut Value, focus: &[&str]) {
        let labels = self.subset(&["app", "team", "tier", "version"], 0.5);
        if !labels.is_empty() || self.chance(0.05) {
            let mut lm = Map::new();
            for k in labels {
                if focus.is_empty() || focus.contains(&k) || self.chance(0.3) {
                    lm.insert(k, s(self.pick(&["a", "b", "web"])));
                }
            }
            set(obj, &["metadata", "labels"], Value::Map(lm));
        }
        if self.chance(0.3) {
            let mut am = Map::new();
            for k in self.subset(&["owner", "example.com/note", "checksum"], 0.6) {
                am.insert(k, s(self.pick(&["x", "y", "1"])));
            }
            set(obj, &["metadata", "annotations"], Value::Map(am));
        }
        if self.chance(0.15) {
            let fs = self.subset(&["example.com/a", "example.com/b", "example.com/c"], 0.5);
            set(
                obj,
                &["metadata", "finalizers"],
                l(fs.into_iter().map(s).collect()),
            );
        }
    }

    // ---- configs per family ----

    fn container(&mut self, name: &str, richness: f64) -> Value {
        let mut c = Map::new();
        c.insert("name", s(name));
        if self.chance(0.9) {
            let img = format!("{name}:{}", self.pick(&["v1", "v2", "v3"]));
            c.insert("image", s(&img));
        }
        if self.chance(richness * 0.3) {
            c.insert("imagePullPolicy", s(self.pick(&["Always", "IfNotPresent"])));
        }
        if self.chance(richness * 0.3) {
            let args = self.pick(&[vec!["--a"], vec!["--a", "--b"], vec!["--b"], vec![]]);
            c.insert("args", l(args.into_iter().map(s).collect()));
        }
        if self.chance(richness * 0.5) {
            let ports = self.subset(&[0, 1, 2, 3], 0.5);
            let items = ports
                .into_iter()
                .map(|p| match p {
                    0 => m(vec![("containerPort", i(80))]),
                    1 => m(vec![("containerPort", i(80)), ("protocol", s("UDP"))]),
                    2 => m(vec![
                        ("containerPort", i(8080)),
                        ("name", s(if self.chance(0.5) { "http" } else { "web" })),
                    ]),
                    _ => m(vec![("containerPort", i(9090)), ("protocol", s("TCP"))]),
                })
                .collect();
            c.insert("ports", l(items));
        }
        if self.chance(richness * 0.5) {
            let env = self.subset(&[0, 1, 2], 0.6);
            let items = env
                .into_iter()
                .map(|e| match e {
                    0 => m(vec![("name", s("A")), ("value", s(self.pick(&["1", "2"])))]),
                    1 => m(vec![("name", s("B")), ("value", s("x"))]),
                    _ => m(vec![
                        ("name", s("C")),
                        (
                            "valueFrom",
                            m(vec![(
                                "fieldRef",
                                m(vec![(
                                    "fieldPath",
                                    s(self.pick(&["metadata.name", "metadata.namespace"])),
                                )]),
                            )]),
                        ),
                    ]),
                })
                .collect();
            c.insert("env", l(items));
        }
        if self.chance(richness * 0.4) {
            let mut res = Map::new();
            if self.chance(0.7) {
                let mut lim = Map::new();
                if self.chance(0.8) {
                    lim.insert("cpu", s(self.pick(&["100m", "200m"])));
                }
                if self.chance(0.5) {
                    lim.insert("memory", s(self.pick(&["128Mi", "256Mi"])));
                }
                res.insert("limits", Value::Map(lim));
            }
            if self.chance(0.4) {
                res.insert("requests", m(vec![("cpu", s("50m"))]));
            }
            c.insert("resources", Value::Map(res));
        }
        if self.chance(richness * 0.15) {
            let sc = self.pick(&[
                m(vec![]),
                Value::Null,
                m(vec![("runAsNonRoot", Value::Bool(true))]),
            ]);
            c.insert("securityContext", sc);
        }
        if self.chance(richness * 0.15) {
            c.insert(
                "volumeMounts",
                l(vec![m(vec![
                    ("name", s("data")),
                    ("mountPath", s("/data")),
                ])]),
            );
        }
        Value::Map(c)
    }

    fn deployment_config(&mut self, obj: &mut Value, persona: &str) {
        let (focus, richness): (&[&str], f64) = match persona {
            "alice" | "kubectl" => (&["app", "version"], 0.8),
            "bob" => (&["team", "tier"], 0.5),
            _ => (&[], 1.0),
        };
        self.metadata_bits(obj, focus);
        let everything = persona != "alice" && persona != "kubectl" && persona != "bob";
        if persona != "bob" || self.chance(0.2) {
            if self.chance(0.7) {
                let r = self.pick(&[i(1), i(2), i(3), Value::Float(2.0), Value::Null]);
                set(obj, &["spec", "replicas"], r);
            }
            if self.chance(0.6) {
                set(
                    obj,
                    &["spec", "selector"],
                    m(vec![(
                        "matchLabels",
                        m(vec![("app", s(self.pick(&["web", "api"])))]),
                    )]),
                );
            }
            if self.chance(0.5) {
                set(
                    obj,
                    &["spec", "template", "metadata", "labels"],
                    m(vec![("app", s(self.pick(&["web", "api"])))]),
                );
            }
        }
        if self.chance(if everything { 0.4 } else { 0.2 }) {
            let strat = if self.chance(0.7) {
                m(vec![
                    ("type", s("RollingUpdate")),
                    (
                        "rollingUpdate",
                        m(vec![("maxSurge", self.pick(&[i(1), s("1"), s("25%")]))]),
                    ),
                ])
            } else {
                m(vec![("type", s("Recreate"))])
            };
            set(obj, &["spec", "strategy"], strat);
        }
        if self.chance(if everything { 0.3 } else { 0.1 }) {
            set(obj, &["spec", "minReadySeconds"], self.pick(&[i(0), i(5)]));
        }
        let names: Vec<&str> = match persona {
            "alice" | "kubectl" => vec!["app"],
            "bob" => {
                if self.chance(0.5) {
                    vec!["sidecar"]
                } else {
                    vec!["sidecar", "app"]
                }
            }
            _ => self.subset(&["app", "sidecar", "helper"], 0.5),
        };
        if !names.is_empty() || self.chance(0.1) {
            let containers = names
                .iter()
                .map(|n| {
                    self.container(
                        n,
                        if *n == "app" && persona == "bob" {
                            0.3
                        } else {
                            richness
                        },
                    )
                })
                .collect();
            set(
                obj,
                &["spec", "template", "spec", "containers"],
                l(containers),
            );
        }
        if self.chance(if everything { 0.2 } else { 0.05 }) {
            set(
                obj,
                &["spec", "template", "spec", "nodeSelector"],
                m(vec![("disk", s(self.pick(&["ssd", "hdd"])))]),
            );
        }
        if self.chance(if everything { 0.15 } else { 0.05 }) {
            set(
                obj,
                &["spec", "template", "spec", "volumes"],
                l(vec![m(vec![("name", s("data")), ("emptyDir", m(vec![]))])]),
            );
        }
        if self.chance(0.05) {
            set(obj, &["status", "replicas"], i(3));
        }
    }

    fn service_config(&mut self, obj: &mut Value, persona: &str) {
        self.metadata_bits(obj, &[]);
        if self.chance(0.8) {
            let ports = self.subset(&[0, 1, 2], 0.6);
            let items = ports
                .into_iter()
                .map(|p| match p {
                    0 => m(vec![
                        ("port", i(80)),
                        ("targetPort", self.pick(&[i(8080), s("http")])),
                    ]),
                    1 => m(vec![("port", i(443)), ("protocol", s("TCP"))]),
                    _ => m(vec![
                        ("port", i(53)),
                        ("protocol", s("UDP")),
                        ("name", s("dns")),
                    ]),
                })
                .collect();
            set(obj, &["spec", "ports"], l(items));
        }
        if self.chance(0.6) {
            let mut sel = Map::new();
            sel.insert("app", s(self.pick(&["web", "api"])));
            if self.chance(0.3) {
                sel.insert("tier", s("fe"));
            }
            set(obj, &["spec", "selector"], Value::Map(sel));
        }
        if self.chance(0.3) || persona == "ci" {
            set(
                obj,
                &["spec", "type"],
                s(self.pick(&["ClusterIP", "NodePort"])),
            );
        }
        if self.chance(0.15) {
            set(obj, &["spec", "sessionAffinity"], s("ClientIP"));
        }
    }

    fn configmap_config(&mut self, obj: &mut Value, _persona: &str) {
        self.metadata_bits(obj, &[]);
        if self.chance(0.85) {
            let mut d = Map::new();
            for k in self.subset(&["a", "b", "c", "d"], 0.5) {
                d.insert(k, s(self.pick(&["1", "2"])));
            }
            set(obj, &["data"], Value::Map(d));
        }
        if self.chance(0.1) {
            set(obj, &["immutable"], Value::Bool(false));
        }
    }

    fn arbitrary(&mut self, depth: usize) -> Value {
        let choice = self.rng.gen_range(0..if depth > 2 { 4 } else { 7 });
        match choice {
            0 => i(self.rng.gen_range(0..3)),
            1 => s(self.pick(&["x", "y"])),
            2 => Value::Bool(self.chance(0.5)),
            3 => Value::Null,
            4 | 5 => {
                let mut mm = Map::new();
                for k in self.subset(&["p", "q", "r"], 0.6) {
                    mm.insert(k, self.arbitrary(depth + 1));
                }
                Value::Map(mm)
            }
            _ => {
                let n = self.rng.gen_range(0..3);
                l((0..n).map(|_| self.arbitrary(depth + 1)).collect())
            }
        }
    }

    fn widget_config(&mut self, obj: &mut Value, _persona: &str) {
        self.metadata_bits(obj, &[]);
        if self.chance(0.6) {
            set(
                obj,
                &["spec", "size"],
                self.pick(&[i(1), i(2), Value::Float(2.0)]),
            );
        }
        if self.chance(0.4) {
            set(obj, &["spec", "color"], s(self.pick(&["red", "blue"])));
        }
        if self.chance(0.3) {
            set(
                obj,
                &["spec", "port"],
                self.pick(&[i(80), s("80"), s("http")]),
            );
        }
        if self.chance(0.5) {
            let c = self.arbitrary(0);
            let c = if c.as_map().is_some() {
                c
            } else {
                m(vec![("p", c)])
            };
            set(obj, &["spec", "config"], c);
        }
        if self.chance(0.5) {
            let items = self.subset(&[0, 1, 2], 0.6);
            let items = items
                .into_iter()
                .map(|k| match k {
                    0 => m(vec![
                        ("name", s("one")),
                        ("value", s(self.pick(&["a", "b"]))),
                    ]),
                    1 => m(vec![
                        ("name", s("one")),
                        ("zone", s("west")),
                        ("weight", i(2)),
                    ]),
                    _ => m(vec![("name", s("two")), ("zone", s("default"))]),
                })
                .collect();
            set(obj, &["spec", "items"], l(items));
        }
        if self.chance(0.4) {
            let tags = self.subset(&["t1", "t2", "t3"], 0.5);
            set(obj, &["spec", "tags"], l(tags.into_iter().map(s).collect()));
        }
        if self.chance(0.3) {
            set(
                obj,
                &["spec", "selector"],
                m(vec![("app", s(self.pick(&["web", "api"])))]),
            );
        }
        if self.chance(0.2) {
            let extra = self.arbitrary(1);
            set(
                obj,
                &["spec", "template"],
                m(vec![
                    ("apiVersion", s("v1")),
                    ("kind", s("Pod")),
                    ("metadata", m(vec![("labels", m(vec![("app", s("w"))]))])),
                    ("extra", extra),
                ]),
            );
        }
        if self.chance(0.05) {
            set(obj, &["status", "ready"], Value::Bool(true));
        }
    }

    fn config(&mut self, f: Family, api: &str, kind: &str, persona: &str) -> Value {
        let mut obj = self.skeleton(api, kind);
        match f {
            Family::Deployment => self.deployment_config(&mut obj, persona),
            Family::Service => self.service_config(&mut obj, persona),
            Family::ConfigMap => self.configmap_config(&mut obj, persona),
            Family::Widget => self.widget_config(&mut obj, persona),
        }
        obj
    }

    /// Makes a config invalid in one of the ways users do (the apply must be rejected).
    fn break_config(&mut self, f: Family, cfg: &mut Value) {
        match self.rng.gen_range(0..6) {
            0 => set(cfg, &["spec", "bogusField"], s("x")),
            1 => match f {
                Family::Deployment => set(cfg, &["spec", "replicas"], s("three")),
                Family::Widget => set(cfg, &["spec", "size"], s("big")),
                Family::Service => set(cfg, &["spec", "ports"], s("80")),
                Family::ConfigMap => set(cfg, &["data", "a"], i(1)),
            },
            2 => match f {
                Family::Deployment => set(
                    cfg,
                    &["spec", "template", "spec", "containers"],
                    l(vec![
                        m(vec![("name", s("app")), ("image", s("a"))]),
                        m(vec![("name", s("app")), ("image", s("b"))]),
                    ]),
                ),
                Family::Widget => set(cfg, &["spec", "tags"], l(vec![s("t1"), s("t1")])),
                _ => set(cfg, &["metadata", "finalizers"], l(vec![s("x"), s("x")])),
            },
            3 => match f {
                Family::Widget => set(
                    cfg,
                    &["spec", "items"],
                    l(vec![m(vec![("value", s("no-name"))])]),
                ),
                Family::Service => set(
                    cfg,
                    &["spec", "ports"],
                    l(vec![m(vec![("name", s("noport"))])]),
                ),
                _ => set(
                    cfg,
                    &["metadata", "finalizers"],
                    l(vec![m(vec![("a", i(1))])]),
                ),
            },
            4 => set(cfg, &["apiVersion"], s("example.com/v9")),
            _ => set(cfg, &["metadata", "managedFields"], l(vec![])),
        }
    }

    // ---- updates: edits of the current object ----

    fn mutate(&mut self, f: Family, live: &Value, persona: &str) -> Value {
        let mut obj = live.clone();
        match persona {
            "hpa" => match f {
                Family::Deployment => {
                    set(&mut obj, &["spec", "replicas"], i(self.rng.gen_range(1..6)))
                }
                Family::Widget => set(&mut obj, &["spec", "size"], i(self.rng.gen_range(1..4))),
                _ => set(&mut obj, &["metadata", "labels", "scaled"], s("yes")),
            },
            "kubectl-edit" => {
                if f == Family::Deployment && self.chance(0.6) {
                    if let Some(Value::List(cs)) =
                        get_mut(&mut obj, &["spec", "template", "spec", "containers"])
                    {
                        if let Some(c) = cs.first_mut().and_then(Value::as_map_mut) {
                            c.insert("image", s("hotfix:v9"));
                        }
                    }
                } else if f == Family::ConfigMap && self.chance(0.6) {
                    set(&mut obj, &["data", "a"], s("edited"));
                } else {
                    set(&mut obj, &["metadata", "annotations", "owner"], s("edit"));
                }
            }
            "injector" => {
                if f == Family::Deployment {
                    let sidecar = m(vec![("name", s("istio-proxy")), ("image", s("proxy:1"))]);
                    match get_mut(&mut obj, &["spec", "template", "spec", "containers"]) {
                        Some(Value::List(cs)) => {
                            if self.chance(0.3) {
                                cs.retain(|c| c.str_at(&["name"]) != Some("istio-proxy"));
                            } else {
                                cs.push(sidecar)
                            }
                        }
                        _ => set(
                            &mut obj,
                            &["spec", "template", "spec", "containers"],
                            l(vec![sidecar]),
                        ),
                    }
                }
                set(
                    &mut obj,
                    &["metadata", "annotations", "sidecar.istio.io/status"],
                    s("injected"),
                );
            }
            "finalizer-ctl" => {
                let mut fs: Vec<Value> = obj
                    .get_path(&["metadata", "finalizers"])
                    .and_then(Value::as_list)
                    .map(|x| x.to_vec())
                    .unwrap_or_default();
                if !fs.is_empty() && self.chance(0.4) {
                    fs.remove(0);
                } else {
                    fs.push(s(self.pick(&["example.com/a", "ctl.io/protect"])));
                }
                set(&mut obj, &["metadata", "finalizers"], l(fs));
            }
            "status-writer" => match f {
                Family::Deployment => {
                    set(
                        &mut obj,
                        &["status", "replicas"],
                        i(self.rng.gen_range(0..4)),
                    );
                    set(&mut obj, &["status", "readyReplicas"], i(1));
                }
                Family::Widget => set(
                    &mut obj,
                    &["status", "conditions"],
                    l(vec![m(vec![
                        ("type", s("Ready")),
                        ("status", s(self.pick(&["True", "False"]))),
                    ])]),
                ),
                _ => set(&mut obj, &["metadata", "labels", "status"], s("ok")),
            },
            "dupper" => {
                // Real clusters contain duplicate list-map keys (e.g. env names).
                if f == Family::Deployment {
                    let env = m(vec![("name", s("A")), ("value", s("dup"))]);
                    match get_mut(&mut obj, &["spec", "template", "spec", "containers"]) {
                        Some(Value::List(cs)) if !cs.is_empty() => {
                            if let Some(c) = cs[0].as_map_mut() {
                                match c.get_mut("env") {
                                    Some(Value::List(e)) => {
                                        e.push(env.clone());
                                        e.push(env);
                                    }
                                    _ => {
                                        c.insert("env", l(vec![env.clone(), env]));
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                } else {
                    set(
                        &mut obj,
                        &["metadata", "finalizers"],
                        l(vec![s("x"), s("x")]),
                    );
                }
            }
            "remover" => {
                let victims: &[&[&str]] = match f {
                    Family::Deployment => &[
                        &["metadata", "labels"],
                        &["spec", "replicas"],
                        &["spec", "template", "spec", "containers"],
                        &["spec", "strategy"],
                    ],
                    Family::Service => &[
                        &["spec", "ports"],
                        &["spec", "selector"],
                        &["metadata", "labels"],
                    ],
                    Family::ConfigMap => &[&["data"], &["metadata", "labels"]],
                    Family::Widget => &[&["spec", "config"], &["spec", "items"], &["spec", "tags"]],
                };
                let v = self.pick(victims);
                remove(&mut obj, v);
            }
            "reorderer" => {
                if let Some(Value::List(cs)) =
                    get_mut(&mut obj, &["spec", "template", "spec", "containers"])
                {
                    cs.reverse();
                }
                if let Some(Value::List(ps)) = get_mut(&mut obj, &["spec", "ports"]) {
                    ps.reverse();
                }
                if let Some(Value::List(is)) = get_mut(&mut obj, &["spec", "items"]) {
                    is.reverse();
                }
            }
            _ => {
                // A controller rewriting a random config over the object.
                let (api, kind) = (
                    live.str_at(&["apiVersion"]).unwrap_or("v1").to_string(),
                    live.str_at(&["kind"]).unwrap_or("ConfigMap").to_string(),
                );
                let cfg = self.config(f, &api, &kind, "ci");
                obj = merge_plain(&obj, &cfg);
            }
        }
        obj
    }

    // ---- cases ----

    fn case(&mut self, index: usize) -> String {
        let f = self.pick(&[
            Family::Deployment,
            Family::Deployment,
            Family::Deployment,
            Family::Service,
            Family::ConfigMap,
            Family::ConfigMap,
            Family::Widget,
            Family::Widget,
        ]);
        let (api, kind, schema, type_name) = self.header(f);
        let scenario = self.rng.gen_range(0..100);
        let mut header = CaseInput {
            name: format!("gen-{index}-{}", kind.to_ascii_lowercase()),
            schema: Some(schema),
            type_name: type_name.clone(),
            ..CaseInput::default()
        };
        let mut pre_steps: Vec<StepInput> = Vec::new();
        match scenario {
            // An existing object nobody tracks yet: the first apply meets before-first-apply.
            0..=14 => {
                let mut live = self.config(f, &api, &kind, "ci");
                set(
                    &mut live,
                    &["metadata", "uid"],
                    s("00000000-0000-4000-8000-000000000001"),
                );
                header.live = Some(live);
            }
            // A client-side-applied object that kubectl now applies server-side.
            15..=24 => {
                let cfg = self.config(f, &api, &kind, "kubectl");
                let mut obj = cfg.clone();
                let la = json::to_string(&cfg, Style::GO) + "\n";
                set(
                    &mut obj,
                    &[
                        "metadata",
                        "annotations",
                        crate::managedfields::LAST_APPLIED,
                    ],
                    s(&la),
                );
                pre_steps.push(StepInput {
                    op: "update".into(),
                    manager: "kubectl-client-side-apply".into(),
                    object: Some(obj),
                    ..StepInput::default()
                });
            }
            // Many updaters: the cap folds the oldest into ancient-changes.
            25..=29 => {
                let n = self.rng.gen_range(9..13);
                let base = self.config(f, &api, &kind, "alice");
                let mut obj = base;
                for k in 0..n {
                    set(&mut obj, &["metadata", "labels", &format!("l{k}")], s("v"));
                    pre_steps.push(StepInput {
                        op: "update".into(),
                        manager: format!("m{k}"),
                        object: Some(obj.clone()),
                        now: format!("2024-01-01T00:00:{:02}Z", k + 1),
                        ..StepInput::default()
                    });
                }
            }
            // A manager recorded at a version that is no longer served.
            30..=34 if f == Family::Deployment => {
                let live = self.config(f, &api, &kind, "alice");
                let entries = vec![crate::managedfields::ManagedFieldsEntry {
                    manager: "old-tool".into(),
                    operation: "Update".into(),
                    api_version: "apps/v1beta1".into(),
                    fields_type: "FieldsV1".into(),
                    fields_v1: Some(
                        r#"{"f:spec":{"f:replicas":{}},"f:metadata":{"f:labels":{"f:app":{}}}}"#
                            .into(),
                    ),
                    ..Default::default()
                }];
                header.managers = Some(entries_to_value(&entries, |_| false));
                header.live = Some(live);
                if self.chance(0.7) {
                    header.known_versions = vec!["apps/v1".into()];
                }
            }
            _ => {}
        }
        // Reset fields of the main resource, as kube-apiserver's strategies declare them.
        if matches!(f, Family::Deployment | Family::Widget) && self.chance(0.3) {
            header.ignored_fields = vec![(
                api.clone(),
                json::parse_str(r#"{"f:status":{}}"#).expect("static"),
            )];
        }
        if self.chance(0.2) {
            header.now = "2025-06-01T12:00:00Z".into();
        }

        let mut session = match self.replayer.session(&header) {
            Ok(sess) => sess,
            Err(_) => return case_json(&header, &pre_steps),
        };
        let mut steps: Vec<StepInput> = Vec::new();
        for st in pre_steps {
            let _ = session.step(&st);
            steps.push(st);
        }
        let n = self.rng.gen_range(1..=5);
        for k in 0..n {
            let update = session.live().is_some() && self.chance(0.35);
            let mut st = if update {
                let persona = self.pick(&[
                    "hpa",
                    "kubectl-edit",
                    "injector",
                    "finalizer-ctl",
                    "status-writer",
                    "dupper",
                    "remover",
                    "reorderer",
                    "controller",
                ]);
                let live = session.live().cloned().expect("checked");
                let mut obj = self.mutate(f, &live, persona);
                let sub = match persona {
                    "status-writer" => "status",
                    "hpa" if self.chance(0.5) => "scale",
                    _ => "",
                };
                if self.chance(0.03) {
                    set(&mut obj, &["metadata", "managedFields"], l(vec![]));
                }
                StepInput {
                    op: "update".into(),
                    manager: persona.into(),
                    object: Some(obj),
                    subresource: sub.into(),
                    ..StepInput::default()
                }
            } else {
                let persona = self.pick(&["alice", "alice", "bob", "kubectl", "ci", "ci"]);
                let mut cfg = self.config(f, &api, &kind, persona);
                if self.chance(0.04) {
                    self.break_config(f, &mut cfg);
                }
                StepInput {
                    op: "apply".into(),
                    manager: persona.into(),
                    config: Some(cfg),
                    force: self.chance(0.25),
                    ..StepInput::default()
                }
            };
            if self.chance(0.1) {
                st.now = format!("2025-06-01T12:{:02}:00Z", k + 1);
            }
            let _ = session.step(&st);
            steps.push(st);
        }
        case_json(&header, &steps)
    }
}

/// Overlays `top` on `base` (maps merge, everything else replaces).
fn merge_plain(base: &Value, top: &Value) -> Value {
    match (base, top) {
        (Value::Map(b), Value::Map(t)) => {
            let mut out = b.clone();
            for (k, v) in t.iter() {
                let nv = match b.get(k) {
                    Some(bv) => merge_plain(bv, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), nv);
            }
            Value::Map(out)
        }
        (_, t) => t.clone(),
    }
}

fn step_value(st: &StepInput) -> Value {
    let mut mm = Map::new();
    mm.insert("op", s(&st.op));
    mm.insert("manager", s(&st.manager));
    if !st.subresource.is_empty() {
        mm.insert("subresource", s(&st.subresource));
    }
    if let Some(c) = &st.config {
        mm.insert("config", c.clone());
    }
    if let Some(o) = &st.object {
        mm.insert("object", o.clone());
    }
    if st.force {
        mm.insert("force", Value::Bool(true));
    }
    if !st.now.is_empty() {
        mm.insert("now", s(&st.now));
    }
    Value::Map(mm)
}

fn case_json(h: &CaseInput, steps: &[StepInput]) -> String {
    let mut mm = Map::new();
    mm.insert("name", s(&h.name));
    if let Some(sc) = &h.schema {
        mm.insert("schema", sc.clone());
    }
    if !h.type_name.is_empty() {
        mm.insert("typeName", s(&h.type_name));
    }
    if let Some(live) = &h.live {
        mm.insert("live", live.clone());
    }
    if let Some(mg) = &h.managers {
        mm.insert("managers", mg.clone());
    }
    if !h.known_versions.is_empty() {
        mm.insert(
            "knownVersions",
            l(h.known_versions.iter().map(|v| s(v)).collect()),
        );
    }
    if !h.ignored_fields.is_empty() {
        let mut im = Map::new();
        for (k, v) in &h.ignored_fields {
            im.insert(k.as_str(), v.clone());
        }
        mm.insert("ignoredFields", Value::Map(im));
    }
    if !h.now.is_empty() {
        mm.insert("now", s(&h.now));
    }
    mm.insert("steps", l(steps.iter().map(step_value).collect()));
    json::to_string(&Value::Map(mm), Style::PLAIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_parses() {
        let a = generate(7, 20);
        let b = generate(7, 20);
        assert_eq!(a, b);
        let mut r = Replayer::new();
        for line in &a {
            let res = r.run_line(line.as_bytes());
            assert!(!res.result.error.starts_with("bad case JSON"), "{line}");
        }
    }
}
