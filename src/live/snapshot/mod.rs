//! A cluster snapshot on disk: objects as `kubectl get -o yaml --show-managed-fields` prints
//! them (single objects, `List`s, multi-document files, directories), plus optional OpenAPI
//! documents (v3 as served at `/openapi/v3/<group-version>`, or a v2 `swagger.json`) and the
//! CustomResourceDefinitions of custom resources (themselves objects of the snapshot).
//!
//! The objects of clean JSON files (`kubectl get -o json`) are kept as text, checked as a parse
//! would check them, and parsed when first read: a check reads the few it applies to.

mod objects;

pub use objects::{Entry, Objects};

use super::ObjectRef;
use crate::catalog::Catalog;
use crate::manifest::{self, Document, Input, JsonObject, Limits, ManifestError};
use crate::schema::{crd, openapi_v2, openapi_v3};
use crate::value::Value;
use std::io::Read;

/// Objects, schemas and CRDs read from files.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    objects: Objects,
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
        Self::load_keeping(inputs, stdin, limits, false)
    }

    /// [`Snapshot::load_within`] for a command that ends soon after reading a few objects: the
    /// text of the objects kept as text stays in its files (regular files read on every core),
    /// each object read again when first wanted — refused, located, if its file changed since.
    /// A snapshot of any size then costs memory for its index only.
    pub fn load_leaving_text_on_disk(
        inputs: &[Input],
        stdin: &mut dyn Read,
        limits: &Limits,
    ) -> Result<Snapshot, Vec<ManifestError>> {
        Self::load_keeping(inputs, stdin, limits, true)
    }

    fn load_keeping(
        inputs: &[Input],
        stdin: &mut dyn Read,
        limits: &Limits,
        on_disk: bool,
    ) -> Result<Snapshot, Vec<ManifestError>> {
        let out = manifest::Loaded::new(limits.clone()).any_documents();
        let out = if on_disk {
            out.keeping_json_on_disk()
        } else {
            out.keeping_json()
        };
        let loaded = manifest::load_into(inputs, stdin, out);
        let mut errors = loaded.errors;
        let mut snap = Snapshot {
            source: describe_inputs(inputs),
            ..Snapshot::default()
        };
        let mut read = Vec::with_capacity(loaded.documents.len() + loaded.json_objects.len());
        // In the order the inputs hold them (which one is "first" of two alike).
        let mut json = loaded.json_objects.into_iter().peekable();
        for (i, d) in loaded.documents.into_iter().enumerate() {
            while let Some((_, o)) = json.next_if(|(at, _)| *at <= i) {
                read.extend(json_entry(o, &mut errors));
            }
            read.extend(snap.add_document(d, &mut errors));
        }
        for (_, o) in json {
            read.extend(json_entry(o, &mut errors));
        }
        // Of two alike, the second is reported, after every other problem.
        let mut repeated = Vec::new();
        snap.objects = Objects::new(read, &mut repeated);
        errors.append(&mut repeated);
        // A document nested deeper than fieldguard reads is an object it cannot read (a real
        // cluster can hold one), not a broken snapshot: the rest stays usable, and what the
        // unread one might be is unavailable, never absent.
        let (deep, errors): (Vec<_>, Vec<_>) =
            errors.into_iter().partition(ManifestError::is_too_deep);
        snap.objects.set_unreadable(deep);
        if errors.is_empty() {
            Ok(snap)
        } else {
            Err(errors)
        }
    }

    /// A parsed document: an OpenAPI document kept aside, an object given back.
    fn add_document(
        &mut self,
        d: Document,
        errors: &mut Vec<ManifestError>,
    ) -> Option<(ObjectRef, Entry)> {
        if is_openapi(&d.object) {
            self.openapi.push(d);
            return None;
        }
        let problems = manifest::identity_errors(&d);
        if !problems.is_empty() {
            errors.extend(problems);
            return None;
        }
        let r = ObjectRef::of(&d.object);
        Some((r, Entry::parsed(d.origin, d.object)))
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
        for (e, v) in self
            .objects
            .as_read()
            .filter_map(|(_, e)| Some((e, e.parsed_value()?)))
            .filter(|(_, v)| crd::is_crd(v))
        {
            if let Err(err) = catalog.add_crd(v) {
                errors.push(e.origin.error(err.to_string()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Every object, in reference order.
    pub fn objects(&self) -> impl Iterator<Item = (&ObjectRef, &Entry)> {
        self.objects.in_order()
    }

    /// The objects, taken out of the snapshot.
    pub fn into_objects(self) -> Objects {
        self.objects
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

    /// Every object, parsed (each once, shared with the snapshot), as a prediction's input.
    pub fn fetched(&self) -> Result<super::Fetched, ManifestError> {
        let mut objects = foldhash::HashMap::default();
        for (r, e) in self.objects.as_read() {
            objects.insert(r.clone(), e.shared()?);
        }
        Ok(super::Fetched {
            objects,
            origins: self
                .objects
                .as_read()
                .map(|(r, e)| (r.clone(), e.origin.clone()))
                .collect(),
            source: self.source.clone(),
            prepared: None,
        })
    }
}

/// An object kept as text; a CRD is parsed now, into its entry (the catalog needs it).
fn json_entry(o: JsonObject, errors: &mut Vec<ManifestError>) -> Option<(ObjectRef, Entry)> {
    let JsonObject {
        origin,
        text,
        api_version,
        kind,
        namespace,
        name,
    } = o;
    let entry = Entry::text(origin, text);
    if kind == "CustomResourceDefinition"
        && api_version.starts_with("apiextensions.k8s.io/")
        && let Err(e) = entry.shared()
    {
        errors.push(e);
        return None;
    }
    Some((
        ObjectRef::from_owned(api_version, kind, namespace, name),
        entry,
    ))
}

fn is_openapi(v: &Value) -> bool {
    v.get_path(&["openapi"])
        .is_some_and(|x| x.as_str().is_some())
        || v.get_path(&["swagger"])
            .is_some_and(|x| x.as_str().is_some())
}

fn located(d: &Document, message: String) -> ManifestError {
    d.origin.error(message)
}

/// `snapshot examples/cluster` for reports.
pub fn describe_inputs(inputs: &[Input]) -> String {
    format!("snapshot {}", Input::names(inputs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::state::{LiveState, SnapshotState};

    fn config_map(ns: &str, name: &str, data: &str) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","managedFields":[{{"manager":"m","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{"f:k":{{}}}}}}}}]}},"data":{{"k":"{data}"}}}}"#
        )
    }

    fn dir(tag: &str, files: &[(&str, String)]) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("fieldguard-snapshot-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (name, text) in files {
            std::fs::write(d.join(name), text).unwrap();
        }
        d
    }

    /// Objects kept as text read as they were written, one by one and many at once (on every
    /// core), each once; YAML files are parsed as before.
    #[tokio::test]
    async fn objects_kept_as_text_read_as_written() {
        let items: Vec<String> = (0..100)
            .map(|i| config_map("a", &format!("cm{i}"), &format!("v{i}")))
            .collect();
        let list = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n{}\n]}}",
            items.join(",\n")
        );
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yy\n  namespace: b\ndata:\n  k: yv\n";
        let d = dir("kept", &[("a.json", list), ("b.yaml", yaml.to_string())]);
        let snap = Snapshot::load(&[Input::Path(d.clone())], &mut std::io::empty()).unwrap();
        let kept = snap.objects().filter(|(_, e)| e.kept_as_text()).count();
        assert_eq!((snap.len(), kept), (101, 100));
        let catalog = Catalog::kubernetes(crate::catalog::DEFAULT_KUBERNETES).unwrap();
        let state = SnapshotState::new(snap, catalog);
        let mut refs: Vec<(ObjectRef, String)> = (0..100)
            .map(|i| {
                (
                    ObjectRef::new("v1", "ConfigMap", "a", &format!("cm{i}")),
                    "v1".into(),
                )
            })
            .collect();
        refs.push((ObjectRef::new("v1", "ConfigMap", "b", "yy"), "v1".into()));
        refs.push((ObjectRef::new("v1", "ConfigMap", "a", "none"), "v1".into()));
        let got = state.fetch_fresh(&refs).await.unwrap();
        assert_eq!(got.len(), 102);
        for (i, g) in got.iter().take(100).enumerate() {
            let g = g.as_ref().unwrap();
            assert_eq!(g.str_at(&["data", "k"]), Some(format!("v{i}").as_str()));
            let again = state.get(&refs[i].0).await.unwrap().unwrap();
            assert!(
                std::sync::Arc::ptr_eq(g, &again),
                "parsed once, then shared"
            );
        }
        assert_eq!(
            got[100].as_ref().unwrap().str_at(&["data", "k"]),
            Some("yv")
        );
        assert!(got[101].is_none());
        // Origins: the file, the item, the item's own line.
        let o = state.origin(&refs[7].0).unwrap();
        assert_eq!((o.item, o.line), (Some(7), 9));
        assert_eq!(state.list(Some("b")).await.unwrap().len(), 1);
        assert_eq!(state.managed_by("m").await.unwrap().len(), 100);
        let _ = std::fs::remove_dir_all(d);
    }

    /// Objects left on disk read as written, each when wanted; a file changed since it was
    /// read (in length, or only in its time of last change) is refused, located at the object,
    /// never read as if it were the same.
    #[test]
    fn objects_left_on_disk_are_read_when_wanted_and_refused_once_changed() {
        let list = |f: usize, v: &str| {
            let items: Vec<String> = (0..3)
                .map(|i| config_map("a", &format!("f{f}cm{i}"), &format!("{v}{i}")))
                .collect();
            format!(
                "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{}]}}",
                items.join(",")
            )
        };
        let files: Vec<(String, String)> = (0..4)
            .map(|f| (format!("{f}.json"), list(f, &format!("f{f}v"))))
            .collect();
        let d = dir(
            "on-disk",
            &files
                .iter()
                .map(|(n, t)| (n.as_str(), t.clone()))
                .collect::<Vec<_>>(),
        );
        let load = || {
            Snapshot::load_leaving_text_on_disk(
                &[Input::Path(d.clone())],
                &mut std::io::empty(),
                &Limits::SNAPSHOT,
            )
            .unwrap()
        };
        let value = |snap: &Snapshot, f: usize, i: usize| {
            let (_, e) = snap
                .objects()
                .find(|(_, e)| {
                    e.origin.file.ends_with(&format!("{f}.json")) && e.origin.item == Some(i)
                })
                .unwrap();
            e.shared()
                .map(|v| v.str_at(&["data", "k"]).map(str::to_string))
        };
        let snap = load();
        assert_eq!(snap.len(), 12);
        if crate::cores::cores() < 2 {
            // Files are left on disk when read on every core; one core reads them into memory.
            return;
        }
        assert!(snap.objects().all(|(_, e)| e.left_on_disk()));
        for f in 0..4 {
            for i in 0..3 {
                assert_eq!(value(&snap, f, i).unwrap(), Some(format!("f{f}v{i}")));
            }
        }
        // Longer: the length tells.
        let snap = load();
        std::fs::write(d.join("1.json"), list(1, "longer")).unwrap();
        let e = value(&snap, 1, 2).unwrap_err();
        assert!(
            e.message.contains("changed since fieldguard read it"),
            "{e}"
        );
        assert!(e.file.ends_with("1.json") && e.line == Some(1), "{e}");
        // The same length, another time of last change: refused too.
        let snap = load();
        let same = list(2, "f2w");
        assert_eq!(same.len(), files[2].1.len());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("2.json"))
            .unwrap();
        std::io::Write::write_all(&mut &f, same.as_bytes()).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        assert!(value(&snap, 2, 0).is_err());
        // Untouched files still read.
        assert_eq!(value(&snap, 3, 1).unwrap(), Some("f3v1".into()));
        let _ = std::fs::remove_dir_all(d);
    }

    /// An object twice is located at its second place, naming the first, in the order the
    /// files are read whichever way each is read.
    #[test]
    fn a_repeated_object_names_the_first_in_file_order() {
        let cm = config_map("a", "x", "1");
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: a\n";
        for (first, second) in [
            (("1.yaml", yaml.to_string()), ("2.json", cm.clone())),
            (("1.json", cm.clone()), ("2.yaml", yaml.to_string())),
        ] {
            let d = dir(first.0, &[first.clone(), second.clone()]);
            let errors = Snapshot::load(&[Input::Path(d.clone())], &mut std::io::empty())
                .err()
                .unwrap();
            assert_eq!(errors.len(), 1);
            assert!(errors[0].file.ends_with(&second.0), "{}", errors[0]);
            assert!(errors[0].message.contains(first.0), "{}", errors[0]);
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
