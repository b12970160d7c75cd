//! Manifests as users have them: files, directories (recursively) and standard input;
//! multi-document YAML and JSON; `List` kinds; the output of `helm template` and
//! `kustomize build`. Every object keeps where it came from (file, document, line) and a line
//! for each of its fields, so problems and findings point into the file.
//!
//! Loading is all-or-nothing for callers that need it: [`Loaded::errors`] lists every problem
//! found (invalid text, repeated keys, missing identity, oversized or too deeply nested
//! documents, alias bombs), each located, and no partial result should be acted upon.

mod lines;

pub use lines::{line_of, line_of_printed};

use crate::value::yaml::{Lines, YamlOptions, parse_documents};
use crate::value::{MAX_DEPTH, MAX_DOCUMENT_BYTES, Value, json};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest manifest file read (a file holds many documents; each is limited separately).
pub const MAX_FILE_BYTES: usize = 256 * 1024 * 1024;

/// Where manifests come from.
#[derive(Clone, Debug)]
pub enum Input {
    /// A file, or a directory searched recursively for `.yaml`, `.yml` and `.json` files.
    Path(PathBuf),
    /// Standard input (`-`).
    Stdin,
}

impl Input {
    /// `-` is standard input; anything else a path.
    pub fn parse(s: &str) -> Input {
        if s == "-" {
            Input::Stdin
        } else {
            Input::Path(PathBuf::from(s))
        }
    }
}

/// Where an object was found.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// The file as given (or `<stdin>`).
    pub file: Arc<str>,
    /// 1-based document number in the file.
    pub doc: usize,
    /// Index in the `items` of a `List` document, if it came from one.
    pub item: Option<usize>,
    /// First line of the object.
    pub line: u32,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: document {}", self.file, self.line, self.doc)?;
        if let Some(i) = self.item {
            write!(f, ", item {i}")?;
        }
        Ok(())
    }
}

/// One object from a manifest.
#[derive(Clone, Debug)]
pub struct Document {
    pub origin: Origin,
    pub object: Value,
    /// Lines of the object's nodes (absent when the text could not be mapped).
    pub lines: Option<Lines>,
}

impl Document {
    pub fn str_at(&self, keys: &[&str]) -> Option<&str> {
        self.object.str_at(keys)
    }
    pub fn api_version(&self) -> &str {
        self.str_at(&["apiVersion"]).unwrap_or("")
    }
    pub fn kind(&self) -> &str {
        self.str_at(&["kind"]).unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.str_at(&["metadata", "name"]).unwrap_or("")
    }
    /// `metadata.namespace`, if set and not empty.
    pub fn namespace(&self) -> Option<&str> {
        self.str_at(&["metadata", "namespace"])
            .filter(|s| !s.is_empty())
    }
    /// The line of the field at a path printed like kube-apiserver prints it.
    pub fn line_of_printed(&self, path: &str) -> u32 {
        match &self.lines {
            Some(l) => line_of_printed(&self.object, l, path),
            None => self.origin.line,
        }
    }

    /// The line of the field at `path` (or of its nearest ancestor present in the text).
    pub fn line_of(&self, path: &[crate::fieldpath::PathElement]) -> u32 {
        match &self.lines {
            Some(l) => line_of(&self.object, l, path),
            None => self.origin.line,
        }
    }
}

