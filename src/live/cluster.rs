//! A live cluster, read-only: discovery (`/api`, `/apis/<group>/<version>`), published schemas
//! (`/openapi/v3` and its per-group-version documents, which include CRDs' schemas) and GETs of
//! the objects a check touches. Never a write, never a dry-run.
//!
//! The kubeconfig is resolved like kubectl: `--kubeconfig`, else `$KUBECONFIG`, else
//! `~/.kube/config`, else the in-cluster service account; `--context` picks a context.

use super::{Fetched, ObjectRef};
use crate::catalog::{Catalog, DEFAULT_KUBERNETES, Discovered};
use crate::schema::{Gvk, Schema, openapi_v3};
use crate::validation::Structural;
use crate::value::{MAX_DOCUMENT_BYTES, Value, json};
use futures::{StreamExt, TryStreamExt};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How many GETs run at once.
const CONCURRENCY: usize = 16;
/// Bound on any one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a write may take (kube-apiserver's own request timeout is 60 s).
const WRITE_TIMEOUT: Duration = Duration::from_secs(70);

/// Which cluster, as kubectl's flags name it.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// The cluster could not be reached, would not answer, or refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ClusterError {
    pub message: String,
    /// The apiserver's HTTP status, when it answered (404, 410 Gone, 403, ...).
    pub code: Option<u16>,
}

impl ClusterError {
    /// No answer (or no status) from the apiserver.
    pub fn new(message: impl Into<String>) -> ClusterError {
        ClusterError {
            message: message.into(),
            code: None,
        }
    }

    /// The apiserver answered with `code`.
    pub fn status(message: impl Into<String>, code: u16) -> ClusterError {
        ClusterError {
            message: message.into(),
            code: Some(code),
        }
    }
}

/// A connected cluster, for blocking callers (the command line).
pub struct Cluster {
    rt: tokio::runtime::Runtime,
    api: Api,
    namespace: String,
    version: String,
}

/// The apiserver's HTTP API, for async callers (the service's cache): GETs with `None` for
/// 404, watch streams, errors naming the cluster and the path.
#[derive(Clone)]
pub struct Api {
    client: kube::Client,
    url: String,
    /// Requests are made as this user and groups (`Impersonate-User`/`Impersonate-Group`).
    impersonate: Option<Arc<(String, Vec<String>)>>,
}

/// One object to fetch: where it lives and in which version to read it.
#[derive(Clone, Debug)]
pub struct FetchItem {
    pub object_ref: ObjectRef,
    pub api_version: String,
    pub plural: String,
}

impl Cluster {
    /// Resolves the kubeconfig and checks that the apiserver answers (`GET /version`).
    pub fn connect(opts: &ClusterOptions) -> Result<Cluster, ClusterError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ClusterError::new(format!("cannot start the runtime: {e}")))?;
        let (api, namespace) = rt.block_on(Api::connect(opts))?;
        let mut c = Cluster {
            rt,
            api,
            namespace,
            version: String::new(),
        };
        let v = c.get_json("/version")?.ok_or_else(|| {
            ClusterError::new(format!("cluster {}: /version not found", c.api.url))
        })?;
        c.version = v.str_at(&["gitVersion"]).unwrap_or("").to_string();
        Ok(c)
    }

    /// The context's namespace (`default` if it names none).
    pub fn default_namespace(&self) -> &str {
        &self.namespace
    }

    /// `cluster https://… (v1.33.1)` for reports.
    pub fn describe(&self) -> String {
        format!("cluster {} ({})", self.api.url, self.version)
    }

    /// A catalog for these apiVersions: the cluster's discovery (scope, plural, status
    /// subresource) and its published OpenAPI v3 schemas, over the newest bundled built-ins.
    pub fn catalog_for(&self, api_versions: &BTreeSet<String>) -> Result<Catalog, ClusterError> {
        self.rt.block_on(self.api.catalog_for(api_versions))
    }

    /// GETs the objects (concurrently); those that do not exist are absent from the result.
    pub fn fetch(&self, items: &[FetchItem]) -> Result<Fetched, ClusterError> {
        let mut f = self.rt.block_on(self.api.fetch(items))?;
        f.source = self.describe();
        Ok(f)
    }

    /// GETs JSON at `path`; `None` on 404.
    fn get_json(&self, path: &str) -> Result<Option<Value>, ClusterError> {
        self.rt.block_on(self.api.get_json(path))
    }

    /// Runs a future on the cluster's runtime (for blocking callers of async operations).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The async API underneath.
    pub fn api(&self) -> &Api {
        &self.api
    }
}

