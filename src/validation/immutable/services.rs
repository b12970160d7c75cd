//! Services (`ValidateServiceUpdate`, `pkg/apis/core/validation/validation.go`), with what
//! the Service REST layer does before it validates an update
//! (`pkg/registry/core/service/storage`): `beginUpdate` keeps the allocated cluster IPs and
//! health check port an update leaves out, keeps `clusterIP` and `clusterIPs` in step, and
//! its IP allocator (`initIPFamilyFields`) refuses cluster IPs that do not match the IP
//! families (or each other) before the update's validation runs — then its errors are all the
//! server answers. What the allocator decides from the cluster's configuration (which IP
//! families it serves, its default family, whether an IP is free and in range) is not known
//! here and left out.

use super::{FIELD_IMMUTABLE, Rule, Update, at, forbidden, invalid, render, required};
use crate::validation::FieldError;
use crate::value::Value;
use std::cmp::Ordering;
use std::net::IpAddr;

pub static RULES: [Rule; 1] = [Rule {
    group: "",
    kinds: &["Service"],
    versions: &[],
    source: "ValidateServiceUpdate (validateUpgradeDowngradeClusterIPs, validateUpgradeDowngradeIPFamilies, validateLoadBalancerClassField, validateServiceExternalTrafficFieldsUpdate), after the REST layer's patchAllocatedValues, normalizeClusterIPs and the IP allocator's initIPFamilyFields with ValidateServiceClusterIPsRelatedFields (pkg/registry/core/service/storage), and the strategy's dropTypeDependentFields",
    refuses: "cluster IPs that do not match the IP families or each other (refused by the IP allocator before validation); spec.clusterIP(s) and spec.ipFamilies changed (not to, from or on ExternalName; headless may change families); spec.loadBalancerClass changed on a LoadBalancer, or set on another type; spec.healthCheckNodePort changed while one is needed. A manifest that omits clusterIP keeps the allocated one",
    check: service,
}];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_list)
        .map(|l| l.iter().map(|x| x.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

/// What a Service's validation sees of one version of it.
struct Svc<'a> {
    ty: &'a str,
    cluster_ip: &'a str,
    cluster_ips: Vec<&'a str>,
    families: Vec<&'a str>,
    family_policy: Option<&'a str>,
    lb_class: Option<&'a str>,
    traffic_policy: &'a str,
    hc_port: i64,
    selector: bool,
}

impl<'a> Svc<'a> {
    fn of(v: &'a Value) -> Svc<'a> {
        let s = |k: &str| at(v, &["spec", k]).and_then(Value::as_str);
        Svc {
            ty: s("type").unwrap_or("ClusterIP"),
            cluster_ip: s("clusterIP").unwrap_or(""),
            cluster_ips: strings(at(v, &["spec", "clusterIPs"])),
            families: strings(at(v, &["spec", "ipFamilies"])),
            family_policy: s("ipFamilyPolicy"),
            lb_class: s("loadBalancerClass"),
            traffic_policy: s("externalTrafficPolicy").unwrap_or(""),
            hc_port: match at(v, &["spec", "healthCheckNodePort"]) {
                Some(Value::Int(i)) => *i,
                _ => 0,
            },
            selector: at(v, &["spec", "selector"])
                .and_then(Value::as_map)
                .is_some_and(|m| !m.is_empty()),
        }
    }

    fn external_name(&self) -> bool {
        self.ty == "ExternalName"
    }

    fn headless(&self) -> bool {
        self.cluster_ips == ["None"]
    }

    /// `apiservice.NeedsHealthCheck`.
    fn needs_health_check(&self) -> bool {
        self.ty == "LoadBalancer" && matches!(self.traffic_policy, "Local")
    }

    fn ips_json(&self) -> String {
        render::json(&Value::List(
            self.cluster_ips.iter().map(|s| Value::from(*s)).collect(),
        ))
    }
}

/// The old Service and the new one as the REST layer's `beginUpdate` leaves them before the
/// allocator: `patchAllocatedValues` (what the server allocated stays when the update leaves
/// it out) and `normalizeClusterIPs` (the singular and plural fields kept in step).
fn prepared<'a>(u: &Update<'a>) -> (Svc<'a>, Svc<'a>) {
    let old = Svc::of(u.old);
    let mut new = Svc::of(u.new);
    if !old.external_name() && !new.external_name() {
        if new.cluster_ip.is_empty() {
            new.cluster_ip = old.cluster_ip;
        }
        if new.cluster_ips.is_empty() && !old.cluster_ips.is_empty() {
            new.cluster_ips = old.cluster_ips.clone();
        }
    }
    if old.needs_health_check() && new.needs_health_check() && new.hc_port == 0 {
        new.hc_port = old.hc_port;
    }
    // normalizeClusterIPs (update): keep the singular and plural fields in step.
    if !old.cluster_ips.is_empty() && new.cluster_ips.is_empty() && old.cluster_ip == new.cluster_ip
    {
        new.cluster_ips = old.cluster_ips.clone();
    }
    if old.cluster_ip != new.cluster_ip && old.cluster_ips == new.cluster_ips {
        if !old.cluster_ip.is_empty() && new.cluster_ip.is_empty() {
            new.cluster_ips.clear();
        } else {
            new.cluster_ips = vec![new.cluster_ip];
        }
    }
    (old, new)
}

fn service(u: &Update) -> Vec<FieldError> {
    let (old, mut new) = prepared(u);
    // The IP allocator (initIPFamilyFields) defaults the policy and prepares single-stack
    // updates; it refused already what it refuses.
    allocator_prepare(&old, &mut new);
    // The strategy's dropTypeDependentFields: a class the update leaves as it was goes with
    // the LoadBalancer type.
    if old.ty == "LoadBalancer" && new.ty != "LoadBalancer" && old.lb_class == new.lb_class {
        new.lb_class = None;
    }
    let mut errs = Vec::new();
    let policy = |n: &Svc| render::json_str(n.family_policy);
    // validateUpgradeDowngradeClusterIPs
    if !(new.external_name() || old.external_name() || (old.headless() && new.headless())) {
        let (o, n) = (&old.cluster_ips, &new.cluster_ips);
        let at = |i: usize| format!("spec.clusterIPs[{i}]");
        match o.len().cmp(&n.len()) {
            Ordering::Equal => {
                for (i, ip) in o.iter().enumerate() {
                    if *ip != n[i] {
                        errs.push(invalid(&at(i), &new.ips_json(), "may not change once set"));
                    }
                }
            }
            Ordering::Greater => {
                if n.is_empty() {
                    errs.push(invalid(
                        &at(0),
                        &new.ips_json(),
                        "primary clusterIP can not be unset",
                    ));
                }
                if !o.is_empty() && !n.is_empty() && n[0] != o[0] {
                    errs.push(invalid(&at(0), &new.ips_json(), "may not change once set"));
                }
                if n.len() == 1 && new.family_policy != Some("SingleStack") {
                    errs.push(invalid(
                        "spec.ipFamilyPolicy",
                        &policy(&new),
                        "must be set to 'SingleStack' when releasing the secondary clusterIP",
                    ));
                }
            }
            Ordering::Less => {
                if !o.is_empty() && n[0] != o[0] {
                    errs.push(invalid(&at(0), &new.ips_json(), "may not change once set"));
                }
            }
        }
    }
    // validateUpgradeDowngradeIPFamilies (upstream reports every family at index 0, and the
    // cluster IPs as the value when the number of families changes).
    if !new.external_name() && !old.external_name() && !old.headless() && !new.headless() {
        let (o, n) = (&old.families, &new.families);
        let families = render::json(&Value::List(n.iter().map(|s| Value::from(*s)).collect()));
        let at0 = "spec.ipFamilies[0]";
        match o.len().cmp(&n.len()) {
            Ordering::Equal => {
                for (i, f) in o.iter().enumerate() {
                    if *f != n[i] {
                        errs.push(invalid(at0, &families, "may not change once set"));
                    }
                }
            }
            Ordering::Greater => {
                if new.cluster_ips.is_empty() {
                    errs.push(invalid(at0, &families, "primary ipFamily can not be unset"));
                }
                if !n.is_empty() && n[0] != o[0] {
                    errs.push(invalid(at0, &new.ips_json(), "may not change once set"));
                }
                if n.len() == 1 && new.family_policy != Some("SingleStack") {
                    errs.push(invalid(
                        "spec.ipFamilyPolicy",
                        &policy(&new),
                        "must be set to 'SingleStack' when releasing the secondary ipFamily",
                    ));
                }
            }
            Ordering::Less => {
                if !o.is_empty() && !n.is_empty() && n[0] != o[0] {
                    errs.push(invalid(at0, &new.ips_json(), "may not change once set"));
                }
            }
        }
    }
    // validateLoadBalancerClassField (run again by validateService: the server reports its
    // errors twice)
    if old.ty == "LoadBalancer" && new.ty == "LoadBalancer" && old.lb_class != new.lb_class {
        errs.push(invalid(
            "spec.loadBalancerClass",
            &render::json_str(new.lb_class),
            "may not change once set",
        ));
    }
    if new.ty != "LoadBalancer" && new.lb_class.is_some() {
        errs.push(forbidden(
            "spec.loadBalancerClass",
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    // validateServiceExternalTrafficFieldsUpdate
    if old.needs_health_check() && new.needs_health_check() && old.hc_port != new.hc_port {
        errs.push(forbidden("spec.healthCheckNodePort", FIELD_IMMUTABLE));
    }
    errs
}

/// An IP as `netutils.ParseIPSloppy` reads it (IPv4 octets may have leading zeros).
fn parse_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (o, p) in out.iter_mut().zip(&octets) {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    Some(IpAddr::from(out))
}

/// `netutils.IsIPv6String`: an IP that is not an IPv4 one (an IPv4-mapped IPv6 address is
/// IPv4).
fn is_ipv6(s: &str) -> bool {
    match parse_sloppy(s) {
        Some(IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_none(),
        _ => false,
    }
}

/// `familyOf`.
fn family_of(s: &str) -> Option<&'static str> {
    match parse_sloppy(s)? {
        IpAddr::V4(_) => Some("IPv4"),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => Some("IPv4"),
        IpAddr::V6(_) => Some("IPv6"),
    }
}

/// `IsValidIPForLegacyField` with StrictIPCIDRValidation (beta, on in 1.36).
fn ip_errors(field: &str, ip: &str, old: &[&str]) -> Vec<FieldError> {
    if old.contains(&ip) {
        return Vec::new();
    }
    let value = render::string(ip);
    let Some(parsed) = parse_sloppy(ip) else {
        return vec![invalid(
            field,
            &value,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        )];
    };
    let mut errs = Vec::new();
    if ip.parse::<IpAddr>().is_err() {
        errs.push(invalid(field, &value, "must not have leading 0s"));
    }
    if let IpAddr::V6(v6) = parsed
        && v6.to_ipv4_mapped().is_some()
    {
        errs.push(invalid(
            field,
            &value,
            "must not be an IPv4-mapped IPv6 address",
        ));
    }
    errs
}

fn quoted_list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| render::string(v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ValidateServiceClusterIPsRelatedFields(new, old)`, which the allocator runs first.
fn cluster_ips_related(new: &Svc, old: &Svc) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if new.external_name() {
        return errs;
    }
    let ips = "spec.clusterIPs";
    if !new.cluster_ip.is_empty() {
        if new.cluster_ips.is_empty() {
            errs.push(required(ips, ""));
        } else if new.cluster_ips[0] != new.cluster_ip {
            errs.push(invalid(
                ips,
                &new.ips_json(),
                "first value must match `clusterIP`",
            ));
        }
    } else if !new.cluster_ips.is_empty() {
        errs.push(invalid(
            ips,
            &new.ips_json(),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, f) in new.families.iter().enumerate() {
        let field = format!("spec.ipFamilies[{i}]");
        if !["IPv4", "IPv6"].contains(f) {
            errs.push(not_supported(&field, f, &["IPv4", "IPv6"]));
        }
        if seen.contains(f) {
            errs.push(FieldError {
                field,
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {}", render::string(f)),
                line: None,
            });
        }
        seen.push(f);
    }
    if let Some(p) = new.family_policy {
        let supported = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if !supported.contains(&p) {
            errs.push(not_supported("spec.ipFamilyPolicy", p, &supported));
        }
    }
    let mut invalid_ips = false;
    for (i, ip) in new.cluster_ips.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if new.cluster_ips.len() > 1 {
                invalid_ips = true;
                errs.push(invalid(
                    ips,
                    &new.ips_json(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let e = ip_errors(&format!("{ips}[{i}]"), ip, &old.cluster_ips);
        invalid_ips |= !e.is_empty();
        errs.extend(e);
    }
    if new.cluster_ips.len() > 2 {
        errs.push(invalid(
            ips,
            &new.ips_json(),
            "may only hold up to 2 values",
        ));
    }
    if invalid_ips {
        return errs;
    }
    if new.cluster_ips.len() > 1 {
        let families: Vec<_> = new.cluster_ips.iter().map(|ip| family_of(ip)).collect();
        let dual = families.len() == 2 && families[0] != families[1];
        if !dual {
            errs.push(invalid(
                ips,
                &new.ips_json(),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !new.headless() && !new.cluster_ips.is_empty() && !new.families.is_empty() {
        for (i, (ip, f)) in new.cluster_ips.iter().zip(&new.families).enumerate() {
            let v6 = is_ipv6(ip);
            let want = match *f {
                "IPv4" if v6 => "IPv4",
                "IPv6" if !v6 => "IPv6",
                _ => continue,
            };
            errs.push(invalid(
                &format!("{ips}[{i}]"),
                &render::string(ip),
                &format!("expected an {want} value as indicated by `ipFamilies[{i}]`"),
            ));
        }
    }
    errs
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
    FieldError {
        field: field.to_string(),
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            render::string(value),
            quoted_list(supported)
        ),
        line: None,
    }
}

/// `isMatchingPreferDualStackClusterIPFields`: nothing for the allocator to do.
fn matching_prefer_dual_stack(new: &Svc, old: &Svc) -> bool {
    let pds = Some("PreferDualStack");
    new.family_policy.is_some()
        && old.ty == new.ty
        && ["ClusterIP", "NodePort", "LoadBalancer"].contains(&new.ty)
        && new.family_policy == pds
        && (old.family_policy.is_none() || old.family_policy == pds)
        && old.cluster_ips == new.cluster_ips
        && old.families == new.families
}

/// The ipFamilyPolicy the allocator gives an update that sets none.
fn default_policy<'a>(new: &Svc<'a>, old: &Svc<'a>) -> Option<&'a str> {
    new.family_policy
        .or(old.family_policy)
        .or(Some(if new.cluster_ip == "None" && !new.selector {
            "RequireDualStack"
        } else {
            "SingleStack"
        }))
}

/// What the REST layer refuses of a Service's update before it validates it (the errors are
/// then all the server answers): the IP allocator's `initIPFamilyFields`, up to what it
/// decides from the cluster's configuration.
pub fn begin_update(u: &Update) -> Vec<FieldError> {
    let (old, mut new) = prepared(u);
    if new.external_name() || matching_prefer_dual_stack(&new, &old) {
        return Vec::new();
    }
    new.family_policy = default_policy(&new, &old);
    let errs = cluster_ips_related(&new, &old);
    if !errs.is_empty() {
        return errs;
    }
    let mut errs = Vec::new();
    let policy = render::json_str(new.family_policy);
    let single = new.family_policy == Some("SingleStack");
    if !single {
        if !new.cluster_ips.is_empty() && new.cluster_ips.len() < old.cluster_ips.len() {
            errs.push(invalid(
                "spec.ipFamilyPolicy",
                &policy,
                "must be 'SingleStack' to release the secondary cluster IP",
            ));
        }
        if !new.families.is_empty() && new.families.len() < old.families.len() {
            errs.push(invalid(
                "spec.ipFamilyPolicy",
                &policy,
                "must be 'SingleStack' to release the secondary IP family",
            ));
        }
    }
    allocator_prepare(&old, &mut new);
    if single {
        if new.cluster_ips.len() == 2 {
            errs.push(invalid(
                "spec.ipFamilyPolicy",
                &policy,
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ));
        }
        if new.families.len() == 2 {
            errs.push(invalid(
                "spec.ipFamilyPolicy",
                &policy,
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ));
        }
    }
    errs
}

/// What the allocator makes of the new Service's IP fields before validation (when it does
/// not refuse it): the policy defaulted, a single-stack update's unchanged secondary IP and
/// family dropped, the families of the cluster IPs that name none added (as if the cluster
/// served them).
fn allocator_prepare<'a>(old: &Svc<'a>, new: &mut Svc<'a>) {
    if new.external_name() || matching_prefer_dual_stack(new, old) {
        return;
    }
    new.family_policy = default_policy(new, old);
    if new.family_policy == Some("SingleStack") {
        if old.cluster_ips == new.cluster_ips && new.cluster_ips.len() > 1 {
            new.cluster_ips.truncate(1);
        }
        if old.families == new.families && new.families.len() > 1 {
            new.families.truncate(1);
        }
    }
    for (i, ip) in new.cluster_ips.clone().into_iter().enumerate() {
        if ip == "None" {
            break;
        }
        if i >= new.families.len()
            && let Some(f) = family_of(ip)
        {
            new.families.push(f);
        }
    }
}
