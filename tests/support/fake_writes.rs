//! The fake apiserver's non-apply writes: `POST` (create), `PUT` (update, with the
//! resourceVersion precondition), `DELETE`, and `PATCH` as strategic merge patch, JSON merge
//! patch and JSON patch (RFC 6902: `test`, `replace`, `add`, `remove`). Managed fields are kept
//! the way kube-apiserver keeps them for these writes (an `Update` entry of the request's field
//! manager, by fieldguard's engine); strategic and merge patches are applied by fieldguard's
//! patch module (the fake tests the protocol around them). A stored CustomResourceDefinition is
//! Established at once and its types are served (discovery and `/openapi/v3`).

// Error responses are returned by value, as the handlers build them.
#![allow(clippy::result_large_err)]

use super::fake_apiserver::{Body, Resource, State, crd_openapi, reply, status};
use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::managedfields::{
    FieldManager, ManagerOptions, entries_from_value, entries_to_value,
};
use fieldguard::value::{Value as FgValue, json as fgjson};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;

type Key = (String, String, String, String);

fn fg(v: &Value) -> FgValue {
    fgjson::parse_str(&v.to_string()).unwrap()
}

fn sj(v: &FgValue) -> Value {
    serde_json::from_str(&fgjson::to_string(v, fgjson::Style::PLAIN)).unwrap()
}

struct Target {
    group: String,
    version: String,
    resource: Resource,
    ns: String,
    name: Option<String>,
}

fn target(s: &State, path: &str) -> Result<Target, Response<Body>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, version, rest): (&str, &str, &[&str]) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(status(404, "NotFound", "not found".into())),
    };
    let (ns, plural, name) = match rest {
        ["namespaces", ns, plural] => (*ns, *plural, None),
        ["namespaces", ns, plural, name] => (*ns, *plural, Some(name.to_string())),
        [plural] => ("", *plural, None),
        [plural, name] => ("", *plural, Some(name.to_string())),
        _ => return Err(status(404, "NotFound", "not found".into())),
    };
    let resource = s
        .resources
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
        .cloned()
        .ok_or_else(|| {
            status(
                404,
                "NotFound",
                format!("the server could not find the requested resource ({plural})"),
            )
        })?;
    Ok(Target {
        group: group.into(),
        version: version.into(),
        resource,
        ns: ns.into(),
        name,
    })
}

fn api_version(t: &Target) -> String {
    if t.group.is_empty() {
        t.version.clone()
    } else {
        format!("{}/{}", t.group, t.version)
    }
}

/// Records `new` as a non-apply write by `manager` over `live` (None: a create); returns the
/// object with its managed fields.
fn with_managed_fields(
    t: &Target,
    live: Option<&Value>,
    new: &Value,
    manager: &str,
    now: i64,
) -> Result<Value, Response<Body>> {
    let catalog = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    let av = api_version(t);
    let Ok(info) = catalog.lookup(&av, &t.resource.kind) else {
        // Types without a schema here (custom resources): no managed fields bookkeeping.
        return Ok(new.clone());
    };
    let fm = FieldManager {
        schema: &info.schema,
        type_ref: &info.type_ref,
        api_version: av.clone(),
        kind: t.resource.kind.clone(),
        subresource: String::new(),
        ignored: &info.reset_fields,
        known_versions: None,
        now,
        options: ManagerOptions::default(),
    };
    let empty = json!({"apiVersion": av, "kind": t.resource.kind});
    let live_v = fg(live.unwrap_or(&empty));
    let live_entries = entries_from_value(
        live_v
            .get_path(&["metadata", "managedFields"])
            .unwrap_or(&FgValue::Null),
    )
    .unwrap_or_default();
    let new_v = fg(new);
    let new_entries = match new_v.get_path(&["metadata", "managedFields"]) {
        Some(mf) => Some(entries_from_value(mf).map_err(|e| status(400, "BadRequest", e))?),
        None => None,
    };
    let strip = |v: &FgValue| {
        let mut v = v.clone();
        if let Some(m) = v
            .as_map_mut()
            .and_then(|o| o.get_mut("metadata"))
            .and_then(FgValue::as_map_mut)
        {
            m.remove("managedFields");
        }
        v
    };
    let out = fm
        .update(
            &strip(&live_v),
            &strip(&new_v),
            &live_entries,
            new_entries.as_deref(),
            manager,
        )
        .map_err(|e| status(422, "Invalid", e.to_string()))?;
    let mut obj = sj(&out.object);
    let mf = sj(&entries_to_value(&out.entries, |_| false));
    if mf.as_array().is_some_and(|a| !a.is_empty()) {
        obj["metadata"]["managedFields"] = mf;
    }
    Ok(obj)
}

