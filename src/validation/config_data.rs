//! The data of ConfigMaps and Secrets as kube-apiserver 1.36 validates it
//! (`pkg/apis/core/validation`: `ValidateConfigMap`, `ValidateSecret`): every key a config key
//! (`IsConfigMapKey`), no key in both of a ConfigMap's bags, and at most 1 MiB of values
//! (judged by kube-apiserver 1.36.5 in `tests/real/config_data.rs`). A
//! Secret's `stringData` is merged into `data` before validation (the v1 conversion), so its
//! keys are reported under `data`, and its values count in the size as the bytes they are.
//! Each error comes with the path of what it is about, to locate it in the manifest.

use super::FieldError;
use super::meta::{invalid, max_len, regex_error};

/// `DNS1123SubdomainMaxLength`, the longest config key.
const KEY_MAX: usize = 253;
use crate::value::{Map, Value};
use std::collections::BTreeMap;

/// `core.MaxSecretSize`, the bound of a Secret's and a ConfigMap's values.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

const CONFIG_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

/// `validation.IsConfigMapKey`.
pub fn config_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > KEY_MAX {
        errs.push(max_len(KEY_MAX));
    }
    let valid = !key.is_empty()
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !valid {
        errs.push(regex_error(
            CONFIG_KEY_MSG,
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    // `hasChDirPrefix`.
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

/// The bytes a `data` or `binaryData` value holds (base64 in the manifest: line breaks and
/// padding are no data; a value that does not decode is refused by its format first).
fn decoded_len(v: &Value) -> usize {
    let Some(s) = v.as_str() else { return 0 };
    let chars = s
        .bytes()
        .filter(|c| !matches!(c, b'\n' | b'\r' | b'='))
        .count();
    chars * 3 / 4
}

fn str_len(v: &Value) -> usize {
    v.as_str().map_or(0, str::len)
}

fn too_long(field: &str) -> FieldError {
    FieldError {
        field: field.to_string(),
        reason: "FieldValueTooLong".into(),
        message: format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
        line: None,
    }
}

fn bag<'a>(obj: &'a Value, key: &str) -> Option<&'a Map> {
    obj.get_path(&[key]).and_then(Value::as_map)
}

/// A key's errors at `field[key]`, located at `.field.key`.
fn key_errors(field: &str, key: &str, out: &mut Vec<(FieldError, String)>) {
    for m in config_key(key) {
        out.push((
            invalid(&format!("{field}[{key}]"), key, m),
            format!(".{field}.{key}"),
        ));
    }
}

/// `ValidateSecret`'s keys and size, on the object as written (`data` and `stringData`).
pub fn secret(obj: &Value) -> Vec<(FieldError, String)> {
    let mut out = Vec::new();
    // The merged bag: a stringData value replaces data's (`Convert_v1_Secret_To_core_Secret`).
    let mut merged: BTreeMap<&str, (usize, &'static str)> = BTreeMap::new();
    if let Some(data) = bag(obj, "data") {
        for (k, v) in data.iter() {
            merged.insert(k.as_str(), (decoded_len(v), "data"));
        }
    }
    if let Some(data) = bag(obj, "stringData") {
        for (k, v) in data.iter() {
            merged.insert(k.as_str(), (str_len(v), "stringData"));
        }
    }
    let mut total = 0usize;
    for (k, (len, from)) in &merged {
        let before = out.len();
        key_errors("data", k, &mut out);
        for (_, at) in &mut out[before..] {
            *at = format!(".{from}.{k}");
        }
        total = total.saturating_add(*len);
    }
    if total > MAX_DATA_BYTES {
        out.push((too_long("data"), ".data".to_string()));
    }
    out
}

/// `ValidateConfigMap`'s keys, bags and size.
pub fn config_map(obj: &Value) -> Vec<(FieldError, String)> {
    let mut out = Vec::new();
    let data = bag(obj, "data");
    let binary = bag(obj, "binaryData");
    let mut total = 0usize;
    // A key in both bags is reported once, under `data` (kube-apiserver 1.36.5 answers so).
    let bags = [
        ("data", data, binary, "binaryData"),
        ("binaryData", binary, None, "data"),
    ];
    for (field, this, other, other_name) in bags {
        let Some(this) = this else { continue };
        // In key order (the server's is a Go map's: random).
        let mut entries: Vec<_> = this.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, v) in entries {
            key_errors(field, k, &mut out);
            if other.is_some_and(|o| o.get(k.as_str()).is_some()) {
                out.push((
                    invalid(
                        &format!("{field}[{k}]"),
                        k,
                        format!("duplicate of key present in {other_name}"),
                    ),
                    format!(".{field}.{k}"),
                ));
            }
            total = total.saturating_add(if field == "data" {
                str_len(v)
            } else {
                decoded_len(v)
            });
        }
    }
    if total > MAX_DATA_BYTES {
        // The whole object (an empty path).
        out.push((
            FieldError {
                field: "[]".into(),
                ..too_long("")
            },
            ".data".to_string(),
        ));
    }
    out
}

/// The data errors of an object of `group`/`kind` (none for other kinds).
pub fn errors(obj: &Value, group: &str, kind: &str) -> Vec<(FieldError, String)> {
    match (group, kind) {
        ("", "Secret") => secret(obj),
        ("", "ConfigMap") => config_map(obj),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    fn printed(errs: &[(FieldError, String)]) -> Vec<String> {
        errs.iter().map(|(e, _)| e.to_string()).collect()
    }

    /// `IsConfigMapKey`'s cases (`k8s.io/apimachinery/pkg/util/validation`,
    /// `TestIsConfigMapKey`): good and bad keys.
    #[test]
    fn config_keys_as_upstream_tests_them() {
        for good in [
            "a",
            "good",
            "good-good",
            "still.good",
            "this.is.also.good",
            ".so.is.this",
            "THIS_IS_GOOD",
            "so_is_this_17",
        ] {
            assert!(config_key(good).is_empty(), "{good}");
        }
        for bad in ["", ".", "..", "..bad", "b*d", "bad!&bad", &"a".repeat(254)] {
            assert!(!config_key(bad).is_empty(), "{bad}");
        }
        assert_eq!(config_key("..bad"), vec!["must not start with '..'"]);
    }

    /// kube-apiserver 1.36.5's answers (recorded in the hostile-input review of issue 52).
    #[test]
    fn secrets_keys_and_size_as_the_server_refuses_them() {
        let s = parse_one("{apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {'bad key!': x, good: y}}").unwrap();
        let e = secret(&s);
        assert_eq!(
            printed(&e),
            vec![
                "data[bad key!]: Invalid value: \"bad key!\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(e[0].1, ".stringData.bad key!");
        let big = format!(
            "{{apiVersion: v1, kind: Secret, metadata: {{name: s}}, stringData: {{a: '{}'}}, data: {{b: 'eHh4'}}}}",
            "x".repeat(MAX_DATA_BYTES - 2)
        );
        let e = secret(&parse_one(&big).unwrap());
        assert_eq!(
            printed(&e),
            vec!["data: Too long: may not be more than 1048576 bytes"]
        );
        // Exactly the bound is accepted; a stringData value replaces data's.
        let exact = format!(
            "{{apiVersion: v1, kind: Secret, metadata: {{name: s}}, stringData: {{a: '{}'}}, data: {{a: 'eHh4eHh4'}}}}",
            "x".repeat(MAX_DATA_BYTES)
        );
        assert!(secret(&parse_one(&exact).unwrap()).is_empty());
    }

    #[test]
    fn config_maps_keys_bags_and_size() {
        let c = parse_one("{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {k: v, '..x': v}, binaryData: {k: 'eHh4'}}").unwrap();
        let e = printed(&config_map(&c));
        assert_eq!(
            e,
            vec![
                "data[..x]: Invalid value: \"..x\": must not start with '..'",
                "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
            ]
        );
        assert!(errors(&c, "apps", "ConfigMap").is_empty());
    }
}
