//! The 409 conflict error exactly as kube-apiserver writes it (message text and Status body).

use super::entry::parse_identity;
use crate::merge::Conflicts;
use crate::value::gofmt::quote;
use crate::value::{Map, Value};

/// How kube-apiserver names a manager in conflict messages (`printManager`):
/// `"name"`, `"name" with subresource "scale"`, `"name" using apps/v1`.
pub fn print_manager(key: &str) -> String {
    let Some(id) = parse_identity(key) else {
        return quote(key);
    };
    let mut s = quote(&id.manager);
    if !id.subresource.is_empty() {
        s.push_str(" with subresource ");
        s.push_str(&quote(&id.subresource));
    }
    if id.operation == "Update" {
        s.push_str(" using ");
        s.push_str(&id.api_version);
    }
    s
}

/// The message of the 409 (`Apply failed with N conflict(s): ...`); managers in identity order.
pub fn conflict_message(cs: &Conflicts) -> String {
    if cs.0.len() == 1 {
        let c = &cs.0[0];
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            print_manager(&c.manager),
            c.path
        );
    }
    let mut keys: Vec<&str> = Vec::new();
    for c in &cs.0 {
        if !keys.contains(&c.manager.as_str()) {
            keys.push(&c.manager);
        }
    }
    keys.sort_unstable();
    let mut lines = Vec::new();
    for k in keys {
        lines.push(format!("conflicts with {}:", print_manager(k)));
        for c in cs.0.iter().filter(|c| c.manager == k) {
            lines.push(format!("- {}", c.path));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        cs.0.len(),
        lines.join("\n")
    )
}

/// The `Status` body of the 409 response (`details.causes[]` with reason
/// `FieldManagerConflict`, one per manager and path).
pub fn conflict_status(cs: &Conflicts) -> Value {
    let causes: Vec<Value> =
        cs.0.iter()
            .map(|c| {
                let mut m = Map::new();
                m.insert("reason", Value::from("FieldManagerConflict"));
                m.insert(
                    "message",
                    Value::from(format!("conflict with {}", print_manager(&c.manager)).as_str()),
                );
                m.insert("field", Value::from(c.path.to_string().as_str()));
                Value::Map(m)
            })
            .collect();
    let mut details = Map::new();
    details.insert("causes", Value::List(causes));
    let mut s = Map::new();
    s.insert("kind", Value::from("Status"));
    s.insert("apiVersion", Value::from("v1"));
    s.insert("metadata", Value::Map(Map::new()));
    s.insert("status", Value::from("Failure"));
    s.insert("message", Value::from(conflict_message(cs).as_str()));
    s.insert("reason", Value::from("Conflict"));
    s.insert("details", Value::Map(details));
    s.insert("code", Value::Int(409));
    Value::Map(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fieldpath::Path;
    use crate::managedfields::{Operation, identity};
    use crate::merge::Conflict;

    #[test]
    fn messages_match_kube_apiserver() {
        let one = Conflicts(vec![Conflict {
            manager: identity("patcher", Operation::Update, "apps/v1", ""),
            path: Path::fields(&["spec", "replicas"]),
        }]);
        assert_eq!(
            conflict_message(&one),
            "Apply failed with 1 conflict: conflict with \"patcher\" using apps/v1: .spec.replicas"
        );
        let two = Conflicts(vec![
            Conflict {
                manager: identity("hpa", Operation::Update, "apps/v1", "scale"),
                path: Path::fields(&["spec", "replicas"]),
            },
            Conflict {
                manager: identity("alice", Operation::Apply, "apps/v1", ""),
                path: Path::fields(&["spec", "paused"]),
            },
        ]);
        assert_eq!(
            conflict_message(&two),
            "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.paused\nconflicts with \"hpa\" with subresource \"scale\" using apps/v1:\n- .spec.replicas"
        );
        let st = conflict_status(&two);
        assert_eq!(st.get_path(&["code"]), Some(&Value::Int(409)));
        assert_eq!(
            st.get_path(&["details", "causes"])
                .and_then(|c| c.as_list())
                .map(|c| c.len()),
            Some(2)
        );
    }
}