fn store(
    s: &mut State,
    t: &Target,
    mut obj: Value,
    created: bool,
    dry_run: bool,
) -> Response<Body> {
    obj["apiVersion"] = json!(api_version(t));
    obj["kind"] = json!(t.resource.kind);
    if t.ns.is_empty() {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
    } else {
        obj["metadata"]["namespace"] = json!(t.ns);
    }
    if created {
        obj["metadata"]["uid"] = json!(format!(
            "00000000-0000-4000-8000-{:012}",
            s.resource_version + 1
        ));
        obj["metadata"]["creationTimestamp"] = json!("2026-11-22T10:00:00Z");
    }
    if dry_run {
        return reply(
            if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            },
            obj,
        );
    }
    establish(s, &mut obj);
    s.put(obj.clone());
    let key: Key = (
        t.group.clone(),
        t.resource.plural.clone(),
        t.ns.clone(),
        obj["metadata"]["name"].as_str().unwrap_or("").into(),
    );
    let stored = s.objects.get(&key).cloned().unwrap_or(obj);
    reply(
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        stored,
    )
}

/// A CustomResourceDefinition being stored is Established at once and its types served.
pub fn establish(s: &mut State, obj: &mut Value) {
    if obj["kind"] != "CustomResourceDefinition" {
        return;
    }
    obj["status"] = json!({"conditions": [{"type": "Established", "status": "True"}, {"type": "NamesAccepted", "status": "True"}],
                           "acceptedNames": obj["spec"]["names"].clone()});
    serve_crd(s, obj);
}

/// Serves a CRD's types from now on.
fn serve_crd(s: &mut State, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or("");
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("");
    let namespaced = crd["spec"]["scope"] != "Cluster";
    let core = super::fake_apiserver::openapi_fixture("api__v1_openapi.json");
    for v in crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let version = v["name"].as_str().unwrap_or("");
        let av = format!("{group}/{version}");
        if !s
            .resources
            .iter()
            .any(|r| r.group == group && r.version == version && r.kind == kind)
        {
            let subs: Vec<&str> = if v["subresources"]["status"].is_object() {
                vec!["status"]
            } else {
                vec![]
            };
            s.resources
                .push(Resource::new(&av, kind, plural, namespaced, &subs));
        }
        s.openapi.insert(
            format!("apis/{group}/{version}"),
            crd_openapi(crd, version, &core),
        );
    }
}

fn precondition_failed(t: &Target, name: &str) -> Response<Body> {
    status(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            t.resource.plural, t.group
        ),
    )
}

