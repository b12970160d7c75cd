//! The block reader's scalars: plain (continued over the lines after it), single- and
//! double-quoted (folded over lines in a block), and literal block scalars.

use super::{Chomp, Decline, Lines, PlainEnd, R, Reader};
use crate::value::{Str, Value};

impl<'a> Reader<'a> {
    /// The plain scalar text from `pos` to the line's end or a comment (left at `pos`), and
    /// whether a comment follows it. A `: ` in it (a mapping where none may be) is declined.
    pub(super) fn plain_line(&mut self) -> R<(&'a str, bool)> {
        let start = self.pos;
        let (end, commented) = match self.plain_end(start) {
            PlainEnd::Colon(_) => return Err(Decline),
            PlainEnd::Comment(at) => (at, true),
            PlainEnd::Line(at) => (at, false),
        };
        let text = self.s[start..end].trim_end_matches(' ');
        self.pos = if commented { start + text.len() } else { end };
        Ok((text, commented))
    }

    /// The lines that continue a plain scalar (`pos` at the start of the line after its first):
    /// each indented more than `parent`, folded into one text (a line break between two lines
    /// is a space; each blank line between them, a line break). `None` when none follows.
    pub(super) fn continuation(&mut self, first: &str, parent: usize) -> R<Option<String>> {
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
    pub(super) fn literal(&mut self, parent: usize) -> R<(Value, Lines)> {
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

    /// A single-quoted scalar; over several lines only in a block (indented more than
    /// `parent`).
    pub(super) fn single_quoted(&mut self, parent: Option<usize>) -> R<Str> {
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
    pub(super) fn double_quoted(&mut self, parent: Option<usize>) -> R<Str> {
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
