//! A fake kube-apiserver on loopback for tests: discovery (`/api`, `/apis`, resource lists),
//! `/version`, `/openapi/v3` (index and per-group-version documents, CRDs' built the way
//! kube-apiserver publishes them), GET of objects with `Status` bodies for 404s, and lists.
//! Every request is recorded so tests can assert what was (not) sent.
//!
//! **It proves protocols, never outcomes.** Where it answers server-side applies and patches,
//! it computes them with fieldguard's own engine and patch code, so a wrong merge would be
//! wrong on both sides. It is kept for what the real apiserver (`../shared/realapi`, see
//! `support::realapi`) cannot do: core kinds (Secrets for release records, ConfigMaps,
//! Deployments), TokenReview and SubjectAccessReview, and faults injected at will (dropped
//! watches, 410s, outages, held requests). Every outcome claim is judged against the real
//! server: `tests/real/differential.rs`, `tests/real/apply.rs`.

#![allow(dead_code)]

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio_stream::StreamExt;

/// A served resource type.
#[derive(Clone, Debug)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub subresources: Vec<String>,
}

impl Resource {
    pub fn new(
        api_version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        subs: &[&str],
    ) -> Resource {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Resource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            subresources: subs.iter().map(|s| s.to_string()).collect(),
        }
    }
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    fn base(&self) -> String {
        if self.group.is_empty() {
            format!("api/{}", self.version)
        } else {
            format!("apis/{}/{}", self.group, self.version)
        }
    }
}

type Key = (String, String, String, String);

/// A gate requests wait at until the test opens it; the test can wait for requests to arrive.
/// Both sides wait on events, never on the clock.
pub struct Gate {
    arrived: tokio::sync::watch::Sender<usize>,
    open: tokio::sync::watch::Sender<bool>,
}

impl Gate {
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate {
            arrived: tokio::sync::watch::channel(0).0,
            open: tokio::sync::watch::channel(false).0,
        })
    }

    /// Counts the request in, then waits until the gate is open.
    async fn pass(&self) {
        self.arrived.send_modify(|n| *n += 1);
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|o| *o).await;
    }

    /// Waits until `n` requests have reached the gate (60 s at most: a hang guard).
    pub async fn arrived(&self, n: usize) {
        let mut a = self.arrived.subscribe();
        tokio::time::timeout(std::time::Duration::from_secs(60), a.wait_for(|k| *k >= n))
            .await
            .expect("requests reached the gate")
            .unwrap();
    }

    /// Lets every waiting and later request through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

/// A watch connection: what it selects and where its events go.
struct Watcher {
    group: String,
    plural: String,
    namespace: String,
    tx: tokio::sync::mpsc::UnboundedSender<Bytes>,
}

/// One change, kept for watches that resume from an older resourceVersion.
#[derive(Clone)]
struct Event {
    rv: u64,
    kind: &'static str,
    key: Key,
    object: Value,
}

