//! Between the check's reports and the API's messages (both ways: the CLI's `--server` mode
//! renders the service's answers with the same reports as a local check).

use super::proto as pb;
use crate::check::{self, Action, Conflict, Field, ObjectReport, Report, Suggestion};
use crate::fieldpath::Path;
use crate::live::ObjectRef;
use crate::manifest::Origin;
use crate::ownership::inventory::{Inventory, ManagerSummary};
use crate::predict::{FieldConflict, OwnedField, Owner, Verdict};
use crate::value::{Value, json};
use std::sync::Arc;

fn js(v: &Option<Value>) -> String {
    v.as_ref()
        .map(|v| json::to_string(v, json::Style::PLAIN))
        .unwrap_or_default()
}

fn unjs(s: &str) -> Option<Value> {
    if s.is_empty() {
        None
    } else {
        json::parse_str(s).ok()
    }
}

pub fn owner(o: &Owner) -> pb::Owner {
    pb::Owner {
        manager: o.manager.clone(),
        operation: o.operation.clone(),
        api_version: o.api_version.clone(),
        subresource: o.subresource.clone(),
        time: o.time.clone().unwrap_or_default(),
    }
}

fn owner_back(o: &pb::Owner) -> Owner {
    Owner {
        manager: o.manager.clone(),
        operation: o.operation.clone(),
        api_version: o.api_version.clone(),
        subresource: o.subresource.clone(),
        time: (!o.time.is_empty()).then(|| o.time.clone()),
    }
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::DropField => "drop-field",
        Action::ShareValue => "share-value",
        Action::ForceSelective => "force-selective",
        Action::ForceAll => "force-all",
        Action::TransferOwnership => "transfer-ownership",
    }
}

fn action_back(s: &str) -> Action {
    match s {
        "drop-field" => Action::DropField,
        "share-value" => Action::ShareValue,
        "force-selective" => Action::ForceSelective,
        "transfer-ownership" => Action::TransferOwnership,
        _ => Action::ForceAll,
    }
}

fn conflict(c: &Conflict) -> pb::Conflict {
    pb::Conflict {
        path: c.field.path.clone(),
        line: c.line,
        owners: c.field.owners.iter().map(owner).collect(),
        current_json: js(&c.field.current),
        proposed_json: js(&c.field.proposed),
        forced: c.field.forced,
        suggestions: c
            .suggestions
            .iter()
            .map(|s| pb::Suggestion {
                action: action_name(s.action).into(),
                message: s.message.clone(),
            })
            .collect(),
    }
}

fn conflict_back(c: &pb::Conflict) -> Conflict {
    Conflict {
        field: FieldConflict {
            path: c.path.clone(),
            path_elements: Path::default(),
            owners: c.owners.iter().map(owner_back).collect(),
            current: unjs(&c.current_json),
            proposed: unjs(&c.proposed_json),
            forced: c.forced,
        },
        line: c.line,
        suggestions: c
            .suggestions
            .iter()
            .map(|s| Suggestion {
                action: action_back(&s.action),
                message: s.message.clone(),
            })
            .collect(),
    }
}

fn field(f: &Field) -> pb::OwnedField {
    pb::OwnedField {
        path: f.field.path.clone(),
        owners: f.field.owners.iter().map(owner).collect(),
        value_json: js(&f.field.value),
        line: f.line.unwrap_or(0),
    }
}

fn field_back(f: &pb::OwnedField) -> Field {
    Field {
        field: OwnedField {
            path: f.path.clone(),
            path_elements: Path::default(),
            owners: f.owners.iter().map(owner_back).collect(),
            value: unjs(&f.value_json),
        },
        line: (f.line > 0).then_some(f.line),
    }
}

fn verdict(v: &Verdict) -> pb::Verdict {
    match v {
        Verdict::Created => pb::Verdict::Created,
        Verdict::Configured => pb::Verdict::Configured,
        Verdict::Unchanged => pb::Verdict::Unchanged,
        Verdict::Conflict => pb::Verdict::Conflict,
        Verdict::Rejected => pb::Verdict::Rejected,
        Verdict::OwnershipOnly => pb::Verdict::OwnershipOnly,
        Verdict::Invalid => pb::Verdict::Unspecified,
    }
}

fn verdict_back(v: i32) -> Verdict {
    match pb::Verdict::try_from(v).unwrap_or(pb::Verdict::Unspecified) {
        pb::Verdict::Created => Verdict::Created,
        pb::Verdict::Configured => Verdict::Configured,
        pb::Verdict::Unchanged => Verdict::Unchanged,
        pb::Verdict::Conflict => Verdict::Conflict,
        pb::Verdict::Rejected => Verdict::Rejected,
        pb::Verdict::OwnershipOnly => Verdict::OwnershipOnly,
        pb::Verdict::Unspecified => Verdict::Invalid,
    }
}