/// A problem with a manifest, located.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct ManifestError {
    pub file: Arc<str>,
    /// 1-based document number, when known.
    pub doc: Option<usize>,
    pub line: Option<u32>,
    /// The field concerned (`.metadata.name`), when there is one.
    pub path: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(d) = self.doc {
            write!(f, ": document {d}")?;
        }
        if let Some(p) = &self.path {
            write!(f, ": {p}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Everything read: the objects, and every problem found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub documents: Vec<Document>,
    pub errors: Vec<ManifestError>,
    check_identity: bool,
}

impl Loaded {
    fn error(&mut self, file: &Arc<str>, doc: Option<usize>, line: Option<u32>, msg: String) {
        self.errors.push(ManifestError {
            file: file.clone(),
            doc,
            line,
            path: None,
            message: msg,
        });
    }
}

/// Reads every input (standard input from `stdin`). Directories are searched recursively in
/// name order; files that are not `.yaml`, `.yml` or `.json` are skipped there (but read when
/// named directly).
pub fn load(inputs: &[Input], stdin: &mut dyn Read) -> Loaded {
    load_with(inputs, stdin, true)
}

/// [`load`]; `identity`: require apiVersion, kind and metadata.name of every document (off
/// for inputs that also hold other documents, such as OpenAPI schemas in a snapshot). Without
/// it, lines are not mapped inside JSON documents either: findings point into manifests, not
/// into snapshots, and mapping a large JSON file costs a second parse.
pub fn load_with(inputs: &[Input], stdin: &mut dyn Read, identity: bool) -> Loaded {
    let mut out = Loaded {
        check_identity: identity,
        ..Loaded::default()
    };
    let (files, errors) = read_files(inputs, stdin);
    out.errors = errors;
    for (name, bytes) in files {
        parse_into(&name, &bytes, &mut out);
    }
    out
}

/// A file's name (as given) and its bytes.
pub type FileBytes = (Arc<str>, Vec<u8>);

/// The files the inputs name (directories expanded as [`load`] does), read but not parsed.
pub fn read_files(inputs: &[Input], stdin: &mut dyn Read) -> (Vec<FileBytes>, Vec<ManifestError>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut fail = |name: &Arc<str>, msg: String| {
        errors.push(ManifestError {
            file: name.clone(),
            doc: None,
            line: None,
            path: None,
            message: msg,
        })
    };
    for input in inputs {
        match input {
            Input::Stdin => {
                let name: Arc<str> = Arc::from("<stdin>");
                let mut bytes = Vec::new();
                match stdin
                    .take(MAX_FILE_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                {
                    Ok(_) => files.push((name, bytes)),
                    Err(e) => fail(&name, format!("cannot read: {e}")),
                }
            }
            Input::Path(p) => walk(p, true, &mut files, &mut fail),
        }
    }
    (files, errors)
}

fn walk(
    p: &Path,
    named: bool,
    files: &mut Vec<FileBytes>,
    fail: &mut dyn FnMut(&Arc<str>, String),
) {
    let name: Arc<str> = Arc::from(p.display().to_string());
    let meta = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) => return fail(&name, format!("cannot read: {e}")),
    };
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(p) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(e) => return fail(&name, format!("cannot read: {e}")),
        };
        entries.sort();
        for e in entries {
            walk(&e, false, files, fail);
        }
        return;
    }
    if !named {
        let manifest_like = p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"));
        if !manifest_like {
            return;
        }
    }
    if meta.len() > MAX_FILE_BYTES as u64 {
        return fail(
            &name,
            format!(
                "file is {} bytes, more than the limit of {MAX_FILE_BYTES}",
                meta.len()
            ),
        );
    }
    match std::fs::read(p) {
        Ok(bytes) => files.push((name, bytes)),
        Err(e) => fail(&name, format!("cannot read: {e}")),
    }
}