#[derive(Default)]
pub struct State {
    pub resources: Vec<Resource>,
    /// (group, plural, namespace, name) → object.
    pub objects: BTreeMap<Key, Value>,
    /// "api/v1", "apis/apps/v1" → OpenAPI v3 document.
    pub openapi: BTreeMap<String, Value>,
    /// "GET /api/v1/..." for every request received.
    pub requests: Vec<String>,
    /// When each of `requests` arrived.
    pub request_times: Vec<std::time::Instant>,
    /// The current resourceVersion (every change increments it).
    pub resource_version: u64,
    /// Watches from resourceVersions below this get 410 Gone.
    pub compacted: u64,
    /// While true, watch requests fail with 503 (an outage).
    pub refuse_watches: bool,
    /// Delay before each event of watches opened while set (a slow stream).
    pub slow: Option<std::time::Duration>,
    /// Another writer wins a race: the next write to an object of this name is preceded by a
    /// change to it (an annotation), as if someone edited it after the prediction.
    pub touch_before_write: Option<String>,
    /// While set, every GET (not watches) whose path contains the text waits at this gate
    /// until the test opens it: work that needs the apiserver provably outlasts whatever the
    /// test does meanwhile. The text keeps the cache's own lists and discovery out of the gate
    /// (a test waiting for "the prediction's GET" must not be let on by a relist).
    pub hold_gets: Option<(String, Arc<Gate>)>,
    /// TokenReview: token → (user, groups, audiences, expired).
    pub tokens: BTreeMap<String, (String, Vec<String>, Vec<String>, bool)>,
    /// RBAC for SubjectAccessReviews and impersonated requests: (user or group, verb, resource,
    /// namespace); "*" matches any verb or resource, "" any namespace.
    pub grants: Vec<(String, String, String, String)>,
    /// Writes (not GETs) to this resource (a plural, e.g. `secrets`) are refused with 403,
    /// whoever sends them.
    pub refuse_writes_to: Option<String>,
    /// GETs of single objects (not lists, not watches) whose path ends with this are answered
    /// 500 (a fault injected on the read path).
    pub fail_gets_of: Option<String>,
    /// GETs (watches too) whose path ends with this are answered 200 with a body that never
    /// ends (a broken or hostile server, or a proxy in front of one): a client must stop
    /// reading at its bound.
    pub endless_gets_of: Option<String>,
    /// Container logs served at `pods/NAME/log?container=C`: (namespace, pod, container).
    pub logs: BTreeMap<(String, String, String), String>,
    events: Vec<Event>,
    watchers: Vec<Watcher>,
}

impl State {
    /// A server serving these resource types, with no objects yet.
    pub fn new(resources: Vec<Resource>) -> State {
        State {
            resources,
            ..State::default()
        }
    }

    /// Stores an object (its type must be served), as a change with a new resourceVersion.
    pub fn put(&mut self, obj: Value) {
        self.put_inner(obj, true);
    }

    fn key_of(&self, obj: &Value) -> Key {
        let av = obj["apiVersion"].as_str().unwrap_or("");
        let kind = obj["kind"].as_str().unwrap_or("");
        let group = av.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        let r = self
            .resources
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .unwrap_or_else(|| panic!("fake apiserver: {av} {kind} is not served"));
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        (group, r.plural.clone(), ns, name)
    }

