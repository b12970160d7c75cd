//! `Ownership.History`, `Ownership.WatchTransitions`, `Ownership.Fights`: the ownership
//! changes a watched cluster's cache remembers, each shown only to callers who may read its
//! object (decisions remembered per request).

use super::proto::{self as pb};
use super::{Stores, error};
use crate::history::{Filter, History, Transition};
use crate::live::ObjectRef;
use crate::live::state::LiveState;
use std::collections::HashMap;
use std::sync::Arc;
use tonic::{Code, Status};

/// At most this many transitions per page.
const MAX_PAGE: usize = 5000;
/// Remembered authorization decisions per request, at most.
const MAX_DECISIONS: usize = 10_000;

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

fn object_ref(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        group: group_of(api_version).to_string(),
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// The cluster's store and its history (a clear refusal when it keeps none).
#[allow(clippy::result_large_err)]
fn history_of(
    stores: &Stores,
    cluster: &str,
) -> Result<(Arc<dyn LiveState>, Arc<History>), Status> {
    let (name, store) = stores.get(cluster)?;
    let history = store.history().ok_or_else(|| {
        error(
            Code::FailedPrecondition,
            "NO_HISTORY",
            &format!(
                "cluster {name:?} keeps no ownership history: serve it from a watch cache with --history"
            ),
            &[],
        )
    })?;
    Ok((store, history))
}

pub fn filter(req: &pb::HistoryRequest) -> Filter {
    Filter {
        kind: req.kind.clone(),
        namespace: req.namespace.clone(),
        name: req.name.clone(),
        path_prefix: req.path_prefix.clone(),
        manager: req.manager.clone(),
        since: req.since,
        until: req.until,
    }
}

pub fn transition(t: &Transition) -> pb::Transition {
    let names = |m: &[crate::history::Text]| m.iter().map(|m| m.to_string()).collect();
    pb::Transition {
        seq: t.seq,
        cluster: t.cluster.to_string(),
        object: Some(pb::ObjectRef {
            api_version: t.api_version.to_string(),
            kind: t.kind.to_string(),
            namespace: t.namespace.to_string(),
            name: t.name.to_string(),
        }),
        path: t.path.to_string(),
        change: t.change.as_str().into(),
        from: names(&t.from),
        to: names(&t.to),
        operation: t.operation.to_string(),
        subresource: t.subresource.to_string(),
        resource_version: t.resource_version.to_string(),
        time: t.time.unwrap_or(0),
        observed: t.observed,
        old_value: t.old_value.as_deref().unwrap_or_default().to_string(),
        new_value: t.new_value.as_deref().unwrap_or_default().to_string(),
        fields: t.fields as u32,
    }
}

/// Authorization decisions of one caller, remembered (bounded).
pub struct Readable<'a> {
    stores: &'a Stores,
    caller: super::auth::Caller,
    store: Arc<dyn LiveState>,
    decided: HashMap<ObjectRef, bool>,
}

impl<'a> Readable<'a> {
    pub fn new(stores: &'a Stores, caller: super::auth::Caller, store: Arc<dyn LiveState>) -> Self {
        Readable {
            stores,
            caller,
            store,
            decided: HashMap::new(),
        }
    }

    /// Whether the caller may read the object `t` is about.
    pub async fn shows(&mut self, t: &Transition) -> bool {
        self.may(object_ref(&t.api_version, &t.kind, &t.namespace, &t.name))
            .await
    }

    pub async fn may(&mut self, r: ObjectRef) -> bool {
        if let Some(d) = self.decided.get(&r) {
            return *d;
        }
        let d = self.stores.may_read(&self.caller, &*self.store, &r).await;
        if self.decided.len() >= MAX_DECISIONS {
            self.decided.clear();
        }
        self.decided.insert(r, d);
        d
    }
}

