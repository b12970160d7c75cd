//! The apiserver's validation of every object's metadata (`ValidateObjectMeta`): the name by
//! its kind's rule, the namespace, label keys and values, annotation keys and their total size.
//! An object that fails is refused (422) whatever else it holds — and fieldguard refuses it
//! first, before any request is built from its name: a name is a path segment of every URL
//! that concerns the object.
//!
//! Messages are the apiserver's (Kubernetes 1.36), word for word: names through
//! `k8s.io/apimachinery/pkg/util/validation` (lengths in "characters"), label keys and values
//! through `pkg/api/validate/content` (lengths in "bytes", since 1.35); checked against the
//! real apiserver for custom resources (`tests/real/differential.rs`).

use super::FieldError;
use crate::value::gofmt::quote;
use crate::value::{Map, Value};

/// How a kind's names are validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds, custom resources.
    Subdomain,
    /// `NameIsDNSLabel`: Namespaces.
    Label,
    /// `NameIsDNS1035Label`: Services.
    Dns1035,
    /// `ValidatePathSegmentName`: RBAC kinds (their names may hold `:`).
    PathSegment,
}

/// The rule the apiserver applies to names of `group`/`kind`.
pub fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Dns1035,
        ("apps", "StatefulSet") => NameRule::Label,
        (
            "rbac.authorization.k8s.io",
            "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
        ) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
/// `TotalAnnotationSizeLimitB`.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// `validation.RegexError`.
pub(super) fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = msg.to_string();
    if examples.is_empty() {
        out.push_str(&format!(" (regex used for validation is '{fmt}')"));
        return out;
    }
    out.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

/// `MaxLenError` of names (`util/validation`).
pub(super) fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `MaxLenError` of label keys and values (`validate/content`, Kubernetes 1.35 and later).
fn max_bytes(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

fn alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn matches_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && alnum_lower(b[0])
        && alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| alnum_lower(c) || c == b'-')
}

