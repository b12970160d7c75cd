//! Releases: their revision records and Helm 4's rules (HIP-0023) for choosing between
//! server-side and client-side apply.
//!
//! Two kinds of records are read: Helm 3/4's (Secrets `sh.helm.release.v1.<name>.v<N>`, base64 of
//! gzip'd JSON, with `apply_method` since Helm 4; never written) and fieldguard's own (Secrets
//! `fieldguard.release.v1.<name>.v<N>`, one per revision: manifest, method, field manager,
//! status, timestamps, per-object results).

use crate::value::{Map, Value, json};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use std::io::{Read, Write};

/// How objects are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Server-side apply (`PATCH application/apply-patch+yaml`).
    Ssa,
    /// Client-side apply (three-way patches and the last-applied annotation).
    Csa,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Ssa => "ssa",
            Method::Csa => "csa",
        }
    }
    fn parse(s: &str) -> Option<Method> {
        match s {
            "ssa" => Some(Method::Ssa),
            "csa" => Some(Method::Csa),
            _ => None,
        }
    }
}

/// `--server-side=true|false|auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerSide {
    True,
    False,
    Auto,
}

/// What the run does to the release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Install,
    Upgrade,
    /// Back to the manifest of this revision.
    Rollback(u32),
}

/// Where a revision record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Helm,
    Fieldguard,
}

/// One revision of a release.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub name: String,
    pub namespace: String,
    pub revision: u32,
    /// The recorded apply method (`None`: not recorded, i.e. client-side for Helm 3).
    pub method: Option<Method>,
    pub field_manager: String,
    /// `deployed`, `failed`, `superseded`, `pending-install`, ...
    pub status: String,
    #[serde(skip)]
    pub manifest: String,
    pub started: String,
    pub finished: String,
    pub source: Source,
    /// Per-object results (kind, namespace/name, result), fieldguard records only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ObjectResult>,
    /// The hooks this revision ran, with their last run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<super::hooks::HookRun>,
}

/// The outcome for one object, as recorded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ObjectResult {
    pub object: String,
    pub result: String,
}

/// Why records cannot be used, or why a run is refused before anything is sent.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ReleaseError(pub String);

/// Secret name of fieldguard's record of a revision.
pub fn record_name(release: &str, revision: u32) -> String {
    format!("fieldguard.release.v1.{release}.v{revision}")
}

/// Label selector of fieldguard's records of a release.
pub fn own_selector(release: &str) -> String {
    format!("fieldguard.dev/release={release}")
}

/// Label selector of Helm's records of a release.
pub fn helm_selector(release: &str) -> String {
    format!("owner=helm,name={release}")
}