/// The request path of a collection (`name` None) or of one object, e.g.
/// `/apis/apps/v1/namespaces/shop/deployments/web`. Every segment is percent-escaped: the one
/// place request paths are built from names (which are also validated before they get here).
pub fn resource_path(
    api_version: &str,
    plural: &str,
    namespace: &str,
    name: Option<&str>,
) -> String {
    let e = percent_encode;
    let root = match api_version.split_once('/') {
        Some((group, version)) => format!("/apis/{}/{}", e(group), e(version)),
        None => format!("/api/{}", e(api_version)),
    };
    let coll = if namespace.is_empty() {
        format!("{root}/{}", e(plural))
    } else {
        format!("{root}/namespaces/{}/{}", e(namespace), e(plural))
    };
    match name {
        Some(n) => format!("{coll}/{}", e(n)),
        None => coll,
    }
}

/// The request path of one object.
fn object_path(it: &FetchItem) -> String {
    let r = &it.object_ref;
    resource_path(&it.api_version, &it.plural, &r.namespace, Some(&r.name))
}

/// The structural schemas of a published document's types that are not built-in kinds: the
/// custom resources, which the apiserver validates against them.
fn custom_resource_schemas(doc: &Value) -> Vec<(Gvk, Arc<Structural>)> {
    let Some(components) = doc
        .get_path(&["components", "schemas"])
        .and_then(Value::as_map)
    else {
        return Vec::new();
    };
    let builtin = crate::schema::builtin::kubernetes(DEFAULT_KUBERNETES).ok();
    let mut out = Vec::new();
    for (_, spec) in components.iter() {
        for gvk in crate::schema::openapi_v2::gvk_list(spec) {
            if builtin.is_some_and(|b| b.type_for(&gvk).is_some()) {
                continue;
            }
            out.push((
                gvk,
                Arc::new(Structural::from_value(spec, Some(components))),
            ));
        }
    }
    out
}

/// What an `APIResourceList` says about each kind.
fn discovered(api_version: &str, list: &Value) -> Vec<(Gvk, Discovered)> {
    let empty = Vec::new();
    let resources = list
        .get_path(&["resources"])
        .and_then(Value::as_list)
        .unwrap_or(&empty);
    let subresources: BTreeSet<&str> = resources
        .iter()
        .filter_map(|r| r.str_at(&["name"]))
        .filter(|n| n.contains('/'))
        .collect();
    let mut out = BTreeMap::new();
    for r in resources {
        let (Some(name), Some(kind)) = (r.str_at(&["name"]), r.str_at(&["kind"])) else {
            continue;
        };
        if name.contains('/') {
            continue;
        }
        let namespaced = matches!(r.get_path(&["namespaced"]), Some(Value::Bool(true)));
        let gvk = Gvk::from_api_version(api_version, kind);
        out.insert(
            (gvk.group.clone(), gvk.version.clone(), gvk.kind.clone()),
            (
                gvk,
                Discovered {
                    namespaced,
                    plural: name.to_string(),
                    has_status: subresources.contains(format!("{name}/status").as_str()),
                },
            ),
        );
    }
    out.into_values().collect()
}

/// A served group-version's types: discovery and published schema.
#[derive(Clone, Debug)]
pub struct GvTypes {
    pub discovered: Vec<(Gvk, Discovered)>,
    pub schema: Option<Arc<Schema>>,
    /// Structural schemas of the custom resources among them (for validation).
    pub validations: Vec<(Gvk, Arc<Structural>)>,
}

impl GvTypes {
    pub fn add_to(&self, catalog: &mut Catalog) {
        for (gvk, d) in &self.discovered {
            catalog.add_discovered(gvk.clone(), d.clone());
        }
        if let Some(s) = &self.schema {
            catalog.add_served_shared(s.clone());
        }
        for (gvk, v) in &self.validations {
            catalog.add_validation(gvk.clone(), v.clone());
        }
    }
}

/// A resource type the cluster serves.
#[derive(Clone, Debug)]
pub struct ServedResource {
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub listable: bool,
}

impl ServedResource {
    /// True if `name` names this resource the way kubectl accepts it: kind, plural, singular
    /// or short name, optionally qualified by group (`deployments.apps`).
    pub fn matches(&self, name: &str) -> bool {
        let group = self.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let (name, want_group) = match name.split_once('.') {
            Some((n, g)) => (n, Some(g)),
            None => (name, None),
        };
        if want_group.is_some_and(|g| g != group) {
            return false;
        }
        let n = name.to_ascii_lowercase();
        n == self.kind.to_ascii_lowercase()
            || n == self.plural
            || n == self.singular
            || self.short_names.contains(&n)
    }
}