    fn put_inner(&mut self, mut obj: Value, record: bool) {
        let key = self.key_of(&obj);
        let own: Option<u64> = obj["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok());
        match own.filter(|_| !record) {
            // Seeded objects keep their resourceVersion (the clock moves past it).
            Some(v) => self.resource_version = self.resource_version.max(v),
            None => {
                self.resource_version += 1;
                obj["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
            }
        }
        let kind = if self.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.objects.insert(key.clone(), obj.clone());
        if record {
            self.emit(kind, key, obj);
        }
    }

    /// Deletes an object (a change with a new resourceVersion).
    pub fn delete(&mut self, key: &Key) -> bool {
        let Some(mut obj) = self.objects.remove(key) else {
            return false;
        };
        self.resource_version += 1;
        obj["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        self.emit("DELETED", key.clone(), obj);
        true
    }

    fn emit(&mut self, kind: &'static str, key: Key, object: Value) {
        let ev = Event {
            rv: self.resource_version,
            kind,
            key,
            object,
        };
        let line = event_line(&ev);
        self.watchers.retain(|w| {
            !(w.group == ev.key.0
                && w.plural == ev.key.1
                && (w.namespace.is_empty() || w.namespace == ev.key.2))
                || w.tx.send(line.clone()).is_ok()
        });
        self.events.push(ev);
    }

    /// Ends every open watch (a dropped connection).
    pub fn drop_watches(&mut self) {
        self.watchers.clear();
    }

    /// Forgets history: watches from older resourceVersions get 410 Gone.
    pub fn compact(&mut self) {
        self.compacted = self.resource_version;
        self.events.clear();
    }

    /// An apiserver restart: connections drop, history is gone, resourceVersions jump.
    pub fn restart(&mut self) {
        self.drop_watches();
        self.resource_version += 1000;
        self.compact();
    }

    /// Sends a bookmark with the current resourceVersion to every watch.
    pub fn bookmark(&mut self) {
        let rv = self.resource_version;
        self.watchers.retain(|w| {
            let line = Bytes::from(format!(
                "{}\n",
                json!({"type": "BOOKMARK", "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv.to_string()}}})
            ));
            w.tx.send(line).is_ok()
        });
    }

    /// Every object's reference and resourceVersion: (group, kind, namespace, name) → rv.
    pub fn versions(&self) -> BTreeMap<(String, String, String, String), String> {
        self.objects
            .iter()
            .map(|((g, p, ns, name), o)| {
                let kind = self
                    .resources
                    .iter()
                    .find(|r| &r.group == g && &r.plural == p)
                    .unwrap()
                    .kind
                    .clone();
                (
                    (g.clone(), kind, ns.clone(), name.clone()),
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect()
    }

    /// Loads an object without recording a change (initial content).
    pub fn seed(&mut self, obj: Value) {
        self.put_inner(obj, false);
    }
}

pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeApiServer {
    pub fn start(state: State) -> FakeApiServer {
        let state = Arc::new(Mutex::new(state));
        let (tx, rx) = std::sync::mpsc::channel();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let st = st.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            let st = st.clone();
                            async move { Ok::<_, std::convert::Infallible>(handle(&st, req).await) }
                        });
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        });
        let addr = rx.recv().unwrap();
        FakeApiServer {
            addr,
            state,
            _thread: thread,
        }
    }

    /// A kubeconfig file pointing at this server (context `fake`, namespace `ns`).
    pub fn kubeconfig(&self, dir: &std::path::Path, ns: &str) -> std::path::PathBuf {
        let p = dir.join("kubeconfig");
        std::fs::write(
            &p,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n    namespace: {ns}\n- name: other\n  context:\n    cluster: fake\n    user: tester\n    namespace: elsewhere\ncurrent-context: other\nusers:\n- name: tester\n  user:\n    token: not-a-real-token\n",
                self.addr
            ),
        )
        .unwrap();
        p
    }

    /// A client of this server (context `fake`, default namespace `ns`).
    pub async fn api(&self, ns: &str) -> fieldguard::live::api::Api {
        let dir = std::env::temp_dir().join(format!(
            "fieldguard-fake-{}-{}",
            std::process::id(),
            self.addr.port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kc = self.kubeconfig(&dir, ns);
        let opts = fieldguard::live::api::ClusterOptions {
            kubeconfig: Some(kc),
            context: Some("fake".into()),
        };
        fieldguard::live::api::Api::connect(&opts).await.unwrap().0
    }

    /// A client of this server reached through `via` (a proxy in front of it), context
    /// `fake`, namespace `default`.
    pub async fn api_via(&self, via: SocketAddr) -> fieldguard::live::api::Api {
        let dir = std::env::temp_dir().join(format!(
            "fieldguard-fake-via-{}-{}",
            std::process::id(),
            via.port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kc = self.kubeconfig(&dir, "default");
        let text = std::fs::read_to_string(&kc)
            .unwrap()
            .replace(&self.addr.to_string(), &via.to_string());
        std::fs::write(&kc, text).unwrap();
        let opts = fieldguard::live::api::ClusterOptions {
            kubeconfig: Some(kc),
            context: Some("fake".into()),
        };
        fieldguard::live::api::Api::connect(&opts).await.unwrap().0
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }
}

pub type Body = BoxBody<Bytes, std::convert::Infallible>;

fn event_line(ev: &Event) -> Bytes {
    Bytes::from(format!(
        "{}\n",
        json!({"type": ev.kind, "object": ev.object})
    ))
}

pub fn reply(code: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap()
}

/// 200, and a JSON object whose one string never ends (written as fast as it is read).
fn endless() -> Response<Body> {
    let head = Bytes::from_static(br#"{"apiVersion":"v1","kind":"ConfigMap","data":{"k":""#);
    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
    let body = tokio_stream::iter(std::iter::once(head).chain(std::iter::repeat(chunk)))
        .map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b)));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(StreamBody::new(body)))
        .unwrap()
}

pub fn status(code: u16, reason: &str, message: String) -> Response<Body> {
    reply(
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

async fn handle(st: &Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query: BTreeMap<String, String> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let content_type = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let impersonate_user = req
        .headers()
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let impersonate_groups: Vec<String> = req
        .headers()
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let gate = st.lock().unwrap().hold_gets.clone();
    if let Some((within, g)) = gate
        && method == hyper::Method::GET
        && !query.contains_key("watch")
        && path.contains(within.as_str())
    {
        g.pass().await;
    }
    let mut s = st.lock().unwrap();
    s.request_times.push(std::time::Instant::now());
    match &impersonate_user {
        Some(u) => s.requests.push(format!("{method} {path} as {u}")),
        None => s.requests.push(format!("{method} {path}")),
    }
    if method == hyper::Method::POST && path == "/apis/authentication.k8s.io/v1/tokenreviews" {
        return super::fake_writes::token_review(&s, &body);
    }
    if method == hyper::Method::POST && path == "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    {
        return super::fake_writes::subject_access_review(&s, &body);
    }
    if let Some(user) = &impersonate_user
        && let Some(denied) = super::fake_writes::forbidden(
            &s,
            user,
            &impersonate_groups,
            &method,
            &path,
            query.contains_key("watch"),
        )
    {
        return denied;
    }
    if method == hyper::Method::GET
        && let Some(suffix) = &s.endless_gets_of
        && path.ends_with(suffix.as_str())
    {
        return endless();
    }
    if method == hyper::Method::GET
        && let Some(suffix) = &s.fail_gets_of
        && path.ends_with(suffix.as_str())
    {
        return status(
            500,
            "InternalError",
            "Internal error occurred: injected fault".into(),
        );
    }
    if method != hyper::Method::GET
        && let Some(plural) = &s.refuse_writes_to
        && path.split('/').any(|seg| seg == plural.as_str())
    {
        return status(
            403,
            "Forbidden",
            format!("{plural} is forbidden: writes are not allowed here"),
        );
    }
    if method != hyper::Method::GET
        && let Some(name) = s.touch_before_write.clone()
        && path.ends_with(&format!("/{name}"))
    {
        s.touch_before_write = None;
        let key = s.objects.keys().find(|k| k.3 == name).cloned();
        if let Some(key) = key {
            let mut o = s.objects[&key].clone();
            o["metadata"]["annotations"]["edited-by"] = json!("someone-else");
            s.put(o);
        }
    }
    if method == hyper::Method::PATCH && content_type == "application/apply-patch+yaml" {
        return apply_patch(&mut s, &path, &query, &body);
    }
    if method != hyper::Method::GET {
        return super::fake_writes::write(&mut s, &method, &path, &query, &content_type, &body);
    }
    let parts: Vec<&str> = path
        .trim_start_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        ["version"] => reply(
            StatusCode::OK,
            json!({"major": "1", "minor": "33", "gitVersion": "v1.33.1-fake"}),
        ),
        ["api"] => reply(
            StatusCode::OK,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        ["apis"] => {
            let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for r in s.resources.iter().filter(|r| !r.group.is_empty()) {
                let v = groups.entry(r.group.clone()).or_default();
                if !v.contains(&r.version) {
                    v.push(r.version.clone());
                }
            }
            let groups: Vec<Value> = groups
                .into_iter()
                .map(|(g, vs)| {
                    let versions: Vec<Value> = vs
                        .iter()
                        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                        .collect();
                    json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
                })
                .collect();
            reply(
                StatusCode::OK,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            )
        }
        ["openapi", "v3"] => {
            let paths: serde_json::Map<String, Value> = s
                .openapi
                .keys()
                .map(|k| (k.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash=0123456789ABCDEF")})))
                .collect();
            reply(StatusCode::OK, json!({"paths": paths}))
        }
        ["openapi", "v3", rest @ ..] => match s.openapi.get(&rest.join("/")) {
            Some(d) => reply(StatusCode::OK, d.clone()),
            None => status(
                404,
                "NotFound",
                "the server could not find the requested resource".into(),
            ),
        },
        ["api", "v1", "namespaces", ns, "pods", pod, "log"] => {
            let container = query.get("container").cloned().unwrap_or_default();
            match s
                .logs
                .get(&(ns.to_string(), pod.to_string(), container.clone()))
            {
                Some(text) => {
                    // As the kubelet: the last `tailLines` lines, then the first `limitBytes`.
                    let lines: Vec<&str> = text.split_inclusive('\n').collect();
                    let tail: usize = query
                        .get("tailLines")
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(lines.len());
                    let text = lines[lines.len().saturating_sub(tail)..].concat();
                    let limit: usize = query
                        .get("limitBytes")
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(usize::MAX);
                    let text = &text.as_bytes()[..text.len().min(limit)];
                    Response::builder()
                        .status(StatusCode::OK)
                        .header("content-type", "text/plain")
                        .body(Full::new(Bytes::copy_from_slice(text)).boxed())
                        .unwrap()
                }
                None => status(
                    404,
                    "NotFound",
                    format!("container {container:?} in pod {pod:?} not found"),
                ),
            }
        }
        _ => resource_request(&mut s, &parts, &query),
    }
}

fn resource_request(
    s: &mut State,
    parts: &[&str],
    query: &BTreeMap<String, String>,
) -> Response<Body> {
    let (group, version, rest): (&str, &str, &[&str]) = match parts {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource".into(),
            );
        }
    };
    let served: Vec<&Resource> = s
        .resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        );
    }
    let (ns, plural, name) = match rest {
        [] => {
            let mut list = Vec::new();
            for r in &served {
                list.push(json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced,
                                 "kind": r.kind, "verbs": ["create","delete","get","list","patch","update","watch"]}));
                for sub in &r.subresources {
                    list.push(json!({"name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
                                     "kind": if sub == "scale" { "Scale" } else { &r.kind }, "verbs": ["get","patch","update"]}));
                }
            }
            let gv = served[0].api_version();
            return reply(
                StatusCode::OK,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
            );
        }
        ["namespaces", ns, plural] => (*ns, *plural, None),
        ["namespaces", ns, plural, name] => (*ns, *plural, Some(*name)),
        [plural] => ("", *plural, None),
        [plural, name] => ("", *plural, Some(*name)),
        _ => {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource".into(),
            );
        }
    };
    let Some(r) = served
        .iter()
        .find(|r| r.plural == plural)
        .map(|r| (*r).clone())
    else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        );
    };
    if name.is_none() && query.get("watch").is_some_and(|w| w == "1" || w == "true") {
        return watch(s, &r, group, ns, query);
    }
    let with_version = |o: &Value| {
        let mut o = o.clone();
        o["apiVersion"] = json!(r.api_version());
        o
    };
    match name {
        Some(name) => match s.objects.get(&(
            group.to_string(),
            plural.to_string(),
            ns.to_string(),
            name.to_string(),
        )) {
            Some(o) => reply(StatusCode::OK, with_version(o)),
            None => status(
                404,
                "NotFound",
                format!("{plural}.{group} \"{name}\" not found"),
            ),
        },
        None => {
            let items: Vec<Value> = s
                .objects
                .iter()
                .filter(|((g, p, n, _), _)| g == group && p == plural && (ns.is_empty() || n == ns))
                .filter(|(_, o)| {
                    query
                        .get("labelSelector")
                        .is_none_or(|sel| super::fake_writes::selects(&percent_decode(sel), o))
                })
                .map(|(_, o)| with_version(o))
                .collect();
            reply(
                StatusCode::OK,
                json!({"kind": format!("{}List", r.kind), "apiVersion": r.api_version(),
                                         "metadata": {"resourceVersion": s.resource_version.to_string()}, "items": items}),
            )
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A gzip'd OpenAPI v3 fixture of this repository (`tests/fixtures/openapi-v3`).
pub fn openapi_fixture(file: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/openapi-v3/{file}.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The OpenAPI v3 document kube-apiserver publishes for a CRD's version: the structural
/// schema under the type's reversed-group name, `metadata` referring to ObjectMeta, the
/// group-version-kind extension, plus the meta/v1 types it refers to (taken from `core`).
pub fn crd_openapi(crd: &Value, version: &str, core: &Value) -> Value {
    let group = crd["spec"]["group"].as_str().unwrap();
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
    let v = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap();
    let mut schema = v["schema"]["openAPIV3Schema"].clone();
    schema["properties"]["metadata"] = json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]});
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": group, "kind": kind, "version": version}]);
    let reversed: Vec<&str> = group.split('.').rev().collect();
    let mut schemas = serde_json::Map::new();
    schemas.insert(format!("{}.{version}.{kind}", reversed.join(".")), schema);
    for (k, v) in core["components"]["schemas"].as_object().unwrap() {
        if k.starts_with("io.k8s.apimachinery.pkg.apis.meta.v1.") {
            schemas.insert(k.clone(), v.clone());
        }
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
           "paths": {}, "components": {"schemas": schemas}})
}

