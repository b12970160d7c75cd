//! JSON objects kept as their text. A snapshot holds many objects and a check reads few, so a
//! JSON file whose every object is clean — accepted by a strict parse, named, not a schema —
//! is skimmed ([`crate::value::skim`]) and its objects kept as text, each parsed when it is
//! first read. Any other file is parsed as usual, which locates every problem.

use super::{Loaded, Origin};
use crate::value::Value;
use crate::value::json;
use crate::value::skim::{self, Found, Items, Skim};
use bytes::Bytes;
use std::sync::Arc;

/// An object's JSON text: a part of its file's buffer, shared; or where it lies in its file,
/// read again when wanted (a snapshot read by a command that reads few of its objects).
#[derive(Clone, Debug)]
pub struct JsonText(Text);

#[derive(Clone, Debug)]
enum Text {
    Shared(Bytes),
    OnDisk {
        file: Arc<DiskFile>,
        at: u64,
        len: usize,
    },
}

/// A file as it was read: where it is and what the file system said of it then.
#[derive(Debug)]
pub struct DiskFile {
    pub path: std::path::PathBuf,
    pub stamp: FileStamp,
}

/// What tells a file apart from itself changed: device and inode, length, last change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
}

impl FileStamp {
    pub fn of(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            modified: (m.mtime(), m.mtime_nsec()),
        }
    }
}

/// Where a file's text lives, for the objects kept of it.
#[derive(Clone, Copy)]
pub(super) enum Owner<'a> {
    /// Nowhere else: each object copies its text.
    None,
    /// A buffer the objects share.
    Shared(&'a Bytes),
    /// On disk: `buffer` holds the file as read; the objects say where in the file they lie.
    Disk {
        file: &'a Arc<DiskFile>,
        buffer: &'a [u8],
    },
}

impl JsonText {
    /// A text as a skim would keep it (tests).
    #[cfg(test)]
    pub(crate) fn for_tests(text: &str) -> JsonText {
        JsonText(Text::Shared(Bytes::copy_from_slice(text.as_bytes())))
    }

    /// The object, as [`json::parse_strict`] reads it (a skim found that it accepts it); a
    /// text on disk is read again first, refused if its file is not the one read.
    pub fn parse(&self) -> Result<Value, String> {
        match &self.0 {
            Text::Shared(b) => json::parse_strict(b).map_err(|e| e.to_string()),
            Text::OnDisk { file, at, len } => {
                let bytes = reread(file, *at, *len)?;
                json::parse_strict(&bytes).map_err(|e| e.to_string())
            }
        }
    }

    /// The text kept in memory (tests).
    #[cfg(test)]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Text::Shared(b) => b,
            Text::OnDisk { .. } => panic!("the text is on disk"),
        }
    }

    /// Whether the text is read from its file when wanted.
    pub fn on_disk(&self) -> bool {
        matches!(self.0, Text::OnDisk { .. })
    }
}

/// `len` bytes at `at` of `file`, if it is still the file read (same inode, length and time of
/// last change).
fn reread(file: &DiskFile, at: u64, len: usize) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let changed = || {
        format!(
            "{} changed since fieldguard read it: read the snapshot again",
            file.path.display()
        )
    };
    // Never waited on: a pipe put in the file's place opens at once (and is then refused).
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&file.path)
        .map_err(|e| format!("cannot read again: {e}"))?;
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot read again: {e}"))?;
    if FileStamp::of(&meta) != file.stamp {
        return Err(changed());
    }
    let mut bytes = vec![0; len];
    f.read_exact_at(&mut bytes, at).map_err(|_| changed())?;
    Ok(bytes)
}

/// The objects kept as text, in order, each with the number of documents read before it: in
/// runs as the parts of a parallel read left them (joined without moving an object again).
#[derive(Debug, Default)]
pub struct Kept(Vec<Vec<(usize, JsonObject)>>);

impl Kept {
    pub(super) fn push(&mut self, documents_before: usize, o: JsonObject) {
        match self.0.last_mut() {
            Some(run) => run.push((documents_before, o)),
            None => self.0.push(vec![(documents_before, o)]),
        }
    }

    /// `other`'s objects after these, with `documents` more documents before each.
    pub(super) fn append(&mut self, other: Kept, documents: usize) {
        for mut run in other.0 {
            run.iter_mut().for_each(|(at, _)| *at += documents);
            self.0.push(run);
        }
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Vec::is_empty)
    }

    pub fn iter(&self) -> impl Iterator<Item = &(usize, JsonObject)> {
        self.0.iter().flatten()
    }
}

impl IntoIterator for Kept {
    type Item = (usize, JsonObject);
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<(usize, JsonObject)>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().flatten()
    }
}