fn gunzip_if(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    if bytes.starts_with(&[0x1f, 0x8b, 0x08]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .take(64 << 20)
            .read_to_end(&mut out)
            .map_err(|e| format!("corrupt gzip: {e}"))?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

fn secret_data(secret: &Value, key: &str) -> Result<Vec<u8>, String> {
    let wire = secret
        .str_at(&["data", key])
        .ok_or_else(|| format!("no data.{key}"))?;
    B64.decode(wire.trim())
        .map_err(|e| format!("data.{key} is not base64: {e}"))
}

/// Reads a Helm release Secret (`sh.helm.release.v1.<name>.v<N>`).
pub fn decode_helm(secret: &Value) -> Result<Revision, String> {
    decode_helm_body(&secret_data(secret, "release")?)
}

/// Reads a Helm release body: base64 of gzip'd JSON, as the SQL driver's `body` column and a
/// ConfigMap's `data.release` hold it (a Secret base64-encodes it once more).
pub fn decode_helm_body(inner: &[u8]) -> Result<Revision, String> {
    let packed = B64
        .decode(inner.trim_ascii())
        .map_err(|e| format!("release is not base64: {e}"))?;
    let text = gunzip_if(packed)?;
    let rel = json::parse(&text).map_err(|e| format!("release JSON: {e}"))?;
    let s = |p: &[&str]| rel.str_at(p).unwrap_or("").to_string();
    // Helm keeps hooks apart from the manifest; a rollback runs the target revision's hooks,
    // so they are read back into it (they carry their `helm.sh/hook` annotation).
    let mut manifest = s(&["manifest"]);
    for h in rel
        .get_path(&["hooks"])
        .and_then(Value::as_list)
        .unwrap_or(&[])
    {
        if let Some(m) = h.str_at(&["manifest"]) {
            manifest.push_str("\n---\n");
            manifest.push_str(m);
            manifest.push('\n');
        }
    }
    let revision = match rel.get_path(&["version"]) {
        Some(Value::Int(v)) if *v > 0 && *v <= u32::MAX as i64 => *v as u32,
        _ => return Err("release without a version".into()),
    };
    Ok(Revision {
        name: s(&["name"]),
        namespace: s(&["namespace"]),
        revision,
        method: rel.str_at(&["apply_method"]).and_then(Method::parse),
        field_manager: "helm".into(),
        status: s(&["info", "status"]),
        manifest,
        started: s(&["info", "first_deployed"]),
        finished: s(&["info", "last_deployed"]),
        source: Source::Helm,
        results: vec![],
        hooks: vec![],
    })
}

/// Reads one of fieldguard's record Secrets.
pub fn decode_own(secret: &Value) -> Result<Revision, String> {
    decode_own_body(secret_data(secret, "release")?)
}

/// Reads the body of one of fieldguard's records (gzip'd JSON).
pub fn decode_own_body(packed: Vec<u8>) -> Result<Revision, String> {
    let text = gunzip_if(packed)?;
    let rel = json::parse(&text).map_err(|e| format!("record JSON: {e}"))?;
    let s = |k: &str| rel.str_at(&[k]).unwrap_or("").to_string();
    let revision = match rel.get_path(&["revision"]) {
        Some(Value::Int(v)) if *v > 0 && *v <= u32::MAX as i64 => *v as u32,
        _ => return Err("record without a revision".into()),
    };
    let results = rel
        .get_path(&["results"])
        .and_then(Value::as_list)
        .unwrap_or(&[])
        .iter()
        .map(|r| ObjectResult {
            object: r.str_at(&["object"]).unwrap_or("").into(),
            result: r.str_at(&["result"]).unwrap_or("").into(),
        })
        .collect();
    let hooks = rel
        .get_path(&["hooks"])
        .and_then(Value::as_list)
        .unwrap_or(&[])
        .iter()
        .map(|h| {
            let f = |k: &str| h.str_at(&[k]).unwrap_or("").to_string();
            super::hooks::HookRun {
                object: f("object"),
                event: f("event"),
                phase: f("phase"),
                started: f("started"),
                completed: f("completed"),
            }
        })
        .collect();
    Ok(Revision {
        name: s("name"),
        namespace: s("namespace"),
        revision,
        method: Method::parse(&s("method")),
        field_manager: s("fieldManager"),
        status: s("status"),
        manifest: s("manifest"),
        started: s("started"),
        finished: s("finished"),
        source: Source::Fieldguard,
        results,
        hooks,
    })
}

/// The Secret that records `rev` (fieldguard's own format).
pub fn encode_own(rev: &Revision) -> Value {
    own_record(rev, "Secret", &format!(r#","type":"{RECORD_TYPE}""#))
}

/// The ConfigMap that records `rev` (`HELM_DRIVER=configmap`): the same body, as text.
pub fn encode_own_configmap(rev: &Revision) -> Value {
    own_record(rev, "ConfigMap", "")
}

/// A record object of `kind`: `data.release` is the body base64-encoded (a Secret's bytes are
/// the gzip'd JSON; a ConfigMap holds the same base64 text).
fn own_record(rev: &Revision, kind: &str, extra: &str) -> Value {
    let record = format!(
        r#"{{"apiVersion":"v1","kind":"{kind}"{extra},
        "metadata":{{"name":{name},"namespace":{ns},"labels":{labels}}},
        "data":{{"release":"{data}"}}}}"#,
        name = quote(&record_name(&rev.name, rev.revision)),
        ns = quote(&rev.namespace),
        labels = own_labels(rev),
        data = B64.encode(own_body(rev)),
    );
    json::parse(record.as_bytes()).unwrap_or(Value::Null)
}

/// Reads one of fieldguard's record ConfigMaps.
pub fn decode_own_configmap(cm: &Value) -> Result<Revision, String> {
    let text = cm.str_at(&["data", "release"]).ok_or("no data.release")?;
    decode_own_body(
        B64.decode(text.trim())
            .map_err(|e| format!("data.release is not base64: {e}"))?,
    )
}

/// Reads a Helm record ConfigMap (`data.release`: base64 of gzip'd JSON).
pub fn decode_helm_configmap(cm: &Value) -> Result<Revision, String> {
    decode_helm_body(
        cm.str_at(&["data", "release"])
            .ok_or("no data.release")?
            .as_bytes(),
    )
}

/// The `type` of fieldguard's record Secrets and SQL rows.
pub const RECORD_TYPE: &str = "fieldguard.dev/release.v1";

fn own_labels(rev: &Revision) -> String {
    format!(
        r#"{{"app.kubernetes.io/managed-by":"fieldguard","fieldguard.dev/release":{rel},"fieldguard.dev/revision":"{revision}","fieldguard.dev/status":{status}}}"#,
        rel = quote(&rev.name),
        revision = rev.revision,
        status = quote(&rev.status),
    )
}

/// The body of fieldguard's record of `rev`: gzip'd JSON.
pub fn own_body(rev: &Revision) -> Vec<u8> {
    let mut rel = Map::new();
    rel.insert("name", Value::from(rev.name.as_str()));
    rel.insert("namespace", Value::from(rev.namespace.as_str()));
    rel.insert("revision", Value::Int(rev.revision as i64));
    if let Some(m) = rev.method {
        rel.insert("method", Value::from(m.as_str()));
    }
    rel.insert("fieldManager", Value::from(rev.field_manager.as_str()));
    rel.insert("status", Value::from(rev.status.as_str()));
    rel.insert("manifest", Value::from(rev.manifest.as_str()));
    rel.insert("started", Value::from(rev.started.as_str()));
    rel.insert("finished", Value::from(rev.finished.as_str()));
    rel.insert(
        "results",
        Value::List(
            rev.results
                .iter()
                .map(|r| {
                    let mut m = Map::new();
                    m.insert("object", Value::from(r.object.as_str()));
                    m.insert("result", Value::from(r.result.as_str()));
                    Value::Map(m)
                })
                .collect(),
        ),
    );
    rel.insert(
        "hooks",
        Value::List(
            rev.hooks
                .iter()
                .map(|h| {
                    let mut m = Map::new();
                    for (k, v) in [
                        ("object", &h.object),
                        ("event", &h.event),
                        ("phase", &h.phase),
                        ("started", &h.started),
                        ("completed", &h.completed),
                    ] {
                        m.insert(k, Value::from(v.as_str()));
                    }
                    Value::Map(m)
                })
                .collect(),
        ),
    );
    let text = json::to_string(&Value::Map(rel), json::Style::PLAIN);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes())
        .and_then(|_| gz.finish())
        .unwrap_or_default()
}

fn quote(s: &str) -> String {
    json::to_string(&Value::from(s), json::Style::PLAIN)
}

/// A release's history: every readable record, by revision (fieldguard's record wins over
/// Helm's for the same revision).
#[derive(Clone, Debug, Default)]
pub struct History {
    pub revisions: Vec<Revision>,
    /// Records that could not be read (name: why); they are reported, never rewritten.
    pub unreadable: Vec<String>,
}

impl History {
    /// Builds the history from the Secrets of both kinds.
    pub fn from_secrets(release: &str, helm: &[Value], own: &[Value]) -> History {
        Self::from_objects(release, helm, decode_helm, own, decode_own)
    }

    /// Builds the history from record objects (Secrets or ConfigMaps) of both kinds.
    pub fn from_objects(
        release: &str,
        helm: &[Value],
        decode_helm: fn(&Value) -> Result<Revision, String>,
        own: &[Value],
        decode_own: fn(&Value) -> Result<Revision, String>,
    ) -> History {
        let mut h = History::default();
        let name = |s: &Value| s.str_at(&["metadata", "name"]).unwrap_or("?").to_string();
        for s in helm {
            h.add(release, &name(s), decode_helm(s));
        }
        for s in own {
            h.add(release, &name(s), decode_own(s));
        }
        h.revisions.sort_by_key(|r| r.revision);
        h
    }

    /// Adds one decoded record (call Helm's first: fieldguard's record of the same revision
    /// wins). Records of other releases are ignored; unreadable ones are listed.
    pub fn add(&mut self, release: &str, key: &str, decoded: Result<Revision, String>) {
        match decoded {
            Ok(r) if r.name == release || r.name.is_empty() => {
                self.revisions.retain(|x| x.revision != r.revision);
                self.revisions.push(r);
                self.revisions.sort_by_key(|r| r.revision);
            }
            Ok(_) => {}
            Err(e) => self.unreadable.push(format!("{key}: {e}")),
        }
    }

    pub fn latest(&self) -> Option<&Revision> {
        self.revisions.last()
    }

    pub fn get(&self, revision: u32) -> Option<&Revision> {
        self.revisions.iter().find(|r| r.revision == revision)
    }

    pub fn next_revision(&self) -> u32 {
        self.latest().map_or(1, |r| r.revision + 1)
    }

    /// The last revision whose objects were applied (deployed or superseded; failed runs may
    /// have applied part of theirs, so they count too): what the next run's deletions and
    /// client-side originals are computed from.
    pub fn last_applied(&self) -> Option<&Revision> {
        self.revisions
            .iter()
            .rev()
            .find(|r| !r.status.starts_with("pending") && !r.manifest.is_empty())
    }
}

/// The operation a run performs, from the history and the request.
pub fn operation(history: &History, rollback_to: Option<u32>) -> Result<Operation, ReleaseError> {
    match (rollback_to, history.latest()) {
        (Some(_), None) => Err(ReleaseError(
            "cannot roll back: the release has no revisions".into(),
        )),
        (Some(r), Some(_)) if history.get(r).is_none() => Err(ReleaseError(format!(
            "cannot roll back to revision {r}: no such revision (have {})",
            history
                .revisions
                .iter()
                .map(|r| r.revision.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        (Some(r), Some(_)) => Ok(Operation::Rollback(r)),
        (None, None) => Ok(Operation::Install),
        (None, Some(_)) => Ok(Operation::Upgrade),
    }
}

/// HIP-0023: the method a run uses. `true`/`false` are explicit; `auto` means server-side for
/// installs and, for upgrades and rollbacks, the method recorded on the previous (latest)
/// revision — client-side when that revision recorded none (Helm 3 releases).
pub fn resolve_method(flag: ServerSide, op: Operation, history: &History) -> Method {
    match flag {
        ServerSide::True => Method::Ssa,
        ServerSide::False => Method::Csa,
        ServerSide::Auto => match op {
            Operation::Install => Method::Ssa,
            Operation::Upgrade | Operation::Rollback(_) => history
                .latest()
                .and_then(|r| r.method)
                .unwrap_or(Method::Csa),
        },
    }
}

/// Flag combinations that make no sense for the resolved method, explained before anything is
/// sent.
pub fn check_flags(
    method: Method,
    flag: ServerSide,
    forcing: bool,
    migrating: bool,
) -> Result<(), ReleaseError> {
    let why = |what: &str| {
        let how = match flag {
            ServerSide::Auto => " (auto: the previous revision was applied client-side)",
            _ => "",
        };
        ReleaseError(format!(
            "{what} needs server-side apply, but this run applies client-side{how}; pass --server-side=true to switch the release to server-side apply"
        ))
    };
    if method == Method::Csa && forcing {
        return Err(why("--force-conflicts/--force-against"));
    }
    if method == Method::Csa && migrating {
        return Err(why("--migrate-from"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(n: u32, method: Option<Method>) -> Revision {
        Revision {
            name: "shop".into(),
            namespace: "shop".into(),
            revision: n,
            method,
            field_manager: "fieldguard".into(),
            status: "deployed".into(),
            manifest: "kind: ConfigMap".into(),
            started: "t0".into(),
            finished: "t1".into(),
            source: Source::Fieldguard,
            results: vec![ObjectResult {
                object: "ConfigMap shop/a".into(),
                result: "created".into(),
            }],
            hooks: vec![super::super::hooks::HookRun {
                object: "Job shop/migrate".into(),
                event: "pre-upgrade".into(),
                phase: "Succeeded".into(),
                started: "t0".into(),
                completed: "t1".into(),
            }],
        }
    }

    #[test]
    fn hip_0023_auto_matrix() {
        let none = History::default();
        let helm3 = History {
            revisions: vec![rev(1, None)],
            ..Default::default()
        };
        let ssa = History {
            revisions: vec![rev(1, Some(Method::Csa)), rev(2, Some(Method::Ssa))],
            ..Default::default()
        };
        let csa = History {
            revisions: vec![rev(1, Some(Method::Ssa)), rev(2, Some(Method::Csa))],
            ..Default::default()
        };
        use Method::*;
        use Operation::*;
        let cases = [
            (&none, Install, Ssa),
            (&helm3, Upgrade, Csa),
            (&ssa, Upgrade, Ssa),
            (&csa, Upgrade, Csa),
            (&helm3, Rollback(1), Csa),
            // A rollback follows the latest revision's method, not the target's.
            (&ssa, Rollback(1), Ssa),
            (&csa, Rollback(1), Csa),
        ];
        for (h, op, want) in cases {
            assert_eq!(resolve_method(ServerSide::Auto, op, h), want, "{op:?}");
            assert_eq!(resolve_method(ServerSide::True, op, h), Ssa);
            assert_eq!(resolve_method(ServerSide::False, op, h), Csa);
        }
    }

    #[test]
    fn forcing_a_client_side_run_is_explained() {
        let e = check_flags(Method::Csa, ServerSide::Auto, true, false).unwrap_err();
        assert!(e.0.contains("--server-side=true"), "{e}");
        assert!(check_flags(Method::Ssa, ServerSide::Auto, true, true).is_ok());
    }

    #[test]
    fn own_records_round_trip() {
        let r = rev(3, Some(Method::Ssa));
        let secret = encode_own(&r);
        assert_eq!(
            secret.str_at(&["metadata", "name"]),
            Some("fieldguard.release.v1.shop.v3")
        );
        let back = decode_own(&secret).unwrap();
        assert_eq!(back.revision, 3);
        assert_eq!(back.method, Some(Method::Ssa));
        assert_eq!(back.manifest, r.manifest);
        assert_eq!(back.results, r.results);
        assert_eq!(back.hooks, r.hooks);
    }

    #[test]
    fn helm_records_are_read() {
        let rel = r#"{"name":"shop","namespace":"shop","version":4,"apply_method":"ssa",
            "info":{"status":"deployed","first_deployed":"a","last_deployed":"b"},
            "manifest":"---\nkind: ConfigMap\n"}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(rel.as_bytes()).unwrap();
        let inner = B64.encode(gz.finish().unwrap());
        let wire = B64.encode(inner.as_bytes());
        let secret = json::parse(
            format!(r#"{{"metadata":{{"name":"sh.helm.release.v1.shop.v4"}},"data":{{"release":"{wire}"}}}}"#)
                .as_bytes(),
        )
        .unwrap();
        let r = decode_helm(&secret).unwrap();
        assert_eq!(
            (r.revision, r.method, r.status.as_str()),
            (4, Some(Method::Ssa), "deployed")
        );
        assert!(r.manifest.contains("ConfigMap"));
        let h = History::from_secrets("shop", &[secret], &[]);
        assert_eq!(h.next_revision(), 5);
        let bad = json::parse(br#"{"metadata":{"name":"x"},"data":{"release":"!!"}}"#).unwrap();
        let h = History::from_secrets("shop", &[bad], &[]);
        assert_eq!(h.unreadable.len(), 1);
    }
}
