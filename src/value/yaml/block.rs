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

use super::scalars::{finite, key_string, resolve_plain};
use super::{Lines, YamlDoc, YamlOptions};
use crate::value::{Map, Str, Value};
use std::collections::HashSet;

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
    let mut r = Reader {
        s: src,
        b,
        pos: 0,
        line_start: 0,
        line: 1,
        opts,
        depth: 0,
        lines_read: 0,
    };
    r.stream().ok()
}

/// Where [`read`] declined (its line), for tests.
#[cfg(test)]
fn declined_at(src: &str) -> Option<(u32, String)> {
    let mut r = Reader {
        s: src,
        b: src.as_bytes(),
        pos: 0,
        line_start: 0,
        line: 1,
        opts: &YamlOptions::default(),
        depth: 0,
        lines_read: 0,
    };
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
    /// Lines passed, for the deadline's check.
    lines_read: u32,
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
                self.lines_read += 1;
                if self.lines_read % 256 == 0 && self.opts.deadline.expired() {
                    return Err(Decline);
                }
                Ok(())
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
            let after_space = n > 0 || self.pos == self.line_start;
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
        let mut seen: Option<HashSet<Str>> = None;
        loop {
            let key_line = self.line;
            let key = self.key()?.ok_or(Decline)?;
            if key == "<<" {
                return Err(Decline);
            }
            let repeated = match &mut seen {
                Some(set) => !set.insert(key.clone()),
                None if map.len() >= 16 => {
                    let mut set: HashSet<Str> = map.keys().cloned().collect();
                    let repeated = !set.insert(key.clone());
                    seen = Some(set);
                    repeated
                }
                None => map.keys().any(|k| *k == key),
            };
            if repeated {
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
                let line_end =
                    memchr::memchr(b'\n', &self.b[start..]).map_or(self.b.len(), |i| start + i);
                let mut i = start;
                let end = loop {
                    match memchr::memchr2(b':', b'#', &self.b[i..line_end]) {
                        None => return Ok(None),
                        Some(j) => {
                            let at = i + j;
                            if self.b[at] == b'#' {
                                if self.b[at - 1] == b' ' {
                                    return Ok(None);
                                }
                            } else if matches!(self.b.get(at + 1), None | Some(b' ' | b'\n')) {
                                break at;
                            }
                            i = at + 1;
                        }
                    }
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

    /// The plain scalar text from `pos` to the line's end or a comment (left at `pos`), and
    /// whether a comment follows it. A `: ` in it (a mapping where none may be) is declined.
    fn plain_line(&mut self) -> R<(&'a str, bool)> {
        let start = self.pos;
        let line_end = memchr::memchr(b'\n', &self.b[start..]).map_or(self.b.len(), |i| start + i);
        let mut end = line_end;
        let mut i = start;
        while let Some(j) = memchr::memchr2(b':', b'#', &self.b[i..line_end]) {
            let at = i + j;
            if self.b[at] == b'#' {
                if at > start && self.b[at - 1] == b' ' {
                    end = at;
                    break;
                }
            } else if matches!(self.b.get(at + 1), None | Some(b' ' | b'\n')) {
                return Err(Decline);
            }
            i = at + 1;
        }
        let text = self.s[start..end].trim_end_matches(' ');
        self.pos = if end < line_end {
            start + text.len()
        } else {
            line_end
        };
        Ok((text, end < line_end))
    }

    /// The lines that continue a plain scalar (`pos` at the start of the line after its first):
    /// each indented more than `parent`, folded into one text (a line break between two lines
    /// is a space; each blank line between them, a line break). `None` when none follows.
    fn continuation(&mut self, first: &str, parent: usize) -> R<Option<String>> {
        let mut folded: Option<String> = None;
        let mut blanks = 0;
        loop {
            let ls = self.line_start;
            let n = self.b[ls..].iter().take_while(|&&c| c == b' ').count();
            match self.b.get(ls + n) {
                None => break,
                Some(b'\n') => {
                    blanks += 1;
                    self.pos = ls + n;
                    self.next_line()?;
                    continue;
                }
                Some(&c) if n <= parent || c == b'#' => break,
                Some(_) => {}
            }
            self.pos = ls + n;
            let (piece, commented) = self.plain_line()?;
            let text = folded.get_or_insert_with(|| first.to_string());
            if blanks == 0 {
                text.push(' ');
            }
            text.extend(std::iter::repeat_n('\n', blanks));
            text.push_str(piece);
            blanks = 0;
            if commented {
                self.end_of_line()?;
                break;
            }
            self.next_line()?;
        }
        Ok(folded)
    }

    /// A literal block scalar (`|`, `|-`) whose content is indented more than `parent`.
    fn literal(&mut self, parent: usize) -> R<(Value, Lines)> {
        self.pos += 1;
        let chomp = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                Chomp::Strip
            }
            Some(b' ' | b'\n') | None => Chomp::Clip,
            Some(_) => return Err(Decline),
        };
        if !matches!(self.peek(), None | Some(b' ' | b'\n')) {
            return Err(Decline);
        }
        self.end_of_line()?;
        // The content's indentation: that of its first non-blank line.
        let mut indent = None;
        let mut p = self.pos;
        let mut blank_widths = 0usize;
        while p < self.b.len() {
            let n = self.b[p..].iter().take_while(|&&c| c == b' ').count();
            match self.b.get(p + n) {
                Some(b'\n') => {
                    blank_widths = blank_widths.max(n);
                    p += n + 1;
                }
                None => break,
                Some(_) => {
                    indent = Some(n);
                    break;
                }
            }
        }
        let indent = match indent {
            Some(n) if n > parent && blank_widths <= n => n,
            _ => return Err(Decline),
        };
        let mut text = String::new();
        // Line breaks owed before the next content line (blank lines between).
        let mut breaks = 0usize;
        let mut any = false;
        // The event parser places the scalar on its first content line.
        let mut line = 0;
        loop {
            let ls = self.pos;
            let n = self.b[ls..].iter().take_while(|&&c| c == b' ').count();
            match self.b.get(ls + n) {
                None if n == 0 => break,
                None => return Err(Decline),
                Some(b'\n') => {
                    if n > indent {
                        return Err(Decline);
                    }
                    breaks += 1;
                    self.pos = ls + n;
                    self.next_line()?;
                }
                Some(_) if n < indent => break,
                Some(_) => {
                    let end = memchr::memchr(b'\n', &self.b[ls..])
                        .map(|i| ls + i)
                        .ok_or(Decline)?;
                    if any {
                        breaks += 1;
                    } else {
                        line = self.line;
                    }
                    text.extend(std::iter::repeat_n('\n', breaks));
                    breaks = 0;
                    text.push_str(&self.s[ls + indent..end]);
                    any = true;
                    self.pos = end;
                    self.next_line()?;
                }
            }
        }
        if chomp == Chomp::Clip {
            text.push('\n');
        }
        // Blank lines after the content are not the scalar's (`next_content` skips them).
        Ok((Value::String(Str::from(text)), Lines::Scalar(line)))
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
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(Decline),
                    }
                }
            }
            (Value::List(items), Lines::List(line, lines))
        } else {
            self.pos += 1;
            let mut map = Map::new();
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
                    if key == "<<" || map.keys().any(|x| *x == key) {
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
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(Decline),
                    }
                }
            }
            (Value::Map(map), Lines::Map(line, lines))
        };
        self.depth -= 1;
        Ok(node)
    }

    /// A node inside a flow collection.
    fn flow_item(&mut self) -> R<(Value, Lines)> {
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
                let text = self.s[start..self.pos].trim_end_matches(' ');
                if text.is_empty() {
                    return Err(Decline);
                }
                Ok((plain_value(text)?, Lines::Scalar(line)))
            }
            None => Err(Decline),
        }
    }

    /// A single-quoted scalar; over several lines only in a block (indented more than
    /// `parent`).
    fn single_quoted(&mut self, parent: Option<usize>) -> R<Str> {
        self.pos += 1;
        let mut out = String::new();
        let mut floor = 0;
        loop {
            let rest = &self.b[self.pos..];
            let i = memchr::memchr2(b'\'', b'\n', rest).ok_or(Decline)?;
            out.push_str(&self.s[self.pos..self.pos + i]);
            self.pos += i;
            if rest[i] == b'\n' {
                self.quoted_break(&mut out, floor, parent)?;
                floor = out.len();
                continue;
            }
            self.pos += 1;
            if self.peek() == Some(b'\'') {
                out.push('\'');
                self.pos += 1;
                floor = out.len();
            } else {
                return Ok(Str::from(out));
            }
        }
    }

    /// A line break inside a quoted scalar (`pos` at it): the line's trailing spaces dropped
    /// (none of `out` before `floor`), the next line's indentation skipped; the break becomes a
    /// space, or a line break per blank line between.
    fn quoted_break(&mut self, out: &mut String, floor: usize, parent: Option<usize>) -> R<()> {
        let parent = parent.ok_or(Decline)?;
        let keep = out.trim_end_matches(' ').len().max(floor);
        out.truncate(keep);
        self.next_line()?;
        let mut blanks = 0;
        loop {
            let ls = self.line_start;
            let n = self.b[ls..].iter().take_while(|&&c| c == b' ').count();
            match self.b.get(ls + n) {
                Some(b'\n') => {
                    blanks += 1;
                    self.pos = ls + n;
                    self.next_line()?;
                }
                Some(_) if n > parent => {
                    self.pos = ls + n;
                    break;
                }
                _ => return Err(Decline),
            }
        }
        if blanks == 0 {
            out.push(' ');
        }
        out.extend(std::iter::repeat_n('\n', blanks));
        Ok(())
    }

    /// A double-quoted scalar with the escapes manifests use; over several lines only in a
    /// block (indented more than `parent`).
    fn double_quoted(&mut self, parent: Option<usize>) -> R<Str> {
        self.pos += 1;
        let mut out = String::new();
        let mut floor = 0;
        loop {
            let rest = &self.b[self.pos..];
            let i = memchr::memchr3(b'"', b'\\', b'\n', rest).ok_or(Decline)?;
            out.push_str(&self.s[self.pos..self.pos + i]);
            self.pos += i;
            match rest[i] {
                b'"' => {
                    self.pos += 1;
                    return Ok(Str::from(out));
                }
                b'\n' => {
                    self.quoted_break(&mut out, floor, parent)?;
                    floor = out.len();
                }
                _ => {
                    let e = self.peek_at(1).ok_or(Decline)?;
                    self.pos += 2;
                    let c = match e {
                        b'0' => '\0',
                        b'a' => '\x07',
                        b'b' => '\x08',
                        b't' => '\t',
                        b'n' => '\n',
                        b'v' => '\x0b',
                        b'f' => '\x0c',
                        b'r' => '\r',
                        b'e' => '\x1b',
                        b' ' => ' ',
                        b'"' => '"',
                        b'/' => '/',
                        b'\\' => '\\',
                        b'x' => self.hex_escape(2)?,
                        b'u' => self.hex_escape(4)?,
                        b'U' => self.hex_escape(8)?,
                        _ => return Err(Decline),
                    };
                    out.push(c);
                    floor = out.len();
                }
            }
        }
    }

    fn hex_escape(&mut self, digits: usize) -> R<char> {
        let hex = self.s.get(self.pos..self.pos + digits).ok_or(Decline)?;
        if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(Decline);
        }
        self.pos += digits;
        let code = u32::from_str_radix(hex, 16).map_err(|_| Decline)?;
        char::from_u32(code).ok_or(Decline)
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_events;
    use super::*;

    fn opts() -> YamlOptions {
        YamlOptions::default()
    }

    /// Read by the block reader, and the same as the event parser's documents.
    fn same(src: &str) -> Vec<YamlDoc> {
        let docs = read(src, &opts()).unwrap_or_else(|| panic!("declined: {src:?}"));
        let events = parse_events(src, &opts()).unwrap();
        assert_eq!(docs, events, "{src:?}");
        docs
    }

    /// Declined, or (if read) the same as the event parser's documents.
    fn agrees(src: &str) -> bool {
        match read(src, &opts()) {
            None => false,
            Some(docs) => {
                let events = parse_events(src, &opts());
                assert!(
                    events.as_ref().is_ok_and(|e| *e == docs),
                    "{src:?}:\n{docs:?}\n{events:?}"
                );
                true
            }
        }
    }

    #[test]
    fn reads_what_manifests_hold_as_the_event_parser_does() {
        for src in [
            "a: 1\n",
            "a: 1",
            "---\na: 1\n---\nb: [x, 'y', \"z\"]\n",
            "# Source: chart/templates/x.yaml\n---\n# c\napiVersion: v1 # trailing\nkind: ConfigMap\n",
            "spec:\n  containers:\n  - name: app\n    image: r/a:1.0\n    args: [\"--port=8080\", --v=2]\n    ports:\n    - {name: http, containerPort: 8080}\n  - name: b\n",
            "a:\n  - x\n  -   y: 1\n      z: 2\n",
            "data:\n  script: |\n    #!/bin/sh\n    echo \"a: b\" # not a comment\n\n      indented\n\n  other: |-\n    x\n\n\nnext: 1\n",
            "k: |\n\n  leading blank\n",
            "list:\n- |\n  one\n- two\n",
            "v: yes\nw: 012\nx: 1.0\ny: ~\nz: 0x1F\nn: 1e3\nq: '012'\nk: 2024-01-01\n",
            "1: a\ntrue: b\n1.5: c\n",
            "s: \"tab\\there \\u00e9 \\\"q\\\" \\\\ \\x41\"\nt: 'it''s'\n",
            "url: http://example.com:8080/x\nimg: a:b#c\nweird: a :b\n",
            "e: {}\nf: []\ng: {a: {b: [1, {c: d}]}}\nh: {\"x\":\"y\", 'p': q}\n",
            "k: v\n\n\n# end\n",
            "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}\n",
            "- a\n- b\n",
            "ünï: cödé\n",
            "a: b\n  continued\n\n   after a blank # c\nd: e\n",
            "- one\n  two\n- three\n",
            "a: 'two\n  lines'\nb: \"x  \n\n   y\"\nk:{\"name\":\"app\"}: {}\n",
            "c: first\n  `Endpoints` [x] - y\n",
            "description: Spec is the spec, a very long line\n    wrapped by the emitter.\nz: 1\n",
        ] {
            same(src);
        }
    }

    #[test]
    fn keeps_lines() {
        let docs = same("---\n# c\nb:\n  - x\n\n  - y\nc: |\n  t\n");
        assert_eq!(docs[0].line, 3);
        match &docs[0].lines {
            Lines::Map(3, entries) => {
                assert_eq!(entries[0].0, 3);
                assert_eq!(entries[1].0, 7);
                assert_eq!(entries[1].1.line(), 8);
                match &entries[0].1 {
                    Lines::List(4, items) => assert_eq!(items[1].line(), 6),
                    other => panic!("{other:?}"),
                }
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn declines_what_it_does_not_read_exactly() {
        for src in [
            "",
            "# only a comment\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: >\n  folded\n",
            "a: |+\n  kept\n\n",
            "a: |2\n   x\n",
            "a:\nb: 1\n",
            "a: 1\na: 2\n",
            "a:\tb\n",
            "a: b\r\n",
            "? complex\n: key\n",
            "a: [x,\n  y]\n",
            "a: .nan\n",
            "<<: {a: 1}\n",
            "a: b: c\n",
            "---\n---\na: 1\n",
            "a: 1\n...\n",
            "%YAML 1.1\n---\na: 1\n",
            "a: \"\\N\"\n",
            "- [a: b]\n",
            "a: x\u{85}y\n",
        ] {
            assert!(read(src, &opts()).is_none(), "read: {src:?}");
        }
    }

    /// Every YAML file of the repository and thousands of mutations of them: whatever the block
    /// reader reads, it reads as the event parser does.
    #[test]
    fn agrees_with_the_event_parser_on_the_repository_and_mutations() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs = vec![root.join("examples"), root.join("tests")];
        while let Some(d) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                let name = p.to_string_lossy();
                if p.is_dir() {
                    dirs.push(p);
                } else if [".yaml", ".yml", ".yaml.gz"]
                    .iter()
                    .any(|x| name.ends_with(x))
                {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut texts = Vec::new();
        for p in &files {
            let bytes = std::fs::read(p).unwrap();
            let text = if p.extension().is_some_and(|x| x == "gz") {
                let mut s = String::new();
                std::io::Read::read_to_string(
                    &mut flate2::read::GzDecoder::new(&bytes[..]),
                    &mut s,
                )
                .unwrap();
                s
            } else {
                String::from_utf8(bytes).unwrap()
            };
            texts.push(text);
        }
        // The documents, as the manifest reader hands them over.
        let docs: Vec<&str> = texts
            .iter()
            .flat_map(|t| {
                crate::manifest::split::chunks(t)
                    .into_iter()
                    .map(move |c| &t[c.start..c.end])
            })
            .filter(|d| {
                d.lines()
                    .any(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("---"))
            })
            .collect();
        assert!(docs.len() >= 200, "{} YAML documents", docs.len());
        let read_whole = docs.iter().filter(|d| agrees(d)).count();
        for d in docs.iter().filter(|d| read(d, &opts()).is_none()) {
            eprintln!("DECLINED {:?} {:?}", &d[..d.len().min(60)], declined_at(d));
        }
        // Most real documents take the fast way (the rest hold folded scalars, anchors, …).
        eprintln!("{read_whole} of {} documents read", docs.len());
        assert!(
            read_whole * 10 >= docs.len() * 7,
            "{read_whole} of {} read",
            docs.len()
        );
        for t in &texts {
            agrees(t);
        }

        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let inserts = [
            ":", ": ", "#", " #", "-", "- ", "'", "\"", "{", "}", "[", "]", ",", " ", "  ", "\n",
            "|", "|-", ">", "&a ", "*a", "!", "?", "\\", "---\n", "~", "0", "\u{e9}", "\n- ",
        ];
        let (mut tried, mut read_mutants) = (0, 0);
        for t in docs.iter().filter(|t| t.len() <= 16 * 1024) {
            for _ in 0..40 {
                let mut m = t.to_string();
                for _ in 0..1 + rand(3) {
                    let lines: Vec<&str> = m.split_inclusive('\n').collect();
                    if lines.is_empty() {
                        break;
                    }
                    let i = rand(lines.len());
                    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                    match rand(7) {
                        0 => {
                            out.remove(i);
                        }
                        1 => out.insert(i, lines[i].to_string()),
                        2 => out[i] = format!("{}{}", " ".repeat(1 + rand(2)), lines[i]),
                        3 => out[i] = lines[i].strip_prefix(' ').unwrap_or(lines[i]).to_string(),
                        // A line broken in two, the rest indented anew (continuations).
                        4 => {
                            let l = &lines[i];
                            let mut at = rand(l.len() + 1);
                            while !l.is_char_boundary(at) {
                                at -= 1;
                            }
                            out[i] = format!("{}\n{}{}", &l[..at], " ".repeat(rand(9)), &l[at..]);
                        }
                        // Two lines joined.
                        5 if i + 1 < lines.len() => {
                            out[i] =
                                format!("{} {}", lines[i].trim_end_matches('\n'), lines[i + 1]);
                            out.remove(i + 1);
                        }
                        _ => {
                            let l = &lines[i];
                            let mut at = rand(l.len() + 1);
                            while !l.is_char_boundary(at) {
                                at -= 1;
                            }
                            let ins = inserts[rand(inserts.len())];
                            out[i] = format!("{}{}{}", &l[..at], ins, &l[at..]);
                        }
                    }
                    m = out.concat();
                }
                tried += 1;
                read_mutants += agrees(&m) as usize;
            }
        }
        eprintln!("{read_mutants} of {tried} mutants read");
        assert!(tried >= 8000, "{tried} mutants");
        // The mutants it reads are where the comparison bites.
        assert!(
            read_mutants * 8 >= tried,
            "{read_mutants} of {tried} mutants read"
        );
    }
}
