//! YAML in, the way Kubernetes reads it (`sigs.k8s.io/yaml`: YAML 1.1 scalars via go-yaml v2,
//! then JSON): `yes`/`on` are booleans, `012` is octal, integral floats become integers, non-string
//! keys become strings. Every node keeps its line so errors and reports can point into the file.
//! Hostile input is bounded: nesting depth, alias expansion (in nodes and in bytes) and document
//! size.

mod block;
mod scalars;

use super::{Map, Str, Value};
use foldhash::HashMap;
use scalars::{finite, json_number, key_string, resolve_plain};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Limits and policies for [`parse_documents`].
#[derive(Clone, Debug)]
pub struct YamlOptions {
    /// Reject a mapping that repeats a key (otherwise the last value wins, as in go-yaml).
    pub reject_duplicate_keys: bool,
    /// Maximum nesting of collections.
    pub max_depth: usize,
    /// Maximum number of nodes materialised through aliases, per document.
    pub max_alias_nodes: usize,
    /// Maximum bytes materialised through aliases, per document: for each alias, the bytes of
    /// the aliased node's scalars (keys too) and [`ALIAS_NODE_BYTES`] a node. Callers set the
    /// document limit they enforce on text: an expansion past it is a document that large.
    pub max_alias_bytes: u64,
    /// How a refusal over `max_alias_bytes` names that limit and the setting that raises it
    /// (`more than the limit of 3 MiB (--max-document-bytes)`).
    pub alias_bytes_limit: std::sync::Arc<str>,
    /// Stop when this passes (the error says so).
    pub deadline: crate::deadline::Deadline,
}

impl Default for YamlOptions {
    fn default() -> Self {
        YamlOptions {
            reject_duplicate_keys: true,
            max_depth: 128,
            max_alias_nodes: 100_000,
            max_alias_bytes: super::MAX_DOCUMENT_BYTES as u64,
            alias_bytes_limit: std::sync::Arc::from("more than the limit of 3 MiB a document"),
            deadline: crate::deadline::Deadline::default(),
        }
    }
}

/// What a node of an alias's expansion weighs beyond its scalar's bytes: its share of the
/// printed form (quotes, separators, indentation), so that aliases of many empty nodes count.
pub const ALIAS_NODE_BYTES: u64 = 16;

/// Where each node of a document starts (1-based lines), parallel to the [`Value`] tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Lines {
    Scalar(u32),
    List(u32, Vec<Lines>),
    /// The collection's line, then per entry (in map order) the key's line and the value's lines.
    Map(u32, Vec<(u32, Lines)>),
}

impl Lines {
    /// Moves every line down by `by` (a document read apart from the lines before it).
    pub fn shift(&mut self, by: u32) {
        match self {
            Lines::Scalar(l) => *l += by,
            Lines::List(l, items) => {
                *l += by;
                items.iter_mut().for_each(|i| i.shift(by));
            }
            Lines::Map(l, entries) => {
                *l += by;
                for (k, v) in entries {
                    *k += by;
                    v.shift(by);
                }
            }
        }
    }

    pub fn line(&self) -> u32 {
        match self {
            Lines::Scalar(l) | Lines::List(l, _) | Lines::Map(l, _) => *l,
        }
    }
}

/// One YAML document.
#[derive(Clone, Debug, PartialEq)]
pub struct YamlDoc {
    pub value: Value,
    pub lines: Lines,
    /// Line of the document's first node.
    pub line: u32,
}

/// A YAML problem with its position.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} (document {doc}, line {line}, column {column})")]
pub struct YamlError {
    pub message: String,
    /// 1-based document index in the stream.
    pub doc: usize,
    pub line: usize,
    pub column: usize,
}