/// Parses one file's text into `out` (identity checked).
pub fn parse_into(name: &Arc<str>, bytes: &[u8], out: &mut Loaded) {
    if bytes.len() > MAX_FILE_BYTES {
        return out.error(
            name,
            None,
            None,
            format!("input is more than the limit of {MAX_FILE_BYTES} bytes"),
        );
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let at = e.valid_up_to();
            let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count() as u32;
            return out.error(name, None, Some(line), format!("invalid UTF-8 (byte {at})"));
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = text.trim_start().as_bytes().first().copied();
    if matches!(first, Some(b'{') | Some(b'[')) {
        parse_json(name, text, out);
    } else {
        parse_yaml(name, text, out);
    }
}

fn parse_json(name: &Arc<str>, text: &str, out: &mut Loaded) {
    match json::parse_strict(text.as_bytes()) {
        Ok(v) => {
            // JSON is YAML: the YAML reader maps its lines (the values come from the JSON one).
            let lines = out
                .check_identity
                .then(|| parse_documents(text, &yaml_options()).ok())
                .flatten()
                .and_then(|mut d| (d.len() == 1).then(|| d.remove(0).lines));
            let line = lines.as_ref().map_or(1, Lines::line).max(1);
            add_document(name, 1, line, v, lines, out);
        }
        Err(e) => out.error(name, Some(1), Some(e.line as u32), e.message),
    }
}

fn yaml_options() -> YamlOptions {
    YamlOptions {
        reject_duplicate_keys: true,
        max_depth: MAX_DEPTH,
        max_alias_nodes: 100_000,
    }
}

fn parse_yaml(name: &Arc<str>, text: &str, out: &mut Loaded) {
    match parse_documents(text, &yaml_options()) {
        Ok(docs) => {
            for (i, d) in docs.into_iter().enumerate() {
                add_document(name, i + 1, d.line.max(1), d.value, Some(d.lines), out);
            }
        }
        Err(e) => out.error(name, Some(e.doc), Some(e.line as u32), e.message),
    }
}

/// Adds one parsed document: skipped if empty, flattened if a `List`, checked for identity.
fn add_document(
    name: &Arc<str>,
    doc: usize,
    line: u32,
    value: Value,
    lines: Option<Lines>,
    out: &mut Loaded,
) {
    if value.is_null() {
        return; // empty documents (`---` separators, templates that rendered nothing)
    }
    let origin = Origin {
        file: name.clone(),
        doc,
        item: None,
        line,
    };
    let Value::Map(_) = &value else {
        out.errors.push(ManifestError {
            file: name.clone(),
            doc: Some(doc),
            line: Some(line),
            path: None,
            message: format!("expected an object, found {}", value.type_name()),
        });
        return;
    };
    let size = json::to_string(&value, json::Style::PLAIN).len();
    if size > MAX_DOCUMENT_BYTES {
        out.errors.push(ManifestError {
            file: name.clone(),
            doc: Some(doc),
            line: Some(line),
            path: None,
            message: format!(
                "document is {size} bytes as JSON, more than the limit of {MAX_DOCUMENT_BYTES}"
            ),
        });
        return;
    }
    if is_list(&value) {
        let Value::Map(mut m) = value else {
            unreachable!("checked above")
        };
        // The line map lists a map's entries in its key order.
        let at = m.keys().position(|k| k == "items");
        let items = match m.remove("items") {
            Some(Value::List(items)) => items,
            _ => Vec::new(),
        };
        let item_lines: Vec<Option<Lines>> = match (&lines, at) {
            (Some(Lines::Map(_, entries)), Some(i)) => match entries.get(i) {
                Some((_, Lines::List(_, ls))) => ls.iter().cloned().map(Some).collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        for (i, item) in items.into_iter().enumerate() {
            let il = item_lines.get(i).cloned().flatten();
            let o = Origin {
                item: Some(i),
                line: il.as_ref().map_or(line, Lines::line),
                ..origin.clone()
            };
            if !matches!(item, Value::Map(_)) {
                out.errors.push(ManifestError {
                    file: name.clone(),
                    doc: Some(doc),
                    line: Some(o.line),
                    path: Some(format!(".items[{i}]")),
                    message: format!("expected an object, found {}", item.type_name()),
                });
                continue;
            }
            push_checked(
                Document {
                    origin: o,
                    object: item,
                    lines: il,
                },
                out,
            );
        }
        return;
    }
    push_checked(
        Document {
            origin,
            object: value,
            lines,
        },
        out,
    );
}

/// `kind: List`, or any `...List` kind carrying `items` (as kubectl reads them).
fn is_list(v: &Value) -> bool {
    let kind = v.str_at(&["kind"]).unwrap_or("");
    let has_items = matches!(v.get_path(&["items"]), Some(Value::List(_)));
    kind == "List" || (kind.ends_with("List") && has_items)
}

/// A problem with the string at `keys`, if any.
fn identity_problem(v: &Value, keys: &[&str], what: &str) -> Option<String> {
    match v.get_path(keys) {
        None | Some(Value::Null) => Some(format!("{what} is missing")),
        Some(Value::String(s)) if s.is_empty() => Some(format!("{what} is empty")),
        Some(Value::String(_)) => None,
        Some(other) => Some(format!(
            "{what} must be a string, found {}",
            other.type_name()
        )),
    }
}

/// Checks an object's identity (apiVersion, kind, metadata.name) and adds it.
fn push_checked(d: Document, out: &mut Loaded) {
    if !out.check_identity {
        out.documents.push(d);
        return;
    }
    let problems = identity_errors(&d);
    if problems.is_empty() {
        out.documents.push(d);
    } else {
        out.errors.extend(problems);
    }
}

/// Problems with an object's identity: apiVersion, kind and metadata.name must be non-empty
/// strings (`generateName` cannot be applied).
pub fn identity_errors(d: &Document) -> Vec<ManifestError> {
    let mut problems = Vec::new();
    for (path, keys, what) in [
        (".apiVersion", &["apiVersion"][..], "apiVersion"),
        (".kind", &["kind"][..], "kind"),
        (".metadata.name", &["metadata", "name"][..], "metadata.name"),
    ] {
        let Some(mut message) = identity_problem(&d.object, keys, what) else {
            continue;
        };
        let generated = matches!(
            d.object.get_path(&["metadata", "generateName"]),
            Some(Value::String(s)) if !s.is_empty()
        );
        if what == "metadata.name" && generated {
            message = "metadata.generateName cannot be applied: server-side apply needs \
                       metadata.name"
                .into();
        }
        let line = match &d.lines {
            Some(l) => lines::line_of_keys(&d.object, l, keys),
            None => d.origin.line,
        };
        problems.push(ManifestError {
            file: d.origin.file.clone(),
            doc: Some(d.origin.doc),
            line: Some(line),
            path: Some(path.to_string()),
            message,
        });
    }
    problems
}

#[cfg(test)]
mod tests;
