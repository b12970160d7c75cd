//! A reader for the block YAML that tools print and people write for Kubernetes (`helm
//! template`, `kubectl get -o yaml`, manifests by hand): block mappings and sequences (the
//! sequence at its key's indentation too), one-line flow collections, plain and one-line quoted
//! scalars, literal block scalars, comments and `---` between documents.
//!
//! It reads a stream only where it reads it exactly as the event parser (`yaml-rust2`, then
//! [`super::parse_events`]) does. Anything else — anchors, aliases, tags, folded or multi-line
//! scalars, tabs, carriage returns, complex keys, an empty value, a repeated key, anything the
//! parser would refuse — makes it decline the whole stream, which then goes to the event
//! parser: that one explains errors. Debug builds parse every accepted stream both ways and
//! require the same documents and lines; tests do the same over every YAML file in the
//! repository and thousands of mutations of them.

mod scalars;

use super::scalars::{finite, key_string, resolve_plain};
use super::{Lines, YamlDoc, YamlOptions};
use crate::value::{Map, Str, Value};
use foldhash::HashSet;

/// The stream is not read here: the caller parses it with the event parser.
#[derive(Debug)]
pub(super) struct Decline;

type R<T> = Result<T, Decline>;

/// The documents of `src`, or `None` when this reader declines it.
pub(super) fn read(src: &str, opts: &YamlOptions) -> Option<Vec<YamlDoc>> {
    let b = src.as_bytes();
    // Tabs and carriage returns have rules of their own; so do a byte-order mark and the line
    // breaks YAML 1.1 knows beyond `\n` (NEL, U+2028, U+2029).
    if memchr::memchr2(b'\t', b'\r', b).is_some()
        || src.starts_with('\u{feff}')
        || has_other_breaks(b)
    {
        return None;
    }
    if opts.deadline.expired() {
        return None;
    }
    let docs = Reader::new(src, opts).stream().ok()?;
    // Past the deadline, the event parser says so.
    (!opts.deadline.expired()).then_some(docs)
}

/// Where [`read`] declined (its line), for tests.
#[cfg(test)]
fn declined_at(src: &str) -> Option<(u32, String)> {
    let opts = YamlOptions::default();
    let mut r = Reader::new(src, &opts);
    r.stream().err().map(|_| {
        (
            r.line,
            src.lines()
                .nth(r.line as usize - 1)
                .unwrap_or("")
                .to_string(),
        )
    })
}

fn has_other_breaks(b: &[u8]) -> bool {
    memchr::memchr2_iter(0xc2, 0xe2, b).any(|i| match b[i] {
        0xc2 => b.get(i + 1) == Some(&0x85),
        _ => b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xa8 | 0xa9)),
    })
}

/// The keys of a mapping being read, to find a repeated one (a hash set past 16 keys).
#[derive(Default)]
struct Keys {
    set: Option<HashSet<Str>>,
}

impl Keys {
    /// Whether `key` is not yet in `map` (which holds the keys read so far).
    fn is_new(&mut self, map: &Map, key: &Str) -> bool {
        match &mut self.set {
            Some(set) => set.insert(key.clone()),
            None if map.len() >= 16 => {
                let mut set: HashSet<Str> = map.keys().cloned().collect();
                let new = set.insert(key.clone());
                self.set = Some(set);
                new
            }
            None => !map.keys().any(|k| k == key),
        }
    }
}

/// How plain text ends on its line (each at the byte where it ends).
enum PlainEnd {
    /// A mapping's `:` (before a space, a line break or the end).
    Colon(usize),
    /// A comment's `#` (after a space).
    Comment(usize),
    /// The line's end.
    Line(usize),
}

/// What the next line that holds something starts with.
enum Next {
    Eof,
    /// A `---` line (`pos` at its start).
    DocStart,
    /// Content indented by this many spaces (`pos` at its first character).
    Content(usize),
}

#[derive(Clone, Copy, PartialEq)]
enum Chomp {
    Strip,
    Clip,
}

struct Reader<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Where the line holding `pos` starts.
    line_start: usize,
    /// 1-based line of `pos`.
    line: u32,
    opts: &'a YamlOptions,
    /// Collections open around `pos`.
    depth: usize,
    /// Lines and flow items passed, for the deadline's check.
    steps: u32,
}

