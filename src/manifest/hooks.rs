//! Helm hooks: an object is a hook iff it carries the `helm.sh/hook` annotation (a comma list
//! of events, trimmed and lower-cased; Helm 4 drops a document that names an event it does not
//! know). A hook is no
//! release object: Helm runs it around the release's objects and, under the default delete
//! policy `before-hook-creation`, deletes the previous one and creates it again — it is never
//! a patch of the live hook (helm/helm `pkg/action/hooks.go`, `pkg/release/v1/util/
//! manifest_sorter.go`). werf's `werf.io/weight` and `werf.io/delete-policy` are read as nelm
//! reads them.

use crate::value::Value;
use serde::Serialize;

/// The events Helm knows (`test-success` is the old name of `test`).
const EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
    "test-success",
];

/// A hook's annotations, read.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    /// The events it runs on, as Helm reads them.
    pub events: Vec<String>,
    /// Events Helm does not know (Helm 4 then drops the whole document).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_events: Vec<String>,
    pub weight: i64,
    /// `before-hook-creation` (the default), `hook-succeeded`, `hook-failed`.
    pub delete_policies: Vec<String>,
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.str_at(&["metadata", "annotations", key])
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_ascii_lowercase())
        .filter(|x| !x.is_empty())
        .collect()
}

impl Hook {
    /// The hook `obj` is, or `None` for a release object.
    pub fn of(obj: &Value) -> Option<Hook> {
        let events = list(annotation(obj, "helm.sh/hook")?);
        let (events, unknown_events) = events
            .into_iter()
            .partition(|e| EVENTS.contains(&e.as_str()));
        // Helm: strconv.Atoi, 0 when it fails; werf's weight when Helm's is not given.
        let weight = annotation(obj, "helm.sh/hook-weight")
            .or_else(|| annotation(obj, "werf.io/weight"))
            .and_then(|w| w.trim().parse().ok())
            .unwrap_or(0);
        let mut delete_policies = annotation(obj, "helm.sh/hook-delete-policy")
            .map(list)
            .unwrap_or_default();
        if let Some(werf) = annotation(obj, "werf.io/delete-policy") {
            for p in list(werf) {
                let helm = match p.as_str() {
                    "before-creation" => "before-hook-creation",
                    "succeeded" => "hook-succeeded",
                    "failed" => "hook-failed",
                    _ => continue,
                };
                if !delete_policies.iter().any(|x| x == helm) {
                    delete_policies.push(helm.to_string());
                }
            }
        }
        if delete_policies.is_empty() {
            delete_policies.push("before-hook-creation".into());
        }
        Some(Hook {
            events,
            unknown_events,
            weight,
            delete_policies,
        })
    }

    /// True when the previous hook object is deleted before this one is created.
    pub fn recreated(&self) -> bool {
        self.delete_policies
            .iter()
            .any(|p| p == "before-hook-creation")
    }
}

#[cfg(test)]
mod tests {
    use super::Hook;
    use crate::value::yaml::parse_one;

    fn hook(annotations: &str) -> Option<Hook> {
        Hook::of(&parse_one(&format!("{{metadata: {{annotations: {annotations}}}}}")).unwrap())
    }

    #[test]
    fn annotations_as_helm_reads_them() {
        let h = hook("{helm.sh/hook: ' Pre-Upgrade, pre-install ,post-frobnicate', helm.sh/hook-weight: '-5'}")
            .unwrap();
        assert_eq!(h.events, ["pre-upgrade", "pre-install"]);
        assert_eq!(h.unknown_events, ["post-frobnicate"]);
        assert_eq!(h.weight, -5);
        assert_eq!(h.delete_policies, ["before-hook-creation"]);
        assert!(h.recreated());
        assert!(hook("{team: a}").is_none());
        let kept = hook("{helm.sh/hook: post-install, helm.sh/hook-delete-policy: hook-succeeded, helm.sh/hook-weight: x}").unwrap();
        assert!(!kept.recreated());
        assert_eq!(kept.weight, 0);
    }

    #[test]
    fn werf_weight_and_delete_policy() {
        let h = hook("{helm.sh/hook: pre-upgrade, werf.io/weight: '10', werf.io/delete-policy: 'succeeded,before-creation'}").unwrap();
        assert_eq!(h.weight, 10);
        assert_eq!(
            h.delete_policies,
            ["hook-succeeded", "before-hook-creation"]
        );
    }
}
