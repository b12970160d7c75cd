//! fieldguard's own annotations on a release object, read once and checked before anything is
//! predicted or written: `fieldguard.dev/recreate` (when the object is deleted and created again)
//! and `fieldguard.dev/create-only-fields` (fields set only when the object is created). A value
//! fieldguard does not understand is an input error, located at the annotation, for `check` and
//! `apply` alike: a directive that one of them ignored and the other refused would make a green
//! pre-merge check fail at deploy time.

use crate::fieldpath::PathElement;
use crate::value::Value;

/// When the object is recreated (`if-immutable`, `always`; `never` or empty: not).
pub const RECREATE_ANNOTATION: &str = "fieldguard.dev/recreate";
/// Comma-separated field paths (`spec.replicas`) set only when the object is created.
pub const CREATE_ONLY_ANNOTATION: &str = "fieldguard.dev/create-only-fields";
/// werf's delete policy; `before-creation-if-immutable` is read as `if-immutable`.
const WERF_DELETE_POLICY: &str = "werf.io/delete-policy";

/// The most create-only paths one object may name, and the most segments one path may have
/// (a field deeper than the apiserver's nesting limit could not exist).
pub const MAX_CREATE_ONLY_FIELDS: usize = 256;
pub const MAX_CREATE_ONLY_DEPTH: usize = 64;

/// When an object is recreated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// When the server would refuse the update and accept the object as a creation.
    IfImmutable,
    /// On every run where it exists.
    Always,
}

/// A directive fieldguard cannot follow: the annotation it is in and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub annotation: &'static str,
    pub message: String,
}

impl Problem {
    /// The annotation's path, for locating it in the manifest.
    pub fn path(&self) -> [PathElement; 3] {
        [
            PathElement::field("metadata"),
            PathElement::field("annotations"),
            PathElement::field(self.annotation),
        ]
    }

    /// The path as fieldguard prints field paths.
    pub fn printed_path(&self) -> String {
        format!(".metadata.annotations.{}", self.annotation)
    }
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.str_at(&["metadata", "annotations", key])
}

/// The object's own recreation policy.
pub fn recreate_policy(obj: &Value) -> Result<Option<Policy>, Problem> {
    if let Some(v) = annotation(obj, RECREATE_ANNOTATION) {
        return match v.trim() {
            "if-immutable" => Ok(Some(Policy::IfImmutable)),
            "always" => Ok(Some(Policy::Always)),
            "never" | "" => Ok(None),
            other => Err(Problem {
                annotation: RECREATE_ANNOTATION,
                message: format!(
                    "{RECREATE_ANNOTATION}: {} is not a policy (if-immutable, always, never)",
                    crate::value::gofmt::quote_bounded(other, 64)
                ),
            }),
        };
    }
    let werf = annotation(obj, WERF_DELETE_POLICY).unwrap_or("");
    Ok(werf
        .split(',')
        .any(|p| p.trim() == "before-creation-if-immutable")
        .then_some(Policy::IfImmutable))
}

/// The object's create-only fields, each a path of map keys.
pub fn create_only_fields(obj: &Value) -> Result<Vec<Vec<String>>, Problem> {
    let Some(list) = annotation(obj, CREATE_ONLY_ANNOTATION) else {
        return Ok(Vec::new());
    };
    let problem = |message: String| Problem {
        annotation: CREATE_ONLY_ANNOTATION,
        message: format!("{CREATE_ONLY_ANNOTATION}: {message}"),
    };
    let entries: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    if entries.len() > MAX_CREATE_ONLY_FIELDS {
        return Err(problem(format!(
            "{} paths; at most {MAX_CREATE_ONLY_FIELDS}",
            entries.len()
        )));
    }
    let mut out = Vec::with_capacity(entries.len());
    for field in entries {
        let quoted = || crate::value::gofmt::quote_bounded(field, 64);
        let segments: Vec<&str> = field.split('.').collect();
        if segments.len() > MAX_CREATE_ONLY_DEPTH {
            return Err(problem(format!(
                "{} is deeper than {MAX_CREATE_ONLY_DEPTH} fields",
                quoted()
            )));
        }
        if segments.iter().any(|s| s.is_empty()) {
            return Err(problem(format!(
                "{} is not a field path: an empty field name (write paths as spec.replicas)",
                quoted()
            )));
        }
        if let Some(c) = field
            .chars()
            .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '[' | ']' | '"'))
        {
            return Err(problem(format!(
                "{} is not a field path: {c:?} (a path names map keys only, as spec.replicas; list items cannot be create-only)",
                quoted()
            )));
        }
        if matches!(segments[0], "apiVersion" | "kind" | "metadata") && segments.len() <= 2 {
            let identity =
                segments.len() == 1 || matches!(segments[1], "name" | "namespace" | "generateName");
            if identity {
                return Err(problem(format!(
                    "{} names the object's identity, which cannot be left out of an apply",
                    quoted()
                )));
            }
        }
        out.push(segments.into_iter().map(str::to_string).collect());
    }
    Ok(out)
}

