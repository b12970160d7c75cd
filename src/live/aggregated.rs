//! Aggregated discovery (`apidiscovery.k8s.io/v2`, GA in Kubernetes 1.30): every group's
//! resources in two answers, `/api` and `/apis`, instead of one request per group-version —
//! what kubectl and client-go ask for first. A server that does not aggregate answers with the
//! plain group list, and discovery asks per group-version as before
//! ([`Api::resources`](super::api::Api)).

use super::discovery::ServedResource;
use crate::value::Value;

/// The Accept header asking for aggregated discovery, the plain answer accepted too.
pub const ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// The resources of an aggregated answer (`APIGroupDiscoveryList`), each group's preferred
/// version only (its first: the server orders versions by preference); `None` when the
/// answer is not one (the server does not aggregate).
pub fn resources(answer: &Value) -> Option<Vec<ServedResource>> {
    if answer.str_at(&["kind"]) != Some("APIGroupDiscoveryList") {
        return None;
    }
    let list = |v: &Value, k: &str| -> Vec<Value> {
        v.get_path(&[k])
            .and_then(Value::as_list)
            .map(<[Value]>::to_vec)
            .unwrap_or_default()
    };
    let strings = |v: &Value, k: &str| -> Vec<String> {
        list(v, k)
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let mut out = Vec::new();
    for group in list(answer, "items") {
        let name = group.str_at(&["metadata", "name"]).unwrap_or("");
        let Some(version) = list(&group, "versions").into_iter().next() else {
            continue;
        };
        let Some(v) = version.str_at(&["version"]) else {
            continue;
        };
        let api_version = if name.is_empty() {
            v.to_string()
        } else {
            format!("{name}/{v}")
        };
        for r in list(&version, "resources") {
            let (Some(plural), Some(kind)) =
                (r.str_at(&["resource"]), r.str_at(&["responseKind", "kind"]))
            else {
                continue;
            };
            let verbs = strings(&r, "verbs");
            out.push(ServedResource {
                api_version: api_version.clone(),
                kind: kind.to_string(),
                plural: plural.to_string(),
                singular: r.str_at(&["singularResource"]).unwrap_or("").to_string(),
                short_names: strings(&r, "shortNames"),
                namespaced: r.str_at(&["scope"]) == Some("Namespaced"),
                listable: verbs.iter().any(|v| v == "list"),
                watchable: ["list", "watch"]
                    .iter()
                    .all(|w| verbs.iter().any(|v| v == w)),
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::json;

    #[test]
    fn preferred_versions_and_their_resources() {
        // The shape kube-apiserver 1.36.5 answers `/apis` with (trimmed).
        let answer = json::parse(
            br#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},
            "items":[
              {"metadata":{"name":"autoscaling"},"versions":[
                {"version":"v2","resources":[{"resource":"horizontalpodautoscalers","responseKind":{"group":"","version":"","kind":"HorizontalPodAutoscaler"},"scope":"Namespaced","singularResource":"horizontalpodautoscaler","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["hpa"],"subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"HorizontalPodAutoscaler"},"verbs":["get","patch","update"]}]}]},
                {"version":"v1","resources":[{"resource":"horizontalpodautoscalers","responseKind":{"group":"","version":"","kind":"HorizontalPodAutoscaler"},"scope":"Namespaced","verbs":["list"]}]}]},
              {"metadata":{"name":"authentication.k8s.io"},"versions":[
                {"version":"v1","resources":[{"resource":"tokenreviews","responseKind":{"group":"","version":"","kind":"TokenReview"},"scope":"Cluster","singularResource":"tokenreview","verbs":["create"]}]}]}]}"#,
        )
        .unwrap();
        let r = resources(&answer).unwrap();
        assert_eq!(r.len(), 2);
        let hpa = &r[0];
        assert_eq!(
            (
                hpa.api_version.as_str(),
                hpa.kind.as_str(),
                hpa.plural.as_str()
            ),
            (
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "horizontalpodautoscalers"
            )
        );
        assert_eq!(hpa.singular, "horizontalpodautoscaler");
        assert_eq!(hpa.short_names, ["hpa"]);
        assert!(hpa.namespaced && hpa.listable && hpa.watchable);
        let tr = &r[1];
        assert_eq!(tr.api_version, "authentication.k8s.io/v1");
        assert!(!tr.namespaced && !tr.listable && !tr.watchable);
        // The plain group list: not aggregated.
        let plain = json::parse(br#"{"kind":"APIGroupList","groups":[]}"#).unwrap();
        assert!(resources(&plain).is_none());
    }
}