/// `POST`, `PUT`, `DELETE` and non-apply `PATCH`es.
pub fn write(
    s: &mut State,
    method: &hyper::Method,
    path: &str,
    query: &BTreeMap<String, String>,
    content_type: &str,
    body: &[u8],
) -> Response<Body> {
    let t = match target(s, path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let dry_run = query.get("dryRun").is_some_and(|v| v == "All");
    let manager = query
        .get("fieldManager")
        .cloned()
        .unwrap_or_else(|| "unknown".into());
    let now = 1_800_000_000 + s.resource_version as i64;
    let parse = |b: &[u8]| {
        serde_json::from_slice::<Value>(b)
            .map_err(|e| status(400, "BadRequest", format!("error decoding body: {e}")))
    };
    let key_of = |name: &str| -> Key {
        (
            t.group.clone(),
            t.resource.plural.clone(),
            t.ns.clone(),
            name.to_string(),
        )
    };
    match (method, &t.name) {
        (&hyper::Method::POST, None) => {
            let obj = match parse(body) {
                Ok(o) => o,
                Err(r) => return r,
            };
            let Some(name) = obj["metadata"]["name"].as_str().map(str::to_string) else {
                return status(422, "Invalid", "metadata.name: Required value".into());
            };
            if s.objects.contains_key(&key_of(&name)) {
                return status(
                    409,
                    "AlreadyExists",
                    format!(
                        "{}.{} \"{name}\" already exists",
                        t.resource.plural, t.group
                    ),
                );
            }
            match with_managed_fields(&t, None, &obj, &manager, now) {
                Ok(o) => store(s, &t, o, true, dry_run),
                Err(r) => r,
            }
        }
        (&hyper::Method::PUT, Some(name)) => {
            let obj = match parse(body) {
                Ok(o) => o,
                Err(r) => return r,
            };
            let Some(live) = s.objects.get(&key_of(name)).cloned() else {
                return status(
                    404,
                    "NotFound",
                    format!("{}.{} \"{name}\" not found", t.resource.plural, t.group),
                );
            };
            if let Some(rv) = obj["metadata"]["resourceVersion"].as_str()
                && live["metadata"]["resourceVersion"].as_str() != Some(rv)
            {
                return precondition_failed(&t, name);
            }
            match with_managed_fields(&t, Some(&live), &obj, &manager, now) {
                Ok(mut o) => {
                    o["metadata"]["uid"] = live["metadata"]["uid"].clone();
                    store(s, &t, o, false, dry_run)
                }
                Err(r) => r,
            }
        }
        (&hyper::Method::DELETE, Some(name)) => {
            let key = key_of(name);
            let Some(live) = s.objects.get(&key).cloned() else {
                return status(
                    404,
                    "NotFound",
                    format!("{}.{} \"{name}\" not found", t.resource.plural, t.group),
                );
            };
            if !dry_run {
                s.delete(&key);
            }
            reply(StatusCode::OK, live)
        }
        (&hyper::Method::PATCH, Some(name)) => {
            let Some(live) = s.objects.get(&key_of(name)).cloned() else {
                return status(
                    404,
                    "NotFound",
                    format!("{}.{} \"{name}\" not found", t.resource.plural, t.group),
                );
            };
            let patched = match content_type {
                "application/strategic-merge-patch+json" => strategic(&t, &live, body),
                "application/merge-patch+json" => merge(&live, body),
                "application/json-patch+json" => json_patch(&live, body),
                other => Err(status(
                    415,
                    "UnsupportedMediaType",
                    format!("unsupported patch type {other:?}"),
                )),
            };
            let patched = match patched {
                Ok(p) => p,
                Err(r) => return r,
            };
            // A resourceVersion in the result is a precondition.
            if patched["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"]
                && !patched["metadata"]["resourceVersion"].is_null()
            {
                return precondition_failed(&t, name);
            }
            let carries_mf = content_type == "application/json-patch+json"
                && patched["metadata"]["managedFields"] != live["metadata"]["managedFields"];
            let mut new = patched.clone();
            if !carries_mf && let Some(m) = new["metadata"].as_object_mut() {
                m.remove("managedFields");
            }
            match with_managed_fields(&t, Some(&live), &new, &manager, now) {
                Ok(mut o) => {
                    if !carries_mf && o["metadata"].get("managedFields").is_none() {
                        o["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
                    }
                    store(s, &t, o, false, dry_run)
                }
                Err(r) => r,
            }
        }
        _ => status(
            405,
            "MethodNotAllowed",
            format!("{method} {path} is not supported by the fake"),
        ),
    }
}

fn strategic(t: &Target, live: &Value, body: &[u8]) -> Result<Value, Response<Body>> {
    let schema = fieldguard::patch::meta::kubernetes("k8s").unwrap();
    let Some(meta) = schema.root_for(&api_version(t), &t.resource.kind) else {
        return Err(status(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into()));
    };
    let patch = fieldguard::patch::parse_document(Some(body))
        .map_err(|e| status(400, "BadRequest", e.to_string()))?;
    let FgValue::Map(l) = fg(live) else {
        unreachable!()
    };
    let out = fieldguard::patch::strategic::apply(l, patch, &meta)
        .map_err(|e| status(422, "Invalid", e.to_string()))?;
    Ok(sj(&FgValue::Map(out)))
}

fn merge(live: &Value, body: &[u8]) -> Result<Value, Response<Body>> {
    let patch = fgjson::parse(body).map_err(|e| status(400, "BadRequest", e.to_string()))?;
    let out = fieldguard::patch::json_merge::apply(&fg(live), &patch)
        .map_err(|e| status(422, "Invalid", e.to_string()))?;
    Ok(sj(&out))
}

fn pointer_parts(p: &str) -> Vec<String> {
    p.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn json_patch(live: &Value, body: &[u8]) -> Result<Value, Response<Body>> {
    let ops: Vec<Value> =
        serde_json::from_slice(body).map_err(|e| status(400, "BadRequest", e.to_string()))?;
    let mut doc = live.clone();
    for op in ops {
        let path = pointer_parts(op["path"].as_str().unwrap_or(""));
        let ptr = format!(
            "/{}",
            path.iter()
                .map(|p| p.replace('~', "~0").replace('/', "~1"))
                .collect::<Vec<_>>()
                .join("/")
        );
        match op["op"].as_str().unwrap_or("") {
            "test" => {
                if doc.pointer(&ptr) != Some(&op["value"]) {
                    return Err(status(422, "Invalid", format!("the test of {ptr} failed")));
                }
            }
            "replace" | "add" => {
                let (last, parents) = path
                    .split_last()
                    .ok_or_else(|| status(422, "Invalid", "empty path".into()))?;
                let parent_ptr = format!(
                    "/{}",
                    parents
                        .iter()
                        .map(|p| p.replace('~', "~0").replace('/', "~1"))
                        .collect::<Vec<_>>()
                        .join("/")
                );
                let parent = if parents.is_empty() {
                    Some(&mut doc)
                } else {
                    doc.pointer_mut(&parent_ptr)
                };
                match parent.and_then(Value::as_object_mut) {
                    Some(m) => {
                        m.insert(last.clone(), op["value"].clone());
                    }
                    None => return Err(status(422, "Invalid", format!("no parent for {ptr}"))),
                }
            }
            "remove" => {
                let (last, parents) = path
                    .split_last()
                    .ok_or_else(|| status(422, "Invalid", "empty path".into()))?;
                let parent_ptr = format!("/{}", parents.join("/"));
                if let Some(m) = doc.pointer_mut(&parent_ptr).and_then(Value::as_object_mut) {
                    m.remove(last);
                }
            }
            other => {
                return Err(status(
                    422,
                    "Invalid",
                    format!("unsupported JSON patch op {other:?}"),
                ));
            }
        }
    }
    Ok(doc)
}

/// `labelSelector=a=b,c=d` (equality only).
pub fn selects(selector: &str, obj: &Value) -> bool {
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => {
                obj["metadata"]["labels"][k.trim_end_matches('=')].as_str()
                    == Some(v.trim_start_matches('='))
            }
            None => obj["metadata"]["labels"].get(term).is_some(),
        })
}

/// A TokenReview answer from the configured tokens.
pub fn token_review(s: &State, body: &[u8]) -> Response<Body> {
    let req: Value = serde_json::from_slice(body).unwrap_or_default();
    let token = req["spec"]["token"].as_str().unwrap_or("");
    let audiences: Vec<String> = req["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let status = match s.tokens.get(token) {
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
        Some((_, _, _, true)) => json!({"authenticated": false, "error": "token has expired"}),
        Some((_, _, auds, _))
            if !audiences.is_empty() && !audiences.iter().any(|a| auds.contains(a)) =>
        {
            json!({"authenticated": false, "error": "token audiences do not match"})
        }
        Some((user, groups, auds, _)) => json!({"authenticated": true,
            "user": {"username": user, "groups": groups}, "audiences": auds}),
    };
    reply(
        StatusCode::CREATED,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status}),
    )
}