impl<'a> IntoIterator for &'a Kept {
    type Item = &'a (usize, JsonObject);
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<(usize, JsonObject)>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().flatten()
    }
}

/// An object of a JSON file, kept as text, with what names it.
#[derive(Clone, Debug)]
pub struct JsonObject {
    pub origin: Origin,
    pub text: JsonText,
    pub api_version: String,
    pub kind: String,
    /// Empty when none is set.
    pub namespace: String,
    pub name: String,
}

/// Takes a JSON file's objects as text into `out` when every one is clean, counted as a parse
/// counts them; false, with nothing taken or counted, otherwise: the caller parses the file.
/// `owner`: the buffer `text` lies in, which the objects then share (else they copy `text`).
pub(super) fn take(name: &Arc<str>, text: &str, owner: Owner, out: &mut Loaded) -> bool {
    let Some(mut top) = skim::top(text) else {
        return false;
    };
    if !top.object {
        return false;
    }
    let items = top.items.take();
    let items_set = !matches!(items, None | Some(Items::Other { null: true }));
    let kind = top.kind.as_str().unwrap_or("");
    let is_list = kind == "List" || (kind.ends_with("List") && items_set);
    let large = text.len() as u64 > out.limits.document_bytes;
    let found: Vec<(&str, Skim)> = if is_list {
        // As a parse reads a list: each item an object; a list too large to be one document
        // is read item by item, each within the document limit.
        let Some(Items::List(items)) = items else {
            return false;
        };
        if large
            && items
                .iter()
                .any(|(i, _)| i.len() as u64 > out.limits.document_bytes)
        {
            return false;
        }
        items
    } else {
        if large {
            return false;
        }
        vec![(text, top)]
    };
    if !found.iter().all(|(_, s)| clean(s)) {
        return false;
    }
    let counted = match (is_list, large) {
        (false, _) => 1,
        (true, false) => found.len().max(1),
        (true, true) => 1 + found.len(),
    };
    if out.counted + counted > out.limits.documents {
        return false;
    }
    out.counted += counted;
    // Where `text` starts in what holds it.
    let (file, offset) = match owner {
        Owner::Shared(b) if let Some(at) = within(b, text) => (Ok(b.slice(at.clone())), 0),
        Owner::Disk { file, buffer } if let Some(at) = within(buffer, text) => {
            (Err(file), at.start as u64)
        }
        _ => (Ok(Bytes::copy_from_slice(text.as_bytes())), 0),
    };
    let (base, bytes) = (text.as_ptr() as usize, text.as_bytes());
    let (mut seen, mut line) = (0usize, 1u32);
    for (i, (t, s)) in found.into_iter().enumerate() {
        let start = t.as_ptr() as usize - base;
        line += memchr::memchr_iter(b'\n', &bytes[seen..start]).count() as u32;
        seen = start;
        let string = |f: Found| match f {
            Found::Str(s) => s,
            _ => String::new(),
        };
        let object = JsonObject {
            origin: Origin {
                file: name.clone(),
                doc: 1,
                item: is_list.then_some(i),
                line,
            },
            text: JsonText(match &file {
                Ok(b) => Text::Shared(b.slice(start..start + t.len())),
                Err(f) => Text::OnDisk {
                    file: Arc::clone(f),
                    at: offset + start as u64,
                    len: t.len(),
                },
            }),
            api_version: string(s.api_version),
            kind: string(s.kind),
            namespace: string(s.namespace),
            name: string(s.name),
        };
        out.json_objects.push(out.documents.len(), object);
    }
    true
}