/// A page of transitions the caller may read.
pub async fn page(
    stores: &Stores,
    caller: super::auth::Caller,
    req: pb::HistoryRequest,
) -> Result<pb::HistoryResponse, Status> {
    let (store, history) = history_of(stores, &req.cluster)?;
    let limit = match req.limit {
        0 => 500,
        n => (n as usize).min(MAX_PAGE),
    };
    let f = filter(&req);
    let mut readable = Readable::new(stores, caller, store);
    let mut out = Vec::new();
    let mut after = req.after;
    // Pages of the ring until `limit` readable ones are found or it is exhausted.
    let next = loop {
        let (got, next) = history.query(&f, after, limit - out.len());
        for t in got {
            after = t.seq;
            if readable.shows(&t).await {
                out.push(transition(&t));
            }
        }
        match next {
            Some(n) if out.len() < limit => after = n,
            Some(_) => break after,
            None => break 0,
        }
    };
    Ok(pb::HistoryResponse {
        transitions: out,
        next_after: next,
        oldest: history.oldest(),
    })
}

/// The fights the caller may read.
pub async fn fights(
    stores: &Stores,
    caller: super::auth::Caller,
    req: pb::FightsRequest,
) -> Result<pb::FightsResponse, Status> {
    let (store, history) = history_of(stores, &req.cluster)?;
    let mut readable = Readable::new(stores, caller, store);
    let mut out = Vec::new();
    for (f, active) in history.fights() {
        if (req.active_only && !active)
            || (!req.kind.is_empty() && req.kind != f.kind)
            || (!req.namespace.is_empty() && req.namespace != f.namespace)
        {
            continue;
        }
        if !readable
            .may(object_ref(&f.api_version, &f.kind, &f.namespace, &f.name))
            .await
        {
            continue;
        }
        out.push(fight(f, active));
    }
    Ok(pb::FightsResponse { fights: out })
}

/// A fight, for the wire.
pub fn fight(f: crate::history::Fight, active: bool) -> pb::Fight {
    pb::Fight {
        object: Some(pb::ObjectRef {
            api_version: f.api_version,
            kind: f.kind,
            namespace: f.namespace,
            name: f.name,
        }),
        path: f.path,
        managers: f.managers,
        flips: f.flips,
        first_seen: f.first_seen,
        last_seen: f.last_seen,
        values: f.values,
        active,
    }
}

/// The stream of transitions as they are recorded (the kept ones after `after` first, when
/// set). A subscriber that falls behind is told how many it lost and the stream ends.
pub async fn watch(
    stores: Stores,
    caller: super::auth::Caller,
    req: pb::HistoryRequest,
) -> Result<tokio::sync::mpsc::Receiver<Result<pb::Transition, Status>>, Status> {
    let (store, history) = history_of(&stores, &req.cluster)?;
    let mut rx = history.subscribe();
    let f = filter(&req);
    let (tx, out) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move {
        let mut readable = Readable::new(&stores, caller, store);
        let mut last = 0;
        if req.after > 0 {
            let mut after = req.after;
            loop {
                let (got, next) = history.query(&f, after, MAX_PAGE);
                for t in got {
                    last = t.seq;
                    if readable.shows(&t).await && tx.send(Ok(transition(&t))).await.is_err() {
                        return;
                    }
                }
                match next {
                    Some(n) => after = n,
                    None => break,
                }
            }
        }
        loop {
            // A caller that went away ends the task now, not at the next transition.
            let next = tokio::select! {
                r = rx.recv() => r,
                _ = tx.closed() => return,
            };
            let t = match next {
                Ok(t) => t,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    let _ = tx
                        .send(Err(Status::data_loss(format!(
                            "the stream fell behind and lost {n} transitions; resume with History after {last}"
                        ))))
                        .await;
                    return;
                }
                Err(_) => return,
            };
            if t.seq <= last || !f.matches(&t) {
                continue;
            }
            last = t.seq;
            if readable.shows(&t).await && tx.send(Ok(transition(&t))).await.is_err() {
                return;
            }
        }
    });
    Ok(out)
}