fn granted(s: &State, user: &str, groups: &[String], verb: &str, resource: &str, ns: &str) -> bool {
    s.grants.iter().any(|(who, v, r, n)| {
        (who == user || groups.contains(who))
            && (v == "*" || v == verb)
            && (r == "*" || r == resource)
            && (n.is_empty() || n == ns)
    })
}

/// A SubjectAccessReview answer from the configured grants.
pub fn subject_access_review(s: &State, body: &[u8]) -> Response<Body> {
    let req: Value = serde_json::from_slice(body).unwrap_or_default();
    let spec = &req["spec"];
    let groups: Vec<String> = spec["groups"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let ra = &spec["resourceAttributes"];
    let allowed = granted(
        s,
        spec["user"].as_str().unwrap_or(""),
        &groups,
        ra["verb"].as_str().unwrap_or(""),
        ra["resource"].as_str().unwrap_or(""),
        ra["namespace"].as_str().unwrap_or(""),
    );
    reply(
        StatusCode::CREATED,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "status": {"allowed": allowed}}),
    )
}

/// 403 for an impersonated request the grants do not allow (None: allowed). Discovery and
/// schema documents are readable by everyone, as in a real cluster.
pub fn forbidden(
    s: &State,
    user: &str,
    groups: &[String],
    method: &hyper::Method,
    path: &str,
    watch: bool,
) -> Option<Response<Body>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let rest: &[&str] = match parts.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    let (ns, resource, named) = match rest {
        [] => return None,
        ["namespaces", ns, plural] => (*ns, *plural, false),
        ["namespaces", ns, plural, _] => (*ns, *plural, true),
        [plural] => ("", *plural, false),
        [plural, _] => ("", *plural, true),
        _ => return None,
    };
    let verb = match (method.as_str(), named, watch) {
        ("GET", true, _) => "get",
        ("GET", false, true) => "watch",
        ("GET", false, false) => "list",
        ("POST", _, _) => "create",
        ("PUT", _, _) => "update",
        ("PATCH", _, _) => "patch",
        ("DELETE", _, _) => "delete",
        _ => "unknown",
    };
    if granted(s, user, groups, verb, resource, ns) {
        return None;
    }
    Some(status(
        403,
        "Forbidden",
        format!(
            "{resource} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in the namespace \"{ns}\""
        ),
    ))
}
