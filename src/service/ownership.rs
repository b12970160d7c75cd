//! `fieldguard.v1.Ownership`: blame, who owns what, what a manager owns, the inventory.

use super::proto::ownership_server::Ownership;
use super::proto::{self as pb};
use super::{Stores, convert, error};
use crate::check::{is_secret, redact_object};
use crate::live::ObjectRef;
use crate::live::state::LiveState;
use crate::ownership::{blame, inventory, managed_of, owner_of};
use crate::value::Value;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::Stream;
use tonic::{Code, Request, Response, Status};

pub struct OwnershipService {
    stores: Stores,
}

impl OwnershipService {
    pub fn new(stores: Stores) -> OwnershipService {
        OwnershipService { stores }
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

fn pb_ref(r: &ObjectRef, obj: &Value) -> pb::ObjectRef {
    pb::ObjectRef {
        api_version: obj.str_at(&["apiVersion"]).unwrap_or("").to_string(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

fn rv(obj: &Value) -> String {
    obj.str_at(&["metadata", "resourceVersion"])
        .unwrap_or("")
        .to_string()
}

/// True if `obj` (at `r`) is one the selector picks.
fn selected(sel: &Option<pb::Selector>, r: &ObjectRef, obj: &Value) -> bool {
    selected_by(sel, r, obj.get_path(&["metadata", "labels"]))
}

/// [`selected`] given the object's labels (`metadata.labels`) alone.
fn selected_by(sel: &Option<pb::Selector>, r: &ObjectRef, labels: Option<&Value>) -> bool {
    let Some(s) = sel else { return true };
    if !s.api_version.is_empty() && group_of(&s.api_version) != r.group {
        return false;
    }
    if !s.kind.is_empty() && !s.kind.eq_ignore_ascii_case(&r.kind) {
        return false;
    }
    if !s.namespace.is_empty() && s.namespace != r.namespace {
        return false;
    }
    s.labels
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.str_at(&[k])) == Some(v.as_str()))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("query failed: {e}")))?
}

/// The selected objects whose managedFields decode, with them decoded.
fn selected_managed(
    objects: Vec<(ObjectRef, Arc<Value>)>,
    sel: &Option<pb::Selector>,
) -> Vec<(ObjectRef, Arc<Value>, crate::managedfields::Managed)> {
    objects
        .into_iter()
        .filter(|(r, obj)| selected(sel, r, obj))
        .filter_map(|(r, obj)| {
            let m = managed_of(&obj).ok()?;
            Some((r, obj, m))
        })
        .collect()
}

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn stream_of<T: Send + 'static>(items: Vec<T>) -> Boxed<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

#[allow(clippy::result_large_err)]
async fn blame_one(
    store: &dyn LiveState,
    req: &pb::BlameRequest,
) -> Result<pb::BlameResponse, Status> {
    let want = req.object.clone().unwrap_or_default();
    if want.kind.is_empty() || want.name.is_empty() {
        return Err(error(
            Code::InvalidArgument,
            "MISSING_OBJECT",
            "object.kind and object.name are required",
            &[("object".into(), "kind and name are required".into())],
        ));
    }
    let r = ObjectRef {
        group: group_of(&want.api_version).to_string(),
        kind: want.kind.clone(),
        namespace: want.namespace.clone(),
        name: want.name.clone(),
    };
    let obj = if req.fresh {
        store
            .fetch_fresh(&[(r.clone(), want.api_version.clone())])
            .await
            .map_err(super::live_error)?
            .pop()
            .flatten()
    } else {
        store.get(&r).await.map_err(super::live_error)?
    };
    let Some(obj) = obj else {
        return Err(error(
            Code::NotFound,
            "OBJECT_NOT_FOUND",
            &format!("{r} not found"),
            &[],
        ));
    };
    let api_version = obj.str_at(&["apiVersion"]).unwrap_or("").to_string();
    let catalog = store
        .catalog(&[api_version.clone()].into())
        .await
        .map_err(super::live_error)?;
    let info = catalog.lookup(&api_version, &r.kind).map_err(|e| {
        error(
            Code::FailedPrecondition,
            "UNKNOWN_KIND",
            &e.to_string(),
            &[],
        )
    })?;
    let shown = if is_secret(&r) {
        redact_object((*obj).clone())
    } else {
        (*obj).clone()
    };
    let b = blame::blame(&info.schema, &info.type_ref, &shown)
        .map_err(|e| error(Code::FailedPrecondition, "BAD_MANAGED_FIELDS", &e, &[]))?;
    let lines = b
        .lines
        .into_iter()
        .filter(|l| req.path.is_empty() || l.path.starts_with(&req.path))
        .map(|l| pb::BlameLine {
            text: l.text,
            path: l.path,
            owners: l.owners.into_iter().map(|i| i as u32).collect(),
        })
        .collect();
    Ok(pb::BlameResponse {
        object: Some(pb_ref(&r, &obj)),
        resource_version: rv(&obj),
        owners: b.owners.iter().map(convert::owner).collect(),
        lines,
    })
}

impl OwnershipService {
    /// The items whose object the caller may read.
    async fn readable<T>(
        &self,
        caller: &super::auth::Caller,
        store: &dyn LiveState,
        items: Vec<T>,
        object: impl Fn(&T) -> Option<&pb::ObjectRef>,
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(items.len());
        for i in items {
            let r = super::object_ref_of(object(&i));
            if self.stores.may_read(caller, store, &r).await {
                out.push(i);
            }
        }
        out
    }
}

#[tonic::async_trait]
impl Ownership for OwnershipService {
    type WatchTransitionsStream = Boxed<pb::Transition>;

