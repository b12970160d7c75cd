//! The apiserver's HTTP API as fieldguard uses it: the kubeconfig resolved like kubectl
//! (`--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
//! account; `--context` picks a context), GETs with `None` for 404, paged metadata lists, watch
//! streams and writes, every one bounded by a timeout and every answer by what it can hold
//! ([`super::answers`]); errors typed with the apiserver's status code and reason.

use super::ObjectRef;
use super::answers::{self, Bound};
use super::discovery::ServedResource;
use crate::value::{MAX_DOCUMENT_BYTES, Value, json};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Bound on any one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a write may take (kube-apiserver's own request timeout is 60 s).
const WRITE_TIMEOUT: Duration = Duration::from_secs(70);
/// The most a JSON answer may hold to be parsed: objects are bounded by the apiserver; schema
/// documents are larger (a few MiB, tens in clusters of many CRDs).
const PARSED_BYTES: u64 = 16 * MAX_DOCUMENT_BYTES as u64;

/// Which cluster, as kubectl's flags name it.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// The cluster could not be reached, would not answer, or refused: the apiserver's own
/// status (code and reason) when it answered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ClusterError {
    pub message: String,
    /// The apiserver's HTTP status, when it answered (404, 410 Gone, 403, ...).
    pub code: Option<u16>,
    /// The reason of the apiserver's `Status` (`Forbidden`, `Expired`, `NotFound`, ...).
    pub reason: Option<String>,
}

impl ClusterError {
    /// No answer (or no status) from the apiserver.
    pub fn new(message: impl Into<String>) -> ClusterError {
        ClusterError {
            message: message.into(),
            code: None,
            reason: None,
        }
    }

    /// The apiserver answered with `code` (no `Status` body to read a reason from).
    pub fn status(message: impl Into<String>, code: u16) -> ClusterError {
        ClusterError {
            message: message.into(),
            code: Some(code),
            reason: None,
        }
    }

    /// The apiserver refused with this `Status`.
    pub fn answered(message: impl Into<String>, s: &kube::core::Status) -> ClusterError {
        ClusterError {
            message: message.into(),
            code: Some(s.code),
            reason: Some(s.reason.clone()).filter(|r| !r.is_empty()),
        }
    }

    /// The object or collection is gone (410: a resourceVersion too old to watch from).
    pub fn is_gone(&self) -> bool {
        self.code == Some(410)
    }

    /// Not served (404).
    pub fn is_not_found(&self) -> bool {
        self.code == Some(404)
    }
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

    /// The metadata (with managedFields) of every object of a resource, in all namespaces or
    /// one, page by page. Items are keyed by their reference.
    pub async fn list_metadata(
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
            let Some(list) = self
                .get_with_accept(
                    &url,
                    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                )
                .await?
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

    /// GETs JSON at `path`; `None` on 404.
    pub async fn get_json(&self, path: &str) -> Result<Option<Value>, ClusterError> {
        self.get_with_accept(path, "application/json").await
    }

    /// Opens a streaming GET (a watch): lines of JSON events, each at most
    /// [`answers::EVENT_BYTES`] (a longer one ends the stream with an error). Any error status
    /// is an error.
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
        let res = self
            .answer(req)
            .await
            .map_err(|e| self.get_failed(path, e))?;
        let what = format!("cluster {}: GET {}", self.url, shown(path));
        Ok(answers::lines_bounded(res, what))
    }

    /// GETs with an Accept header; `None` on 404.
    pub async fn get_with_accept(
        &self,
        path: &str,
        accept: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let parsed = Bound {
            bytes: PARSED_BYTES,
            what: "an answer fieldguard parses".into(),
        };
        let bound = Bound::of_get(path).min(parsed);
        let Some(text) = self.get_bounded(path, accept, &bound).await? else {
            return Ok(None);
        };
        // What some endpoints answer for what they do not have (an OpenAPI v3 document of a
        // group-version no longer published: `200` with nothing).
        if text.trim().is_empty() {
            return Err(ClusterError::new(format!(
                "cluster {}: GET {path}: an empty answer (no such document)",
                self.url
            )));
        }
        json::parse_limited(text.as_bytes(), PARSED_BYTES as usize)
            .map(Some)
            .map_err(|e| ClusterError::new(format!("cluster {}: GET {path}: {e}", self.url)))
    }

    /// GETs the text at `path`; `None` on 404. The answer is read up to what the path can
    /// return ([`Bound::of_get`]).
    pub async fn get_text(&self, path: &str, accept: &str) -> Result<Option<String>, ClusterError> {
        self.get_bounded(path, accept, &Bound::of_get(path)).await
    }

