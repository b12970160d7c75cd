//! Who is calling, and what they may see.
//!
//! Authentication: a client certificate (mTLS; the subject's CN is the user, its O entries the
//! groups, as Kubernetes reads them), or a bearer token verified with the cluster's TokenReview
//! API (with the configured audiences; results cached briefly, keyed by the token's SHA-256).
//! Both caches are bounded (entries and time to live); concurrent lookups of one token send one
//! review; tokens not in the cache cost their peer (IP address) from a token bucket, so a flood
//! of random tokens keeps memory flat and the apiserver's load bounded (RESOURCE_EXHAUSTED).
//! Callers without credentials are refused unless anonymous access is enabled; anonymous callers
//! read what `system:anonymous` may read and never apply. With no authentication configured at
//! all (a local snapshot service), every caller reads everything and nobody applies.
//!
//! Authorization: reads return only objects the caller may `get`, decided by the cluster's
//! SubjectAccessReview API (cached briefly; a namespace-wide allow covers every name). Writes are
//! made by impersonating the caller, so the apiserver applies the caller's own permissions.

use crate::live::ObjectRef;
use crate::live::api::Api;
use crate::value::{Value, json};
use moka::future::Cache;
use sha2::Digest;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::{Code, Status};

/// How callers are authenticated.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// Verify bearer tokens with TokenReview.
    pub token_review: bool,
    /// Audiences the tokens must be for (empty: the apiserver's default).
    pub audiences: Vec<String>,
    /// Accept client certificates (the TLS layer verified them against the client CA).
    pub mtls: bool,
    /// Let callers without credentials read (as `system:anonymous`).
    pub anonymous: bool,
    /// How long TokenReview and SubjectAccessReview answers are reused.
    pub cache_ttl: Duration,
    /// At most this many answers of each kind are kept (the least used go first).
    pub cache_entries: u64,
    /// TokenReviews one peer (IP address) may cause: a bucket of `review_burst`, refilled at
    /// `reviews_per_second` (cached tokens cost nothing).
    pub reviews_per_second: f64,
    pub review_burst: f64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            token_review: false,
            audiences: vec![],
            mtls: false,
            anonymous: false,
            cache_ttl: Duration::from_secs(30),
            cache_entries: 10_000,
            reviews_per_second: 5.0,
            review_burst: 20.0,
        }
    }
}

/// Peers whose review budget is tracked (the least recent are forgotten: a forgotten peer
/// starts with a full bucket).
const PEERS: u64 = 10_000;

/// A peer's review budget.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub user: String,
    pub groups: Vec<String>,
    /// `mtls`, `token`, `anonymous`, `open` (no authentication configured).
    pub via: &'static str,
}

impl Caller {
    /// May this caller apply? (Authenticated, not anonymous.)
    pub fn may_write(&self) -> bool {
        matches!(self.via, "mtls" | "token")
    }
    fn open() -> Caller {
        Caller {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            via: "open",
        }
    }
    fn anonymous() -> Caller {
        Caller {
            via: "anonymous",
            ..Caller::open()
        }
    }
}

/// Authentication and authorization for the service.
pub struct Auth {
    config: AuthConfig,
    /// The cluster whose TokenReview and SubjectAccessReview APIs decide (None: a snapshot).
    api: Option<Api>,
    tokens: Cache<[u8; 32], Result<Caller, String>>,
    decisions: Cache<String, bool>,
    peers: Cache<IpAddr, Arc<Mutex<Bucket>>>,
}

fn unauthenticated(msg: &str) -> Status {
    super::error(Code::Unauthenticated, "UNAUTHENTICATED", msg, &[])
}

impl Auth {
    /// No authentication: every caller reads everything, nobody applies.
    pub fn open() -> Auth {
        Auth::new(AuthConfig::default(), None)
    }