/// Characters that cannot start a plain scalar (YAML's indicators; `-` is handled apart).
fn indicator(c: u8) -> bool {
    matches!(
        c,
        b'?' | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}

/// The value of a plain scalar (`None`: one the event parser refuses, such as `.nan`).
fn plain_value(text: &str) -> R<Value> {
    match resolve_plain(text) {
        Some(v) => finite(v).map_err(|_| Decline),
        None => Ok(Value::String(Str::from(text))),
    }
}

impl<'a> Reader<'a> {
    fn new(src: &'a str, opts: &'a YamlOptions) -> Self {
        Reader {
            s: src,
            b: src.as_bytes(),
            pos: 0,
            line_start: 0,
            line: 1,
            opts,
            depth: 0,
            steps: 0,
        }
    }

    /// One more line or flow item: the deadline is checked every 256.
    fn tick(&mut self) -> R<()> {
        self.steps = self.steps.wrapping_add(1);
        if self.steps % 256 == 0 && self.opts.deadline.expired() {
            return Err(Decline);
        }
        Ok(())
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn peek_at(&self, i: usize) -> Option<u8> {
        self.b.get(self.pos + i).copied()
    }

    fn col(&self) -> usize {
        self.pos - self.line_start
    }

    /// Skips spaces; returns how many.
    fn spaces(&mut self) -> usize {
        let start = self.pos;
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Moves to the start of the next line (`pos` at a `\n` or the end).
    fn next_line(&mut self) -> R<()> {
        match self.peek() {
            Some(b'\n') => {
                self.pos += 1;
                self.line += 1;
                self.line_start = self.pos;
                self.tick()
            }
            None => {
                self.line_start = self.pos;
                Ok(())
            }
            Some(_) => Err(Decline),
        }
    }

    /// The rest of the line after a node: spaces, then a comment (after a space), then its end.
    fn end_of_line(&mut self) -> R<()> {
        let n = self.spaces();
        if self.peek() == Some(b'#') {
            let after_space = n > 0 || self.pos == self.line_start || self.b[self.pos - 1] == b' ';
            if !after_space {
                return Err(Decline);
            }
            self.pos =
                memchr::memchr(b'\n', &self.b[self.pos..]).map_or(self.b.len(), |i| self.pos + i);
        }
        self.next_line()
    }

    /// Skips blank and comment lines from the start of the current line (idempotent).
    fn next_content(&mut self) -> R<Next> {
        self.pos = self.line_start;
        loop {
            let n = self.spaces();
            match self.peek() {
                None => return Ok(Next::Eof),
                Some(b'\n') => self.next_line()?,
                Some(b'#') => self.end_of_line()?,
                Some(c) if n == 0 && (c == b'-' || c == b'.' || c == b'%') => {
                    let rest = &self.b[self.pos..];
                    let marker = |m: &[u8]| {
                        rest.starts_with(m) && matches!(rest.get(3), None | Some(b' ' | b'\n'))
                    };
                    if marker(b"---") {
                        return Ok(Next::DocStart);
                    }
                    if marker(b"...") || c == b'%' {
                        return Err(Decline);
                    }
                    return Ok(Next::Content(0));
                }
                Some(_) => return Ok(Next::Content(n)),
            }
        }
    }

    fn stream(&mut self) -> R<Vec<YamlDoc>> {
        let mut docs = Vec::new();
        // A `---` seen and no document after it yet; a document read and no `---` after it.
        let (mut started, mut ended) = (false, false);
        loop {
            match self.next_content()? {
                Next::Eof => break,
                Next::DocStart => {
                    if started {
                        return Err(Decline);
                    }
                    self.pos += 3;
                    self.end_of_line()?;
                    (started, ended) = (true, false);
                }
                Next::Content(0) if !ended => {
                    let (value, lines) = self.block_node()?;
                    docs.push(YamlDoc {
                        line: lines.line(),
                        value,
                        lines,
                    });
                    (started, ended) = (false, true);
                }
                Next::Content(_) => return Err(Decline),
            }
        }
        if started || docs.is_empty() {
            return Err(Decline);
        }
        Ok(docs)
    }

    fn open(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth >= self.opts.max_depth {
            return Err(Decline);
        }
        Ok(())
    }

    /// `-` followed by a space, a line break or the end.
    fn at_entry(&self) -> bool {
        self.peek() == Some(b'-') && matches!(self.peek_at(1), None | Some(b' ' | b'\n'))
    }

    /// A block node whose first line starts at `pos`.
    fn block_node(&mut self) -> R<(Value, Lines)> {
        let col = self.col();
        if self.at_entry() {
            return self.block_seq(col);
        }
        if matches!(self.peek(), Some(b'[' | b'{')) {
            let node = self.flow_node()?;
            self.end_of_line()?;
            return Ok(node);
        }
        self.block_map(col)
    }

    fn block_map(&mut self, col: usize) -> R<(Value, Lines)> {
        self.open()?;
        let map_line = self.line;
        let mut map = Map::new();
        let mut lines = Vec::new();
        let mut keys = Keys::default();
        loop {
            let key_line = self.line;
            let key = self.key()?.ok_or(Decline)?;
            if key == "<<" {
                return Err(Decline);
            }
            if !keys.is_new(&map, &key) {
                return Err(Decline);
            }
            let value = self.map_value(col)?;
            map.push_unique(key, value.0);
            lines.push((key_line, value.1));
            match self.next_content()? {
                Next::Content(n) if n == col && !self.at_entry() => {}
                Next::Content(n) if n >= col => return Err(Decline),
                _ => break,
            }
        }
        self.depth -= 1;
        Ok((Value::Map(map), Lines::Map(map_line, lines)))
    }

    /// A mapping key and its `:` (`None`, with nothing consumed, when the line holds none).
    fn key(&mut self) -> R<Option<Str>> {
        let start = self.pos;
        let text: Str = match self.peek() {
            Some(b'"') => self.double_quoted(None)?,
            Some(b'\'') => self.single_quoted(None)?,
            Some(c) if indicator(c) || c == b'-' => return Ok(None),
            Some(_) => {
                let PlainEnd::Colon(end) = self.plain_end(start) else {
                    return Ok(None);
                };
                let text = self.s[start..end].trim_end_matches(' ');
                if text.len() > 1024 {
                    return Err(Decline);
                }
                self.pos = end;
                match resolve_plain(text) {
                    None => Str::from(text),
                    Some(v) => key_string(&finite(v).map_err(|_| Decline)?).map_err(|_| Decline)?,
                }
            }
            None => return Ok(None),
        };
        self.spaces();
        if self.peek() != Some(b':') || !matches!(self.peek_at(1), None | Some(b' ' | b'\n')) {
            self.pos = start;
            return Ok(None);
        }
        if self.pos - start > 1024 {
            return Err(Decline);
        }
        self.pos += 1;
        Ok(Some(text))
    }

    /// Where the plain text starting at `start` ends on its line.
    fn plain_end(&self, start: usize) -> PlainEnd {
        let line_end = memchr::memchr(b'\n', &self.b[start..]).map_or(self.b.len(), |i| start + i);
        let mut i = start;
        while let Some(j) = memchr::memchr2(b':', b'#', &self.b[i..line_end]) {
            let at = i + j;
            if self.b[at] == b'#' {
                if at > start && self.b[at - 1] == b' ' {
                    return PlainEnd::Comment(at);
                }
            } else if matches!(self.b.get(at + 1), None | Some(b' ' | b'\n')) {
                return PlainEnd::Colon(at);
            }
            i = at + 1;
        }
        PlainEnd::Line(line_end)
    }

    /// The value after a block mapping's `key:` (`pos` just after the colon).
    fn map_value(&mut self, col: usize) -> R<(Value, Lines)> {
        self.spaces();
        match self.peek() {
            None | Some(b'\n' | b'#') => {
                self.end_of_line()?;
                match self.next_content()? {
                    Next::Content(n) if n > col => self.block_node(),
                    Next::Content(n) if n == col && self.at_entry() => self.block_seq(col),
                    _ => Err(Decline),
                }
            }
            Some(b'|') => self.literal(col),
            Some(_) => self.inline_node(col),
        }
    }

    fn block_seq(&mut self, col: usize) -> R<(Value, Lines)> {
        self.open()?;
        let seq_line = self.line;
        let mut items = Vec::new();
        let mut lines = Vec::new();
        loop {
            self.pos += 1;
            self.spaces();
            let item = match self.peek() {
                None | Some(b'\n' | b'#') => {
                    self.end_of_line()?;
                    match self.next_content()? {
                        Next::Content(n) if n > col => self.block_node()?,
                        _ => return Err(Decline),
                    }
                }
                Some(b'-') if matches!(self.peek_at(1), None | Some(b' ' | b'\n')) => {
                    return Err(Decline);
                }
                Some(b'|') => self.literal(col)?,
                Some(_) => {
                    let item_col = self.col();
                    let start = (self.pos, self.line);
                    if self.key()?.is_some() {
                        (self.pos, self.line) = start;
                        self.block_map(item_col)?
                    } else {
                        self.inline_node(col)?
                    }
                }
            };
            items.push(item.0);
            lines.push(item.1);
            match self.next_content()? {
                Next::Content(n) if n == col && self.at_entry() => {}
                Next::Content(n) if n > col => return Err(Decline),
                _ => break,
            }
        }
        self.depth -= 1;
        Ok((Value::List(items), Lines::List(seq_line, lines)))
    }

    /// A node that starts on this line (flow collection, quoted scalar: ending on it; plain
    /// scalar: continued on the lines after it indented more than `parent`), then the line's end.
    fn inline_node(&mut self, parent: usize) -> R<(Value, Lines)> {
        let line = self.line;
        let node = match self.peek() {
            Some(b'[' | b'{') => self.flow_node()?,
            Some(b'"') => (
                Value::String(self.double_quoted(Some(parent))?),
                Lines::Scalar(line),
            ),
            Some(b'\'') => (
                Value::String(self.single_quoted(Some(parent))?),
                Lines::Scalar(line),
            ),
            Some(c) if indicator(c) => return Err(Decline),
            Some(b'-') if matches!(self.peek_at(1), None | Some(b' ' | b'\n')) => {
                return Err(Decline);
            }
            Some(_) => {
                let (text, commented) = self.plain_line()?;
                if commented {
                    (plain_value(text)?, Lines::Scalar(line))
                } else {
                    self.next_line()?;
                    let value = match self.continuation(text, parent)? {
                        None => plain_value(text)?,
                        Some(folded) => Value::String(Str::from(folded)),
                    };
                    return Ok((value, Lines::Scalar(line)));
                }
            }
            None => return Err(Decline),
        };
        self.end_of_line()?;
        Ok(node)
    }

    /// A flow collection on one line (`pos` at `[` or `{`).
    fn flow_node(&mut self) -> R<(Value, Lines)> {
        self.open()?;
        let line = self.line;
        let node = if self.peek() == Some(b'[') {
            self.pos += 1;
            let mut items = Vec::new();
            let mut lines = Vec::new();
            self.spaces();
            if self.peek() == Some(b']') {
                self.pos += 1;
            } else {
                loop {
                    self.spaces();
                    let (v, l) = self.flow_item()?;
                    self.spaces();
                    if self.peek() == Some(b':') {
                        return Err(Decline);
                    }
                    items.push(v);
                    lines.push(l);
                    if !self.flow_next(b']')? {
                        break;
                    }
                }
            }
            (Value::List(items), Lines::List(line, lines))
        } else {
            self.pos += 1;
            let mut map = Map::new();
            let mut keys = Keys::default();
            let mut lines = Vec::new();
            self.spaces();
            if self.peek() == Some(b'}') {
                self.pos += 1;
            } else {
                loop {
                    self.spaces();
                    let quoted = matches!(self.peek(), Some(b'"' | b'\''));
                    let (k, _) = self.flow_item()?;
                    let key = match k {
                        Value::Map(_) | Value::List(_) => return Err(Decline),
                        k => key_string(&k).map_err(|_| Decline)?,
                    };
                    if key == "<<" || !keys.is_new(&map, &key) {
                        return Err(Decline);
                    }
                    self.spaces();
                    if self.peek() != Some(b':') {
                        return Err(Decline);
                    }
                    self.pos += 1;
                    if !quoted && !matches!(self.peek(), Some(b' ')) {
                        return Err(Decline);
                    }
                    self.spaces();
                    if matches!(self.peek(), Some(b',' | b'}')) {
                        return Err(Decline);
                    }
                    let (v, l) = self.flow_item()?;
                    map.push_unique(key, v);
                    lines.push((line, l));
                    self.spaces();
                    if !self.flow_next(b'}')? {
                        break;
                    }
                }
            }
            (Value::Map(map), Lines::Map(line, lines))
        };
        self.depth -= 1;
        Ok(node)
    }

    /// After a flow collection's entry: `,` (another follows: true) or `close` (the end).
    fn flow_next(&mut self, close: u8) -> R<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Decline),
        }
    }

    /// A node inside a flow collection.
    fn flow_item(&mut self) -> R<(Value, Lines)> {
        self.tick()?;
        let line = self.line;
        match self.peek() {
            Some(b'[' | b'{') => self.flow_node(),
            Some(b'"') => Ok((
                Value::String(self.double_quoted(None)?),
                Lines::Scalar(line),
            )),
            Some(b'\'') => Ok((
                Value::String(self.single_quoted(None)?),
                Lines::Scalar(line),
            )),
            Some(c) if indicator(c) => Err(Decline),
            Some(b'-') if matches!(self.peek_at(1), None | Some(b' ' | b'\n')) => Err(Decline),
            Some(_) => {
                let start = self.pos;
                while let Some(c) = self.peek() {
                    let stop = match c {
                        b'\n' | b',' | b'[' | b']' | b'{' | b'}' => true,
                        b':' => matches!(
                            self.peek_at(1),
                            None | Some(b' ' | b'\n' | b',' | b'[' | b']' | b'{' | b'}')
                        ),
                        b'#' => self.b[self.pos - 1] == b' ',
                        _ => false,
                    };
                    if stop {
                        break;
                    }
                    self.pos += 1;
                }
                if matches!(self.peek(), None | Some(b'\n' | b'#')) {
                    return Err(Decline);
                }
                // A `-` before `,[]{}` is an error in a flow collection.
                let text = self.s[start..self.pos].trim_end_matches(' ');
                if text.is_empty() || text.ends_with('-') {
                    return Err(Decline);
                }
                Ok((plain_value(text)?, Lines::Scalar(line)))
            }
            None => Err(Decline),
        }
    }
}

#[cfg(test)]
mod tests;
