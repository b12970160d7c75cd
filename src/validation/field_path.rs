//! A rule's `fieldPath` as the server prints it (`ValidFieldPath` in
//! `k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go`): a JSON path of
//! `.name` and `['name']` steps from the rule's node; a step into a node with properties is a
//! child (`a.b`, whatever the name holds), a step into a map is a key (`a[k]`).

use super::Structural;

/// `fieldPath` (relative to the node at `base`, whose schema is `s`) printed as the server
/// prints field paths; `None` when it does not read as the CRD's validation accepted it.
pub fn printed(base: &str, field_path: &str, s: &Structural) -> Option<String> {
    let mut out = base.to_string();
    let mut s = s;
    let b = field_path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let name = match b[i] {
            b'.' => {
                i += 1;
                continue;
            }
            b'[' => {
                // `['...']`, `\'` and `\\` escaped inside.
                if b.get(i + 1) != Some(&b'\'') {
                    return None;
                }
                let mut name = String::new();
                let mut j = i + 2;
                loop {
                    match *b.get(j)? {
                        b'\\' => {
                            name.push(char::from(*b.get(j + 1)?));
                            j += 2;
                        }
                        b'\'' => break,
                        _ => {
                            let c = field_path[j..].chars().next()?;
                            name.push(c);
                            j += c.len_utf8();
                        }
                    }
                }
                if b.get(j + 1) != Some(&b']') {
                    return None;
                }
                i = j + 2;
                name
            }
            _ => {
                let end = field_path[i..].find(['.', '[']).map_or(b.len(), |e| i + e);
                let name = field_path[i..end].to_string();
                i = end;
                name
            }
        };
        if !s.properties.is_empty() {
            s = s
                .properties
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, c)| c)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(a) = s.additional.as_deref() {
            s = a;
            out.push('[');
            out.push_str(&name);
            out.push(']');
        } else {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::yaml::parse_one;

    #[test]
    fn steps_are_children_of_objects_and_keys_of_maps() {
        let s = Structural::from_value(
            &parse_one("{type: object, properties: {x.y: {type: string}, limits: {type: object, properties: {min: {type: integer}}}, labels: {type: object, additionalProperties: {type: string}}}}").unwrap(),
            None,
        );
        assert_eq!(printed("spec", "['x.y']", &s).as_deref(), Some("spec.x.y"));
        assert_eq!(
            printed("spec", ".limits.min", &s).as_deref(),
            Some("spec.limits.min")
        );
        assert_eq!(
            printed("spec", ".labels['a.b']", &s).as_deref(),
            Some("spec.labels[a.b]")
        );
        assert_eq!(printed("", ".limits", &s).as_deref(), Some("limits"));
        assert_eq!(printed("spec", ".nope", &s), None);
        assert_eq!(printed("spec", "['x.y'", &s), None);
    }
}