/// A watch: history after the asked resourceVersion, then live events, as JSON lines.
fn watch(
    s: &mut State,
    r: &Resource,
    group: &str,
    ns: &str,
    query: &BTreeMap<String, String>,
) -> Response<Body> {
    if s.refuse_watches {
        return status(
            503,
            "ServiceUnavailable",
            "the fake apiserver is in an outage".into(),
        );
    }
    let from: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    if from < s.compacted {
        let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("too old resource version: {from} ({})", s.compacted), "reason": "Expired", "code": 410}});
        let _ = tx.send(Bytes::from(format!("{gone}\n")));
        drop(tx);
    } else {
        for ev in s.events.iter().filter(|e| {
            e.rv > from
                && e.key.0 == group
                && e.key.1 == r.plural
                && (ns.is_empty() || e.key.2 == ns)
        }) {
            let _ = tx.send(event_line(ev));
        }
        s.watchers.push(Watcher {
            group: group.to_string(),
            plural: r.plural.clone(),
            namespace: ns.to_string(),
            tx,
        });
    }
    let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
    let events: std::pin::Pin<Box<dyn futures::Stream<Item = Bytes> + Send + Sync>> = match s.slow {
        Some(d) => Box::pin(futures::StreamExt::then(events, move |b| async move {
            tokio::time::sleep(d).await;
            b
        })),
        None => Box::pin(events),
    };
    let stream = events.map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b)));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap()
}

