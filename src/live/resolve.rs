//! The one resolver from a kind as a person writes it (`deploy`, `deployments`,
//! `Deployment`, `deployments.apps`, a CRD's short name) to the type it names. Every source
//! asks it: a cluster and the watch cache with what discovery says of each resource, a
//! snapshot with what its objects and kubectl's built-in short names say.

/// What a source knows of a type's names.
#[derive(Clone, Copy, Debug)]
pub struct Names<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    /// The resource (plural) discovery serves it as; `None` when the source has no discovery
    /// (a snapshot), where kubectl's regular plurals of the kind are accepted.
    pub plural: Option<&'a str>,
    pub singular: &'a str,
    pub short_names: &'a [String],
}

/// True if `written` names this type: its kind, plural, singular or a short name, matched
/// case-insensitively, optionally qualified by its group (`deployments.apps`).
pub fn names(written: &str, n: &Names<'_>) -> bool {
    let (name, group) = match written.split_once('.') {
        Some((name, group)) => (name, Some(group)),
        None => (written, None),
    };
    if group.is_some_and(|g| !g.eq_ignore_ascii_case(n.group)) {
        return false;
    }
    let w = name.to_ascii_lowercase();
    let kind = n.kind.to_ascii_lowercase();
    if w == kind || (!n.singular.is_empty() && w == n.singular.to_ascii_lowercase()) {
        return true;
    }
    let plural_matches = match n.plural {
        Some(p) => w == p.to_ascii_lowercase(),
        None => w == format!("{kind}s") || w == format!("{kind}es"),
    };
    plural_matches
        || n.short_names.iter().any(|s| s.eq_ignore_ascii_case(&w))
        || (n.group.is_empty() || builtin_group(n.group))
            && builtin_short_name(&kind).is_some_and(|s| s == w)
}

/// Groups whose kinds have kubectl's built-in short names.
fn builtin_group(group: &str) -> bool {
    matches!(
        group,
        "apps" | "autoscaling" | "networking.k8s.io" | "policy" | "apiextensions.k8s.io"
    )
}

/// kubectl's short names of built-in kinds (discovery serves them too; a snapshot has none).
fn builtin_short_name(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "deployment" => "deploy",
        "service" => "svc",
        "configmap" => "cm",
        "namespace" => "ns",
        "horizontalpodautoscaler" => "hpa",
        "daemonset" => "ds",
        "statefulset" => "sts",
        "replicaset" => "rs",
        "serviceaccount" => "sa",
        "persistentvolumeclaim" => "pvc",
        "persistentvolume" => "pv",
        "ingress" => "ing",
        "customresourcedefinition" => "crd",
        "poddisruptionbudget" => "pdb",
        "pod" => "po",
        "node" => "no",
        "endpoints" => "ep",
        "event" => "ev",
        "limitrange" => "limits",
        "resourcequota" => "quota",
        "replicationcontroller" => "rc",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(plural: Option<&str>) -> Names<'_> {
        Names {
            group: "apps",
            kind: "Deployment",
            plural,
            singular: "deployment",
            short_names: &[],
        }
    }

    #[test]
    fn kubectl_spellings_name_the_kind() {
        for w in [
            "deploy",
            "deployment",
            "Deployment",
            "deployments",
            "deployments.apps",
            "DEPLOY",
        ] {
            assert!(names(w, &deployment(Some("deployments"))), "{w}");
            assert!(names(w, &deployment(None)), "{w} (no discovery)");
        }
        for w in ["deployments.batch", "deploys", "dep", "svc"] {
            assert!(!names(w, &deployment(Some("deployments"))), "{w}");
        }
    }

    #[test]
    fn discovery_names_win_over_regular_plurals() {
        let short = ["wg".to_string()];
        let widget = Names {
            group: "example.com",
            kind: "Widget",
            plural: Some("widgetz"),
            singular: "widget",
            short_names: &short,
        };
        assert!(names("widgetz", &widget));
        assert!(names("wg.example.com", &widget));
        assert!(!names("widgets", &widget), "discovery said widgetz");
        // A CRD's kind never borrows a built-in's short name.
        let d = Names {
            group: "example.com",
            kind: "Deployment",
            plural: Some("deployments"),
            singular: "deployment",
            short_names: &[],
        };
        assert!(!names("deploy", &d));
    }
}
