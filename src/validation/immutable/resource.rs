//! Dynamic resource allocation (`resource.k8s.io`, `pkg/apis/resource/validation`): a
//! ResourceClaim's and a ResourceClaimTemplate's spec may not change, nor a ResourceSlice's
//! driver, pool name and node.
//!
//! The specs print as their internal types, which the Go shapes lack: they are printed as the
//! versioned types' Go shapes would ([`super::render::internal_of`]), which is the internal
//! types' for `v1` and `v1beta2` (the same fields, in the same order); `v1beta1`'s requests
//! are shaped otherwise, so its claims and templates are left out. The defaults the server
//! gives a request (`SetDefaults_ExactDeviceRequest`: allocation mode `ExactCount`, count 1;
//! tolerations' operator `Equal`), which a manifest's atomic `requests` list drops from the
//! merged object, are filled in here before comparing.

use super::{FIELD_IMMUTABLE, Rule, Update, at, invalid, render, same};
use crate::validation::FieldError;
use crate::value::{Map, Value};

pub static RULES: [Rule; 3] = [
    Rule {
        group: "resource.k8s.io",
        kinds: &["ResourceClaim"],
        versions: &["v1", "v1beta2"],
        source: "ValidateResourceClaimUpdate (pkg/apis/resource/validation)",
        refuses: "spec changed",
        check: claim,
    },
    Rule {
        group: "resource.k8s.io",
        kinds: &["ResourceClaimTemplate"],
        versions: &["v1", "v1beta2"],
        source: "ValidateResourceClaimTemplateUpdate (pkg/apis/resource/validation)",
        refuses: "spec (the claim's metadata and spec) changed",
        check: template,
    },
    Rule {
        group: "resource.k8s.io",
        kinds: &["ResourceSlice"],
        versions: &[],
        source: "ValidateResourceSliceUpdate (pkg/apis/resource/validation)",
        refuses: "spec.pool.name, spec.driver or spec.nodeName changed",
        check: slice,
    },
];

/// `SetDefaults_ExactDeviceRequest`, `SetDefaults_DeviceSubRequest` and the tolerations'
/// operator, on a claim spec's requests.
fn defaulted_claim_spec(spec: Option<&Value>) -> Value {
    let mut spec = spec.cloned().unwrap_or(Value::Map(Map::new()));
    fn request(r: &mut Map) {
        if r.get("allocationMode")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            r.insert("allocationMode", Value::from("ExactCount"));
        }
        if r.get("allocationMode").and_then(Value::as_str) == Some("ExactCount")
            && matches!(
                r.get("count"),
                None | Some(Value::Null) | Some(Value::Int(0))
            )
        {
            r.insert("count", Value::Int(1));
        }
        if let Some(Value::List(ts)) = r.get_mut("tolerations") {
            for t in ts.iter_mut().filter_map(Value::as_map_mut) {
                if t.get("operator")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    t.insert("operator", Value::from("Equal"));
                }
            }
        }
    }
    let requests = spec
        .as_map_mut()
        .and_then(|m| m.get_mut("devices"))
        .and_then(Value::as_map_mut)
        .and_then(|d| d.get_mut("requests"));
    if let Some(Value::List(requests)) = requests {
        for r in requests.iter_mut().filter_map(Value::as_map_mut) {
            if let Some(exactly) = r.get_mut("exactly").and_then(Value::as_map_mut) {
                request(exactly);
            }
            if let Some(Value::List(subs)) = r.get_mut("firstAvailable") {
                subs.iter_mut()
                    .filter_map(Value::as_map_mut)
                    .for_each(request);
            }
        }
    }
    spec
}

/// A template's spec (its claim's metadata and spec) with the claim spec defaulted.
fn defaulted_template_spec(spec: Option<&Value>) -> Value {
    let mut spec = spec.cloned().unwrap_or(Value::Map(Map::new()));
    if let Some(m) = spec.as_map_mut() {
        let inner = defaulted_claim_spec(m.get("spec").filter(|x| !x.is_null()));
        m.insert("spec", inner);
    }
    spec
}

fn versioned(u: &Update) -> String {
    format!("resource.{}", u.version)
}

fn claim(u: &Update) -> Vec<FieldError> {
    let old = defaulted_claim_spec(u.old_at(&["spec"]));
    let new = defaulted_claim_spec(at(u.decoded, &["spec"]));
    if same(Some(&old), Some(&new)) {
        return vec![];
    }
    vec![invalid(
        "spec",
        &render::internal_of("resource", &versioned(u), "ResourceClaimSpec", &new),
        FIELD_IMMUTABLE,
    )]
}

fn template(u: &Update) -> Vec<FieldError> {
    let old = defaulted_template_spec(u.old_at(&["spec"]));
    let new = defaulted_template_spec(at(u.decoded, &["spec"]));
    if same(Some(&old), Some(&new)) {
        return vec![];
    }
    vec![invalid(
        "spec",
        &render::internal_of("resource", &versioned(u), "ResourceClaimTemplateSpec", &new),
        FIELD_IMMUTABLE,
    )]
}

fn slice(u: &Update) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (path, field) in [
        (&["spec", "pool", "name"][..], "spec.pool.name"),
        (&["spec", "driver"][..], "spec.driver"),
    ] {
        let new = u.new_str(path);
        if u.old_str(path) != new {
            errs.push(invalid(field, &render::string(new), FIELD_IMMUTABLE));
        }
    }
    // A `*string` in the internal type (v1beta1's `string` converts "" to nil).
    let node = ["spec", "nodeName"];
    let beta1 = u.version == "v1beta1";
    fn pointer(v: Option<&Value>, beta1: bool) -> Option<&str> {
        v.and_then(Value::as_str)
            .filter(|s| !beta1 || !s.is_empty())
    }
    let new = pointer(u.new_at(&node), beta1);
    if pointer(u.old_at(&node), beta1) != new {
        errs.push(invalid(
            "spec.nodeName",
            &render::json_str(new),
            FIELD_IMMUTABLE,
        ));
    }
    errs
}