/// Server-side apply, with fieldguard's engine doing the merge: this proves the protocol
/// around it only (query parameters, preconditions, Status bodies, dry runs), never the
/// outcome — the real apiserver judges that (`tests/real/differential.rs`).
fn apply_patch(
    s: &mut State,
    path: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Response<Body> {
    use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
    use fieldguard::managedfields::{Prepared, entries_to_value};
    use fieldguard::predict::{self, ApplyRequest, ForcePolicy, Verdict};
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest): (&str, &[&str]) = match parts.as_slice() {
        ["api", _, rest @ ..] => ("", rest),
        ["apis", g, _, rest @ ..] => (*g, rest),
        _ => {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource".into(),
            );
        }
    };
    let (ns, plural, name) = match rest {
        ["namespaces", ns, plural, name] => (*ns, *plural, *name),
        [plural, name] => ("", *plural, *name),
        _ => return status(405, "MethodNotAllowed", "apply needs an object URL".into()),
    };
    let manager = query.get("fieldManager").cloned().unwrap_or_default();
    if manager.is_empty() {
        return status(
            400,
            "BadRequest",
            "PATCH with apply requires fieldManager".into(),
        );
    }
    let force = query.get("force").is_some_and(|v| v == "true");
    let dry_run = query.get("dryRun").is_some_and(|v| v == "All");
    let Ok(text) = std::str::from_utf8(body) else {
        return status(400, "BadRequest", "body is not UTF-8".into());
    };
    let config = match fieldguard::value::yaml::parse_one(text) {
        Ok(v) => v,
        Err(e) => return status(400, "BadRequest", format!("error decoding YAML: {e}")),
    };
    let key: Key = (
        group.to_string(),
        plural.to_string(),
        ns.to_string(),
        name.to_string(),
    );
    let live = s.objects.get(&key).cloned();
    if let (Some(want), Some(l)) = (config.str_at(&["metadata", "resourceVersion"]), &live)
        && l["metadata"]["resourceVersion"].as_str() != Some(want)
    {
        return status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {plural}.{group} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        );
    }
    let mut catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    for o in s
        .objects
        .values()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let _ = catalog.add_crd(&fieldguard::value::json::parse_str(&o.to_string()).unwrap());
    }
    let info = match catalog.lookup(
        config.str_at(&["apiVersion"]).unwrap_or(""),
        config.str_at(&["kind"]).unwrap_or(""),
    ) {
        Ok(i) => i,
        Err(e) => return status(400, "BadRequest", e.to_string()),
    };
    let live_v = live
        .as_ref()
        .map(|l| fieldguard::value::json::parse_str(&l.to_string()).unwrap());
    let prepared = match live_v
        .as_ref()
        .map(|l| Prepared::new(&info.schema, &info.type_ref, l))
    {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return status(500, "InternalError", e.to_string()),
        None => None,
    };
    let p = predict::predict(&ApplyRequest {
        schema: &info.schema,
        type_ref: &info.type_ref,
        live: prepared.as_ref(),
        config: &config,
        manager: &manager,
        force: if force {
            ForcePolicy::All
        } else {
            ForcePolicy::None
        },
        subresource: "",
        reset_fields: &info.reset_fields,
        now: 1_800_000_000,
        structural: info.validation.as_deref(),
    });
    match p.verdict {
        Verdict::Conflict => {
            let body = fieldguard::value::json::to_string(
                p.status.as_ref().unwrap(),
                fieldguard::value::json::Style::PLAIN,
            );
            reply(StatusCode::CONFLICT, serde_json::from_str(&body).unwrap())
        }
        Verdict::Invalid => status(422, "Invalid", p.error.unwrap_or_default()),
        _ => {
            let merged = fieldguard::value::json::to_string(
                p.object.as_ref().unwrap(),
                fieldguard::value::json::Style::PLAIN,
            );
            let mut obj: Value = serde_json::from_str(&merged).unwrap();
            let mf = fieldguard::value::json::to_string(
                &entries_to_value(&p.managed_fields(), |_| false),
                fieldguard::value::json::Style::PLAIN,
            );
            obj["metadata"]["managedFields"] = serde_json::from_str(&mf).unwrap();
            if ns.is_empty() {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove("namespace");
                }
            } else {
                obj["metadata"]["namespace"] = json!(ns);
            }
            let created = live.is_none();
            if created {
                obj["metadata"]["uid"] = json!(format!(
                    "00000000-0000-4000-8000-{:012}",
                    s.resource_version + 1
                ));
            }
            if dry_run {
                obj["metadata"]["resourceVersion"] = live
                    .map(|l| l["metadata"]["resourceVersion"].clone())
                    .unwrap_or(json!(""));
                return reply(StatusCode::OK, obj);
            }
            if p.verdict == Verdict::Unchanged
                && let Some(l) = live
            {
                // A no-op apply stores nothing: the resourceVersion stays.
                return reply(StatusCode::OK, l);
            }
            super::fake_writes::establish(s, &mut obj);
            s.put(obj);
            let stored = s.objects.get(&key).cloned().unwrap();
            reply(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                stored,
            )
        }
    }
}
