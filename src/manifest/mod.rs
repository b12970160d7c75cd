//! Manifests as users have them: files, directories (recursively) and standard input;
//! multi-document YAML and JSON; `List` kinds; the output of `helm template` and
//! `kustomize build`. Every object keeps where it came from (file, document, line) and a line
//! for each of its fields, so problems and findings point into the file.
//!
//! Loading is all-or-nothing for callers that need it: [`Loaded::errors`] lists every problem
//! found (invalid text, repeated keys, missing identity, oversized or too deeply nested
//! documents, alias bombs), each located, and no partial result should be acted upon.

pub mod directives;
pub mod hooks;
mod identity;
pub mod limits;
mod lines;
mod parallel;
mod read;
pub(crate) mod split;
mod unparsed;

pub use identity::identity_errors;
use identity::push_checked;

pub use limits::Limits;
pub use lines::{line_of, line_of_printed};
pub use read::read_files;
use unparsed::Owner;
pub use unparsed::{DiskFile, FileStamp, JsonObject, JsonText, Kept};

use crate::deadline::Deadline;
use crate::value::yaml::{Lines, YamlOptions, parse_documents};
use crate::value::{MAX_DEPTH, Value, json};
use limits::Limit;
use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// Problems listed before the rest are summed up in one line (a file of a million broken
/// documents is not a million lines of errors).
pub const MAX_ERRORS: usize = 200;

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

    /// The inputs as given, for messages (`a.yaml, <stdin>`).
    pub fn names(inputs: &[Input]) -> String {
        let names: Vec<String> = inputs
            .iter()
            .map(|i| match i {
                Input::Stdin => "<stdin>".to_string(),
                Input::Path(p) => p.display().to_string(),
            })
            .collect();
        names.join(", ")
    }
}

/// Where an object was found.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

impl Origin {
    /// A problem with the object found here, located at its first line.
    pub fn error(&self, message: String) -> ManifestError {
        ManifestError {
            file: self.file.clone(),
            doc: Some(self.doc),
            line: Some(self.line),
            path: None,
            message,
        }
    }
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

impl ManifestError {
    /// Whether the problem is a document nested deeper than the parsers read (a JSON
    /// `recursion limit exceeded`, YAML's `nesting deeper than N levels`): input that is well
    /// formed but beyond fieldguard, unlike a syntax error.
    pub fn is_too_deep(&self) -> bool {
        self.message.contains("recursion limit exceeded")
            || (self.message.starts_with("nesting deeper than ")
                || self.message.contains(": nesting deeper than "))
    }
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
    /// JSON objects kept as text ([`Loaded::keeping_json`]), each with the number of
    /// `documents` read before it (the order the inputs hold them in).
    pub json_objects: Kept,
    pub errors: Vec<ManifestError>,
    check_identity: bool,
    keep_json: bool,
    /// Objects kept as text stay on disk (files read in parallel only): each is read again
    /// when wanted.
    json_on_disk: bool,
    /// What the input may hold.
    pub limits: Limits,
    /// When to give up reading.
    pub deadline: Deadline,
    /// Bytes and documents taken in so far (against the limits' totals).
    bytes: u64,
    counted: usize,
    /// Reading stopped (too many errors, a total exceeded, the deadline).
    stopped: bool,
    /// Parse on the calling thread only (the reference the parallel parse is checked against).
    one_thread: bool,
}

impl Loaded {
    /// Nothing read yet; manifests within `limits` (every object needs an identity).
    pub fn new(limits: Limits) -> Loaded {
        Loaded {
            check_identity: true,
            limits,
            ..Loaded::default()
        }
    }

    /// The same, stopping at `deadline`.
    pub fn until(mut self, deadline: Deadline) -> Loaded {
        self.deadline = deadline;
        self
    }

    /// The same, with objects that need no identity (apiVersion, kind, metadata.name): the
    /// caller sorts them (a snapshot's schema documents have none).
    pub fn any_documents(mut self) -> Loaded {
        self.check_identity = false;
        self
    }

    /// The same, keeping the objects of clean JSON files as text (`json_objects`), parsed when
    /// read: for a reader of few of many objects (a snapshot). A file with any problem, and
    /// YAML, is parsed as usual.
    pub fn keeping_json(mut self) -> Loaded {
        self.keep_json = true;
        self
    }

    /// The same, leaving the text of the objects kept of regular files on disk, where each is
    /// read again when wanted (and refused if its file changed since): for a command that ends
    /// soon after reading few of many objects, which then never holds the rest in memory.
    pub fn keeping_json_on_disk(mut self) -> Loaded {
        self.keep_json = true;
        self.json_on_disk = true;
        self
    }

    /// The same, parsing on the calling thread only.
    pub fn on_one_thread(mut self) -> Loaded {
        self.one_thread = true;
        self
    }