enum Frame {
    List {
        line: u32,
        anchor: usize,
        /// What the collection holds so far, as an alias of it would count it.
        weight: Weight,
        items: Vec<Value>,
        lines: Vec<Lines>,
    },
    Map {
        line: u32,
        anchor: usize,
        weight: Weight,
        map: Map,
        lines: Vec<(u32, Lines)>,
        pending_key: Option<(Str, u32)>,
        /// Positions of the keys, once the map is large enough for lookups to matter
        /// (linear search below that; a hash index above keeps a huge map linear to read).
        index: Option<HashMap<Str, usize>>,
        /// Values of merge keys `<<`, merged when the map closes (explicit keys win).
        merges: Vec<(Value, Lines)>,
    },
}

/// What an alias of a node materialises: its nodes and bytes ([`YamlOptions::max_alias_bytes`]),
/// summed as the node is read, so an alias costs its anchor's weight, never a walk of it.
#[derive(Clone, Copy, Debug, Default)]
struct Weight {
    nodes: usize,
    bytes: u64,
}

impl Weight {
    fn scalar(text: &str) -> Weight {
        Weight {
            nodes: 1,
            bytes: text.len() as u64 + ALIAS_NODE_BYTES,
        }
    }

    /// An empty collection.
    fn collection() -> Weight {
        Weight {
            nodes: 1,
            bytes: ALIAS_NODE_BYTES,
        }
    }

    fn add(&mut self, w: Weight) {
        self.nodes = self.nodes.saturating_add(w.nodes);
        self.bytes = self.bytes.saturating_add(w.bytes);
    }
}

/// A node read, with its weight.
type Node = (Value, Lines, Weight);

struct Builder<'o> {
    opts: &'o YamlOptions,
    stack: Vec<Frame>,
    /// Each anchor's node, with its weight beside it (computed once, as the node was read).
    anchors: HashMap<usize, Node>,
    /// What the aliases of this document have materialised so far.
    expanded: Weight,
    doc: usize,
}

fn err(msg: impl Into<String>, doc: usize, m: &Marker) -> YamlError {
    YamlError {
        message: msg.into(),
        doc,
        line: m.line(),
        column: m.col() + 1,
    }
}

/// The first character YAML does not allow in a stream (YAML 1.2 `c-printable`: C0 controls
/// other than tab, line feed and carriage return, DEL, C1 controls other than NEL), with its
/// 1-based line and column. The parser would stop at a NUL silently, dropping the rest.
pub fn forbidden_char(src: &str) -> Option<(usize, usize, char)> {
    let b = src.as_bytes();
    // Printable ASCII and line breaks (nearly all of a manifest) are passed 32 bytes at a time.
    let printable = |c: u8| (0x20..0x7f).contains(&c) || matches!(c, b'\t' | b'\n' | b'\r');
    let chunks = b.chunks_exact(32);
    let whole = chunks.len();
    let from = chunks
        .enumerate()
        .find(|(_, c)| !c.iter().fold(true, |ok, &x| ok & printable(x)))
        .map_or(whole, |(k, _)| k)
        * 32;
    let bad = |i: usize| {
        let c = b[i];
        (c < 0x20 && !matches!(c, b'\t' | b'\n' | b'\r'))
            || c == 0x7f
            || (c == 0xc2
                && b.get(i + 1)
                    .is_some_and(|&n| (0x80..=0x9f).contains(&n) && n != 0x85))
    };
    let at = (from..b.len()).find(|&i| bad(i))?;
    let line = 1 + b[..at].iter().filter(|&&c| c == b'\n').count();
    let line_start = b[..at]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    let column = 1 + src[line_start..at].chars().count();
    let c = src[at..].chars().next().unwrap_or('\0');
    Some((line, column, c))
}

/// Parses a multi-document YAML stream. Empty documents are returned as `Null` values.
/// Characters YAML does not allow are errors, located (never the silent end of the stream).
/// Block YAML as tools print it is read by a reader of its own (`block/`, several times
/// faster); every other stream goes through yaml-rust2's events.
pub fn parse_documents(src: &str, opts: &YamlOptions) -> Result<Vec<YamlDoc>, YamlError> {
    parse_with(src, opts, true)
}