    async fn history(
        &self,
        req: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let caller = self.stores.caller(&req).await?;
        super::history::page(&self.stores, caller, req.into_inner())
            .await
            .map(Response::new)
    }

    async fn watch_transitions(
        &self,
        req: Request<pb::HistoryRequest>,
    ) -> Result<Response<Self::WatchTransitionsStream>, Status> {
        let caller = self.stores.caller(&req).await?;
        let rx = super::history::watch(self.stores.clone(), caller, req.into_inner()).await?;
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn fights(
        &self,
        req: Request<pb::FightsRequest>,
    ) -> Result<Response<pb::FightsResponse>, Status> {
        let caller = self.stores.caller(&req).await?;
        super::history::fights(&self.stores, caller, req.into_inner())
            .await
            .map(Response::new)
    }

    async fn blame(
        &self,
        req: Request<pb::BlameRequest>,
    ) -> Result<Response<pb::BlameResponse>, Status> {
        let caller = self.stores.caller(&req).await?;
        let req = req.into_inner();
        let (_, store) = self.stores.get(&req.cluster)?;
        // Authorized before anything is looked up: whether an object exists is not told to
        // callers who may not read it.
        let r = super::object_ref_of(req.object.as_ref());
        if !self.stores.may_read(&caller, &*store, &r).await {
            return Err(super::forbidden(&caller, &[r]));
        }
        let resp = blame_one(&*store, &req).await?;
        Ok(Response::new(resp))
    }

    type WhoOwnsStream = Boxed<pb::PathOwnership>;

    async fn who_owns(
        &self,
        req: Request<pb::WhoOwnsRequest>,
    ) -> Result<Response<Self::WhoOwnsStream>, Status> {
        let caller = self.stores.caller(&req).await?;
        let req = req.into_inner();
        let (_, store) = self.stores.get(&req.cluster)?;
        let reader = store.clone();
        let re = Regex::new(&req.path_pattern).map_err(|e| {
            error(
                Code::InvalidArgument,
                "INVALID_PATTERN",
                &format!("path_pattern: {e}"),
                &[("path_pattern".into(), e.to_string())],
            )
        })?;
        let objects = store.list(None).await.map_err(super::live_error)?;
        let items = blocking(move || {
            let mut out = Vec::new();
            for (r, obj, m) in selected_managed(objects, &req.selector) {
                let mut by_path: BTreeMap<String, Vec<pb::Owner>> = BTreeMap::new();
                for (key, vs) in m.fields.iter() {
                    vs.set.iterate(|p| {
                        let printed = crate::fieldpath::Path(p.to_vec()).to_string();
                        if re.is_match(&printed) {
                            by_path
                                .entry(printed)
                                .or_default()
                                .push(convert::owner(&owner_of(key, &m)));
                        }
                    });
                }
                for (path, owners) in by_path {
                    out.push(pb::PathOwnership {
                        object: Some(pb_ref(&r, &obj)),
                        resource_version: rv(&obj),
                        path,
                        owners,
                    });
                }
            }
            Ok(out)
        })
        .await?;
        let items = self
            .readable(&caller, &*reader, items, |i| i.object.as_ref())
            .await;
        Ok(Response::new(stream_of(items)))
    }

    type ManagedByStream = Boxed<pb::ManagedObject>;

    async fn managed_by(
        &self,
        req: Request<pb::ManagedByRequest>,
    ) -> Result<Response<Self::ManagedByStream>, Status> {
        let caller = self.stores.caller(&req).await?;
        let req = req.into_inner();
        let (_, store) = self.stores.get(&req.cluster)?;
        let reader = store.clone();
        if req.manager.is_empty() {
            return Err(error(
                Code::InvalidArgument,
                "MISSING_MANAGER",
                "manager is required",
                &[("manager".into(), "must not be empty".into())],
            ));
        }
        let managed = store
            .managed_by(&req.manager)
            .await
            .map_err(super::live_error)?;
        let items = blocking(move || {
            let mut out = Vec::new();
            let candidates: Vec<_> = managed
                .into_iter()
                .filter(|(r, obj)| selected(&req.selector, r, obj))
                .filter_map(|(r, obj)| {
                    let m = managed_of(&obj).ok()?;
                    Some((r, obj, m))
                })
                .collect();
            for (r, obj, m) in candidates {
                let mut entries = Vec::new();
                let mut paths = BTreeSet::new();
                for (key, vs) in m.fields.iter() {
                    let o = owner_of(key, &m);
                    if o.manager != req.manager {
                        continue;
                    }
                    entries.push(convert::owner(&o));
                    vs.set.leaves().iterate(|p| {
                        paths.insert(crate::fieldpath::Path(p.to_vec()).to_string());
                    });
                }
                if !entries.is_empty() {
                    out.push(pb::ManagedObject {
                        object: Some(pb_ref(&r, &obj)),
                        resource_version: rv(&obj),
                        entries,
                        paths: paths.into_iter().collect(),
                    });
                }
            }
            Ok(out)
        })
        .await?;
        let items = self
            .readable(&caller, &*reader, items, |i| i.object.as_ref())
            .await;
        Ok(Response::new(stream_of(items)))
    }

    async fn managers(
        &self,
        req: Request<pb::ManagersRequest>,
    ) -> Result<Response<pb::ManagersResponse>, Status> {
        let caller = self.stores.caller(&req).await?;
        let req = req.into_inner();
        let (_, store) = self.stores.get(&req.cluster)?;
        // A caller who may read every object: counted where the objects are held, when the
        // source can (the watch cache), without rebuilding each.
        if self.stores.auth.reads_everything(&caller) {
            let selector = req.selector.clone();
            let keep: Option<crate::live::state::Keep> = selector.is_some().then(|| {
                Box::new(move |r: &ObjectRef, labels: Option<&Value>| {
                    selected_by(&selector, r, labels)
                }) as crate::live::state::Keep
            });
            if let Some(inv) = store.inventory(keep).await.map_err(super::live_error)? {
                return Ok(Response::new(convert::managers(&inv)));
            }
        }
        // Reading every object is work for the blocking pool, not the runtime's workers (the
        // cache lists on it too).
        let objects = store.list(None).await.map_err(super::live_error)?;
        let selector = req.selector.clone();
        let candidates: Vec<(ObjectRef, Arc<Value>)> = blocking(move || {
            Ok(objects
                .into_iter()
                .filter(|(r, o)| selected(&selector, r, o))
                .collect())
        })
        .await?;
        let mut all: Vec<(ObjectRef, Arc<Value>)> = Vec::with_capacity(candidates.len());
        for (r, o) in candidates {
            if self.stores.may_read(&caller, &*store, &r).await {
                all.push((r, o));
            }
        }
        let resp = blocking(move || {
            let inv = inventory::inventory(all.iter().map(|(r, o)| (r, &**o)));
            Ok(convert::managers(&inv))
        })
        .await?;
        Ok(Response::new(resp))
    }
}