    fn error(&mut self, file: &Arc<str>, doc: Option<usize>, line: Option<u32>, msg: String) {
        self.errors.push(ManifestError {
            file: file.clone(),
            doc,
            line,
            path: None,
            message: msg,
        });
    }

    /// Stops reading: nothing more is parsed.
    fn stop(&mut self) {
        self.stopped = true;
    }

    /// Counts `n` more documents; false (with an error) past the limit.
    fn count(&mut self, name: &Arc<str>, n: usize) -> bool {
        self.counted += n;
        if self.counted > self.limits.documents {
            let msg = format!(
                "the input holds {} documents or more, {}",
                self.counted,
                self.limits.over(Limit::Documents)
            );
            self.error(name, None, None, msg);
            self.stop();
            return false;
        }
        true
    }

    /// Whether to go on: not stopped, not past the deadline, not too many errors.
    fn going(&mut self, name: &Arc<str>) -> bool {
        if self.stopped {
            return false;
        }
        if self.deadline.expired() {
            let msg = crate::deadline::Expired.to_string();
            self.error(name, None, None, msg);
            self.stop();
            return false;
        }
        if self.errors.len() > MAX_ERRORS {
            self.errors.truncate(MAX_ERRORS);
            self.error(
                name,
                None,
                None,
                format!("more problems after the first {MAX_ERRORS}; not listed"),
            );
            self.stop();
            return false;
        }
        true
    }
}

/// Reads every input (standard input from `stdin`) within [`Limits::MANIFESTS`]. Directories
/// are searched recursively in name order; files that are not `.yaml`, `.yml` or `.json` are
/// skipped there (but read when named directly).
pub fn load(inputs: &[Input], stdin: &mut dyn Read) -> Loaded {
    load_with(inputs, stdin, true, &Limits::MANIFESTS)
}

/// [`load`] within `limits`; `identity`: require apiVersion, kind and metadata.name of every
/// document (off for inputs that also hold other documents, such as OpenAPI schemas in a
/// snapshot). Without it, lines are not mapped inside JSON documents either: findings point
/// into manifests, not into snapshots, and mapping a large JSON file costs a second parse.
pub fn load_with(
    inputs: &[Input],
    stdin: &mut dyn Read,
    identity: bool,
    limits: &Limits,
) -> Loaded {
    let mut out = Loaded::new(limits.clone());
    out.check_identity = identity;
    load_into(inputs, stdin, out)
}

/// Reads every input into `out` (within its limits, as it is set up).
pub fn load_into(inputs: &[Input], stdin: &mut dyn Read, mut out: Loaded) -> Loaded {
    let steps = read::plan(inputs);
    let parallel = !out.one_thread && !out.deadline.expired();
    if let Some((files, parsed)) = parallel
        .then(|| parallel::read_and_parse(&steps, &out))
        .flatten()
    {
        return parsed.unwrap_or_else(|| parse_in_order(&files, out));
    }
    let (files, errors) = read::read_planned(&steps, stdin, &out.limits);
    out.errors = errors;
    // Objects kept as text share their file's buffer.
    let files: Vec<SharedFile> = files
        .into_iter()
        .map(|(name, b)| (name, bytes::Bytes::from(b)))
        .collect();
    if out.errors.is_empty()
        && parallel
        && let Some(parsed) = parallel::parse_files(&files, &out)
    {
        return parsed;
    }
    parse_in_order(&files, out)
}

/// Parses the files one after the other, on this thread.
fn parse_in_order(files: &[SharedFile], mut out: Loaded) -> Loaded {
    for (name, bytes) in files {
        parse_shared(name, bytes, &mut out);
    }
    out
}

/// A file's name (as given) and its bytes.
pub type FileBytes = (Arc<str>, Vec<u8>);

/// A file's name and its bytes, shared with the objects kept as text.
type SharedFile = (Arc<str>, bytes::Bytes);

/// Parses one file's text into `out`, within `out`'s limits: sizes and document counts are
/// checked on the bytes before anything is parsed.
pub fn parse_into(name: &Arc<str>, bytes: &[u8], out: &mut Loaded) {
    parse_file(name, bytes, Owner::None, out)
}

/// [`parse_into`]; objects kept as text share `bytes` instead of copying them.
fn parse_shared(name: &Arc<str>, bytes: &bytes::Bytes, out: &mut Loaded) {
    parse_file(name, bytes, Owner::Shared(bytes), out)
}

/// [`parse_into`]; objects kept as text are read again from `file` (whose text `bytes` is)
/// when wanted.
fn parse_on_disk(name: &Arc<str>, bytes: &[u8], file: &Arc<DiskFile>, out: &mut Loaded) {
    parse_file(
        name,
        bytes,
        Owner::Disk {
            file,
            buffer: bytes,
        },
        out,
    )
}

/// [`parse_into`], with the buffer `bytes` lies in, when shared.
fn parse_file(name: &Arc<str>, bytes: &[u8], owner: Owner, out: &mut Loaded) {
    if !out.going(name) {
        return;
    }
    let limits = out.limits.clone();
    if bytes.len() as u64 > limits.file_bytes {
        let msg = format!(
            "input is {} bytes, {}",
            bytes.len(),
            limits.over(Limit::File)
        );
        return out.error(name, None, None, msg);
    }
    out.bytes += bytes.len() as u64;
    if out.bytes > limits.total_bytes {
        let msg = format!(
            "the inputs together are {} bytes or more, {}",
            out.bytes,
            limits.over(Limit::Total)
        );
        out.error(name, None, None, msg);
        return out.stop();
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
    match text.trim_start().as_bytes().first().copied() {
        Some(b'{') => parse_json(name, text, owner, out),
        Some(b'[') => {
            // Never an object: refused without building the list.
            let lead = text.len() - text.trim_start().len();
            let line = 1 + text[..lead].matches('\n').count() as u32;
            out.error(
                name,
                Some(1),
                Some(line),
                "expected an object, found list".into(),
            );
        }
        _ => parse_yaml(name, text, out),
    }
}

/// The lines of a JSON text's nodes (JSON is YAML: the YAML reader maps them), the first being
/// line `first`; none when unreadable.
fn json_lines(text: &str, first: u32, out: &Loaded) -> Option<Lines> {
    if !out.check_identity {
        return None;
    }
    let mut docs = parse_documents(text, &yaml_options(out)).ok()?;
    if docs.len() != 1 {
        return None;
    }
    let mut lines = docs.remove(0).lines;
    lines.shift(first - 1);
    Some(lines)
}

/// A JSON file: one document, or a `List` too large to be one, read item by item.
fn parse_json(name: &Arc<str>, text: &str, owner: Owner, out: &mut Loaded) {
    if out.keep_json && unparsed::take(name, text, owner, out) {
        return;
    }
    if !out.count(name, 1) {
        return;
    }
    if text.len() as u64 > out.limits.document_bytes {
        return parse_json_list(name, text, out);
    }
    match json::parse_strict(text.as_bytes()) {
        Ok(v) => {
            let lines = json_lines(text, 1, out);
            let line = lines.as_ref().map_or(1, Lines::line).max(1);
            add_document(name, 1, line, v, lines, out);
        }
        Err(e) => out.error(name, Some(1), Some(e.line as u32), e.message),
    }
}

/// A JSON document larger than a document may be: accepted only as a `List` whose items each
/// fit, read one by one (its structure is checked without building it).
fn parse_json_list(name: &Arc<str>, text: &str, out: &mut Loaded) {
    #[derive(serde::Deserialize)]
    struct RawList<'a> {
        #[serde(default, borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
        #[serde(default, borrow)]
        items: Option<Vec<&'a serde_json::value::RawValue>>,
    }
    let too_large = |out: &mut Loaded| {
        let msg = format!(
            "document is {} bytes, {}",
            text.len(),
            out.limits.over(Limit::Document)
        );
        out.error(name, Some(1), Some(1), msg);
    };
    let Ok(list) = serde_json::from_str::<RawList>(text) else {
        return too_large(out);
    };
    let is_list = list
        .kind
        .as_deref()
        .is_some_and(|k| k == "List" || k.ends_with("List"));
    let (true, Some(items)) = (is_list, list.items) else {
        return too_large(out);
    };
    if !out.count(name, items.len()) {
        return;
    }
    let base = text.as_ptr() as usize;
    // Lines counted as the items go (once over the text, not from its start each time).
    let (mut seen, mut line) = (0usize, 1u32);
    for (i, item) in items.into_iter().enumerate() {
        if !out.going(name) {
            return;
        }
        let raw = item.get();
        let offset = raw.as_ptr() as usize - base;
        line += memchr::memchr_iter(b'\n', &text.as_bytes()[seen..offset]).count() as u32;
        seen = offset;
        if raw.len() as u64 > out.limits.document_bytes {
            let msg = format!(
                "item is {} bytes, {}",
                raw.len(),
                out.limits.over(Limit::Document)
            );
            out.errors.push(ManifestError {
                file: name.clone(),
                doc: Some(1),
                line: Some(line),
                path: Some(format!(".items[{i}]")),
                message: msg,
            });
            continue;
        }
        let origin = Origin {
            file: name.clone(),
            doc: 1,
            item: Some(i),
            line,
        };
        match json::parse_strict(raw.as_bytes()) {
            Ok(v @ Value::Map(_)) => {
                let lines = json_lines(raw, line, out);
                push_checked(
                    Document {
                        origin,
                        object: v,
                        lines,
                    },
                    out,
                );
            }
            Ok(other) => out.errors.push(ManifestError {
                file: name.clone(),
                doc: Some(1),
                line: Some(line),
                path: Some(format!(".items[{i}]")),
                message: format!("expected an object, found {}", other.type_name()),
            }),
            Err(e) => out.error(name, Some(1), Some(line + e.line as u32 - 1), e.message),
        }
    }
}

/// The parser's bounds: aliases may expand a document to no more than a document's limit (an
/// expansion past it is a document the apiserver would refuse, and costs what one that large
/// would).
/// The most bytes aliases may expand a document to: a document's limit — for a snapshot, whose
/// documents may be whole exported Lists (hundreds of MiB), no more than a manifest's
/// document (3 MiB): the tools that export objects write no aliases, so a snapshot's aliases
/// are hand-written and small, and a file of 1 MiB cannot cost hundreds of MiB.
fn alias_bytes(limits: &Limits) -> u64 {
    match limits.scope {
        limits::Scope::Snapshot => limits
            .document_bytes
            .min(crate::value::MAX_DOCUMENT_BYTES as u64),
        limits::Scope::Manifests => limits.document_bytes,
    }
}

/// How a refusal at [`alias_bytes`] names its limit.
fn alias_limit_text(limits: &Limits) -> String {
    match limits.scope {
        limits::Scope::Snapshot
            if limits.document_bytes > crate::value::MAX_DOCUMENT_BYTES as u64 =>
        {
            format!(
                "more than the {} MiB aliases may expand a snapshot's document to (exported objects hold no aliases)",
                crate::value::MAX_DOCUMENT_BYTES >> 20
            )
        }
        _ => limits.over(Limit::Document),
    }
}

fn yaml_options(out: &Loaded) -> YamlOptions {
    YamlOptions {
        reject_duplicate_keys: true,
        max_depth: MAX_DEPTH,
        max_alias_nodes: 100_000,
        max_alias_bytes: alias_bytes(&out.limits),
        alias_bytes_limit: Arc::from(alias_limit_text(&out.limits)),
        deadline: out.deadline.clone(),
    }
}

/// A YAML stream: its documents found and measured first, then parsed one by one.
fn parse_yaml(name: &Arc<str>, text: &str, out: &mut Loaded) {
    let left = out.limits.documents.saturating_sub(out.counted);
    let chunks = split::chunks_up_to(text, left);
    if !out.count(name, chunks.len()) {
        return;
    }
    let opts = yaml_options(out);
    let mut parsed = match out.one_thread {
        true => Vec::new(),
        false => parallel::parse_chunks(text, &chunks, &opts, out.limits.document_bytes),
    }
    .into_iter();
    let mut doc = 0usize;
    for c in chunks {
        if !out.going(name) {
            return;
        }
        let part = &text[c.start..c.end];
        let early = parsed.next().flatten();
        if part.len() as u64 > out.limits.document_bytes {
            doc += 1;
            let msg = format!(
                "document is {} bytes, {}",
                part.len(),
                out.limits.over(Limit::Document)
            );
            out.error(name, Some(doc), Some(c.line), msg);
            continue;
        }
        match early.unwrap_or_else(|| parse_documents(part, &opts)) {
            Ok(docs) => {
                for mut d in docs {
                    doc += 1;
                    d.lines.shift(c.line - 1);
                    let line = if d.line == 0 {
                        c.line
                    } else {
                        d.line + c.line - 1
                    };
                    add_document(name, doc, line, d.value, Some(d.lines), out);
                }
            }
            Err(e) => {
                let line = if e.line == 0 {
                    c.line
                } else {
                    e.line as u32 + c.line - 1
                };
                out.error(name, Some(doc + e.doc.max(1)), Some(line), e.message);
                doc += e.doc.max(1);
            }
        }
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
    if is_list(&value) {
        let Value::Map(mut m) = value else {
            unreachable!("checked above")
        };
        // The line map lists a map's entries in its key order.
        let at = m.keys().position(|k| k == "items");
        let items = match m.remove("items") {
            Some(Value::List(items)) => items,
            None | Some(Value::Null) => Vec::new(),
            Some(other) => {
                out.errors.push(ManifestError {
                    file: name.clone(),
                    doc: Some(doc),
                    line: Some(line),
                    path: Some(".items".into()),
                    message: format!("expected a list, found {}", other.type_name()),
                });
                return;
            }
        };
        if !out.count(name, items.len().saturating_sub(1)) {
            return;
        }
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
    let has_items = v.get_path(&["items"]).is_some_and(|i| !i.is_null());
    kind == "List" || (kind.ends_with("List") && has_items)
}

#[cfg(test)]
mod tests;