pub fn object(o: &ObjectReport, cluster: &str) -> pb::ObjectPrediction {
    pb::ObjectPrediction {
        object: Some(pb::ObjectRef {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
        }),
        file: o.file.clone(),
        document: o.document as u32,
        line: o.line,
        verdict: verdict(&o.verdict) as i32,
        resource_version: o.resource_version.clone().unwrap_or_default(),
        conflicts: o.conflicts.iter().map(conflict).collect(),
        taken_over: o.taken_over.iter().map(conflict).collect(),
        shared: o.shared.iter().map(field).collect(),
        removed: o.removed.iter().map(field).collect(),
        stuck: o.stuck.iter().map(field).collect(),
        owned_fields: o.owned_fields as u32,
        message: o.message.clone().unwrap_or_default(),
        cluster: cluster.to_string(),
        rejections: o
            .rejections
            .iter()
            .map(|r| pb::Rejection {
                field: r.field.clone(),
                reason: r.reason.clone(),
                message: r.message.clone(),
                line: r.line.unwrap_or(0),
            })
            .collect(),
        not_evaluated: o.not_evaluated.clone(),
        notes: o.notes.clone(),
        hook: o.hook.as_ref().map(|h| pb::Hook {
            events: h.events.clone(),
            unknown_events: h.unknown_events.clone(),
            weight: h.weight,
            delete_policies: h.delete_policies.clone(),
            event: o.hook_event.clone().unwrap_or_default(),
        }),
    }
}

pub fn object_back(o: &pb::ObjectPrediction) -> ObjectReport {
    let r = o.object.clone().unwrap_or_default();
    let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    ObjectReport {
        object_ref: ObjectRef {
            group: group.to_string(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        },
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
        file: o.file.clone(),
        document: o.document as usize,
        item: None,
        line: o.line,
        verdict: verdict_back(o.verdict),
        resource_version: (!o.resource_version.is_empty()).then(|| o.resource_version.clone()),
        conflicts: o.conflicts.iter().map(conflict_back).collect(),
        taken_over: o.taken_over.iter().map(conflict_back).collect(),
        shared: o.shared.iter().map(field_back).collect(),
        removed: o.removed.iter().map(field_back).collect(),
        stuck: o.stuck.iter().map(field_back).collect(),
        owned_fields: o.owned_fields as usize,
        message: (!o.message.is_empty()).then(|| o.message.clone()),
        rejections: o
            .rejections
            .iter()
            .map(|r| crate::validation::FieldError {
                field: r.field.clone(),
                reason: r.reason.clone(),
                message: r.message.clone(),
                line: (r.line > 0).then_some(r.line),
            })
            .collect(),
        not_evaluated: o.not_evaluated.clone(),
        notes: o.notes.clone(),
        hook: o.hook.as_ref().map(|h| crate::manifest::hooks::Hook {
            events: h.events.clone(),
            unknown_events: h.unknown_events.clone(),
            weight: h.weight,
            delete_policies: h.delete_policies.clone(),
        }),
        hook_event: o
            .hook
            .as_ref()
            .map(|h| h.event.clone())
            .filter(|e| !e.is_empty()),
        error: None,
        origin: Origin {
            file: Arc::from(o.file.as_str()),
            doc: o.document as usize,
            item: None,
            line: o.line,
        },
        live_origin: None,
    }
}

pub fn summary(r: &Report) -> pb::Summary {
    let s = r.summary();
    pb::Summary {
        objects: s.objects as u32,
        created: s.created as u32,
        configured: s.configured as u32,
        unchanged: s.unchanged as u32,
        conflicted: s.conflicted as u32,
        conflicts: s.conflicts as u32,
        taken_over: s.taken_over as u32,
        shared: s.shared as u32,
        removed: s.removed as u32,
        stuck: s.stuck as u32,
        rejected: s.rejected as u32,
        ownership_only: s.ownership_only as u32,
    }
}

pub fn cluster_prediction(cluster: &str, r: &Report) -> pb::ClusterPrediction {
    pb::ClusterPrediction {
        cluster: cluster.to_string(),
        source: r.source.clone(),
        summary: Some(summary(r)),
        objects: r.objects.iter().map(|o| object(o, cluster)).collect(),
        hooks: r.hooks.as_ref().map(hook_plan),
    }
}

/// A report from one cluster's answer (field manager and force as asked).
pub fn report_back(c: &pb::ClusterPrediction, field_manager: &str, force: check::Force) -> Report {
    Report {
        field_manager: field_manager.to_string(),
        force,
        source: format!("{} via fieldguard service", c.source),
        objects: c.objects.iter().map(object_back).collect(),
        hooks: c.hooks.as_ref().and_then(|h| {
            Some(check::HookPlan {
                operation: check::hooks::Operation::parse(&h.operation).ok()?,
                inferred: Some(h.inferred.clone()).filter(|s| !s.is_empty()),
                not_run: h.not_run.clone(),
            })
        }),
    }
}

/// The hooks of a prediction, for the wire.
pub fn hook_plan(h: &check::HookPlan) -> pb::HookPlan {
    pb::HookPlan {
        operation: h.operation.as_str().to_string(),
        inferred: h.inferred.clone().unwrap_or_default(),
        not_run: h.not_run.clone(),
    }
}

pub fn managers(inv: &Inventory) -> pb::ManagersResponse {
    pb::ManagersResponse {
        objects: inv.objects as u32,
        managers: inv.managers.iter().map(manager).collect(),
    }
}

fn manager(m: &ManagerSummary) -> pb::ManagerSummary {
    pb::ManagerSummary {
        manager: m.manager.clone(),
        operations: m.operations.iter().cloned().collect(),
        objects: m.objects as u32,
        fields: m.fields as u64,
        newest: m.newest.clone().unwrap_or_default(),
        flags: m
            .flags
            .iter()
            .map(|f| pb::ManagerFlag {
                kind: f.kind.to_string(),
                message: f.message.clone(),
            })
            .collect(),
    }
}
