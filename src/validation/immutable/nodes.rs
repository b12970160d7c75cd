//! Nodes (`ValidateNodeUpdate`, `pkg/apis/core/validation/validation.go`) and the Events of
//! `events.k8s.io/v1` (`ValidateEventUpdate`, `pkg/apis/core/validation/events.go`).

use super::{FIELD_IMMUTABLE, Rule, Update, at, forbidden, invalid, render, same};
use crate::validation::FieldError;
use crate::value::Value;

pub static RULES: [Rule; 2] = [
    Rule {
        group: "",
        kinds: &["Node"],
        versions: &[],
        source: "ValidateNodeUpdate (pkg/apis/core/validation)",
        refuses: "spec.podCIDRs (and podCIDR) changed once set; spec.providerID changed once set; spec.externalID changed",
        check: node,
    },
    Rule {
        group: "events.k8s.io",
        kinds: &["Event"],
        versions: &["v1"],
        source: "ValidateEventUpdate (pkg/apis/core/validation/events.go; only for requests through events.k8s.io/v1)",
        refuses: "through events.k8s.io/v1: regarding, reason, note, deprecatedSource, deprecatedFirstTimestamp, deprecatedLastTimestamp, deprecatedCount, type, eventTime (beyond microseconds), action, related, reportingController or reportingInstance changed (reported by their core names: involvedObject, message, source, ...)",
        check: event,
    },
];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_list)
        .map(|l| l.iter().map(|x| x.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

/// A Node's `podCIDRs` as the internal type holds them: v1's `podCIDR` wins when it differs
/// from the first of `podCIDRs`, and stands for them when they are empty
/// (`Convert_v1_NodeSpec_To_core_NodeSpec`).
fn pod_cidrs(v: &Value) -> Vec<&str> {
    let single = at(v, &["spec", "podCIDR"])
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = strings(at(v, &["spec", "podCIDRs"]));
    if !single.is_empty() && (plural.is_empty() || plural[0] != single) {
        return vec![single];
    }
    plural
}

fn node(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // The controller manager may assign CIDRs to a Node that has none.
    let (old, new) = (pod_cidrs(u.old), pod_cidrs(u.new));
    let cidr = || {
        forbidden(
            "spec.podCIDRs",
            "node updates may not change podCIDR except from \"\" to valid",
        )
    };
    if !old.is_empty() {
        if old.len() != new.len() {
            errs.push(cidr());
        } else {
            errs.extend(old.iter().zip(&new).filter(|(o, n)| o != n).map(|_| cidr()));
        }
    }
    let old_provider = u.old_str(&["spec", "providerID"]);
    if !old_provider.is_empty() && old_provider != u.new_str(&["spec", "providerID"]) {
        errs.push(forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if u.old_str(&["spec", "externalID"]) != u.new_str(&["spec", "externalID"]) {
        errs.push(forbidden("spec.externalID", "may not be updated"));
    }
    errs
}

/// How one field of an `events.k8s.io/v1` Event prints as its internal (core) field.
#[derive(Clone, Copy)]
enum Shown {
    /// A Go `string` (`%q`).
    Str,
    /// An `int32` (a zero when absent).
    Int,
    /// A `metav1.Time` (`null` when zero).
    Time,
    /// A `core.ObjectReference` or `*core.ObjectReference`; `Some`: a non-pointer struct,
    /// printed whole when absent.
    Ref(bool),
    /// A `core.EventSource` (a struct, printed whole when absent).
    Source,
}

fn event(u: &Update) -> Vec<FieldError> {
    // The events.k8s.io/v1 fields in the order ValidateEventUpdate checks their internal
    // ones (reason twice, as upstream does); eventTime comes between type and action.
    let fields: [(&str, &str, Shown); 13] = [
        ("regarding", "involvedObject", Shown::Ref(true)),
        ("reason", "reason", Shown::Str),
        ("note", "message", Shown::Str),
        ("deprecatedSource", "source", Shown::Source),
        ("deprecatedFirstTimestamp", "firstTimestamp", Shown::Time),
        ("deprecatedLastTimestamp", "lastTimestamp", Shown::Time),
        ("deprecatedCount", "count", Shown::Int),
        ("reason", "reason", Shown::Str),
        ("type", "type", Shown::Str),
        ("action", "action", Shown::Str),
        ("related", "related", Shown::Ref(false)),
        ("reportingController", "reportingController", Shown::Str),
        ("reportingInstance", "reportingInstance", Shown::Str),
    ];
    let mut errs = Vec::new();
    for (i, (key, field, shown)) in fields.into_iter().enumerate() {
        if i == 9 {
            errs.extend(event_time(u));
        }
        let (old, new) = (u.old_at(&[key]), u.new_at(&[key]));
        let changed = match shown {
            Shown::Time => !same_time(old, new),
            Shown::Int => int(old) != int(new),
            Shown::Str => {
                old.and_then(Value::as_str).unwrap_or("")
                    != new.and_then(Value::as_str).unwrap_or("")
            }
            _ => !same(old, new),
        };
        if !changed {
            continue;
        }
        let empty = Value::Map(crate::value::Map::new());
        let value = match (shown, new) {
            (Shown::Str, n) => render::string(n.and_then(Value::as_str).unwrap_or("")),
            (Shown::Int, n) => int(n).to_string(),
            (Shown::Time, Some(n)) => render::time(n),
            (Shown::Time, None) | (Shown::Ref(false), None) => "null".into(),
            (Shown::Ref(_), n) => render::internal("ObjectReference", n.unwrap_or(&empty)),
            (Shown::Source, n) => render::internal("EventSource", n.unwrap_or(&empty)),
        };
        errs.push(invalid(field, &value, FIELD_IMMUTABLE));
    }
    errs
}

fn int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Int(i)) => *i,
        _ => 0,
    }
}

/// `metav1.Time`s compare as instants (to the second, as they are stored).
fn same_time(a: Option<&Value>, b: Option<&Value>) -> bool {
    let instant = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|s| render::parse_time(s).map_or(Err(s.to_string()), |t| Ok(t.unix_timestamp())))
    };
    instant(a) == instant(b)
}

/// `eventTime` may change below the microsecond only.
fn event_time(u: &Update) -> Option<FieldError> {
    let micros = |v: Option<&Value>| {
        v.and_then(Value::as_str).map(|s| {
            render::parse_time(s)
                .map_or(Err(s.to_string()), |t| Ok(t.unix_timestamp_nanos() / 1000))
        })
    };
    let (old, new) = (u.old_at(&["eventTime"]), u.new_at(&["eventTime"]));
    if micros(old) == micros(new) {
        return None;
    }
    Some(invalid(
        "eventTime",
        &new.map_or_else(|| "null".to_string(), render::micro_time),
        FIELD_IMMUTABLE,
    ))
}