    pub fn new(config: AuthConfig, api: Option<Api>) -> Auth {
        Auth {
            tokens: Cache::builder()
                .max_capacity(config.cache_entries)
                .time_to_live(config.cache_ttl)
                .build(),
            decisions: Cache::builder()
                .max_capacity(config.cache_entries)
                .time_to_live(config.cache_ttl)
                .build(),
            peers: Cache::builder()
                .max_capacity(PEERS)
                .time_to_idle(Duration::from_secs(600))
                .build(),
            config,
            api,
        }
    }

    /// Cached token answers and authorization decisions now (for tests and benchmarks).
    pub async fn cached(&self) -> (u64, u64) {
        self.tokens.run_pending_tasks().await;
        self.decisions.run_pending_tasks().await;
        (self.tokens.entry_count(), self.decisions.entry_count())
    }

    /// Takes one review from `peer`'s budget (false: none left).
    async fn spend(&self, peer: Option<IpAddr>) -> bool {
        let Some(peer) = peer else { return true };
        let burst = self.config.review_burst;
        let bucket = self
            .peers
            .get_with(peer, async {
                Arc::new(Mutex::new(Bucket {
                    tokens: burst,
                    at: Instant::now(),
                }))
            })
            .await;
        let mut b = bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(b.at).as_secs_f64() * self.config.reviews_per_second;
        b.tokens = (b.tokens + refill).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// True when no authentication is configured.
    pub fn is_open(&self) -> bool {
        !self.config.token_review && !self.config.mtls
    }

    /// Who sent `req`.
    #[allow(clippy::result_large_err)]
    pub async fn authenticate<T>(&self, req: &tonic::Request<T>) -> Result<Caller, Status> {
        if self.config.mtls
            && let Some(certs) = req.peer_certs()
            && let Some(cert) = certs.first()
        {
            return caller_of_cert(cert.as_ref())
                .ok_or_else(|| unauthenticated("the client certificate names no user (CN)"));
        }
        let bearer = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        if let Some(token) = bearer {
            if !self.config.token_review {
                return Err(unauthenticated(
                    "bearer tokens are not accepted by this service",
                ));
            }
            return self
                .review_token(token, req.remote_addr().map(|a| a.ip()))
                .await;
        }
        if self.is_open() {
            Ok(Caller::open())
        } else if self.config.anonymous {
            Ok(Caller::anonymous())
        } else {
            Err(unauthenticated(
                "credentials required: a client certificate or a bearer token",
            ))
        }
    }

    #[allow(clippy::result_large_err)]
    async fn review_token(&self, token: &str, peer: Option<IpAddr>) -> Result<Caller, Status> {
        let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.tokens.get(&key).await {
            return hit.map_err(|e| unauthenticated(&e));
        }
        if !self.spend(peer).await {
            crate::telemetry::metrics::global()
                .token_reviews_refused
                .inc();
            return Err(super::error(
                Code::ResourceExhausted,
                "TOO_MANY_TOKEN_REVIEWS",
                "too many unknown bearer tokens from this address; try again later",
                &[],
            ));
        }
        // Concurrent requests with one token wait for one review; a review that could not be
        // made (the apiserver unreachable) is not remembered.
        match self.tokens.try_get_with(key, self.send_review(token)).await {
            Ok(answer) => answer.map_err(|e| unauthenticated(&e)),
            Err(failed) => Err(unauthenticated(&failed)),
        }
    }

    /// The apiserver's answer about a token (`Err`: no answer).
    async fn send_review(&self, token: &str) -> Result<Result<Caller, String>, String> {
        let api = self
            .api
            .as_ref()
            .ok_or("this service has no cluster to review tokens with")?;
        let mut spec = format!("{{\"token\":{}", quote(token));
        if !self.config.audiences.is_empty() {
            let a: Vec<String> = self.config.audiences.iter().map(|a| quote(a)).collect();
            spec.push_str(&format!(",\"audiences\":[{}]", a.join(",")));
        }
        spec.push('}');
        let body = format!(
            r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{spec}}}"#
        );
        let answer = api
            .write(
                http::Method::POST,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                "application/json",
                body.into_bytes(),
            )
            .await
            .map_err(|e| match e {
                Ok(s) => format!("token review failed: {} ({})", s.message, s.code),
                Err(c) => format!("token review failed: {c}"),
            })?;
        let v = json::parse(answer.as_bytes()).map_err(|e| format!("token review: {e}"))?;
        crate::telemetry::metrics::global().token_reviews.inc();
        Ok(
            if v.get_path(&["status", "authenticated"]) == Some(&Value::Bool(true)) {
                Ok(Caller {
                    user: v
                        .str_at(&["status", "user", "username"])
                        .unwrap_or("")
                        .to_string(),
                    groups: v
                        .get_path(&["status", "user", "groups"])
                        .and_then(Value::as_list)
                        .unwrap_or(&[])
                        .iter()
                        .filter_map(|g| g.as_str().map(str::to_string))
                        .collect(),
                    via: "token",
                })
            } else {
                Err(format!(
                    "the token was rejected{}",
                    v.str_at(&["status", "error"])
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ))
            },
        )
    }

    /// May `caller` get the object (the resource is its plural)? Open services allow all.
    /// True when the caller may read every object without asking (open mode; a store with no
    /// cluster to ask, for authenticated callers).
    pub fn reads_everything(&self, caller: &Caller) -> bool {
        caller.via == "open" || (self.api.is_none() && caller.via != "anonymous")
    }

    pub async fn can_get(&self, caller: &Caller, r: &ObjectRef, resource: &str) -> bool {
        if caller.via == "open" {
            return true;
        }
        let Some(api) = &self.api else {
            return caller.via != "anonymous";
        };
        for name in ["", r.name.as_str()] {
            let key = format!(
                "{}\u{0}{}\u{0}{}\u{0}{resource}\u{0}{}\u{0}{name}",
                caller.user,
                caller.groups.join(","),
                r.group,
                r.namespace
            );
            // A review that failed denies, and is asked again next time.
            let allowed = self
                .decisions
                .try_get_with(
                    key,
                    sar(api, caller, &r.group, resource, &r.namespace, name),
                )
                .await
                .unwrap_or(false);
            if allowed {
                return true;
            }
        }
        false
    }
}