impl Cluster {
    /// Every resource type served, in each group's preferred version (discovery).
    pub fn resources(&self) -> Result<Vec<ServedResource>, ClusterError> {
        self.rt.block_on(self.api.resources())
    }

    /// One object, or `None` if it does not exist.
    pub fn get(
        &self,
        r: &ServedResource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let item = FetchItem {
            object_ref: ObjectRef {
                group: String::new(),
                kind: r.kind.clone(),
                namespace: if r.namespaced {
                    namespace.to_string()
                } else {
                    String::new()
                },
                name: name.to_string(),
            },
            api_version: r.api_version.clone(),
            plural: r.plural.clone(),
        };
        self.get_json(&object_path(&item))
    }

    /// The metadata (with managedFields) of every object of a resource, in all namespaces or
    /// one, page by page. Items are keyed by their reference.
    pub fn list_metadata(
        &self,
        r: &ServedResource,
        namespace: Option<&str>,
    ) -> Result<Vec<(ObjectRef, Value)>, ClusterError> {
        let ns = namespace.filter(|_| r.namespaced).unwrap_or("");
        let base = resource_path(&r.api_version, &r.plural, ns, None);
        let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let mut out = Vec::new();
        let mut cont = String::new();
        loop {
            let mut url = format!("{base}?limit=500");
            if !cont.is_empty() {
                url.push_str("&continue=");
                url.push_str(&percent_encode(&cont));
            }
            let Some(list) = self.rt.block_on(self.api.get_with_accept(
                &url,
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ))?
            else {
                break;
            };
            for item in list
                .get_path(&["items"])
                .and_then(Value::as_list)
                .unwrap_or(&[])
            {
                let obj_ref = ObjectRef {
                    group: group.to_string(),
                    kind: r.kind.clone(),
                    namespace: item
                        .str_at(&["metadata", "namespace"])
                        .unwrap_or("")
                        .to_string(),
                    name: item.str_at(&["metadata", "name"]).unwrap_or("").to_string(),
                };
                out.push((obj_ref, item.clone()));
            }
            cont = list
                .str_at(&["metadata", "continue"])
                .unwrap_or("")
                .to_string();
            if cont.is_empty() {
                break;
            }
        }
        Ok(out)
    }
}

