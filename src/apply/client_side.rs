//! Client-side apply of one object, as `kubectl apply` (and Helm 3) do it: the new manifest is
//! stamped with the last-applied annotation; an absent object is created; a present one gets a
//! three-way patch — strategic merge patch with the schema's patch metadata for built-in kinds,
//! JSON merge patch for custom resources — from the last-applied configuration (or the previous
//! revision's manifest when the annotation is missing) to the new manifest, over the live object.

use crate::patch::meta::Meta;
use crate::patch::{PatchError, json_merge, strategic};
use crate::value::{Map, Value, json};

/// The annotation client-side apply keeps the applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What to send for one object.
#[derive(Clone, Debug)]
pub enum Action {
    /// `POST` the object.
    Create(Value),
    /// `PATCH` with this content type.
    Patch {
        content_type: &'static str,
        patch: Map,
    },
    /// Nothing to change.
    Unchanged,
}

fn annotations_mut(obj: &mut Value) -> Option<&mut Map> {
    let meta = obj.as_map_mut()?.get_mut("metadata")?.as_map_mut()?;
    if !meta.contains_key("annotations") {
        meta.insert("annotations", Value::Map(Map::new()));
    }
    meta.get_mut("annotations")?.as_map_mut()
}

/// The manifest as client-side apply sends it: with the last-applied annotation holding the
/// manifest itself (without that annotation).
pub fn with_last_applied(manifest: &Value) -> Value {
    let mut plain = manifest.clone();
    if let Some(a) = annotations_mut(&mut plain) {
        a.remove(LAST_APPLIED);
        if a.is_empty()
            && let Some(meta) = plain
                .as_map_mut()
                .and_then(|m| m.get_mut("metadata"))
                .and_then(Value::as_map_mut)
        {
            meta.remove("annotations");
        }
    }
    let text = json::to_string(&plain, json::Style::PLAIN);
    let mut out = manifest.clone();
    if let Some(a) = annotations_mut(&mut out) {
        a.insert(LAST_APPLIED, Value::from(text.as_str()));
    }
    out
}

/// The configuration last applied to `live` (its annotation), if readable.
pub fn last_applied(live: &Value) -> Option<Map> {
    let text = live.str_at(&["metadata", "annotations", LAST_APPLIED])?;
    match json::parse(text.as_bytes()) {
        Ok(Value::Map(m)) => Some(m),
        _ => None,
    }
}

/// Plans the client-side apply of `manifest` over `live`. `fallback` is the original used when
/// the live object carries no annotation (the previous revision's manifest of this object).
/// `meta` is the kind's patch metadata (`None`: a custom resource, JSON merge patch).
pub fn plan(
    manifest: &Value,
    live: Option<&Value>,
    fallback: Option<&Value>,
    meta: Option<&Meta>,
) -> Result<Action, PatchError> {
    let modified = with_last_applied(manifest);
    let Some(live) = live else {
        return Ok(Action::Create(modified));
    };
    let original = last_applied(live)
        .or_else(|| fallback.and_then(Value::as_map).cloned())
        .unwrap_or_default();
    let (Some(modified), Some(current)) = (modified.as_map(), live.as_map()) else {
        return Err(PatchError::Invalid("objects must be maps".into()));
    };
    let (content_type, patch) = match meta {
        Some(meta) => (
            "application/strategic-merge-patch+json",
            strategic::three_way(&original, modified, current, meta, true)?,
        ),
        None => (
            "application/merge-patch+json",
            json_merge::three_way(&original, modified, current)?,
        ),
    };
    if patch.is_empty() {
        return Ok(Action::Unchanged);
    }
    Ok(Action::Patch {
        content_type,
        patch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::meta;

    fn v(s: &str) -> Value {
        crate::value::yaml::parse_one(s).unwrap()
    }

    #[test]
    fn removed_container_port_is_deleted_and_hotfix_kept() {
        let k8s = meta::kubernetes("k8s").unwrap();
        let m = k8s.root_for("apps/v1", "Deployment").unwrap();
        let old = v(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:1\n        ports: [{containerPort: 80}, {containerPort: 81}]\n",
        );
        let new = v(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:2\n        ports: [{containerPort: 80}]\n",
        );
        let mut live = with_last_applied(&old);
        // A hotfix someone made by hand: an env var the manifest never had.
        live = {
            let mut l = live;
            let c = l
                .as_map_mut()
                .unwrap()
                .get_mut("spec")
                .unwrap()
                .as_map_mut()
                .unwrap()
                .get_mut("template")
                .unwrap()
                .as_map_mut()
                .unwrap()
                .get_mut("spec")
                .unwrap()
                .as_map_mut()
                .unwrap()
                .get_mut("containers")
                .unwrap();
            if let Value::List(cs) = c {
                cs[0]
                    .as_map_mut()
                    .unwrap()
                    .insert("env", v("[{name: DEBUG, value: '1'}]"));
            }
            l
        };
        let Action::Patch {
            content_type,
            patch,
        } = plan(&new, Some(&live), None, Some(&m)).unwrap()
        else {
            panic!("expected a patch");
        };
        assert_eq!(content_type, "application/strategic-merge-patch+json");
        let result = strategic::apply(live.as_map().unwrap().clone(), patch, &m).unwrap();
        let c = &Value::Map(result)
            .get_path(&["spec", "template", "spec", "containers"])
            .unwrap()
            .as_list()
            .unwrap()[0]
            .clone();
        assert_eq!(c.str_at(&["image"]), Some("app:2"));
        assert_eq!(c.get_path(&["ports"]).unwrap().as_list().unwrap().len(), 1);
        assert!(
            c.get_path(&["env"]).is_some(),
            "the hand-made env var survives"
        );
    }

    #[test]
    fn absent_objects_are_created_and_equal_ones_left_alone() {
        let cm = v("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n");
        let Action::Create(body) = plan(&cm, None, None, None).unwrap() else {
            panic!()
        };
        assert!(
            body.str_at(&["metadata", "annotations", LAST_APPLIED])
                .unwrap()
                .contains("\"k\"")
        );
        assert!(matches!(
            plan(&cm, Some(&body), None, None).unwrap(),
            Action::Unchanged
        ));
    }
}