fn quote(s: &str) -> String {
    json::to_string(&Value::from(s), json::Style::PLAIN)
}

/// One SubjectAccessReview: may the caller `get` this resource (name "": any name)?
async fn sar(
    api: &Api,
    caller: &Caller,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<bool, String> {
    let groups: Vec<String> = caller.groups.iter().map(|g| quote(g)).collect();
    let body = format!(
        r#"{{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{{"user":{},"groups":[{}],"resourceAttributes":{{"verb":"get","group":{},"resource":{},"namespace":{},"name":{}}}}}}}"#,
        quote(&caller.user),
        groups.join(","),
        quote(group),
        quote(resource),
        quote(namespace),
        quote(name)
    );
    match api
        .write(
            http::Method::POST,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "application/json",
            body.into_bytes(),
        )
        .await
    {
        Ok(text) => Ok(json::parse(text.as_bytes())
            .ok()
            .and_then(|v| match v.get_path(&["status", "allowed"]) {
                Some(Value::Bool(b)) => Some(*b),
                _ => None,
            })
            .unwrap_or(false)),
        Err(e) => {
            let e = match e {
                Ok(s) => format!("{} ({})", s.message, s.code),
                Err(c) => c.to_string(),
            };
            tracing::warn!(error = %e, "subject access review failed; denying");
            Err(e)
        }
    }
}

/// The user (CN) and groups (O) of a client certificate.
fn caller_of_cert(der: &[u8]) -> Option<Caller> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(Caller {
        user,
        groups,
        via: "mtls",
    })
}