/// `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63));
    }
    if !matches_label(s) && s.split('.').all(matches_label) {
        errs.push("must not contain dots".to_string());
    } else if !matches_label(s) {
        errs.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len(253));
    }
    if !s.split('.').all(matches_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63));
    }
    if !(matches_label(s) && s.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsValidPathSegmentName`.
pub fn path_segment(s: &str) -> Vec<String> {
    for bad in [".", ".."] {
        if s == bad {
            return vec![format!("may not be '{bad}'")];
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| s.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn matches_qualified(s: &str) -> bool {
    let b = s.as_bytes();
    let an = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && an(b[0])
        && an(b[b.len() - 1])
        && b.iter().all(|&c| an(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName` / `content.IsLabelKey` (label keys; annotation keys lower-cased first).
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push(format!("prefix part {}", max_bytes(253)));
                }
                if !prefix.split('.').all(matches_label) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_MSG,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_bytes(63)));
    }
    if !matches_qualified(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue` / `content.IsLabelValue`.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_bytes(63));
    }
    if !(s.is_empty() || matches_qualified(s)) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// The longest field manager name the apiserver takes (`FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_BYTES: usize = 128;

/// `ValidateFieldManager`: the apiserver refuses every write whose field manager is longer
/// than [`FIELD_MANAGER_MAX_BYTES`] or holds a character Go does not print (one error per
/// such character, at its byte position), before it reads the object. `None`: accepted.
/// `Some`: the server's 422 message for a server-side apply
/// (`PatchOptions.meta.k8s.io "" is invalid: ...`, checked against kube-apiserver 1.36).
pub fn field_manager_refusal(manager: &str) -> Option<String> {
    let mut errors = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_BYTES {
        errors.push(FieldError {
            field: "fieldManager".into(),
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: may not be more than {FIELD_MANAGER_MAX_BYTES} bytes"),
            line: None,
        });
    }
    // Each character error repeats the whole name: spelled out for names of a sane length
    // only (past 1 KiB, the length alone refuses it), and at most 16 of them.
    let spelled = if manager.len() <= 1024 { manager } else { "" };
    for (i, c) in spelled
        .char_indices()
        .filter(|(_, c)| !crate::value::gofmt::is_go_printable(*c))
        .take(16)
    {
        errors.push(invalid(
            "fieldManager",
            manager,
            format!("invalid character U+{:04X} (at position {i})", c as u32),
        ));
    }
    (!errors.is_empty()).then(|| super::invalid_message("PatchOptions", "meta.k8s.io", "", &errors))
}

pub(super) fn invalid(field: &str, value: &str, msg: String) -> FieldError {
    FieldError {
        field: field.to_string(),
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {msg}", quote(value)),
        line: None,
    }
}

/// The errors of an object's name (by `rule`), with the `metadata.name` field.
pub fn name_errors(name: &str, rule: NameRule) -> Vec<FieldError> {
    let msgs = match rule {
        NameRule::Subdomain => dns1123_subdomain(name),
        NameRule::Label => dns1123_label(name),
        NameRule::Dns1035 => dns1035_label(name),
        NameRule::PathSegment => path_segment(name),
    };
    msgs.into_iter()
        .map(|m| invalid("metadata.name", name, m))
        .collect()
}

/// `ValidateObjectMeta` for what fieldguard can see: the name by its kind's rule, the
/// namespace (a DNS label) when the kind is namespaced, label keys and values, annotation keys
/// and their total size. String-valued metadata only: other types fail the schema first.
/// Each error comes with the path (as kube-apiserver prints paths) of what it is about, to
/// locate it in the manifest.
pub fn object_meta(
    obj: &Value,
    group: &str,
    kind: &str,
    namespaced: bool,
) -> Vec<(FieldError, String)> {
    let mut out = Vec::new();
    let Some(meta) = obj.get_path(&["metadata"]).and_then(Value::as_map) else {
        return out;
    };
    if let Some(name) = meta.get("name").and_then(Value::as_str) {
        for e in name_errors(name, name_rule(group, kind)) {
            out.push((e, ".metadata.name".to_string()));
        }
    }
    if namespaced && let Some(ns) = meta.get("namespace").and_then(Value::as_str) {
        for m in dns1123_label(ns) {
            out.push((
                invalid("metadata.namespace", ns, m),
                ".metadata.namespace".to_string(),
            ));
        }
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_map) {
        for (k, v) in labels.iter() {
            let at = format!(".metadata.labels.{k}");
            for m in qualified_name(k) {
                out.push((invalid("metadata.labels", k, m), at.clone()));
            }
            if let Some(v) = v.as_str() {
                for m in label_value(v) {
                    out.push((invalid("metadata.labels", v, m), at.clone()));
                }
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_map) {
        out.extend(annotation_errors(annotations));
    }
    out
}

fn annotation_errors(annotations: &Map) -> Vec<(FieldError, String)> {
    let mut out = Vec::new();
    let mut size = 0usize;
    for (k, v) in annotations.iter() {
        for m in qualified_name(&k.to_lowercase()) {
            out.push((
                invalid("metadata.annotations", k, m),
                format!(".metadata.annotations.{k}"),
            ));
        }
        size += k.len() + v.as_str().map_or(0, str::len);
    }
    if size > ANNOTATIONS_MAX_BYTES {
        out.push((
            FieldError {
                field: "metadata.annotations".into(),
                reason: "FieldValueTooLong".into(),
                message: format!("Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes"),
                line: None,
            },
            ".metadata.annotations".to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn field_manager_refusals_are_the_servers() {
        use super::field_manager_refusal as refusal;
        assert_eq!(refusal("helm"), None);
        assert_eq!(refusal(&"x".repeat(128)), None);
        assert_eq!(refusal("a b"), None);
        // Both answers from kube-apiserver 1.36.5 (a PATCH with this fieldManager).
        assert_eq!(
            refusal("ab\tc").unwrap(),
            r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "ab\tc": invalid character U+0009 (at position 2)"#
        );
        let long = format!("{}\u{1}", "x".repeat(129));
        assert_eq!(
            refusal(&long).unwrap(),
            format!(
                r#"PatchOptions.meta.k8s.io "" is invalid: [fieldManager: Too long: may not be more than 128 bytes, fieldManager: Invalid value: "{}\x01": invalid character U+0001 (at position 129)]"#,
                "x".repeat(129)
            )
        );
        // A huge name costs its length, not its length times its characters.
        let huge = "\u{1}".repeat(1 << 20);
        assert_eq!(
            refusal(&huge).unwrap(),
            r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes"#
        );
    }

    use super::*;

    #[test]
    fn names_follow_their_kind_s_rule() {
        assert!(name_errors("web-1.example", NameRule::Subdomain).is_empty());
        let e = name_errors("db?force=true&x=", NameRule::Subdomain);
        assert_eq!(e.len(), 1);
        assert_eq!(
            e[0].to_string(),
            "metadata.name: Invalid value: \"db?force=true&x=\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            name_errors("../../x", NameRule::PathSegment)[0].message,
            "Invalid value: \"../../x\": may not contain '/'"
        );
        assert!(name_errors("system:controller:x", NameRule::PathSegment).is_empty());
        assert_eq!(name_errors("..", NameRule::PathSegment).len(), 1);
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(
            dns1123_label("A"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(dns1035_label("1abc").len(), 1);
        assert!(dns1035_label("abc-1").is_empty());
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254))[0],
            "must be no more than 253 characters"
        );
    }

    #[test]
    fn labels_and_annotations() {
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert_eq!(
            qualified_name("bad key!"),
            [
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert!(label_value("").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        let obj = crate::value::yaml::parse_one(
            "metadata:\n  name: ok\n  namespace: Shop\n  labels: {\"bad key\": v}\n  annotations: {\"Example.com/Fine\": x, \"no/good/key\": y}\n",
        )
        .unwrap();
        let fields: Vec<String> = object_meta(&obj, "", "ConfigMap", true)
            .iter()
            .map(|(e, _)| e.field.clone())
            .collect();
        assert_eq!(
            fields,
            [
                "metadata.namespace",
                "metadata.labels",
                "metadata.annotations"
            ]
        );
    }
}