/// [`parse_documents`] with every stream through yaml-rust2's events (benchmarks set the two
/// side by side).
#[doc(hidden)]
pub fn parse_documents_by_events(src: &str, opts: &YamlOptions) -> Result<Vec<YamlDoc>, YamlError> {
    parse_with(src, opts, false)
}

fn parse_with(src: &str, opts: &YamlOptions, block: bool) -> Result<Vec<YamlDoc>, YamlError> {
    if let Some((line, column, c)) = forbidden_char(src) {
        let doc = 1 + src
            .lines()
            .take(line - 1)
            .filter(|l| l.starts_with("---"))
            .count();
        return Err(YamlError {
            message: format!(
                "control character U+{:04X} is not allowed in YAML",
                c as u32
            ),
            doc,
            line,
            column,
        });
    }
    if let Some(docs) = block.then(|| block::read(src, opts)).flatten() {
        #[cfg(debug_assertions)]
        {
            let events = parse_events(src, opts);
            assert!(
                opts.deadline.expired() || events.as_ref().is_ok_and(|e| *e == docs),
                "the block reader and the event parser disagree on {src:?}:\n{docs:?}\n{events:?}"
            );
        }
        return Ok(docs);
    }
    parse_events(src, opts)
}

/// [`parse_documents`] through yaml-rust2's events: every YAML construct, and the errors.
fn parse_events(src: &str, opts: &YamlOptions) -> Result<Vec<YamlDoc>, YamlError> {
    let mut parser = Parser::new_from_str(src);
    let mut docs = Vec::new();
    let mut b = Builder {
        opts,
        stack: Vec::new(),
        anchors: HashMap::default(),
        expanded: Weight::default(),
        doc: 0,
    };
    let mut root: Option<Node> = None;
    let mut events = 0u32;
    loop {
        events = events.wrapping_add(1);
        if events % 512 == 0 && opts.deadline.expired() {
            return Err(YamlError {
                message: crate::deadline::Expired.to_string(),
                doc: b.doc.max(1),
                line: 0,
                column: 0,
            });
        }
        let (ev, mark) = parser.next_token().map_err(|e| YamlError {
            message: e.info().to_string(),
            doc: b.doc.max(1),
            line: e.marker().line(),
            column: e.marker().col() + 1,
        })?;
        match ev {
            Event::StreamStart | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart => {
                b.doc += 1;
                b.anchors.clear();
                b.expanded = Weight::default();
                root = None;
            }
            Event::DocumentEnd => {
                let (value, lines, _) =
                    root.take()
                        .unwrap_or((Value::Null, Lines::Scalar(0), Weight::default()));
                let line = lines.line();
                docs.push(YamlDoc { value, lines, line });
            }
            Event::Scalar(text, style, anchor, tag) => {
                let line = mark.line() as u32;
                let v = b.scalar(&text, style, tag.as_ref(), &mark)?;
                let node = (v, Lines::Scalar(line), Weight::scalar(&text));
                if anchor > 0 {
                    b.anchors.insert(anchor, node.clone());
                }
                if let Some(done) = b.push_node(node, &mark, Some((&text, style)))? {
                    root = Some(done);
                }
            }
            Event::Alias(id) => {
                // Weighed before anything is copied: a refusal costs nothing.
                let Some(weight) = b.anchors.get(&id).map(|n| n.2) else {
                    return Err(err("unknown anchor", b.doc, &mark));
                };
                b.expand(weight, &mark)?;
                let Some(node) = b.anchors.get(&id).cloned() else {
                    return Err(err("unknown anchor", b.doc, &mark));
                };
                let key_text = match &node.0 {
                    Value::String(s) => Some(s.to_string()),
                    _ => None,
                };
                let key = key_text.as_deref().map(|t| (t, TScalarStyle::DoubleQuoted));
                if let Some(done) = b.push_node(node, &mark, key)? {
                    root = Some(done);
                }
            }
            Event::SequenceStart(anchor, _tag) => {
                b.open(&mark)?;
                b.stack.push(Frame::List {
                    line: mark.line() as u32,
                    anchor,
                    weight: Weight::collection(),
                    items: Vec::new(),
                    lines: Vec::new(),
                });
            }
            Event::MappingStart(anchor, _tag) => {
                b.open(&mark)?;
                b.stack.push(Frame::Map {
                    line: mark.line() as u32,
                    anchor,
                    weight: Weight::collection(),
                    map: Map::new(),
                    lines: Vec::new(),
                    pending_key: None,
                    index: None,
                    merges: Vec::new(),
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let frame = b
                    .stack
                    .pop()
                    .ok_or_else(|| err("unbalanced collection", b.doc, &mark))?;
                let (anchor, node) = b.close(frame, &mark)?;
                if anchor > 0 {
                    b.anchors.insert(anchor, node.clone());
                }
                if let Some(done) = b.push_node(node, &mark, None)? {
                    root = Some(done);
                }
            }
        }
    }
    Ok(docs)
}

impl Builder<'_> {
    /// Counts an alias of a node of `weight` in; a located refusal past either bound.
    fn expand(&mut self, weight: Weight, mark: &Marker) -> Result<(), YamlError> {
        self.expanded.add(weight);
        if self.expanded.nodes > self.opts.max_alias_nodes {
            return Err(err(
                format!(
                    "document expands aliases to more than {} nodes (alias bomb?)",
                    self.opts.max_alias_nodes
                ),
                self.doc,
                mark,
            ));
        }
        if self.expanded.bytes > self.opts.max_alias_bytes {
            return Err(err(
                format!(
                    "document expands aliases past {} bytes, {}",
                    self.opts.max_alias_bytes, self.opts.alias_bytes_limit
                ),
                self.doc,
                mark,
            ));
        }
        Ok(())
    }

    fn open(&mut self, mark: &Marker) -> Result<(), YamlError> {
        if self.stack.len() >= self.opts.max_depth {
            return Err(err(
                format!("nesting deeper than {} levels", self.opts.max_depth),
                self.doc,
                mark,
            ));
        }
        // A collection used as a mapping key is not representable in JSON.
        if let Some(Frame::Map {
            pending_key: None, ..
        }) = self.stack.last()
        {
            return Err(err("a mapping key must be a scalar", self.doc, mark));
        }
        Ok(())
    }

    fn close(&mut self, frame: Frame, mark: &Marker) -> Result<(usize, Node), YamlError> {
        Ok(match frame {
            Frame::List {
                line,
                anchor,
                weight,
                items,
                lines,
            } => (
                anchor,
                (Value::List(items), Lines::List(line, lines), weight),
            ),
            Frame::Map {
                line,
                anchor,
                weight,
                mut map,
                mut lines,
                pending_key,
                merges,
                ..
            } => {
                if pending_key.is_some() {
                    return Err(err("mapping key without a value", self.doc, mark));
                }
                if !merges.is_empty() {
                    let mut present: foldhash::HashSet<Str> = map.keys().cloned().collect();
                    for (mv, ml) in merges {
                        merge_into(&mut map, &mut lines, &mut present, mv, ml, self.doc, mark)?;
                    }
                }
                (anchor, (Value::Map(map), Lines::Map(line, lines), weight))
            }
        })
    }

    /// Adds a finished node to the enclosing collection; returns it if it is the document root.
    /// `key_src` is the scalar's text and style, used when the node is a mapping key.
    fn push_node(
        &mut self,
        node: Node,
        mark: &Marker,
        key_src: Option<(&str, TScalarStyle)>,
    ) -> Result<Option<Node>, YamlError> {
        let doc = self.doc;
        let reject_dups = self.opts.reject_duplicate_keys;
        match self.stack.last_mut() {
            None => Ok(Some(node)),
            Some(Frame::List {
                items,
                lines,
                weight,
                ..
            }) => {
                weight.add(node.2);
                items.push(node.0);
                lines.push(node.1);
                Ok(None)
            }
            Some(Frame::Map {
                weight,
                map,
                lines,
                pending_key,
                index,
                merges,
                ..
            }) => {
                // A key counts its bytes; nodes are the values (as an alias's count always was).
                let nodes = if pending_key.is_some() {
                    node.2.nodes
                } else {
                    0
                };
                weight.add(Weight { nodes, ..node.2 });
                match pending_key.take() {
                    None => {
                        let is_merge = matches!(key_src, Some(("<<", TScalarStyle::Plain)));
                        let key = if is_merge {
                            Str::from("<<")
                        } else {
                            key_string(&node.0).map_err(|m| err(m, doc, mark))?
                        };
                        // A merge key's value goes to `merges` (marked with a NUL-prefixed key).
                        let key = if is_merge { Str::from("\u{0}<<") } else { key };
                        *pending_key = Some((key, node.1.line()));
                    }
                    Some((key, key_line)) => {
                        if key == "\u{0}<<" {
                            merges.push((node.0, node.1));
                            return Ok(None);
                        }
                        let existing = match index {
                            Some(idx) => idx.get(&key).copied(),
                            None => map.keys().position(|k| *k == key),
                        };
                        if let Some(pos) = existing {
                            if reject_dups {
                                return Err(YamlError {
                                    message: format!("duplicate key {:?}", key.as_str()),
                                    doc,
                                    line: key_line as usize,
                                    column: 1,
                                });
                            }
                            map.entries_mut()[pos].1 = node.0;
                            lines[pos] = (key_line, node.1);
                        } else {
                            if let Some(idx) = index {
                                idx.insert(key.clone(), map.len());
                            } else if map.len() >= INDEX_FROM {
                                let mut idx: HashMap<Str, usize> = map
                                    .keys()
                                    .enumerate()
                                    .map(|(i, k)| (k.clone(), i))
                                    .collect();
                                idx.insert(key.clone(), map.len());
                                *index = Some(idx);
                            }
                            map.push_unique(key, node.0);
                            lines.push((key_line, node.1));
                        }
                    }
                }
                Ok(None)
            }
        }
    }

    fn scalar(
        &self,
        text: &str,
        style: TScalarStyle,
        tag: Option<&Tag>,
        mark: &Marker,
    ) -> Result<Value, YamlError> {
        let e = |m: String| err(m, self.doc, mark);
        if let Some(tag) = tag {
            let name = if tag.handle == "!!" || tag.handle == "tag:yaml.org,2002:" {
                tag.suffix.as_str()
            } else {
                // Application tags are ignored, like go-yaml does for unknown tags on scalars.
                return Ok(Value::String(Str::from(text)));
            };
            return match name {
                "str" | "binary" | "timestamp" => Ok(Value::String(Str::from(text))),
                "null" => Ok(Value::Null),
                "bool" => match resolve_plain(text) {
                    Some(Value::Bool(b)) => Ok(Value::Bool(b)),
                    _ => Err(e("this scalar is not a !!bool".to_string())),
                },
                "int" => match resolve_plain(text) {
                    Some(v @ (Value::Int(_) | Value::Float(_))) if !text.contains('.') => Ok(v),
                    _ => Err(e("this scalar is not a !!int".to_string())),
                },
                "float" => match resolve_plain(text) {
                    Some(Value::Int(i)) => Ok(json_number(i as f64)),
                    Some(v @ Value::Float(_)) => Ok(v),
                    _ => Err(e("this scalar is not a !!float".to_string())),
                },
                _ => Ok(Value::String(Str::from(text))),
            }
            .and_then(|v| finite(v).map_err(e));
        }
        if style != TScalarStyle::Plain {
            return Ok(Value::String(Str::from(text)));
        }
        match resolve_plain(text) {
            Some(v) => finite(v).map_err(e),
            None => Ok(Value::String(Str::from(text))),
        }
    }
}

/// Maps with more keys than this get a hash index while they are read.
const INDEX_FROM: usize = 32;

fn merge_into(
    map: &mut Map,
    lines: &mut Vec<(u32, Lines)>,
    present: &mut foldhash::HashSet<Str>,
    mv: Value,
    ml: Lines,
    doc: usize,
    mark: &Marker,
) -> Result<(), YamlError> {
    let mut add = |m: Map, l: Lines| {
        let ls = match l {
            Lines::Map(_, ls) => ls,
            _ => Vec::new(),
        };
        for (i, (k, v)) in m.into_entries().into_iter().enumerate() {
            if !present.insert(k.clone()) {
                continue;
            }
            let kl = ls.get(i).cloned().unwrap_or((0, Lines::Scalar(0)));
            map.push_unique(k, v);
            lines.push(kl);
        }
    };
    match (mv, ml) {
        (Value::Map(m), l) => add(m, l),
        (Value::List(items), Lines::List(_, ls)) => {
            for (item, l) in items.into_iter().zip(ls) {
                match item {
                    Value::Map(m) => add(m, l),
                    _ => return Err(err("merge key << needs mappings", doc, mark)),
                }
            }
        }
        _ => {
            return Err(err(
                "merge key << needs a mapping or a list of mappings",
                doc,
                mark,
            ));
        }
    }
    Ok(())
}

/// Parses a single-document YAML (or JSON) text into a value, with default options.
pub fn parse_one(src: &str) -> Result<Value, YamlError> {
    let opts = YamlOptions {
        reject_duplicate_keys: false,
        ..YamlOptions::default()
    };
    let mut docs = parse_documents(src, &opts)?;
    match docs.len() {
        0 => Ok(Value::Null),
        1 => Ok(docs.remove(0).value),
        n => Err(YamlError {
            message: format!("expected one YAML document, found {n}"),
            doc: 2,
            line: docs[1].line as usize,
            column: 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_maps_find_repeated_keys_and_merge() {
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("k{i}: {i}\n"));
        }
        let e =
            parse_documents(&format!("{text}k50: again\n"), &YamlOptions::default()).unwrap_err();
        assert!(e.message.contains("duplicate key \"k50\""), "{e}");
        let last = parse_one(&format!("{text}k50: again\n")).unwrap();
        assert_eq!(last.get_path(&["k50"]), Some(&Value::from("again")));
        let merged = parse_one(&format!(
            "base: &b\n{}\nm:\n  <<: *b\n  k7: mine\n",
            text.lines()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
        .unwrap();
        let m = merged.get_path(&["m"]).and_then(Value::as_map).unwrap();
        assert_eq!(m.len(), 100);
        assert_eq!(m.get("k7"), Some(&Value::from("mine")));
        assert_eq!(m.get("k99"), Some(&Value::Int(99)));
    }

    #[test]
    fn control_characters_are_located_errors() {
        let e = parse_one("a: 1\nb: x\u{0}y\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        assert!(e.message.contains("U+0000"), "{e}");
        assert!(parse_one("a: \"\\u0000 escaped is fine\"\n").is_ok());
        assert!(parse_one("a: x\u{7f}\n").is_err());
        assert!(parse_one("a: x\u{85}y\n").is_ok());
    }
    use crate::value::json::{Style, to_string};

    fn one(src: &str) -> Value {
        parse_one(src).unwrap()
    }

    #[test]
    fn yaml_1_1_scalars_like_kubernetes() {
        let v = one(
            "a: yes\nb: off\nc: 012\nd: 0x1F\ne: 1.0\nf: 1.5\ng: ~\nh: '012'\ni: 1_000\nj: 2024-01-01\nk: 1e3\n",
        );
        assert_eq!(
            to_string(&v, Style::PLAIN),
            r#"{"a":true,"b":false,"c":10,"d":31,"e":1,"f":1.5,"g":null,"h":"012","i":1000,"j":"2024-01-01","k":1000}"#
        );
    }

    #[test]
    fn keys_become_strings() {
        let v = one("1: a\ntrue: b\n");
        assert_eq!(to_string(&v, Style::PLAIN), r#"{"1":"a","true":"b"}"#);
    }

    #[test]
    fn multi_documents_and_lines() {
        let opts = YamlOptions::default();
        let docs = parse_documents("a: 1\n---\n# c\nb:\n  - x\n  - y\n", &opts).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].line, 4);
        match &docs[1].lines {
            Lines::Map(_, entries) => match &entries[0].1 {
                Lines::List(_, items) => assert_eq!(items[1].line(), 6),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn duplicate_keys_are_located() {
        let e = parse_documents("a: 1\nb: 2\na: 3\n", &YamlOptions::default()).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("duplicate key"));
    }

    #[test]
    fn merge_keys_and_aliases() {
        let v = one("base: &b {p: 1, q: 2}\nd:\n  <<: *b\n  q: 3\n");
        assert_eq!(
            to_string(v.get_path(&["d"]).unwrap(), Style::GO),
            r#"{"p":1,"q":3}"#
        );
    }

    #[test]
    fn alias_bombs_fail_fast() {
        let mut s = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            s.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse_documents(&s, &YamlOptions::default()).unwrap_err();
        assert!(e.message.contains("alias"), "{e}");
    }

    /// A 1 MiB scalar behind an anchor and 2,000 aliases of it (a file of 1 MiB) is refused at
    /// the alias that passes the byte bound, located, naming the limit; a collection weighs
    /// what it holds (an alias of a map of the scalar as much as the scalar, and more).
    #[test]
    fn aliases_are_bounded_in_bytes() {
        let opts = YamlOptions {
            max_alias_bytes: 3 << 20,
            alias_bytes_limit: std::sync::Arc::from(
                "more than the limit of 3 MiB (--max-document-bytes)",
            ),
            ..YamlOptions::default()
        };
        let big = "x".repeat(1 << 20);
        let aliases = |of: &str, n: usize| format!("- *{of}\n").repeat(n);
        let scalar = format!("a: &big \"{big}\"\nl:\n{}", aliases("big", 2000));
        let e = parse_documents(&scalar, &opts).unwrap_err();
        assert!(
            e.message.contains(
                "document expands aliases past 3145728 bytes, more than the limit of 3 MiB (--max-document-bytes)"
            ),
            "{e}"
        );
        // The third alias (line 5) passes 3 MiB.
        assert_eq!((e.doc, e.line), (1, 5), "{e}");
        // Two of them fit.
        let two = format!("a: &big \"{big}\"\nl:\n{}", aliases("big", 2));
        assert!(parse_documents(&two, &opts).is_ok());
        // A map holding the scalar, aliased: weighed as it was read, its key and value.
        let map = format!("m: &m {{k: \"{big}\"}}\nl:\n{}", aliases("m", 3));
        let e = parse_documents(&map, &opts).unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        // Nested anchors weigh what they hold, aliases included.
        let nested = format!("a: &big \"{big}\"\nb: &b [*big]\nl:\n{}", aliases("b", 2));
        let e = parse_documents(&nested, &opts).unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        // Many small nodes count their overhead: 90 aliases of a list of 1,000 empty strings
        // are 1.4 MB.
        let list = vec!["''"; 1000].join(", ");
        let empties = format!("e: &e [{list}]\nl:\n{}", aliases("e", 90));
        let small = YamlOptions {
            max_alias_bytes: 1_000_000,
            ..opts.clone()
        };
        assert!(parse_documents(&empties, &small).is_err());
        assert!(parse_documents(&empties, &opts).is_ok());
        // Each document has its own budget.
        let docs = format!("{two}---\n{two}");
        assert_eq!(parse_documents(&docs, &opts).unwrap().len(), 2);
    }

    #[test]
    fn deep_nesting_fails_fast() {
        let s = "[".repeat(500) + &"]".repeat(500);
        let e = parse_documents(&s, &YamlOptions::default()).unwrap_err();
        assert!(
            e.message.contains("nesting") || e.message.contains("recursion"),
            "{e}"
        );
    }
}
