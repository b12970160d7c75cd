//! From manifests to targets: each document's type looked up, its namespace defaulted like
//! kubectl, its metadata checked as the apiserver would and fieldguard's own annotations as
//! `apply` reads them; many documents on every core.

use super::Target;
use crate::catalog::{Catalog, TypeInfo};
use crate::deadline::{Deadline, Expired};
use crate::fieldpath::PathElement;
use crate::live::ObjectRef;
use crate::manifest::{Document, ManifestError, Origin};
use crate::schema::crd;
use crate::value::{Map, Value};
use foldhash::HashMap;

/// Turns manifests into targets: registers the set's CustomResourceDefinitions, looks every
/// object's type up, defaults namespaces like kubectl (namespaced objects without one get
/// `namespace`; cluster-scoped objects lose one they should not have), and rejects objects
/// that appear twice. Returns every problem, located, or the targets.
pub fn resolve(
    docs: Vec<Document>,
    catalog: &mut Catalog,
    namespace: &str,
) -> Result<Vec<Target>, Vec<ManifestError>> {
    resolve_until(docs, catalog, namespace, &Deadline::default())
}

/// [`resolve`], giving up (with one error saying so) when `deadline` passes.
pub fn resolve_until(
    mut docs: Vec<Document>,
    catalog: &mut Catalog,
    namespace: &str,
    deadline: &Deadline,
) -> Result<Vec<Target>, Vec<ManifestError>> {
    let mut errors = Vec::new();
    for d in docs.iter().filter(|d| crd::is_crd(&d.object)) {
        if let Err(e) = catalog.add_crd(&d.object) {
            errors.push(located(d, None, e.to_string()));
        }
    }
    let catalog: &Catalog = catalog;
    // Each document on its own (many on every core); then, in order, the ones seen twice.
    let threads = if docs.len() >= PARALLEL_RESOLVE {
        crate::cores::cores()
    } else {
        1
    };
    let len = crate::cores::chunk_len(docs.len());
    let resolved = crate::cores::map_chunks_mut(&mut docs, len, threads, |run| {
        run.iter_mut()
            .map(|doc| (!deadline.expired()).then(|| resolve_one(doc, catalog, namespace)))
            .collect::<Vec<_>>()
    });
    let mut targets: Vec<Target> = Vec::with_capacity(docs.len());
    let mut seen: HashMap<ObjectRef, Origin> = HashMap::default();
    let mut resolved = resolved
        .into_iter()
        .flat_map(|r| r.unwrap_or_else(|p| std::panic::resume_unwind(p)));
    for doc in docs {
        let (info, object_ref) = match resolved.next().flatten() {
            None => return Err(vec![located(&doc, None, Expired.to_string())]),
            Some(Err(problems)) => {
                errors.extend(problems);
                continue;
            }
            Some(Ok(r)) => r,
        };
        if let Some(first) = seen.get(&object_ref) {
            errors.push(located(
                &doc,
                None,
                format!("{object_ref} is already defined at {first}"),
            ));
            continue;
        }
        seen.insert(object_ref.clone(), doc.origin.clone());
        targets.push(Target {
            doc,
            object_ref,
            info,
        });
    }
    if errors.is_empty() {
        Ok(targets)
    } else {
        Err(errors)
    }
}

/// Documents at least this many are resolved on every core.
const PARALLEL_RESOLVE: usize = 64;

/// One document's type and reference, its namespace defaulted (or dropped) like kubectl; or
/// its problems, located.
fn resolve_one(
    doc: &mut Document,
    catalog: &Catalog,
    namespace: &str,
) -> Result<(TypeInfo, ObjectRef), Vec<ManifestError>> {
    let info = match catalog.lookup(doc.api_version(), doc.kind()) {
        Ok(i) => i,
        Err(e) => {
            let line = doc.line_of(&[PathElement::field("kind")]);
            let mut err = located(doc, Some(".kind"), e.to_string());
            err.line = Some(line);
            return Err(vec![err]);
        }
    };
    let ns = if info.namespaced {
        let ns = doc.namespace().unwrap_or(namespace).to_string();
        if doc.namespace().is_none() {
            set_namespace(&mut doc.object, Some(&ns));
        }
        ns
    } else {
        if doc.str_at(&["metadata", "namespace"]).is_some() {
            set_namespace(&mut doc.object, None);
        }
        String::new()
    };
    let object_ref = ObjectRef {
        group: info.gvk.group.clone(),
        kind: info.gvk.kind.clone(),
        namespace: ns,
        name: doc.name().to_string(),
    };
    // Metadata the apiserver refuses (a name that is no path segment of its kind, a bad
    // label key): refused here, before any request is built from it.
    let mut meta_errors = crate::validation::meta::object_meta(
        &doc.object,
        &object_ref.group,
        &object_ref.kind,
        info.namespaced,
    );
    meta_errors.extend(crate::validation::config_data::errors(
        &doc.object,
        &object_ref.group,
        &object_ref.kind,
    ));
    let format_errors = catalog.format_problems(&info, &doc.object);
    let directives = crate::manifest::directives::problems(&doc.object);
    if meta_errors.is_empty() && format_errors.is_empty() && directives.is_empty() {
        return Ok((info, object_ref));
    }
    let mut errors = Vec::new();
    for p in directives {
        let mut err = located(doc, Some(&p.printed_path()), p.message.clone());
        err.line = Some(doc.line_of(&p.path()));
        errors.push(err);
    }
    for (at, message) in format_errors {
        let mut err = located(doc, Some(&at), message);
        err.line = Some(doc.line_of_printed(&at));
        errors.push(err);
    }
    for (e, at) in meta_errors {
        let mut err = located(doc, Some(&format!(".{}", e.field)), e.to_string());
        err.line = Some(doc.line_of_printed(&at));
        err.path = Some(format!(".{}", e.field));
        err.message = format!("{} (the apiserver refuses this: 422)", e.message);
        errors.push(err);
    }
    Err(errors)
}

fn located(d: &Document, path: Option<&str>, message: String) -> ManifestError {
    ManifestError {
        path: path.map(str::to_string),
        ..d.origin.error(message)
    }
}

fn set_namespace(obj: &mut Value, ns: Option<&str>) {
    let Some(root) = obj.as_map_mut() else { return };
    if root.get("metadata").and_then(Value::as_map).is_none() {
        root.insert("metadata", Value::Map(Map::new()));
    }
    let Some(meta) = root.get_mut("metadata").and_then(Value::as_map_mut) else {
        return;
    };
    match ns {
        Some(ns) => {
            meta.insert("namespace", Value::from(ns));
        }
        None => {
            meta.remove("namespace");
        }
    }
}