impl Api {
    /// Resolves the kubeconfig like kubectl; returns the API and the context's namespace.
    pub async fn connect(opts: &ClusterOptions) -> Result<(Api, String), ClusterError> {
        let kc_opts = KubeConfigOptions {
            context: opts.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&opts.kubeconfig, &opts.context) {
            (Some(path), _) => {
                // kube's errors name the file already.
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| ClusterError::new(format!("--kubeconfig: {e}")))?;
                kube::Config::from_custom_kubeconfig(kc, &kc_opts)
                    .await
                    .map_err(|e| ClusterError::new(format!("kubeconfig {}: {e}", path.display())))?
            }
            (None, Some(_)) => kube::Config::from_kubeconfig(&kc_opts)
                .await
                .map_err(|e| ClusterError::new(format!("kubeconfig: {e}")))?,
            (None, None) => kube::Config::infer()
                .await
                .map_err(|e| ClusterError::new(format!("no cluster configured: {e}")))?,
        };
        let url = config.cluster_url.to_string();
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config)
            .map_err(|e| ClusterError::new(format!("cluster {url}: {e}")))?;
        Ok((
            Api {
                client,
                url,
                impersonate: None,
            },
            namespace,
        ))
    }

    /// See [`Cluster::catalog_for`].
    pub async fn catalog_for(
        &self,
        api_versions: &BTreeSet<String>,
    ) -> Result<Catalog, ClusterError> {
        let mut catalog = Catalog::kubernetes(DEFAULT_KUBERNETES)
            .map_err(|e| ClusterError::new(format!("built-in schemas: {e}")))?;
        let index = self.openapi_index().await?;
        for av in api_versions {
            if let Some(t) = self.gv_types(&index, av).await? {
                t.add_to(&mut catalog);
            }
        }
        Ok(catalog)
    }

    /// The `/openapi/v3` index (absent on clusters that do not publish v3).
    pub async fn openapi_index(&self) -> Result<Option<Value>, ClusterError> {
        self.get_json("/openapi/v3").await
    }

    /// What the cluster says about one group-version: discovery and its OpenAPI v3 schema.
    /// `None` if the group-version is not served.
    pub async fn gv_types(
        &self,
        index: &Option<Value>,
        api_version: &str,
    ) -> Result<Option<GvTypes>, ClusterError> {
        let base = if api_version.contains('/') {
            format!("apis/{api_version}")
        } else {
            format!("api/{api_version}")
        };
        let Some(resources) = self.get_json(&format!("/{base}")).await? else {
            return Ok(None);
        };
        let mut t = GvTypes {
            discovered: discovered(api_version, &resources),
            schema: None,
            validations: Vec::new(),
        };
        let doc_url = index
            .as_ref()
            .and_then(|i| i.str_at(&["paths", &base, "serverRelativeURL"]))
            .map(str::to_string);
        if let Some(u) = doc_url
            && let Some(doc) = self.get_json(&u).await?
        {
            let schema = openapi_v3::from_value(&doc)
                .map_err(|e| ClusterError::new(format!("cluster {}: {u}: {e}", self.url)))?;
            t.validations = custom_resource_schemas(&doc);
            t.schema = Some(Arc::new(schema));
        }
        Ok(Some(t))
    }

    /// See [`Cluster::resources`].
    pub async fn resources(&self) -> Result<Vec<ServedResource>, ClusterError> {
        let mut versions = vec!["v1".to_string()];
        if let Some(groups) = self.get_json("/apis").await? {
            for g in groups
                .get_path(&["groups"])
                .and_then(Value::as_list)
                .unwrap_or(&[])
            {
                if let Some(gv) = g.str_at(&["preferredVersion", "groupVersion"]) {
                    versions.push(gv.to_string());
                }
            }
        }
        let mut out = Vec::new();
        for av in versions {
            let base = if av.contains('/') {
                format!("/apis/{av}")
            } else {
                format!("/api/{av}")
            };
            let Some(list) = self.get_json(&base).await? else {
                continue;
            };
            for r in list
                .get_path(&["resources"])
                .and_then(Value::as_list)
                .unwrap_or(&[])
            {
                let (Some(name), Some(kind)) = (r.str_at(&["name"]), r.str_at(&["kind"])) else {
                    continue;
                };
                if name.contains('/') {
                    continue;
                }
                let strings = |k: &str| -> Vec<String> {
                    r.get_path(&[k])
                        .and_then(Value::as_list)
                        .unwrap_or(&[])
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                };
                out.push(ServedResource {
                    api_version: av.clone(),
                    kind: kind.to_string(),
                    plural: name.to_string(),
                    singular: r.str_at(&["singularName"]).unwrap_or("").to_string(),
                    short_names: strings("shortNames"),
                    namespaced: matches!(r.get_path(&["namespaced"]), Some(Value::Bool(true))),
                    listable: strings("verbs").iter().any(|v| v == "list"),
                });
            }
        }
        Ok(out)
    }

    /// The client (for requests this module does not wrap).
    /// The same API, every request made as `user` in `groups` (the apiserver checks the
    /// caller's own permissions; this client's account needs only `impersonate`).
    pub fn impersonating(&self, user: &str, groups: &[String]) -> Api {
        Api {
            impersonate: Some(Arc::new((user.to_string(), groups.to_vec()))),
            ..self.clone()
        }
    }

    /// Who requests are made as, when impersonating.
    pub fn impersonated(&self) -> Option<&str> {
        self.impersonate.as_ref().map(|i| i.0.as_str())
    }

    /// Adds the impersonation headers to a request being built.
    pub fn with_identity(&self, mut b: http::request::Builder) -> http::request::Builder {
        if let Some(i) = &self.impersonate {
            b = b.header("Impersonate-User", i.0.as_str());
            for g in &i.1 {
                b = b.header("Impersonate-Group", g.as_str());
            }
        }
        b
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The apiserver's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// GETs the objects (concurrently); those that do not exist are absent from the result.
    pub async fn fetch(&self, items: &[FetchItem]) -> Result<Fetched, ClusterError> {
        let results: Vec<(ObjectRef, Option<Value>)> =
            futures::stream::iter(items.iter().cloned().map(|it| async move {
                let v = self.get_json(&object_path(&it)).await?;
                Ok::<_, ClusterError>((it.object_ref, v))
            }))
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        let mut f = Fetched {
            source: format!("cluster {}", self.url),
            ..Fetched::default()
        };
        for (r, v) in results {
            if let Some(v) = v {
                f.objects.insert(r, v);
            }
        }
        Ok(f)
    }

    /// GETs JSON at `path`; `None` on 404.
    pub async fn get_json(&self, path: &str) -> Result<Option<Value>, ClusterError> {
        self.get_with_accept(path, "application/json").await
    }

    /// Opens a streaming GET (a watch): lines of JSON events. Any error status is an error.
    pub async fn stream(
        &self,
        path: &str,
        accept: &str,
    ) -> Result<impl futures::AsyncBufRead + use<>, ClusterError> {
        let req = self
            .with_identity(http::Request::get(path))
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| ClusterError::new(format!("{path}: {e}")))?;
        self.client.request_stream(req).await.map_err(|e| match e {
            kube::Error::Api(s) => ClusterError::status(
                format!(
                    "cluster {}: GET {path}: {} ({})",
                    self.url, s.message, s.code
                ),
                s.code,
            ),
            e => ClusterError::new(format!("cluster {} unreachable: GET {path}: {e}", self.url)),
        })
    }

    /// GETs with an Accept header; `None` on 404.
    pub async fn get_with_accept(
        &self,
        path: &str,
        accept: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let Some(text) = self.get_text(path, accept).await? else {
            return Ok(None);
        };
        // Objects are bounded by the apiserver; schema documents are larger (a few MiB).
        json::parse_limited(text.as_bytes(), 16 * MAX_DOCUMENT_BYTES)
            .map(Some)
            .map_err(|e| ClusterError::new(format!("cluster {}: GET {path}: {e}", self.url)))
    }

    /// GETs the text at `path`; `None` on 404.
    pub async fn get_text(&self, path: &str, accept: &str) -> Result<Option<String>, ClusterError> {
        let req = self
            .with_identity(http::Request::get(path))
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| ClusterError::new(format!("{path}: {e}")))?;
        self.send(path, req).await
    }

    /// Any write (`POST`, `PUT`, `PATCH` of a content type, `DELETE`): the answer's text, the
    /// apiserver's refusal as `Err(Ok(status))`, a transport problem as `Err(Err(..))`.
    pub async fn write(
        &self,
        method: http::Method,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<String, Result<kube::core::Status, ClusterError>> {
        let req = self
            .with_identity(http::Request::builder())
            .method(method.clone())
            .uri(url)
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::ACCEPT, "application/json")
            .body(body)
            .map_err(|e| Err(ClusterError::new(format!("{url}: {e}"))))?;
        // kube-apiserver gives a request 60 s (admission webhooks included); a write that
        // outlasts that is not coming back.
        let res = tokio::time::timeout(WRITE_TIMEOUT, self.client().request_text(req)).await;
        match res {
            Err(_) => Err(Err(ClusterError::new(format!(
                "cluster {}: {method} {url}: no answer within {}s",
                self.url(),
                WRITE_TIMEOUT.as_secs()
            )))),
            Ok(Ok(t)) => Ok(t),
            Ok(Err(kube::Error::Api(s))) => Err(Ok(*s)),
            Ok(Err(e)) => Err(Err(ClusterError::new(format!(
                "cluster {} unreachable: {method} {url}: {e}",
                self.url()
            )))),
        }
    }

    /// Sends a GET; `None` on 404; errors name the cluster and the path.
    async fn send(
        &self,
        path: &str,
        req: http::Request<Vec<u8>>,
    ) -> Result<Option<String>, ClusterError> {
        let res = tokio::time::timeout(REQUEST_TIMEOUT, self.client.request_text(req)).await;
        let text = match res {
            Err(_) => {
                return Err(ClusterError::new(format!(
                    "cluster {}: GET {path}: no answer within {}s",
                    self.url,
                    REQUEST_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => return Ok(None),
            Ok(Err(kube::Error::Api(s))) => {
                return Err(ClusterError::status(
                    format!(
                        "cluster {}: GET {path}: {} ({})",
                        self.url, s.message, s.code
                    ),
                    s.code,
                ));
            }
            Ok(Err(e)) => {
                return Err(ClusterError::new(format!(
                    "cluster {} unreachable: GET {path}: {e}",
                    self.url
                )));
            }
            Ok(Ok(t)) => t,
        };
        Ok(Some(text))
    }
}

/// Characters a path segment or query value keeps as they are (RFC 3986 unreserved); every
/// other byte is percent-escaped, so a name can never add a segment, a query or a fragment.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` escaped for a URL path segment or query value.
pub fn percent_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}