/// Every directive of `obj` fieldguard cannot follow.
pub fn problems(obj: &Value) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Err(p) = recreate_policy(obj) {
        out.push(p);
    }
    if let Err(p) = create_only_fields(obj) {
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(annotations: &str) -> Value {
        crate::value::yaml::parse_one(&format!("{{metadata: {{annotations: {annotations}}}}}"))
            .expect("yaml")
    }

    #[test]
    fn recreate_policies_and_werfs_delete_policy() {
        assert_eq!(
            recreate_policy(&obj("{fieldguard.dev/recreate: if-immutable}")),
            Ok(Some(Policy::IfImmutable))
        );
        assert_eq!(
            recreate_policy(&obj("{fieldguard.dev/recreate: ' always '}")),
            Ok(Some(Policy::Always))
        );
        assert_eq!(
            recreate_policy(&obj("{fieldguard.dev/recreate: never}")),
            Ok(None)
        );
        assert_eq!(
            recreate_policy(&obj(
                "{werf.io/delete-policy: 'before-hook-creation, before-creation-if-immutable'}"
            )),
            Ok(Some(Policy::IfImmutable))
        );
        assert_eq!(recreate_policy(&obj("{}")), Ok(None));
        let bad = recreate_policy(&obj("{fieldguard.dev/recreate: sometimes}")).unwrap_err();
        assert_eq!(bad.annotation, RECREATE_ANNOTATION);
        assert!(
            bad.message.contains("\"sometimes\" is not a policy"),
            "{}",
            bad.message
        );
    }

    #[test]
    fn create_only_paths_are_map_keys() {
        let ok = create_only_fields(&obj(
            "{fieldguard.dev/create-only-fields: 'spec.replicas, metadata.labels.tier,,'}",
        ))
        .expect("valid");
        assert_eq!(
            ok,
            vec![
                vec!["spec".to_string(), "replicas".into()],
                vec!["metadata".into(), "labels".into(), "tier".into()],
            ]
        );
        for (bad, says) in [
            ("spec..replicas", "an empty field name"),
            (".spec", "an empty field name"),
            ("spec.replicas.", "an empty field name"),
            (
                "spec.containers[0].image",
                "list items cannot be create-only",
            ),
            ("spec.re plicas", "list items cannot be create-only"),
            ("metadata.name", "identity"),
            ("kind", "identity"),
        ] {
            let p = create_only_fields(&obj(&format!(
                "{{fieldguard.dev/create-only-fields: '{bad}'}}"
            )))
            .expect_err(bad);
            assert_eq!(p.annotation, CREATE_ONLY_ANNOTATION);
            assert!(p.message.contains(says), "{bad}: {}", p.message);
        }
        let deep = vec!["a"; MAX_CREATE_ONLY_DEPTH + 1].join(".");
        assert!(
            create_only_fields(&obj(&format!(
                "{{fieldguard.dev/create-only-fields: '{deep}'}}"
            )))
            .is_err()
        );
        let many = vec!["spec.x"; MAX_CREATE_ONLY_FIELDS + 1].join(",");
        let p = create_only_fields(&obj(&format!(
            "{{fieldguard.dev/create-only-fields: '{many}'}}"
        )))
        .expect_err("too many");
        assert!(p.message.contains("at most 256"), "{}", p.message);
    }

    #[test]
    fn problems_lists_each_annotation_once() {
        let o =
            obj("{fieldguard.dev/recreate: sometimes, fieldguard.dev/create-only-fields: 'a..b'}");
        let ps = problems(&o);
        assert_eq!(ps.len(), 2);
        assert_eq!(
            ps[0].printed_path(),
            ".metadata.annotations.fieldguard.dev/recreate"
        );
        assert!(problems(&obj("{fieldguard.dev/recreate: always}")).is_empty());
    }
}