    /// [`Api::get_text`] reading at most `bound`.
    async fn get_bounded(
        &self,
        path: &str,
        accept: &str,
        bound: &Bound,
    ) -> Result<Option<String>, ClusterError> {
        let req = self
            .with_identity(http::Request::get(path))
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| ClusterError::new(format!("{path}: {e}")))?;
        let text = async {
            let res = self.answer(req).await?;
            text_of(answers::read(res, bound).await?)
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, text).await {
            Err(_) => Err(ClusterError::new(format!(
                "cluster {}: GET {path}: no answer within {}s",
                self.url,
                REQUEST_TIMEOUT.as_secs()
            ))),
            Ok(Err(Failed::Status(s))) if s.code == 404 => Ok(None),
            Ok(Err(e)) => Err(self.get_failed(path, e)),
            Ok(Ok(t)) => Ok(Some(t)),
        }
    }

    /// What a failed GET of `path` is.
    fn get_failed(&self, path: &str, e: Failed) -> ClusterError {
        match e {
            Failed::Status(s) => ClusterError::answered(
                format!(
                    "cluster {}: GET {path}: {} ({})",
                    self.url, s.message, s.code
                ),
                &s,
            ),
            Failed::TooLarge(why) => {
                ClusterError::new(format!("cluster {}: GET {}: {why}", self.url, shown(path)))
            }
            Failed::Transport(e) => {
                ClusterError::new(format!("cluster {} unreachable: GET {path}: {e}", self.url))
            }
        }
    }

    /// Any write (`POST`, `PUT`, `PATCH` of a content type, `DELETE`): the answer's text, the
    /// apiserver's refusal as `Err(Ok(status))`, a transport problem (or an answer larger than
    /// an object) as `Err(Err(..))`.
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
        let text = async {
            let res = self.answer(req).await?;
            text_of(answers::read(res, &Bound::object()).await?)
        };
        match tokio::time::timeout(WRITE_TIMEOUT, text).await {
            Err(_) => Err(Err(ClusterError::new(format!(
                "cluster {}: {method} {url}: no answer within {}s",
                self.url(),
                WRITE_TIMEOUT.as_secs()
            )))),
            Ok(Ok(t)) => Ok(t),
            Ok(Err(Failed::Status(s))) => Err(Ok(*s)),
            Ok(Err(Failed::TooLarge(why))) => Err(Err(ClusterError::new(format!(
                "cluster {}: {method} {}: {why}",
                self.url(),
                shown(url)
            )))),
            Ok(Err(Failed::Transport(e))) => Err(Err(ClusterError::new(format!(
                "cluster {} unreachable: {method} {url}: {e}",
                self.url()
            )))),
        }
    }

    /// Sends a request: the answer, its body unread, when its status is a success; the
    /// apiserver's `Status` (read within [`Bound::object`]) when it is an error.
    async fn answer(
        &self,
        req: http::Request<Vec<u8>>,
    ) -> Result<http::Response<kube::client::Body>, Failed> {
        let res = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(Failed::Transport)?;
        let code = res.status();
        if !(code.is_client_error() || code.is_server_error()) {
            return Ok(res);
        }
        let text = answers::read(res, &Bound::object()).await?;
        // Not every error is a `Status` (a proxy's page, a path nothing serves): the text then
        // says it, with the HTTP code (as kube's client does).
        let status = match serde_json::from_slice::<kube::core::Status>(&text) {
            Ok(s) if s.code != 0 => s,
            Ok(s) => s.with_code(code.as_u16()),
            Err(_) => {
                let text = String::from_utf8_lossy(&text);
                kube::core::Status::failure(text.trim(), "Failed to parse error data")
                    .with_code(code.as_u16())
            }
        };
        Err(Failed::Status(Box::new(status)))
    }
}

/// Why a request failed.
enum Failed {
    /// The apiserver refused, with this `Status`.
    Status(Box<kube::core::Status>),
    /// The answer passed its bound (the message says which).
    TooLarge(String),
    /// No answer, or the connection failed.
    Transport(kube::Error),
}

impl From<answers::BodyError> for Failed {
    fn from(e: answers::BodyError) -> Failed {
        match e {
            answers::BodyError::TooLarge(why) => Failed::TooLarge(why),
            answers::BodyError::Transport(e) => Failed::Transport(e),
        }
    }
}

/// An answer's text (JSON, or a log: UTF-8).
fn text_of(bytes: Vec<u8>) -> Result<String, Failed> {
    String::from_utf8(bytes).map_err(|e| Failed::Transport(kube::Error::FromUtf8(e)))
}

/// A request path as refusals name it: without its query (continue tokens, selectors).
fn shown(path: &str) -> &str {
    path.split_once('?').map_or(path, |(p, _)| p)
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
