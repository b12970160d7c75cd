//! A cluster snapshot on disk: objects as `kubectl get -o yaml --show-managed-fields` prints
//! them (single objects, `List`s, multi-document files, directories), plus optional OpenAPI
//! documents (v3 as served at `/openapi/v3/<group-version>`, or a v2 `swagger.json`) and the
//! CustomResourceDefinitions of custom resources (themselves objects of the snapshot).

use super::ObjectRef;
use crate::catalog::Catalog;
use crate::manifest::{self, Document, Input, Limits, ManifestError};
use crate::schema::{crd, openapi_v2, openapi_v3};
use crate::value::Value;
use std::collections::BTreeMap;
use std::io::Read;

/// Objects, schemas and CRDs read from files.
#[derive(Debug, Default)]
pub struct Snapshot {
    objects: BTreeMap<ObjectRef, Document>,
    /// OpenAPI documents, in the order read.
    openapi: Vec<Document>,
    source: String,
}

impl Snapshot {
    /// Reads a snapshot within [`Limits::SNAPSHOT`]. Every problem is reported, located;
    /// nothing is returned if any.
    pub fn load(inputs: &[Input], stdin: &mut dyn Read) -> Result<Snapshot, Vec<ManifestError>> {
        Self::load_within(inputs, stdin, &Limits::SNAPSHOT)
    }

    /// [`Snapshot::load`] within `limits`.
    pub fn load_within(
        inputs: &[Input],
        stdin: &mut dyn Read,
        limits: &Limits,
    ) -> Result<Snapshot, Vec<ManifestError>> {
        let loaded = manifest::load_with(inputs, stdin, false, limits);
        let mut errors = loaded.errors;
        let mut snap = Snapshot {
            source: describe_inputs(inputs),
            ..Snapshot::default()
        };
        for d in loaded.documents {
            if is_openapi(&d.object) {
                snap.openapi.push(d);
                continue;
            }
            let problems = manifest::identity_errors(&d);
            if !problems.is_empty() {
                errors.extend(problems);
                continue;
            }
            let r = ObjectRef::of(&d.object);
            if let Some(first) = snap.objects.get(&r) {
                errors.push(ManifestError {
                    file: d.origin.file.clone(),
                    doc: Some(d.origin.doc),
                    line: Some(d.origin.line),
                    path: None,
                    message: format!(
                        "{r} appears twice in the snapshot (first at {})",
                        first.origin
                    ),
                });
                continue;
            }
            snap.objects.insert(r, d);
        }
        if errors.is_empty() {
            Ok(snap)
        } else {
            Err(errors)
        }
    }

    /// Adds the snapshot's schemas and CRDs to a catalog.
    pub fn extend_catalog(&self, catalog: &mut Catalog) -> Result<(), Vec<ManifestError>> {
        let mut errors = Vec::new();
        let (v3, v2): (Vec<&Document>, Vec<&Document>) = self
            .openapi
            .iter()
            .partition(|d| d.object.get_path(&["openapi"]).is_some());
        if !v3.is_empty() {
            let docs: Vec<Value> = v3.iter().map(|d| d.object.clone()).collect();
            match openapi_v3::from_documents(&docs) {
                Ok(s) => catalog.add_served(s),
                Err(e) => errors.push(located(v3[0], e.to_string())),
            }
        }
        for d in v2 {
            match openapi_v2::from_value(&d.object) {
                Ok(s) => catalog.add_served(s),
                Err(e) => errors.push(located(d, e.to_string())),
            }
        }
        for d in self.objects.values().filter(|d| crd::is_crd(&d.object)) {
            if let Err(e) = catalog.add_crd(&d.object) {
                errors.push(located(d, e.to_string()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Every object, in reference order.
    pub fn objects(&self) -> impl Iterator<Item = (&ObjectRef, &Document)> {
        self.objects.iter()
    }

    /// Every object, in reference order, taken out of the snapshot.
    pub fn into_objects(self) -> impl Iterator<Item = (ObjectRef, Document)> {
        self.objects.into_iter()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

impl Snapshot {
    /// `snapshot examples/cluster` for reports.
    pub fn describe(&self) -> String {
        self.source.clone()
    }

    /// Every object, as a prediction's input (copies; `LiveState` serves them shared).
    pub fn fetched(&self) -> super::Fetched {
        super::Fetched {
            objects: self
                .objects
                .iter()
                .map(|(r, d)| (r.clone(), std::sync::Arc::new(d.object.clone())))
                .collect(),
            origins: self
                .objects
                .iter()
                .map(|(r, d)| (r.clone(), d.origin.clone()))
                .collect(),
            source: self.source.clone(),
            prepared: None,
        }
    }
}

fn is_openapi(v: &Value) -> bool {
    v.get_path(&["openapi"])
        .is_some_and(|x| x.as_str().is_some())
        || v.get_path(&["swagger"])
            .is_some_and(|x| x.as_str().is_some())
}

fn located(d: &Document, message: String) -> ManifestError {
    ManifestError {
        file: d.origin.file.clone(),
        doc: Some(d.origin.doc),
        line: Some(d.origin.line),
        path: None,
        message,
    }
}

/// `snapshot examples/cluster` for reports.
pub fn describe_inputs(inputs: &[Input]) -> String {
    let names: Vec<String> = inputs
        .iter()
        .map(|i| match i {
            Input::Stdin => "<stdin>".to_string(),
            Input::Path(p) => p.display().to_string(),
        })
        .collect();
    format!("snapshot {}", names.join(", "))
}