/// Where `text` lies in `buffer`, if it does.
fn within(buffer: &[u8], text: &str) -> Option<std::ops::Range<usize>> {
    let start = (text.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
    let end = start.checked_add(text.len())?;
    (end <= buffer.len()).then_some(start..end)
}

/// An object a parse would take as it is: named by non-empty strings (a namespace, when set,
/// a string), not a schema document.
fn clean(s: &Skim) -> bool {
    s.object
        && !s.schema_keys
        && s.api_version.non_empty().is_some()
        && s.kind.non_empty().is_some()
        && s.name.non_empty().is_some()
        && matches!(s.namespace, Found::Missing | Found::Str(_))
}

#[cfg(test)]
mod tests {
    use super::super::{Limits, parse_into};
    use super::*;
    use crate::value::skim::example;

    fn load(text: &str, limits: &Limits, keep: bool) -> Loaded {
        let mut out = Loaded::new(limits.clone()).any_documents();
        if keep {
            out = out.keeping_json();
        }
        parse_into(&Arc::from("s.json"), text.as_bytes(), &mut out);
        out
    }

    /// Each object's place (document, item) and value, in order.
    fn objects(l: &Loaded) -> Vec<((usize, Option<usize>), Value)> {
        let parsed = l
            .documents
            .iter()
            .map(|d| ((d.origin.doc, d.origin.item), d.object.clone()));
        let kept = l
            .json_objects
            .iter()
            .map(|(_, o)| ((o.origin.doc, o.origin.item), o.text.parse().unwrap()));
        parsed.chain(kept).collect()
    }

    /// Kept as text or parsed, a file gives the same objects, errors and count; clean files
    /// are kept as text, with their identity, and the rest parsed.
    #[test]
    fn kept_as_text_exactly_when_a_parse_takes_the_file_as_it_is() {
        let list = example();
        let snapshot = Limits::SNAPSHOT;
        let small_documents = Limits {
            document_bytes: list.len() as u64 - 1,
            ..Limits::SNAPSHOT
        };
        let one = {
            let v = json::parse_strict(list.as_bytes()).unwrap();
            let item = v.get_path(&["items"]).unwrap().as_list().unwrap()[1].clone();
            json::to_string(&item, json::Style::PLAIN)
        };
        let cases: Vec<(&str, String, &Limits, bool)> = vec![
            ("a List", list.clone(), &snapshot, true),
            (
                "a List over the document size",
                list.clone(),
                &small_documents,
                true,
            ),
            ("one object", one.clone(), &snapshot, true),
            (
                "an object over the document size",
                one.clone(),
                &Limits {
                    document_bytes: 10,
                    ..Limits::SNAPSHOT
                },
                false,
            ),
            (
                "an object with items",
                one.replacen('{', r#"{"items":[1,{"a":[]}],"#, 1),
                &snapshot,
                true,
            ),
            (
                "a repeated key deep inside",
                list.replacen("\"uid\":", "\"uid\":1,\"uid\":", 1),
                &snapshot,
                false,
            ),
            (
                "an item without a name",
                list.replacen("\"name\":\"shop\"", "\"nome\":\"shop\"", 1),
                &snapshot,
                false,
            ),
            (
                "an item's name a number",
                list.replacen("\"name\":\"shop\"", "\"name\":7", 1),
                &snapshot,
                false,
            ),
            (
                "a namespace not a string",
                one.replacen("\"namespace\":\"shop\"", "\"namespace\":{}", 1),
                &snapshot,
                false,
            ),
            (
                "an item not an object",
                list.replacen("\"items\":[", "\"items\":[3,", 1),
                &snapshot,
                false,
            ),
            (
                "items not a list",
                r#"{"kind":"List","apiVersion":"v1","items":{"a":1}}"#.into(),
                &snapshot,
                false,
            ),
            (
                "no items",
                r#"{"kind":"List","apiVersion":"v1","items":null}"#.into(),
                &snapshot,
                false,
            ),
            (
                "a schema",
                r#"{"openapi":"3.0.0","apiVersion":"v1","kind":"X","metadata":{"name":"x"}}"#
                    .into(),
                &snapshot,
                false,
            ),
            (
                "broken text",
                list[..list.len() - 3].to_string(),
                &snapshot,
                false,
            ),
            (
                "too many documents",
                list.clone(),
                &Limits {
                    documents: 3,
                    ..Limits::SNAPSHOT
                },
                false,
            ),
        ];
        for (what, text, limits, kept) in cases {
            let (lazy, eager) = (load(&text, limits, true), load(&text, limits, false));
            assert!(eager.json_objects.is_empty(), "{what}");
            assert_eq!(
                !lazy.json_objects.is_empty(),
                kept,
                "{what}: {:?}",
                lazy.errors
            );
            assert!(!kept || lazy.documents.is_empty(), "{what}");
            assert_eq!(lazy.errors, eager.errors, "{what}");
            assert_eq!(lazy.counted, eager.counted, "{what}");
            let (a, b) = (objects(&lazy), objects(&eager));
            assert_eq!(a.len(), b.len(), "{what}");
            for ((pa, va), (pb, vb)) in a.iter().zip(&b) {
                assert_eq!(pa, pb, "{what}");
                assert!(crate::value::equals(va, vb), "{what}");
            }
            for (_, o) in &lazy.json_objects {
                let v = o.text.parse().unwrap();
                let at = |k: &[&str]| v.str_at(k).unwrap_or("").to_string();
                assert_eq!(o.api_version, at(&["apiVersion"]), "{what}");
                assert_eq!(o.kind, at(&["kind"]), "{what}");
                assert_eq!(o.name, at(&["metadata", "name"]), "{what}");
                assert_eq!(o.namespace, at(&["metadata", "namespace"]), "{what}");
                let line = 1 + text[..text
                    .find(std::str::from_utf8(o.text.as_bytes()).unwrap())
                    .unwrap()]
                    .matches('\n')
                    .count();
                assert_eq!(o.origin.line as usize, line, "{what}");
            }
        }
    }
}
